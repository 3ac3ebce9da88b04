"""Producer ids for InitProducerId: the broker's ``ProducerIdManager`` (KIP-98).

A broker hands out ids from the block of 1000 it claimed last in ZooKeeper
(``/latest_producer_id_block``, see :mod:`kpo_broker.zk.producer_ids`) and claims the
next block, in a worker thread, once the block is used up. The first block is claimed
on the first request rather than at start-up (Kafka claims one at start-up; claiming
lazily only avoids wasting a block per restart of a broker that never serves producers).

``init_producer_id`` decides the answer to one InitProducerId request without
transactions, as Kafka 2.8/3.x brokers do for ``transactional.id = null``: every
request gets a fresh producer id with epoch 0. The ``producerId``/``producerEpoch``
fields of v3+ (KIP-360) are only checked for consistency: Kafka's transaction
coordinator ignores them for idempotent producers, because no broker keeps a registry
of non-transactional producers to bump; the client bumps the epoch locally and asks for
a new id only when that is not possible.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import ClassVar, Protocol

from kpo_broker.zk.errors import KafkaZkError, ZkConnectionLossError, ZkOperationError
from kpo_broker.zk.producer_ids import ProducerIdBlock

log = logging.getLogger(__name__)

NONE = 0
UNKNOWN_SERVER_ERROR = -1
COORDINATOR_LOAD_IN_PROGRESS = 14
INVALID_REQUEST = 42
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1


class ProducerIdBlockSource(Protocol):
    """Where blocks come from: ``KafkaZkClient`` in the broker."""

    def claim_producer_id_block(self, broker_id: int) -> ProducerIdBlock:
        """Claim the next block for ``broker_id`` (blocking; ``claim_producer_id_block``)."""
        ...


class ProducerIdUnavailableError(Exception):
    """No producer id can be handed out now: claiming a block failed in ZooKeeper.

    Answered with ``COORDINATOR_LOAD_IN_PROGRESS`` (14), a retriable error, as Kafka 3.x
    brokers do while their next block is not ready; clients retry InitProducerId.
    """

    error_code: ClassVar[int] = COORDINATOR_LOAD_IN_PROGRESS


class ProducerIdManager:
    """Hands out cluster-unique producer ids from blocks claimed by ``broker_id``.

    Args:
        broker_id: ``broker.id``, recorded in the claimed blocks.
        source: claims blocks (blocking; called through ``asyncio.to_thread``).

    Driven from the broker's event loop; concurrent requests are serialised, so one
    exhausted block leads to exactly one claim.
    """

    def __init__(self, broker_id: int, source: ProducerIdBlockSource) -> None:
        self._broker_id = broker_id
        self._source = source
        self._block: ProducerIdBlock | None = None
        self._next_id = 0
        self._lock = asyncio.Lock()

    @property
    def current_block(self) -> ProducerIdBlock | None:
        """The block ids come from now, None before the first claim."""
        return self._block

    async def generate_producer_id(self) -> int:
        """Return a producer id never handed out before in the cluster.

        Raises:
            ProducerIdUnavailableError: a new block was needed and ZooKeeper failed.
            KafkaZkError: the block znode is malformed, or every id is used
                (``ProducerIdsExhaustedError``); the broker cannot recover by itself.
        """
        async with self._lock:
            if self._block is None or self._next_id > self._block.last_producer_id:
                try:
                    block = await asyncio.to_thread(
                        self._source.claim_producer_id_block, self._broker_id
                    )
                except (ZkConnectionLossError, ZkOperationError) as exc:
                    raise ProducerIdUnavailableError(
                        f"cannot claim a producer id block: {exc}"
                    ) from exc
                log.info("broker %d claimed producer id block %s", self._broker_id, block)
                self._block, self._next_id = block, block.first_producer_id
            producer_id = self._next_id
            self._next_id += 1
            return producer_id


@dataclass(frozen=True)
class InitProducerIdResult:
    """The fields of an InitProducerId response.

    Attributes:
        error_code: Kafka error code, 0 on success.
        producer_id: the producer id, -1 on error.
        producer_epoch: the producer epoch, -1 on error.
    """

    error_code: int
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


async def init_producer_id(
    manager: ProducerIdManager,
    transactional_id: str | None,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
) -> InitProducerIdResult:
    """Answer InitProducerId (api key 22) for an idempotent producer.

    Args:
        manager: the broker's producer id manager.
        transactional_id: the request's ``transactional.id``; only None is served.
        producer_id: the producer's current id (v3+, KIP-360), -1 if none.
        producer_epoch: the producer's current epoch (v3+), -1 if none.

    Returns:
        A new producer id with epoch 0 (Kafka's answer when ``transactional.id`` is
        null, whatever id and epoch the producer sent), or an error:

        - ``INVALID_REQUEST`` (42): exactly one of ``producer_id``/``producer_epoch`` is
          -1 (Kafka's ``KafkaApis`` check), or ``transactional_id`` is empty;
        - ``TRANSACTIONAL_ID_AUTHORIZATION_FAILED`` (53): a transactional id was given.
          Transactions are not supported; clients treat this code as fatal at once,
          where ``COORDINATOR_NOT_AVAILABLE`` would make them retry until a timeout;
        - ``COORDINATOR_LOAD_IN_PROGRESS`` (14): no block could be claimed (retriable);
        - ``UNKNOWN_SERVER_ERROR`` (-1): the block znode is malformed or ids are exhausted.
    """
    if transactional_id:
        return InitProducerIdResult(TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if (producer_id == NO_PRODUCER_ID) != (producer_epoch == NO_PRODUCER_EPOCH):
        return InitProducerIdResult(INVALID_REQUEST)
    if transactional_id is not None:  # the empty string
        return InitProducerIdResult(INVALID_REQUEST)
    try:
        new_id = await manager.generate_producer_id()
    except ProducerIdUnavailableError as exc:
        log.warning("InitProducerId: %s", exc)
        return InitProducerIdResult(ProducerIdUnavailableError.error_code)
    except KafkaZkError:
        log.exception("InitProducerId: cannot hand out producer ids")
        return InitProducerIdResult(UNKNOWN_SERVER_ERROR)
    return InitProducerIdResult(NONE, new_id, 0)
