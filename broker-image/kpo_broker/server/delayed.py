"""Waiting for partitions to change: the asyncio counterpart of Kafka's purgatory.

Produce requests with ``acks=all`` wait for the HW to pass their last offset; fetch
requests wait for ``min_bytes`` of new data up to ``max_wait_ms``. Both re-check
their condition whenever a partition they watch is notified (an append, a HW move, a
leader change), and give up at their deadline.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable, Iterable


class PartitionWatchers:
    """Wakes coroutines waiting on keys (topic-partitions) when one of them changes."""

    def __init__(self) -> None:
        self._waiters: dict[Hashable, set[asyncio.Future[None]]] = {}

    def notify(self, key: Hashable) -> None:
        """Wake every coroutine waiting on ``key``."""
        for future in self._waiters.pop(key, ()):
            if not future.done():
                future.set_result(None)

    async def wait(self, keys: Iterable[Hashable], timeout_s: float) -> bool:
        """Wait until one of ``keys`` is notified or ``timeout_s`` seconds pass.

        Returns:
            True if woken by a notification, False on timeout.
        """
        if timeout_s <= 0:
            return False
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        watched = list(dict.fromkeys(keys))
        for key in watched:
            self._waiters.setdefault(key, set()).add(future)
        try:
            await asyncio.wait_for(asyncio.shield(future), timeout_s)
            return True
        except TimeoutError:
            return False
        finally:
            for key in watched:
                waiters = self._waiters.get(key)
                if waiters is not None:
                    waiters.discard(future)
                    if not waiters:
                        del self._waiters[key]

    async def wait_until(
        self,
        keys: Iterable[Hashable],
        condition: Callable[[], bool],
        timeout_s: float,
    ) -> bool:
        """Wait until ``condition()`` holds, re-checking it on each notification of ``keys``.

        Returns:
            Whether the condition held before ``timeout_s`` seconds passed.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        watched = list(keys)
        while not condition():
            remaining = deadline - loop.time()
            if remaining <= 0:
                return condition()
            await self.wait(watched, remaining)
        return True
