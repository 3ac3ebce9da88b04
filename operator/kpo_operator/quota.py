"""Reconcile one TopicReplicaQuota: keep its throttles applied and report what is in effect.

A quota does not write configs itself: it asks the single
:class:`~kpo_operator.throttle_writer.ThrottleWriter` to sync, which merges it with
every other quota and every moving PartitionReassignment (the lowest rate wins on
a disagreement), repairs hand-made changes, and applies the result with
IncrementalAlterConfigs. The quota's status then shows the effective values on
the brokers and topics it names and conditions:

- ``Ready`` True (reason ``Applied``) once the configuration is written, False
  with ``Stalled`` True when Kafka refused a write (reason ``WriteFailed``), the
  spec is invalid (``InvalidSpec``, nothing written) or topics named in
  ``spec.topics.names`` do not exist (``TopicNotFound``: the message names them;
  what can be applied is, and a topic's lists are applied once it is created);
- ``RateConflict`` True when another object wants a different rate on one of its
  brokers; the message names the winner and why (the lowest rate wins);
- ``ForeignThrottle`` True when a value set outside the operator (e.g. by Kafka's
  ``kafka-reassign-partitions --throttle``) differs from what the quota wants on one
  of its brokers or topics: reason ``LeftAlone`` (the foreign value stays) or, when
  every such broker is claimed in ``spec.brokers``, ``Overridden`` (the operator
  replaced it and puts it back when released); the message names the key, the
  broker or topic and both values.

The Event recorded with the ``Ready`` or ``Stalled`` condition carries the
condition's reason and message, and a new one is recorded whenever they change.

Deleting a quota (finalizer) syncs without it, which removes exactly the configs
that only it wanted.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from kpo_kafka.acls import AUTHORIZATION_ERRORS, refusal
from kpo_kafka.admin_types import ApiError, ConfigResource, KafkaAdminError
from kpo_kafka.specs import SpecError, TopicReplicaQuotaSpec
from kpo_kafka.states import ConditionType
from kpo_operator.conditions import Condition, quota_conditions, stamp_conditions
from kpo_operator.refusals import AUTHORIZATION_FAILED, reason_of, record_refusal
from kpo_operator.resources import TOPIC_REPLICA_QUOTA
from kpo_operator.status_models import BrokerThrottleStatus, QuotaStatus, TopicThrottleStatus
from kpo_operator.store import NORMAL, WARNING, Object, ObjectStore
from kpo_operator.throttle_writer import SyncResult, ThrottleWriter, source_of, wants
from kpo_operator.throttles import (
    FOLLOWER_RATE,
    FOLLOWER_REPLICAS,
    LEADER_RATE,
    LEADER_REPLICAS,
    ThrottleConflict,
)

RATE_CONFLICT = "RateConflict"
"""Condition type set True while another object wants a different rate."""

FOREIGN_THROTTLE = "ForeignThrottle"
"""Condition type set True while a value set outside the operator differs from the quota's."""

MAX_STATUS_TOPICS = 500
"""At most this many topics are listed in ``status.topics`` (an object must stay small)."""

MAX_NAMED_MISSING = 20
"""At most this many missing topics are named in a condition message (the rest are counted)."""


