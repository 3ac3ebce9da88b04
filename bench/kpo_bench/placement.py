"""Placement benchmark: the planner against Kafka's ``--generate`` and a plain greedy planner.

Two synthetic clusters (:mod:`kpo_placement.synthetic`, skewed sizes, rates and initial
placement, 3 racks, RF 3): 100 brokers x 100,000 partitions, and 1M replicas (250 brokers x
333,334 partitions); ``quick`` makes both 10x smaller (12 and 24 brokers, so that the racks
stay even). For each, in the same run: our planner with the NumPy scorer and with the Spark
scorer on ``local[2]`` (skipped without PySpark), Kafka's ``--generate`` round-robin
(:func:`kpo_placement.baselines.kafka_generate`) and the greedy planner
(:func:`kpo_placement.baselines.greedy_plan`). Each line gives the plan time, the
imbalance (max/mean) per resource, the bytes moved against
:func:`kpo_placement.goals.bytes_moved_lower_bound`, the hard goals broken and the
per-topic spread (:func:`kpo_placement.goals.topic_spread_excess`, 0 = even).

Targets: 100K partitions <= 60 s and 1M replicas <= 5 min with ``local[2]``,
imbalance <= 1.05 x mean, bytes moved <= 1.1 x the lower bound.

``large`` (``--placement-2m``) runs instead one cluster of 2M partitions x RF 3
(6M replicas, 300 brokers), planned with NumPy scoring only (target 5 min on 2 cores; the
greedy baseline, a per-partition Python loop, is skipped too), and
prints the peak resident memory of the process after each planner
(``getrusage(RUSAGE_SELF).ru_maxrss``, the model and the plan included).
"""

from __future__ import annotations

import resource
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from kpo_bench.results import BASELINE, OURS
from kpo_bench.run_record import MetricLine
from kpo_placement import goals
from kpo_placement.baselines import greedy_plan, kafka_generate
from kpo_placement.model import ClusterModel, IntArray
from kpo_placement.planner import PlanOptions, plan
from kpo_placement.synthetic import SyntheticSpec, synthetic_cluster
from kpo_placement.waves import split_into_waves, total_duration_s

TOLERANCE = 1.05
BYTES_TARGET = 1.1
THROTTLE_BYTES_PER_S = 50 * 1024 * 1024
SHORT = {"disk": "disk", "net_in": "in", "net_out": "out", "replicas": "repl", "leaders": "lead"}


@dataclass(frozen=True)
class Case:
    """One benchmark cluster and its plan-time target (s, None = none).

    The target applies to the Spark ``local[2]`` planner, or with ``spark`` False (the
    Spark run skipped) to the NumPy one.
    """

    name: str
    spec: SyntheticSpec
    time_target_s: float | None
    spark: bool = True


LARGE_TARGET_S = 300.0
"""Target of ``large``: 2M partitions x RF 3 planned within 5 min with NumPy scoring."""


def cases(quick: bool, large: bool = False) -> list[Case]:
    """Return the benchmark clusters (10x smaller, without time targets, with ``quick``).

    ``large`` gives the one 2M-partition cluster (200K partitions with ``quick``).
    """
    base = SyntheticSpec(racks=3, rf=3, partitions_per_topic=20, placement_skew=0.25, seed=6)
    if large:
        if quick:
            return [
                Case(
                    "quick large: 30 brokers x 200K partitions",
                    _sized(base, 30, 200_000),
                    None,
                    False,
                )
            ]
        return [
            Case(
                "2M partitions x RF 3: 300 brokers (6M replicas)",
                _sized(base, 300, 2_000_000),
                LARGE_TARGET_S,
                spark=False,
            )
        ]
    if quick:
        return [
            Case("quick: 12 brokers x 10K partitions x RF 3", _sized(base, 12, 10_000), None),
            Case("quick: 24 brokers x 33,334 partitions x RF 3", _sized(base, 24, 33_334), None),
        ]
    return [
        Case("100 brokers x 100K partitions x RF 3", _sized(base, 100, 100_000), 60.0),
        Case("1M replicas: 250 brokers x 333,334 partitions", _sized(base, 250, 333_334), 300.0),
    ]


def _sized(base: SyntheticSpec, brokers: int, partitions: int) -> SyntheticSpec:
    return replace(base, brokers=brokers, partitions=partitions)


@dataclass(frozen=True)
class Figures:
    """What one planner's target assignment scores.

    Attributes:
        imbalance: the worst max/mean over the resources (1.0 = perfect).
        shape: resource name -> its max/mean.
        moved_bytes: bytes the move from the current placement copies.
        bound_ratio: ``moved_bytes`` over :func:`kpo_placement.goals.bytes_moved_lower_bound`.
        violations: hard goals broken.
        spread: the per-topic spread excess (0 = even).
    """

    imbalance: float
    shape: dict[str, float]
    moved_bytes: float
    bound_ratio: float
    violations: int
    spread: int


