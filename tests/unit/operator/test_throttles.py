from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kpo_kafka.admin_types import ConfigResourceKind, PartitionInfo
from kpo_kafka.specs import PartitionReassignmentSpec, TopicReplicaQuotaSpec
from kpo_operator.model import ClusterView
from kpo_operator.throttle_ledger import OwnedRate, OwnedReplicas, ThrottleLedger
from kpo_operator.throttles import (
    FOLLOWER_RATE,
    FOLLOWER_REPLICAS,
    LEADER_RATE,
    LEADER_REPLICAS,
    LOG_DIR_MOVE_RATE,
    ConfigChange,
    Contribution,
    EffectiveThrottles,
    OpType,
    ThrottleConfigs,
    ThrottleConflict,
    ThrottledReplicas,
    ThrottleFormatError,
    merge,
    plan,
    quota_contribution,
    reassignment_contribution,
)

VIEW = ClusterView(
    topics={
        "test": {
            0: PartitionInfo((0, 1), (0, 1), 0),
            2: PartitionInfo((0, 1), (0, 1), 0),
        },
        "orders": {0: PartitionInfo((1, 2), (1, 2), 1)},
    },
    live_brokers=frozenset({0, 1, 2, 3}),
)


def _tr(text: str) -> ThrottledReplicas:
    return ThrottledReplicas.parse(text)


@pytest.mark.parametrize(
    ("text", "wildcard", "pairs", "rendered"),
    [
        ("*", True, set(), "*"),
        (" * ", True, set(), "*"),
        ("1:102,0:101", False, {(0, 101), (1, 102)}, "0:101,1:102"),
        ("0:1, 0:1 ,", False, {(0, 1)}, "0:1"),
        ("", False, set(), ""),
    ],
)
def test_throttled_replicas_parse_render(
    text: str, wildcard: bool, pairs: set[tuple[int, int]], rendered: str
) -> None:
    value = _tr(text)
    assert (value.wildcard, set(value.replicas), value.render()) == (wildcard, pairs, rendered)


@pytest.mark.parametrize("text", ["0", "a:1", "0:1,x", "0:-1", "**"])
def test_throttled_replicas_parse_errors(text: str) -> None:
    with pytest.raises(ThrottleFormatError):
        _tr(text)


def test_union_wildcard_absorbs() -> None:
    assert _tr("0:1").union(_tr("1:2")).render() == "0:1,1:2"
    assert _tr("0:1").union(_tr("*")) == _tr("*")


def _reassign(throttle: dict[str, Any] | None, *parts: dict[str, Any]) -> PartitionReassignmentSpec:
    obj: dict[str, Any] = {"partitions": list(parts)}
    if throttle is not None:
        obj["throttle"] = throttle
    return PartitionReassignmentSpec.from_object(obj)


def test_reassignment_contribution_like_kafka_tool() -> None:
    # crds/examples/partitionreassignment-move-replica.yaml: test-2 from [0, 1] to [2, 1].
    spec = _reassign(
        {"replicationRate": 10485760},
        {"topic": "test", "partition": 2, "replicas": [2, 1]},
        {"topic": "test", "partition": 0, "replicas": [0, 1]},  # not moving
    )
    c = reassignment_contribution("pr/a", spec, VIEW)
    assert {t: {k: v.render() for k, v in e.items()} for t, e in c.topic_replicas.items()} == {
        "test": {LEADER_REPLICAS: "2:0,2:1", FOLLOWER_REPLICAS: "2:2"}
    }
    rate = {LEADER_RATE: 10485760, FOLLOWER_RATE: 10485760}
    assert c.broker_rates == {0: rate, 1: rate, 2: rate}


def test_reassignment_contribution_is_stable_while_in_flight() -> None:
    spec = _reassign({"replicationRate": 5}, {"topic": "test", "partition": 2, "replicas": [2, 1]})
    moving = ClusterView(
        topics={"test": {2: PartitionInfo((2, 1, 0), (0, 1), 0, adding=(2,), removing=(0,))}},
        live_brokers=VIEW.live_brokers,
    )
    assert reassignment_contribution("pr/a", spec, moving) == reassignment_contribution(
        "pr/a", spec, VIEW
    )


def test_reorder_only_throttles_leaders_but_no_followers() -> None:
    spec = _reassign({"replicationRate": 5}, {"topic": "test", "partition": 2, "replicas": [1, 0]})
    c = reassignment_contribution("pr/a", spec, VIEW)
    assert {k: v.render() for k, v in c.topic_replicas["test"].items()} == {
        LEADER_REPLICAS: "2:0,2:1"
    }
    assert set(c.broker_rates) == {0, 1}


