"""A :class:`~kpo_placement.scoring.CandidateScorer` that scores a round's moves with Spark.

Each round, the candidates (``n`` rows) and the destinations (``B`` rows) become Spark
DataFrames (through Arrow). The (candidate, destination) pairs are their cross join (the
destinations broadcast, the candidates hash-partitioned by id so that the per-candidate
aggregation needs no shuffle); the feasibility filters and the score are Spark column
expressions; each candidate's best ``top_k`` destinations are a sorted ``collect_list``
per candidate, collected back to the driver through Arrow.

The arithmetic is that of :mod:`kpo_placement.scoring`, operation by operation in the same
order, so IEEE doubles round the same way in the JVM as in NumPy and the answer equals
:class:`~kpo_placement.scoring.NumpyScorer`'s, ties included (lower broker position first).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from kpo_placement.scoring import MIN_GAIN, TIE, BestMoves, NumpyScorer, RoundProblem

RESOURCE_COUNT = 5


class SparkScorer:
    """Score rounds with Spark DataFrames (see the module docstring).

    Args:
        spark: A running ``pyspark.sql.SparkSession`` (e.g. ``master("local[2]")``).
        partitions: Spark partitions of the candidates; default the session's default
            parallelism.
        min_pairs: Rounds with fewer (candidate, destination) pairs are scored by
            :class:`~kpo_placement.scoring.NumpyScorer` on the driver, where a Spark job's
            fixed cost (about a second) exceeds the work; 0 (default) sends every round
            to Spark. Both give the same answer, so this only changes the time.

    Attributes:
        spark_rounds: Rounds scored in Spark so far.
        driver_rounds: Rounds scored on the driver so far (``min_pairs``).
    """

    def __init__(self, spark: Any, partitions: int | None = None, min_pairs: int = 0) -> None:
        self.spark = spark
        self.partitions = partitions or int(spark.sparkContext.defaultParallelism)
        self.min_pairs = min_pairs
        self.spark_rounds = 0
        self.driver_rounds = 0

    def best_moves(self, problem: RoundProblem) -> BestMoves:
        """Return each candidate's best ``problem.top_k`` destinations, scored in Spark.

        Raises:
            pyspark.errors.PySparkException: Spark failed (propagated as raised).
        """
        from pyspark.sql import functions as F  # noqa: N812 (PySpark's usual alias)

        n, b = problem.size, problem.dest_ok.shape[0]
        k = min(problem.top_k, b)
        dest = np.full((n, k), -1, dtype=np.int32)
        score = np.full((n, k), np.nan)
        hinge = np.full((n, k), np.nan)
        if n == 0 or not problem.dest_ok.any():
            return BestMoves(dest, score, hinge)
        if n * int(problem.dest_ok.sum()) < self.min_pairs:
            self.driver_rounds += 1
            return NumpyScorer().best_moves(problem)
        self.spark_rounds += 1
        cands = self.spark.createDataFrame(_candidate_table(problem)).repartition(
            self.partitions, "cid"
        )
        dests = self.spark.createDataFrame(_dest_table(problem))
        pairs = cands.crossJoin(F.broadcast(dests))
        pairs = pairs.where(_feasible(problem, F))
        pairs = pairs.select("cid", "d", "required", *_score_columns(problem, F))
        full = _topic_full_table(problem)
        if full.num_rows:
            marks = self.spark.createDataFrame(full).withColumn("full", F.lit(1.0))
            pairs = pairs.join(F.broadcast(marks), ["topic_row", "d"], "left")
            full_col = F.coalesce(F.col("full"), F.lit(0.0))
        else:
            full_col = F.lit(0.0)
        pairs = pairs.withColumn("score", F.col("score") - F.lit(problem.topic_weight) * full_col)
        pairs = pairs.where(F.col("required") | (F.col("hinge") > F.lit(MIN_GAIN)))
        ranked = pairs.groupBy("cid").agg(
            F.slice(
                F.sort_array(
                    F.collect_list(
                        F.struct((-F.col("score")).alias("neg_score"), F.col("d"), F.col("hinge"))
                    )
                ),
                1,
                k,
            ).alias("top")
        )
        flat = ranked.select("cid", F.posexplode("top").alias("rank", "best")).select(
            "cid", "rank", "best.d", "best.neg_score", "best.hinge"
        )
        table = flat.toArrow()
        rows = table.column("cid").to_numpy()
        ranks = table.column("rank").to_numpy()
        dest[rows, ranks] = table.column("d").to_numpy()
        score[rows, ranks] = -table.column("neg_score").to_numpy()
        hinge[rows, ranks] = table.column("hinge").to_numpy()
        return BestMoves(dest, score, hinge)


def _candidate_table(problem: RoundProblem) -> pa.Table:
    """Candidates as an Arrow table: id, source, loads, other replicas and racks, flags."""
    n = problem.size
    columns: dict[str, Any] = {
        "cid": np.arange(n, dtype=np.int32),
        "src": problem.source.astype(np.int32),
        "need_new_rack": problem.need_new_rack,
        "topic_row": problem.topic_row.astype(np.int32),
        "required": problem.required,
        "src_hinge": problem.source_hinge,
        "src_score": problem.source_score,
    }
    for r in range(RESOURCE_COUNT):
        columns[f"l{r}"] = np.ascontiguousarray(problem.load[:, r])
    for j in range(problem.others.shape[1]):
        columns[f"o{j}"] = np.ascontiguousarray(problem.others[:, j]).astype(np.int32)
        columns[f"or{j}"] = np.ascontiguousarray(problem.others_rack[:, j]).astype(np.int32)
    return pa.table(columns)


def _dest_table(problem: RoundProblem) -> pa.Table:
    """Destinations that may receive, as an Arrow table: position, rack, state, room."""
    keep = np.flatnonzero(problem.dest_ok)
    columns: dict[str, Any] = {
        "d": keep.astype(np.int32),
        "rack": problem.dest_rack[keep].astype(np.int32),
        "disk_room": problem.disk_room[keep],
        "slot_room": problem.slot_room[keep].astype(np.int32),
    }
    for r in range(RESOURCE_COUNT):
        columns[f"u{r}"] = problem.dest_util[keep, r]
        columns[f"pen{r}"] = problem.dest_pen[keep, r]
        columns[f"sc{r}"] = problem.dest_scale[keep, r]
    return pa.table(columns)


def _topic_full_table(problem: RoundProblem) -> pa.Table:
    """``(topic_row, d)`` cells where the broker already holds its share of the topic."""
    rows, brokers = np.nonzero(problem.topic_full)
    return pa.table({"topic_row": rows.astype(np.int32), "d": brokers.astype(np.int32)})


def _feasible(problem: RoundProblem, F: Any) -> Any:  # noqa: N803 (PySpark's usual alias)
    """Return the hard-goal filter of a pair (see :mod:`kpo_placement.scoring`)."""
    cond = (F.col("d") != F.col("src")) & (F.col("l0") <= F.col("disk_room"))
    cond = cond & (F.col("slot_room") >= F.lit(1))
    for j in range(problem.others.shape[1]):
        cond = cond & (F.col("d") != F.col(f"o{j}"))
        cond = cond & (~F.col("need_new_rack") | (F.col("rack") != F.col(f"or{j}")))
    return cond


def _penalty(v: Any, upper: float, lower: float, F: Any) -> Any:  # noqa: N803
    """``pen(v)`` as a column expression, same operations as :func:`scoring.penalty`."""
    e = F.greatest(v - F.lit(upper), F.lit(0.0))
    f = F.greatest(F.lit(lower) - v, F.lit(0.0))
    return e * (F.lit(1.0) + e) + f * (F.lit(1.0) + f)


def _score_columns(problem: RoundProblem, F: Any) -> list[Any]:  # noqa: N803
    """``hinge``, ``score`` (before the topic term) and ``topic_row`` columns of a pair."""
    hinge = F.col("src_hinge")
    score = F.col("src_score")
    for r in range(RESOURCE_COUNT):
        w = float(problem.weights[r])
        if w == 0.0:
            continue
        v = F.col(f"u{r}")
        after = v + F.col(f"l{r}") * F.col(f"sc{r}")
        dh = F.lit(w) * (F.col(f"pen{r}") - _penalty(after, problem.upper, problem.lower, F))
        dt = F.lit(w) * F.lit(TIE) * (v * v - after * after)
        hinge = hinge + dh
        score = score + dh + dt
    return [hinge.alias("hinge"), score.alias("score"), F.col("topic_row")]
