"""Build the :class:`~kpo_placement.model.ClusterModel` from a snapshot, in Spark.

Steps (all as Spark DataFrame operations on the snapshot's Parquet files):

1. **Window**: keep the load samples stamped within the last ``window_s`` seconds before the
   latest sample (all samples when ``window_s`` is ``None``).
2. **Aggregate** per partition: mean and ``percentile_approx`` (default the 95th) of
   ``bytes_in_per_s``, ``bytes_out_per_s`` and ``messages_in_per_s``, and the sample count.
3. **Sizes**: the leader's ``size_bytes`` from ``replicas.parquet`` (DescribeLogDirs); the
   largest replica's when the leader has no row (no leader, or its broker is down).
4. **Join** partitions (Metadata) with 2 and 3, ordered by topic and partition.

The driver then collects the rows (one per partition, one per broker) into NumPy arrays.
Broker positions follow ascending broker ids; rack indexes follow the sorted rack names.

**Which statistic feeds the model**: ``bytes_in``/``bytes_out`` of the model are the chosen
percentile of the window (``statistic="percentile"``, the default), so a placement is sized
for the busy part of the window and not only its average; ``statistic="mean"`` uses the
mean instead. Both are kept in :class:`PartitionLoad` for the report. Partitions without
samples get 0 bytes/s.

Spark reads the snapshot at its path, so with a Spark cluster the directory must be on
storage the executors see (a shared volume); the driver validates it first with pyarrow.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from kpo_placement.model import NO_BROKER, ClusterModel, FloatArray, IntArray
from kpo_placement.snapshot import SnapshotMetadata, read_snapshot

Statistic = Literal["mean", "percentile"]
"""The statistic of the window that feeds the model's rates."""
Int64Array = npt.NDArray[np.int64]


@dataclass(frozen=True)
class AggregateOptions:
    """How load samples become the model's rates.

    Attributes:
        window_s: Seconds of samples to use, counted back from the latest sample;
            ``None`` uses every sample.
        percentile: The high percentile computed besides the mean, in (0, 1].
        statistic: Which of the two feeds the model (see the module docstring).
        accuracy: ``percentile_approx`` accuracy (relative error about ``1/accuracy``).
    """

    window_s: float | None = None
    percentile: float = 0.95
    statistic: Statistic = "percentile"
    accuracy: int = 10000

    def __post_init__(self) -> None:
        if not 0 < self.percentile <= 1:
            raise ValueError("percentile must be in (0, 1]")
        if self.window_s is not None and self.window_s <= 0:
            raise ValueError("window_s must be positive")


@dataclass(frozen=True)
class PartitionLoad:
    """Aggregated load per partition, in the model's partition order (bytes/s, records/s).

    Attributes:
        samples: ``int64[P]`` samples in the window.
        bytes_in_mean: ``float64[P]``.
        bytes_in_percentile: ``float64[P]``.
        bytes_out_mean: ``float64[P]``.
        bytes_out_percentile: ``float64[P]``.
        messages_in_mean: ``float64[P]``.
        messages_in_percentile: ``float64[P]``.
    """

    samples: Int64Array
    bytes_in_mean: FloatArray
    bytes_in_percentile: FloatArray
    bytes_out_mean: FloatArray
    bytes_out_percentile: FloatArray
    messages_in_mean: FloatArray
    messages_in_percentile: FloatArray


@dataclass(frozen=True)
class AggregateResult:
    """The model and what it was made from.

    Attributes:
        model: The cluster model (validated).
        load: Both statistics per partition.
        metadata: The snapshot's metadata.
        options: The options used.
    """

    model: ClusterModel
    load: PartitionLoad
    metadata: SnapshotMetadata
    options: AggregateOptions


LOOPBACK = "127.0.0.1"
"""Where a driver with a local master listens: nothing outside the host needs to reach it."""


def is_local_master(master: str) -> bool:
    """Tell whether ``master`` runs the executors on this host, in or beside the driver.

    ``local``, ``local[N]``, ``local[*]``, ``local[N,F]`` and ``local-cluster[N,C,M]``
    (Spark's ``SparkContext`` master URLs) are local; any other master is a cluster one.
    """
    return master == "local" or master.startswith(("local[", "local-cluster["))