@pytest.mark.parametrize(
    ("throttle", "expected_rates"),
    [
        (None, {}),
        ({"logDirMoveRate": 7}, {3: {LOG_DIR_MOVE_RATE: 7}}),
        (
            {"logDirMoveRate": 7, "replicationRate": 9},
            {
                1: {LEADER_RATE: 9, FOLLOWER_RATE: 9},
                2: {LEADER_RATE: 9, FOLLOWER_RATE: 9},
                3: {LEADER_RATE: 9, FOLLOWER_RATE: 9, LOG_DIR_MOVE_RATE: 7},
            },
        ),
    ],
)
def test_log_dir_throttle_only_on_brokers_with_explicit_dir(
    throttle: dict[str, Any] | None, expected_rates: dict[int, dict[str, int]]
) -> None:
    spec = _reassign(
        throttle, {"topic": "orders", "partition": 0, "replicas": [3, 1], "logDirs": ["/a", "any"]}
    )
    assert reassignment_contribution("pr/a", spec, VIEW).broker_rates == expected_rates


def test_quota_contribution_all_topics_all_brokers() -> None:
    spec = TopicReplicaQuotaSpec.from_object(
        {
            "topics": {"all": True},
            "leaderReplicationThrottledRate": 50,
            "followerReplicationThrottledReplicas": "*",
        }
    )
    c = quota_contribution("q/all", spec, VIEW)
    assert c.broker_rates == {b: {LEADER_RATE: 50} for b in (0, 1, 2, 3)}
    assert c.topic_replicas == {t: {FOLLOWER_REPLICAS: _tr("*")} for t in ("orders", "test")}


def test_quota_contribution_named() -> None:
    spec = TopicReplicaQuotaSpec.from_object(
        {
            "topics": {"names": ["orders"]},
            "brokers": [1],
            "leaderReplicationThrottledReplicas": "0:1",
        }
    )
    c = quota_contribution("q/n", spec, VIEW)
    assert (c.broker_rates, c.topic_replicas) == ({}, {"orders": {LEADER_REPLICAS: _tr("0:1")}})


def test_merge_lowest_rate_wins_and_reports_conflict() -> None:
    a = Contribution("q/a", {1: {LEADER_RATE: 100, FOLLOWER_RATE: 5}})
    b = Contribution("q/b", {1: {LEADER_RATE: 30}, 2: {LEADER_RATE: 30}})
    c = Contribution("q/c", {1: {LEADER_RATE: 30}})
    eff = merge([a, b, c])
    assert eff.brokers == {1: {LEADER_RATE: 30, FOLLOWER_RATE: 5}, 2: {LEADER_RATE: 30}}
    assert eff.conflicts == [
        ThrottleConflict(1, LEADER_RATE, "q/b", 30, (("q/a", 100), ("q/c", 30)))
    ]
    assert "q/b wins with 30 bytes/s (the lowest rate wins; q/a wants 100" in (
        eff.conflicts[0].message
    )


def test_merge_unions_replica_lists() -> None:
    a = Contribution("a", topic_replicas={"t": {LEADER_REPLICAS: _tr("0:1")}})
    b = Contribution("b", topic_replicas={"t": {LEADER_REPLICAS: _tr("1:2")}})
    c = Contribution("c", topic_replicas={"u": {FOLLOWER_REPLICAS: _tr("*")}})
    d = Contribution("d", topic_replicas={"u": {FOLLOWER_REPLICAS: _tr("3:3")}})
    assert merge([a, b, c, d]).render().topics == {
        "t": {LEADER_REPLICAS: "0:1,1:2"},
        "u": {FOLLOWER_REPLICAS: "*"},
    }


def test_plan_sets_deletes_owned_values_and_ignores_other_keys() -> None:
    eff = EffectiveThrottles(
        brokers={1: {LEADER_RATE: 30}, 2: {FOLLOWER_RATE: 5}},
        topics={"t": {LEADER_REPLICAS: _tr("0:1,1:2")}},
    )
    current = ThrottleConfigs(
        brokers={
            1: {LEADER_RATE: "30", "log.retention.ms": "1"},
            2: {FOLLOWER_RATE: "6", LEADER_RATE: "9"},
            3: {LOG_DIR_MOVE_RATE: "4", "num.io.threads": "8"},
        },
        topics={
            "t": {LEADER_REPLICAS: "1:2,0:1", "retention.ms": "5"},
            "v": {FOLLOWER_REPLICAS: "garbage"},
        },
    )
    owned = ThrottleLedger(
        brokers={
            1: {LEADER_RATE: OwnedRate(30)},
            2: {FOLLOWER_RATE: OwnedRate(6), LEADER_RATE: OwnedRate(9)},
            3: {LOG_DIR_MOVE_RATE: OwnedRate(4)},
        },
        topics={
            "t": {LEADER_REPLICAS: OwnedReplicas(frozenset({(0, 1), (1, 2)}))},
            "v": {FOLLOWER_REPLICAS: OwnedReplicas(frozenset({(0, 1)}))},
        },
    )
    b, t = ConfigResourceKind.BROKER, ConfigResourceKind.TOPIC
    # Sorted by (resource kind, name, key): brokers before topics.
    assert plan(eff, current, owned).changes == [
        ConfigChange(b, "2", FOLLOWER_RATE, OpType.SET, "5"),
        ConfigChange(b, "2", LEADER_RATE, OpType.DELETE),
        ConfigChange(b, "3", LOG_DIR_MOVE_RATE, OpType.DELETE),
        ConfigChange(t, "v", FOLLOWER_REPLICAS, OpType.DELETE),
    ]


