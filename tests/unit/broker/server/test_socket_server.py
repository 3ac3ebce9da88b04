"""The socket server (Kafka's SocketServer) on an in-process loopback listener.

Framing and dispatch: request contexts, one request at a time per connection with
responses in order, KIP-511 answers to unsupported ApiVersions, connections closed on
bad frames without harming others, requests without responses, zero-copy responses,
request metrics and shutdown.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from kafka.protocol.consumer import FetchRequest, FetchResponse
from kafka.protocol.metadata import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    MetadataRequest,
    MetadataResponse,
)

from kpo_broker.log.filerecords import FileRecords, FileSlice
from kpo_broker.protocol.framing import decode_response, read_frame
from kpo_broker.server.delayed import PartitionWatchers
from kpo_broker.server.request_context import RequestContext
from kpo_broker.server.socket_server import Listener, RequestHandler, SocketServer
from kpo_broker.server.zero_copy import ZeroCopyResponse

API_VERSIONS, METADATA, FETCH = 18, 3, 1
SUPPORTED = {API_VERSIONS: (0, 3), METADATA: (0, 12), FETCH: (4, 12)}

Connection = tuple[asyncio.StreamReader, asyncio.StreamWriter]


def _metadata_response(throttle_time_ms: int = 0) -> Any:
    return MetadataResponse(
        throttle_time_ms=throttle_time_ms,
        brokers=[],
        cluster_id="c",
        controller_id=0,
        topics=[],
    )


def _metadata_request(correlation_id: int, version: int = 9, client_id: str = "test") -> bytes:
    request = MetadataRequest(
        topics=[],
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )
    request.with_header(correlation_id=correlation_id, client_id=client_id)
    return bytes(request.encode(version=version, header=True, framed=True))


def _fetch_request(correlation_id: int, version: int) -> bytes:
    request = FetchRequest(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[],
        forgotten_topics_data=[],
        rack_id="",
    )
    request.with_header(correlation_id=correlation_id, client_id="test")
    return bytes(request.encode(version=version, header=True, framed=True))


def _api_versions_request(correlation_id: int, version: int) -> bytes:
    request = ApiVersionsRequest(client_software_name="t", client_software_version="1")
    request.with_header(correlation_id=correlation_id, client_id="test")
    return bytes(request.encode(version=version, header=True, framed=True))


class Recorder:
    """A request handler answering Metadata, recording what it saw and how many ran at once."""

    def __init__(self, delays: dict[int, float] | None = None) -> None:
        self.delays = delays or {}
        self.seen: list[tuple[RequestContext, Any]] = []
        self.running = 0
        self.max_running = 0
        self.observed: list[tuple[int, int, float]] = []

    async def handle(self, ctx: RequestContext, body: Any) -> Any:
        self.seen.append((ctx, body))
        self.running += 1
        self.max_running = max(self.max_running, self.running)
        try:
            await asyncio.sleep(self.delays.get(ctx.correlation_id, 0))
        finally:
            self.running -= 1
        return _metadata_response(throttle_time_ms=ctx.correlation_id)

    def observe(self, api_key: int, api_version: int, body: Any, seconds: float) -> None:
        self.observed.append((api_key, api_version, seconds))


@asynccontextmanager
async def serving(
    handler: RequestHandler,
    max_request_bytes: int = 1 << 20,
    observer: Callable[[int, int, Any, float], None] | None = None,
    process_requests: bool = True,
    **limits: Any,
) -> AsyncIterator[tuple[SocketServer, Callable[[], Awaitable[Connection]]]]:
    server = SocketServer(
        [Listener("INTERNAL", "127.0.0.1", 0)],
        handler,
        SUPPORTED,
        max_request_bytes=max_request_bytes,
        request_observer=observer,
        **limits,
    )
    ports = await server.start(process_requests=process_requests)
    opened: list[asyncio.StreamWriter] = []

    async def connect() -> Connection:
        reader, writer = await asyncio.open_connection("127.0.0.1", ports["INTERNAL"])
        opened.append(writer)
        return reader, writer

    try:
        yield server, connect
    finally:
        await server.stop()
        for writer in opened:
            writer.close()


async def _response(reader: asyncio.StreamReader, response_class: Any, version: int) -> Any:
    frame = await asyncio.wait_for(read_frame(reader), 2)
    assert frame is not None, "the connection was closed"
    return decode_response(frame, response_class, version)


async def _closed(reader: asyncio.StreamReader) -> bool:
    """Whether the server closed the connection (EOF within 2 s)."""
    try:
        return await asyncio.wait_for(reader.read(), 2) == b""
    except ConnectionError:
        return True


def test_requests_reach_the_handler_with_their_context_and_are_answered() -> None:
    recorder = Recorder()

    async def scenario() -> None:
        async with serving(recorder.handle) as (server, connect):
            assert set(server.bound_ports) == {"INTERNAL"}
            reader, writer = await connect()
            writer.write(_metadata_request(41, version=9, client_id="my-client"))
            correlation_id, response = await _response(reader, MetadataResponse, 9)
            assert (correlation_id, response.throttle_time_ms, response.cluster_id) == (
                41,
                41,
                "c",
            )
            ctx, body = recorder.seen[0]
            local = writer.get_extra_info("sockname")
            assert (ctx.api_key, ctx.api_version, ctx.correlation_id) == (METADATA, 9, 41)
            assert (ctx.client_id, ctx.listener, ctx.peer) == ("my-client", "INTERNAL", local)
            assert body.topics == []

    asyncio.run(scenario())


def test_requests_wait_unread_until_processing_is_enabled() -> None:
    """Bound first, processing later (Kafka's ``startProcessingRequests = false``)."""
    recorder = Recorder()

    async def scenario() -> None:
        async with serving(recorder.handle, process_requests=False) as (server, connect):
            reader, writer = await connect()  # the port is bound: the connection is accepted
            writer.write(_metadata_request(7))
            early = asyncio.ensure_future(_response(reader, MetadataResponse, 9))
            await asyncio.sleep(0.3)
            assert not early.done() and recorder.seen == []
            server.enable_request_processing()
            correlation_id, _ = await early
            assert correlation_id == 7 and len(recorder.seen) == 1
            other_reader, other_writer = await connect()
            other_writer.write(_metadata_request(8))
            assert (await _response(other_reader, MetadataResponse, 9))[0] == 8

    asyncio.run(scenario())


def test_one_connection_is_served_one_request_at_a_time_in_order() -> None:
    recorder = Recorder(delays={1: 0.2, 2: 0.0, 3: 0.05})

    async def scenario() -> None:
        async with serving(recorder.handle) as (_server, connect):
            reader, writer = await connect()
            writer.write(_metadata_request(1) + _metadata_request(2) + _metadata_request(3))
            answered = [(await _response(reader, MetadataResponse, 9))[0] for _ in range(3)]
            assert answered == [1, 2, 3]
            assert recorder.max_running == 1

    asyncio.run(scenario())


def test_connections_are_served_concurrently() -> None:
    recorder = Recorder(delays={1: 0.3})

    async def scenario() -> None:
        async with serving(recorder.handle) as (_server, connect):
            slow_reader, slow_writer = await connect()
            fast_reader, fast_writer = await connect()
            slow_writer.write(_metadata_request(1))
            await asyncio.sleep(0.05)
            fast_writer.write(_metadata_request(2))
            assert (await _response(fast_reader, MetadataResponse, 9))[0] == 2
            assert recorder.running == 1  # the slow request is still being handled
            assert (await _response(slow_reader, MetadataResponse, 9))[0] == 1
            assert recorder.max_running == 2

    asyncio.run(scenario())


def test_an_unsupported_api_versions_version_gets_the_supported_range() -> None:
    """KIP-511: UNSUPPORTED_VERSION in a v0 response, and the connection stays open."""
    recorder = Recorder()

    async def scenario() -> None:
        async with serving(recorder.handle) as (_server, connect):
            reader, writer = await connect()
            frame = bytearray(_api_versions_request(7, version=3))
            frame[6:8] = (9).to_bytes(2, "big")  # api_version 9: newer than the broker's 3
            writer.write(bytes(frame))
            correlation_id, response = await _response(reader, ApiVersionsResponse, 0)
            assert correlation_id == 7
            assert response.error_code == 35
            assert [(k.api_key, k.min_version, k.max_version) for k in response.api_keys] == [
                (API_VERSIONS, 0, 3)
            ]
            writer.write(_metadata_request(8))
            assert (await _response(reader, MetadataResponse, 9))[0] == 8
            assert [ctx.correlation_id for ctx, _ in recorder.seen] == [8]

    asyncio.run(scenario())


def test_any_other_unsupported_version_closes_the_connection() -> None:
    recorder = Recorder()

    async def scenario() -> None:
        async with serving(recorder.handle) as (_server, connect):
            reader, writer = await connect()
            writer.write(_metadata_request(1, version=13))  # above the supported 12
            assert await _closed(reader)
            assert recorder.seen == []

    asyncio.run(scenario())


def test_bad_frames_close_only_their_connection() -> None:
    recorder = Recorder()

    async def scenario() -> None:
        async with serving(recorder.handle, max_request_bytes=1000) as (_server, connect):
            bystander_reader, bystander_writer = await connect()
            oversized_reader, oversized_writer = await connect()
            oversized_writer.write((1001).to_bytes(4, "big") + b"\0" * 1001)
            garbage_reader, garbage_writer = await connect()
            garbage_writer.write((6).to_bytes(4, "big") + b"\x00\x03\x00\x09\xff\xff")
            negative_reader, negative_writer = await connect()
            negative_writer.write(b"\xff\xff\xff\xff")
            for reader in (oversized_reader, garbage_reader, negative_reader):
                assert await _closed(reader)
            bystander_writer.write(_metadata_request(5))
            assert (await _response(bystander_reader, MetadataResponse, 9))[0] == 5
            assert [ctx.correlation_id for ctx, _ in recorder.seen] == [5]

    asyncio.run(scenario())


def test_an_oversized_frame_closes_the_connection_before_its_body_is_sent() -> None:
    """Kafka's InvalidReceiveException: the size prefix alone is enough to close."""
    recorder = Recorder()

    async def scenario() -> None:
        async with serving(recorder.handle, max_request_bytes=1000) as (_server, connect):
            reader, writer = await connect()
            writer.write((1001).to_bytes(4, "big"))
            assert await _closed(reader)
            assert recorder.seen == []

    asyncio.run(scenario())


def test_queued_request_bytes_pause_reading_until_answers_release_them() -> None:
    """queued.max.request.bytes: a second body waits until the first request is answered."""
    recorder = Recorder(delays={1: 0.3})

    async def scenario() -> None:
        async with serving(recorder.handle, queued_max_request_bytes=10) as (server, connect):
            first_reader, first_writer = await connect()
            second_reader, second_writer = await connect()
            first_writer.write(_metadata_request(1))
            await asyncio.sleep(0.05)
            assert server.memory_pool.available < 0  # non-strict: one request overshoots
            second_writer.write(_metadata_request(2))
            await asyncio.sleep(0.1)
            assert [ctx.correlation_id for ctx, _ in recorder.seen] == [1]
            assert (await _response(first_reader, MetadataResponse, 9))[0] == 1
            assert (await _response(second_reader, MetadataResponse, 9))[0] == 2
            assert recorder.max_running == 1
            await asyncio.sleep(0.05)
            assert server.memory_pool.available == 10

    asyncio.run(scenario())


def test_unbounded_queued_request_bytes_let_connections_run_concurrently() -> None:
    recorder = Recorder(delays={1: 0.2})

    async def scenario() -> None:
        async with serving(recorder.handle, queued_max_request_bytes=-1) as (_server, connect):
            first_reader, first_writer = await connect()
            second_reader, second_writer = await connect()
            first_writer.write(_metadata_request(1))
            second_writer.write(_metadata_request(2))
            assert (await _response(second_reader, MetadataResponse, 9))[0] == 2
            assert (await _response(first_reader, MetadataResponse, 9))[0] == 1
            assert recorder.max_running == 2

    asyncio.run(scenario())


def test_idle_connections_are_closed_after_connections_max_idle_ms() -> None:
    """An idle connection and a half-open one (one byte of a size prefix) are closed."""
    recorder = Recorder()

    async def scenario() -> None:
        async with serving(recorder.handle, connections_max_idle_ms=200) as (_server, connect):
            idle_reader, _idle_writer = await connect()
            half_reader, half_writer = await connect()
            half_writer.write(b"\x00")
            busy_reader, busy_writer = await connect()
            for correlation_id in range(1, 4):
                await asyncio.sleep(0.1)
                busy_writer.write(_metadata_request(correlation_id))
                assert (await _response(busy_reader, MetadataResponse, 9))[0] == correlation_id
            assert await _closed(idle_reader)
            assert await _closed(half_reader)

    asyncio.run(scenario())


def test_connections_beyond_max_connections_per_ip_are_closed_at_accept() -> None:
    recorder = Recorder()

    async def scenario() -> None:
        async with serving(recorder.handle, max_connections_per_ip=2) as (server, connect):
            first = await connect()
            second = await connect()
            third_reader, _third_writer = await connect()
            assert await _closed(third_reader)
            assert server.connection_quotas.count("127.0.0.1") == 2
            first[1].close()
            await asyncio.sleep(0.1)
            fourth_reader, fourth_writer = await connect()
            fourth_writer.write(_metadata_request(4))
            assert (await _response(fourth_reader, MetadataResponse, 9))[0] == 4
            second[1].write(_metadata_request(2))
            assert (await _response(second[0], MetadataResponse, 9))[0] == 2

    asyncio.run(scenario())


def test_a_per_ip_override_replaces_the_default_limit() -> None:
    recorder = Recorder()

    async def scenario() -> None:
        async with serving(
            recorder.handle,
            max_connections_per_ip=0,
            max_connections_per_ip_overrides={"127.0.0.1": 1},
        ) as (_server, connect):
            reader, writer = await connect()
            refused_reader, _refused_writer = await connect()
            assert await _closed(refused_reader)
            writer.write(_metadata_request(1))
            assert (await _response(reader, MetadataResponse, 9))[0] == 1

    asyncio.run(scenario())


def test_a_request_without_a_response_is_not_answered() -> None:
    """E.g. Produce with acks=0: the handler returns None and the next request goes on."""
    recorder = Recorder()

    async def handle(ctx: RequestContext, body: Any) -> Any:
        answer = await recorder.handle(ctx, body)
        return None if ctx.correlation_id == 1 else answer

    async def scenario() -> None:
        async with serving(handle) as (_server, connect):
            reader, writer = await connect()
            writer.write(_metadata_request(1) + _metadata_request(2))
            assert (await _response(reader, MetadataResponse, 9))[0] == 2
            assert [ctx.correlation_id for ctx, _ in recorder.seen] == [1, 2]

    asyncio.run(scenario())


def test_a_failing_handler_closes_its_connection_only() -> None:
    recorder = Recorder()

    async def handle(ctx: RequestContext, body: Any) -> Any:
        if ctx.client_id == "bad":
            raise RuntimeError("handler bug")
        return await recorder.handle(ctx, body)

    async def scenario() -> None:
        async with serving(handle) as (_server, connect):
            bad_reader, bad_writer = await connect()
            bad_writer.write(_metadata_request(1, client_id="bad"))
            assert await _closed(bad_reader)
            reader, writer = await connect()
            writer.write(_metadata_request(2))
            assert (await _response(reader, MetadataResponse, 9))[0] == 2

    asyncio.run(scenario())


def test_every_answered_request_is_observed() -> None:
    recorder = Recorder(delays={2: 0.05})

    async def scenario() -> None:
        async with serving(recorder.handle, observer=recorder.observe) as (_server, connect):
            reader, writer = await connect()
            writer.write(_metadata_request(1, version=4) + _metadata_request(2, version=9))
            await _response(reader, MetadataResponse, 4)
            await _response(reader, MetadataResponse, 9)
            await asyncio.sleep(0.01)

    asyncio.run(scenario())
    assert [(key, version) for key, version, _ in recorder.observed] == [
        (METADATA, 4),
        (METADATA, 9),
    ]
    assert recorder.observed[0][2] >= 0
    assert recorder.observed[1][2] >= 0.04  # total time includes the handler's wait


def test_a_zero_copy_response_carries_the_file_bytes(tmp_path: Path) -> None:
    segment = tmp_path / "00000000000000000000.log"
    segment.write_bytes(b"x" * 10 + b"records!" + b"y" * 10)
    partition = FetchResponse.FetchableTopicResponse.PartitionData

    async def scenario() -> None:
        file = FileRecords(segment)
        try:

            async def handle(ctx: RequestContext, body: Any) -> Any:
                response = ZeroCopyResponse(None)
                token = response.placeholder([FileSlice(file, 10, 8)])
                response.message = FetchResponse(
                    throttle_time_ms=0,
                    error_code=0,
                    session_id=0,
                    responses=[
                        FetchResponse.FetchableTopicResponse(
                            topic="t",
                            partitions=[
                                partition(
                                    partition_index=0,
                                    error_code=0,
                                    high_watermark=3,
                                    last_stable_offset=3,
                                    log_start_offset=0,
                                    aborted_transactions=None,
                                    preferred_read_replica=-1,
                                    records=token,
                                )
                            ],
                        )
                    ],
                )
                return response

            async with serving(handle) as (_server, connect):
                reader, writer = await connect()
                writer.write(_fetch_request(3, version=12))
                correlation_id, response = await _response(reader, FetchResponse, 12)
                assert correlation_id == 3
                data = response.responses[0].partitions[0]
                assert (data.high_watermark, bytes(data.records)) == (3, b"records!")
        finally:
            file.close()

    asyncio.run(scenario())


def test_stop_closes_open_connections() -> None:
    recorder = Recorder(delays={1: 10})

    async def scenario() -> None:
        server = SocketServer([Listener("INTERNAL", "127.0.0.1", 0)], recorder.handle, SUPPORTED)
        ports = await server.start()
        reader, writer = await asyncio.open_connection("127.0.0.1", ports["INTERNAL"])
        idle_reader, idle_writer = await asyncio.open_connection("127.0.0.1", ports["INTERNAL"])
        writer.write(_metadata_request(1))  # still in its handler when the server stops
        await asyncio.sleep(0.05)
        await asyncio.wait_for(server.stop(), 2)
        assert await _closed(reader)
        assert await _closed(idle_reader)
        try:
            await asyncio.open_connection("127.0.0.1", ports["INTERNAL"])
        except OSError:
            pass
        else:
            raise AssertionError("the listener still accepts connections")
        writer.close()
        idle_writer.close()

    asyncio.run(scenario())


def test_transaction_apis_are_not_advertised_and_a_txn_offset_commit_closes_the_connection() -> (
    None
):
    """Transactions are not served: their APIs are absent from ApiVersions, so clients fail
    before sending; a TxnOffsetCommit sent anyway reaches no handler and closes the
    connection (Kafka's SocketServer for an API it does not enable)."""
    from kafka.protocol.producer.transaction import TxnOffsetCommitRequest

    from kpo_broker.server.apis.versions import CLIENT_APIS

    assert not {24, 25, 26, 28} & set(CLIENT_APIS)  # AddPartitions/AddOffsets/EndTxn/TxnOffset
    recorder = Recorder()
    request = TxnOffsetCommitRequest(
        transactional_id="tx", group_id="g", producer_id=1, producer_epoch=0, topics=[]
    )
    request.with_header(correlation_id=7, client_id="test")
    frame = bytes(request.encode(version=3, header=True, framed=True))

    async def scenario() -> None:
        async with serving(recorder.handle) as (_server, connect):
            reader, writer = await connect()
            writer.write(frame)
            assert await _closed(reader)
            assert recorder.seen == []

    asyncio.run(scenario())


def test_stop_ends_a_connection_whose_delayed_answer_completes_as_it_is_cancelled() -> None:
    """Stop must not wait on a connection that ran on after its cancellation.

    A produce with ``acks=all`` waits in the purgatory (``asyncio.wait_for``); on Python
    3.11, a cancellation arriving in the loop iteration where its wait completes is lost
    (CPython gh-86296), the answer is written and the connection reads on, so a single
    ``cancel()`` left the broker's shutdown waiting on a producer's open connection (a
    clean stop seen hanging past 60 s in the fault suite). Every yield count between the
    completion and the stop is tried, so one of them lands in that iteration.
    """

    async def scenario(yields: int) -> None:
        watchers = PartitionWatchers()
        waiting = asyncio.Event()

        async def handle(ctx: RequestContext, body: Any) -> Any:
            waiting.set()
            await watchers.wait(["ledger-0"], 30)
            return _metadata_response()

        server = SocketServer([Listener("INTERNAL", "127.0.0.1", 0)], handle, SUPPORTED)
        ports = await server.start()
        reader, writer = await asyncio.open_connection("127.0.0.1", ports["INTERNAL"])
        writer.write(_metadata_request(1))
        await asyncio.wait_for(waiting.wait(), 2)
        watchers.notify("ledger-0")  # the HW passes the produce's offsets...
        for _ in range(yields):
            await asyncio.sleep(0)
        stop = asyncio.ensure_future(server.stop())  # ...as the broker shuts down
        done, _ = await asyncio.wait({stop}, timeout=2)
        assert stop in done, f"stop still waiting after 2 s ({yields} yields)"
        await asyncio.wait_for(reader.read(), 2)  # the answer, if it was written, then EOF
        assert reader.at_eof()
        writer.close()

    for yields in range(6):
        asyncio.run(scenario(yields))
