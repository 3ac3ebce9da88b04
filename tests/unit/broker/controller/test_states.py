"""The partition and replica state machine tables."""

import itertools

import pytest

from kpo_broker.controller.states import (
    PARTITION_VALID_PREVIOUS_STATES,
    REPLICA_VALID_PREVIOUS_STATES,
    IllegalStateTransitionError,
    PartitionState,
    ReplicaState,
    check_transition,
    is_valid_transition,
)

P = PartitionState
R = ReplicaState

PARTITION_TRANSITIONS = {
    (P.NON_EXISTENT_PARTITION, P.NEW_PARTITION),
    (P.NEW_PARTITION, P.ONLINE_PARTITION),
    (P.NEW_PARTITION, P.OFFLINE_PARTITION),
    (P.ONLINE_PARTITION, P.ONLINE_PARTITION),
    (P.ONLINE_PARTITION, P.OFFLINE_PARTITION),
    (P.OFFLINE_PARTITION, P.ONLINE_PARTITION),
    (P.OFFLINE_PARTITION, P.OFFLINE_PARTITION),
    (P.OFFLINE_PARTITION, P.NON_EXISTENT_PARTITION),
}

REPLICA_TRANSITIONS = {
    (R.NON_EXISTENT_REPLICA, R.NEW_REPLICA),
    *((source, R.ONLINE_REPLICA) for source in (R.NEW_REPLICA, R.ONLINE_REPLICA)),
    (R.OFFLINE_REPLICA, R.ONLINE_REPLICA),
    (R.REPLICA_DELETION_INELIGIBLE, R.ONLINE_REPLICA),
    *(
        (source, R.OFFLINE_REPLICA)
        for source in (
            R.NEW_REPLICA,
            R.ONLINE_REPLICA,
            R.OFFLINE_REPLICA,
            R.REPLICA_DELETION_INELIGIBLE,
        )
    ),
    (R.OFFLINE_REPLICA, R.REPLICA_DELETION_STARTED),
    (R.REPLICA_DELETION_STARTED, R.REPLICA_DELETION_SUCCESSFUL),
    (R.REPLICA_DELETION_STARTED, R.REPLICA_DELETION_INELIGIBLE),
    (R.OFFLINE_REPLICA, R.REPLICA_DELETION_INELIGIBLE),
    (R.REPLICA_DELETION_SUCCESSFUL, R.NON_EXISTENT_REPLICA),
}


def test_state_names_are_kafkas() -> None:
    assert [s.value for s in PartitionState] == [
        "NewPartition",
        "OnlinePartition",
        "OfflinePartition",
        "NonExistentPartition",
    ]
    assert {s.value for s in ReplicaState} == {
        "NewReplica",
        "OnlineReplica",
        "OfflineReplica",
        "ReplicaDeletionStarted",
        "ReplicaDeletionSuccessful",
        "ReplicaDeletionIneligible",
        "NonExistentReplica",
    }


def test_every_state_has_a_table_entry() -> None:
    assert set(PARTITION_VALID_PREVIOUS_STATES) == set(PartitionState)
    assert set(REPLICA_VALID_PREVIOUS_STATES) == set(ReplicaState)


@pytest.mark.parametrize(
    ("current", "target"), list(itertools.product(PartitionState, PartitionState))
)
def test_partition_transitions(current: PartitionState, target: PartitionState) -> None:
    legal = (current, target) in PARTITION_TRANSITIONS
    assert is_valid_transition(current, target) is legal
    if legal:
        check_transition(current, target)
    else:
        with pytest.raises(IllegalStateTransitionError) as info:
            check_transition(current, target)
        assert (info.value.current, info.value.target) == (current, target)
        assert f"from {current.value} to {target.value}" in str(info.value)


@pytest.mark.parametrize(("current", "target"), list(itertools.product(ReplicaState, ReplicaState)))
def test_replica_transitions(current: ReplicaState, target: ReplicaState) -> None:
    legal = (current, target) in REPLICA_TRANSITIONS
    assert is_valid_transition(current, target) is legal
    if not legal:
        with pytest.raises(IllegalStateTransitionError):
            check_transition(current, target)


def test_topic_lifecycle_walks_the_tables() -> None:
    for current, target in itertools.pairwise(
        [
            P.NON_EXISTENT_PARTITION,
            P.NEW_PARTITION,
            P.ONLINE_PARTITION,
            P.OFFLINE_PARTITION,
            P.NON_EXISTENT_PARTITION,
        ]
    ):
        check_transition(current, target)
    for current, target in itertools.pairwise(
        [
            R.NON_EXISTENT_REPLICA,
            R.NEW_REPLICA,
            R.ONLINE_REPLICA,
            R.OFFLINE_REPLICA,
            R.REPLICA_DELETION_STARTED,
            R.REPLICA_DELETION_INELIGIBLE,
            R.OFFLINE_REPLICA,
            R.REPLICA_DELETION_STARTED,
            R.REPLICA_DELETION_SUCCESSFUL,
            R.NON_EXISTENT_REPLICA,
        ]
    ):
        check_transition(current, target)


def test_mixing_partition_and_replica_states_is_illegal() -> None:
    with pytest.raises(IllegalStateTransitionError):
        check_transition(P.NEW_PARTITION, R.NEW_REPLICA)  # type: ignore[call-overload]
