"""InitProducerId: producer ids for idempotent producers (KIP-98, KIP-360).

Transactions are not supported: a request naming a ``transactional.id`` is refused
(see :func:`kpo_broker.server.producer_ids.init_producer_id`).
"""

from __future__ import annotations

from typing import Any, Protocol

from kafka.protocol.producer import InitProducerIdResponse

from kpo_broker.security.acl import AclOperation, ResourceType
from kpo_broker.server.auth_helper import AuthHelper
from kpo_broker.server.producer_ids import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    ProducerIdManager,
    init_producer_id,
)
from kpo_broker.server.request_context import RequestContext


class HasProducerIds(Protocol):
    """What the handler needs of ``BrokerComponents``: ``producer_ids`` and ``auth``."""

    @property
    def producer_ids(self) -> ProducerIdManager:
        """The broker's producer id manager."""
        ...

    @property
    def auth(self) -> AuthHelper:
        """The broker's authorization checks."""
        ...


_TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
_CLUSTER_AUTHORIZATION_FAILED = 31


def _refusal(broker: HasProducerIds, ctx: RequestContext, transactional_id: str | None) -> int:
    """Kafka's ``handleInitProducerIdRequest`` checks; 0 when allowed.

    A transactional producer needs Write on its TransactionalId; an idempotent one
    IdempotentWrite on the cluster or Write on some topic (``authorizeByResourceType``).
    """
    auth = broker.auth
    if transactional_id is not None:
        if auth.authorize(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
            return 0
        return _TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    if auth.authorize_cluster(
        ctx, AclOperation.IDEMPOTENT_WRITE, log_if_denied=False
    ) or auth.authorize_by_resource_type(ctx, AclOperation.WRITE, ResourceType.TOPIC):
        return 0
    return _CLUSTER_AUTHORIZATION_FAILED


async def handle_init_producer_id(
    broker: HasProducerIds, ctx: RequestContext, request: Any
) -> InitProducerIdResponse:
    """Hand out a new producer id with epoch 0, from ``broker.producer_ids``.

    Versions 0-4 (``producerId``/``producerEpoch`` exist from v3; older requests carry
    neither, read as -1). Errors are answered in the response's ``error_code``.
    """
    refused = _refusal(broker, ctx, request.transactional_id)
    if refused:
        return InitProducerIdResponse(
            throttle_time_ms=0,
            error_code=refused,
            producer_id=NO_PRODUCER_ID,
            producer_epoch=NO_PRODUCER_EPOCH,
        )
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