def test_plan_repairs_garbled_owned_value() -> None:
    eff = EffectiveThrottles(topics={"t": {LEADER_REPLICAS: _tr("0:1")}})
    current = ThrottleConfigs(topics={"t": {LEADER_REPLICAS: "0:x"}})
    owned = ThrottleLedger(topics={"t": {LEADER_REPLICAS: OwnedReplicas(frozenset({(0, 1)}))}})
    assert plan(eff, current, owned).changes == [
        ConfigChange(ConfigResourceKind.TOPIC, "t", LEADER_REPLICAS, OpType.SET, "0:1")
    ]


# --- properties -------------------------------------------------------------------------

_pairs = st.frozensets(st.tuples(st.integers(0, 3), st.integers(0, 3)), max_size=4)
_replicas = st.one_of(
    st.just(ThrottledReplicas(wildcard=True)),
    _pairs.filter(bool).map(lambda p: ThrottledReplicas(replicas=p)),
)
_rates = st.dictionaries(
    st.integers(0, 3),
    st.dictionaries(
        st.sampled_from([LEADER_RATE, FOLLOWER_RATE, LOG_DIR_MOVE_RATE]),
        st.integers(1, 50),
        min_size=1,
    ),
    max_size=3,
)
_lists = st.dictionaries(
    st.sampled_from(["a", "b", "c"]),
    st.dictionaries(st.sampled_from([LEADER_REPLICAS, FOLLOWER_REPLICAS]), _replicas, min_size=1),
    max_size=3,
)
_contributions = st.lists(st.tuples(_rates, _lists), max_size=5).map(
    lambda items: [Contribution(f"src{i}", r, t) for i, (r, t) in enumerate(items)]
)


def _apply(configs: ThrottleConfigs, changes: list[ConfigChange]) -> ThrottleConfigs:
    brokers = {b: dict(c) for b, c in configs.brokers.items()}
    topics = {t: dict(c) for t, c in configs.topics.items()}
    for ch in changes:
        side: dict[Any, dict[str, str]]
        if ch.resource_type is ConfigResourceKind.BROKER:
            side, name = brokers, int(ch.resource_name)
        else:
            side, name = topics, ch.resource_name
        if ch.op is OpType.SET:
            assert ch.value is not None
            side.setdefault(name, {})[ch.key] = ch.value
        else:
            del side[name][ch.key]
    return ThrottleConfigs(
        {b: c for b, c in brokers.items() if c}, {t: c for t, c in topics.items() if c}
    )


def _universe() -> ThrottleConfigs:
    """Brokers 0-3 and topics a-c with none of the throttle keys set."""
    return ThrottleConfigs({b: {} for b in range(4)}, {t: {} for t in "abc"})


@settings(max_examples=150, deadline=None)
@given(_contributions, st.randoms())
def test_merge_is_order_independent(cs: list[Contribution], rnd: Any) -> None:
    shuffled = list(cs)
    rnd.shuffle(shuffled)
    assert merge(shuffled) == merge(cs)


@settings(max_examples=150, deadline=None)
@given(_contributions, st.integers(0, 4))
def test_removed_contribution_leaves_no_trace(cs: list[Contribution], index: int) -> None:
    foreign = ThrottleConfigs({0: {"num.io.threads": "8"}}, {"a": {"retention.ms": "1"}})
    before = merge(cs).render()
    live = ThrottleConfigs(
        {b: {**foreign.brokers.get(b, {}), **c} for b, c in before.brokers.items()},
        {t: {**foreign.topics.get(t, {}), **c} for t, c in before.topics.items()},
    )
    live.brokers.setdefault(0, {}).update(foreign.brokers[0])
    live.topics.setdefault("a", {}).update(foreign.topics["a"])
    for broker in range(4):
        live.brokers.setdefault(broker, {})
    for topic in "abc":
        live.topics.setdefault(topic, {})
    owned = plan(merge(cs), _universe(), ThrottleLedger()).ledger  # the operator wrote `before`
    assert plan(merge(cs), live, owned).changes == []
    rest = [c for i, c in enumerate(cs) if i != index]
    after = _apply(live, plan(merge(rest), live, owned).changes)
    expected = merge(rest).render()
    owned_after = ThrottleConfigs(
        {
            b: {k: v for k, v in c.items() if k != "num.io.threads"}
            for b, c in after.brokers.items()
        },
        {t: {k: v for k, v in c.items() if k != "retention.ms"} for t, c in after.topics.items()},
    )
    owned_after = ThrottleConfigs(
        {b: c for b, c in owned_after.brokers.items() if c},
        {t: c for t, c in owned_after.topics.items() if c},
    )
    assert owned_after == expected
    assert after.brokers[0]["num.io.threads"] == "8"
    assert after.topics["a"]["retention.ms"] == "1"
    if not rest:
        assert owned_after == ThrottleConfigs()
