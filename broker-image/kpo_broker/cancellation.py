"""Stopping asyncio tasks reliably, whatever they were awaiting when cancelled."""

from __future__ import annotations

import asyncio
from typing import Any

#: Seconds between two cancellations of a task that ran on after one.
RETRY_S = 0.05


async def cancel_and_wait(task: asyncio.Task[Any], retry_s: float = RETRY_S) -> None:
    """Cancel ``task`` and return once it has ended, cancelling it again if it runs on.

    A plain ``task.cancel(); await task`` can wait forever on Python 3.11: its
    ``asyncio.wait_for`` returns the awaited result instead of raising ``CancelledError``
    when the cancellation arrives in the same loop iteration as that result (CPython
    gh-86296, fixed in 3.12 by the rewrite over ``asyncio.timeout``), so a task looping
    over ``wait_for`` (a replica fetcher waiting for a Fetch response, a controller sender)
    carries on as if never cancelled. Here the task is cancelled again every ``retry_s``
    seconds until it is done. Its outcome (result, cancellation or exception) is consumed,
    not raised.

    Args:
        task: the task to stop.
        retry_s: seconds between cancellations.

    Raises:
        asyncio.CancelledError: the caller itself was cancelled meanwhile (``task`` may then
            still be running).
    """
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=retry_s)
    if not task.cancelled():
        task.exception()  # retrieved, so asyncio does not log it as never retrieved
