"""A snapshot of the Kafka cluster the operator's pure logic decides on.

:class:`ClusterView` is the plain-data picture of the cluster that the pure
modules work on; the Kafka-facing adapter fills it from Metadata,
ListPartitionReassignments and DescribeLogDirs responses. The custom resources'
specs are in :mod:`kpo_kafka.specs`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kpo_kafka.admin_types import PartitionInfo
from kpo_kafka.topic_partition import TopicPartition


@dataclass
class ClusterView:
    """A snapshot of the cluster the pure logic decides on; no I/O.

    Attributes:
        topics: topic -> partition index -> :class:`PartitionInfo`.
        live_brokers: Ids of the registered (alive) brokers; on KRaft, unfenced ones.
        fenced_brokers: Ids of brokers registered but fenced by the KRaft controller
            (DescribeCluster v2, KIP-1073); empty where the cluster does not report them.
        log_dirs: broker id -> the absolute paths of its online log dirs (DescribeLogDirs).
        reassigning: Partitions of ``topics`` with a reassignment in flight -> the name of the
            PartitionReassignment that owns it (``namespace/name``), or ``None`` when
            it was started outside the operator or the owner is not known.
    """

    topics: dict[str, dict[int, PartitionInfo]] = field(default_factory=dict)
    live_brokers: frozenset[int] = frozenset()
    fenced_brokers: frozenset[int] = frozenset()
    log_dirs: dict[int, frozenset[str]] = field(default_factory=dict)
    reassigning: dict[TopicPartition, str | None] = field(default_factory=dict)

    def partition(self, topic: str, partition: int) -> PartitionInfo | None:
        """Return the state of ``topic``/``partition``, or ``None`` if it does not exist."""
        return self.topics.get(topic, {}).get(partition)
