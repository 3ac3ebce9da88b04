"""BrokerClient against small asyncio servers on 127.0.0.1 (real TCP)."""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from kafka.protocol.api_header import RequestHeader
from kafka.protocol.metadata import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    MetadataRequest,
    MetadataResponse,
)
from kafka.protocol.producer import ProduceRequest

from kpo_broker.protocol.api import APIS
from kpo_broker.protocol.client import BrokerClient
from kpo_broker.protocol.errors import (
    BrokerConnectionError,
    InvalidResponseError,
    RequestTimeoutError,
)
from kpo_broker.protocol.framing import DecodedRequest, decode_request, encode_response, read_frame
from kpo_broker.protocol.interbroker import (
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    LeaderAndIsrLiveLeader,
    LeaderAndIsrPartitionError,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    LeaderAndIsrTopicState,
    RemainingPartition,
)

SUPPORTED = {key: spec.codec_versions for key, spec in APIS.items()}
Connection = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def serve(handler: Connection) -> tuple[asyncio.Server, int]:
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


async def next_request(reader: asyncio.StreamReader) -> DecodedRequest | None:
    frame = await read_frame(reader)
    return None if frame is None else decode_request(frame, SUPPORTED)


def run(coroutine: Awaitable[Any]) -> Any:
    async def bounded() -> Any:
        return await asyncio.wait_for(coroutine, 20)

    return asyncio.run(bounded())


def leader_and_isr() -> Any:
    state = LeaderAndIsrPartitionState(
        partition_index=0,
        controller_epoch=3,
        leader=1,
        leader_epoch=7,
        isr=[1, 2],
        zk_version=4,
        replicas=[1, 2],
        adding_replicas=[],
        removing_replicas=[],
        is_new=True,
    )
    return LeaderAndIsrRequest(
        controller_id=0,
        controller_epoch=3,
        broker_epoch=99,
        topic_states=[LeaderAndIsrTopicState(topic_name="t", partition_states=[state])],
        live_leaders=[LeaderAndIsrLiveLeader(broker_id=1, host_name="127.0.0.1", port=1)],
    )


def test_leader_and_isr_round_trip() -> None:
    seen: list[DecodedRequest] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while (request := await next_request(reader)) is not None:
            seen.append(request)
            error = LeaderAndIsrPartitionError(topic_name="t", partition_index=0, error_code=0)
            response = LeaderAndIsrResponse(error_code=0, partition_errors=[error])
            writer.write(encode_response(request, response))
            await writer.drain()
        writer.close()

    async def scenario() -> Any:
        server, port = await serve(handler)
        client = BrokerClient("127.0.0.1", port, "controller-0-to-broker-1", 5000)
        try:
            first = await client.send(leader_and_isr(), 4)
            second = await client.send(leader_and_isr(), 3)
            return first, second
        finally:
            await client.close()
            server.close()
            await server.wait_closed()

    first, second = run(scenario())
    assert [e.topic_name for e in first.partition_errors] == ["t"]
    assert second.version == 3
    assert [(r.api_version, r.correlation_id, r.client_id) for r in seen] == [
        (4, 0, "controller-0-to-broker-1"),
        (3, 1, "controller-0-to-broker-1"),
    ]
    state = seen[0].body.topic_states[0].partition_states[0]
    assert (state.leader, state.leader_epoch, state.isr, state.zk_version) == (1, 7, [1, 2], 4)
    assert seen[0].body.broker_epoch == 99


def test_many_requests_in_flight_are_matched_by_correlation_id() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        batch = [await next_request(reader) for _ in range(5)]
        for request in reversed(batch):  # answer out of order
            assert request is not None
            remaining = RemainingPartition(
                topic_name=f"b{request.body.broker_id}", partition_index=0
            )
            response = ControlledShutdownResponse(error_code=0, remaining_partitions=[remaining])
            writer.write(encode_response(request, response))
        await writer.drain()
        await reader.read()
        writer.close()

    async def scenario() -> list[Any]:
        server, port = await serve(handler)
        client = BrokerClient("127.0.0.1", port, "broker-x", 5000)
        try:
            sends = [
                client.send(ControlledShutdownRequest(broker_id=i, broker_epoch=i), 3)
                for i in range(5)
            ]
            return list(await asyncio.gather(*sends))
        finally:
            await client.close()
            server.close()
            await server.wait_closed()

    responses = run(scenario())
    assert [r.remaining_partitions[0].topic_name for r in responses] == [f"b{i}" for i in range(5)]


def test_timeout_closes_the_connection_and_the_next_send_reconnects() -> None:
    connections = 0

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        mine = connections
        while (request := await next_request(reader)) is not None:
            if mine == 1:
                continue  # the first connection never answers
            response = MetadataResponse(brokers=[], topics=[], controller_id=5)
            writer.write(encode_response(request, response))
            await writer.drain()
        writer.close()

    async def scenario() -> tuple[bool, Any]:
        server, port = await serve(handler)
        client = BrokerClient("127.0.0.1", port, "c", request_timeout_ms=200)
        try:
            with pytest.raises(RequestTimeoutError):
                await client.send(MetadataRequest(topics=[]), 1)
            connected_after_timeout = client.connected
            return connected_after_timeout, await client.send(MetadataRequest(topics=[]), 1)
        finally:
            await client.close()
            server.close()
            await server.wait_closed()

    connected_after_timeout, response = run(scenario())
    assert not connected_after_timeout
    assert response.controller_id == 5
    assert connections == 2


