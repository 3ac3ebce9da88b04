from dataclasses import replace
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


@pytest.mark.parametrize(
    "text", ["0", "a:1", "0:1,x", "0:-1", "**", "99999999999999999999:1", "0:2147483648"]
)
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


# --- ownership: plan against the ledger ------------------------------------------------

B, T = ConfigResourceKind.BROKER, ConfigResourceKind.TOPIC


def _roundtrip(ledger: ThrottleLedger) -> ThrottleLedger:
    """The ledger as a restarted operator reads it back from its ConfigMap."""
    return ThrottleLedger.from_json(ledger.to_json())


def _configs(
    brokers: dict[int, dict[str, str]], topics: dict[str, dict[str, str]]
) -> ThrottleConfigs:
    universe = _universe()
    for broker, configs in brokers.items():
        universe.brokers[broker] = dict(configs)
    for topic, configs in topics.items():
        universe.topics[topic] = dict(configs)
    return universe


def _step(
    wanted: EffectiveThrottles, live: ThrottleConfigs, ledger: ThrottleLedger
) -> tuple[ThrottleConfigs, ThrottleLedger]:
    """One sync that fully succeeds, then an operator restart (ledger through JSON)."""
    decided = plan(wanted, live, ledger)
    return _with_universe(_apply(live, decided.changes)), _roundtrip(decided.settled(()))


def _with_universe(configs: ThrottleConfigs) -> ThrottleConfigs:
    return _configs(configs.brokers, configs.topics)


def _kafka_tool_throttle() -> ThrottleConfigs:
    """What ``kafka-reassign-partitions --execute --throttle 262144`` leaves on topic a."""
    return _configs(
        {b: {LEADER_RATE: "262144", FOLLOWER_RATE: "262144"} for b in (0, 1)},
        {"a": {LEADER_REPLICAS: "0:0", FOLLOWER_REPLICAS: "0:1"}},
    )


def test_foreign_lists_are_kept_and_foreign_rates_left_alone_and_reported() -> None:
    live = _kafka_tool_throttle()
    wanted = EffectiveThrottles(
        brokers={b: {LEADER_RATE: 1000} for b in (0, 1, 2)},
        topics={"a": {FOLLOWER_REPLICAS: _tr("0:2")}, "b": {LEADER_REPLICAS: _tr("*")}},
    )

    decided = plan(wanted, live, ThrottleLedger())

    assert decided.changes == [
        ConfigChange(B, "2", LEADER_RATE, OpType.SET, "1000"),
        ConfigChange(T, "a", FOLLOWER_REPLICAS, OpType.SET, "0:1,0:2"),
        ConfigChange(T, "b", LEADER_REPLICAS, OpType.SET, "*"),
    ]
    assert [
        (f.resource_name, f.key, f.foreign, f.wanted, f.overridden) for f in decided.foreign
    ] == [
        ("0", LEADER_RATE, "262144", "1000", False),
        ("1", LEADER_RATE, "262144", "1000", False),
    ]
    assert "broker 0 leader.replication.throttled.rate: '262144'" in decided.foreign[0].message
    assert decided.ledger.brokers == {2: {LEADER_RATE: OwnedRate(1000)}}
    assert decided.ledger.topics["a"] == {FOLLOWER_REPLICAS: OwnedReplicas(frozenset({(0, 2)}))}
    assert decided.drift == []

    # Nobody wants anything any more: exactly the tool's configs remain.
    live, ledger = _step(wanted, live, ThrottleLedger())
    live, ledger = _step(EffectiveThrottles(), live, ledger)
    assert live == _kafka_tool_throttle()
    assert ledger == ThrottleLedger()


def test_kafka_verify_removing_a_key_is_repaired_only_for_owned_pairs() -> None:
    wanted = EffectiveThrottles(topics={"a": {FOLLOWER_REPLICAS: _tr("0:2")}})
    live, ledger = _step(wanted, _kafka_tool_throttle(), ThrottleLedger())
    assert live.topics["a"][FOLLOWER_REPLICAS] == "0:1,0:2"
    # The tool's --verify clears the whole key on its topic, the operator's pair with it.
    del live.topics["a"][FOLLOWER_REPLICAS]

    decided = plan(wanted, live, ledger)

    repair = ConfigChange(T, "a", FOLLOWER_REPLICAS, OpType.SET, "0:2")
    assert decided.changes == [repair]
    assert decided.drift == [repair]
    assert decided.foreign == []


