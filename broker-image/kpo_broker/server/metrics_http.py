"""``GET /metrics`` over HTTP on the broker's event loop (``metrics.port``, ``metrics.host``).

A minimal HTTP/1.1 server: one request per connection (``Connection: close``), ``GET``
and ``HEAD`` of ``/metrics`` answered with the Prometheus text format of the broker's
own :class:`CollectorRegistry`; other paths get 404, other methods 405. It runs on the
broker's asyncio loop, so the collector reads the broker's state on the thread that
changes it (the replica manager and logs are single-threaded), and it stops with the
broker. :func:`broker_state` adapts the running broker's components to the collector's
views.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from prometheus_client import CollectorRegistry, PlatformCollector, ProcessCollector
from prometheus_client.exposition import generate_latest

from kpo_broker.cancellation import cancel_and_wait
from kpo_broker.security.authorizer import AuthorizationStats
from kpo_broker.server.components import BrokerComponents
from kpo_broker.server.metrics import AuthenticationStats, BrokerState, RequestStats
from kpo_broker.server.metrics_collector import BrokerMetricsCollector

log = logging.getLogger(__name__)

#: Longest wait for a client's request head, seconds.
REQUEST_HEAD_TIMEOUT_S = 10.0

#: Largest request head accepted, bytes.
MAX_REQUEST_HEAD_BYTES = 8192

#: The one path served.
METRICS_PATH = "/metrics"

#: Prometheus' text exposition format 0.0.4, understood by every Prometheus version.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class MetricsServerError(Exception):
    """The metrics listener could not be bound (``metrics.host``/``metrics.port``)."""


def new_registry(
    state: Callable[[], BrokerState | None],
    request_stats: RequestStats,
    authentication_stats: AuthenticationStats | None = None,
    authorization_stats: AuthorizationStats | None = None,
) -> CollectorRegistry:
    """Return a broker's own registry: its collector plus the process and platform ones.

    Args:
        state: returns the broker's state at scrape time (None when not running).
        request_stats: the socket server's request counters.
        authentication_stats: the socket server's authentication counters.
        authorization_stats: the ACL authorizer's counters (None without an authorizer).
    """
    registry = CollectorRegistry(auto_describe=False)
    registry.register(
        BrokerMetricsCollector(state, request_stats, authentication_stats, authorization_stats)
    )
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    return registry


def broker_state(components: BrokerComponents | None) -> BrokerState | None:
    """Build the collector's view of a running broker; None when it has no components."""
    if components is None:
        return None
    rm = components.replica_manager
    quotas = components.replication_quotas
    lags = [
        state.lag
        for fetcher in list(components.fetchers.fetchers.values())
        for state in fetcher.partitions.values()
        if state.lag is not None
    ]
    return BrokerState(
        logs=components.log_manager.all_logs(),
        partitions=list(rm.partitions.values()),
        topic_stats=rm.topic_stats,
        min_insync_replicas=components.topic_configs.min_insync_replicas,
        controller=components.controller,
        leader_quota=quotas.leader if quotas is not None else None,
        follower_quota=quotas.follower if quotas is not None else None,
        fetcher_lags=lags,
        log_cleaner=components.log_manager.cleaner,
        group_coordinator=components.group_coordinator,
        offline_replica_count=len(rm.offline_partitions),
        offline_log_dir_count=len(components.log_manager.failure_channel.offline_dirs),
        fetch_sessions=components.fetch_manager.cache if components.fetch_manager else None,
    )


def _response(status: str, content_type: str, body: bytes, head_only: bool) -> bytes:
    head = (
        f"HTTP/1.1 {status}\r\n"
        f"Content-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    ).encode("ascii")
    return head if head_only else head + body


class MetricsHttpServer:
    """Serves a registry's metrics at ``GET /metrics``.

    Args:
        registry: what to expose.
        host: address to bind (``metrics.host``; "" or ``0.0.0.0`` = all IPv4 interfaces).
        port: port to bind (``metrics.port``; 0 binds any free port, for tests).
    """

    def __init__(self, registry: CollectorRegistry, host: str, port: int) -> None:
        self.registry = registry
        self.host = host
        self.port = port
        self.bound_port: int | None = None
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()

    async def start(self) -> int:
        """Bind and start serving; return the bound port.

        Raises:
            MetricsServerError: the address cannot be bound (port in use, bad host).
        """
        try:
            self._server = await asyncio.start_server(
                self._accept,
                host=self.host or None,
                port=self.port,
                reuse_address=True,
                limit=MAX_REQUEST_HEAD_BYTES,
            )
        except OSError as exc:
            raise MetricsServerError(
                f"cannot serve metrics on {self.host}:{self.port}: {exc}"
            ) from exc
        self.bound_port = int(self._server.sockets[0].getsockname()[1])
        log.info("serving metrics on %s:%d%s", self.host, self.bound_port, METRICS_PATH)
        return self.bound_port

    async def stop(self) -> None:
        """Stop accepting and close open connections (idempotent)."""
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        connections = list(self._connections)
        if connections:
            await asyncio.gather(*(cancel_and_wait(task) for task in connections))
        with contextlib.suppress(Exception):
            await server.wait_closed()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._connections.add(task)
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), REQUEST_HEAD_TIMEOUT_S)
            writer.write(self._answer(head))
            await writer.drain()
        except (
            TimeoutError,
            ConnectionError,
            asyncio.IncompleteReadError,
            asyncio.LimitOverrunError,
        ):
            pass
        finally:
            if task is not None:
                self._connections.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    def _answer(self, head: bytes) -> bytes:
        """Return the whole response to a request head (status line, headers, body)."""
        parts = head.split(b"\r\n", 1)[0].decode("latin-1").split()
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            return _response("400 Bad Request", "text/plain", b"bad request\n", False)
        method, target = parts[0], parts[1]
        head_only = method == "HEAD"
        if method not in ("GET", "HEAD"):
            return _response("405 Method Not Allowed", "text/plain", b"GET only\n", False)
        if target.split("?", 1)[0] != METRICS_PATH:
            return _response("404 Not Found", "text/plain", b"try /metrics\n", head_only)
        try:
            body = generate_latest(self.registry)
        except Exception:
            log.exception("collecting metrics failed")
            return _response("500 Internal Server Error", "text/plain", b"error\n", head_only)
        return _response("200 OK", CONTENT_TYPE, body, head_only)
