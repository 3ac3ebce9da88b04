"""Turn a :class:`~kpo_placement.model.ClusterModel` into a snapshot (``synthesize``).

The model (e.g. from :func:`kpo_placement.synthetic.synthetic_cluster`) becomes the four
tables a live collection would give:

* ``brokers``: ids, racks, alive flags and capacities (rounded down to whole bytes);
* ``partitions``: replicas and leader as ids; the ISR is the alive replicas;
* ``replicas``: one row per replica on an *alive* broker (a dead broker answers no
  DescribeLogDirs), ``log_dir`` ``/var/lib/kafka/data``, size = the partition's size;
* ``load_samples``: ``samples`` rows per partition, ``interval_s`` apart and ending at
  ``taken_at_ms``, each the model's rate times a lognormal factor of mean 1 and sigma
  ``noise`` (seeded), so the window's mean is close to the model's rate and its high
  percentile above it. ``messages_in_per_s`` assumes 1 KiB records.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from kpo_placement.model import NO_BROKER, ClusterModel
from kpo_placement.snapshot import LOAD_SAMPLES, Snapshot, SnapshotMetadata, table_from_rows

SYNTHETIC_LOG_DIR = "/var/lib/kafka/data"
"""The ``log_dir`` of every replica row of a synthetic snapshot."""
RECORD_BYTES = 1024
"""Bytes per record assumed for ``messages_in_per_s``."""


def snapshot_from_model(
    model: ClusterModel,
    *,
    taken_at_ms: int,
    samples: int = 12,
    interval_s: float = 10.0,
    noise: float = 0.25,
    seed: int = 0,
) -> Snapshot:
    """Return the synthetic snapshot of ``model`` (see the module docstring).

    Args:
        model: The cluster (validated first).
        taken_at_ms: Time of the last sample and ``metadata.taken_at_ms``, ms since the epoch.
        samples: Load samples per partition (0 for none).
        interval_s: Seconds between samples.
        noise: Sigma of the lognormal factor applied to each sample (0 = exact rates).
        seed: Seed of the noise.

    Raises:
        ModelError: The model is inconsistent.
        ValueError: ``samples`` < 0 or ``interval_s`` <= 0.
    """
    model.validate()
    if samples < 0 or interval_s <= 0:
        raise ValueError("samples must be >= 0 and interval_s > 0")
    ids = model.broker_ids
    broker_rows = [
        {
            "broker_id": int(ids[b]),
            "rack": model.rack_names[model.racks[b]] if model.racks[b] >= 0 else None,
            "alive": bool(model.alive[b]),
            "disk_capacity_bytes": int(model.disk_capacity[b]),
            "net_in_capacity_bytes_per_s": int(model.net_in_capacity[b]),
            "net_out_capacity_bytes_per_s": int(model.net_out_capacity[b]),
        }
        for b in range(model.num_brokers)
    ]
    partition_rows: list[dict[str, Any]] = []
    replica_rows: list[dict[str, Any]] = []
    for p in range(model.num_partitions):
        topic, index = str(model.topics[p]), int(model.partitions[p])
        positions = [int(b) for b in model.replicas[p] if b != NO_BROKER]
        leader = int(model.leaders[p])
        partition_rows.append(
            {
                "topic": topic,
                "partition": index,
                "replicas": [int(ids[b]) for b in positions],
                "leader": int(ids[leader]) if leader >= 0 else -1,
                "isr": [int(ids[b]) for b in positions if model.alive[b]],
            }
        )
        replica_rows.extend(
            {
                "broker_id": int(ids[b]),
                "topic": topic,
                "partition": index,
                "log_dir": SYNTHETIC_LOG_DIR,
                "size_bytes": int(model.size_bytes[p]),
            }
            for b in positions
            if model.alive[b]
        )
    rng = np.random.default_rng(seed)
    count = model.num_partitions
    factors = np.exp(rng.normal(-(noise**2) / 2, noise, (samples, count)))
    offsets_ms = ((samples - 1 - np.arange(samples)) * interval_s * 1000).astype(np.int64)
    bytes_in = (model.bytes_in[None, :] * factors).ravel()
    load_samples = pa.Table.from_pydict(
        {
            "timestamp_ms": np.repeat(taken_at_ms - offsets_ms, count),
            "topic": np.tile(model.topics.astype(str), samples),
            "partition": np.tile(model.partitions, samples),
            "bytes_in_per_s": bytes_in,
            "bytes_out_per_s": (model.bytes_out[None, :] * factors).ravel(),
            "messages_in_per_s": bytes_in / RECORD_BYTES,
        },
        schema=LOAD_SAMPLES,
    )
    return Snapshot(
        brokers=table_from_rows("brokers.parquet", broker_rows),
        partitions=table_from_rows("partitions.parquet", partition_rows),
        replicas=table_from_rows("replicas.parquet", replica_rows),
        load_samples=load_samples,
        metadata=SnapshotMetadata(None, taken_at_ms, "synthetic", samples * float(interval_s)),
    )
