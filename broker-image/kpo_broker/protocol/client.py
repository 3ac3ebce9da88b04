"""Asyncio client for broker-to-broker requests (controller -> brokers, follower -> leader).

One TCP connection carries many requests at once. Each request gets the next
correlation id (int32, wrapping at 2**31 as Kafka clients do); a reader task
decodes response frames and completes the waiting request whose correlation
id matches. As Kafka's ``NetworkClient`` does, a request timeout and any
connection failure close the connection and fail every request still waiting;
the next :meth:`BrokerClient.send` reconnects. A ``connector`` (see
:mod:`kpo_broker.security.client`) opens connections to TLS and SASL listeners.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any, Protocol

from kpo_broker.protocol.errors import (
    BrokerConnectionError,
    InvalidResponseError,
    ProtocolError,
    RequestTimeoutError,
)
from kpo_broker.protocol.framing import DEFAULT_MAX_FRAME_BYTES, decode_response, read_frame

__all__ = ["BrokerClient", "StreamConnector"]


class StreamConnector(Protocol):
    """Opens an authenticated stream (:class:`kpo_broker.security.client.Connector`)."""

    def open(
        self, host: str, port: int, client_id: str
    ) -> Awaitable[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
        """Connect (TCP, then TLS and SASL as configured)."""
        ...


_CORRELATION_ID = struct.Struct(">i")


@dataclass
class _Pending:
    response_class: Any
    api_version: int
    future: asyncio.Future[Any]


class BrokerClient:
    """A connection to one broker for inter-broker requests.

    Args:
        host: broker host (its inter-broker listener).
        port: broker port.
        client_id: sent in every request header (Kafka's controller uses
            ``controller-<id>-to-broker-<id>`` style ids; any string works).
        request_timeout_ms: how long :meth:`send` waits for a response, in ms
            (``controller.socket.timeout.ms`` for the controller,
            ``replica.socket.timeout.ms`` for fetchers).
        connect_timeout_ms: how long opening the TCP connection may take, in ms.
        max_frame_bytes: the largest response frame accepted, in bytes.
        connector: opens the connection with the listener's security (TLS, SASL);
            None = plain TCP (PLAINTEXT).
    """

    def __init__(
        self,
        host: str,
        port: int,
        client_id: str,
        request_timeout_ms: int = 30000,
        *,
        connect_timeout_ms: int = 10000,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        connector: StreamConnector | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        self.connect_timeout_ms = connect_timeout_ms
        self.max_frame_bytes = max_frame_bytes
        self.connector = connector
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self._pending: dict[int, _Pending] = {}
        self._next_correlation_id = 0
        self._connect_lock = asyncio.Lock()

    @property
    def connected(self) -> bool:
        """Whether a connection is open."""
        return self._writer is not None

    @property
    def in_flight(self) -> int:
        """Number of requests sent and not yet answered."""
        return len(self._pending)

    async def connect(self) -> None:
        """Open the connection if it is not open.

        Raises:
            BrokerConnectionError: the connection could not be opened (or authenticated)
                in ``connect_timeout_ms``.
        """
        async with self._connect_lock:
            if self._writer is not None:
                return
            opening = (
                asyncio.open_connection(self.host, self.port)
                if self.connector is None
                else self.connector.open(self.host, self.port, self.client_id)
            )
            try:
                reader, writer = await asyncio.wait_for(opening, self.connect_timeout_ms / 1000)
            except (OSError, TimeoutError, ProtocolError) as exc:
                raise BrokerConnectionError(
                    f"cannot connect to {self.host}:{self.port}: {exc!r}"
                ) from exc
            self._writer = writer
            self._reader_task = asyncio.create_task(self._read_responses(reader, writer))

    async def send(self, request_message: Any, api_version: int) -> Any:
        """Send a request and wait for its response.

        Opens the connection first if needed.

        Args:
            request_message: a kafka-python request message (any ``ApiMessage``
                request, including :mod:`kpo_broker.protocol.interbroker`).
            api_version: the version to encode it at.

        Returns:
            The decoded response message, or None for a request that expects
            no response (Produce with ``acks=0``).

        Raises:
            RequestTimeoutError: no response within ``request_timeout_ms``; the
                connection is closed.
            BrokerConnectionError: the connection failed or closed first.
            InvalidResponseError: the response could not be decoded, or the broker
                answered an unknown correlation id (the connection is then closed).
        """
        await self.connect()
        writer = self._writer
        if writer is None:  # closed by a concurrent failure right after connect
            raise BrokerConnectionError(f"connection to {self.host}:{self.port} closed")
        correlation_id = self._next_correlation_id
        self._next_correlation_id = (correlation_id + 1) % 2**31
        request_message.with_header(correlation_id=correlation_id, client_id=self.client_id)
        frame = bytes(request_message.encode(version=api_version, header=True, framed=True))
        expects_response = bool(request_message.expect_response())
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if expects_response:
            response_class = request_message.header.get_response_class()
            self._pending[correlation_id] = _Pending(response_class, api_version, future)
        try:
            writer.write(frame)
            await writer.drain()
        except OSError as exc:
            error = BrokerConnectionError(f"write to {self.host}:{self.port} failed: {exc!r}")
            self._pending.pop(correlation_id, None)
            self._fail_all(error)
            await self._close_transport()
            raise error from exc
        if not expects_response:
            return None
        try:
            return await asyncio.wait_for(future, self.request_timeout_ms / 1000)
        except TimeoutError:
            self._pending.pop(correlation_id, None)
            self._fail_all(
                BrokerConnectionError(
                    f"connection to {self.host}:{self.port} closed after a timeout"
                )
            )
            await self._close_transport()
            raise RequestTimeoutError(
                f"no response to correlation id {correlation_id} from {self.host}:{self.port} "
                f"in {self.request_timeout_ms} ms"
            ) from None

    async def close(self) -> None:
        """Close the connection; requests still waiting fail with BrokerConnectionError."""
        self._fail_all(BrokerConnectionError(f"connection to {self.host}:{self.port} closed"))
        await self._close_transport()

    async def _read_responses(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        """Reader task: complete pending requests until the connection ends."""
        failure: ProtocolError
        try:
            while True:
                frame = await read_frame(reader, self.max_frame_bytes)
                if frame is None:
                    failure = BrokerConnectionError(f"connection closed by {self.host}:{self.port}")
                    break
                unmatched = self._complete(frame)
                if unmatched is not None:
                    failure = unmatched
                    break
        except Exception as exc:  # OSError, FrameError...: no request may be left waiting
            failure = BrokerConnectionError(f"connection to {self.host}:{self.port}: {exc!r}")
        if self._writer is writer:
            self._fail_all(failure)
            self._writer = None
            self._reader_task = None
            writer.close()

    def _complete(self, frame: bytes) -> InvalidResponseError | None:
        """Complete the request ``frame`` answers; return an error when it answers none."""
        if len(frame) < _CORRELATION_ID.size:
            return InvalidResponseError(f"response of {len(frame)} bytes has no header")
        (correlation_id,) = _CORRELATION_ID.unpack_from(frame, 0)
        pending = self._pending.pop(correlation_id, None)
        if pending is None:
            return InvalidResponseError(f"response to unknown correlation id {correlation_id}")
        if pending.future.done():  # the caller gave up (cancelled)
            return None
        try:
            _, response = decode_response(frame, pending.response_class, pending.api_version)
        except InvalidResponseError as exc:
            pending.future.set_exception(exc)
        else:
            pending.future.set_result(response)
        return None

    def _fail_all(self, error: ProtocolError) -> None:
        pending, self._pending = self._pending, {}
        for entry in pending.values():
            if not entry.future.done():
                entry.future.set_exception(error)

    async def _close_transport(self) -> None:
        writer, self._writer = self._writer, None
        task, self._reader_task = self._reader_task, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if writer is not None:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
