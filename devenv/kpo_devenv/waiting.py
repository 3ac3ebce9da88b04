"""Wait until a condition holds: one deadline loop for the dev stack's readiness waits."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(
    probe: Callable[[], T | None],
    timeout_s: float,
    timeout_error: Callable[[], BaseException],
    interval_s: float = 0.2,
) -> T:
    """Call ``probe`` until it returns something other than None, and return that.

    ``probe`` is called at once, then every ``interval_s`` seconds until it returns a value
    or the deadline, ``timeout_s`` seconds after this call, has passed. An exception
    ``probe`` raises is not caught: a probe for which an error means "not yet" catches it
    itself (and may remember it for ``timeout_error``).

    Args:
        probe: the condition; None means "not yet".
        timeout_s: how long to wait, seconds.
        timeout_error: called once when the deadline has passed; returns the exception to
            raise (it may read the last state, or clean up, first).
        interval_s: pause between calls, seconds.

    Returns:
        The first value other than None that ``probe`` returned.

    Raises:
        BaseException: the exception ``timeout_error`` returns, when ``probe`` still returns
            None after the deadline; or whatever ``probe`` raises.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        value = probe()
        if value is not None:
            return value
        if time.monotonic() > deadline:
            raise timeout_error()
        time.sleep(interval_s)
