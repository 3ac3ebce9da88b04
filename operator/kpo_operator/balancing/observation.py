"""One look at a Kafka cluster, as a BalancingPolicy's detectors and planners need it.

:func:`observe` is the only I/O: DescribeCluster (live and fenced brokers, racks),
Metadata of every topic (replicas, ISR, leader), ListPartitionReassignments (KIP-455) and,
when a disk detector runs or a plan needs sizes, DescribeLogDirs (replica sizes and
dirs, KIP-113; each dir's state and volume totals, KIP-827). Everything else reads the
frozen :class:`ClusterObservation`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

from kpo_kafka.admin import KafkaAdmin
from kpo_kafka.admin_types import (
    KafkaUnavailableError,
    LogDirState,
    PartitionInfo,
    Reassignment,
    ReplicaDirInfo,
    ReplicaKey,
)
from kpo_kafka.topic_partition import TopicPartition


@dataclass(frozen=True)
class ClusterObservation:
    """The cluster at one moment.

    Attributes:
        live: Registered, unfenced broker id -> rack (``None``: no ``broker.rack``).
        fenced: Registered but fenced brokers (KRaft, KIP-631; empty on ZooKeeper clusters).
        partitions: Every partition's replicas, ISR and leader.
        in_flight: The reassignments in flight (ListPartitionReassignments).
        replica_dirs: ``(broker, topic, partition)`` -> dir and size of each replica on
            a live broker's online dirs (empty when log dirs were not read).
        log_dirs: Live broker -> each of its log dirs, online or not (empty when not read).
        unreachable: Live brokers that did not answer DescribeLogDirs (a broker that died
            is registered until its session expires: its replicas' sizes and dirs are
            unknown until then).
    """

    live: Mapping[int, str | None]
    fenced: frozenset[int]
    partitions: Mapping[TopicPartition, PartitionInfo]
    in_flight: Mapping[TopicPartition, Reassignment]
    replica_dirs: Mapping[ReplicaKey, ReplicaDirInfo]
    log_dirs: Mapping[int, tuple[LogDirState, ...]]
    unreachable: frozenset[int] = frozenset()

    @cached_property
    def absent(self) -> frozenset[int]:
        """Brokers named in a partition's replicas that are not live (gone or fenced)."""
        named = {b for info in self.partitions.values() for b in info.replicas}
        return frozenset(b for b in named if b not in self.live)

    @cached_property
    def sizes(self) -> dict[TopicPartition, int]:
        """Partition -> bytes of its largest replica on a live broker (0 when unknown)."""
        out: dict[TopicPartition, int] = {}
        for (_, topic, partition), info in self.replica_dirs.items():
            tp = TopicPartition(topic, partition)
            out[tp] = max(out.get(tp, 0), info.size_bytes)
        return out

    def offline_replicas(self) -> dict[int, frozenset[TopicPartition]]:
        """Live broker with an offline log dir -> its replicas found in none of its online dirs.

        DescribeLogDirs lists no replica of an offline dir (Kafka's
        ``ReplicaManager.describeLogDirs``), so the replicas a broker is assigned but does
        not report are the ones the failed dir held.
        """
        out: dict[int, frozenset[TopicPartition]] = {}
        for broker, dirs in self.log_dirs.items():
            if broker not in self.live or all(d.online for d in dirs):
                continue
            lost = frozenset(
                tp
                for tp, info in self.partitions.items()
                if broker in info.replicas
                and (broker, tp.topic, tp.partition) not in self.replica_dirs
                and tp not in self.in_flight
            )
            out[broker] = lost
        return out

    def replicas(self) -> dict[TopicPartition, tuple[int, ...]]:
        """Partition -> its current replicas (a plan's starting point)."""
        return {tp: tuple(info.replicas) for tp, info in self.partitions.items()}


def observe(admin: KafkaAdmin, log_dirs: bool = True) -> ClusterObservation:
    """Read the cluster through the Admin API.

    Args:
        admin: The cluster's Admin API client.
        log_dirs: Also read DescribeLogDirs of every live broker (sizes, dir states).

    Each live broker is asked for its log dirs on its own: one that does not answer (it
    died and its session has not expired yet) is left out (``unreachable``) rather than
    failing the whole look.

    Raises:
        kpo_kafka.admin_types.KafkaAdminError: A request failed (unreachable, no ACL).
    """
    cluster = admin.describe_cluster()
    topics = admin.describe_topics()
    partitions = {
        TopicPartition(topic, p): info
        for topic, parts in topics.items()
        for p, info in parts.items()
    }
    in_flight = admin.list_partition_reassignments()
    live = dict(cluster.brokers)
    replica_dirs: dict[ReplicaKey, ReplicaDirInfo] = {}
    dir_states: dict[int, tuple[LogDirState, ...]] = {}
    unreachable: set[int] = set()
    for broker in sorted(live) if log_dirs else ():
        try:
            replica_dirs.update(admin.describe_log_dirs([broker]))
            dir_states.update(admin.log_dir_states([broker]))
        except KafkaUnavailableError:
            unreachable.add(broker)
    return ClusterObservation(
        live=live,
        fenced=frozenset(cluster.fenced_brokers),
        partitions=partitions,
        in_flight=in_flight,
        replica_dirs=replica_dirs,
        log_dirs=dir_states,
        unreachable=frozenset(unreachable),
    )
