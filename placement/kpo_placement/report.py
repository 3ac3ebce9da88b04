"""The plan report: per-broker and per-goal loads before/after, bytes moved vs a lower bound.

:func:`build_report` computes the numbers (pure NumPy through :mod:`kpo_placement.goals`);
:func:`render_report` prints them as rich tables; :func:`save_chart` draws a PNG (matplotlib,
Agg backend) with one panel per resource: each broker's load before and after.

"Before" is the current assignment with the *current* leaders; "after" is the target
assignment with its preferred leaders (the state once the waves and the preferred-leader
elections are done). Loads follow :mod:`kpo_placement.model`'s resource model.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from kpo_placement import goals
from kpo_placement.model import BoolArray, ClusterModel, FloatArray, IntArray

UNITS = {
    "disk": ("GiB", 2.0**30),
    "net_in": ("MB/s", 1e6),
    "net_out": ("MB/s", 1e6),
    "replicas": ("", 1.0),
    "leaders": ("", 1.0),
}
"""Resource -> (display unit, bytes or count per unit)."""


@dataclass(frozen=True)
class WaveSummary:
    """One wave of the plan as the report shows it.

    Attributes:
        number: Wave number, from 1.
        partitions: Partitions moved in the wave.
        bytes_to_move: Bytes copied.
        predicted_seconds: Predicted duration at the throttle, ``None`` when unthrottled.
    """

    number: int
    partitions: int
    bytes_to_move: int
    predicted_seconds: float | None


@dataclass(frozen=True)
class PlanReport:
    """Everything the report shows.

    Attributes:
        broker_ids: ``int32[B]``.
        racks: Rack name per broker (``"-"`` without one).
        eligible: ``bool[B]`` brokers allowed to hold replicas after the plan.
        capacities: ``float64[B, 5]`` per resource (:data:`goals.RESOURCES` order).
        before: ``float64[B, 5]`` loads now (current leaders).
        after: ``float64[B, 5]`` loads after the plan (preferred leaders).
        imbalance_before: Max/mean per resource now.
        imbalance_after: Max/mean per resource after.
        violations_before: Hard goal -> broken count now.
        violations_after: Hard goal -> broken count after.
        bytes_moved: Bytes the plan copies.
        lower_bound: :func:`goals.bytes_moved_lower_bound` of the current assignment, bytes;
            ``None`` when not meaningful (a leaders-only plan copies nothing by design).
        tolerance: The balance tolerance used for the bound.
        waves: The waves.
    """

    broker_ids: IntArray
    racks: list[str]
    eligible: BoolArray
    capacities: FloatArray
    before: FloatArray
    after: FloatArray
    imbalance_before: dict[str, float]
    imbalance_after: dict[str, float]
    violations_before: dict[str, int]
    violations_after: dict[str, int]
    bytes_moved: float
    lower_bound: float | None
    tolerance: float
    waves: tuple[WaveSummary, ...]


def _violation_counts(found: Sequence[goals.Violation]) -> dict[str, int]:
    counts = dict.fromkeys(goals.HARD_GOALS, 0)
    for violation in found:
        counts[violation.goal] = counts.get(violation.goal, 0) + 1
    return counts


def build_report(
    model: ClusterModel,
    target: IntArray,
    *,
    removed: Sequence[int] = (),
    tolerance: float = 1.05,
    disk_threshold: float = 0.8,
    max_replicas_per_broker: int | None = None,
    waves: Sequence[WaveSummary] = (),
    with_bound: bool = True,
) -> PlanReport:
    """Compute the report of moving ``model.replicas`` to ``target``.

    Args:
        model: The cluster as it is.
        target: ``int32[P, max_rf]`` target broker positions.
        removed: Broker ids being drained (not eligible after the plan).
        tolerance: Balance tolerance (max/mean), for the lower bound.
        disk_threshold: Fraction of disk capacity, for the hard-goal check.
        max_replicas_per_broker: Replica cap, for the hard-goal check.
        waves: The plan's waves.
        with_bound: Compute the bytes-moved lower bound (false for leaders-only plans).
    """
    eligible = goals.eligible_brokers(model, removed)

    def broken(assignment: IntArray) -> dict[str, int]:
        found = goals.hard_goal_violations(
            model,
            assignment,
            eligible=eligible,
            disk_threshold=disk_threshold,
            max_replicas_per_broker=max_replicas_per_broker,
        )
        return _violation_counts(found)

    before_imb = goals.imbalance(model, model.replicas, eligible, model.leaders)
    after_imb = goals.imbalance(model, target, eligible)
    return PlanReport(
        broker_ids=model.broker_ids,
        racks=[model.rack_names[r] if r >= 0 else "-" for r in model.racks],
        eligible=eligible,
        capacities=goals.capacities(model),
        before=goals.broker_loads(model, model.replicas, model.leaders),
        after=goals.broker_loads(model, target),
        imbalance_before=before_imb.max_over_mean,
        imbalance_after=after_imb.max_over_mean,
        violations_before=broken(model.replicas),
        violations_after=broken(target),
        bytes_moved=goals.bytes_moved(model, model.replicas, target),
        lower_bound=(
            goals.bytes_moved_lower_bound(model, model.replicas, eligible, tolerance)
            if with_bound
            else None
        ),
        tolerance=tolerance,
        waves=tuple(waves),
    )


def _amount(value: float, resource: str) -> str:
    unit, scale = UNITS[resource]
    return f"{value / scale:,.0f}" if not unit else f"{value / scale:,.2f}"


def human_bytes(value: float) -> str:
    """Format a byte count with a binary unit (``1.50 GiB``)."""
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(value) >= scale:
            return f"{value / scale:.2f} {unit}"
    return f"{value:.0f} B"


def broker_table(report: PlanReport) -> Table:
    """Return the per-broker table: load before -> after per resource, with capacity use."""
    table = Table(title="Load per broker (before -> after)")
    table.add_column("broker", justify="right")
    table.add_column("rack")
    for resource in goals.RESOURCES:
        unit = UNITS[resource][0]
        table.add_column(f"{resource} ({unit})" if unit else resource, justify="right")
    for b, broker_id in enumerate(report.broker_ids):
        cells = [str(broker_id) + ("" if report.eligible[b] else " (out)"), report.racks[b]]
        for i, resource in enumerate(goals.RESOURCES):
            before = _amount(report.before[b, i], resource)
            text = f"{before} -> {_amount(report.after[b, i], resource)}"
            if UNITS[resource][0] and report.capacities[b, i] > 0:
                text += f" ({report.after[b, i] / report.capacities[b, i]:.0%})"
            cells.append(text)
        table.add_row(*cells)
    return table


def goal_table(report: PlanReport) -> Table:
    """Return the per-goal table: max/mean per soft goal, broken count per hard goal."""
    table = Table(title="Goals (before -> after)")
    table.add_column("goal")
    table.add_column("kind")
    table.add_column("before", justify="right")
    table.add_column("after", justify="right")
    for resource in goals.RESOURCES:
        before, after = report.imbalance_before[resource], report.imbalance_after[resource]
        table.add_row(f"{resource} balance (max/mean)", "soft", f"{before:.3f}", f"{after:.3f}")
    for goal in goals.HARD_GOALS:
        table.add_row(
            goal,
            "hard (broken)",
            str(report.violations_before[goal]),
            str(report.violations_after[goal]),
        )
    return table


def summary_table(report: PlanReport) -> Table:
    """Return the bytes-moved summary and one row per wave."""
    table = Table(title="Data movement")
    table.add_column("item")
    table.add_column("partitions", justify="right")
    table.add_column("bytes", justify="right")
    table.add_column("predicted duration", justify="right")
    for wave in report.waves:
        seconds = wave.predicted_seconds
        table.add_row(
            f"wave {wave.number}",
            str(wave.partitions),
            human_bytes(wave.bytes_to_move),
            "unthrottled" if seconds is None else f"{seconds:,.0f} s",
        )
    bound = report.lower_bound
    ratio = report.bytes_moved / bound if bound else None
    table.add_row(
        "total moved",
        str(sum(w.partitions for w in report.waves)),
        human_bytes(report.bytes_moved),
        "",
    )
    table.add_row(
        f"lower bound (tolerance {report.tolerance})",
        "",
        "n/a" if bound is None else human_bytes(bound),
        "" if ratio is None else f"moved/bound {ratio:.2f}",
    )
    return table


def render_report(report: PlanReport, width: int = 160) -> str:
    """Return the three tables as plain text (no colour codes)."""
    console = Console(width=width, record=True, file=io.StringIO(), color_system=None)
    for table in (broker_table(report), goal_table(report), summary_table(report)):
        console.print(table)
    return console.export_text()


def save_chart(report: PlanReport, path: Path) -> Path:
    """Draw each broker's load before and after, one panel per resource, into a PNG.

    Returns:
        ``path``.

    Raises:
        OSError: The file cannot be written.
    """
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    count = len(goals.RESOURCES)
    fig, axes = plt.subplots(1, count, figsize=(4 * count, 4), squeeze=False)
    positions = np.arange(report.broker_ids.size)
    for i, resource in enumerate(goals.RESOURCES):
        axis = axes[0, i]
        unit, scale = UNITS[resource]
        axis.bar(positions - 0.2, report.before[:, i] / scale, 0.4, label="before")
        axis.bar(positions + 0.2, report.after[:, i] / scale, 0.4, label="after")
        axis.set_xticks(positions, [str(b) for b in report.broker_ids])
        axis.set_xlabel("broker")
        axis.set_title(f"{resource} ({unit})" if unit else resource)
        if i == 0:
            axis.legend()
    fig.suptitle("Load per broker before and after the plan")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", dpi=100)
    plt.close(fig)
    return path
