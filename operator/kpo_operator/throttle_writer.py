"""The one writer of every ``*.replication.throttled.*`` config in the cluster (I/O edge).

Every reconciler that wants a throttle changed calls :meth:`ThrottleWriter.sync`.
A sync recomputes the whole effective configuration from *all* objects, so no two
writers can fight and removing one object removes exactly what it alone set:

1. list every TopicReplicaQuota (unless being deleted) and every
   PartitionReassignment whose status is Moving or Cancelling, in the watched
   namespaces, and compute their contributions (a reassignment's from the targets
   and throttle it *accepted*, recorded in its status, not from an unaccepted edit)
   (:func:`~kpo_operator.throttles.quota_contribution`,
   :func:`~kpo_operator.throttles.reassignment_contribution`) over a fresh snapshot
   of the cluster; a caller's ``overrides`` replace (or, with ``None``, drop) the
   contribution of the objects it is changing right now;
2. :func:`~kpo_operator.throttles.merge` them (lowest rate wins);
3. read the owned keys back with DescribeConfigs from every live broker and topic,
   :func:`~kpo_operator.throttles.diff`, and apply the difference with
   IncrementalAlterConfigs (KIP-339).

A difference found while the wanted configuration is the one last written means
someone changed a config by hand: it is put back and a Warning Event
``ThrottleDriftRepaired`` is recorded on each object that wants that key.
Calls are serialised by a lock: at most one sync runs at a time.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kpo_kafka.admin import KafkaAdmin
from kpo_kafka.admin_types import ApiError, ConfigResource, ConfigResourceKind
from kpo_kafka.specs import SpecError, TopicReplicaQuotaSpec
from kpo_operator.cluster import ClusterSnapshot, read_cluster
from kpo_operator.reassignment_status import accepted_spec
from kpo_operator.resources import PARTITION_REASSIGNMENT, TOPIC_REPLICA_QUOTA, ResourceKind
from kpo_operator.states import THROTTLING_PHASES
from kpo_operator.store import WARNING, Object, ObjectStore, object_key
from kpo_operator.throttles import (
    BROKER_KEYS,
    TOPIC_KEYS,
    ConfigChange,
    Contribution,
    EffectiveThrottles,
    OpType,
    ThrottleConfigs,
    ThrottleFormatError,
    diff,
    merge,
    quota_contribution,
    reassignment_contribution,
)

logger = logging.getLogger(__name__)


def source_of(kind: ResourceKind, obj: Mapping[str, object]) -> str:
    """Return the contribution name of an object, e.g. ``TopicReplicaQuota ns/name``."""
    return f"{kind.kind} {object_key(obj)}"


@dataclass
class SyncResult:
    """What one sync found and did.

    Attributes:
        effective: The merged configuration now wanted (with rate conflicts).
        contributions: source -> what that object contributes.
        applied: The IncrementalAlterConfigs operations sent.
        drift: Those of ``applied`` that repaired a hand-made change.
        errors: Resources whose update failed, with Kafka's error.
        snapshot: The cluster snapshot the contributions were computed on.
    """

    effective: EffectiveThrottles
    contributions: dict[str, Contribution]
    applied: list[ConfigChange] = field(default_factory=list)
    drift: list[ConfigChange] = field(default_factory=list)
    errors: dict[ConfigResource, ApiError] = field(default_factory=dict)
    snapshot: ClusterSnapshot | None = None


class ThrottleWriter:
    """Keeps the cluster's throttle configs equal to the merge of all contributions.

    Args:
        admin: The Admin API client.
        store: The custom resources (to list contributors and record drift Events).
        clock: Monotonic seconds, for ``max_age_s``.

    Errors of :meth:`sync`: ``KafkaAdminError`` from the Admin API and
    ``ObjectStoreError`` from the Kubernetes API propagate (the caller retries).
    """

    def __init__(
        self, admin: KafkaAdmin, store: ObjectStore, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.admin = admin
        self.store = store
        self.clock = clock
        self._lock = threading.Lock()
        self._last_wanted: ThrottleConfigs | None = None
        self._last: tuple[float, SyncResult] | None = None

    def sync(
        self,
        overrides: Mapping[str, Contribution | None] | None = None,
        max_age_s: float | None = None,
    ) -> SyncResult:
        """Recompute and apply the effective throttles.

        Args:
            overrides: source -> contribution to use instead of the stored object's
                (``None`` drops that source), for an object whose status is about to change.
            max_age_s: Without overrides, reuse a sync younger than this many seconds.
        """
        with self._lock:
            if not overrides and max_age_s is not None and self._last is not None:
                at, last = self._last
                if self.clock() - at < max_age_s:
                    return last
            result = self._sync(dict(overrides or {}))
            self._last = (self.clock(), result)
            return result

    def _contributors(
        self, snapshot: ClusterSnapshot
    ) -> tuple[dict[str, Contribution], dict[str, Object]]:
        contributions: dict[str, Contribution] = {}
        objects: dict[str, Object] = {}
        for obj in self.store.list(TOPIC_REPLICA_QUOTA):
            if obj.get("metadata", {}).get("deletionTimestamp"):
                continue
            source = source_of(TOPIC_REPLICA_QUOTA, obj)
            try:
                spec = TopicReplicaQuotaSpec.from_object(obj)
                contributions[source] = quota_contribution(source, spec, snapshot.view)
            except (SpecError, ThrottleFormatError) as exc:
                logger.warning("%s contributes nothing: %s", source, exc)
                continue
            objects[source] = obj
        for obj in self.store.list(PARTITION_REASSIGNMENT):
            if (obj.get("status") or {}).get("phase") not in THROTTLING_PHASES:
                continue
            source = source_of(PARTITION_REASSIGNMENT, obj)
            moving = accepted_spec(obj.get("status") or {})
            if moving is None:
                continue
            contributions[source] = reassignment_contribution(source, moving, snapshot.view)
            objects[source] = obj
        return contributions, objects

    def _sync(self, overrides: dict[str, Contribution | None]) -> SyncResult:
        snapshot = read_cluster(self.admin)
        contributions, objects = self._contributors(snapshot)
        for source, contribution in overrides.items():
            if contribution is None:
                contributions.pop(source, None)
            else:
                contributions[source] = contribution
        effective = merge(contributions[s] for s in sorted(contributions))
        brokers = sorted(snapshot.view.live_brokers)
        topics = sorted(snapshot.view.topics)
        described = self.admin.describe_configs(brokers, topics, keys=BROKER_KEYS + TOPIC_KEYS)
        current = ThrottleConfigs()
        for resource, values in described.items():
            if resource.kind is ConfigResourceKind.BROKER:
                current.brokers[int(resource.name)] = dict(values)
            else:
                current.topics[resource.name] = dict(values)
        live = set(brokers)
        wanted = EffectiveThrottles(
            {b: r for b, r in effective.brokers.items() if b in live},
            {t: r for t, r in effective.topics.items() if t in snapshot.view.topics},
            effective.conflicts,
        )
        changes = diff(wanted, current)
        result = SyncResult(effective, contributions, snapshot=snapshot)
        if changes:
            grouped: dict[ConfigResource, dict[str, str | None]] = {}
            for change in changes:
                resource = ConfigResource(change.resource_type, change.resource_name)
                value = change.value if change.op is OpType.SET else None
                grouped.setdefault(resource, {})[change.key] = value
            answers = self.admin.incremental_alter_configs(grouped)
            result.errors = {r: e for r, e in answers.items() if e is not None}
            failed = set(result.errors)
            result.applied = [
                c for c in changes if ConfigResource(c.resource_type, c.resource_name) not in failed
            ]
            for change in result.applied:
                logger.info(
                    "throttle %s %s %s=%s",
                    change.resource_type,
                    change.resource_name,
                    change.key,
                    change.value if change.op is OpType.SET else "<deleted>",
                )
        rendered = wanted.render()
        if changes and self._last_wanted == rendered:
            result.drift = list(result.applied)
            self._report_drift(result.drift, contributions, objects)
        if not result.errors:
            self._last_wanted = rendered
        return result

    def _report_drift(
        self,
        drift: list[ConfigChange],
        contributions: Mapping[str, Contribution],
        objects: Mapping[str, Object],
    ) -> None:
        for source, obj in objects.items():
            contribution = contributions.get(source)
            if contribution is None:
                continue
            mine = [c for c in drift if _wants(contribution, c)]
            if mine:
                fixed = ", ".join(f"{c.resource_type} {c.resource_name} {c.key}" for c in mine[:10])
                self.store.event(
                    obj,
                    WARNING,
                    "ThrottleDriftRepaired",
                    f"throttle configs changed outside the operator were put back: {fixed}",
                )


def _wants(contribution: Contribution, change: ConfigChange) -> bool:
    if change.resource_type is ConfigResourceKind.BROKER:
        keys = contribution.broker_rates.get(int(change.resource_name), {})
        return change.key in BROKER_KEYS and change.key in keys
    lists = contribution.topic_replicas.get(change.resource_name, {})
    return change.key in TOPIC_KEYS and change.key in lists
