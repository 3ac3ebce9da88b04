"""The broker's TCP listeners: Kafka frames in, Kafka frames out (asyncio).

Requests on one connection are processed one at a time and answered in order, as
Kafka's SocketServer does (it mutes a channel until its response is sent). A frame
that cannot be parsed closes that connection only; other clients are unaffected. An
ApiVersions request of an unsupported version is answered with UNSUPPORTED_VERSION
and the supported ranges (KIP-511); any other unsupported request closes the connection.

A frame larger than ``socket.request.max.bytes`` closes its connection before any of its
body is read (Kafka's ``InvalidReceiveException``). With ``queued.max.request.bytes``
set, the bytes of requests read but not yet answered come from a :class:`MemoryPool`:
while it is exhausted, connections wait before reading the next body, leaving it in the
socket buffers, as Kafka's SocketServer mutes its channels (KIP-72).

On a listener whose security protocol is not PLAINTEXT, a new connection is first
authenticated by its :class:`~kpo_broker.security.channel.ListenerAuthenticator` (TLS
handshake, SASL exchange); a failure is logged without secrets, counted
(``failed-authentication-total``) and closes the connection, a success is counted
(``successful-authentication-total``) and the principal goes into every request's
:class:`RequestContext`. Over TLS, Fetch data cannot be sent with ``sendfile``: it is read
and written through the TLS transport instead.

Binding and processing are separate steps, as in Kafka's ``SocketServer.startup`` with
``startProcessingRequests = false`` and its later ``enableRequestProcessing``: a broker
binds first (its registration needs the bound ports) and processes requests only once it
has registered and started. Until then an accepted connection waits, unread.

A connection over its address's limit (``max.connections.per.ip`` and its overrides) is
closed at accept (Kafka's ConnectionQuotas). A connection idle for
``connections.max.idle.ms`` is closed; idle here means waiting for a frame's size prefix,
or for the rest of its body, that long (Kafka counts the time since the last socket
activity; a body trickling in over more than that is also closed here).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kpo_broker.cancellation import cancel_and_wait
from kpo_broker.protocol import framing
from kpo_broker.protocol.api import api_spec
from kpo_broker.security.channel import AuthenticationFailedError, ListenerAuthenticator
from kpo_broker.security.principal import ANONYMOUS, KafkaPrincipal
from kpo_broker.server import zero_copy
from kpo_broker.server.connection_quotas import ConnectionQuotas, TooManyConnectionsError
from kpo_broker.server.memory_pool import MemoryPool
from kpo_broker.server.metrics import AuthenticationStats
from kpo_broker.server.request_context import RequestContext
from kpo_broker.server.zero_copy import ZeroCopyResponse

log = logging.getLogger(__name__)

#: Handles one decoded request; returns the response message, or None for no response.
RequestHandler = Callable[[RequestContext, Any], Awaitable[Any | None]]

#: Told of each answered request: (api key, api version, decoded body, total time in s).
RequestObserver = Callable[[int, int, Any, float], None]


@dataclass(frozen=True)
class Listener:
    """A listener to bind: name (e.g. ``PLAINTEXT``), host ("" = all interfaces), port (0 = any).

    ``authenticator`` authenticates its connections (None: PLAINTEXT, ``User:ANONYMOUS``).
    """

    name: str
    host: str
    port: int
    authenticator: ListenerAuthenticator | None = None


class SocketServer:
    """Accepts connections on each listener and feeds their requests to a handler.

    Args:
        listeners: what to bind.
        handler: the request dispatcher.
        supported: api key -> (min, max) versions accepted.
        max_request_bytes: ``socket.request.max.bytes``; larger frames close the connection.
        request_observer: called after each handled request (Kafka's request metrics).
        queued_max_request_bytes: ``queued.max.request.bytes``, the bytes of requests
            read but not yet answered, across connections; 0 or negative = unbounded.
        connections_max_idle_ms: ``connections.max.idle.ms``; negative = never closed.
        max_connections_per_ip: ``max.connections.per.ip``.
        max_connections_per_ip_overrides: ``max.connections.per.ip.overrides``,
            host name or IP -> limit.
        authentication_stats: counts successful and failed authentications per listener.
        failed_authentication_delay_ms: ``connection.failed.authentication.delay.ms``, how
            long a connection whose authentication failed is held before it is closed
            (slows down clients retrying bad credentials in a loop).

    Raises:
        ValueError: an override's host name cannot be resolved.
    """

    def __init__(
        self,
        listeners: list[Listener],
        handler: RequestHandler,
        supported: dict[int, tuple[int, int]],
        max_request_bytes: int = 104857600,
        request_observer: RequestObserver | None = None,
        queued_max_request_bytes: int = -1,
        connections_max_idle_ms: int = 600000,
        max_connections_per_ip: int = 2147483647,
        max_connections_per_ip_overrides: Mapping[str, int] | None = None,
        authentication_stats: AuthenticationStats | None = None,
        failed_authentication_delay_ms: int = 100,
    ) -> None:
        self.listeners = listeners
        self.handler = handler
        self.supported = supported
        self.max_request_bytes = max_request_bytes
        self.request_observer = request_observer
        self.memory_pool = MemoryPool(queued_max_request_bytes)
        self.connection_quotas = ConnectionQuotas(
            max_connections_per_ip, max_connections_per_ip_overrides or {}
        )
        self.idle_timeout_s = (
            None if connections_max_idle_ms < 0 else connections_max_idle_ms / 1000
        )
        self.authentication_stats = authentication_stats or AuthenticationStats()
        self.failed_authentication_delay_s = failed_authentication_delay_ms / 1000
        self.bound_ports: dict[str, int] = {}
        self._servers: list[asyncio.Server] = []
        self._connections: set[asyncio.Task[None]] = set()
        self._processing = asyncio.Event()

    async def start(self, process_requests: bool = True) -> dict[str, int]:
        """Bind every listener; return listener name -> bound port.

        Args:
            process_requests: False to accept connections but leave their requests unread
                until :meth:`enable_request_processing` (Kafka's ``startProcessingRequests``).
        """
        if process_requests:
            self._processing.set()
        for listener in self.listeners:
            server = await asyncio.start_server(
                functools.partial(self._accept, listener=listener),
                host=listener.host or None,
                port=listener.port,
                reuse_address=True,
            )
            self._servers.append(server)
            self.bound_ports[listener.name] = server.sockets[0].getsockname()[1]
        return dict(self.bound_ports)

    def enable_request_processing(self) -> None:
        """Process requests (Kafka's ``SocketServer.enableRequestProcessing``).

        Connections accepted before this are authenticated and served from now on.
        """
        self._processing.set()

    async def stop(self) -> None:
        """Stop accepting, close every connection and wait for their tasks.

        Each connection is cancelled until it ends (:func:`cancel_and_wait`): one whose
        purgatory wait completed as it was cancelled would otherwise answer and read on
        (Python 3.11's ``wait_for``), holding the broker's shutdown until its client left.
        """
        for server in self._servers:
            server.close()
        connections = list(self._connections)
        for server in self._servers:
            with contextlib.suppress(Exception):
                await server.wait_closed()
        if connections:
            await asyncio.gather(*(cancel_and_wait(task) for task in connections))
        self._servers.clear()

    async def _accept(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, listener: Listener
    ) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        peer = writer.get_extra_info("peername")
        address = str(peer[0]) if peer else ""
        try:
            self.connection_quotas.inc(address)
        except TooManyConnectionsError as exc:
            log.info("rejected connection from %s: %s", peer, exc)
            self._connections.discard(task)
            writer.close()
            return
        try:
            if not self._processing.is_set():
                await self._processing.wait()
            principal = await self._authenticate(reader, writer, listener, peer)
            if principal is not None:
                await self._serve(reader, writer, listener.name, peer, principal)
        except (asyncio.CancelledError, ConnectionError, asyncio.IncompleteReadError):
            pass
        except Exception:
            log.exception("connection from %s failed", peer)
        finally:
            self.connection_quotas.dec(address)
            self._connections.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _authenticate(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        listener: Listener,
        peer: Any,
    ) -> KafkaPrincipal | None:
        """Authenticate a new connection; None when it failed (logged and counted)."""
        authenticator = listener.authenticator
        if authenticator is None or not authenticator.authenticates:
            return ANONYMOUS
        try:
            principal = await authenticator.authenticate(reader, writer, peer)
        except AuthenticationFailedError as exc:
            self.authentication_stats.record(listener.name, success=False)
            log.info("failed authentication with %s on listener %s: %s", peer, listener.name, exc)
            await asyncio.sleep(self.failed_authentication_delay_s)
            return None
        self.authentication_stats.record(listener.name, success=True)
        log.debug("authenticated %s as %s on listener %s", peer, principal, listener.name)
        return principal

    async def _serve(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        listener: str,
        peer: Any,
        principal: KafkaPrincipal = ANONYMOUS,
    ) -> None:
        while True:
            try:
                async with asyncio.timeout(self.idle_timeout_s):
                    size = await framing.read_frame_size(reader, self.max_request_bytes)
                if size is None:
                    return
                await self.memory_pool.allocate(size)
                try:
                    async with asyncio.timeout(self.idle_timeout_s):
                        frame = await framing.read_frame_body(reader, size)
                    if not await self._process(frame, writer, listener, peer, principal):
                        return
                finally:
                    self.memory_pool.release(size)
            except framing.FrameError as exc:
                log.info("closing %s: %s", peer, exc)
                return
            except TimeoutError:
                log.info("closing %s: idle for over %s s", peer, self.idle_timeout_s)
                return

    async def _process(
        self,
        frame: bytes,
        writer: asyncio.StreamWriter,
        listener: str,
        peer: Any,
        principal: KafkaPrincipal = ANONYMOUS,
    ) -> bool:
        """Decode, handle and answer one request frame.

        Returns:
            False when the request is one Kafka answers by closing the connection.
        """
        received = time.monotonic()
        try:
            decoded = framing.decode_request(frame, self.supported)
        except framing.UnsupportedVersionError as exc:
            answer = framing.encode_unsupported_version_response(exc, self.supported)
            if answer is None:
                log.info("closing %s: %s", peer, exc)
                return False
            writer.write(answer)
            await writer.drain()
            return True
        except framing.InvalidRequestError as exc:
            log.info("closing %s: invalid request: %s", peer, exc)
            return False
        ctx = RequestContext(
            decoded.api_key,
            decoded.api_version,
            decoded.correlation_id,
            decoded.client_id,
            listener,
            tuple(peer[:2]) if peer else None,
            principal,
        )
        response = await self.handler(ctx, decoded.body)
        if isinstance(response, ZeroCopyResponse):
            await self._write_zero_copy(writer, decoded, response)
        elif response is not None:
            writer.write(framing.encode_response(decoded, response))
            await writer.drain()
        if self.request_observer is not None:
            elapsed = time.monotonic() - received
            self.request_observer(decoded.api_key, decoded.api_version, decoded.body, elapsed)
        return True

    async def _write_zero_copy(
        self, writer: asyncio.StreamWriter, decoded: Any, response: ZeroCopyResponse
    ) -> None:
        framed = framing.encode_response(decoded, response.message)
        flexible = api_spec(decoded.api_key).request_is_flexible(decoded.api_version)
        if writer.get_extra_info("ssl_object") is not None:  # no sendfile through TLS
            await zero_copy.write_parts_copied(writer, framed, response.splices, flexible)
            return
        try:
            parts = zero_copy.assemble(framed, response.splices, flexible)
        except ValueError:
            log.warning("zero-copy splice failed; sending the records from memory")
            parts = [zero_copy.inline(framed, response.splices, flexible)]
        await zero_copy.write_parts(writer, parts)
