"""ProducerIdManager and InitProducerId answers, over an in-memory block source."""

from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace

import pytest
from kafka.protocol.producer import InitProducerIdRequest, InitProducerIdResponse

from kpo_broker.server.apis.producer import handle_init_producer_id
from kpo_broker.server.auth_helper import AuthHelper
from kpo_broker.server.producer_ids import (
    InitProducerIdResult,
    ProducerIdManager,
    ProducerIdUnavailableError,
    init_producer_id,
)
from kpo_broker.server.request_context import RequestContext
from kpo_broker.zk.errors import ZkConnectionLossError
from kpo_broker.zk.producer_ids import (
    MAX_PRODUCER_ID,
    ProducerIdBlock,
    ProducerIdsExhaustedError,
    next_producer_id_block,
)


class InMemoryBlocks:
    """Claims consecutive blocks like ``/latest_producer_id_block``, optionally failing."""

    def __init__(self, size: int = 3, first: int = 0) -> None:
        self.size = size
        self.latest: ProducerIdBlock | None = (
            None if first == 0 else ProducerIdBlock(0, first - size, size)
        )
        self.claims: list[int] = []
        self.failures: list[Exception] = []
        self.threads: set[int] = set()

    def claim_producer_id_block(self, broker_id: int) -> ProducerIdBlock:
        self.threads.add(threading.get_ident())
        if self.failures:
            raise self.failures.pop(0)
        self.latest = next_producer_id_block(self.latest, broker_id, self.size)
        self.claims.append(self.latest.first_producer_id)
        return self.latest


def generate(manager: ProducerIdManager, count: int) -> list[int]:
    async def scenario() -> list[int]:
        return [await manager.generate_producer_id() for _ in range(count)]

    return asyncio.run(scenario())


def test_ids_come_from_the_block_and_a_new_block_is_claimed_when_used_up() -> None:
    blocks = InMemoryBlocks(size=3)
    manager = ProducerIdManager(7, blocks)
    assert manager.current_block is None and blocks.claims == []
    assert generate(manager, 7) == [0, 1, 2, 3, 4, 5, 6]
    assert blocks.claims == [0, 3, 6]
    assert manager.current_block == ProducerIdBlock(7, 6, 3)
    # Claims run in a worker thread, not on the event loop's thread.
    assert threading.get_ident() not in blocks.threads


def test_concurrent_requests_share_one_claim_per_block() -> None:
    blocks = InMemoryBlocks(size=4)
    manager = ProducerIdManager(1, blocks)

    async def scenario() -> list[int]:
        return list(await asyncio.gather(*(manager.generate_producer_id() for _ in range(10))))

    ids = asyncio.run(scenario())
    assert sorted(ids) == list(range(10))
    assert blocks.claims == [0, 4, 8]


def test_failed_claim_is_retriable_and_retried_on_the_next_request() -> None:
    blocks = InMemoryBlocks(size=2)
    blocks.failures.append(ZkConnectionLossError("session expired"))
    manager = ProducerIdManager(1, blocks)
    with pytest.raises(ProducerIdUnavailableError) as raised:
        generate(manager, 1)
    assert raised.value.error_code == 14
    assert generate(manager, 3) == [0, 1, 2]


def init(manager: ProducerIdManager, *args: object) -> InitProducerIdResult:
    return asyncio.run(init_producer_id(manager, *args))  # type: ignore[arg-type]


def test_idempotent_producer_gets_a_new_id_with_epoch_zero() -> None:
    manager = ProducerIdManager(1, InMemoryBlocks(size=10, first=2000))
    assert init(manager, None) == InitProducerIdResult(0, 2000, 0)
    # KIP-360 requests with the current id and epoch also get a fresh id, as Kafka does
    # when transactional.id is null.
    assert init(manager, None, 2000, 5) == InitProducerIdResult(0, 2001, 0)


def test_invalid_init_producer_id_requests() -> None:
    blocks = InMemoryBlocks()
    manager = ProducerIdManager(1, blocks)
    assert init(manager, None, 5, -1) == InitProducerIdResult(42, -1, -1)
    assert init(manager, None, -1, 3) == InitProducerIdResult(42, -1, -1)
    assert init(manager, "", -1, -1) == InitProducerIdResult(42, -1, -1)
    assert init(manager, "my-txn", -1, -1) == InitProducerIdResult(53, -1, -1)
    assert blocks.claims == []  # no id was handed out


def test_block_failures_become_error_codes() -> None:
    blocks = InMemoryBlocks()
    blocks.failures.append(ZkConnectionLossError("no session"))
    manager = ProducerIdManager(1, blocks)
    assert init(manager, None) == InitProducerIdResult(14)
    exhausted = ProducerIdManager(1, InMemoryBlocks(size=1000, first=MAX_PRODUCER_ID - 998))
    assert init(exhausted, None) == InitProducerIdResult(-1)
    with pytest.raises(ProducerIdsExhaustedError):
        generate(exhausted, 1)


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_handler_answers_each_version(version: int) -> None:
    manager = ProducerIdManager(1, InMemoryBlocks(size=10, first=500))
    broker = SimpleNamespace(producer_ids=manager, auth=AuthHelper())
    wire = InitProducerIdRequest(
        transactional_id=None, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1
    ).encode(version=version)
    request = InitProducerIdRequest.decode(wire, version=version)
    ctx = RequestContext(22, version, 1, "client", "PLAINTEXT")
    response = asyncio.run(handle_init_producer_id(broker, ctx, request))
    decoded = InitProducerIdResponse.decode(response.encode(version=version), version=version)
    assert (decoded.error_code, decoded.producer_id, decoded.producer_epoch) == (0, 500, 0)


def test_handler_refuses_transactional_producers() -> None:
    broker = SimpleNamespace(producer_ids=ProducerIdManager(1, InMemoryBlocks()), auth=AuthHelper())
    request = InitProducerIdRequest(
        transactional_id="txn-1", transaction_timeout_ms=60000, producer_id=7, producer_epoch=2
    )
    ctx = RequestContext(22, 4, 1, "client", "PLAINTEXT")
    response = asyncio.run(handle_init_producer_id(broker, ctx, request))
    assert (response.error_code, response.producer_id, response.producer_epoch) == (53, -1, -1)
