"""A benchmark run as data: the record written to ``bench/results/<UTC date>-<name>.json``.

Every run of ``python -m kpo_bench`` leaves one record beside its workdir report: the command
line, the machine (cores, load average at the start and at the end, memory, CPU model,
Python, Java and Kafka versions), the UTC start time, the duration and one line per metric
with kpo's value, Apache Kafka's (or the baseline's) value, their ratio and the target. The
documentation's results page is generated from these files.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kpo_bench.results import BASELINE, OURS, ComparisonRow, EstimateRow, ratio

RECORD_FORMAT = 1
"""Version of the record's layout; bumped when a key changes meaning."""

#: The folder of the records, relative to the repository (``--results-dir``'s default).
DEFAULT_RESULTS_DIR = Path(__file__).resolve().parents[1] / "results"

#: The keys of a record, in the order they are written (then ``report`` when the run has one).
RECORD_KEYS = ("format", "name", "command", "started_utc", "duration_s", "machine", "metrics")

#: The keys of one metric line of a record.
METRIC_KEYS = (
    "key",
    "label",
    "unit",
    OURS,
    BASELINE,
    "baseline_label",
    "ratio",
    "ratio_meaning",
    "target",
    "meets_target",
)


@dataclass(frozen=True)
class MetricLine:
    """One metric of a run, for both systems.

    Attributes:
        key: stable identifier of the metric, e.g. ``"produce_mib_s"``.
        label: human-readable name.
        unit: unit of both values.
        kpo: kpo's value, or None when not measured.
        baseline: the baseline's value (Apache Kafka's), or None when not measured.
        baseline_label: what the baseline is, e.g. ``"Apache Kafka 3.9.1"``.
        ratio: how kpo compares with the baseline, > 1.0 meaning kpo is better, or None.
        ratio_meaning: ``"kpo/apache-kafka"`` or ``"apache-kafka/kpo"``, or ``""`` without one.
        target: the target in words (``">= 0.5"``, ``"<= 1.05"``), or ``""`` without one.
        meets_target: whether kpo meets the target; None without a target or a value.
    """

    key: str
    label: str
    unit: str
    kpo: float | None
    baseline: float | None
    baseline_label: str
    ratio: float | None
    ratio_meaning: str
    target: str
    meets_target: bool | None

    def as_json(self) -> dict[str, Any]:
        """Return the line with the record's keys (:data:`METRIC_KEYS`)."""
        data = asdict(self)
        data[OURS] = data.pop("kpo")
        data[BASELINE] = data.pop("baseline")
        return {key: data[key] for key in METRIC_KEYS}


def comparison_lines(rows: Sequence[ComparisonRow], baseline_label: str) -> list[MetricLine]:
    """Return the metric lines of the comparison ``rows`` that either system measured."""
    lines = []
    for row in rows:
        if row.ours is None and row.baseline is None:
            continue
        metric = row.metric
        target = f">= {metric.target_ratio:g} (ratio)" if metric.target_ratio is not None else ""
        lines.append(
            MetricLine(
                key=metric.key,
                label=metric.label,
                unit=metric.unit,
                kpo=row.ours,
                baseline=row.baseline,
                baseline_label=baseline_label,
                ratio=row.ratio,
                ratio_meaning=(
                    f"{OURS}/{BASELINE}" if metric.higher_is_better else f"{BASELINE}/{OURS}"
                ),
                target=target,
                meets_target=row.meets_target,
            )
        )
    return lines


def estimate_lines(
    rows: Sequence[EstimateRow], tolerance: float, baseline_label: str
) -> list[MetricLine]:
    """Return the metric lines of experiments judged against an estimate (the throttle ones).

    The target is kpo's duration within ``tolerance`` (a fraction) of the estimate from its
    own sizes; the ratio compares the two systems' durations as for any cost.
    """
    lines = []
    for row in rows:
        if row.ours is None and row.baseline is None:
            continue
        target = ""
        meets = None
        if row.estimate_s is not None:
            target = f"estimate {row.estimate_s:.1f} s ± {tolerance * 100:g}%"
            if row.ours_deviation is not None:
                meets = abs(row.ours_deviation) <= tolerance
        value = ratio(row.metric, row.ours, row.baseline)
        lines.append(
            MetricLine(
                key=row.metric.key,
                label=row.metric.label,
                unit=row.metric.unit,
                kpo=row.ours,
                baseline=row.baseline,
                baseline_label=baseline_label,
                ratio=value,
                ratio_meaning=f"{BASELINE}/{OURS}" if value is not None else "",
                target=target,
                meets_target=meets,
            )
        )
    return lines


def run_name(only: str | None, quick: bool) -> str:
    """Return the short name of a run: the group it ran (``all`` without one), ``-quick``."""
    name = only or "all"
    return f"{name}-quick" if quick else name


def command_line(argv: Sequence[str]) -> str:
    """Return the command line of a run: ``python -m kpo_bench`` and its arguments, quoted."""
    return shlex.join(["python", "-m", "kpo_bench", *argv])


def load_average() -> list[float] | None:
    """Return the 1, 5 and 15 minute load averages, rounded, or None where the OS has none."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def record_path(results_dir: Path, started: datetime, name: str) -> Path:
    """Return a new file for a record: ``<UTC date>-<name>.json``, ``-2``, ``-3``... if taken."""
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "run"
    stem = f"{started.astimezone(UTC):%Y-%m-%d}-{slug}"
    path = results_dir / f"{stem}.json"
    counter = 2
    while path.exists():
        path = results_dir / f"{stem}-{counter}.json"
        counter += 1
    return path


def run_record(
    *,
    name: str,
    argv: Sequence[str],
    started: datetime,
    duration_s: float,
    machine: dict[str, Any],
    load_average_end: list[float] | None,
    metrics: Sequence[MetricLine],
    report: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Return the record of one run (keys :data:`RECORD_KEYS`), JSON-serialisable.

    Args:
        name: the run's short name (:func:`run_name`).
        argv: the arguments after ``python -m kpo_bench``.
        started: when the run started (any timezone; written in UTC).
        duration_s: how long it took, s.
        machine: machine facts at the start (:func:`kpo_bench.machine.machine_info`) plus
            whatever versions are known (``kafka``, ``kpo``).
        load_average_end: the load averages when the run ended.
        metrics: one line per metric measured.
        report: the run's full JSON report (:func:`kpo_bench.results.report_json`), when it
            has one; kept under ``"report"``.
    """
    facts = dict(machine)
    facts["load_average_start"] = facts.pop("load_average", None)
    if facts["load_average_start"] is not None:
        facts["load_average_start"] = [round(x, 2) for x in facts["load_average_start"]]
    facts["load_average_end"] = load_average_end
    record = {
        "format": RECORD_FORMAT,
        "name": name,
        "command": command_line(argv),
        "started_utc": started.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "duration_s": round(duration_s, 1),
        "machine": facts,
        "metrics": [line.as_json() for line in metrics],
    }
    if report:
        record["report"] = report
    return record


def write_record(results_dir: Path, record: dict[str, Any], started: datetime) -> Path:
    """Write ``record`` as a new file of ``results_dir`` (:func:`record_path`); return it."""
    results_dir.mkdir(parents=True, exist_ok=True)
    path = record_path(results_dir, started, str(record["name"]))
    path.write_text(json.dumps(record, indent=2) + "\n")
    return path
