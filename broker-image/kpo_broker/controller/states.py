"""The controller's partition and replica states and their legal transitions.

Kafka's controller tracks every partition and every replica in a small state machine;
a transition is legal only
from the states listed for the target in the tables below, as in Kafka's
``PartitionStateMachine`` and ``ReplicaStateMachine``.

Partition states:

- ``NewPartition``: the assignment exists, no leader and ISR yet (topic creation).
- ``OnlinePartition``: a live leader was elected.
- ``OfflinePartition``: the leader died (or deletion started); needs an election.
- ``NonExistentPartition``: never created, or deleted.

Replica states:

- ``NewReplica``: created by a topic creation or a reassignment (RAR - OAR, Kafka's
  ``onPartitionReassignment``); it can only be a follower.
- ``OnlineReplica``: started and part of the assignment; may be leader or follower.
- ``OfflineReplica``: its broker died (or it is being removed).
- ``ReplicaDeletionStarted``: StopReplica with deletion was sent.
- ``ReplicaDeletionSuccessful``: the broker confirmed the deletion.
- ``ReplicaDeletionIneligible``: the deletion failed (e.g. broker offline), retried later.
- ``NonExistentReplica``: deleted.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import overload


class PartitionState(enum.Enum):
    """A partition's state in the controller (Kafka's names as values)."""

    NEW_PARTITION = "NewPartition"
    ONLINE_PARTITION = "OnlinePartition"
    OFFLINE_PARTITION = "OfflinePartition"
    NON_EXISTENT_PARTITION = "NonExistentPartition"


class ReplicaState(enum.Enum):
    """A replica's state in the controller (Kafka's names as values)."""

    NEW_REPLICA = "NewReplica"
    ONLINE_REPLICA = "OnlineReplica"
    OFFLINE_REPLICA = "OfflineReplica"
    REPLICA_DELETION_STARTED = "ReplicaDeletionStarted"
    REPLICA_DELETION_SUCCESSFUL = "ReplicaDeletionSuccessful"
    REPLICA_DELETION_INELIGIBLE = "ReplicaDeletionIneligible"
    NON_EXISTENT_REPLICA = "NonExistentReplica"


_P = PartitionState
_R = ReplicaState

#: Target partition state -> the states it may be entered from.
PARTITION_VALID_PREVIOUS_STATES: Mapping[PartitionState, frozenset[PartitionState]] = {
    _P.NEW_PARTITION: frozenset({_P.NON_EXISTENT_PARTITION}),
    _P.ONLINE_PARTITION: frozenset({_P.NEW_PARTITION, _P.ONLINE_PARTITION, _P.OFFLINE_PARTITION}),
    _P.OFFLINE_PARTITION: frozenset({_P.NEW_PARTITION, _P.ONLINE_PARTITION, _P.OFFLINE_PARTITION}),
    _P.NON_EXISTENT_PARTITION: frozenset({_P.OFFLINE_PARTITION}),
}

#: Target replica state -> the states it may be entered from.
REPLICA_VALID_PREVIOUS_STATES: Mapping[ReplicaState, frozenset[ReplicaState]] = {
    _R.NEW_REPLICA: frozenset({_R.NON_EXISTENT_REPLICA}),
    _R.ONLINE_REPLICA: frozenset(
        {_R.NEW_REPLICA, _R.ONLINE_REPLICA, _R.OFFLINE_REPLICA, _R.REPLICA_DELETION_INELIGIBLE}
    ),
    _R.OFFLINE_REPLICA: frozenset(
        {_R.NEW_REPLICA, _R.ONLINE_REPLICA, _R.OFFLINE_REPLICA, _R.REPLICA_DELETION_INELIGIBLE}
    ),
    _R.REPLICA_DELETION_STARTED: frozenset({_R.OFFLINE_REPLICA}),
    _R.REPLICA_DELETION_SUCCESSFUL: frozenset({_R.REPLICA_DELETION_STARTED}),
    _R.REPLICA_DELETION_INELIGIBLE: frozenset({_R.OFFLINE_REPLICA, _R.REPLICA_DELETION_STARTED}),
    _R.NON_EXISTENT_REPLICA: frozenset({_R.REPLICA_DELETION_SUCCESSFUL}),
}


class IllegalStateTransitionError(ValueError):
    """A partition or replica state change not allowed by the state machine tables.

    Args:
        current: the state the partition or replica is in.
        target: the state requested.
    """

    def __init__(
        self, current: PartitionState | ReplicaState, target: PartitionState | ReplicaState
    ) -> None:
        super().__init__(f"illegal state transition from {current.value} to {target.value}")
        self.current = current
        self.target = target


def _is_valid(
    current: PartitionState | ReplicaState, target: PartitionState | ReplicaState
) -> bool:
    if isinstance(current, PartitionState) and isinstance(target, PartitionState):
        return current in PARTITION_VALID_PREVIOUS_STATES[target]
    if isinstance(current, ReplicaState) and isinstance(target, ReplicaState):
        return current in REPLICA_VALID_PREVIOUS_STATES[target]
    return False


@overload
def is_valid_transition(current: PartitionState, target: PartitionState) -> bool: ...
@overload
def is_valid_transition(current: ReplicaState, target: ReplicaState) -> bool: ...
def is_valid_transition(
    current: PartitionState | ReplicaState, target: PartitionState | ReplicaState
) -> bool:
    """Return whether ``target`` may be entered from ``current``.

    A partition state and a replica state never form a valid transition.
    """
    return _is_valid(current, target)


@overload
def check_transition(current: PartitionState, target: PartitionState) -> None: ...
@overload
def check_transition(current: ReplicaState, target: ReplicaState) -> None: ...
def check_transition(
    current: PartitionState | ReplicaState, target: PartitionState | ReplicaState
) -> None:
    """Check a state change against the tables.

    Raises:
        IllegalStateTransitionError: ``target`` may not be entered from ``current``.
    """
    if not _is_valid(current, target):
        raise IllegalStateTransitionError(current, target)
