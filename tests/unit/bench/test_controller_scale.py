"""The pure parts of ``--only controller``: sizes, assignments, ZooKeeper's mntr, the CLI."""

from __future__ import annotations

import pytest

from kpo_bench.cli import SettingsError, build_parser, controller_workload_from
from kpo_bench.controller_scale import (
    DEFAULT_CONTROLLER,
    QUICK_CONTROLLER,
    RF2_PREFIX,
    ControllerWorkload,
    hosted_replicas,
    parse_mntr,
    rf2_assignment,
    rf3_assignment,
)
from kpo_bench.results import CONTROLLER_METRICS, SystemResult, compare


def test_topics_of_100_partitions_hold_n_partitions() -> None:
    sizes = ControllerWorkload(partitions=250).topic_sizes(RF2_PREFIX)
    assert sizes == {f"{RF2_PREFIX}0": 100, f"{RF2_PREFIX}1": 100, f"{RF2_PREFIX}2": 50}
    assert sum(DEFAULT_CONTROLLER.topic_sizes("t").values()) == 10_000
    assert len(DEFAULT_CONTROLLER.topic_sizes("t")) == 100


def test_rf2_partitions_are_all_led_by_one_broker_with_followers_alternating() -> None:
    first = rf2_assignment(3, 0, 1, [0, 2])
    assert first == [[1, 0], [1, 2], [1, 0]]
    # The alternation goes on across topics.
    assert rf2_assignment(2, 3, 1, [0, 2]) == [[1, 2], [1, 0]]


def test_rf3_partitions_are_hosted_but_never_led_by_the_avoided_broker() -> None:
    replicas = rf3_assignment(4, 0, 1, [0, 2])
    assert replicas == [[0, 2, 1], [2, 0, 1], [0, 2, 1], [2, 0, 1]]
    with pytest.raises(ValueError, match="exactly two"):
        rf3_assignment(1, 0, 1, [0])


def test_hosted_replicas_counts_each_broker() -> None:
    assignments = {"a": rf2_assignment(4, 0, 1, [0, 2]), "b": rf3_assignment(4, 0, 1, [0, 2])}
    assert hosted_replicas(assignments) == {1: 8, 0: 6, 2: 6}


def test_mntr_is_parsed() -> None:
    text = "zk_version\t3.8.4-123, built on x\nzk_packets_received\t1234\nzk_packets_sent\t99\n"
    values = parse_mntr(text)
    assert values["zk_packets_received"] == "1234"
    assert values["zk_version"].startswith("3.8.4")


def test_partitions_option_and_quick_size() -> None:
    parser = build_parser()
    assert controller_workload_from(parser.parse_args(["--only", "controller"])).partitions == (
        10_000
    )
    quick = controller_workload_from(parser.parse_args(["--only", "controller", "--quick"]))
    assert quick == QUICK_CONTROLLER
    chosen = parser.parse_args(["--only", "controller", "--partitions", "3000"])
    assert controller_workload_from(chosen).partitions == 3000
    with pytest.raises(SettingsError):
        controller_workload_from(parser.parse_args(["--partitions", "0"]))


def test_controller_rows_compare_rates_and_durations() -> None:
    ours = SystemResult("kpo", "dev", {"create_rf2_partitions_s": 50.0, "kill_leaders_s": 8.0})
    kafka = SystemResult("apache-kafka", "3.9.2", {"create_rf2_partitions_s": 100.0})
    kafka.values["kill_leaders_s"] = 10.0
    rows = {row.metric.key: row for row in compare(ours, kafka, CONTROLLER_METRICS)}
    assert rows["create_rf2_partitions_s"].ratio == pytest.approx(0.5)
    assert rows["kill_leaders_s"].ratio == pytest.approx(1.25)
    assert rows["startup_clean_s"].ratio is None
    assert len(rows) == len(CONTROLLER_METRICS)