def spark_settings(master: str | None, conf: Mapping[str, str] | None = None) -> dict[str, str]:
    """Return the Spark settings :func:`spark_session` applies; ``conf`` overrides each one.

    Always: the Spark UI off (``spark.ui.enabled=false``), no console progress bar,
    session time zone UTC. With a local master (:func:`is_local_master`) the driver also
    binds to and advertises loopback (``spark.driver.bindAddress`` and
    ``spark.driver.host`` ``127.0.0.1``), so that its RPC and block manager ports
    (random unless ``spark.driver.port``/``spark.blockManager.port`` are given) are not
    opened on the host's external address. With a cluster master, or ``None`` (the master
    given by ``spark-submit``), the addresses are left to ``conf``: executors elsewhere
    must reach the driver at ``spark.driver.host`` on ``spark.driver.port`` and
    ``spark.blockManager.port``.

    Args:
        master: ``spark.master``, or ``None`` when ``spark-submit`` gives it.
        conf: Further Spark settings, e.g. ``{"spark.executor.memory": "2g"}``.
    """
    settings = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
    }
    if master is not None and is_local_master(master):
        settings["spark.driver.bindAddress"] = LOOPBACK
        settings["spark.driver.host"] = LOOPBACK
    settings.update(conf or {})
    return settings


def spark_session(
    master: str | None = None,
    conf: Mapping[str, str] | None = None,
    app_name: str = "kpo-placement",
) -> Any:
    """Return a ``SparkSession`` (created, or the active one).

    Args:
        master: ``spark.master`` (``local[*]``, ``spark://host:7077``, ``k8s://https://...``).
            ``None`` keeps the master given by ``spark-submit``, else uses ``local[*]``.
        conf: Further Spark settings (``spark.executor.memory``...), over the defaults of
            :func:`spark_settings`: the Spark UI is off unless ``spark.ui.enabled`` is
            given, and a local master's driver listens on loopback only.
        app_name: ``spark.app.name``.
    """
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if master is None and "PYSPARK_GATEWAY_PORT" not in os.environ:  # not by spark-submit
        master = "local[*]"
    if master is not None:
        builder = builder.master(master)
    for key, value in spark_settings(master, conf).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def _partition_rows(spark: Any, root: Path, options: AggregateOptions) -> list[Any]:
    """Run the Spark plan of steps 1-4; return one row per partition, by topic/partition."""
    from pyspark.sql import functions as sf

    partitions = spark.read.parquet(str(root / "partitions.parquet"))
    replicas = spark.read.parquet(str(root / "replicas.parquet"))
    samples = spark.read.parquet(str(root / "load_samples.parquet"))
    if options.window_s is not None:
        latest = samples.agg(sf.max("timestamp_ms").alias("latest"))
        cutoff = sf.col("latest") - sf.lit(int(options.window_s * 1000))
        samples = samples.crossJoin(latest).where(sf.col("timestamp_ms") > cutoff).drop("latest")
    stats = []
    for column in ("bytes_in", "bytes_out", "messages_in"):
        source = sf.col(f"{column}_per_s")
        stats.append(sf.mean(source).alias(f"{column}_mean"))
        stats.append(
            sf.percentile_approx(source, options.percentile, options.accuracy).alias(
                f"{column}_percentile"
            )
        )
    load = samples.groupBy("topic", "partition").agg(sf.count(sf.lit(1)).alias("samples"), *stats)
    keys = ["topic", "partition"]
    leader_size = (
        replicas.join(partitions.select(*keys, "leader"), keys)
        .where(sf.col("broker_id") == sf.col("leader"))
        .select(*keys, sf.col("size_bytes").alias("leader_size"))
    )
    largest = replicas.groupBy(*keys).agg(sf.max("size_bytes").alias("largest_size"))
    joined = (
        partitions.join(load, keys, "left")
        .join(leader_size, keys, "left")
        .join(largest, keys, "left")
        .withColumn("size_bytes", sf.coalesce("leader_size", "largest_size", sf.lit(0)))
        .orderBy(*keys)
    )
    return list(joined.collect())


def _column(rows: list[Any], name: str) -> FloatArray:
    return np.array([0.0 if r[name] is None else float(r[name]) for r in rows], dtype=np.float64)


