"""Where Spark scoring pays off against NumPy: one planner round at growing sizes.

A round's work is its (candidate, destination) pairs (:mod:`kpo_placement.scoring`). On
a synthetic cluster (300 brokers x 500K partitions x RF 3, the seed of the placement
benchmark) the first balance round is built with ``candidates_per_broker`` from 10 to 400
(about 1.5K to 54K candidates, 0.3M to 16M pairs) and scored by
:class:`~kpo_placement.scoring.NumpyScorer` and by
:class:`~kpo_placement.spark_scorer.SparkScorer` on the given Spark session (after one
untimed warm-up round, so the JVM has compiled the code). Each line gives both wall
times, their ratio and whether the answers are equal; the crossover is the first size
where Spark is faster.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from kpo_placement import goals
from kpo_placement.aggregate import spark_session
from kpo_placement.replica_rounds import REPLICA_WEIGHTS, balance_candidates, build_problem
from kpo_placement.scoring import BestMoves, NumpyScorer, RoundProblem
from kpo_placement.state import PlanState
from kpo_placement.synthetic import SyntheticSpec, synthetic_cluster

SPEC = SyntheticSpec(
    brokers=300,
    partitions=500_000,
    racks=3,
    rf=3,
    partitions_per_topic=20,
    placement_skew=0.25,
    seed=6,
)
PER_BROKER = (10, 40, 100, 400)


def round_problems(spec: SyntheticSpec = SPEC) -> list[RoundProblem]:
    """Return the first balance round of ``spec`` for each of :data:`PER_BROKER`."""
    model = synthetic_cluster(spec)
    eligible = goals.eligible_brokers(model)
    state = PlanState.start(
        model, eligible, tolerance=1.05, disk_threshold=0.8, max_replicas_per_broker=None
    )
    problems = []
    for per_broker in PER_BROKER:
        cands = balance_candidates(state, eligible, per_broker, REPLICA_WEIGHTS)
        problems.append(build_problem(state, cands, eligible, 16))
    return problems


def _timed(
    score: Callable[[RoundProblem], BestMoves], problem: RoundProblem
) -> tuple[BestMoves, float]:
    started = time.perf_counter()
    best = score(problem)
    return best, time.perf_counter() - started


def run_crossover(spark: Any, label: str, emit: Callable[[str], None]) -> None:
    """Score each round with NumPy and with Spark on ``spark``; emit a line per size."""
    from kpo_placement.spark_scorer import SparkScorer

    problems = round_problems()
    scorer = SparkScorer(spark)
    scorer.best_moves(problems[0])  # warm-up
    emit(f"crossover: one round scored by NumPy and by Spark {label} ({SPEC.brokers} brokers)")
    for problem in problems:
        pairs = problem.size * int(problem.dest_ok.sum())
        expected, numpy_s = _timed(NumpyScorer().best_moves, problem)
        got, spark_s = _timed(scorer.best_moves, problem)
        same = np.array_equal(got.dest, expected.dest)
        emit(
            f"  {problem.size:>7,} candidates {pairs / 1e6:6.1f}M pairs: NumPy {numpy_s:6.2f} s, "
            f"Spark {spark_s:6.2f} s ({spark_s / numpy_s:5.1f}x), same answer: {same}"
        )


def run_crossover_bench(workdir: Any) -> list[str]:
    """Run the crossover on ``local[2]``, then on a standalone cluster of two 1-core workers.

    The standalone cluster is :class:`kpo_devenv.spark_standalone.SparkStandaloneCluster`
    (processes on this machine, logs in ``workdir``); returns the lines printed.
    """
    from kpo_devenv.spark_standalone import SparkStandaloneCluster

    lines: list[str] = []

    def emit(line: str) -> None:
        print(line, flush=True)
        lines.append(line)

    def session(master: str) -> Any:
        return spark_session(
            master,
            {
                "spark.sql.shuffle.partitions": "2",
                "spark.driver.memory": "2g",
                "spark.driver.host": "127.0.0.1",
                "spark.executor.memory": "1g",
                "spark.cores.max": "2",
            },
            app_name="kpo-placement-crossover",
        )

    spark = session("local[2]")
    try:
        run_crossover(spark, "local[2]", emit)
    finally:
        spark.stop()
    with SparkStandaloneCluster(workdir / "spark-standalone", workers=2) as cluster:
        spark = session(cluster.master_url)
        try:
            run_crossover(spark, f"standalone {cluster.master_url} (2 workers x 1 core)", emit)
        finally:
            spark.stop()
    return lines
