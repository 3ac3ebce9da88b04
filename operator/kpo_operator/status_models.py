"""The ``status`` of each custom resource, typed: read from and written to its camelCase dict.

The API server keeps a status as JSON with the CRDs' camelCase keys (``crds/``). Each
resource has one model here, field for field with its CRD's status schema:

================================ ===============================================
model                            resource
================================ ===============================================
:class:`ReassignmentStatus`      PartitionReassignment (``kubectl get pr``)
:class:`QuotaStatus`             TopicReplicaQuota
:class:`KafkaClusterStatus`      KafkaCluster
:class:`BalancingPolicyStatus`   BalancingPolicy (``kubectl get bp``)
================================ ===============================================

Reading (``from_status``) takes the stored dict as it is: every field is optional (a new
object has no status), and keys a model does not name are kept (``extra="allow"``), so a
status written by another version of the operator passes through unchanged. Writing
(``to_status``) gives the dict back: the fields that are set, ``None`` ones left out, empty
strings and lists kept as they were. ``from_status(d).to_status() == d`` for every status
the operator writes (with no ``None`` values, as the API server stores them).

``status.partitions`` of a PartitionReassignment (up to 2,000 entries) is kept as the list
written, not validated entry by entry at every step: its entries are typed by
:class:`~kpo_operator.progress.PartitionStatus`, which parses them (the reconciler parses
a list again only when it changed) and writes them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field, field_serializer
from pydantic.alias_generators import to_camel

from kpo_kafka.states import Phase


class _StatusModel(BaseModel):
    """Shared behaviour: camelCase keys, unknown keys kept, ``None`` fields not written."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow")

    @classmethod
    def from_status(cls, raw: Mapping[str, Any] | None) -> Self:
        """Read a stored status dict (``None`` or ``{}``: nothing written yet).

        ``None`` values read as absent (a JSON merge patch removes such keys).

        Raises:
            pydantic.ValidationError: A field has a type the CRD does not allow.
        """
        return cls.model_validate({k: v for k, v in (raw or {}).items() if v is not None})

    def to_status(self) -> dict[str, Any]:
        """Return the status dict (camelCase keys; ``None`` fields left out)."""
        return self.model_dump(by_alias=True, exclude_none=True)

    def replace_with(self, other: Self) -> None:
        """Make this status ``other``'s, in place (the holders of this object see the write)."""
        for name in type(self).model_fields:
            setattr(self, name, getattr(other, name))
        self.__pydantic_extra__ = dict(other.__pydantic_extra__ or {})


class ConditionEntry(_StatusModel):
    """One ``status.conditions[]`` entry (metav1.Condition), of any of the resources.

    Attributes:
        type: ``Ready``, ``Reconciling``, ``Stalled``, ``Completed``, ``Cordoned``...
        status: ``"True"``, ``"False"`` or ``"Unknown"``.
        reason: CamelCase machine-readable reason.
        message: Human-readable detail.
        observed_generation: The spec generation the condition reflects.
        last_transition_time: RFC 3339 time of the last change of ``status``.
    """

    type: str | None = None
    status: str | None = None
    reason: str | None = None
    message: str | None = None
    observed_generation: int | None = None
    last_transition_time: str | None = None


class _WithConditions(_StatusModel):
    """A status with ``conditions`` (all three resources)."""

    observed_generation: int | None = None
    conditions: list[ConditionEntry] | None = None

    def condition(self, type_: str) -> ConditionEntry | None:
        """Return the condition of type ``type_``, ``None`` when there is none."""
        return next((c for c in self.conditions or () if c.type == type_), None)

    def condition_dicts(self) -> list[dict[str, Any]]:
        """Return ``conditions`` as dicts (:func:`~kpo_operator.conditions.stamp_conditions`'s)."""
        return [c.to_status() for c in self.conditions or ()]

    def set_conditions(self, conditions: Sequence[Mapping[str, Any]]) -> None:
        """Replace ``conditions`` with stamped dicts."""
        self.conditions = [ConditionEntry.from_status(c) for c in conditions]


class ReassignmentThrottle(_StatusModel):
    """``status.throttle``: the accepted ``spec.throttle``, bytes/s (KIP-73).

    Attributes:
        replication_rate: ``leader/follower.replication.throttled.rate`` of the move.
        log_dir_move_rate: ``replica.alter.log.dirs.io.max.bytes.per.second``.
    """

    replication_rate: int | None = None
    log_dir_move_rate: int | None = None


