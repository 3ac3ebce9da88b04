"""Status of KafkaCluster objects, and what an object says when its cluster cannot be used.

:class:`KafkaClusterReconciler` reads a KafkaCluster (and its Secrets), connects or
reconnects through the :class:`~kpo_operator.cluster_registry.ClusterRegistry` and
writes what the cluster answers: ``clusterId``, ``controllerId``, ``brokerCount`` (live
brokers) and ``fencedBrokers`` (registered but fenced, KIP-1073; Kafka 4.0+ KRaft)
(DescribeCluster), ``kafkaVersion`` (inferred from ApiVersions: Kafka has no API
naming its release) and two conditions:

=============== ============================================= ==========================
condition       True                                          False (reason)
=============== ============================================= ==========================
``Reachable``   the brokers answered (``Connected``, also     ``Unreachable``; Unknown
                when they refused the credentials)            before any attempt
                                                              (``InvalidConfig``,
                                                              ``SecretNotFound``)
``Ready``       DescribeCluster answered (``Connected``)      ``InvalidConfig``,
                                                              ``SecretNotFound``,
                                                              ``Unreachable``,
                                                              ``AuthenticationFailed``,
                                                              ``AuthorizationFailed``
=============== ============================================= ==========================

A Warning (or, back to Ready, Normal) Event is recorded when ``Ready`` changes reason.
Deleting a KafkaCluster waits (finalizer) while a TopicReplicaQuota or an unfinished
PartitionReassignment names it, so that their throttles can still be removed; then its
empty ledger is discarded (one that still owns something is kept).

:func:`report_unavailable` sets ``Ready`` False / ``Stalled`` True with the reason on a
PartitionReassignment or TopicReplicaQuota whose cluster is missing, unusable or
unreachable; nothing is changed in Kafka then.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from kpo_kafka.admin_types import (
    KafkaAdminError,
    KafkaAuthenticationError,
    KafkaAuthorizationError,
)
from kpo_kafka.states import FINAL_PHASES, ConditionType
from kpo_operator.cluster_registry import ClusterRegistry
from kpo_operator.conditions import Condition, stamp_conditions
from kpo_operator.connections import ClusterUnavailable, cluster_key_of
from kpo_operator.progress import format_time
from kpo_operator.resources import (
    KAFKA_CLUSTER,
    PARTITION_REASSIGNMENT,
    TOPIC_REPLICA_QUOTA,
    ResourceKind,
)
from kpo_operator.status_models import KafkaClusterStatus
from kpo_operator.store import NORMAL, WARNING, Object, ObjectStore, object_key

REACHABLE = "Reachable"
"""KafkaCluster condition: the brokers answered."""
CONNECTED = "Connected"
UNREACHABLE = "Unreachable"
AUTHENTICATION_FAILED = "AuthenticationFailed"
AUTHORIZATION_FAILED = "AuthorizationFailed"

BOOTSTRAP_TIMEOUT = "Unable to bootstrap"
"""How kafka-python reports that no bootstrap broker could be used."""
SASL_HINT = (
    " (or the brokers refused the SASL credentials: kafka-python reports those as a"
    " bootstrap timeout; check the user and password Secrets)"
)
"""Added to an unreachable SASL cluster's message: the two cannot be told apart."""

MAX_NAMED_USERS = 10
"""At most this many referencing objects are named in a message."""


class ClusterInUse(Exception):  # noqa: N818 - a state
    """A KafkaCluster cannot go yet: objects still name it (the message lists them)."""


