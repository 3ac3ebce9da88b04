"""NotificationProcessor: serial passes, coalesced triggers, failed passes retried."""

from __future__ import annotations

import asyncio
import itertools
import threading

from kpo_broker.server.change_notifications import NotificationProcessor


async def _until(condition: object, timeout_s: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not condition():  # type: ignore[operator]
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


def test_a_failed_pass_runs_again_without_another_trigger() -> None:
    outcomes = [ConnectionError("lost"), ConnectionError("lost"), None]
    calls: list[int] = []

    async def process() -> None:
        calls.append(len(calls))
        outcome = outcomes[len(calls) - 1]
        if outcome is not None:
            raise outcome

    async def main() -> None:
        processor = NotificationProcessor("test", process, retry_backoff_s=0.01)
        processor.start()
        processor.trigger()
        await _until(lambda: processor.passes == 1)
        await asyncio.sleep(0.05)  # no further pass once one succeeded
        await processor.stop()
        assert (len(calls), processor.failures, processor.passes) == (3, 2, 1)

    asyncio.run(main())


def test_the_retry_backoff_doubles_up_to_its_maximum() -> None:
    times: list[float] = []

    async def process() -> None:
        times.append(asyncio.get_running_loop().time())
        if len(times) <= 4:
            raise ConnectionError("lost")

    async def main() -> None:
        processor = NotificationProcessor(
            "test", process, retry_backoff_s=0.02, retry_backoff_max_s=0.08
        )
        processor.start()
        processor.trigger()
        await _until(lambda: processor.passes == 1)
        await processor.stop()

    asyncio.run(main())
    gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
    assert len(gaps) == 4
    for gap, least in zip(gaps, (0.02, 0.04, 0.08, 0.08), strict=True):
        assert gap >= least * 0.95, gaps


def test_triggers_during_a_pass_coalesce_into_one_more_pass() -> None:
    running = 0
    most = 0

    async def main() -> None:
        nonlocal running, most
        gate = asyncio.Event()
        started = asyncio.Event()
        count = 0

        async def process() -> None:
            nonlocal running, most, count
            running += 1
            most = max(most, running)
            count += 1
            started.set()
            await gate.wait()
            running -= 1

        processor = NotificationProcessor("test", process)
        processor.start()
        processor.trigger()
        await started.wait()
        for _ in range(5):
            processor.trigger()
        gate.set()
        await _until(lambda: processor.passes == 2)
        await asyncio.sleep(0.05)
        await processor.stop()
        assert (count, most) == (2, 1)

    asyncio.run(main())


def test_trigger_threadsafe_from_another_thread_and_after_stop() -> None:
    async def main() -> NotificationProcessor:
        done = asyncio.Event()

        async def process() -> None:
            done.set()

        processor = NotificationProcessor("test", process)
        processor.start()
        thread = threading.Thread(target=processor.trigger_threadsafe)
        thread.start()
        thread.join()
        await asyncio.wait_for(done.wait(), 5)
        await processor.stop()
        await processor.stop()  # idempotent
        return processor

    processor = asyncio.run(main())
    # Its loop is closed now: a late ZooKeeper watch firing is ignored, not an error.
    processor.trigger_threadsafe()
