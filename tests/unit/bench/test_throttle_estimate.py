from pathlib import Path

import pytest

from kpo_bench.cli import build_parser
from kpo_bench.results import (
    THROTTLE_A,
    THROTTLE_B,
    THROTTLE_C,
    Measured,
    SystemResult,
    estimate_rows,
    format_deviation,
    report_json,
)
from kpo_bench.runner import ONLY_THROTTLE, plan_steps
from kpo_bench.settings import DEFAULT, MIB
from kpo_bench.throttle_plan import (
    EXPERIMENTS,
    PartitionMove,
    ThrottlePlanError,
    copied_bytes,
    deviation,
    estimate_s,
    follower_replicas_value,
    involved_brokers,
    leader_replicas_value,
    throttled_followers,
    throttled_leaders,
    within_tolerance,
)
from kpo_bench.throughput import Transport

SIZE = 20 * MIB
R = MIB


def by_key(key: str) -> tuple[PartitionMove, ...]:
    return next(e for e in EXPERIMENTS if e.key == key).moves


def sizes(moves: tuple[PartitionMove, ...]) -> dict[str, int]:
    return {m.topic: SIZE for m in moves}


def test_the_three_experiments_have_their_shapes() -> None:
    a, b, c = by_key("a"), by_key("b"), by_key("c")
    assert (throttled_leaders(a), throttled_followers(a)) == ({0}, {1, 2})
    assert (throttled_leaders(b), throttled_followers(b)) == ({0, 1}, {2})
    assert (throttled_leaders(c), throttled_followers(c)) == ({0, 1}, {1, 2})
    assert all(len(e.moves) == 2 for e in EXPERIMENTS)
    assert len({m.topic for e in EXPERIMENTS for m in e.moves}) == 6


def test_shared_leader_or_follower_doubles_the_estimate() -> None:
    # The estimate: cluster rate = min(distinct leaders, distinct followers) * R.
    for key, expected in (("a", 2 * SIZE / R), ("b", 2 * SIZE / R), ("c", SIZE / R)):
        moves = by_key(key)
        assert estimate_s(copied_bytes(moves, sizes(moves)), moves, R) == pytest.approx(expected)
    assert estimate_s(copied_bytes(by_key("c"), sizes(by_key("c"))), by_key("c"), R) == 20.0


def test_copied_bytes_counts_each_adding_replica() -> None:
    move = PartitionMove("t", (0,), (0, 1, 2))
    assert move.adding == (1, 2)
    assert copied_bytes([move], {"t": 100}) == 200
    with pytest.raises(KeyError):
        copied_bytes([move], {})


def test_estimate_rejects_a_bad_rate_or_nothing_to_copy() -> None:
    with pytest.raises(ThrottlePlanError):
        estimate_s(SIZE, by_key("a"), 0)
    with pytest.raises(ThrottlePlanError):
        estimate_s(SIZE, [PartitionMove("t", (0, 1), (1, 0))], R)


def test_throttle_lists_are_current_replicas_for_leaders_and_adding_for_followers() -> None:
    # As kafka-reassign-partitions --throttle writes them (KIP-73).
    move = PartitionMove("t", (0, 1), (1, 2, 0))
    assert move.leader == 0
    assert leader_replicas_value(move) == "0:0,0:1"
    assert follower_replicas_value(move) == "0:2"
    assert involved_brokers([move]) == {0, 1, 2}
    assert involved_brokers(by_key("b")) == {0, 1, 2}
    with pytest.raises(ThrottlePlanError):
        follower_replicas_value(PartitionMove("t", (0,), (0,)))


def test_deviation_and_tolerance() -> None:
    assert deviation(42.0, 40.0) == pytest.approx(0.05)
    assert deviation(38.0, 40.0) == pytest.approx(-0.05)
    assert within_tolerance(41.9, 40.0)
    assert within_tolerance(38.1, 40.0)
    assert not within_tolerance(43.0, 40.0)
    assert not within_tolerance(30.0, 40.0)
    with pytest.raises(ThrottlePlanError):
        deviation(1.0, 0.0)
    assert format_deviation(0.031, 0.05) == "+3.1% (within ±5%)"
    assert format_deviation(-0.2, 0.05) == "-20.0% (outside ±5%)"
    assert format_deviation(None, 0.05) == "-"


def test_estimate_rows_compare_each_system_with_its_own_estimate() -> None:
    ours = SystemResult("kpo", "dev")
    ours.record(THROTTLE_A, Measured(42.0, {"estimate_s": 40.0}))
    ours.record(THROTTLE_C, Measured(19.0, {"estimate_s": 20.0}))
    ours.record_error(THROTTLE_B, RuntimeError("refused"))
    kafka = SystemResult("apache-kafka", "3.9.2")
    kafka.record(THROTTLE_A, Measured(30.0, {"estimate_s": 41.0}))
    rows = {row.metric.key: row for row in estimate_rows(ours, kafka)}
    a = rows[THROTTLE_A.key]
    assert (a.estimate_s, a.ours, a.baseline) == (40.0, 42.0, 30.0)
    assert a.ours_deviation == pytest.approx(0.05)
    assert a.baseline_deviation == pytest.approx(30 / 41 - 1)
    b = rows[THROTTLE_B.key]
    assert (b.estimate_s, b.ours, b.ours_deviation, b.baseline) == (None, None, None, None)
    c = rows[THROTTLE_C.key]
    assert c.ours_deviation == pytest.approx(-0.05)
    assert c.baseline is None
    report = report_json({}, {}, ours, None)
    entry = report["throttle_vs_estimate"][0]
    assert entry["metric"] == THROTTLE_A.key
    assert entry["kpo_deviation"] == pytest.approx(0.05)


def test_only_throttle_plans_the_three_experiments() -> None:
    args = build_parser().parse_args(["--only", "throttle"])
    assert args.only == ONLY_THROTTLE
    assert build_parser().parse_args([]).only is None
    cluster, tools = object(), object()
    only = plan_steps(cluster, tools, DEFAULT, ONLY_THROTTLE)  # type: ignore[arg-type]
    assert [m for m, _ in only] == [THROTTLE_A, THROTTLE_B, THROTTLE_C]
    everything = [m.key for m, _ in plan_steps(cluster, tools, DEFAULT)]  # type: ignore[arg-type]
    assert everything[4:7] == [THROTTLE_A.key, THROTTLE_B.key, THROTTLE_C.key]
    assert everything[2] == "group_consume_mib_s"
    assert everything[-2:] == ["group_rebalance_s", "failover_s"]  # before a broker is killed
    groups = [m.key for m, _ in plan_steps(cluster, tools, DEFAULT, "groups")]  # type: ignore[arg-type]
    assert groups == ["produce_mib_s", "group_consume_mib_s", "group_rebalance_s"]
    with pytest.raises(ValueError):
        plan_steps(cluster, tools, DEFAULT, "bogus")  # type: ignore[arg-type]
    secured = Transport("SASL_SSL", Path("client.properties"), "-sasl-ssl")
    tls = [m.key for m, _ in plan_steps(cluster, tools, DEFAULT, "tls", secured)]  # type: ignore[arg-type]
    assert tls == [
        "produce_mib_s",
        "produce_sasl_ssl_mib_s",
        "consume_mib_s",
        "consume_sasl_ssl_mib_s",
    ]
    assert secured.topic("bench-produce") == "bench-produce-sasl-ssl"
    with pytest.raises(ValueError):
        plan_steps(cluster, tools, DEFAULT, "tls")  # type: ignore[arg-type]
    assert DEFAULT.throttle_bytes == 20 * MIB
