"""Processing of ZooKeeper change notifications, one pass at a time, retried until it succeeds.

Kafka's ``ZkNodeChangeNotificationListener``: each firing of the watch on a notification
path (``/config/changes``, ``/kafka-acl-changes``, ...) queues one event, and a single
thread processes the notifications not seen yet. A pass that fails (a lost ZooKeeper
connection, a request timed out on a loaded server) must not leave the broker stale until
the next notification happens to arrive, which may be never: a SCRAM user created once
would stay unknown to that broker and its clients would get SASL_AUTHENTICATION_FAILED
for good. So a failed pass is retried until it succeeds, after a backoff that doubles
from :data:`NOTIFICATION_RETRY_BACKOFF_S` up to :data:`NOTIFICATION_RETRY_BACKOFF_MAX_S`
(a lasting failure, such as a znode ACL that refuses the broker, is retried without
flooding the log), and watch firings that arrive during a pass coalesce into one more
pass.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from kpo_broker.cancellation import cancel_and_wait

__all__ = [
    "NOTIFICATION_RETRY_BACKOFF_MAX_S",
    "NOTIFICATION_RETRY_BACKOFF_S",
    "NotificationProcessor",
]

log = logging.getLogger(__name__)

#: Seconds before the first retry of a pass that failed (doubled after each failure).
NOTIFICATION_RETRY_BACKOFF_S = 1.0
#: The most seconds between two attempts of a failing pass.
NOTIFICATION_RETRY_BACKOFF_MAX_S = 30.0


class NotificationProcessor:
    """Run ``process`` after each trigger; serially, coalescing triggers, retrying failures.

    Args:
        name: what the notifications are about, for logs (e.g. ``"config"``).
        process: one pass over the notifications not processed yet. It must be
            idempotent (a failed pass runs again from where the last successful one ended)
            and raise on failure.
        retry_backoff_s: seconds to wait before running a failed pass again; doubled
            after each further failure, up to ``retry_backoff_max_s``.
        retry_backoff_max_s: the longest wait between two attempts.

    Use :meth:`start` on the event loop, :meth:`trigger` from the loop or
    :meth:`trigger_threadsafe` from ZooKeeper's threads, and :meth:`stop` at shutdown.
    """

    def __init__(
        self,
        name: str,
        process: Callable[[], Awaitable[None]],
        retry_backoff_s: float = NOTIFICATION_RETRY_BACKOFF_S,
        retry_backoff_max_s: float = NOTIFICATION_RETRY_BACKOFF_MAX_S,
    ) -> None:
        self.name = name
        self._process = process
        self._retry_backoff_s = retry_backoff_s
        self._retry_backoff_max_s = max(retry_backoff_max_s, retry_backoff_s)
        self._pending = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        #: Passes that completed without raising.
        self.passes = 0
        #: Passes that raised (each was retried).
        self.failures = 0

    def start(self) -> None:
        """Start the processing task on the running loop (call once, from the loop)."""
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.create_task(self._run(), name=f"{self.name}-notifications")

    def trigger(self) -> None:
        """Ask for a pass (from the event loop's thread)."""
        self._pending.set()

    def trigger_threadsafe(self) -> None:
        """Ask for a pass from any thread (a ZooKeeper watch callback)."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: broker gone
            loop.call_soon_threadsafe(self._pending.set)

    async def stop(self) -> None:
        """Cancel the processing task and wait for it to end (idempotent)."""
        task, self._task = self._task, None
        if task is not None:
            await cancel_and_wait(task)

    async def _run(self) -> None:
        backoff_s = self._retry_backoff_s
        while True:
            await self._pending.wait()
            self._pending.clear()
            try:
                await self._process()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.failures += 1
                # The first failure in a row with its traceback, the later ones in a line.
                log.warning(
                    "%s change notifications: pass failed (%s); retrying in %.1f s",
                    self.name,
                    exc,
                    backoff_s,
                    exc_info=backoff_s == self._retry_backoff_s,
                )
                self._pending.set()
                await asyncio.sleep(backoff_s)
                backoff_s = min(backoff_s * 2, self._retry_backoff_max_s)
            else:
                self.passes += 1
                backoff_s = self._retry_backoff_s
