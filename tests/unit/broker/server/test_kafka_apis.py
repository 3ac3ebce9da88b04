"""KafkaApis: client requests wait for the broker's first UpdateMetadata.

The handlers here are stand-ins that record what ran; the UpdateMetadata stand-in applies
an update to a real :class:`MetadataCache`, as the broker's handler does.
"""

from __future__ import annotations

import asyncio
import logging
from types import SimpleNamespace
from typing import Any, cast

import pytest

from kpo_broker.server import kafka_apis
from kpo_broker.server.apis import versions as v
from kpo_broker.server.components import BrokerComponents
from kpo_broker.server.kafka_apis import KafkaApis
from kpo_broker.server.metadata_cache import BrokerInfo, MetadataCache
from kpo_broker.server.request_context import RequestContext


def _ctx(api_key: int) -> RequestContext:
    return RequestContext(api_key, 0, 1, "test", "PLAINTEXT")


def _apis(cache: MetadataCache, ran: list[int]) -> KafkaApis:
    async def record(broker: Any, ctx: RequestContext, request: Any) -> str:
        ran.append(ctx.api_key)
        return "answer"

    async def update_metadata(broker: Any, ctx: RequestContext, request: Any) -> str:
        ran.append(ctx.api_key)
        broker.metadata_cache.update(0, 1, [BrokerInfo(0, ())], {})
        return "updated"

    recorded = (v.API_KEY_METADATA, v.API_KEY_PRODUCE, v.API_KEY_API_VERSIONS)
    handlers = {key: record for key in (*recorded, v.API_KEY_LEADER_AND_ISR)}
    handlers[v.API_KEY_ALTER_PARTITION] = record
    handlers[v.API_KEY_UPDATE_METADATA] = update_metadata
    broker = cast(BrokerComponents, SimpleNamespace(metadata_cache=cache))
    return KafkaApis(broker, handlers)


def test_client_requests_wait_for_the_first_update_metadata() -> None:
    ran: list[int] = []

    async def scenario() -> None:
        apis = _apis(MetadataCache(), ran)
        metadata = asyncio.ensure_future(apis.handle(_ctx(v.API_KEY_METADATA), None))
        produce = asyncio.ensure_future(apis.handle(_ctx(v.API_KEY_PRODUCE), None))
        await asyncio.sleep(0.2)
        assert not metadata.done() and not produce.done()
        # What a client sends first, and what the controller and brokers exchange, is not held.
        for key in (v.API_KEY_API_VERSIONS, v.API_KEY_LEADER_AND_ISR, v.API_KEY_ALTER_PARTITION):
            assert await asyncio.wait_for(apis.handle(_ctx(key), None), 1) == "answer"
        assert not metadata.done()
        assert await apis.handle(_ctx(v.API_KEY_UPDATE_METADATA), None) == "updated"
        assert await asyncio.wait_for(metadata, 1) == "answer"
        assert await asyncio.wait_for(produce, 1) == "answer"
        # Once the cache is filled, nothing waits.
        assert await asyncio.wait_for(apis.handle(_ctx(v.API_KEY_METADATA), None), 0.1)

    asyncio.run(scenario())
    assert ran[:3] == [v.API_KEY_API_VERSIONS, v.API_KEY_LEADER_AND_ISR, v.API_KEY_ALTER_PARTITION]
    assert ran[3] == v.API_KEY_UPDATE_METADATA


def test_a_broker_that_gets_no_update_metadata_answers_after_the_bound(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(kafka_apis, "FIRST_METADATA_WAIT_S", 0.2)
    ran: list[int] = []

    async def scenario() -> float:
        apis = _apis(MetadataCache(), ran)
        loop = asyncio.get_running_loop()
        started = loop.time()
        assert await apis.handle(_ctx(v.API_KEY_METADATA), None) == "answer"
        return loop.time() - started

    with caplog.at_level(logging.WARNING, logger=kafka_apis.__name__):
        waited = asyncio.run(scenario())
    assert 0.15 <= waited < 2
    assert ran == [v.API_KEY_METADATA]
    assert "no UpdateMetadata from the controller" in caplog.text


def test_a_cache_filled_before_the_apis_start_holds_nothing() -> None:
    ran: list[int] = []
    cache = MetadataCache()
    cache.update(0, 1, [], {})

    async def scenario() -> None:
        apis = _apis(cache, ran)
        assert await asyncio.wait_for(apis.handle(_ctx(v.API_KEY_METADATA), None), 0.1)

    asyncio.run(scenario())
