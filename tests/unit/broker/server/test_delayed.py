import asyncio

from kpo_broker.server.delayed import PartitionWatchers


def test_notify_wakes_only_waiters_on_that_key() -> None:
    async def scenario() -> tuple[bool, bool]:
        watchers = PartitionWatchers()
        a = asyncio.create_task(watchers.wait([("t", 0)], 5))
        b = asyncio.create_task(watchers.wait([("t", 1)], 0.2))
        await asyncio.sleep(0.01)
        watchers.notify(("t", 0))
        return await a, await b

    woke_a, woke_b = asyncio.run(scenario())
    assert woke_a is True
    assert woke_b is False


def test_wait_until_rechecks_condition_on_each_notification() -> None:
    async def scenario() -> tuple[bool, int]:
        watchers = PartitionWatchers()
        state = {"hw": 0}
        checks = 0

        def reached() -> bool:
            nonlocal checks
            checks += 1
            return state["hw"] >= 3

        async def advance() -> None:
            for hw in (1, 2, 3):
                await asyncio.sleep(0.01)
                state["hw"] = hw
                watchers.notify(("t", 0))

        task = asyncio.create_task(advance())
        ok = await watchers.wait_until([("t", 0)], reached, 5)
        await task
        return ok, checks

    ok, checks = asyncio.run(scenario())
    assert ok is True
    assert checks >= 2


def test_wait_until_times_out_with_false_and_cleans_up() -> None:
    async def scenario() -> tuple[bool, int]:
        watchers = PartitionWatchers()
        ok = await watchers.wait_until([("t", 0), ("t", 1)], lambda: False, 0.05)
        return ok, len(watchers._waiters)

    ok, leftover = asyncio.run(scenario())
    assert ok is False
    assert leftover == 0


def test_zero_timeout_does_not_wait() -> None:
    async def scenario() -> bool:
        return await PartitionWatchers().wait([("t", 0)], 0)

    assert asyncio.run(scenario()) is False
