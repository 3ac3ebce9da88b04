from pathlib import Path

import pytest

from kpo_bench.cli import HEAL, _cluster_factories, build_parser, heal_workload_from
from kpo_bench.heal import (
    FIXED,
    FIXING,
    WAITING,
    HealTimeline,
    anomaly_of,
    copied_bytes,
    heal_values,
    namespace_of,
    policy_manifest,
    rf_restored,
    spread_assignment,
)
from kpo_bench.results import (
    BASELINE,
    HEAL_BUDGET,
    HEAL_DETECTED,
    HEAL_FIXING,
    HEAL_METRICS,
    HEAL_MOVED,
    HEAL_RATE,
    HEAL_RESTORED,
    HEAL_THRESHOLD,
    OURS,
    SystemResult,
    compare,
    ratio_meaning,
    report_json,
)
from kpo_bench.settings import DEFAULT_HEAL, MIB, QUICK_HEAL
from kpo_kafka.admin_types import PartitionInfo
from kpo_operator.balancing.spec import BalancingPolicySpec


def test_heal_sizes_leave_room_to_restore_the_rf() -> None:
    for heal in (DEFAULT_HEAL, QUICK_HEAL):
        assert heal.brokers > heal.replication_factor
        assert heal.replication_rate >= 1024  # the CRD's minimum
    assert DEFAULT_HEAL.payload_bytes == 500 * MIB
    assert QUICK_HEAL.payload_bytes == 100 * MIB
    assert DEFAULT_HEAL.as_json()["payload_bytes"] == 500 * MIB


def test_heal_is_a_section_and_quick_picks_its_sizes() -> None:
    parser = build_parser()
    assert parser.parse_args(["--only", HEAL]).only == HEAL
    assert heal_workload_from(parser.parse_args([])) == DEFAULT_HEAL
    assert heal_workload_from(parser.parse_args(["--quick"])) == QUICK_HEAL


def test_heal_clusters_have_the_heal_size(tmp_path: Path) -> None:
    factories = _cluster_factories(None, "/nowhere/*", {}, size=QUICK_HEAL.brokers)
    for system, make in factories.items():
        cluster = make(tmp_path / system, f"127.0.0.1:2181/heal-{system}")
        assert sorted(cluster.brokers) == list(range(QUICK_HEAL.brokers))


def test_spread_assignment_gives_every_broker_as_many_replicas_and_leaders() -> None:
    lists = spread_assignment([3, 0, 2, 1], 12, 3)
    assert lists[0] == [0, 1, 2] and lists[3] == [3, 0, 1]
    assert all(len(set(r)) == 3 for r in lists)
    for broker in range(4):
        assert sum(broker in r for r in lists) == 9
        assert sum(r[0] == broker for r in lists) == 3
    with pytest.raises(ValueError):
        spread_assignment([0, 1], 4, 3)


def test_policy_manifest_is_a_valid_balancing_policy() -> None:
    manifest = policy_manifest(QUICK_HEAL, namespace_of(OURS))
    assert manifest["metadata"]["namespace"] == "bench-heal-kpo"
    spec = BalancingPolicySpec.from_object(manifest)
    assert spec.detectors.broker_failure is not None
    assert spec.detectors.broker_failure.threshold == f"{QUICK_HEAL.threshold_s}s"
    assert spec.budget.replication_rate == QUICK_HEAL.replication_rate


def test_rf_restored_needs_live_replicas_a_leader_and_a_full_isr() -> None:
    live = [0, 2, 3]
    healed = {
        0: PartitionInfo((0, 2, 3), (0, 2, 3), 0),
        1: PartitionInfo((2, 3, 0), (3, 0, 2), 2),
    }
    assert rf_restored(healed, 2, 3, live)
    assert not rf_restored(healed, 3, 3, live)  # partition 2 unknown
    moving = {**healed, 1: PartitionInfo((2, 3, 0, 1), (2, 3, 0), 2, adding=(0,), removing=(1,))}
    assert not rf_restored(moving, 2, 3, live)
    dead = {**healed, 1: PartitionInfo((2, 3, 1), (2, 3), 2)}
    assert not rf_restored(dead, 2, 3, live)
    lagging = {**healed, 1: PartitionInfo((2, 3, 0), (2, 3), 2)}
    assert not rf_restored(lagging, 2, 3, live)
    leaderless = {**healed, 1: PartitionInfo((2, 3, 0), (2, 3, 0), -1)}
    assert not rf_restored(leaderless, 2, 3, live)


