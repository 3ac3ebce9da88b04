import json
import math

import pytest

from kpo_bench.results import (
    BASELINE,
    CATCH_UP,
    CONSUME,
    CONSUME_SASL_SSL,
    FAILOVER,
    METRICS,
    OURS,
    PRODUCE,
    PRODUCE_SASL_SSL,
    Measured,
    SystemResult,
    compare,
    format_ratio,
    format_target,
    format_value,
    overhead_rows,
    ratio,
    report_json,
)


def test_throughput_ratio_is_ours_over_kafka() -> None:
    assert ratio(PRODUCE, 25.0, 100.0) == pytest.approx(0.25)


def test_duration_ratio_is_kafka_over_ours() -> None:
    # kpo fails over in 4 s, Kafka in 6 s: kpo is 1.5x as good.
    assert ratio(FAILOVER, 4.0, 6.0) == pytest.approx(1.5)


@pytest.mark.parametrize(
    ("ours", "baseline"),
    [
        (None, 1.0),
        (1.0, None),
        (0.0, 1.0),
        (1.0, 0.0),
        (-1.0, 1.0),
        (math.nan, 1.0),
        (1.0, math.inf),
    ],
)
def test_ratio_is_none_without_two_usable_values(
    ours: float | None, baseline: float | None
) -> None:
    assert ratio(PRODUCE, ours, baseline) is None
    assert ratio(FAILOVER, ours, baseline) is None


def test_targets_of_the_ratios() -> None:
    assert PRODUCE.target_ratio == 0.5
    assert CATCH_UP.target_ratio == 1.0
    assert CONSUME.target_ratio is None
    assert FAILOVER.target_ratio is None
    assert [m.key for m in METRICS] == [
        "produce_mib_s",
        "produce_sasl_ssl_mib_s",
        "consume_mib_s",
        "consume_sasl_ssl_mib_s",
        "group_consume_mib_s",
        "catch_up_mib_s",
        "failover_s",
        "group_rebalance_s",
    ]


def _results() -> tuple[SystemResult, SystemResult]:
    ours = SystemResult(OURS, "0.1.0")
    ours.record(PRODUCE, Measured(30.0, {"records": 10}))
    ours.record(CATCH_UP, Measured(120.0, {}))
    ours.record(FAILOVER, Measured(7.0, {}))
    ours.record_error(CONSUME, RuntimeError("boom"))
    kafka = SystemResult(BASELINE, "3.9.2")
    kafka.record(PRODUCE, Measured(100.0, {}))
    kafka.record(CONSUME, Measured(200.0, {}))
    kafka.record(CATCH_UP, Measured(100.0, {}))
    kafka.record(FAILOVER, Measured(6.3, {}))
    return ours, kafka


def test_compare_gives_ratio_and_target_verdict_per_metric() -> None:
    ours, kafka = _results()
    rows = {row.metric.key: row for row in compare(ours, kafka)}
    assert rows["produce_mib_s"].ratio == pytest.approx(0.3)
    assert rows["produce_mib_s"].meets_target is False
    assert rows["catch_up_mib_s"].ratio == pytest.approx(1.2)
    assert rows["catch_up_mib_s"].meets_target is True
    assert rows["consume_mib_s"].ours is None
    assert rows["consume_mib_s"].ratio is None
    assert rows["consume_mib_s"].meets_target is None
    assert rows["failover_s"].ratio == pytest.approx(0.9)
    assert rows["failover_s"].meets_target is None


def test_compare_without_baseline_has_no_ratios() -> None:
    ours, _ = _results()
    rows = compare(ours, None)
    assert [row.ratio for row in rows] == [None] * len(METRICS)
    assert rows[0].ours == 30.0


def test_record_error_names_the_exception() -> None:
    ours, _ = _results()
    assert ours.errors == {"consume_mib_s": "RuntimeError: boom"}
    assert "consume_mib_s" not in ours.values