class KafkaClusterReconciler:
    """Keeps KafkaCluster connections and statuses current.

    Args:
        store: The Kubernetes API (all namespaces the operator watches).
        registry: The per-cluster runtimes.
        now: Wall-clock time for timestamps.
    """

    def __init__(
        self,
        store: ObjectStore,
        registry: ClusterRegistry,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.store = store
        self.registry = registry
        self.now = now

    def reconcile(self, namespace: str, name: str) -> None:
        """Connect (or reconnect) the KafkaCluster, read the cluster and write the status.

        Errors of Kafka end up in the status, not raised; ``ObjectStoreError`` propagates.
        """
        obj = self.store.get(KAFKA_CLUSTER, namespace, name)
        if obj is None or obj["metadata"].get("deletionTimestamp"):
            return
        found: dict[str, Any] = {}
        try:
            runtime = self.registry.connect(obj)
        except ClusterUnavailable as exc:
            reachable = Condition(REACHABLE, "Unknown", exc.reason, "not tried: " + exc.message)
            ready = Condition(ConditionType.READY, "False", exc.reason, exc.message)
            self._write(obj, [reachable, ready], found)
            return
        try:
            info = runtime.admin.describe_cluster()
            version = runtime.admin.kafka_version(sorted(info.brokers))
        except KafkaAuthenticationError as exc:
            reachable = Condition(REACHABLE, "True", CONNECTED, "the brokers answered")
            ready = Condition(ConditionType.READY, "False", AUTHENTICATION_FAILED, str(exc))
        except KafkaAuthorizationError as exc:
            reachable = Condition(REACHABLE, "True", CONNECTED, "the brokers answered")
            ready = Condition(ConditionType.READY, "False", AUTHORIZATION_FAILED, str(exc))
        except KafkaAdminError as exc:
            text = str(exc)
            sasl = runtime.connection is not None and runtime.connection.security.protocol.uses_sasl
            if sasl and BOOTSTRAP_TIMEOUT in text:
                text += SASL_HINT
            reachable = Condition(REACHABLE, "False", UNREACHABLE, text)
            ready = Condition(ConditionType.READY, "False", UNREACHABLE, text)
        else:
            found = {
                "clusterId": info.cluster_id,
                "controllerId": info.controller_id,
                "brokerCount": len(info.brokers),
                "fencedBrokers": sorted(info.fenced_brokers),
                "kafkaVersion": version,
            }
            text = f"{len(info.brokers)} brokers, controller {info.controller_id}"
            if info.fenced_brokers:
                fenced = ", ".join(str(b) for b in sorted(info.fenced_brokers))
                text += f"; fenced (registered, not live): {fenced}"
            reachable = Condition(REACHABLE, "True", CONNECTED, text)
            ready = Condition(ConditionType.READY, "True", CONNECTED, text)
        self._write(obj, [reachable, ready], found)

    def finalize(self, namespace: str, name: str) -> None:
        """Let a deleted KafkaCluster go once nothing that may still act on it names it.

        Raises:
            ClusterInUse: TopicReplicaQuotas or unfinished PartitionReassignments name it.
        """
        users = [
            f"{kind.kind} {object_key(o)}"
            for kind in (TOPIC_REPLICA_QUOTA, PARTITION_REASSIGNMENT)
            for o in self.store.list(kind)
            if cluster_key_of(o) == (namespace, name)
            and (
                kind is TOPIC_REPLICA_QUOTA
                or (o.get("status") or {}).get("phase") not in FINAL_PHASES
            )
        ]
        if users:
            named = ", ".join(users[:MAX_NAMED_USERS])
            if len(users) > MAX_NAMED_USERS:
                named += f" and {len(users) - MAX_NAMED_USERS} more"
            obj = self.store.get(KAFKA_CLUSTER, namespace, name)
            message = f"still used by {named}; delete those first"
            if obj is not None:
                old = _condition(obj, ConditionType.READY)
                if old.get("reason") != "InUse" or old.get("message") != message:
                    self.store.event(obj, WARNING, "InUse", message)
                    ready = Condition(ConditionType.READY, "False", "InUse", message)
                    self._write(obj, [ready], {}, record=False)
            raise ClusterInUse(message)
        runtime = self.registry.known(namespace, name)
        if runtime is not None:
            ledger = runtime.writer.ledger_store.load()
            if ledger is not None and not ledger.brokers and not ledger.topics:
                runtime.writer.ledger_store.discard()  # an owned entry left is kept
        self.registry.drop(namespace, name)

    def _write(
        self, obj: Object, desired: list[Condition], found: Mapping[str, Any], record: bool = True
    ) -> None:
        """Write what the cluster answered (``found``, camelCase keys) and the conditions.

        Without ``found`` (the cluster did not answer) and with ``record``, the values read
        before are removed: they are unknown now.
        """
        generation = int(obj["metadata"].get("generation") or 1)
        old = KafkaClusterStatus.from_status(obj.get("status"))
        new = old.model_copy()
        removed: dict[str, None] = {}
        for key, field in _ANSWERED.items():
            if key not in found and (found or not record):
                continue
            value = found.get(key)
            setattr(new, field, value)
            if value is None:
                removed[key] = None  # merge patch: removed, the value is unknown now
        new.observed_generation = generation
        new.last_refresh_time = format_time(self.now())
        new.set_conditions(stamp_conditions(old.condition_dicts(), desired, generation, self.now()))
        meta = obj["metadata"]
        body = {**new.to_status(), **removed}
        self.store.patch_status(KAFKA_CLUSTER, meta["namespace"], meta["name"], body)
        ready = next((c for c in desired if c.type == ConditionType.READY), None)
        if not record or ready is None:
            return
        was = old.condition(ConditionType.READY)
        said = (was.status, was.reason) if was is not None else (None, None)
        if said != (ready.status, ready.reason):
            kind = NORMAL if ready.status == "True" else WARNING
            self.store.event(obj, kind, ready.reason, ready.message)


_ANSWERED = {
    "clusterId": "cluster_id",
    "controllerId": "controller_id",
    "brokerCount": "broker_count",
    "fencedBrokers": "fenced_brokers",
    "kafkaVersion": "kafka_version",
}
"""``status`` keys of what the cluster answers -> :class:`KafkaClusterStatus` fields."""


def _condition(obj: Mapping[str, Any], type_: str) -> dict[str, Any]:
    conditions = (obj.get("status") or {}).get("conditions") or []
    found: dict[str, Any] = next((c for c in conditions if c.get("type") == type_), {})
    return found


def report_unavailable(
    store: ObjectStore, kind: ResourceKind, obj: Object, reason: str, message: str, now: datetime
) -> None:
    """Say on ``obj`` that its cluster cannot be used: ``Ready`` False, ``Stalled`` True.

    Only the conditions (and a PartitionReassignment's ``message``) change, not the
    phase or ``observedGeneration``: the next step that reaches the cluster sets them
    again. A Warning Event with the reason is recorded when the message changes.
    """
    generation = int(obj["metadata"].get("generation") or 1)
    status: dict[str, Any] = dict(obj.get("status") or {})
    desired = [
        Condition(ConditionType.READY, "False", reason, message),
        Condition(ConditionType.RECONCILING, "False", reason, message),
        Condition(ConditionType.STALLED, "True", reason, message),
    ]
    was = _condition(obj, ConditionType.STALLED)
    new: dict[str, Any] = {
        "conditions": stamp_conditions(status.get("conditions") or [], desired, generation, now)
    }
    if kind is PARTITION_REASSIGNMENT:
        new["message"] = message
    if all(status.get(k) == v for k, v in new.items()):
        return
    meta = obj["metadata"]
    store.patch_status(kind, meta["namespace"], meta["name"], new)
    if (was.get("status"), was.get("reason"), was.get("message")) != ("True", reason, message):
        store.event(obj, WARNING, reason, message)
