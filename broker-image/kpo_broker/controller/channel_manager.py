"""ControllerChannelManager: the controller's connections to every live broker.

As Kafka's ``ControllerChannelManager``: one request queue and one sender per broker
(Kafka's ``RequestSendThread``), so a slow or dead broker never delays the others, and
requests to one broker are sent one at a time, in order. Senders are asyncio tasks on an
event loop that runs in a dedicated thread owned by the manager; each uses a
:class:`~kpo_broker.protocol.client.BrokerClient` on the broker's inter-broker listener
(the controller's own broker included, over TCP as in Kafka).

A request that fails on a connection error or a timeout (``controller.socket.timeout.ms``)
is retried, after a short backoff, until it gets a response or the broker is removed (a
broker that missed commands gets its state again when it restarts). The response goes to
the request's callback on the manager's thread; callbacks must only enqueue controller
events.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Protocol

from kpo_broker.cancellation import cancel_and_wait
from kpo_broker.controller.request_batch import ResponseCallback
from kpo_broker.protocol.client import BrokerClient
from kpo_broker.protocol.errors import ProtocolError
from kpo_broker.zk.model import BrokerRegistration

_log = logging.getLogger(__name__)

#: Pause before resending a failed request, in ms (Kafka's send thread backs off 100 ms).
DEFAULT_RETRY_BACKOFF_MS = 100
#: How long :meth:`ControllerChannelManager.shutdown` waits for the senders, in seconds.
_SHUTDOWN_TIMEOUT_S = 10.0


class BrokerConnection(Protocol):
    """What a sender needs from a broker client (:class:`BrokerClient`)."""

    async def send(self, request_message: Any, api_version: int) -> Any:
        """Send a request and return its response.

        Raises:
            ProtocolError: connection failure or timeout.
        """
        ...

    async def close(self) -> None:
        """Close the connection."""
        ...


#: Builds a broker connection: (host, port, client id, request timeout ms) -> connection.
ConnectionFactory = Callable[[str, int, str, int], BrokerConnection]


def _default_connection(host: str, port: int, client_id: str, timeout_ms: int) -> BrokerConnection:
    return BrokerClient(host, port, client_id, timeout_ms)


@dataclass(frozen=True)
class _QueueItem:
    request: Any
    api_version: int
    callback: ResponseCallback | None


class _BrokerSender:
    """The queue and sender task of one broker; lives on the manager's event loop."""

    def __init__(
        self, broker: BrokerRegistration, connection: BrokerConnection, retry_backoff_s: float
    ) -> None:
        self.broker = broker
        self._connection = connection
        self._retry_backoff_s = retry_backoff_s
        self.queue: asyncio.Queue[_QueueItem] = asyncio.Queue()
        self.task: asyncio.Task[None] | None = None
        self._stopping = False

    async def run(self) -> None:
        # The stop flag backs up cancellation: Python 3.11's ``asyncio.wait_for`` (used by
        # the client) can swallow a cancellation that coincides with a response.
        while not self._stopping:
            item = await self.queue.get()
            if self._stopping:
                return
            try:
                response = await self._send_until_answered(item)
            except Exception:  # e.g. a request that cannot be encoded: never retried
                _log.exception(
                    "dropping %s to broker %s", type(item.request).__name__, self.broker.id
                )
                continue
            if item.callback is not None and not self._stopping:
                try:
                    item.callback(response)
                except Exception:
                    _log.exception("response callback failed for broker %s", self.broker.id)

    async def _send_until_answered(self, item: _QueueItem) -> Any:
        for attempt in itertools.count(1):
            try:
                return await self._connection.send(item.request, item.api_version)
            except ProtocolError as exc:
                if self._stopping:
                    raise asyncio.CancelledError from exc
                _log.log(
                    logging.WARNING if attempt == 1 else logging.DEBUG,
                    "controller request %s to broker %s failed (attempt %d: %s); retrying",
                    type(item.request).__name__,
                    self.broker.id,
                    attempt,
                    exc,
                )
                await self._connection.close()
                await asyncio.sleep(self._retry_backoff_s)

    async def stop(self) -> None:
        self._stopping = True
        if self.task is not None:
            await cancel_and_wait(self.task)
        await self._connection.close()


