"""kpo_devenv.waiting.wait_until: the value, the deadline, the timeout error, probe errors."""

import itertools
import time

import pytest

from kpo_devenv.waiting import wait_until


class _NotYetError(RuntimeError):
    pass


def test_returns_the_first_value_that_is_not_none() -> None:
    answers = iter([None, None, 0, 7])
    calls: list[int] = []

    def probe() -> int | None:
        calls.append(1)
        return next(answers)

    assert wait_until(probe, 5.0, lambda: _NotYetError("late"), interval_s=0.01) == 0
    assert len(calls) == 3


def test_raises_the_timeout_error_after_the_deadline() -> None:
    calls: list[float] = []

    def probe() -> None:
        calls.append(time.monotonic())

    began = time.monotonic()
    with pytest.raises(_NotYetError, match="still none"):
        wait_until(probe, 0.3, lambda: _NotYetError(f"still none after {len(calls)}"), 0.05)
    assert time.monotonic() - began >= 0.3
    assert len(calls) >= 2
    assert all(b - a >= 0.05 for a, b in itertools.pairwise(calls))


def test_probes_once_even_with_no_time() -> None:
    assert wait_until(lambda: "ready", 0.0, lambda: _NotYetError("late")) == "ready"


def test_an_error_of_the_probe_propagates_at_once() -> None:
    def probe() -> None:
        raise ValueError("broken")

    began = time.monotonic()
    with pytest.raises(ValueError, match="broken"):
        wait_until(probe, 5.0, lambda: _NotYetError("late"))
    assert time.monotonic() - began < 1.0
