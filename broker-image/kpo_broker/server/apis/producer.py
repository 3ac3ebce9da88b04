"""InitProducerId: producer ids for idempotent producers (KIP-98, KIP-360).

Transactions are not supported: a request naming a ``transactional.id`` is refused
(see :func:`kpo_broker.server.producer_ids.init_producer_id`).
"""

from __future__ import annotations

from typing import Any, Protocol

from kafka.protocol.producer import InitProducerIdResponse

from kpo_broker.server.components import RequestContext
from kpo_broker.server.producer_ids import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    ProducerIdManager,
    init_producer_id,
)


class HasProducerIds(Protocol):
    """What the handler needs of ``BrokerComponents``: its ``producer_ids`` manager."""

    @property
    def producer_ids(self) -> ProducerIdManager:
        """The broker's producer id manager."""
        ...


async def handle_init_producer_id(
    broker: HasProducerIds, ctx: RequestContext, request: Any
) -> InitProducerIdResponse:
    """Hand out a new producer id with epoch 0, from ``broker.producer_ids``.

    Versions 0-4 (``producerId``/``producerEpoch`` exist from v3; older requests carry
    neither, read as -1). Errors are answered in the response's ``error_code``.
    """
    has_ids = ctx.api_version >= 3
    result = await init_producer_id(
        broker.producer_ids,
        request.transactional_id,
        request.producer_id if has_ids else NO_PRODUCER_ID,
        request.producer_epoch if has_ids else NO_PRODUCER_EPOCH,
    )
    return InitProducerIdResponse(
        throttle_time_ms=0,
        error_code=result.error_code,
        producer_id=result.producer_id,
        producer_epoch=result.producer_epoch,
    )
