"""The detectors and the anomaly lifecycle of a BalancingPolicy (pure).

A detector turns one :class:`~kpo_operator.balancing.observation.ClusterObservation`
into :class:`Finding` s, each with a stable id, so that a finding seen at several checks
is one anomaly (Cruise Control's anomaly names):

========================== ============================= ======================================
kind                       id                            seen when
========================== ============================= ======================================
BrokerFailure              ``BrokerFailure/<id>``        a broker holding replicas is not
                                                         registered (DescribeCluster), or is
                                                         fenced (KRaft, KIP-631)
DiskFailure                ``DiskFailure/<id>``          a live broker answers a log dir with
                                                         KAFKA_STORAGE_ERROR (DescribeLogDirs);
                                                         its replicas missing from its online
                                                         dirs are the ones lost
DiskUsage                  ``DiskUsage/<id>:<dir>``      a log dir (or a broker's dirs summed,
                           (``DiskUsage/<id>``)          scope Broker) above the threshold
GoalViolation              ``GoalViolation``             the most loaded live broker holds more
                                                         disk bytes than (1 + tolerance) x the
                                                         mean, and no broker is absent
UnderReplicatedPartitions  ``UnderReplicatedPartitions`` partitions with an ISR smaller than
                                                         their replicas, or no leader, that
                                                         neither a move in flight nor an
                                                         absent broker nor an offline dir
                                                         explains (reported only)
========================== ============================= ======================================

An anomaly's state follows :data:`STATE_VALID_PREVIOUS` (as Kafka's state machines list
their valid previous states): ``Detected`` when seen and nothing is to be done about it
(a report-only finding), ``Waiting`` (with a
:class:`WaitReason`) while a gate holds its fix, ``Fixing`` while its fixes run,
``Fixed`` when they completed or the finding cleared, ``Failed`` when no fix can be
planned or a fix failed. A report-only finding (UnderReplicatedPartitions) waits for its
threshold, then stays ``Detected``. ``Fixed`` and ``Failed`` are final: the same finding seen again
later is a new anomaly.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from kpo_kafka.topic_partition import TopicPartition
from kpo_operator.balancing.healing import balance_stats
from kpo_operator.balancing.observation import ClusterObservation
from kpo_operator.balancing.spec import BalancingPolicySpec, UsageScope


class AnomalyKind(StrEnum):
    """What a detector found."""

    BROKER_FAILURE = "BrokerFailure"
    DISK_FAILURE = "DiskFailure"
    DISK_USAGE = "DiskUsage"
    GOAL_VIOLATION = "GoalViolation"
    UNDER_REPLICATED = "UnderReplicatedPartitions"


class AnomalyState(StrEnum):
    """Where an anomaly is in its lifecycle (``status.anomalies[].state``)."""

    DETECTED = "Detected"
    WAITING = "Waiting"
    FIXING = "Fixing"
    FIXED = "Fixed"
    FAILED = "Failed"


class WaitReason(StrEnum):
    """Why a ``Waiting`` anomaly's fix does not start (``status.anomalies[].waitingFor``)."""

    THRESHOLD = "Threshold"
    WINDOW = "Window"
    APPROVAL = "Approval"
    MAINTENANCE = "Maintenance"
    IN_FLIGHT = "MovesInFlight"
    """Its partitions are being moved by other reassignments; planned once they finish."""


FINAL_STATES = frozenset({AnomalyState.FIXED, AnomalyState.FAILED})

STATE_VALID_PREVIOUS: Mapping[AnomalyState, frozenset[AnomalyState | None]] = {
    AnomalyState.DETECTED: frozenset(
        {None, AnomalyState.DETECTED, AnomalyState.WAITING, AnomalyState.FIXING}
    ),
    AnomalyState.WAITING: frozenset(
        {None, AnomalyState.DETECTED, AnomalyState.WAITING, AnomalyState.FIXING}
    ),
    AnomalyState.FIXING: frozenset(
        {None, AnomalyState.DETECTED, AnomalyState.WAITING, AnomalyState.FIXING}
    ),
    AnomalyState.FIXED: frozenset(
        {AnomalyState.DETECTED, AnomalyState.WAITING, AnomalyState.FIXING}
    ),
    AnomalyState.FAILED: frozenset(
        {None, AnomalyState.DETECTED, AnomalyState.WAITING, AnomalyState.FIXING}
    ),
}
"""Anomaly state -> the states it may be entered from (``None``: a new anomaly)."""


class IllegalAnomalyTransitionError(RuntimeError):
    """An anomaly was moved to a state :data:`STATE_VALID_PREVIOUS` does not allow."""


def check_transition(previous: AnomalyState | None, new: AnomalyState) -> None:
    """Check ``previous -> new`` against :data:`STATE_VALID_PREVIOUS`.

    Raises:
        IllegalAnomalyTransitionError: The transition is not listed.
    """
    if previous not in STATE_VALID_PREVIOUS[new]:
        raise IllegalAnomalyTransitionError(f"anomaly state {previous} -> {new} is not valid")


@dataclass(frozen=True)
class Finding:
    """What one detector sees in one observation.

    Attributes:
        id: Stable identity (table above).
        kind: The detector.
        brokers: The brokers concerned.
        log_dirs: ``broker:path`` of the log dirs concerned.
        partitions: The partitions concerned.
        detail: One line for status and Events.
    """

    id: str
    kind: AnomalyKind
    brokers: tuple[int, ...]
    log_dirs: tuple[str, ...]
    partitions: frozenset[TopicPartition]
    detail: str