def test_foreign_wildcard_stays_and_is_never_owned() -> None:
    live = _configs({}, {"a": {LEADER_REPLICAS: "*"}})
    wanted = EffectiveThrottles(topics={"a": {LEADER_REPLICAS: _tr("0:1")}})

    decided = plan(wanted, live, ThrottleLedger())
    assert decided.changes == []
    assert decided.ledger.topics == {}

    live, ledger = _step(EffectiveThrottles(), live, decided.ledger)
    assert live.topics["a"] == {LEADER_REPLICAS: "*"}
    # Once the foreign "*" is gone the operator's pairs are written (not a drift repair).
    del live.topics["a"][LEADER_REPLICAS]
    decided = plan(wanted, live, ledger)
    assert decided.changes == [ConfigChange(T, "a", LEADER_REPLICAS, OpType.SET, "0:1")]
    assert decided.drift == []


def test_owned_wildcard_gives_back_the_foreign_pairs_it_covered() -> None:
    live = _configs({}, {"a": {FOLLOWER_REPLICAS: "0:1"}})
    wanted = EffectiveThrottles(topics={"a": {FOLLOWER_REPLICAS: _tr("*")}})

    live, ledger = _step(wanted, live, ThrottleLedger())
    assert live.topics["a"] == {FOLLOWER_REPLICAS: "*"}
    assert ledger.topics["a"][FOLLOWER_REPLICAS] == OwnedReplicas(
        wildcard=True, covered=frozenset({(0, 1)})
    )
    narrower = EffectiveThrottles(topics={"a": {FOLLOWER_REPLICAS: _tr("1:2")}})
    live, ledger = _step(narrower, live, ledger)
    assert live.topics["a"] == {FOLLOWER_REPLICAS: "0:1,1:2"}
    live, ledger = _step(EffectiveThrottles(), live, ledger)
    assert live.topics["a"] == {FOLLOWER_REPLICAS: "0:1"}
    assert ledger == ThrottleLedger()


def test_a_pair_both_foreign_and_wanted_stays_foreign() -> None:
    live = _configs({}, {"a": {LEADER_REPLICAS: "0:0"}})
    wanted = EffectiveThrottles(topics={"a": {LEADER_REPLICAS: _tr("0:0,1:1")}})
    live, ledger = _step(wanted, live, ThrottleLedger())
    assert live.topics["a"] == {LEADER_REPLICAS: "0:0,1:1"}
    assert ledger.topics["a"][LEADER_REPLICAS].pairs == {(1, 1)}
    live, ledger = _step(EffectiveThrottles(), live, ledger)
    assert live.topics["a"] == {LEADER_REPLICAS: "0:0"}


def test_claimed_broker_overrides_a_foreign_rate_and_puts_it_back() -> None:
    live = _kafka_tool_throttle()
    wanted = EffectiveThrottles(brokers={0: {LEADER_RATE: 1000}}, claims={(0, LEADER_RATE)})

    decided = plan(wanted, live, ThrottleLedger())
    assert decided.changes == [ConfigChange(B, "0", LEADER_RATE, OpType.SET, "1000")]
    [override] = decided.foreign
    assert (override.foreign, override.wanted, override.overridden) == ("262144", "1000", True)
    assert "replaced by '1000'" in override.message
    assert decided.write_ahead.brokers[0][LEADER_RATE] == OwnedRate(1000, "262144", pending=True)

    live, ledger = _step(wanted, live, ThrottleLedger())
    assert ledger.brokers[0][LEADER_RATE] == OwnedRate(1000, "262144")
    # Still held: the override keeps being reported (the quota's status says so).
    assert [f.overridden for f in plan(wanted, live, ledger).foreign] == [True]
    live, ledger = _step(EffectiveThrottles(), live, ledger)
    assert live == _kafka_tool_throttle()
    assert ledger == ThrottleLedger()


def test_hand_change_of_an_owned_rate_is_drift_while_wanted_and_released_after() -> None:
    wanted = EffectiveThrottles(brokers={2: {FOLLOWER_RATE: 500}})
    live, ledger = _step(wanted, _universe(), ThrottleLedger())
    live.brokers[2][FOLLOWER_RATE] = "9999"

    decided = plan(wanted, live, ledger)
    repair = ConfigChange(B, "2", FOLLOWER_RATE, OpType.SET, "500")
    assert (decided.changes, decided.drift) == ([repair], [repair])

    live.brokers[2][FOLLOWER_RATE] = "9999"  # changed again, and nobody wants it now
    decided = plan(EffectiveThrottles(), live, ledger)
    assert decided.changes == []
    assert decided.ledger == ThrottleLedger()  # released: someone else's value now


