"""SparkScorer on a real local Spark (local[2]) gives exactly NumpyScorer's answers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from kpo_placement import goals
from kpo_placement import replica_rounds as rr
from kpo_placement.planner import NumpyScorer, PlanOptions, plan
from kpo_placement.spark_scorer import SparkScorer
from kpo_placement.state import PlanState
from kpo_placement.synthetic import SyntheticSpec, synthetic_cluster

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("kpo-spark-scorer-test")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    try:
        yield session
    finally:
        session.stop()


def first_round(model, required: bool) -> rr.RoundProblem:
    eligible = goals.eligible_brokers(model)
    state = PlanState.start(
        model, eligible, tolerance=1.05, disk_threshold=0.8, max_replicas_per_broker=None
    )
    if required:
        cands = rr.required_candidates(state)
    else:
        cands = rr.balance_candidates(state, eligible, 50, rr.REPLICA_WEIGHTS)
    return rr.build_problem(state, cands, eligible, top_k=5)


@pytest.mark.parametrize("required", [False, True])
def test_round_scores_equal_numpy(spark, required):
    spec = SyntheticSpec(brokers=9, partitions=400, racks=3, dead_brokers=1, seed=8)
    problem = first_round(synthetic_cluster(spec), required)
    assert problem.size > 0
    assert problem.topic_full.any()
    expected = NumpyScorer().best_moves(problem)
    got = SparkScorer(spark).best_moves(problem)
    assert np.array_equal(got.dest, expected.dest)
    assert np.array_equal(got.score, expected.score, equal_nan=True)
    assert np.array_equal(got.hinge, expected.hinge, equal_nan=True)
    assert (got.dest[:, 0] >= 0).any()


def test_plan_with_spark_equals_plan_with_numpy(spark):
    spec = SyntheticSpec(brokers=8, partitions=300, racks=3, placement_skew=0.5, seed=9)
    model = synthetic_cluster(spec)
    options = PlanOptions(max_rounds=3)
    expected = plan(model, options)
    scorer = SparkScorer(spark)
    got = plan(model, options, scorer)
    assert got.stats.rounds["balance"] > 0
    assert scorer.spark_rounds == got.stats.rounds["balance"] + got.stats.rounds["repair"]
    assert np.array_equal(got.target, expected.target)
    assert got.moves == expected.moves


def test_no_destination_gives_no_move(spark):
    spec = SyntheticSpec(brokers=6, partitions=100, seed=2)
    problem = first_round(synthetic_cluster(spec), required=False)
    closed = rr.RoundProblem(**{**problem.__dict__, "dest_ok": np.zeros_like(problem.dest_ok)})
    best = SparkScorer(spark).best_moves(closed)
    assert (best.dest == -1).all()


def test_small_rounds_stay_on_the_driver(spark):
    spec = SyntheticSpec(brokers=6, partitions=100, seed=2)
    problem = first_round(synthetic_cluster(spec), required=False)
    scorer = SparkScorer(spark, min_pairs=10**9)
    best = scorer.best_moves(problem)
    assert (scorer.spark_rounds, scorer.driver_rounds) == (0, 1)
    assert np.array_equal(best.dest, NumpyScorer().best_moves(problem).dest)