def test_disconnect_fails_every_pending_request() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for _ in range(3):
            await next_request(reader)
        writer.close()

    async def scenario() -> list[Any]:
        server, port = await serve(handler)
        client = BrokerClient("127.0.0.1", port, "c", 5000)
        try:
            sends = [client.send(MetadataRequest(topics=[]), 1) for _ in range(3)]
            return list(await asyncio.gather(*sends, return_exceptions=True))
        finally:
            await client.close()
            server.close()
            await server.wait_closed()

    results = run(scenario())
    assert all(isinstance(r, BrokerConnectionError) for r in results), results


def test_close_fails_pending_requests() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()
        writer.close()

    async def scenario() -> Any:
        server, port = await serve(handler)
        client = BrokerClient("127.0.0.1", port, "c", 5000)
        try:
            pending = asyncio.ensure_future(client.send(MetadataRequest(topics=[]), 1))
            while client.in_flight == 0:
                await asyncio.sleep(0.01)
            await client.close()
            return await asyncio.gather(pending, return_exceptions=True)
        finally:
            server.close()
            await server.wait_closed()

    [result] = run(scenario())
    assert isinstance(result, BrokerConnectionError)


def test_connection_refused() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    async def scenario() -> None:
        client = BrokerClient("127.0.0.1", port, "c", 1000)
        await client.send(MetadataRequest(topics=[]), 1)

    with pytest.raises(BrokerConnectionError):
        run(scenario())


def test_produce_with_acks_0_expects_no_response() -> None:
    received: asyncio.Queue[DecodedRequest] = asyncio.Queue()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while (request := await next_request(reader)) is not None:
            received.put_nowait(request)
        writer.close()

    async def scenario() -> tuple[Any, DecodedRequest]:
        server, port = await serve(handler)
        client = BrokerClient("127.0.0.1", port, "c", 5000)
        try:
            request = ProduceRequest(transactional_id=None, acks=0, timeout_ms=1, topic_data=[])
            result = await client.send(request, 9)
            return result, await received.get()
        finally:
            await client.close()
            server.close()
            await server.wait_closed()

    result, seen = run(scenario())
    assert result is None
    assert (seen.api_key, seen.body.acks, seen.expects_response) == (0, 0, False)


def test_undecodable_response_fails_only_its_request() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        first = await next_request(reader)
        assert first is not None
        writer.write(struct.pack(">ii", 6, first.correlation_id) + b"\xff\xff")  # garbage body
        while (request := await next_request(reader)) is not None:
            response = MetadataResponse(brokers=[], topics=[], controller_id=2)
            writer.write(encode_response(request, response))
        writer.close()

    async def scenario() -> Any:
        server, port = await serve(handler)
        client = BrokerClient("127.0.0.1", port, "c", 5000)
        try:
            with pytest.raises(InvalidResponseError):
                await client.send(MetadataRequest(topics=[]), 1)
            return await client.send(MetadataRequest(topics=[]), 1)
        finally:
            await client.close()
            server.close()
            await server.wait_closed()

    assert run(scenario()).controller_id == 2


def test_unknown_correlation_id_closes_the_connection() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await next_request(reader)
        writer.write(struct.pack(">ii", 4, 12345))
        await reader.read()
        writer.close()

    async def scenario() -> bool:
        server, port = await serve(handler)
        client = BrokerClient("127.0.0.1", port, "c", 5000)
        try:
            with pytest.raises(InvalidResponseError, match="12345"):
                await client.send(MetadataRequest(topics=[]), 1)
            return client.connected
        finally:
            await client.close()
            server.close()
            await server.wait_closed()

    assert run(scenario()) is False


def test_against_responses_encoded_by_kafka_python_alone() -> None:
    """The server side here uses only kafka-python's header and message codecs."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            size_prefix = await reader.read(4)
            if len(size_prefix) < 4:
                break
            frame = await reader.readexactly(struct.unpack(">i", size_prefix)[0])
            api_key, version = struct.unpack_from(">hh", frame)
            flexible = {18: version >= 3, 3: version >= 9}[api_key]
            header = RequestHeader.decode(__import__("io").BytesIO(frame), flexible=flexible)
            response: Any
            if api_key == 18:
                entry = ApiVersionsResponse.ApiVersion(api_key=3, min_version=0, max_version=12)
                response = ApiVersionsResponse[version](
                    error_code=0, api_keys=[entry], throttle_time_ms=0
                )
            else:
                broker = MetadataResponse.MetadataResponseBroker(
                    node_id=4, host="b4", port=9094, rack="r"
                )
                response = MetadataResponse[version](
                    brokers=[broker], cluster_id="k", controller_id=4, topics=[]
                )
            response.with_header(correlation_id=header.correlation_id)
            writer.write(bytes(response.encode(header=True, framed=True)))
            await writer.drain()
        writer.close()

    async def scenario() -> tuple[Any, Any, Any]:
        server, port = await serve(handler)
        client = BrokerClient("127.0.0.1", port, "c", 5000)
        try:
            versions = await client.send(ApiVersionsRequest(), 3)
            flexible = await client.send(MetadataRequest(topics=None), 9)
            legacy = await client.send(MetadataRequest(topics=[]), 1)
            return versions, flexible, legacy
        finally:
            await client.close()
            server.close()
            await server.wait_closed()

    versions, flexible, legacy = run(scenario())
    assert [(k.api_key, k.max_version) for k in versions.api_keys] == [(3, 12)]
    assert [(b.node_id, b.host, b.rack) for b in flexible.brokers] == [(4, "b4", "r")]
    assert (flexible.cluster_id, legacy.controller_id) == ("k", 4)
