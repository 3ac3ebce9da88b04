"""Pure rules of partition reassignment (KIP-455): validation and target states.

A reassignment moves a partition from its original replicas (OAR) to target replicas
(RAR). While it runs, AR = RAR + OAR, with ``adding_replicas`` = RAR - OAR and
``removing_replicas`` = OAR - RAR (:class:`~kpo_broker.zk.model.ReplicaAssignment`).
A second submission for a partition being reassigned replaces the target, computed
from the *original* replicas; a cancellation (no target) goes back to OAR.

Nothing here reads or writes ZooKeeper: the controller's
:class:`~kpo_broker.controller.reassignment.ReassignmentManager` calls these with its
context.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from kpo_broker.controller import errors
from kpo_broker.zk.model import ReplicaAssignment

#: A per-partition answer: (Kafka error code, error message or None).
PartitionError = tuple[int, str | None]


def validate_target_replicas(
    current: ReplicaAssignment | None,
    target: Sequence[int] | None,
    live_broker_ids: Collection[int],
    *,
    topic_being_deleted: bool = False,
) -> PartitionError | None:
    """Check one partition's requested reassignment as Kafka's controller does.

    Args:
        current: the partition's assignment, or None for an unknown partition.
        target: RAR, or None for a cancellation (not checked here, see
            :func:`build_reassignment`).
        live_broker_ids: ids of the live brokers.
        topic_being_deleted: the topic is queued for deletion.

    Returns:
        None when valid, else the error: ``UNKNOWN_TOPIC_OR_PARTITION`` (3) for an
        unknown partition or a topic being deleted, ``INVALID_REPLICA_ASSIGNMENT`` (39)
        for an empty target, duplicate or negative broker ids, or added replicas on
        brokers that are not live.
    """
    if current is None or not current.replicas:
        return errors.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist."
    if topic_being_deleted:
        return errors.UNKNOWN_TOPIC_OR_PARTITION, "The topic is being deleted."
    if target is None:
        return None
    if not target:
        return errors.INVALID_REPLICA_ASSIGNMENT, "Empty replica list in the reassignment."
    if len(set(target)) != len(target):
        return (
            errors.INVALID_REPLICA_ASSIGNMENT,
            f"Duplicate broker ids in the reassignment: {list(target)}.",
        )
    if any(r < 0 for r in target):
        return errors.INVALID_REPLICA_ASSIGNMENT, f"Invalid broker id in {list(target)}."
    added = current.reassign_to(target).adding_replicas
    dead = [r for r in added if r not in live_broker_ids]
    if dead:
        return (
            errors.INVALID_REPLICA_ASSIGNMENT,
            f"Target brokers {dead} are not alive (live brokers {sorted(live_broker_ids)}).",
        )
    return None


def build_reassignment(
    current: ReplicaAssignment, target: Sequence[int] | None
) -> ReplicaAssignment | None:
    """Return the assignment to reach for a (validated) request.

    Args:
        current: the partition's assignment (maybe already being reassigned).
        target: RAR, or None to cancel.

    Returns:
        the assignment computed from the original replicas (OAR) and the target; for a
        cancellation, the original replicas alone; None when cancelling a partition
        that is not being reassigned (``NO_REASSIGNMENT_IN_PROGRESS``).
    """
    if target is None:
        if not current.is_being_reassigned:
            return None
        return current.reassign_to(current.original_replicas)
    return current.reassign_to(target)


def is_reassignment_complete(assignment: ReplicaAssignment, isr: Collection[int] | None) -> bool:
    """Whether every target replica (RAR) is in the ISR (Kafka's ``isReassignmentComplete``).

    Args:
        assignment: the partition's assignment.
        isr: the ISR read from the state znode, or None when the partition has none.

    Returns:
        True for a partition not being reassigned; else whether RAR is within the ISR.
    """
    if not assignment.is_being_reassigned:
        return True
    if isr is None:
        return False
    return set(assignment.target_replicas) <= set(isr)