class ControllerChannelManager:
    """Per-broker request queues and senders on a dedicated event-loop thread.

    Args:
        controller_id: this broker's id (in the client id of every connection).
        listener_name: the inter-broker listener (``inter.broker.listener.name``).
        request_timeout_ms: ``controller.socket.timeout.ms``.
        connection_factory: builds broker connections (default :class:`BrokerClient`).
        retry_backoff_ms: pause before resending a failed request.

    :meth:`add_broker`, :meth:`remove_broker` and :meth:`send_request` are called from
    the controller's event thread and never block on the network.
    """

    def __init__(
        self,
        controller_id: int,
        listener_name: str,
        request_timeout_ms: int,
        *,
        connection_factory: ConnectionFactory = _default_connection,
        retry_backoff_ms: int = DEFAULT_RETRY_BACKOFF_MS,
    ) -> None:
        self._controller_id = controller_id
        self._listener_name = listener_name
        self._request_timeout_ms = request_timeout_ms
        self._connection_factory = connection_factory
        self._retry_backoff_s = retry_backoff_ms / 1000
        self._senders: dict[int, _BrokerSender] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def broker_ids(self) -> set[int]:
        """Ids of the brokers with a sender."""
        return set(self._senders)

    def startup(self, brokers: Iterable[BrokerRegistration]) -> None:
        """Start the event-loop thread and a sender for each of ``brokers``."""
        loop = asyncio.new_event_loop()
        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(loop)
            loop.call_soon(ready.set)
            loop.run_forever()
            loop.close()

        self._loop = loop
        self._thread = threading.Thread(
            target=run, name=f"controller-{self._controller_id}-channel", daemon=True
        )
        self._thread.start()
        ready.wait()
        for broker in brokers:
            self.add_broker(broker)

    def shutdown(self) -> None:
        """Stop every sender (dropping queued requests), close connections, stop the thread."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        senders = list(self._senders.values())
        self._senders.clear()

        async def stop_all() -> None:
            await asyncio.gather(*(s.stop() for s in senders), return_exceptions=True)
            # Senders of removed brokers may still be stopping: finish every task.
            others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in others:
                task.cancel()
            await asyncio.gather(*others, return_exceptions=True)

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(stop_all(), loop).result(_SHUTDOWN_TIMEOUT_S)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(_SHUTDOWN_TIMEOUT_S)
        self._loop = self._thread = None

    def add_broker(self, broker: BrokerRegistration) -> None:
        """Start a sender for ``broker`` (no-op if it has one).

        A broker without the inter-broker listener gets no sender (logged); requests
        to it are dropped.
        """
        loop = self._loop
        if loop is None or broker.id in self._senders:
            return
        endpoint = broker.endpoint(self._listener_name)
        if endpoint is None:
            _log.error("broker %s has no %s listener", broker.id, self._listener_name)
            return
        client_id = f"controller-{self._controller_id}-to-broker-{broker.id}"
        connection = self._connection_factory(
            endpoint.host or "127.0.0.1", endpoint.port, client_id, self._request_timeout_ms
        )
        sender = _BrokerSender(broker, connection, self._retry_backoff_s)
        self._senders[broker.id] = sender

        def start() -> None:
            sender.task = loop.create_task(sender.run())

        loop.call_soon_threadsafe(start)

    def remove_broker(self, broker_id: int) -> None:
        """Stop the sender of ``broker_id``, dropping its queued requests (broker died)."""
        sender = self._senders.pop(broker_id, None)
        loop = self._loop
        if sender is None or loop is None:
            return
        future: Future[None] = asyncio.run_coroutine_threadsafe(sender.stop(), loop)
        future.add_done_callback(_log_failure)

    def send_request(
        self,
        broker_id: int,
        request: Any,
        api_version: int,
        callback: ResponseCallback | None = None,
    ) -> None:
        """Queue ``request`` for ``broker_id``; dropped (logged) when it has no sender."""
        sender = self._senders.get(broker_id)
        loop = self._loop
        if sender is None or loop is None:
            _log.warning(
                "not sending %s to broker %s: it is not live", type(request).__name__, broker_id
            )
            return
        loop.call_soon_threadsafe(
            sender.queue.put_nowait, _QueueItem(request, api_version, callback)
        )

    def queue_size(self, broker_id: int) -> int:
        """Return the number of requests waiting for ``broker_id`` (0 when unknown)."""
        sender = self._senders.get(broker_id)
        return 0 if sender is None else sender.queue.qsize()


def _log_failure(future: Future[None]) -> None:
    error = future.exception()
    if error is not None:
        _log.warning("stopping a broker sender failed: %r", error)