def detect(obs: ClusterObservation, spec: BalancingPolicySpec) -> dict[str, Finding]:
    """Run every enabled detector of ``spec`` on ``obs``; return the findings by id."""
    found: dict[str, Finding] = {}
    detectors = spec.detectors
    if detectors.broker_failure is not None and detectors.broker_failure.enabled:
        found.update(_broker_failures(obs))
    if detectors.disk_failure is not None and detectors.disk_failure.enabled:
        found.update(_disk_failures(obs))
    usage = detectors.disk_usage
    if usage is not None and usage.enabled:
        found.update(_disk_usage(obs, usage.threshold_percent / 100, usage.scope))
    goal = detectors.goal_violation
    if goal is not None and goal.enabled and not obs.absent:
        found.update(_goal_violation(obs, 1 + goal.tolerance_percent / 100))
    urp = detectors.under_replicated_partitions
    if urp is not None and urp.enabled:
        found.update(_under_replicated(obs))
    return found


def _broker_failures(obs: ClusterObservation) -> dict[str, Finding]:
    out: dict[str, Finding] = {}
    for broker in sorted(obs.absent):
        parts = frozenset(tp for tp, info in obs.partitions.items() if broker in info.replicas)
        how = "fenced" if broker in obs.fenced else "not registered"
        out[f"{AnomalyKind.BROKER_FAILURE}/{broker}"] = Finding(
            f"{AnomalyKind.BROKER_FAILURE}/{broker}",
            AnomalyKind.BROKER_FAILURE,
            (broker,),
            (),
            parts,
            f"broker {broker} {how}; it holds replicas of {len(parts)} partitions",
        )
    return out


def _disk_failures(obs: ClusterObservation) -> dict[str, Finding]:
    out: dict[str, Finding] = {}
    for broker, lost in sorted(obs.offline_replicas().items()):
        if not lost:
            continue
        dirs = tuple(f"{broker}:{d.path}" for d in obs.log_dirs.get(broker, ()) if not d.online)
        key = f"{AnomalyKind.DISK_FAILURE}/{broker}"
        out[key] = Finding(
            key,
            AnomalyKind.DISK_FAILURE,
            (broker,),
            dirs,
            lost,
            f"log dir {', '.join(dirs)} offline; {len(lost)} replicas on it",
        )
    return out


def _disk_usage(obs: ClusterObservation, threshold: float, scope: UsageScope) -> dict[str, Finding]:
    out: dict[str, Finding] = {}
    for broker in sorted(obs.live):
        dirs = [d for d in obs.log_dirs.get(broker, ()) if d.online and d.total_bytes > 0]
        groups = [dirs] if scope is UsageScope.BROKER else [[d] for d in dirs]
        for group in groups:
            total = sum(d.total_bytes for d in group)
            used = sum(d.total_bytes - d.usable_bytes for d in group)
            if not total or used <= threshold * total:
                continue
            paths = tuple(f"{broker}:{d.path}" for d in group)
            key = f"{AnomalyKind.DISK_USAGE}/{broker}"
            if scope is UsageScope.LOG_DIR:
                key += f":{group[0].path}"
            parts = frozenset(
                TopicPartition(t, p)
                for (b, t, p), info in obs.replica_dirs.items()
                if b == broker and any(info.log_dir == d.path for d in group)
            )
            out[key] = Finding(
                key,
                AnomalyKind.DISK_USAGE,
                (broker,),
                paths,
                parts,
                f"{', '.join(paths)} {100 * used / total:.1f} % used "
                f"(threshold {100 * threshold:.0f} %)",
            )
    return out


def _goal_violation(obs: ClusterObservation, tolerance: float) -> dict[str, Finding]:
    stats = balance_stats(obs.replicas(), obs.live, obs.sizes)
    if stats.max_broker is None or stats.ratio <= tolerance:
        return {}
    broker = stats.max_broker
    key = str(AnomalyKind.GOAL_VIOLATION)
    parts = frozenset(tp for tp, info in obs.partitions.items() if broker in info.replicas)
    detail = (
        f"broker {broker} holds {stats.max_bytes} bytes, {stats.ratio:.2f}x the mean "
        f"(tolerance {tolerance:.2f}x)"
    )
    return {key: Finding(key, AnomalyKind.GOAL_VIOLATION, (broker,), (), parts, detail)}


def _under_replicated(obs: ClusterObservation) -> dict[str, Finding]:
    lost = {(b, tp) for b, tps in obs.offline_replicas().items() for tp in tps}
    parts: set[TopicPartition] = set()
    offline = 0
    for tp, info in obs.partitions.items():
        if tp in obs.in_flight:
            continue
        missing = set(info.replicas) - set(info.isr)
        if not missing and info.leader >= 0:
            continue
        if missing and all(b in obs.absent or (b, tp) in lost for b in missing):
            continue  # an absent broker or an offline dir explains it
        parts.add(tp)
        offline += info.leader < 0
    if not parts:
        return {}
    key = str(AnomalyKind.UNDER_REPLICATED)
    detail = f"{len(parts)} partitions under-replicated ({offline} offline) with live brokers"
    return {
        key: Finding(
            key,
            AnomalyKind.UNDER_REPLICATED,
            tuple(sorted({b for tp in parts for b in obs.partitions[tp].replicas})),
            (),
            frozenset(parts),
            detail,
        )
    }
