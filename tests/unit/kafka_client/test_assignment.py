"""Replica assignment for topic creation and CreatePartitions (seed 001 §4)."""

import random
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kpo_kafka.assignment import (
    BrokerMetadata,
    InconsistentBrokerRacksError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    RackAwareMode,
    assign_replicas_for_new_partitions,
    assign_replicas_to_brokers,
    rack_alternated_brokers,
    validate_replica_assignment,
)


def brokers(*ids: int) -> list[BrokerMetadata]:
    return [BrokerMetadata(i) for i in ids]


# --- known layouts ----------------------------------------------------------------------


def test_seed_example_four_brokers_four_partitions_three_replicas() -> None:
    # Seed 001 §4: partition i on broker i mod n, its replica j on broker (i + j) mod n.
    assert assign_replicas_to_brokers(brokers(0, 1, 2, 3), 4, 3, start_index=0) == {
        0: [0, 1, 2],
        1: [1, 2, 3],
        2: [2, 3, 0],
        3: [3, 0, 1],
    }


def test_followers_shift_after_each_round_of_brokers() -> None:
    assert assign_replicas_to_brokers(brokers(0, 1, 2, 3, 4), 10, 3, start_index=0) == {
        0: [0, 1, 2],
        1: [1, 2, 3],
        2: [2, 3, 4],
        3: [3, 4, 0],
        4: [4, 0, 1],
        5: [0, 2, 3],
        6: [1, 3, 4],
        7: [2, 4, 0],
        8: [3, 0, 1],
        9: [4, 1, 2],
    }


def test_broker_ids_are_used_in_id_order() -> None:
    assert assign_replicas_to_brokers(brokers(30, 10, 20), 3, 2, start_index=1) == {
        0: [20, 10],
        1: [30, 20],
        2: [10, 30],
    }


def test_rack_alternated_broker_list() -> None:
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated_brokers(racks) == [0, 3, 1, 5, 4, 2]
    assert rack_alternated_brokers({1: "a", 2: "a", 3: "b"}) == [1, 3, 2]


def test_rack_aware_layout_puts_each_partition_on_three_racks() -> None:
    metadata = [
        BrokerMetadata(0, "rack1"),
        BrokerMetadata(1, "rack3"),
        BrokerMetadata(2, "rack3"),
        BrokerMetadata(3, "rack2"),
        BrokerMetadata(4, "rack2"),
        BrokerMetadata(5, "rack1"),
    ]
    racks = {b.id: b.rack for b in metadata}
    assignment = assign_replicas_to_brokers(metadata, 6, 3, start_index=0)
    # Leaders follow the rack-alternated list 0, 3, 1, 5, 4, 2.
    assert [replicas[0] for replicas in assignment.values()] == [0, 3, 1, 5, 4, 2]
    for replicas in assignment.values():
        assert len({racks[b] for b in replicas}) == 3


# --- errors -----------------------------------------------------------------------------


@pytest.mark.parametrize("replication_factor", [0, -1, 4])
def test_invalid_replication_factor(replication_factor: int) -> None:
    with pytest.raises(InvalidReplicationFactorError):
        assign_replicas_to_brokers(brokers(1, 2, 3), 3, replication_factor)


@pytest.mark.parametrize("partitions", [0, -2])
def test_invalid_partition_count(partitions: int) -> None:
    with pytest.raises(InvalidPartitionsError):
        assign_replicas_to_brokers(brokers(1, 2, 3), partitions, 1)


def test_some_brokers_without_rack() -> None:
    mixed = [BrokerMetadata(1, "a"), BrokerMetadata(2, "b"), BrokerMetadata(3)]
    with pytest.raises(InconsistentBrokerRacksError):
        assign_replicas_to_brokers(mixed, 3, 2, start_index=0)
    unaware = assign_replicas_to_brokers(brokers(1, 2, 3), 3, 2, start_index=0)
    for mode in (RackAwareMode.SAFE, RackAwareMode.DISABLED):
        assert assign_replicas_to_brokers(mixed, 3, 2, start_index=0, rack_aware_mode=mode) == (
            unaware
        )


def test_disabled_rack_awareness_ignores_racks() -> None:
    racked = [BrokerMetadata(1, "a"), BrokerMetadata(2, "a"), BrokerMetadata(3, "b")]
    assert assign_replicas_to_brokers(
        racked, 6, 2, start_index=2, rack_aware_mode=RackAwareMode.DISABLED
    ) == assign_replicas_to_brokers(brokers(1, 2, 3), 6, 2, start_index=2)


# --- properties -------------------------------------------------------------------------

broker_ids = st.sets(st.integers(0, 200), min_size=1, max_size=12)


@st.composite
def layouts(draw: st.DrawFn, racked: bool) -> tuple[list[BrokerMetadata], int, int, int]:
    ids = sorted(draw(broker_ids))
    if racked:
        rack_names = draw(st.lists(st.sampled_from("abcdef"), min_size=len(ids), max_size=len(ids)))
        metadata = [BrokerMetadata(i, r) for i, r in zip(ids, rack_names, strict=True)]
    else:
        metadata = [BrokerMetadata(i) for i in ids]
    partitions = draw(st.integers(1, 60))
    replication_factor = draw(st.integers(1, len(ids)))
    start = draw(st.integers(0, len(ids) - 1))
    return metadata, partitions, replication_factor, start