def build_model(
    broker_rows: list[Mapping[str, Any]],
    partition_rows: list[Mapping[str, Any]],
    bytes_in: FloatArray,
    bytes_out: FloatArray,
) -> ClusterModel:
    """Turn collected rows into a validated :class:`ClusterModel` (pure NumPy).

    Args:
        broker_rows: ``brokers.parquet`` rows, any order.
        partition_rows: Rows with ``topic``, ``partition``, ``replicas`` (ids), ``leader``
            (id, -1 = none) and ``size_bytes``, in the model's partition order.
        bytes_in: ``float64[P]`` bytes/s per partition.
        bytes_out: ``float64[P]`` bytes/s per partition.

    Raises:
        ModelError: The arrays are inconsistent (e.g. a replica on an unknown broker).
    """
    brokers = sorted(broker_rows, key=lambda r: int(r["broker_id"]))
    broker_ids = np.array([int(r["broker_id"]) for r in brokers], dtype=np.int32)
    position = {int(b): i for i, b in enumerate(broker_ids)}
    rack_names = sorted({str(r["rack"]) for r in brokers if r["rack"] is not None})
    rack_index = {name: i for i, name in enumerate(rack_names)}
    count = len(partition_rows)
    max_rf = max((len(r["replicas"]) for r in partition_rows), default=1)
    replicas: IntArray = np.full((count, max_rf), NO_BROKER, dtype=np.int32)
    leaders: IntArray = np.full(count, NO_BROKER, dtype=np.int32)
    for p, row in enumerate(partition_rows):
        # an unknown id maps to B, which ClusterModel.validate reports
        replicas[p, : len(row["replicas"])] = [
            position.get(b, len(brokers)) for b in row["replicas"]
        ]
        leaders[p] = position.get(int(row["leader"]), NO_BROKER)
    model = ClusterModel(
        broker_ids=broker_ids,
        racks=np.array(
            [NO_BROKER if r["rack"] is None else rack_index[r["rack"]] for r in brokers],
            dtype=np.int32,
        ),
        rack_names=rack_names,
        alive=np.array([bool(r["alive"]) for r in brokers], dtype=np.bool_),
        disk_capacity=np.array([float(r["disk_capacity_bytes"]) for r in brokers]),
        net_in_capacity=np.array([float(r["net_in_capacity_bytes_per_s"]) for r in brokers]),
        net_out_capacity=np.array([float(r["net_out_capacity_bytes_per_s"]) for r in brokers]),
        topics=np.array([str(r["topic"]) for r in partition_rows], dtype=object),
        partitions=np.array([int(r["partition"]) for r in partition_rows], dtype=np.int32),
        replicas=replicas,
        leaders=leaders,
        size_bytes=np.array([float(r["size_bytes"]) for r in partition_rows], dtype=np.float64),
        bytes_in=np.asarray(bytes_in, dtype=np.float64),
        bytes_out=np.asarray(bytes_out, dtype=np.float64),
    )
    model.validate()
    return model


def aggregate_snapshot(
    spark: Any, directory: Path | str, options: AggregateOptions | None = None
) -> AggregateResult:
    """Validate the snapshot in ``directory``, aggregate it with ``spark`` and build the model.

    Raises:
        SnapshotError: The snapshot is missing a file or breaks its schema.
        ModelError: The snapshot cannot form a consistent model.
    """
    chosen = options or AggregateOptions()
    root = Path(directory).resolve()
    snapshot = read_snapshot(root)
    rows = _partition_rows(spark, root, chosen)
    load = PartitionLoad(
        samples=np.array([r["samples"] or 0 for r in rows], dtype=np.int64),
        bytes_in_mean=_column(rows, "bytes_in_mean"),
        bytes_in_percentile=_column(rows, "bytes_in_percentile"),
        bytes_out_mean=_column(rows, "bytes_out_mean"),
        bytes_out_percentile=_column(rows, "bytes_out_percentile"),
        messages_in_mean=_column(rows, "messages_in_mean"),
        messages_in_percentile=_column(rows, "messages_in_percentile"),
    )
    if chosen.statistic == "mean":
        bytes_in, bytes_out = load.bytes_in_mean, load.bytes_out_mean
    else:
        bytes_in, bytes_out = load.bytes_in_percentile, load.bytes_out_percentile
    broker_rows = [r.asDict() for r in spark.read.parquet(str(root / "brokers.parquet")).collect()]
    model = build_model(broker_rows, [r.asDict() for r in rows], bytes_in, bytes_out)
    return AggregateResult(model, load, snapshot.metadata, chosen)
