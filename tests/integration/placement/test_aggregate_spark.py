"""aggregate.py on a real local Spark (local[2]) against a NumPy reference aggregation."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.compute as pc
import pytest

from kpo_placement.aggregate import (
    AggregateOptions,
    AggregateResult,
    aggregate_snapshot,
    spark_session,
)
from kpo_placement.snapshot import Snapshot, read_snapshot, table_from_rows, write_snapshot
from kpo_placement.synthetic import SyntheticSpec, synthetic_cluster
from kpo_placement.synthetic_snapshot import snapshot_from_model

pytestmark = pytest.mark.integration

TAKEN_AT_MS = 1_700_000_000_000


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    session = spark_session("local[2]")
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="module")
def snapshot_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A noisy synthetic snapshot with a dead broker, an empty one, a partition without
    samples and a leaderless partition whose leader's log-dir row is missing."""
    model = synthetic_cluster(
        SyntheticSpec(brokers=7, partitions=60, dead_brokers=1, empty_brokers=1, seed=3)
    )
    base = snapshot_from_model(model, taken_at_ms=TAKEN_AT_MS, samples=12, noise=0.4, seed=5)
    samples = base.load_samples
    quiet = pc.and_(
        pc.equal(samples["topic"], str(model.topics[0])), pc.equal(samples["partition"], 0)
    )
    replicas = base.replicas
    # partition 1 loses its leader's DescribeLogDirs row; its other replicas are smaller
    p1 = (str(model.topics[1]), int(model.partitions[1]))
    leader_id = int(model.broker_ids[model.leaders[1]]) if model.leaders[1] >= 0 else -1
    rows = replicas.to_pylist()
    for row in rows:
        if (row["topic"], row["partition"]) == p1:
            row["size_bytes"] = row["size_bytes"] // 2 if row["broker_id"] != leader_id else 0
    kept = [
        r for r in rows if not ((r["topic"], r["partition"]) == p1 and r["broker_id"] == leader_id)
    ]
    snapshot = Snapshot(
        base.brokers,
        base.partitions,
        table_from_rows("replicas.parquet", kept),
        samples.filter(pc.invert(quiet)),
        base.metadata,
    )
    directory = tmp_path_factory.mktemp("snapshot")
    write_snapshot(directory, snapshot)
    return directory


def reference(directory: Path, options: AggregateOptions) -> dict[str, Any]:
    """The same aggregation in NumPy from the pyarrow tables."""
    snapshot = read_snapshot(directory)
    parts = sorted(snapshot.partitions.to_pylist(), key=lambda r: (r["topic"], r["partition"]))
    samples = snapshot.load_samples.to_pylist()
    if options.window_s is not None:
        latest = max(s["timestamp_ms"] for s in samples)
        samples = [s for s in samples if s["timestamp_ms"] > latest - options.window_s * 1000]
    sizes: dict[tuple[str, int], dict[int, int]] = {}
    for r in snapshot.replicas.to_pylist():
        sizes.setdefault((r["topic"], r["partition"]), {})[r["broker_id"]] = r["size_bytes"]
    out: dict[str, list[float]] = {
        k: [] for k in ("in_mean", "in_pct", "out_mean", "out_pct", "n", "size")
    }
    for part in parts:
        key = (part["topic"], part["partition"])
        rows = [s for s in samples if (s["topic"], s["partition"]) == key]
        x_in = np.array([s["bytes_in_per_s"] for s in rows])
        x_out = np.array([s["bytes_out_per_s"] for s in rows])
        q = options.percentile * 100
        out["n"].append(len(rows))
        out["in_mean"].append(float(x_in.mean()) if rows else 0.0)
        out["out_mean"].append(float(x_out.mean()) if rows else 0.0)
        out["in_pct"].append(float(np.percentile(x_in, q, method="inverted_cdf")) if rows else 0.0)
        out["out_pct"].append(
            float(np.percentile(x_out, q, method="inverted_cdf")) if rows else 0.0
        )
        on = sizes.get(key, {})
        out["size"].append(float(on.get(part["leader"], max(on.values(), default=0))))
    return {"parts": parts, **{k: np.array(v) for k, v in out.items()}}


@pytest.mark.parametrize(
    "options",
    [AggregateOptions(), AggregateOptions(window_s=45, percentile=0.9, statistic="mean")],
    ids=["all-p95", "window45-p90-mean"],
)
def test_spark_aggregation_equals_the_numpy_reference(
    spark: Any, snapshot_dir: Path, options: AggregateOptions
) -> None:
    result = aggregate_snapshot(spark, snapshot_dir, options)
    ref = reference(snapshot_dir, options)
    model = result.model
    assert [(str(t), int(p)) for t, p in zip(model.topics, model.partitions, strict=True)] == [
        (r["topic"], r["partition"]) for r in ref["parts"]
    ]
    assert result.load.samples.tolist() == ref["n"].tolist()
    assert ref["n"][0] == 0 and result.model.bytes_in[0] == 0.0  # the quiet partition
    expected_n = 12 if options.window_s is None else 5  # samples every 10 s, 45 s window
    assert set(ref["n"][1:].tolist()) == {expected_n}
    np.testing.assert_allclose(result.load.bytes_in_mean, ref["in_mean"], rtol=1e-12)
    np.testing.assert_allclose(result.load.bytes_out_mean, ref["out_mean"], rtol=1e-12)
    np.testing.assert_allclose(result.load.bytes_in_percentile, ref["in_pct"], rtol=1e-12)
    np.testing.assert_allclose(result.load.bytes_out_percentile, ref["out_pct"], rtol=1e-12)
    chosen_in = ref["in_mean"] if options.statistic == "mean" else ref["in_pct"]
    chosen_out = ref["out_mean"] if options.statistic == "mean" else ref["out_pct"]
    np.testing.assert_allclose(model.bytes_in, chosen_in, rtol=1e-12)
    np.testing.assert_allclose(model.bytes_out, chosen_out, rtol=1e-12)
    np.testing.assert_array_equal(model.size_bytes, ref["size"])
    assert ref["size"][1] > 0  # the largest remaining replica stood in for the leader's
    assert np.all(model.bytes_in[1:] > 0)
    assert result.options == options
    check_model_arrays(result, snapshot_dir)


def check_model_arrays(result: AggregateResult, snapshot_dir: Path) -> None:
    """Broker positions follow ascending ids; replicas and leaders map back to the ids."""
    snapshot = read_snapshot(snapshot_dir)
    model = result.model
    brokers = sorted(snapshot.brokers.to_pylist(), key=lambda r: r["broker_id"])
    assert model.broker_ids.tolist() == [b["broker_id"] for b in brokers]
    assert model.alive.tolist() == [b["alive"] for b in brokers]
    assert not model.alive.all()
    assert model.rack_names == sorted({b["rack"] for b in brokers if b["rack"]})
    assert [model.rack_names[r] for r in model.racks] == [b["rack"] for b in brokers]
    assert model.disk_capacity.tolist() == [float(b["disk_capacity_bytes"]) for b in brokers]
    ids = model.broker_ids
    parts = sorted(snapshot.partitions.to_pylist(), key=lambda r: (r["topic"], r["partition"]))
    for p, row in enumerate(parts):
        assert [int(ids[b]) for b in model.replicas[p] if b >= 0] == row["replicas"]
        assert (int(ids[model.leaders[p]]) if model.leaders[p] >= 0 else -1) == row["leader"]
    assert result.metadata.source == "synthetic"
