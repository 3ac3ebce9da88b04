"""A leader's ISR changes, sent to the controller with AlterPartition (KIP-497).

Kafka's ``DefaultAlterPartitionManager``: a partition's leader does not write its ISR to
ZooKeeper; it asks the active controller, which checks the change against its own state,
writes it and tells every broker with UpdateMetadata. One request is in flight at a
time; the changes asked for meanwhile go together in the next one, so a follower that
rejoins thousands of partitions at once costs a few requests, not thousands.

Until the controller answers, the change stays pending on the partition (its additions
count for the HW, Kafka's ``maximalIsr``), however long that takes: a request that was
not answered (no controller known, a connection or request failure, NOT_CONTROLLER,
STALE_BROKER_EPOCH, an unexpected error) is sent again after a back-off, as Kafka does.
A partition's answer ends its change: its new partition epoch, or a refusal
(FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION, INELIGIBLE_REPLICA...) after which the
leader waits for the controller's next LeaderAndIsr or proposes again. A change the
partition replaced before it was sent (a LeaderAndIsr arrived and a new change was
proposed) is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kafka import errors as kafka_errors

from kpo_broker.protocol.client import BrokerClient, StreamConnector
from kpo_broker.protocol.errors import ProtocolError
from kpo_broker.protocol.interbroker import AlterPartitionRequest
from kpo_broker.server.partition import IsrChange, Partition
from kpo_broker.zk.model import EndPoint
from kpo_kafka.topic_partition import TopicPartition

log = logging.getLogger(__name__)

#: The AlterPartition version sent: topics by name, with ``leader_recovery_state``.
ALTER_PARTITION_VERSION = 1
#: First back-off before a request is sent again, ms (Kafka's ``retry.backoff.ms``).
RETRY_BACKOFF_MS = 100
#: Longest back-off between two attempts, ms (Kafka's ``retry.backoff.max.ms``).
RETRY_BACKOFF_MAX_MS = 1000

#: Partition errors after which the same change is sent again: the controller did not
#: consider it (it may not be the controller any more, or failed unexpectedly).
_RETRIABLE_PARTITION_ERRORS = frozenset(
    {
        int(kafka_errors.NotControllerError.errno),
        int(kafka_errors.UnknownError.errno),
    }
)


class IsrChangeAbandonedError(Exception):
    """The change was not answered before the manager stopped; its outcome is unknown."""


#: Returns the active controller's id and its endpoint on the inter-broker listener, or
#: None while no controller is known.
ControllerEndpoint = Callable[[], tuple[int, EndPoint] | None]


@dataclass
class _Item:
    tp: TopicPartition
    change: IsrChange
    future: asyncio.Future[int | None]


class AlterPartitionManager:
    """Sends a leader's ISR changes to the active controller in batches.

    Implements the replica manager's ``IsrWriter``.

    Args:
        broker_id: this broker, the partitions' leader.
        broker_epoch: returns this broker's current epoch (KIP-380), sent with each request.
        controller_endpoint: returns the active controller and its inter-broker endpoint
            (from the metadata the controller sent), or None.
        connector: opens connections with the inter-broker listener's security.
        request_timeout_ms: how long a request may wait for its answer, ms
            (``controller.socket.timeout.ms``).
    """

    def __init__(
        self,
        broker_id: int,
        broker_epoch: Callable[[], int],
        controller_endpoint: ControllerEndpoint,
        *,
        connector: StreamConnector | None,
        request_timeout_ms: int,
    ) -> None:
        self.broker_id = broker_id
        self._broker_epoch = broker_epoch
        self._controller_endpoint = controller_endpoint
        self._connector = connector
        self._request_timeout_ms = request_timeout_ms
        self._unsent: dict[TopicPartition, _Item] = {}
        self._sender: asyncio.Task[None] | None = None
        self._client: BrokerClient | None = None
        self._client_target: tuple[int, str, int] | None = None
        self._closed = False

    async def write_isr(
        self, tp: TopicPartition, partition: Partition, change: IsrChange
    ) -> int | None:
        """Ask the controller for ``change``; return the new partition epoch, or None.

        None: the controller refused the change (the leader epoch or partition epoch is
        stale, a proposed member is ineligible, the partition is unknown), or a newer
        change of the partition replaced it before it was sent.

        Raises:
            IsrChangeAbandonedError: the manager stopped before an answer came.
        """
        if self._closed:
            raise IsrChangeAbandonedError(f"ISR change of {tp[0]}-{tp[1]}: broker stopping")
        loop = asyncio.get_running_loop()
        item = _Item(TopicPartition(tp[0], tp[1]), change, loop.create_future())
        replaced = self._unsent.pop(item.tp, None)
        if replaced is not None:
            _resolve(replaced, None)
        self._unsent[item.tp] = item
        if self._sender is None or self._sender.done():
            self._sender = loop.create_task(self._send_until_done(), name="alter-partition")
        return await item.future

    async def close(self) -> None:
        """Stop sending; changes not answered yet fail with :class:`IsrChangeAbandonedError`."""
        self._closed = True
        if self._sender is not None:
            self._sender.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._sender
        for item in self._unsent.values():
            _fail(item, IsrChangeAbandonedError("broker stopping"))
        self._unsent = {}
        await self._close_client()

    async def _send_until_done(self) -> None:
        """Send the pending changes, one request at a time, until none is left."""
        backoff_ms = RETRY_BACKOFF_MS
        while self._unsent and not self._closed:
            batch, self._unsent = self._unsent, {}
            try:
                retry = await self._send(batch)
            except asyncio.CancelledError:
                for item in batch.values():
                    _fail(item, IsrChangeAbandonedError("broker stopping"))
                raise
            except Exception:
                log.exception("AlterPartition of %d partitions failed", len(batch))
                retry = list(batch.values())
            if not retry:
                backoff_ms = RETRY_BACKOFF_MS
                continue
            for item in retry:
                if item.tp in self._unsent:  # replaced by a newer change meanwhile
                    _resolve(item, None)
                else:
                    self._unsent[item.tp] = item
            await asyncio.sleep(backoff_ms / 1000)
            backoff_ms = min(backoff_ms * 2, RETRY_BACKOFF_MAX_MS)

    async def _send(self, batch: dict[TopicPartition, _Item]) -> list[_Item]:
        """Send one request for ``batch``; resolve the answered items, return the others."""
        client = await self._controller_client()
        if client is None:
            log.debug("AlterPartition of %d partitions: no controller known", len(batch))
            return list(batch.values())
        request = _request(self.broker_id, self._broker_epoch(), batch.values())
        try:
            response = await client.send(request, ALTER_PARTITION_VERSION)
        except (ProtocolError, OSError) as exc:
            log.info("AlterPartition to the controller failed: %s; sending again", exc)
            await self._close_client()
            return list(batch.values())
        if response.error_code != 0:
            log.info(
                "AlterPartition of %d partitions: error %d from the controller; sending again",
                len(batch),
                response.error_code,
            )
            if response.error_code == kafka_errors.NotControllerError.errno:
                await self._close_client()
            return list(batch.values())
        answered: dict[TopicPartition, Any] = {}
        for topic in response.topics:
            for p in topic.partitions:
                answered[TopicPartition(topic.topic_name, p.partition_index)] = p
        retry = []
        for tp, item in batch.items():
            answer = answered.get(tp)
            if answer is None or answer.error_code in _RETRIABLE_PARTITION_ERRORS:
                retry.append(item)
            else:
                _resolve(item, _partition_epoch(item, answer))
        return retry

    async def _controller_client(self) -> BrokerClient | None:
        """Return the connection to the active controller, opened (again) when it moved."""
        known = self._controller_endpoint()
        if known is None:
            await self._close_client()
            return None
        controller_id, endpoint = known
        target = (controller_id, endpoint.host, endpoint.port)
        if self._client is None or self._client_target != target:
            await self._close_client()
            self._client = BrokerClient(
                endpoint.host,
                endpoint.port,
                f"broker-{self.broker_id}-alter-partition",
                request_timeout_ms=self._request_timeout_ms,
                connector=self._connector,
            )
            self._client_target = target
        return self._client

    async def _close_client(self) -> None:
        client, self._client, self._client_target = self._client, None, None
        if client is not None:
            with contextlib.suppress(Exception):
                await client.close()


def _request(broker_id: int, broker_epoch: int, items: Iterable[_Item]) -> AlterPartitionRequest:
    topic_data = AlterPartitionRequest.TopicData
    partition_data = topic_data.PartitionData
    by_topic: dict[str, list[Any]] = {}
    for item in items:
        change = item.change
        by_topic.setdefault(item.tp.topic, []).append(
            partition_data(
                partition_index=item.tp.partition,
                leader_epoch=change.leader_epoch,
                new_isr=list(change.isr),
                leader_recovery_state=0,
                partition_epoch=change.expected_partition_epoch,
            )
        )
    return AlterPartitionRequest(
        broker_id=broker_id,
        broker_epoch=broker_epoch,
        topics=[topic_data(topic_name=t, partitions=ps) for t, ps in by_topic.items()],
    )


def _partition_epoch(item: _Item, answer: Any) -> int | None:
    """Return the new partition epoch if the controller applied exactly ``item``'s change."""
    error_code = answer.error_code
    if error_code != 0:
        log.debug(
            "ISR change of %s-%s to %s refused: error %d",
            item.tp.topic,
            item.tp.partition,
            list(item.change.isr),
            error_code,
        )
        return None
    if answer.leader_epoch != item.change.leader_epoch or tuple(answer.isr) != item.change.isr:
        return None
    return int(answer.partition_epoch)


def _resolve(item: _Item, value: int | None) -> None:
    if not item.future.done():
        item.future.set_result(value)


def _fail(item: _Item, error: BaseException) -> None:
    if not item.future.done():
        item.future.set_exception(error)