def test_owned_rate_deleted_by_hand_is_written_again_as_drift() -> None:
    wanted = EffectiveThrottles(brokers={1: {LOG_DIR_MOVE_RATE: 70}})
    live, ledger = _step(wanted, _universe(), ThrottleLedger())
    del live.brokers[1][LOG_DIR_MOVE_RATE]
    decided = plan(wanted, live, ledger)
    assert decided.drift == [ConfigChange(B, "1", LOG_DIR_MOVE_RATE, OpType.SET, "70")]


def test_changing_an_owned_value_is_not_drift() -> None:
    live, ledger = _step(
        EffectiveThrottles(brokers={1: {LEADER_RATE: 70}}), _universe(), ThrottleLedger()
    )
    decided = plan(EffectiveThrottles(brokers={1: {LEADER_RATE: 80}}), live, ledger)
    assert decided.changes == [ConfigChange(B, "1", LEADER_RATE, OpType.SET, "80")]
    assert decided.drift == []
    assert decided.write_ahead.brokers[1][LEADER_RATE] == OwnedRate(80, pending=True, previous=70)


def test_crash_between_write_ahead_and_apply_neither_leaks_nor_deletes() -> None:
    live = _configs({0: {LEADER_RATE: "262144"}}, {"a": {LEADER_REPLICAS: "0:0"}})
    wanted = EffectiveThrottles(
        brokers={0: {LEADER_RATE: 1000}, 1: {LEADER_RATE: 1000}},
        topics={"a": {LEADER_REPLICAS: _tr("1:1")}},
        claims={(0, LEADER_RATE)},
    )
    ahead = _roundtrip(plan(wanted, live, ThrottleLedger()).write_ahead)

    # Restarted before anything was applied: what is wanted is written, no false drift.
    decided = plan(wanted, live, ahead)
    assert len(decided.changes) == 3 and decided.drift == []
    # ... or nothing is wanted any more: the foreign values stay, nothing is left owned.
    decided = plan(EffectiveThrottles(), live, ahead)
    assert decided.changes == []
    assert decided.ledger == ThrottleLedger()


def test_crash_between_apply_and_settling_still_removes_and_restores() -> None:
    live = _configs({0: {LEADER_RATE: "262144"}}, {"a": {LEADER_REPLICAS: "0:0"}})
    wanted = EffectiveThrottles(
        brokers={0: {LEADER_RATE: 1000}, 1: {LEADER_RATE: 1000}},
        topics={"a": {LEADER_REPLICAS: _tr("1:1")}},
        claims={(0, LEADER_RATE)},
    )
    decided = plan(wanted, live, ThrottleLedger())
    live = _with_universe(_apply(live, decided.changes))
    ahead = _roundtrip(decided.write_ahead)  # the settled ledger was never saved

    assert plan(wanted, live, ahead).changes == []
    live, ledger = _step(EffectiveThrottles(), live, ahead)
    assert live == _configs({0: {LEADER_RATE: "262144"}}, {"a": {LEADER_REPLICAS: "0:0"}})
    assert ledger == ThrottleLedger()


def test_write_ahead_keeps_owned_pairs_being_removed() -> None:
    live, ledger = _step(
        EffectiveThrottles(topics={"a": {LEADER_REPLICAS: _tr("0:1,1:1")}}),
        _configs({}, {"a": {LEADER_REPLICAS: "2:2"}}),
        ThrottleLedger(),
    )
    decided = plan(EffectiveThrottles(topics={"a": {LEADER_REPLICAS: _tr("0:1")}}), live, ledger)
    assert decided.changes == [ConfigChange(T, "a", LEADER_REPLICAS, OpType.SET, "0:1,2:2")]
    assert decided.write_ahead.topics["a"][LEADER_REPLICAS].pairs == {(0, 1), (1, 1)}
    assert decided.ledger.topics["a"][LEADER_REPLICAS].pairs == {(0, 1)}
    # A failed write keeps the write-ahead entries; a successful one the new ones.
    assert decided.settled([(T, "a")]) == decided.write_ahead
    assert decided.settled([(B, "0")]) == decided.ledger


def test_malformed_foreign_list_is_left_alone_and_reported() -> None:
    live = _configs({}, {"a": {LEADER_REPLICAS: "0:x"}})
    wanted = EffectiveThrottles(topics={"a": {LEADER_REPLICAS: _tr("0:1")}})
    decided = plan(wanted, live, ThrottleLedger())
    assert decided.changes == []
    assert [(f.resource_type, f.foreign, f.wanted) for f in decided.foreign] == [(T, "0:x", "0:1")]


