"""The operator-scale bench's pure parts: object layout, metric deltas, quantiles, CLI."""

import pytest

from kpo_bench.cli import SettingsError, broker_properties, build_parser
from kpo_bench.operator_scale import (
    _layout,
    _quantiles,
    _status_ages,
    _submitted,
    _sum_by,
    _within,
)


def test_layout_gives_each_object_its_own_run_of_partitions_over_100_partition_topics() -> None:
    layout = _layout(30, 5)
    assert len(layout) == 30 and all(len(parts) == 5 for parts in layout)
    flat = [tp for parts in layout for tp in parts]
    assert len(set(flat)) == 150
    assert flat[99] == ("scale-0", 99) and flat[100] == ("scale-1", 0)


def test_submitted_means_no_pending_partition_left() -> None:
    assert not _submitted({"phase": "Moving", "partitions": [{"state": "Pending"}]})
    assert _submitted({"phase": "Moving", "partitions": [{"state": "Moving"}]})
    assert _submitted({"phase": "Completed"})
    assert not _submitted({"phase": "Moving"})


def test_sum_by_takes_deltas_grouped_by_a_label() -> None:
    key = "kafka_network_requestmetrics_requests_total"
    before = {(key, (("request", "Metadata"), ("version", "12"))): 5.0}
    after = {
        (key, (("request", "Metadata"), ("version", "12"))): 15.0,
        (key, (("request", "Metadata"), ("version", "1"))): 2.0,
        (key, (("request", "Fetch"), ("version", "12"))): 99.0,
    }
    wanted = _sum_by(before, after, key, "request", lambda labels: labels["request"] != "Fetch")
    assert wanted == {"Metadata": 12.0}


def test_quantiles_of_a_cumulative_histogram() -> None:
    buckets = {0.5: 0.0, 1.0: 50.0, 2.0: 96.0, 5.0: 100.0, float("inf"): 100.0}
    assert _quantiles(buckets) == {"count": 100.0, "p50": 1.0, "p95": 2.0, "p99": 5.0}
    assert _quantiles({}) == {}


def test_quota_window_option() -> None:
    assert broker_properties(None)["replication.quota.window.num"] == "2"
    assert broker_properties(11)["replication.quota.window.num"] == "11"
    with pytest.raises(SettingsError):
        broker_properties(0)
    args = build_parser().parse_args(["--only", "operator-scale", "--objects", "5"])
    assert args.objects == 5 and args.partitions is None  # OPERATOR_SCALE_PARTITIONS then


def test_status_ages_are_the_longest_spans_without_a_change() -> None:
    changes = {"a": [5.0, 12.0, 14.0], "b": [30.0]}
    ages = _status_ages(changes, ["a", "b", "c"], 10.0, 20.0)
    assert ages == {"a": 7.0, "b": 10.0, "c": 10.0}  # a: 5 -> 12; b, c: no change in it


def test_share_of_step_intervals_within_a_limit() -> None:
    buckets = {1.0: 2.0, 2.5: 8.0, 5.0: 10.0, float("inf"): 10.0}
    assert _within(buckets, 2.5) == 0.8
    assert _within(buckets, 0.5) is None
    assert _within({}, 2.5) is None


def test_operator_scale_options() -> None:
    args = build_parser().parse_args(
        ["--only", "operator-scale", "--poll-interval", "2", "--window", "40", "--profile"]
    )
    assert (args.poll_interval, args.window, args.profile) == (2.0, 40.0, True)
