"""Kafka's replica assignment: the placement walk, topic creation and CreatePartitions."""

import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kpo_kafka.assignment import (
    BrokerListError,
    BrokerMetadata,
    InconsistentBrokerRacksError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    RackAwareMode,
    assign_replicas,
    assign_replicas_for_new_partitions,
    assign_replicas_to_brokers,
    rack_alternated_brokers,
    validate_replica_assignment,
)


def brokers(*ids: int) -> list[BrokerMetadata]:
    return [BrokerMetadata(i) for i in ids]


# --- known layouts ----------------------------------------------------------------------


def test_round_robin_four_brokers_four_partitions_three_replicas() -> None:
    # Kafka's AdminUtils.assignReplicasToBrokers: partition i on broker i mod n, its replica j
    # on broker (i + j) mod n.
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


# -- Kafka's placement ----------------------------------------------------------------


def test_placement_without_racks_matches_kafka() -> None:
    # 5 brokers, 10 partitions, RF 3, start index 0 and shift 0: the first replica walks
    # round-robin; followers sit right after it until partition 5, where the shift grows
    # by one and the followers jump one further (the layout Kafka's own tests expect).
    placed = assign_replicas(range(5), range(10), 3, start_index=0, replica_shift=0)
    assert placed == {
        0: (0, 1, 2),
        1: (1, 2, 3),
        2: (2, 3, 4),
        3: (3, 4, 0),
        4: (4, 0, 1),
        5: (0, 2, 3),
        6: (1, 3, 4),
        7: (2, 4, 0),
        8: (3, 0, 1),
        9: (4, 1, 2),
    }


def test_rack_alternated_order() -> None:
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated_brokers(racks) == [0, 3, 1, 5, 4, 2]
    del racks[5]
    assert rack_alternated_brokers(racks) == [0, 3, 1, 4, 2]
    assert rack_alternated_brokers({0: "a", 1: "a", 2: "b", 3: "c"}) == [0, 2, 3, 1]
    assert rack_alternated_brokers({}) == []


def test_rack_aware_placement_matches_kafka() -> None:
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    placed = assign_replicas(list(racks), range(7), 3, start_index=0, replica_shift=0, racks=racks)
    assert placed == {
        0: (0, 3, 1),
        1: (3, 1, 5),
        2: (1, 5, 4),
        3: (5, 4, 2),
        4: (4, 2, 0),
        5: (2, 0, 3),
        6: (0, 4, 2),
    }


def test_start_index_and_shift_move_the_layout() -> None:
    placed = assign_replicas([10, 20, 30], range(3), 2, start_index=1, replica_shift=1)
    # First replicas start at the second broker; followers skip one broker (shift 1).
    assert placed == {0: (20, 10), 1: (30, 20), 2: (10, 30)}


def test_single_broker_rf_1() -> None:
    assert assign_replicas([7], range(3), 1, start_index=4, replica_shift=9) == {
        0: (7,),
        1: (7,),
        2: (7,),
    }


@pytest.mark.parametrize(
    ("brokers", "rf", "racks", "error"),
    [
        ([], 1, None, BrokerListError),
        ([1, 1], 1, None, BrokerListError),
        ([1, 2], 3, None, InvalidReplicationFactorError),
        ([1, 2], 0, None, InvalidReplicationFactorError),
        ([1, 2], 1, {1: "a"}, InconsistentBrokerRacksError),
    ],
)
def test_assign_replicas_refuses(
    brokers: list[int], rf: int, racks: dict[int, str] | None, error: type[Exception]
) -> None:
    with pytest.raises(error):
        assign_replicas(brokers, range(2), rf, start_index=0, replica_shift=0, racks=racks)


# -- properties of the placement ------------------------------------------------------


@st.composite
def placements(draw: st.DrawFn) -> tuple[list[int], int, int, int, int]:
    brokers = draw(st.lists(st.integers(0, 1000), min_size=1, max_size=12, unique=True))
    rf = draw(st.integers(1, len(brokers)))
    count = draw(st.integers(1, 60))
    start = draw(st.integers(0, 100))
    shift = draw(st.integers(0, 100))
    return brokers, rf, count, start, shift


@settings(max_examples=300, deadline=None)
@given(placements())
def test_placement_properties_without_racks(case: tuple[list[int], int, int, int, int]) -> None:
    brokers, rf, count, start, shift = case
    placed = assign_replicas(brokers, range(count), rf, start_index=start, replica_shift=shift)
    assert sorted(placed) == list(range(count))
    for replicas in placed.values():
        assert len(replicas) == rf
        assert len(set(replicas)) == rf
        assert set(replicas) <= set(brokers)
    leaders = Counter(r[0] for r in placed.values())
    lead_counts = [leaders[b] for b in brokers]
    assert max(lead_counts) - min(lead_counts) <= 1
    # Every full round of len(brokers) partitions gives each broker exactly RF replicas;
    # the partitions of the last, partial round add at most min(RF, their number) more.
    # (Kafka's placement does not promise a spread within 1 for a partial round.)
    held = Counter(b for r in placed.values() for b in r)
    counts = [held[b] for b in brokers]
    rounds, rest = divmod(count, len(brokers))
    assert min(counts) >= rounds * rf
    assert max(counts) - min(counts) <= min(rf, rest)
    if rest == 0:
        assert set(counts) == {rounds * rf}


@st.composite
def rack_placements(
    draw: st.DrawFn,
) -> tuple[dict[int, str], int, int, int, int]:
    brokers, rf, count, start, shift = draw(placements())
    racks = {b: draw(st.sampled_from(["r1", "r2", "r3", "r4"])) for b in brokers}
    return racks, rf, count, start, shift


@settings(max_examples=300, deadline=None)
@given(rack_placements())
def test_placement_properties_with_racks(case: tuple[dict[int, str], int, int, int, int]) -> None:
    racks, rf, count, start, shift = case
    placed = assign_replicas(
        list(racks), range(count), rf, start_index=start, replica_shift=shift, racks=racks
    )
    rack_count = len(set(racks.values()))
    for replicas in placed.values():
        assert len(replicas) == rf
        assert len(set(replicas)) == rf
        assert set(replicas) <= set(racks)
        # Distinct racks while there are racks left, then every rack is used.
        assert len({racks[b] for b in replicas}) == min(rf, rack_count)
    leaders = Counter(r[0] for r in placed.values())
    lead_counts = [leaders[b] for b in racks]
    assert max(lead_counts) - min(lead_counts) <= 1
