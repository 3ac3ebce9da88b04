"""Persisting a leader's ISR changes to ZooKeeper, off the event loop."""

from __future__ import annotations

import asyncio

from kpo_broker.server.partition import IsrChange, Partition
from kpo_broker.zk.client import KafkaZkClient
from kpo_broker.zk.model import LeaderAndIsr
from kpo_kafka.topic_partition import TopicPartition


class ZkIsrWriter:
    """Writes ISR changes with a compare-and-set on the partition state znode.

    Args:
        zk: the ZooKeeper client.
        broker_id: this broker, the partitions' leader.
    """

    def __init__(self, zk: KafkaZkClient, broker_id: int) -> None:
        self.zk = zk
        self.broker_id = broker_id

    async def write_isr(
        self, tp: TopicPartition, partition: Partition, change: IsrChange
    ) -> int | None:
        """Write ``change``; return the new partition epoch, or None on a version conflict.

        The conflict is how a leader the controller has replaced is fenced: after its
        ZooKeeper session expired, the controller rewrote the state znode (new leader,
        new leader epoch), so the version this broker holds no longer matches.

        Raises:
            ZkConnectionLossError: no ZooKeeper session.
        """
        state = LeaderAndIsr(
            self.broker_id, change.leader_epoch, change.isr, change.expected_partition_epoch
        )
        return await asyncio.to_thread(
            self.zk.update_isr,
            TopicPartition(tp.topic, tp.partition),
            state,
            partition.controller_epoch,
            change.expected_partition_epoch,
        )