class CordonStatus(_StatusModel):
    """``status.cordon``: the brokers a reassignment drains and their ``cordoned.log.dirs``.

    Attributes:
        drained_brokers: Broker ids the accepted targets take every replica away from.
        cordoned_brokers: Those the operator cordoned (KIP-1066).
        message: What became of the cordons.
    """

    drained_brokers: list[int] | None = None
    cordoned_brokers: list[int] | None = None
    message: str | None = None

    @property
    def drained(self) -> frozenset[int]:
        """The drained broker ids (empty when none are recorded)."""
        return frozenset(self.drained_brokers or ())


class TotalsStatus(_StatusModel):
    """``status.totals`` of a PartitionReassignment.

    Attributes:
        partitions: Accepted partitions.
        partitions_done: Those Completed.
        bytes_done: Bytes copied to adding replicas.
        bytes_total: Bytes to copy.
        progress: ``bytes_done / bytes_total`` as a whole percentage ("42%").
        rate: Recent replication rate, bytes/s, when known.
    """

    partitions: int | None = None
    partitions_done: int | None = None
    bytes_done: int | None = None
    bytes_total: int | None = None
    progress: str | None = None
    rate: int | None = None


class ReassignmentStatus(_WithConditions):
    """``status`` of a PartitionReassignment (``crds/kpo.dev_partitionreassignments.yaml``).

    Attributes:
        phase: The phase (``None``: no step wrote one yet); follows
            :data:`~kpo_kafka.states.PHASE_VALID_PREVIOUS`.
        message: What the last step did or why it stopped.
        observed_generation: The spec generation the status reflects.
        start_time: When the targets were first accepted (RFC 3339).
        completion_time: When it ended (Completed, Cancelled or Failed after moving).
        eta: Predicted completion time (RFC 3339).
        predicted_duration: Time left at the throttle, ``"3m20s"``.
        throttle: The accepted throttle.
        cordon: The drained brokers and their cordons.
        conditions: kstatus conditions.
        partitions_update_time: When ``partitions`` were last written (RFC 3339).
        partitions: The ``status.partitions`` entries, as written (see the module docstring).
        totals: Sums over the partitions.
    """

    phase: Phase | None = None
    message: str | None = None
    start_time: str | None = None
    completion_time: str | None = None
    eta: str | None = None
    predicted_duration: str | None = None
    throttle: ReassignmentThrottle | None = None
    cordon: CordonStatus | None = None
    partitions_update_time: str | None = None
    partitions: list[Any] | None = Field(default=None)
    totals: TotalsStatus | None = None

    @field_serializer("phase")
    def _phase_text(self, phase: Phase | None) -> str | None:
        return None if phase is None else phase.value

    def to_status(self) -> dict[str, Any]:
        """Return the status dict; ``partitions`` is the very list held, not a copy."""
        out = self.model_dump(by_alias=True, exclude_none=True, exclude={"partitions"})
        if self.partitions is not None:
            out["partitions"] = self.partitions
        return out

    @property
    def replication_rate(self) -> int | None:
        """The accepted ``replicationRate``, bytes/s (``None``: unthrottled)."""
        return self.throttle.replication_rate if self.throttle else None

    @property
    def drained(self) -> frozenset[int]:
        """The brokers the accepted targets drain (``status.cordon.drainedBrokers``)."""
        return self.cordon.drained if self.cordon else frozenset()


class BrokerThrottleStatus(_StatusModel):
    """One ``status.brokers[]`` entry of a TopicReplicaQuota: the rates in effect, bytes/s.

    Attributes:
        broker_id: The broker.
        leader_replication_throttled_rate: ``leader.replication.throttled.rate``.
        follower_replication_throttled_rate: ``follower.replication.throttled.rate``.
    """

    broker_id: int | None = None
    leader_replication_throttled_rate: int | None = None
    follower_replication_throttled_rate: int | None = None


class TopicThrottleStatus(_StatusModel):
    """One ``status.topics[]`` entry of a TopicReplicaQuota: the replica lists in effect.

    Attributes:
        topic: The topic.
        leader_replication_throttled_replicas: ``leader.replication.throttled.replicas``.
        follower_replication_throttled_replicas: ``follower.replication.throttled.replicas``.
    """

    topic: str | None = None
    leader_replication_throttled_replicas: str | None = None
    follower_replication_throttled_replicas: str | None = None