def test_copied_bytes_counts_only_replicas_new_on_their_broker() -> None:
    before = {0: [1, 2, 3], 1: [2, 3, 0], 2: [0, 2, 3]}
    after = {0: [0, 2, 3], 1: [2, 3, 0], 2: [0, 2, 3]}
    sizes = {(0, 0): 100, (2, 0): 100, (3, 0): 100, (0, 1): 7, (0, 2): 9}
    assert copied_bytes(before, after, sizes) == {0: 100}
    assert copied_bytes(before, {0: [0, 2, 3], 1: [2, 3, 1]}, {}) == {0: 0, 1: 0}


def test_heal_values_from_the_timeline() -> None:
    timeline = HealTimeline(killed=100.0, deregistered=106.0, detected=107.0, restored=150.0)
    timeline.states = {WAITING: 107.0, FIXING: 140.0, FIXED: 152.0}
    values = heal_values(timeline, 50 * MIB, QUICK_HEAL)
    assert values[HEAL_THRESHOLD] == QUICK_HEAL.threshold_s
    assert values[HEAL_DETECTED] == pytest.approx(7.0)
    assert values[HEAL_FIXING] == pytest.approx(40.0)
    assert values[HEAL_RESTORED] == pytest.approx(50.0)
    assert values[HEAL_MOVED] == pytest.approx(50.0)
    assert values[HEAL_BUDGET] == pytest.approx(QUICK_HEAL.replication_rate / MIB)
    assert values[HEAL_RATE] == pytest.approx(5.0)  # 50 MiB in the 10 s from Fixing
    data = timeline.as_json()
    assert list(data)[-3:] == [WAITING, FIXING, FIXED]  # in the order they came
    assert data["deregistered"] == pytest.approx(6.0)
    assert data[FIXED] == pytest.approx(52.0)


def test_heal_values_without_fixing_or_restored_leave_those_out() -> None:
    values = heal_values(HealTimeline(killed=0.0, detected=8.0), None, QUICK_HEAL)
    assert values[HEAL_FIXING] is None and values[HEAL_RESTORED] is None
    assert values[HEAL_RATE] is None and values[HEAL_MOVED] is None
    assert values[HEAL_DETECTED] == pytest.approx(8.0)


def test_anomaly_of_finds_the_entry_by_id() -> None:
    status = {"anomalies": [{"id": "BrokerFailure/1", "state": FIXING}]}
    assert anomaly_of(status, "BrokerFailure/1") == {"id": "BrokerFailure/1", "state": FIXING}
    assert anomaly_of(status, "BrokerFailure/2") is None
    assert anomaly_of({}, "BrokerFailure/1") is None


def test_settings_are_shown_for_both_systems_without_a_ratio() -> None:
    ours, theirs = SystemResult(OURS, "dev"), SystemResult(BASELINE, "3.9.2")
    for result, restored in ((ours, 50.0), (theirs, 60.0)):
        result.values.update({HEAL_THRESHOLD.key: 30.0, HEAL_RESTORED.key: restored})
    rows = {row.metric: row for row in compare(ours, theirs, HEAL_METRICS)}
    assert rows[HEAL_THRESHOLD].ratio is None
    assert rows[HEAL_RESTORED].ratio == pytest.approx(1.2)
    assert ratio_meaning(HEAL_THRESHOLD) == ""
    assert ratio_meaning(HEAL_RESTORED) == f"{BASELINE}/{OURS}"
    assert ratio_meaning(HEAL_RATE) == f"{OURS}/{BASELINE}"
    report = report_json({}, {}, ours, theirs, HEAL_METRICS)
    threshold = next(c for c in report["comparison"] if c["metric"] == HEAL_THRESHOLD.key)
    assert threshold["ratio"] is None and threshold["ratio_meaning"] == ""
