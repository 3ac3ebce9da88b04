"""The benchmark's printed report: machine facts and the comparison table (rich)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from kpo_bench.results import (
    ComparisonRow,
    EstimateRow,
    OverheadRow,
    SystemResult,
    estimate_rows,
    format_deviation,
    format_ratio,
    format_target,
    format_value,
    overhead_rows,
)
from kpo_bench.throttle_plan import TOLERANCE


def machine_line(machine: dict[str, Any]) -> str:
    """Return one line describing the machine (CPU, cores, memory, load, runtimes)."""
    load = machine.get("load_average")
    load_text = "/".join(f"{x:.2f}" for x in load) if load else "n/a"
    return (
        f"{machine.get('cpu')}, {machine.get('cores')} cores, {machine.get('memory_gib')} GiB, "
        f"Linux {machine.get('kernel')}, Python {machine.get('python')}, {machine.get('java')}, "
        f"load average at start {load_text}"
    )


def _system_titles(ours: SystemResult | None, baseline: SystemResult | None) -> tuple[str, str]:
    """Return the column titles of kpo and of Apache Kafka, each with its version if it ran."""
    kpo = f"kpo {ours.version}" if ours is not None else "kpo"
    kafka = f"Apache Kafka {baseline.version}" if baseline is not None else "Apache Kafka"
    return kpo, kafka


#: The comparison table's title unless the caller gives one.
COMPARISON_TITLE = "kpo vs Apache Kafka, 3 brokers on loopback"


def comparison_table(
    rows: list[ComparisonRow],
    ours: SystemResult | None,
    baseline: SystemResult | None,
    title: str = COMPARISON_TITLE,
) -> Table:
    """Return the table: one row per metric with kpo, Kafka, ratio and target."""
    kpo_title, kafka_title = _system_titles(ours, baseline)
    table = Table(title=title)
    table.add_column("metric")
    table.add_column(kpo_title, justify="right")
    table.add_column(kafka_title, justify="right")
    table.add_column("ratio", justify="right")
    table.add_column("target")
    for row in rows:
        unit = row.metric.unit
        table.add_row(
            row.metric.label,
            format_value(row.ours, unit) if row.ours is not None else _failed(ours, row),
            format_value(row.baseline, unit)
            if row.baseline is not None
            else _failed(baseline, row),
            format_ratio(row.ratio),
            format_target(row.metric, row.meets_target),
        )
    return table


def estimate_table(
    rows: list[EstimateRow], ours: SystemResult | None, baseline: SystemResult | None
) -> Table:
    """Return the throttle table: per experiment the estimate and each system's duration.

    Each duration is shown with its deviation from the estimate and whether it is
    within :data:`kpo_bench.throttle_plan.TOLERANCE`.
    """
    kpo_title, kafka_title = _system_titles(ours, baseline)
    table = Table(title="throttled reassignments vs their estimate")
    table.add_column("experiment")
    table.add_column("estimate", justify="right")
    table.add_column(kpo_title, justify="right")
    table.add_column(kafka_title, justify="right")
    for row in rows:
        cells = []
        for result, measured, dev in (
            (ours, row.ours, row.ours_deviation),
            (baseline, row.baseline, row.baseline_deviation),
        ):
            if measured is None:
                cells.append(_failed_metric(result, row.metric.key))
            else:
                cells.append(f"{measured:.2f} s, {format_deviation(dev, TOLERANCE)}")
        table.add_row(row.metric.label, format_value(row.estimate_s, "s"), *cells)
    return table


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f} %"


def overhead_table(
    rows: list[OverheadRow], ours: SystemResult | None, baseline: SystemResult | None
) -> Table:
    """Return the TLS table: per operation each system's SASL_SSL cost against its PLAINTEXT.

    The bar: kpo's overhead is no worse than Kafka's, measured in the same run.
    """
    kpo_title, kafka_title = _system_titles(ours, baseline)
    table = Table(title="TLS + SASL overhead: 1 - SASL_SSL / PLAINTEXT of each system")
    table.add_column("operation")
    table.add_column(kpo_title, justify="right")
    table.add_column(kafka_title, justify="right")
    table.add_column("kpo no worse than Kafka")
    for row in rows:
        verdict = {True: "met", False: "missed", None: "n/a"}[row.no_worse]
        table.add_row(row.plain.label, _percent(row.ours), _percent(row.baseline), verdict)
    return table


def _failed(result: SystemResult | None, row: ComparisonRow) -> str:
    return _failed_metric(result, row.metric.key)


def _failed_metric(result: SystemResult | None, key: str) -> str:
    if result is None:
        return "not run"
    failed = key in result.errors or "cluster" in result.errors
    return "failed" if failed else "-"


def print_report(
    console: Console,
    machine: dict[str, Any],
    rows: list[ComparisonRow],
    ours: SystemResult | None,
    baseline: SystemResult | None,
    with_estimates: bool = True,
    title: str = COMPARISON_TITLE,
) -> None:
    """Print the machine line, the tables, the ratio's meaning and any errors.

    ``with_estimates`` False leaves out the throttled-reassignment table (``--only controller``,
    ``--only heal``); ``title`` is the comparison table's.
    """
    console.print(f"machine: {machine_line(machine)}")
    console.print(comparison_table(rows, ours, baseline, title))
    if with_estimates:
        console.print(estimate_table(estimate_rows(ours, baseline), ours, baseline))
    overheads = overhead_rows(ours, baseline)
    if overheads:
        console.print(overhead_table(overheads, ours, baseline))
    console.print(
        "ratio > 1 means kpo is better: kpo/Kafka for throughputs (MiB/s of record "
        "payload, partitions/s), Kafka/kpo for durations, memory and request counts."
    )
    for result in (ours, baseline):
        if result is None:
            continue
        for key, error in result.errors.items():
            console.print(f"[red]{result.system} {key} failed:[/red] {error}")
