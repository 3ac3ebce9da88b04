"""Persisting a leader's ISR changes to ZooKeeper, off the event loop, in batches."""

from __future__ import annotations

import asyncio

from kpo_broker.server.partition import IsrChange, Partition
from kpo_broker.zk.client import IsrUpdate, KafkaZkClient
from kpo_broker.zk.model import LeaderAndIsr
from kpo_kafka.topic_partition import TopicPartition


class ZkIsrWriter:
    """Writes ISR changes with a compare-and-set on the partition state znode.

    Changes asked for while a batch is being written are written together next, in one
    pipelined round of requests (:meth:`KafkaZkClient.update_isrs`), so a follower that
    comes back to thousands of partitions at once rejoins their ISRs in a few ZooKeeper
    round trips, not one after another. This is the batching Kafka's
    ``AlterPartitionManager`` does (KIP-497), applied to the leader's own ZooKeeper
    writes.

    Args:
        zk: the ZooKeeper client.
        broker_id: this broker, the partitions' leader.
    """

    def __init__(self, zk: KafkaZkClient, broker_id: int) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self._pending: list[tuple[IsrUpdate, asyncio.Future[int | None]]] = []
        self._flusher: asyncio.Task[None] | None = None

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
        update = IsrUpdate(
            TopicPartition(tp.topic, tp.partition),
            state,
            partition.controller_epoch,
            change.expected_partition_epoch,
        )
        loop = asyncio.get_running_loop()
        future: asyncio.Future[int | None] = loop.create_future()
        self._pending.append((update, future))
        if self._flusher is None or self._flusher.done():
            self._flusher = loop.create_task(self._flush())
        return await future

    async def _flush(self) -> None:
        """Write the pending changes, batch after batch, until none is left."""
        while self._pending:
            batch, self._pending = self._pending, []
            try:
                versions = await asyncio.to_thread(self.zk.update_isrs, [u for u, _ in batch])
            except Exception as exc:  # every waiter gets the batch's failure
                for _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                continue
            for (_, future), version in zip(batch, versions, strict=True):
                if not future.done():
                    future.set_result(version)
