"""Single steps of a PartitionReassignment that the reconciler composes.

Log-dir moves (AlterReplicaLogDirs, KIP-113), the preferred-leader election
(ElectLeaders, KIP-460), who owns which in-flight partition, and the pure
computations of a cancellation (Kafka's OAR order, final partition entries).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from kpo_kafka.admin import KafkaAdmin
from kpo_kafka.admin_types import ERROR_REPLICA_NOT_AVAILABLE, ReplicaKey
from kpo_kafka.specs import ANY_LOG_DIR, PartitionReassignmentSpec, PartitionTarget
from kpo_kafka.states import MoveState
from kpo_kafka.topic_partition import TopicPartition
from kpo_operator.cluster import ClusterSnapshot
from kpo_operator.model import ClusterView
from kpo_operator.progress import PartitionStatus
from kpo_operator.store import NORMAL, WARNING, Object, ObjectStore

logger = logging.getLogger(__name__)


def explicit_dirs(target: PartitionTarget) -> list[tuple[int, str]]:
    """``(broker, log dir)`` pairs of ``target`` naming a directory (not ``"any"``)."""
    if target.log_dirs is None:
        return []
    pairs = zip(target.replicas, target.log_dirs, strict=False)
    return [(b, d) for b, d in pairs if d != ANY_LOG_DIR]


def dirs_reached(target: PartitionTarget, snapshot: ClusterSnapshot) -> bool:
    """Whether every named log dir of ``target`` holds its replica, with no move pending."""
    for broker, log_dir in explicit_dirs(target):
        info = snapshot.replicas.get((broker, target.topic, target.partition))
        if info is None or info.log_dir != log_dir or info.future is not None:
            return False
    return True


def move_log_dirs(
    admin: KafkaAdmin, targets: Iterable[PartitionTarget], snapshot: ClusterSnapshot
) -> None:
    """Ask brokers to place replicas in the named log dirs (AlterReplicaLogDirs, KIP-113).

    Idempotent: replicas already there or already moving there are skipped. A replica
    the broker does not host yet (REPLICA_NOT_AVAILABLE) is asked again on a later step,
    as ``kafka-reassign-partitions`` retries; other errors are logged.

    Raises:
        KafkaAdminError: The request failed as a whole.
    """
    moves: dict[ReplicaKey, str] = {}
    for target in targets:
        for broker, log_dir in explicit_dirs(target):
            info = snapshot.replicas.get((broker, target.topic, target.partition))
            if info is None or (
                info.log_dir != log_dir and (info.future is None or info.future.log_dir != log_dir)
            ):
                moves[(broker, target.topic, target.partition)] = log_dir
    if moves:
        for key, error in admin.alter_replica_log_dirs(moves).items():
            if error is not None and error.code != ERROR_REPLICA_NOT_AVAILABLE:
                logger.warning("AlterReplicaLogDirs %s: %s", key, error)


def elect_preferred(
    admin: KafkaAdmin,
    store: ObjectStore,
    obj: Object,
    spec: PartitionReassignmentSpec,
    partitions: Mapping[TopicPartition, PartitionStatus],
) -> str:
    """Run ElectLeaders (PREFERRED) on ``partitions`` if the spec asks; record an Event.

    Returns:
        A suffix for the completion message ("" when no election was asked).

    Raises:
        KafkaAdminError: The request failed as a whole.
    """
    if not spec.preferred_leader_election:
        return ""
    results = admin.elect_preferred_leaders(sorted(partitions))
    refused = {tp: e for tp, e in results.items() if e is not None}
    if refused:
        text = "; ".join(f"{t}-{p}: {e}" for (t, p), e in sorted(refused.items()))
        store.event(obj, WARNING, "PreferredLeaderElectionFailed", text)
        return f"; preferred leader election failed for {len(refused)} partitions"
    store.event(
        obj,
        NORMAL,
        "PreferredLeaderElection",
        f"preferred replicas lead all {len(results)} partitions",
    )
    return "; preferred leaders elected"


def oar(target: PartitionTarget, snapshot: ClusterSnapshot) -> tuple[int, ...]:
    """OAR of ``target``'s partition now (AR minus adding replicas); ``()`` if unknown."""
    state = snapshot.view.partition(target.topic, target.partition)
    return state.original_replicas if state else ()


def current_target(snapshot: ClusterSnapshot, tp: TopicPartition) -> tuple[int, ...]:
    """Return the target Kafka is moving ``tp`` to (AR minus removing replicas)."""
    state = snapshot.view.partition(*tp)
    return tuple(b for b in state.replicas if b not in state.removing) if state else ()


def needs_submission(
    snapshot: ClusterSnapshot, tp: TopicPartition, target: tuple[int, ...]
) -> bool:
    """Whether ``tp`` must be submitted to reach ``target``.

    False when AR already equals ``target`` with nothing in flight, or when Kafka is
    already moving it to ``target``; true otherwise (not in flight, or in flight towards
    another target: KIP-455 replaces the target of an in-flight reassignment).
    """
    state = snapshot.view.partition(*tp)
    if state is None:
        return True
    if tp in snapshot.view.reassigning or state.adding or state.removing:
        return current_target(snapshot, tp) != target
    return tuple(state.replicas) != target


def order_restores(
    accepted: Mapping[TopicPartition, PartitionStatus], view: ClusterView
) -> dict[TopicPartition, list[int] | None]:
    """Reassignments putting cancelled partitions back in their recorded OAR order.

    Kafka reverts a cancelled partition to OAR in its in-flight order (target replicas
    first, KIP-455), which can change the preferred leader; a reassignment with the
    same replica set in the original order moves no data and completes at once.
    """
    restores: dict[TopicPartition, list[int] | None] = {}
    for tp, a in accepted.items():
        state = view.partition(*tp)
        if (
            state is not None
            and tp not in view.reassigning
            and a.state != MoveState.COMPLETED
            and list(state.replicas) != list(a.original_replicas)
            and sorted(state.replicas) == sorted(a.original_replicas)
        ):
            restores[tp] = list(a.original_replicas)
    return restores


def cancelled_entries(
    accepted: Mapping[TopicPartition, PartitionStatus], view: ClusterView
) -> list[PartitionStatus]:
    """Build the final ``status.partitions`` of a cancelled object.

    A partition that reached its target before the cancellation is Completed, the
    others Cancelled; no bytes are reported.
    """
    entries: list[PartitionStatus] = []
    for tp, a in accepted.items():
        state = view.partition(*tp)
        done = state is not None and list(state.replicas) == list(a.target_replicas)
        entries.append(
            PartitionStatus(
                tp[0],
                tp[1],
                MoveState.COMPLETED if done else MoveState.CANCELLED,
                a.original_replicas,
                a.target_replicas,
                isr=state.isr if state else (),
                leader=state.leader if state else -1,
            )
        )
    return entries
