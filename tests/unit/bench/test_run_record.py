import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

from kpo_bench.results import BASELINE, FAILOVER, OURS, PRODUCE, SystemResult, compare
from kpo_bench.run_record import (
    METRIC_KEYS,
    RECORD_KEYS,
    comparison_lines,
    record_path,
    run_name,
    run_record,
    write_record,
)

STARTED = datetime(2030, 1, 2, 23, 59, 58, tzinfo=UTC)


def _record() -> dict[str, object]:
    ours, kafka = SystemResult(OURS, "0.1.0"), SystemResult(BASELINE, "3.9.2")
    ours.values[PRODUCE.key] = 20.0
    kafka.values[PRODUCE.key] = 40.0
    lines = comparison_lines(compare(ours, kafka, (PRODUCE, FAILOVER)), "Apache Kafka 3.9.2")
    machine = {"cpu": "CPU X", "cores": 2, "memory_gib": 8.0, "load_average": (1.234, 0.5, 0.25)}
    return run_record(
        name=run_name("throttle", quick=True),
        argv=["--quick", "--only", "throttle"],
        started=STARTED,
        duration_s=61.26,
        machine=machine,
        load_average_end=[2.0, 1.0, 0.5],
        metrics=lines,
        report={"comparison": []},
    )


def test_record_has_the_run_the_machine_and_the_metrics() -> None:
    record = json.loads(json.dumps(_record()))
    assert list(record)[: len(RECORD_KEYS)] == list(RECORD_KEYS)
    assert record["format"] == 1
    assert record["name"] == "throttle-quick"
    assert record["command"] == "python -m kpo_bench --quick --only throttle"
    assert record["started_utc"] == "2030-01-02T23:59:58Z"
    assert record["duration_s"] == 61.3
    machine = record["machine"]
    assert machine["cores"] == 2
    assert machine["load_average_start"] == [1.23, 0.5, 0.25]
    assert machine["load_average_end"] == [2.0, 1.0, 0.5]
    assert "load_average" not in machine
    assert record["report"] == {"comparison": []}


def test_record_keeps_only_measured_metrics_with_ratio_and_target() -> None:
    (line,) = _record()["metrics"]  # type: ignore[misc]
    assert list(line) == list(METRIC_KEYS)
    assert line["key"] == PRODUCE.key
    assert line[OURS] == 20.0
    assert line[BASELINE] == 40.0
    assert line["ratio"] == 0.5
    assert line["ratio_meaning"] == "kpo/apache-kafka"
    assert line["target"] == ">= 0.5 (ratio)"
    assert line["meets_target"] is True
    assert line["baseline_label"] == "Apache Kafka 3.9.2"


def test_run_name() -> None:
    assert run_name(None, quick=False) == "all"
    assert run_name("placement", quick=True) == "placement-quick"


def test_record_path_is_the_utc_date_and_never_overwrites(tmp_path: Path) -> None:
    started = datetime(2030, 1, 3, 1, 0, tzinfo=timezone(timedelta(hours=2)))
    first = record_path(tmp_path, started, "throttle-quick")
    assert first.name == "2030-01-02-throttle-quick.json"
    first.write_text("{}")
    assert record_path(tmp_path, started, "throttle-quick").name == (
        "2030-01-02-throttle-quick-2.json"
    )


def test_write_record(tmp_path: Path) -> None:
    path = write_record(tmp_path / "results", _record(), STARTED)
    assert path == tmp_path / "results" / "2030-01-02-throttle-quick.json"
    assert json.loads(path.read_text())["name"] == "throttle-quick"


def test_placement_case_lines_compare_the_planner_with_generate() -> None:
    from kpo_bench.placement import Figures, case_lines, cases

    case = cases(quick=True)[0]
    ours = Figures(1.04, {"disk": 1.04}, 10.0, 1.02, 0, 5)
    generate = Figures(1.2, {"disk": 1.2}, 80.0, 8.0, 0, 9)
    lines = case_lines(case, ours, 2.0, 30.0, generate, 0.5)
    by_key = {line.key.split(".", 1)[1]: line for line in lines}
    assert set(by_key) == {
        "plan_numpy_s",
        "plan_spark_s",
        "imbalance",
        "bytes_vs_bound",
        "hard_goal_violations",
    }
    assert all(line.label.startswith(case.name) for line in lines)
    assert by_key["imbalance"].ratio == 1.2 / 1.04
    assert by_key["imbalance"].meets_target is True
    assert by_key["bytes_vs_bound"].target == "<= 1.1"
    assert by_key["plan_spark_s"].baseline is None
    assert by_key["plan_spark_s"].ratio is None
    assert by_key["hard_goal_violations"].meets_target is True


def test_throttle_lines_are_judged_against_the_estimate() -> None:
    from kpo_bench.results import THROTTLE_A, THROTTLE_B, estimate_rows
    from kpo_bench.run_record import estimate_lines

    ours, kafka = SystemResult(OURS, "0.1.0"), SystemResult(BASELINE, "3.9.2")
    ours.values[THROTTLE_A.key] = 10.3
    ours.details[THROTTLE_A.key] = {"estimate_s": 10.0}
    kafka.values[THROTTLE_A.key] = 11.0
    ours.values[THROTTLE_B.key] = 12.0
    ours.details[THROTTLE_B.key] = {"estimate_s": 10.0}
    a, b = estimate_lines(estimate_rows(ours, kafka), 0.05, "Apache Kafka 3.9.2")
    assert a.key == THROTTLE_A.key
    assert a.target == "estimate 10.0 s ± 5%"
    assert a.meets_target is True
    assert a.ratio == 11.0 / 10.3
    assert b.meets_target is False
    assert b.baseline is None
    assert b.ratio is None
