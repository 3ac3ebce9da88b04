"""Seeded synthetic clusters for tests and benchmarks.

:func:`synthetic_cluster` builds a :class:`ClusterModel` that looks like a real, aged
cluster: brokers spread over racks; topics with several partitions; replica sizes and
produce rates drawn from lognormal distributions (a few huge partitions, many small ones,
the rate correlated with the size, consume fan-out varying per topic); and a *skewed*
initial placement (some brokers picked more often than others, as after years of manual
topic creation), rack-aware where racks allow. Optionally some brokers are alive but
empty (just added) or dead. The same :class:`SyntheticSpec` always gives the same model.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kpo_placement.model import NO_BROKER, ClusterModel

GIB = 1 << 30


class SyntheticSpecError(ValueError):
    """A :class:`SyntheticSpec` cannot be built (e.g. RF above the number of brokers)."""


@dataclass(frozen=True)
class SyntheticSpec:
    """What :func:`synthetic_cluster` builds.

    Attributes:
        brokers: Brokers in all, ids ``first_broker_id ...``, including empty and dead ones.
        racks: Racks (brokers are dealt to them in turn); 0 for no ``broker.rack`` at all.
        partitions: Partitions in all.
        rf: Replication factor of every partition.
        partitions_per_topic: Mean partitions per topic (topic sizes vary around it).
        mean_size_bytes: Mean replica size, bytes.
        size_sigma: Sigma of the lognormal replica size (1.5 = strong skew).
        mean_bytes_in: Mean produce rate per partition, bytes/s.
        rate_sigma: Sigma of the lognormal produce rate.
        rate_size_correlation: Correlation of log rate and log size, in [0, 1].
        placement_skew: Sigma of the lognormal weight with which a broker is picked for
            a replica in the initial placement (0 = uniform).
        empty_brokers: The last brokers are alive and hold nothing (to add).
        dead_brokers: The brokers just before the empty ones are dead (hold replicas).
        disk_utilisation: Mean disk usage over capacity of the non-empty brokers.
        net_utilisation: Mean network usage over capacity.
        not_preferred_leaders: Fraction of partitions led by a replica other than the first.
        first_broker_id: Id of the first broker.
        seed: Seed of every draw.
    """

    brokers: int = 6
    racks: int = 3
    partitions: int = 200
    rf: int = 3
    partitions_per_topic: int = 8
    mean_size_bytes: float = 1 * GIB
    size_sigma: float = 1.5
    mean_bytes_in: float = 1 << 20
    rate_sigma: float = 1.2
    rate_size_correlation: float = 0.6
    placement_skew: float = 0.4
    empty_brokers: int = 0
    dead_brokers: int = 0
    disk_utilisation: float = 0.4
    net_utilisation: float = 0.3
    not_preferred_leaders: float = 0.05
    first_broker_id: int = 0
    seed: int = 0


def synthetic_cluster(spec: SyntheticSpec) -> ClusterModel:
    """Build the cluster ``spec`` describes (see the module docstring).

    Replicas of a partition go to distinct brokers and, while racks remain, distinct
    racks. Capacities are equal on all brokers, set so that the non-empty brokers' mean
    utilisation is ``disk_utilisation`` (disk) and ``net_utilisation`` (network).

    Raises:
        SyntheticSpecError: ``rf`` exceeds the brokers that can hold replicas, or a count
            is not positive.
    """
    holders = spec.brokers - spec.empty_brokers
    if spec.partitions < 1 or spec.rf < 1 or spec.partitions_per_topic < 1:
        raise SyntheticSpecError("partitions, rf and partitions_per_topic must be >= 1")
    if spec.rf > holders or spec.dead_brokers >= holders:
        raise SyntheticSpecError(
            f"rf {spec.rf} needs {spec.rf} brokers with replicas; only {holders} are not empty"
        )
    rng = np.random.default_rng(spec.seed)
    b = spec.brokers
    racks = (
        (np.arange(b) % spec.racks).astype(np.int32)
        if spec.racks > 0
        else np.full(b, -1, dtype=np.int32)
    )
    rack_names = [f"rack-{i}" for i in range(spec.racks)]
    topics, partition_index = _topics(rng, spec)
    weights = np.exp(rng.normal(0.0, spec.placement_skew, holders))
    replicas = _place(rng, spec.partitions, spec.rf, weights / weights.sum(), racks[:holders])
    size, bytes_in, bytes_out = _loads(rng, spec, topics)
    leaders = replicas[:, 0].copy()
    moved = rng.random(spec.partitions) < spec.not_preferred_leaders
    if spec.rf > 1:
        leaders[moved] = replicas[moved, 1]
    alive = np.ones(b, dtype=bool)
    alive[holders - spec.dead_brokers : holders] = False
    leaders[~alive[np.maximum(leaders, 0)]] = NO_BROKER
    mean_disk = size.sum() * spec.rf / holders
    mean_net = bytes_in.sum() * spec.rf / holders
    return ClusterModel(
        broker_ids=(spec.first_broker_id + np.arange(b)).astype(np.int32),
        racks=racks,
        rack_names=rack_names,
        alive=alive,
        disk_capacity=np.full(b, mean_disk / spec.disk_utilisation),
        net_in_capacity=np.full(b, mean_net / spec.net_utilisation),
        net_out_capacity=np.full(b, 2 * mean_net / spec.net_utilisation),
        topics=topics,
        partitions=partition_index,
        replicas=replicas,
        leaders=leaders.astype(np.int32),
        size_bytes=size,
        bytes_in=bytes_in,
        bytes_out=bytes_out,
    )


def _topics(
    rng: np.random.Generator, spec: SyntheticSpec
) -> tuple[
    np.ndarray[tuple[int], np.dtype[np.object_]], np.ndarray[tuple[int], np.dtype[np.int32]]
]:
    """Deal partitions to topics of varying size; return (topic per partition, index)."""
    counts: list[int] = []
    left = spec.partitions
    while left > 0:
        n = min(left, int(rng.integers(1, 2 * spec.partitions_per_topic)))
        counts.append(n)
        left -= n
    width = len(str(len(counts)))
    names = np.array([f"topic-{t:0{width}d}" for t in range(len(counts))], dtype=object)
    topic_of = np.repeat(np.arange(len(counts)), counts)
    starts = np.repeat(np.cumsum([0, *counts[:-1]]), counts)
    index = (np.arange(spec.partitions) - starts).astype(np.int32)
    return names[topic_of], index


def _place(
    rng: np.random.Generator, partitions: int, rf: int, weights: np.ndarray, racks: np.ndarray
) -> np.ndarray[tuple[int, int], np.dtype[np.int32]]:
    """Draw ``rf`` distinct brokers per partition by ``weights``, distinct racks first."""
    brokers = weights.size
    rack_count = np.unique(racks).size if racks.min() >= 0 else brokers
    keys = racks if racks.min() >= 0 else np.arange(brokers)
    replicas = np.full((partitions, rf), NO_BROKER, dtype=np.int32)
    for j in range(rf):
        todo = np.arange(partitions)
        while todo.size:
            drawn = rng.choice(brokers, size=todo.size, p=weights).astype(np.int32)
            clash = (replicas[todo, :j] == drawn[:, None]).any(axis=1)
            if j < rack_count:
                same_rack = (keys[replicas[todo, :j]] == keys[drawn][:, None]).any(axis=1)
                clash |= same_rack
            replicas[todo[~clash], j] = drawn[~clash]
            todo = todo[clash]
    return replicas


def _loads(
    rng: np.random.Generator, spec: SyntheticSpec, topics: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Draw (size bytes, bytes in/s, bytes out/s) per partition; see the module docstring."""
    p = spec.partitions
    _, topic_of = np.unique(topics.astype(str), return_inverse=True)
    topic_factor = rng.normal(0.0, 0.5, topic_of.max() + 1)[topic_of]
    z_size = rng.normal(size=p)
    rho = spec.rate_size_correlation
    z_rate = rho * z_size + np.sqrt(1 - rho * rho) * rng.normal(size=p)
    size = np.exp(spec.size_sigma * z_size - spec.size_sigma**2 / 2) * spec.mean_size_bytes
    rate = np.exp(spec.rate_sigma * z_rate + topic_factor - spec.rate_sigma**2 / 2 - 0.125)
    bytes_in = rate * spec.mean_bytes_in
    fan_out = rng.integers(0, 4, topic_of.max() + 1)[topic_of]
    return np.floor(size), bytes_in, bytes_in * fan_out