def figures(model: ClusterModel, target: IntArray) -> Figures:
    """Score ``target`` against the current placement of ``model``."""
    eligible = goals.eligible_brokers(model)
    imb = goals.imbalance(model, target, eligible)
    moved = goals.bytes_moved(model, model.replicas, target)
    bound = goals.bytes_moved_lower_bound(model, model.replicas, eligible, TOLERANCE)
    return Figures(
        imbalance=imb.worst(),
        shape=dict(imb.max_over_mean),
        moved_bytes=float(moved),
        bound_ratio=moved / bound if bound > 0 else float("nan"),
        violations=len(goals.hard_goal_violations(model, target, eligible=eligible)),
        spread=int(goals.topic_spread_excess(model, target, eligible)),
    )


def _row(label: str, scored: Figures, seconds: float | None) -> str:
    """One result line: time, imbalance per resource, bytes vs bound, violations."""
    worst, ratio = scored.imbalance, scored.bound_ratio
    shape = " ".join(f"{SHORT[r]} {v:.3f}" for r, v in scored.shape.items())
    time_text = f"{seconds:7.1f} s" if seconds is not None else "      - "
    return (
        f"  {label:<24} {time_text}  max/mean: {shape}  (worst {worst:.3f} "
        f"{'ok' if worst <= TOLERANCE + 1e-9 else 'ABOVE 1.05'})  "
        f"moved {scored.moved_bytes / 2**40:8.2f} TiB = {ratio:5.2f} x bound "
        f"{'ok' if ratio <= BYTES_TARGET else 'ABOVE 1.1'}  hard-goal violations "
        f"{scored.violations}  topic spread excess {scored.spread:,}"
    )


def _timed(fn: Callable[[], IntArray]) -> tuple[IntArray, float]:
    start = time.perf_counter()
    target = fn()
    return target, time.perf_counter() - start