def check_basic_properties(
    metadata: list[BrokerMetadata], assignment: dict[int, list[int]], partitions: int, rf: int
) -> None:
    ids = {b.id for b in metadata}
    assert sorted(assignment) == list(range(partitions))
    for replicas in assignment.values():
        assert len(replicas) == rf
        assert len(set(replicas)) == rf
        assert set(replicas) <= ids
    leaders = Counter(replicas[0] for replicas in assignment.values())
    counts = [leaders.get(b, 0) for b in ids]
    assert max(counts) - min(counts) <= 1


@given(layouts(racked=False))
def test_rack_unaware_properties(layout: tuple[list[BrokerMetadata], int, int, int]) -> None:
    metadata, partitions, rf, start = layout
    assignment = assign_replicas_to_brokers(metadata, partitions, rf, start_index=start)
    check_basic_properties(metadata, assignment, partitions, rf)
    assert assignment == assign_replicas_to_brokers(metadata, partitions, rf, start_index=start)


@given(layouts(racked=True))
def test_rack_aware_properties(layout: tuple[list[BrokerMetadata], int, int, int]) -> None:
    metadata, partitions, rf, start = layout
    racks = {b.id: b.rack for b in metadata}
    rack_count = len(set(racks.values()))
    assignment = assign_replicas_to_brokers(metadata, partitions, rf, start_index=start)
    check_basic_properties(metadata, assignment, partitions, rf)
    for replicas in assignment.values():
        # Distinct racks when racks >= RF; otherwise every rack holds a replica.
        assert len({racks[b] for b in replicas}) == min(rf, rack_count)
    assert assignment == assign_replicas_to_brokers(metadata, partitions, rf, start_index=start)


@given(layouts(racked=False), st.integers(0, 2**32))
def test_seeded_random_start_is_deterministic(
    layout: tuple[list[BrokerMetadata], int, int, int], seed: int
) -> None:
    metadata, partitions, rf, _ = layout
    first = assign_replicas_to_brokers(metadata, partitions, rf, rng=random.Random(seed))
    again = assign_replicas_to_brokers(metadata, partitions, rf, rng=random.Random(seed))
    assert first == again
    check_basic_properties(metadata, first, partitions, rf)


# --- CreatePartitions -------------------------------------------------------------------


def test_new_partitions_continue_the_existing_assignment() -> None:
    existing = {0: [1, 2], 1: [2, 3], 2: [3, 1]}
    added = assign_replicas_for_new_partitions(brokers(1, 2, 3), existing, 5)
    assert added == {3: [1, 3], 4: [2, 1]}


def test_new_partitions_start_at_partition_zeros_leader() -> None:
    existing = {0: [3, 1, 2]}
    added = assign_replicas_for_new_partitions(brokers(1, 2, 3, 4), existing, 3)
    assert sorted(added) == [1, 2]
    assert all(len(replicas) == 3 for replicas in added.values())
    assert [added[1][0], added[2][0]] == [4, 1]


@given(layouts(racked=False), st.integers(1, 20))
def test_new_partitions_properties(
    layout: tuple[list[BrokerMetadata], int, int, int], extra: int
) -> None:
    metadata, partitions, rf, start = layout
    existing = assign_replicas_to_brokers(metadata, partitions, rf, start_index=start)
    added = assign_replicas_for_new_partitions(metadata, existing, partitions + extra)
    assert sorted(added) == list(range(partitions, partitions + extra))
    assert all(len(set(replicas)) == rf for replicas in added.values())


def test_new_partition_errors() -> None:
    with pytest.raises(InvalidPartitionsError, match="only be increased"):
        assign_replicas_for_new_partitions(brokers(1, 2), {0: [1], 1: [2]}, 2)
    with pytest.raises(InvalidReplicaAssignmentError):
        assign_replicas_for_new_partitions(brokers(1, 2), {1: [2]}, 3)
    with pytest.raises(InvalidReplicationFactorError):
        assign_replicas_for_new_partitions(brokers(1), {0: [1, 2]}, 2)


# --- explicit assignments -----------------------------------------------------------------


def test_valid_explicit_assignment() -> None:
    validate_replica_assignment({0: [1, 2], 1: [2, 3]}, {1, 2, 3})
    validate_replica_assignment({2: [1, 2]}, {1, 2}, start_partition_id=2, replication_factor=2)


@pytest.mark.parametrize(
    ("assignment", "kwargs", "message"),
    [
        ({}, {}, "empty"),
        ({0: [1], 2: [2]}, {}, "consecutive"),
        ({1: [1]}, {}, "consecutive"),
        ({0: [1, 2], 1: [2]}, {}, "same number"),
        ({0: [1, 2]}, {"replication_factor": 3}, "same number"),
        ({0: []}, {}, "no replicas"),
        ({0: [1, 1]}, {}, "duplicate"),
        ({0: [1, 9]}, {}, "unknown brokers"),
    ],
)
def test_invalid_explicit_assignment(
    assignment: dict[int, list[int]], kwargs: dict[str, int], message: str
) -> None:
    with pytest.raises(InvalidReplicaAssignmentError, match=message):
        validate_replica_assignment(assignment, {1, 2, 3}, **kwargs)