def test_ledger_of_offline_brokers_is_kept_and_of_deleted_topics_dropped() -> None:
    ledger = ThrottleLedger(
        "c1",
        brokers={7: {LEADER_RATE: OwnedRate(5)}},
        topics={"gone": {LEADER_REPLICAS: OwnedReplicas(frozenset({(0, 1)}))}},
    )
    decided = plan(EffectiveThrottles(), _universe(), ledger)
    assert decided.changes == []
    assert decided.ledger == ThrottleLedger("c1", brokers={7: {LEADER_RATE: OwnedRate(5)}})


_foreign_rates = st.dictionaries(
    st.integers(0, 3),
    st.dictionaries(
        st.sampled_from([LEADER_RATE, FOLLOWER_RATE, LOG_DIR_MOVE_RATE]),
        st.integers(1, 50).map(str),
        min_size=1,
    ),
    max_size=3,
)
_foreign_lists = st.dictionaries(
    st.sampled_from(["a", "b", "c"]),
    st.dictionaries(
        st.sampled_from([LEADER_REPLICAS, FOLLOWER_REPLICAS]),
        _replicas.map(lambda r: r.render()),
        min_size=1,
    ),
    max_size=3,
)


@settings(max_examples=200, deadline=None)
@given(
    st.tuples(_foreign_rates, _foreign_lists),
    _contributions,
    st.lists(st.booleans(), min_size=5, max_size=5),
    st.integers(0, 4),
)
def test_foreign_throttles_survive_any_sequence_of_syncs(
    foreign: tuple[dict[int, dict[str, str]], dict[str, dict[str, str]]],
    cs: list[Contribution],
    claim: list[bool],
    index: int,
) -> None:
    cs = [replace(c, claims=claim[i]) for i, c in enumerate(cs)]
    start = _configs(*foreign)
    live, ledger = _step(merge(cs), start, ThrottleLedger())
    wanted = merge(cs)
    for topic, lists in wanted.topics.items():  # every wanted pair is throttled
        for key, replicas in lists.items():
            have = _tr(live.topics[topic][key])
            assert have.wildcard or (not replicas.wildcard and replicas.replicas <= have.replicas)
    for broker, rates in wanted.brokers.items():  # a wanted rate differs only if foreign
        for key, rate in rates.items():
            if live.brokers[broker].get(key) != str(rate):
                assert (broker, key) not in wanted.claims
                assert live.brokers[broker][key] == start.brokers[broker][key]
    assert plan(wanted, live, ledger).changes == []  # stable
    rest = [c for i, c in enumerate(cs) if i != index]
    live, ledger = _step(merge(rest), live, ledger)
    live, ledger = _step(EffectiveThrottles(), live, ledger)
    normalised = {t: {k: _tr(v) for k, v in c.items()} for t, c in live.topics.items()}
    assert normalised == {t: {k: _tr(v) for k, v in c.items()} for t, c in start.topics.items()}
    assert live.brokers == start.brokers
    assert ledger.brokers == {} and ledger.topics == {}


def test_removed_owned_pairs_no_longer_wanted_are_not_drift() -> None:
    live, ledger = _step(
        EffectiveThrottles(topics={"a": {LEADER_REPLICAS: _tr("0:1")}}),
        _universe(),
        ThrottleLedger(),
    )
    del live.topics["a"][LEADER_REPLICAS]
    decided = plan(EffectiveThrottles(topics={"a": {LEADER_REPLICAS: _tr("1:1")}}), live, ledger)
    assert decided.changes == [ConfigChange(T, "a", LEADER_REPLICAS, OpType.SET, "1:1")]
    assert decided.drift == []


def test_garbled_owned_list_is_drift_while_wanted_and_deleted_after() -> None:
    live, ledger = _step(
        EffectiveThrottles(topics={"a": {LEADER_REPLICAS: _tr("0:1")}}),
        _universe(),
        ThrottleLedger(),
    )
    live.topics["a"][LEADER_REPLICAS] = "0:x"
    wanted = EffectiveThrottles(topics={"a": {LEADER_REPLICAS: _tr("0:1")}})
    repair = ConfigChange(T, "a", LEADER_REPLICAS, OpType.SET, "0:1")
    assert plan(wanted, live, ledger).drift == [repair]
    assert plan(EffectiveThrottles(), live, ledger).changes == [
        ConfigChange(T, "a", LEADER_REPLICAS, OpType.DELETE)
    ]