def test_report_json_round_trips_and_explains_ratios() -> None:
    ours, kafka = _results()
    machine = {"cores": 2}
    report = json.loads(json.dumps(report_json(machine, {"records": 1}, ours, kafka)))
    assert report["machine"] == {"cores": 2}
    assert [s["system"] for s in report["systems"]] == [OURS, BASELINE]
    assert report["systems"][0]["errors"] == {"consume_mib_s": "RuntimeError: boom"}
    assert report["systems"][0]["details"]["produce_mib_s"] == {"records": 10}
    by_metric = {c["metric"]: c for c in report["comparison"]}
    assert by_metric["produce_mib_s"]["ratio_meaning"] == "kpo/apache-kafka"
    assert by_metric["failover_s"]["ratio_meaning"] == "apache-kafka/kpo"
    assert by_metric["catch_up_mib_s"]["meets_target"] is True
    assert by_metric["catch_up_mib_s"][OURS] == 120.0
    assert by_metric["catch_up_mib_s"][BASELINE] == 100.0


def test_report_json_lists_only_the_systems_run() -> None:
    _, kafka = _results()
    report = report_json({}, {}, None, kafka)
    assert [s["system"] for s in report["systems"]] == [BASELINE]
    assert all(c["ratio"] is None for c in report["comparison"])


def test_formatting() -> None:
    assert format_value(None, "MiB/s") == "-"
    assert format_value(123.456, "MiB/s") == "123.5 MiB/s"
    assert format_value(9.876, "MiB/s") == "9.88 MiB/s"
    assert format_value(6.5, "s") == "6.50 s"
    assert format_ratio(None) == "-"
    assert format_ratio(0.4567) == "0.46x"
    assert format_target(PRODUCE, True) == ">= 0.5: met"
    assert format_target(CATCH_UP, False) == ">= 1: missed"
    assert format_target(CATCH_UP, None) == ">= 1: n/a"
    assert format_target(CONSUME, None) == ""


def test_tls_overhead_is_each_system_against_its_own_plaintext_figure() -> None:
    ours, kafka = SystemResult(OURS, "0.1.0"), SystemResult(BASELINE, "3.9.2")
    for result, figures in ((ours, (60.0, 45.0, 200.0, 150.0)), (kafka, (25.0, 20.0, 160.0, 80.0))):
        for metric, value in zip(
            (PRODUCE, PRODUCE_SASL_SSL, CONSUME, CONSUME_SASL_SSL), figures, strict=True
        ):
            result.record(metric, Measured(value, {}))
    rows = overhead_rows(ours, kafka)
    assert [(r.plain, r.secured) for r in rows] == [
        (PRODUCE, PRODUCE_SASL_SSL),
        (CONSUME, CONSUME_SASL_SSL),
    ]
    assert rows[0].ours == pytest.approx(0.25) and rows[0].baseline == pytest.approx(0.2)
    assert rows[0].no_worse is False  # 25 % slower against Kafka's 20 %
    assert rows[1].ours == pytest.approx(0.25) and rows[1].baseline == pytest.approx(0.5)
    assert rows[1].no_worse is True
    report = json.loads(json.dumps(report_json({}, {}, ours, kafka)))
    assert report["tls_overhead"][0] == {
        "metric": "produce_sasl_ssl_mib_s",
        "versus": "produce_mib_s",
        "kpo_overhead": pytest.approx(0.25),
        "apache-kafka_overhead": pytest.approx(0.2),
        "no_worse_than_kafka": False,
    }
    by_metric = {c["metric"]: c for c in report["comparison"]}
    assert by_metric["consume_sasl_ssl_mib_s"]["ratio"] == pytest.approx(150.0 / 80.0)
    # Without the SASL_SSL figures (any other run) there is no overhead row at all.
    plain = SystemResult(OURS, "0.1.0")
    plain.record(PRODUCE, Measured(60.0, {}))
    assert overhead_rows(plain, None) == []
    kafka.errors.clear()
    del kafka.values[CONSUME_SASL_SSL.key]
    assert overhead_rows(ours, kafka)[1].no_worse is None