def _spark_session() -> Any | None:
    """Return a ``local[2]`` SparkSession, or None without PySpark."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        return None
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("kpo-placement-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "4g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def case_lines(
    case: Case,
    ours: Figures,
    ours_s: float,
    spark_s: float | None,
    generate: Figures,
    generate_s: float,
) -> list[MetricLine]:
    """Return the metric lines of one case: the kpo planner against Kafka's ``--generate``.

    Plan times (NumPy scoring, and Spark ``local[2]`` when it ran, against the case's
    target), the worst max/mean (target :data:`TOLERANCE`), bytes moved over the lower
    bound (target :data:`BYTES_TARGET`) and the hard goals broken (target 0).
    """
    baseline = "Kafka's --generate (round robin)"
    where = f"{case.name}: "
    size = f"{case.spec.brokers}b-{case.spec.partitions}p"

    def line(
        key: str,
        label: str,
        unit: str,
        kpo: float | None,
        theirs: float | None,
        limit: float | None,
    ) -> MetricLine:
        ratio = theirs / kpo if kpo and theirs and kpo > 0 and theirs > 0 else None
        return MetricLine(
            key=f"{size}.{key}",
            label=where + label,
            unit=unit,
            kpo=kpo,
            baseline=theirs,
            baseline_label=baseline,
            ratio=ratio,
            ratio_meaning=f"{BASELINE}/{OURS}" if ratio is not None else "",
            target=f"<= {limit:g}" if limit is not None else "",
            meets_target=None if kpo is None or limit is None else kpo <= limit + 1e-9,
        )

    lines = [
        line(
            "plan_numpy_s",
            "plan time (NumPy scoring)",
            "s",
            ours_s,
            generate_s,
            None if case.spark else case.time_target_s,
        )
    ]
    if spark_s is not None:
        lines.append(
            line(
                "plan_spark_s", "plan time (Spark local[2])", "s", spark_s, None, case.time_target_s
            )
        )
    lines += [
        line(
            "imbalance", "worst max/mean", "x mean", ours.imbalance, generate.imbalance, TOLERANCE
        ),
        line(
            "bytes_vs_bound",
            "bytes moved over the lower bound",
            "x bound",
            ours.bound_ratio,
            generate.bound_ratio,
            BYTES_TARGET,
        ),
        line(
            "hard_goal_violations",
            "hard-goal violations",
            "goals",
            float(ours.violations),
            float(generate.violations),
            0.0,
        ),
    ]
    return lines


def run_case(case: Case, spark: Any | None, emit: Callable[[str], None]) -> list[MetricLine]:
    """Plan ``case`` with every planner, emit the result lines and return its metric lines."""
    model = synthetic_cluster(case.spec)
    replicas = int((model.replicas >= 0).sum())
    emit(f"{case.name} ({replicas:,} replicas, {model.num_brokers} brokers, 3 racks)")
    eligible = goals.eligible_brokers(model)
    bound = goals.bytes_moved_lower_bound(model, model.replicas, eligible, TOLERANCE)
    emit(f"  lower bound of bytes moved: {bound / 2**40:.2f} TiB (goals.bytes_moved_lower_bound)")
    emit(_row("before", figures(model, model.replicas), None))
    options = PlanOptions(balance_tolerance=TOLERANCE)
    ours = plan(model, options)
    took = ours.stats.elapsed_s
    ours_figures = figures(model, ours.target)
    verdict = ""
    if not case.spark and case.time_target_s is not None:
        verdict = f"  time {'within' if took <= case.time_target_s else 'ABOVE'} "
        verdict += f"the {case.time_target_s:.0f} s target"
    emit(_row("kpo planner (NumPy)", ours_figures, took) + verdict)
    emit(f"  {'':<24} peak RSS {peak_rss_mib():,.0f} MiB (process, model and plan included)")
    waves = split_into_waves(ours.moves, throttle_bytes_per_s=THROTTLE_BYTES_PER_S)
    emit(
        f"  {'':<24} {len(ours.moves):,} moves ({ours.stats.leader_moves:,} leader-only), "
        f"rounds {ours.stats.rounds}, {len(waves)} waves of <= 5 moves per broker, "
        f"{total_duration_s(waves) / 3600:.1f} h at 50 MiB/s"
    )
    spark_s: float | None = None
    if not case.spark:
        emit("  kpo planner (Spark)       not run at this size (NumPy only)")
    elif spark is not None:
        from kpo_placement.spark_scorer import SparkScorer

        spark_plan = plan(model, options, SparkScorer(spark))
        same = np.array_equal(spark_plan.target, ours.target)
        spark_s = spark_plan.stats.elapsed_s
        verdict = ""
        if case.time_target_s is not None:
            verdict = f"time {'within' if spark_s <= case.time_target_s else 'ABOVE'} "
            verdict += f"the {case.time_target_s:.0f} s target; "
        emit(
            _row("kpo planner (Spark l[2])", figures(model, spark_plan.target), spark_s)
            + f"  {verdict}same plan as NumPy: {same}"
        )
    else:
        emit("  kpo planner (Spark)       skipped: pyspark is not installed")
    target, seconds = _timed(lambda: kafka_generate(model, eligible))
    generate = figures(model, target)
    emit(_row("kafka --generate", generate, seconds))
    lines = case_lines(case, ours_figures, took, spark_s, generate, seconds)
    if not case.spark:
        emit("  greedy (disk only)        not run at this size (over 12 min at 2M partitions)")
        return lines
    target, seconds = _timed(lambda: greedy_plan(model, eligible, tolerance=TOLERANCE))
    emit(_row("greedy (disk only)", figures(model, target), seconds))
    return lines


def peak_rss_mib() -> float:
    """Return the peak resident set size of this process so far, MiB (Linux: KiB units)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@dataclass(frozen=True)
class PlacementRun:
    """The placement benchmark's output.

    Attributes:
        lines: the printed lines.
        metrics: the metric lines of every case, for the run's record.
    """

    lines: list[str]
    metrics: list[MetricLine]


def run_placement_bench(quick: bool, large: bool = False) -> PlacementRun:
    """Run the placement benchmark, print each line as it comes, and return the lines.

    Args:
        quick: Use the 10x smaller clusters.
        large: Run the 2M-partition cluster alone (NumPy scoring; see the module docstring).
    """
    lines: list[str] = []
    metrics: list[MetricLine] = []

    def emit(line: str) -> None:
        print(line, flush=True)
        lines.append(line)

    emit(
        "placement: imbalance = max/mean per resource over the brokers (target <= 1.05); "
        "bytes vs the lower bound (target <= 1.1x); plan time with local[2]"
    )
    started = time.perf_counter()
    todo = cases(quick, large)
    spark = _spark_session() if any(c.spark for c in todo) else None
    if spark is not None:
        took = time.perf_counter() - started
        emit(f"  Spark {spark.version} local[2] session started in {took:.1f} s")
    try:
        for case in todo:
            metrics += run_case(case, spark, emit)
    finally:
        if spark is not None:
            spark.stop()
    return PlacementRun(lines, metrics)