class QuotaStatus(_WithConditions):
    """``status`` of a TopicReplicaQuota (``crds/kpo.dev_topicreplicaquotas.yaml``).

    Attributes:
        observed_generation: The spec generation the status reflects.
        conditions: ``Ready``/``Reconciling``/``Stalled``, ``RateConflict``, ``ForeignThrottle``.
        brokers: The rates in effect on the brokers it names.
        topics: The replica lists in effect on its topics (at most 500).
    """

    brokers: list[BrokerThrottleStatus] | None = None
    topics: list[TopicThrottleStatus] | None = None


class KafkaClusterStatus(_WithConditions):
    """``status`` of a KafkaCluster (``crds/kpo.dev_kafkaclusters.yaml``).

    Attributes:
        observed_generation: The spec generation the status reflects.
        cluster_id: DescribeCluster's cluster id.
        controller_id: Node id of the active controller (the KRaft quorum leader, or the
            controller broker of a ZooKeeper-mode cluster); unset while there is none.
        broker_count: Live brokers.
        fenced_brokers: Brokers registered but fenced (KIP-1073).
        kafka_version: Inferred from ApiVersions.
        last_refresh_time: When the operator last asked (RFC 3339).
        conditions: ``Reachable`` and ``Ready``.
    """

    cluster_id: str | None = None
    controller_id: int | None = None
    broker_count: int | None = None
    fenced_brokers: list[int] | None = None
    kafka_version: str | None = None
    last_refresh_time: str | None = None


class AnomalyStatus(_StatusModel):
    """One ``status.anomalies[]`` entry of a BalancingPolicy.

    Attributes:
        id: Stable identity, e.g. ``BrokerFailure/3``
            (:mod:`~kpo_operator.balancing.anomalies`).
        kind: ``BrokerFailure``, ``DiskFailure``, ``DiskUsage`` or
            ``UnderReplicatedPartitions``.
        brokers: The brokers concerned.
        log_dirs: ``broker:path`` of the log dirs concerned.
        partitions: Number of partitions concerned.
        since: RFC 3339 time it was first seen.
        state: ``Detected``, ``Waiting``, ``Fixing``, ``Fixed`` or ``Failed``.
        waiting_for: Why a Waiting anomaly waits (``Threshold``, ``Maintenance``,
            ``Window``, ``Approval``, ``MovesInFlight``).
        message: Detail of the state.
        last_transition_time: RFC 3339 time of the last state change.
        planned_bytes: Bytes its fixes copy.
        fixes: Names of the PartitionReassignments written for it.
    """

    id: str | None = None
    kind: str | None = None
    brokers: list[int] | None = None
    log_dirs: list[str] | None = None
    partitions: int | None = None
    since: str | None = None
    state: str | None = None
    waiting_for: str | None = None
    message: str | None = None
    last_transition_time: str | None = None
    planned_bytes: int | None = None
    fixes: list[str] | None = None


class PolicyBrokers(_StatusModel):
    """``status.brokers`` of a BalancingPolicy: live, and absent while holding replicas."""

    live: list[int] | None = None
    absent: list[int] | None = None


class WindowStatus(_StatusModel):
    """``status.window``: ``Open``, ``Closed`` or ``Always``; RFC 3339 times."""

    state: str | None = None
    closes_at: str | None = None
    next_open: str | None = None


class BudgetStatus(_StatusModel):
    """``status.budget``: the cluster-wide rate, each fix's throttle (bytes/s), receivers."""

    replication_rate: int | None = None
    fix_rate: int | None = None
    receiving_brokers: int | None = None


class BalancingPolicyStatus(_WithConditions):
    """``status`` of a BalancingPolicy (``kubectl get bp``).

    Attributes:
        last_check_time: RFC 3339 time of the last check of the cluster.
        message: Summary of the last check.
        open_anomalies: Anomalies Detected, Waiting or Fixing.
        running_fixes: Fixes not in a final phase.
        maintenance: Why healing waits for maintenance, if it does.
        brokers: The brokers as last seen.
        window: The balancing windows.
        budget: The budget in force.
        anomalies: Every anomaly seen: open ones, and recently finished ones.
    """

    last_check_time: str | None = None
    message: str | None = None
    open_anomalies: int | None = None
    running_fixes: int | None = None
    maintenance: str | None = None
    brokers: PolicyBrokers | None = None
    window: WindowStatus | None = None
    budget: BudgetStatus | None = None
    anomalies: list[AnomalyStatus] | None = None
