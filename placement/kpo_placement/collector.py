"""Snapshot a live cluster: assignment, racks, replica sizes, load samples and capacities.

Sources, all through the operator's Admin API door
(:class:`kpo_kafka.admin.KafkaAdmin`) except the load and the capacities:

============================ ================================================================
table                        source
============================ ================================================================
``brokers.parquet``          DescribeCluster (id, ``broker.rack``; alive = registered), plus
                             brokers named by an assignment but not registered (alive false);
                             capacities from :class:`Capacities` (YAML file / CLI defaults)
``partitions.parquet``       Metadata (replicas in assignment order, leader, ISR)
``replicas.parquet``         DescribeLogDirs (KIP-113): log dir and size of every replica
``load_samples.parquet``     a :data:`LoadSampler`: broker metrics pages or Prometheus
                             (:mod:`kpo_placement.metrics_sources`, rates per
                             :mod:`kpo_placement.load_rates`); empty without one
============================ ================================================================

Kafka knows nothing of a broker's disk size or NIC speed, hence the capacities file.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from kpo_kafka.admin import KafkaAdmin
from kpo_kafka.admin_types import NO_LEADER
from kpo_kafka.topic_partition import TopicPartition
from kpo_placement.load_rates import load_sample_rows
from kpo_placement.metrics_sources import LoadSampler
from kpo_placement.snapshot import Snapshot, SnapshotMetadata, table_from_rows

_QUANTITY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGTP]i?)?\s*$")
_FACTORS = {
    None: 1,
    "K": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
}


class CapacityConfigError(ValueError):
    """The capacities file or option is malformed; the message names the key."""


def parse_quantity(value: object, where: str) -> int:
    """Parse a byte count or rate: an integer, or a string like ``500Gi`` or ``125M``.

    Suffixes are Kubernetes quantity suffixes: ``K M G T P`` (powers of 1000) and
    ``Ki Mi Gi Ti Pi`` (powers of 1024).

    Raises:
        CapacityConfigError: Not a non-negative quantity (``where`` names the key).
    """
    if isinstance(value, bool):
        raise CapacityConfigError(f"{where}: {value!r} is not a quantity")
    if isinstance(value, int):
        number = value
    else:
        match = _QUANTITY.match(str(value))
        if match is None:
            raise CapacityConfigError(f"{where}: {value!r} is not a quantity (e.g. 500Gi)")
        number = int(float(match.group(1)) * _FACTORS[match.group(2)])
    if number < 0:
        raise CapacityConfigError(f"{where}: must not be negative")
    return number


@dataclass(frozen=True)
class BrokerCapacity:
    """What one broker can hold and carry.

    Attributes:
        disk_bytes: Usable bytes of its log dirs together.
        net_in_bytes_per_s: Inbound network bytes/s (produce + replication fetch answers).
        net_out_bytes_per_s: Outbound network bytes/s (consumer + follower fetches).
    """

    disk_bytes: int = 1000 * 2**30
    net_in_bytes_per_s: int = 125_000_000
    net_out_bytes_per_s: int = 125_000_000


DEFAULT_CAPACITY = BrokerCapacity()
"""1000 GiB of disk and 125 MB/s (1 Gbit/s) each way, for brokers nothing is said about."""

_KEYS = ("disk_bytes", "net_in_bytes_per_s", "net_out_bytes_per_s")


@dataclass(frozen=True)
class Capacities:
    """A default capacity and per-broker overrides.

    Attributes:
        default: Capacity of brokers without an override.
        per_broker: Broker id -> capacity.
    """

    default: BrokerCapacity = DEFAULT_CAPACITY
    per_broker: dict[int, BrokerCapacity] = field(default_factory=dict)

    def of(self, broker_id: int) -> BrokerCapacity:
        """Return the capacity of ``broker_id``."""
        return self.per_broker.get(broker_id, self.default)


def _capacity(entry: object, base: BrokerCapacity, where: str) -> BrokerCapacity:
    if not isinstance(entry, Mapping):
        raise CapacityConfigError(f"{where}: must be a mapping of {', '.join(_KEYS)}")
    unknown = sorted(str(k) for k in entry if k not in _KEYS)
    if unknown:
        raise CapacityConfigError(f"{where}.{unknown[0]}: unknown key")
    values = {k: parse_quantity(v, f"{where}.{k}") for k, v in entry.items()}
    return replace(base, **values)


def capacities_from_data(data: object, default: BrokerCapacity = DEFAULT_CAPACITY) -> Capacities:
    """Build :class:`Capacities` from a decoded capacities document.

    The document is ``{"default": {...}, "brokers": {<id>: {...}}}``, each entry holding
    any of ``disk_bytes``, ``net_in_bytes_per_s``, ``net_out_bytes_per_s``; missing keys fall
    back to ``default`` (then to the ``default`` argument).

    Raises:
        CapacityConfigError: An unknown key, a bad quantity or a non-integer broker id.
    """
    if data is None:
        return Capacities(default)
    if not isinstance(data, Mapping):
        raise CapacityConfigError("capacities: must be a mapping with 'default' and 'brokers'")
    unknown = sorted(str(k) for k in data if k not in ("default", "brokers"))
    if unknown:
        raise CapacityConfigError(f"{unknown[0]}: unknown key")
    base = _capacity(data.get("default") or {}, default, "default")
    brokers = data.get("brokers") or {}
    if not isinstance(brokers, Mapping):
        raise CapacityConfigError("brokers: must map broker ids to capacities")
    per_broker: dict[int, BrokerCapacity] = {}
    for key, entry in brokers.items():
        try:
            broker_id = int(key)
        except (TypeError, ValueError) as exc:
            raise CapacityConfigError(f"brokers.{key}: not a broker id") from exc
        per_broker[broker_id] = _capacity(entry, base, f"brokers.{key}")
    return Capacities(base, per_broker)


def load_capacities(path: Path | None, default: BrokerCapacity = DEFAULT_CAPACITY) -> Capacities:
    """Read a capacities YAML file (see :func:`capacities_from_data`); ``None``: defaults only.

    Raises:
        CapacityConfigError: The file is not valid YAML or not a valid document.
        OSError: The file cannot be read.
    """
    if path is None:
        return Capacities(default)
    try:
        data: Any = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise CapacityConfigError(f"{path}: not valid YAML: {exc}") from exc
    return capacities_from_data(data, default)


def collect_snapshot(
    admin: KafkaAdmin,
    capacities: Capacities,
    sampler: LoadSampler | None = None,
    clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
) -> Snapshot:
    """Snapshot the cluster behind ``admin``.

    Args:
        admin: The Admin API client (the caller closes it).
        capacities: Disk and network capacities per broker.
        sampler: Load source; ``None`` writes no load samples (every rate is then 0).
        clock_ms: Wall clock, ms since the epoch (``taken_at_ms`` is read first).

    Returns:
        A :class:`~kpo_placement.snapshot.Snapshot` with ``source="live"`` and ``window_s``
        the time between the first and last scrape (0 without samples).

    Raises:
        KafkaAdminError: From the Admin API calls (``kpo_kafka.admin_types``).
        MetricsUnavailableError: From the sampler.
        SnapshotError: The cluster's answers break a snapshot invariant.
    """
    taken_at = clock_ms()
    cluster = admin.describe_cluster()
    topics = admin.describe_topics(None)
    partition_rows: list[dict[str, Any]] = []
    leaders: dict[TopicPartition, int] = {}
    named: set[int] = set()
    for topic in sorted(topics):
        for index, info in sorted(topics[topic].items()):
            partition_rows.append(
                {
                    "topic": topic,
                    "partition": index,
                    "replicas": list(info.replicas),
                    "leader": info.leader,
                    "isr": list(info.isr),
                }
            )
            named.update(info.replicas)
            if info.leader != NO_LEADER:
                leaders[TopicPartition(topic, index)] = info.leader
    broker_rows = []
    for broker_id in sorted(set(cluster.brokers) | named):
        capacity = capacities.of(broker_id)
        broker_rows.append(
            {
                "broker_id": broker_id,
                "rack": cluster.brokers.get(broker_id),
                "alive": broker_id in cluster.brokers,
                "disk_capacity_bytes": capacity.disk_bytes,
                "net_in_capacity_bytes_per_s": capacity.net_in_bytes_per_s,
                "net_out_capacity_bytes_per_s": capacity.net_out_bytes_per_s,
            }
        )
    replica_rows = [
        {
            "broker_id": broker_id,
            "topic": topic,
            "partition": index,
            "log_dir": info.log_dir,
            "size_bytes": info.size_bytes,
        }
        for (broker_id, topic, index), info in sorted(
            admin.describe_log_dirs(sorted(cluster.brokers)).items()
        )
        if topic in topics
    ]
    scrapes = sampler(leaders) if sampler is not None else []
    known = {(r["topic"], r["partition"]) for r in partition_rows}
    sample_rows = [r for r in load_sample_rows(scrapes) if (r["topic"], r["partition"]) in known]
    window_s = 0.0
    if len(scrapes) > 1:
        stamps = [s.timestamp_ms for s in scrapes]
        window_s = (max(stamps) - min(stamps)) / 1000.0
    return Snapshot(
        brokers=table_from_rows("brokers.parquet", broker_rows),
        partitions=table_from_rows("partitions.parquet", partition_rows),
        replicas=table_from_rows("replicas.parquet", replica_rows),
        load_samples=table_from_rows("load_samples.parquet", sample_rows),
        metadata=SnapshotMetadata(cluster.cluster_id, taken_at, "live", window_s),
    )
