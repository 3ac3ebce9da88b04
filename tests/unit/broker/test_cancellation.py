"""Stopping tasks that run on after a cancellation (kpo_broker.cancellation)."""

from __future__ import annotations

import asyncio

from kpo_broker.cancellation import cancel_and_wait


def test_a_task_looping_over_wait_for_is_stopped_when_cancelled_as_its_result_arrives() -> None:
    """The replica fetcher's case: a response completes the future as the fetcher is stopped."""

    async def scenario() -> int:
        loop = asyncio.get_running_loop()
        futures: list[asyncio.Future[None]] = []
        rounds = 0

        async def fetch_loop() -> None:
            nonlocal rounds
            while True:
                future: asyncio.Future[None] = loop.create_future()
                futures.append(future)
                await asyncio.wait_for(future, 10)
                rounds += 1

        task = asyncio.create_task(fetch_loop())
        await asyncio.sleep(0)
        futures[-1].set_result(None)  # the response arrives...
        task.cancel()  # ...in the same loop iteration as the stop
        await asyncio.wait_for(cancel_and_wait(task), 2)
        assert task.done()
        return rounds

    assert asyncio.run(scenario()) <= 1


def test_a_task_swallowing_the_first_cancellation_is_cancelled_again() -> None:
    async def scenario() -> bool:
        swallowed = asyncio.Event()

        async def stubborn() -> None:
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                swallowed.set()
            await asyncio.sleep(10)

        task = asyncio.create_task(stubborn())
        await asyncio.sleep(0)
        await asyncio.wait_for(cancel_and_wait(task, retry_s=0.01), 2)
        return swallowed.is_set() and task.cancelled()

    assert asyncio.run(scenario())


def test_the_outcome_of_a_finished_task_is_consumed() -> None:
    async def scenario() -> None:
        async def failing() -> None:
            raise RuntimeError("boom")

        task = asyncio.create_task(failing())
        await asyncio.sleep(0)
        await cancel_and_wait(task)
        assert isinstance(task.exception(), RuntimeError)

    asyncio.run(scenario())
