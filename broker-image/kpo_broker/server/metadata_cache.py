"""The broker's cached view of the cluster.

Kept current by the controller's UpdateMetadata requests.

As Kafka's ``MetadataCache`` (ZooKeeper mode): every broker answers Metadata,
DescribeCluster and similar requests from this cache, never from ZooKeeper directly.
Stale UpdateMetadata requests are fenced by the controller epoch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kpo_broker.zk.model import EndPoint


@dataclass(frozen=True)
class BrokerInfo:
    """A live broker: id, its advertised endpoints and optional ``broker.rack``."""

    broker_id: int
    endpoints: tuple[EndPoint, ...]
    rack: str | None = None

    def endpoint(self, listener: str) -> EndPoint | None:
        """Return the endpoint of ``listener``, or None if the broker has no such listener."""
        return next((e for e in self.endpoints if e.listener_name == listener), None)


@dataclass(frozen=True)
class PartitionMetadata:
    """A partition's leader, epochs and replica sets as the controller last sent them.

    Attributes:
        leader: leader broker id, -1 if the partition is offline.
        leader_epoch: the leader epoch.
        isr: in-sync replicas.
        replicas: assigned replicas (AR).
        offline_replicas: assigned replicas on dead brokers.
        partition_epoch: the state znode version.
    """

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    partition_epoch: int = 0


@dataclass
class MetadataCache:
    """Live brokers, the controller id and every partition's metadata.

    Attributes:
        controller_epoch: epoch of the controller that sent the last accepted update.
        controller_id: the active controller's broker id, or None.
        brokers: live brokers by id.
        partitions: topic -> partition index -> metadata.
        cluster_id: the cluster id from ZooKeeper's ``/cluster/id``.
    """

    controller_epoch: int = -1
    controller_id: int | None = None
    brokers: dict[int, BrokerInfo] = field(default_factory=dict)
    partitions: dict[str, dict[int, PartitionMetadata]] = field(default_factory=dict)
    cluster_id: str | None = None
    #: topic -> its id (KIP-516), from UpdateMetadata v7+.
    topic_ids: dict[str, str] = field(default_factory=dict)
    #: Whether an UpdateMetadata request has been applied since the broker started.
    initialized: bool = False

    def is_stale(self, controller_epoch: int) -> bool:
        """Whether a request from a controller of ``controller_epoch`` is older than our state."""
        return controller_epoch < self.controller_epoch

    def update(
        self,
        controller_id: int,
        controller_epoch: int,
        brokers: list[BrokerInfo],
        partitions: dict[tuple[str, int], PartitionMetadata],
        deleted: set[tuple[str, int]] | None = None,
    ) -> None:
        """Apply an UpdateMetadata request: replace live brokers, upsert/delete partitions."""
        self.controller_id = controller_id
        self.controller_epoch = controller_epoch
        self.initialized = True
        self.brokers = {b.broker_id: b for b in brokers}
        for (topic, index), meta in partitions.items():
            self.partitions.setdefault(topic, {})[index] = meta
        for topic, index in deleted or ():
            topic_partitions = self.partitions.get(topic)
            if topic_partitions is not None:
                topic_partitions.pop(index, None)
                if not topic_partitions:
                    del self.partitions[topic]
                    self.topic_ids.pop(topic, None)

    def topics(self) -> list[str]:
        """All known topic names, sorted."""
        return sorted(self.partitions)

    def partition(self, topic: str, index: int) -> PartitionMetadata | None:
        """Return the metadata of one partition, or None if unknown."""
        return self.partitions.get(topic, {}).get(index)

    def alive(self, broker_id: int) -> bool:
        """Whether ``broker_id`` is a live broker."""
        return broker_id in self.brokers

    def controller_endpoint(self, listener: str) -> tuple[int, EndPoint] | None:
        """Return the active controller's id and its endpoint on ``listener``, or None.

        As the last UpdateMetadata said (Kafka's ``MetadataCacheControllerNodeProvider``,
        ZooKeeper mode); None while no controller, or none reachable on ``listener``, is
        known.
        """
        controller = self.controller_id
        info = self.brokers.get(controller) if controller is not None else None
        endpoint = info.endpoint(listener) if info is not None else None
        return None if controller is None or endpoint is None else (controller, endpoint)
