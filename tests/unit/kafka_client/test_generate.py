"""Proposals of kafka-reassign-partitions --generate: Kafka's replica placement, pure."""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from kpo_kafka.assignment import (
    BrokerListError,
    InconsistentBrokerRacksError,
    InvalidReplicationFactorError,
    assign_replicas,
)
from kpo_kafka.generate import (
    GenerateError,
    TopicsToMoveError,
    UnknownBrokerError,
    UnknownTopicError,
    assignment_targets,
    parse_topics_to_move,
    propose_move,
)

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
    with pytest.raises(InconsistentBrokerRacksError, match="--disable-rack-aware"):
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
