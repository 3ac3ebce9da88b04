"""The Spark scoring on a Spark standalone cluster (a master and two workers) plans as local[2].

The cluster is real: Spark's own Master and Worker processes from the PySpark distribution
in the virtualenv (:class:`kpo_devenv.spark_standalone.SparkStandaloneCluster`), and the
driver (this process) submits with ``--master spark://127.0.0.1:<port>``; the rounds'
joins and aggregations run in executors on the workers.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kpo_devenv.spark_standalone import SparkStandaloneCluster
from kpo_placement.aggregate import spark_session
from kpo_placement.planner import PlanOptions, plan
from kpo_placement.spark_scorer import SparkScorer
from kpo_placement.synthetic import SyntheticSpec, synthetic_cluster

pytestmark = [
    pytest.mark.integration,
    pytest.mark.timeout(1800),
    pytest.mark.skipif(shutil.which("java") is None, reason="Spark needs a Java runtime"),
]

SPEC = SyntheticSpec(brokers=7, racks=3, partitions=400, dead_brokers=1, seed=22)
"""A dead broker (a repair round) and skew: three rounds scored in Spark."""
EXECUTOR_WAIT_S = 120.0


def session(master: str, **conf: str) -> Any:
    """Return a new SparkSession on ``master`` (any earlier one must be stopped)."""
    settings = {
        "spark.sql.shuffle.partitions": "2",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        **conf,
    }
    return spark_session(master, settings, app_name="kpo-spark-standalone-test")


def executors(spark: Any) -> int:
    """Return the executors registered with the driver (the driver itself not counted)."""
    return int(spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size()) - 1


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkStandaloneCluster]:
    workdir: Path = tmp_path_factory.mktemp("spark-standalone")
    with SparkStandaloneCluster(workdir, workers=2, cores_per_worker=1) as started:
        yield started


@pytest.fixture(scope="module")
def local_plan() -> np.ndarray:
    spark = session("local[2]")
    try:
        scorer = SparkScorer(spark)
        result = plan(synthetic_cluster(SPEC), PlanOptions(), scorer)
        assert scorer.spark_rounds > 0
        return result.target
    finally:
        spark.stop()


def test_standalone_cluster_plans_as_local(cluster, local_plan):
    assert cluster.alive_workers() == 2
    spark = session(
        cluster.master_url,
        **{
            "spark.executor.cores": "1",
            "spark.executor.memory": "512m",
            "spark.cores.max": "2",
            "spark.driver.memory": "1g",
        },
    )
    try:
        deadline = time.monotonic() + EXECUTOR_WAIT_S
        while executors(spark) < 2 and time.monotonic() < deadline:
            time.sleep(0.5)
        assert executors(spark) == 2, "both workers run an executor of the application"
        apps = cluster.status().get("activeapps", [])
        assert [a["name"] for a in apps] == ["kpo-spark-standalone-test"]
        scorer = SparkScorer(spark)
        got = plan(synthetic_cluster(SPEC), PlanOptions(), scorer)
        assert scorer.spark_rounds > 0 and scorer.driver_rounds == 0
        assert np.array_equal(got.target, local_plan)
        assert got.moves, "the synthetic cluster needs moves (a dead broker, skew)"
    finally:
        spark.stop()
