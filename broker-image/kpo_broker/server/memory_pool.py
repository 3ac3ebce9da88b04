"""Bytes of requests read but not yet answered, bounded by ``queued.max.request.bytes``.

Kafka's SocketServer allocates each request's buffer from a ``SimpleMemoryPool``
(KIP-72) and stops reading from sockets while the pool is exhausted; the buffer goes
back to the pool once the request has been handled. Here a connection awaits
:meth:`MemoryPool.allocate` after reading a frame's size prefix and before reading
its body, so an exhausted pool leaves the bodies in the socket buffers (TCP
back-pressure) until other requests are answered.
"""

from __future__ import annotations

import asyncio

__all__ = ["MemoryPool"]


class MemoryPool:
    """Kafka's non-strict ``SimpleMemoryPool``: a request is admitted while any memory is free.

    Non-strict, as Kafka's broker pool is: an allocation succeeds whenever the
    available bytes are positive, even if it is larger than them (the pool then goes
    negative until releases bring it back), so a request larger than the pool is
    never starved. In use, bytes are therefore bounded by ``capacity`` plus one request
    (at most ``socket.request.max.bytes``).

    Args:
        capacity: ``queued.max.request.bytes``; 0 or negative means unbounded
            (Kafka's ``MemoryPool.NONE``).
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._available = capacity
        self._waiters: list[asyncio.Future[None]] = []

    @property
    def bounded(self) -> bool:
        """True when allocations can wait (``capacity`` is positive)."""
        return self.capacity > 0

    @property
    def available(self) -> int:
        """Bytes still free, in bytes; negative after an oversized allocation."""
        return self._available

    async def allocate(self, size: int) -> None:
        """Take ``size`` bytes, waiting until some memory is free.

        Args:
            size: the request's frame size, in bytes (non-negative).

        Raises:
            asyncio.CancelledError: the waiting connection was cancelled; nothing was taken.
        """
        if not self.bounded:
            return
        while self._available <= 0:
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                self._waiters.remove(waiter)
        self._available -= size

    def release(self, size: int) -> None:
        """Give back ``size`` bytes taken by :meth:`allocate` and wake waiting connections."""
        if not self.bounded:
            return
        self._available += size
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)
