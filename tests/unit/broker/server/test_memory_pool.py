"""The request memory pool (Kafka's non-strict SimpleMemoryPool, KIP-72)."""

from __future__ import annotations

import asyncio

from kpo_broker.server.memory_pool import MemoryPool


def test_an_unbounded_pool_never_waits() -> None:
    async def scenario() -> None:
        pool = MemoryPool(-1)
        for _ in range(3):
            await asyncio.wait_for(pool.allocate(1 << 30), 1)
        assert not pool.bounded

    asyncio.run(scenario())


def test_allocation_waits_while_the_pool_is_exhausted_and_resumes_on_release() -> None:
    async def scenario() -> None:
        pool = MemoryPool(100)
        await pool.allocate(60)
        await pool.allocate(60)  # non-strict: admitted while anything is free
        assert pool.available == -20
        waiting = asyncio.create_task(pool.allocate(10))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        pool.release(10)  # -10: still exhausted
        await asyncio.sleep(0.05)
        assert not waiting.done()
        pool.release(50)
        await asyncio.wait_for(waiting, 1)
        assert pool.available == 30
        pool.release(60)
        pool.release(10)
        assert pool.available == 100

    asyncio.run(scenario())


def test_a_cancelled_allocation_takes_nothing() -> None:
    async def scenario() -> None:
        pool = MemoryPool(5)
        await pool.allocate(5)
        waiting = asyncio.create_task(pool.allocate(3))
        await asyncio.sleep(0.01)
        waiting.cancel()
        await asyncio.gather(waiting, return_exceptions=True)
        pool.release(5)
        assert pool.available == 5

    asyncio.run(scenario())
