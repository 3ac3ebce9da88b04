"""Proposals of kafka-reassign-partitions --generate: Kafka's replica placement, pure."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from kpo_operator.generate import (
    BrokerListError,
    GenerateError,
    InvalidReplicationFactorError,
    RackInformationError,
    TopicsToMoveError,
    UnknownBrokerError,
    UnknownTopicError,
    assign_replicas,
    assignment_targets,
    parse_topics_to_move,
    propose_move,
    rack_alternated_brokers,
)

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
        ([1, 2], 1, {1: "a"}, RackInformationError),
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


# -- propose_move ---------------------------------------------------------------------

CLUSTER: dict[int, str | None] = {1: None, 2: None, 3: None, 4: None}
CURRENT = {
    "orders": {0: [1, 2], 1: [2, 3], 2: [3, 1]},
    "payments": {0: [1, 2, 3]},
    "other": {0: [1]},
}


def test_proposal_keeps_partitions_and_rf_and_reports_the_current_assignment() -> None:
    move = propose_move(CURRENT, ["orders", "payments"], [2, 3, 4], CLUSTER, start_index=0)
    assert move.current == {
        ("orders", 0): (1, 2),
        ("orders", 1): (2, 3),
        ("orders", 2): (3, 1),
        ("payments", 0): (1, 2, 3),
    }
    assert move.proposed == {
        ("orders", 0): (2, 3),
        ("orders", 1): (3, 4),
        ("orders", 2): (4, 2),
        ("payments", 0): (2, 3, 4),
    }
    assert not move.rack_aware
    assert move.notes == ()
    assert move.changed() == move.proposed
    assert [t.key for t in move.targets()] == sorted(move.proposed)


def test_only_changed_partitions_unless_all_are_asked() -> None:
    current = {"t": {0: [1, 2], 1: [2, 3], 2: [3, 1], 3: [2, 1]}}
    move = propose_move(current, ["t"], [1, 2, 3], CLUSTER, start_index=0)
    # start 0 over [1, 2, 3]: 0 -> (1, 2), 1 -> (2, 3), 2 -> (3, 1), then shift 1: 3 -> (1, 3)
    assert move.proposed[("t", 3)] == (1, 3)
    assert move.changed() == {("t", 3): (1, 3)}
    assert [t.key for t in move.targets()] == [("t", 3)]
    assert [t.key for t in move.targets(all_partitions=True)] == [("t", i) for i in range(4)]
    assert assignment_targets({("t", 1): (2,), ("t", 0): (1,)})[0].replicas == [1]


def test_a_new_order_alone_is_a_change() -> None:
    move = propose_move({"t": {0: [2, 1]}}, ["t"], [1, 2], CLUSTER, start_index=0)
    assert move.changed() == {("t", 0): (1, 2)}


def test_rack_aware_when_every_listed_broker_has_a_rack() -> None:
    cluster: dict[int, str | None] = {1: "a", 2: "a", 3: "b", 4: "b", 5: None}
    current = {"t": {p: [1, 2] for p in range(8)}}
    move = propose_move(current, ["t"], [1, 2, 3, 4], cluster, seed=3)
    assert move.rack_aware
    for replicas in move.proposed.values():
        assert {cluster[b] for b in replicas} == {"a", "b"}
    with pytest.raises(RackInformationError, match="--disable-rack-aware"):
        propose_move(current, ["t"], [1, 2, 5], cluster)
    plain = propose_move(current, ["t"], [1, 2, 5], cluster, rack_aware=False)
    assert not plain.rack_aware
    off = propose_move(current, ["t"], [1, 2, 3, 4], cluster, rack_aware=False, seed=3)
    assert not off.rack_aware


def test_deterministic_per_seed_and_topic() -> None:
    current = {f"t{i}": {p: [1] for p in range(6)} for i in range(12)}
    topics = sorted(current)
    first = propose_move(current, topics, [1, 2, 3, 4], CLUSTER)
    assert propose_move(current, topics, [1, 2, 3, 4], CLUSTER) == first
    # Different topics start on different brokers, as Kafka's random start index does.
    assert len({first.proposed[(t, 0)] for t in topics}) > 1
    others = [propose_move(current, topics, [1, 2, 3, 4], CLUSTER, seed=s) for s in range(1, 4)]
    assert any(o.proposed != first.proposed for o in others)


def test_explicit_start_index_is_kafkas_fixed_start_index() -> None:
    current = {"t": {p: [1, 2] for p in range(9)}}
    move = propose_move(current, ["t"], [4, 3, 2, 1], CLUSTER, start_index=2)
    expected = assign_replicas([1, 2, 3, 4], range(9), 2, start_index=2, replica_shift=2)
    assert move.proposed == {("t", p): r for p, r in expected.items()}


def test_unequal_rf_follows_the_lowest_partition_with_a_note() -> None:
    move = propose_move({"t": {0: [1, 2], 1: [1, 2, 3]}}, ["t"], [1, 2, 3], CLUSTER)
    assert {len(r) for r in move.proposed.values()} == {2}
    assert move.notes == (
        "topic t: partitions have different replication factors; all get 2 (that of partition 0)",
    )


@pytest.mark.parametrize(
    ("topics", "brokers", "start", "error", "message"),
    [
        ([], [1], None, GenerateError, "no topics to move"),
        (["orders", "orders"], [1, 2], None, GenerateError, "topics listed more than once"),
        (["orders"], [1, 2], -1, GenerateError, "start index must be >= 0"),
        (["orders"], [], None, BrokerListError, "the broker list is empty"),
        (["orders"], [1, 2, 1], None, BrokerListError, r"more than once: \[1\]"),
        (["orders"], [1, -2], None, BrokerListError, r"must be >= 0: \[-2\]"),
        (["orders"], [1, 9, 8], None, UnknownBrokerError, "brokers not in the cluster: 8, 9"),
        (["orders", "nope", "gone"], [1, 2], None, UnknownTopicError, "gone, nope"),
        (["payments"], [1, 2], None, InvalidReplicationFactorError, "replication factor 3"),
    ],
)
def test_propose_move_refuses(
    topics: list[str], brokers: list[int], start: int | None, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        propose_move(CURRENT, topics, brokers, CLUSTER, start_index=start)


def test_unknown_errors_list_their_items() -> None:
    with pytest.raises(UnknownBrokerError) as broker:
        propose_move(CURRENT, ["orders"], [1, 7], CLUSTER)
    assert broker.value.brokers == [7]
    with pytest.raises(UnknownTopicError) as topic:
        propose_move({**CURRENT, "empty": {}}, ["empty"], [1], CLUSTER)
    assert topic.value.topics == ["empty"]


@settings(max_examples=100, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["a", "b", "c", "d"]),
        st.tuples(st.integers(1, 20), st.integers(1, 3)),
        min_size=1,
    ),
    st.lists(st.integers(1, 6), min_size=3, max_size=6, unique=True),
    st.integers(0, 5),
)
def test_propose_move_properties(
    shapes: dict[str, tuple[int, int]], brokers: list[int], seed: int
) -> None:
    cluster: dict[int, str | None] = dict.fromkeys(range(1, 7))
    current = {t: {p: list(range(1, rf + 1)) for p in range(n)} for t, (n, rf) in shapes.items()}
    assume(all(rf <= len(brokers) for _, rf in shapes.values()))
    move = propose_move(current, sorted(shapes), brokers, cluster, seed=seed)
    assert move == propose_move(current, sorted(shapes), brokers, cluster, seed=seed)
    assert set(move.proposed) == set(move.current)
    for (topic, _), replicas in move.proposed.items():
        assert len(replicas) == shapes[topic][1]
        assert len(set(replicas)) == len(replicas)
        assert set(replicas) <= set(brokers)
    assert set(move.changed()) <= set(move.proposed)


# -- topics-to-move JSON --------------------------------------------------------------


def test_topics_to_move_json() -> None:
    text = '{"version": 1, "topics": [{"topic": "orders"}, {"topic": "payments"}]}'
    assert parse_topics_to_move(text) == ["orders", "payments"]
    assert parse_topics_to_move('{"topics": [{"topic": "a"}]}') == ["a"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "line 1 column 2"),
        ("[]", "topics: missing"),
        ('{"version": 1}', "topics: missing"),
        ('{"version": 2, "topics": [{"topic": "a"}]}', "version: unsupported version 2"),
        ('{"topics": []}', "topics: the list of topics to move is empty"),
        ('{"topics": [{"topic": "a"}], "x": 1}', "x: unknown field"),
        ('{"topics": [{"topic": "a"}, {"name": "b"}]}', r"topics\[1\]: must be an object"),
        ('{"topics": [{"topic": "a b"}]}', r"topics\[0\].topic: 'a b' is not a legal"),
        ('{"topics": [{"topic": "a"}, {"topic": "a"}]}', r"topics\[1\].topic: a is listed twice"),
    ],
)
def test_bad_topics_to_move_json(text: str, message: str) -> None:
    with pytest.raises(TopicsToMoveError, match=message):
        parse_topics_to_move(text)
