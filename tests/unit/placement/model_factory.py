"""Small hand-made ClusterModels for the planner's unit tests."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kpo_placement.model import NO_BROKER, ClusterModel


@dataclass(frozen=True)
class B:
    """A broker: id, rack (None = no broker.rack), alive, capacities."""

    id: int
    rack: str | None = None
    alive: bool = True
    disk: float = 1000.0
    net_in: float = 1000.0
    net_out: float = 1000.0


@dataclass(frozen=True)
class P:
    """A partition: topic, index, replica ids (preferred leader first), size and rates."""

    topic: str
    index: int
    replicas: tuple[int, ...]
    size: float = 10.0
    bytes_in: float = 1.0
    bytes_out: float = 1.0
    leader: int | None = None


def make_model(brokers: Sequence[B], partitions: Sequence[P]) -> ClusterModel:
    """Build a validated model; leaders default to the first replica."""
    ids = [b.id for b in brokers]
    racks = sorted({b.rack for b in brokers if b.rack is not None})
    width = max(len(p.replicas) for p in partitions)
    replicas = np.full((len(partitions), width), NO_BROKER, dtype=np.int32)
    for i, p in enumerate(partitions):
        replicas[i, : len(p.replicas)] = [ids.index(r) for r in p.replicas]
    leaders = [ids.index(p.leader if p.leader is not None else p.replicas[0]) for p in partitions]
    model = ClusterModel(
        broker_ids=np.array(ids, dtype=np.int32),
        racks=np.array([racks.index(b.rack) if b.rack else -1 for b in brokers], dtype=np.int32),
        rack_names=racks,
        alive=np.array([b.alive for b in brokers]),
        disk_capacity=np.array([b.disk for b in brokers], dtype=np.float64),
        net_in_capacity=np.array([b.net_in for b in brokers], dtype=np.float64),
        net_out_capacity=np.array([b.net_out for b in brokers], dtype=np.float64),
        topics=np.array([p.topic for p in partitions], dtype=object),
        partitions=np.array([p.index for p in partitions], dtype=np.int32),
        replicas=replicas,
        leaders=np.array(leaders, dtype=np.int32),
        size_bytes=np.array([p.size for p in partitions], dtype=np.float64),
        bytes_in=np.array([p.bytes_in for p in partitions], dtype=np.float64),
        bytes_out=np.array([p.bytes_out for p in partitions], dtype=np.float64),
    )
    model.validate()
    return model