class QuotaReconciler:
    """Drives TopicReplicaQuota objects through the throttle writer.

    Args:
        store: The Kubernetes API.
        writer: The single throttle writer.
        now: Wall-clock time for condition timestamps.

    Errors: ``KafkaAdminError`` and ``ObjectStoreError`` propagate; the caller retries.
    """

    def __init__(
        self,
        store: ObjectStore,
        writer: ThrottleWriter,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.store = store
        self.writer = writer
        self.now = now

    def reconcile(self, namespace: str, name: str, max_age_s: float | None = None) -> None:
        """Sync the throttles and write the quota's status.

        Args:
            namespace: The object's namespace.
            name: The object's name.
            max_age_s: Reuse a sync younger than this (timers); ``None`` syncs now.
        """
        obj = self.store.get(TOPIC_REPLICA_QUOTA, namespace, name)
        if obj is None or obj["metadata"].get("deletionTimestamp"):
            return
        generation = int(obj["metadata"].get("generation") or 1)
        try:
            spec = TopicReplicaQuotaSpec.from_object(obj)
        except SpecError as exc:
            message = "; ".join(exc.errors)
            self._write(
                obj,
                generation,
                quota_conditions(ConditionType.STALLED, "InvalidSpec", message),
                None,
            )
            return
        source = source_of(TOPIC_REPLICA_QUOTA, obj)
        try:
            result = self.writer.sync(max_age_s=max_age_s, observed=(source, generation))
        except KafkaAdminError as exc:
            if (reason := reason_of(exc)) is not None:
                record_refusal(self.store, TOPIC_REPLICA_QUOTA, obj, reason, str(exc), self.now())
            raise
        self._report(obj, spec, generation, result)

    def finalize(self, namespace: str, name: str) -> bool:
        """Remove what only this quota set; returns ``True`` when the finalizer may go."""
        obj = self.store.get(TOPIC_REPLICA_QUOTA, namespace, name)
        if obj is None:
            return True
        result = self.writer.sync({source_of(TOPIC_REPLICA_QUOTA, obj): None})
        if not result.errors:
            self.store.event(obj, NORMAL, "ThrottlesRemoved", "configs only this quota set removed")
        return not result.errors

    def _report(
        self, obj: Object, spec: TopicReplicaQuotaSpec, generation: int, result: SyncResult
    ) -> None:
        source = source_of(TOPIC_REPLICA_QUOTA, obj)
        mine = result.contributions.get(source)
        brokers: list[BrokerThrottleStatus] = []
        topics: list[TopicThrottleStatus] = []
        view = result.snapshot.view if result.snapshot else None
        absent: list[str] = []
        missing = sorted(
            t for t in spec.topics.names or () if view is not None and t not in view.topics
        )
        if mine is not None:
            for broker in sorted(mine.broker_rates):
                if view is not None and broker not in view.live_brokers:
                    absent.append(f"broker {broker}")
                    continue
                rates = result.effective.brokers.get(broker, {})
                brokers.append(
                    BrokerThrottleStatus(
                        broker_id=broker,
                        leader_replication_throttled_rate=rates.get(LEADER_RATE),
                        follower_replication_throttled_rate=rates.get(FOLLOWER_RATE),
                    )
                )
            for topic in sorted(mine.topic_replicas)[:MAX_STATUS_TOPICS]:
                if view is not None and topic not in view.topics:
                    continue
                lists = result.effective.topics.get(topic, {})
                leader, follower = (
                    None if (found := lists.get(key)) is None else found.render()
                    for key in (LEADER_REPLICAS, FOLLOWER_REPLICAS)
                )
                topics.append(
                    TopicThrottleStatus(
                        topic=topic,
                        leader_replication_throttled_replicas=leader,
                        follower_replication_throttled_replicas=follower,
                    )
                )
        names = {str(b.broker_id) for b in brokers} | {str(t.topic) for t in topics}
        errors = {r: e for r, e in result.errors.items() if r.name in names}
        conflicts = [c for c in result.effective.conflicts if _involves(c, source)]
        if errors:
            text = "; ".join(
                _write_error(r, e) for r, e in sorted(errors.items(), key=lambda i: i[0].name)
            )
            refused = all(e.code in AUTHORIZATION_ERRORS for e in errors.values())
            reason = AUTHORIZATION_FAILED if refused else "WriteFailed"
            desired = quota_conditions(ConditionType.STALLED, reason, text)
        else:
            text = f"applied on {len(brokers)} brokers and {len(topics)} topics"
            if absent:
                text += "; not applied (absent, applied when it appears): " + ", ".join(absent)
            if missing:
                named = ", ".join(missing[:MAX_NAMED_MISSING])
                if len(missing) > MAX_NAMED_MISSING:
                    named += f" and {len(missing) - MAX_NAMED_MISSING} more"
                text = (
                    f"topics not found: {named} (their lists are applied when they are "
                    f"created); {text}"
                )
                desired = quota_conditions(ConditionType.STALLED, "TopicNotFound", text)
            else:
                desired = quota_conditions(ConditionType.READY, "Applied", text)
        lost = [c for c in conflicts if c.winner != source]
        rate_conflict = (
            Condition(
                RATE_CONFLICT, "True", "LowestRateWins", "; ".join(c.message for c in conflicts)
            )
            if conflicts
            else Condition(RATE_CONFLICT, "False", "NoConflict", "")
        )
        desired += [rate_conflict, _foreign_condition(result, source)]
        old_conflict = QuotaStatus.from_status(obj.get("status")).condition(RATE_CONFLICT)
        said = old_conflict.message if old_conflict is not None else None
        if lost and said != rate_conflict.message:
            self.store.event(obj, WARNING, "RateConflict", rate_conflict.message)
        self._write(obj, generation, desired, (brokers, topics))

    def _write(
        self,
        obj: Object,
        generation: int,
        desired: list[Condition],
        effective: tuple[list[BrokerThrottleStatus], list[TopicThrottleStatus]] | None,
    ) -> None:
        """Write the conditions and (``effective``) the brokers' and topics' values in effect.

        ``effective`` ``None`` keeps ``status.brokers`` and ``status.topics`` as they are.
        """
        old = QuotaStatus.from_status(obj.get("status"))
        new = old.model_copy()
        if effective is not None:
            new.brokers, new.topics = effective
        new.observed_generation = generation
        new.set_conditions(stamp_conditions(old.condition_dicts(), desired, generation, self.now()))
        body = new.to_status()
        if body == old.to_status():
            return
        meta = obj["metadata"]
        self.store.patch_status(TOPIC_REPLICA_QUOTA, meta["namespace"], meta["name"], body)
        settled = (ConditionType.READY, ConditionType.STALLED)
        ready = next(c for c in desired if c.type in settled and c.status == "True")
        was = old.condition(ready.type)
        said = (was.status, was.reason, was.message) if was is not None else (None, None, None)
        if said != ("True", ready.reason, ready.message):
            kind = NORMAL if ready.type == ConditionType.READY else WARNING
            self.store.event(obj, kind, ready.reason, ready.message)


def _foreign_condition(result: SyncResult, source: str) -> Condition:
    """Return the ``ForeignThrottle`` condition of ``source`` (the Events are the writer's)."""
    mine = result.contributions.get(source)
    found = [
        f
        for f in result.foreign
        if mine is not None and wants(mine, f.resource_type, f.resource_name, f.key)
    ]
    if not found:
        return Condition(FOREIGN_THROTTLE, "False", "NoForeignThrottle", "")
    reason = "Overridden" if all(f.overridden for f in found) else "LeftAlone"
    return Condition(FOREIGN_THROTTLE, "True", reason, "; ".join(f.message for f in found))


def _write_error(resource: ConfigResource, error: ApiError) -> str:
    """Describe a refused config write; a missing ACL names the operation and resource."""
    if error.code in AUTHORIZATION_ERRORS:
        names = (resource.name,) if error.code == 29 else ()
        return (
            f"{refusal('IncrementalAlterConfigs', error.code, names)} ({error.name}, {error.code})"
        )
    return f"{resource.kind} {resource.name}: {error}"


def _involves(conflict: ThrottleConflict, source: str) -> bool:
    return conflict.winner == source or any(s == source for s, _ in conflict.others)
