"""ReassignmentTracker: new objects stepped at once, every active object once per tick.

The tracker decides only when an object is stepped: the step here records its calls and
returns the phase the test sets. Ticks are driven by hand (:meth:`ReassignmentTracker.tick`)
with an injected clock; the tracker's own ticker runs at an interval far beyond the tests.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest

from kpo_operator.reassignment_tracker import ReassignmentTracker
from tests.unit.operator.reassignment_env import Clock

WAIT_S = 10.0
NEVER_S = 3600.0  # the tracker's own ticker: not within a test


class Retry(Exception):  # noqa: N818 - as RetryLater
    def __init__(self, delay_s: float) -> None:
        super().__init__(f"retry in {delay_s}")
        self.delay_s = delay_s


class Steps:
    """A step that records ``(name, body)`` and returns ``phases[name]`` (default Moving)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Mapping[str, Any] | None]] = []
        self.phases: dict[str, str | None] = {}
        self.fail: dict[str, BaseException] = {}
        self.block: dict[str, threading.Event] = {}
        self.running: dict[str, int] = {}
        self.overlapped = False
        self.changed = threading.Condition()

    def __call__(
        self, namespace: str, name: str, ref: str | None, body: Mapping[str, Any] | None
    ) -> str | None:
        with self.changed:
            self.running[name] = self.running.get(name, 0) + 1
            self.overlapped = self.overlapped or self.running[name] > 1
        try:
            if (gate := self.block.get(name)) is not None:
                assert gate.wait(WAIT_S)
            if (error := self.fail.pop(name, None)) is not None:
                raise error
            return self.phases.get(name, "Moving")
        finally:
            with self.changed:
                self.running[name] -= 1
                self.calls.append((name, body))
                self.changed.notify_all()

    def count(self, name: str) -> int:
        with self.changed:
            return sum(1 for n, _ in self.calls if n == name)

    def wait_for(self, name: str, times: int) -> None:
        with self.changed:
            assert self.changed.wait_for(
                lambda: sum(1 for n, _ in self.calls if n == name) >= times, WAIT_S
            ), f"{name} stepped {self.count(name)} times, not {times}"


@pytest.fixture
def steps() -> Steps:
    return Steps()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def tracker(steps: Steps, clock: Clock) -> Iterator[ReassignmentTracker]:
    made = ReassignmentTracker(steps, NEVER_S, workers=4, clock=clock)
    yield made
    made.close()


def settle(tracker: ReassignmentTracker) -> None:
    """Wait until nothing is queued or running."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        with tracker._lock:
            if not tracker._queue and not any(t.queued for t in tracker._tracked.values()):
                return
        time.sleep(0.01)
    raise AssertionError("the tracker did not settle")


def wait_running(steps: Steps, name: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while steps.running.get(name, 0) == 0:
        assert time.monotonic() < deadline, f"{name} never ran"
        time.sleep(0.01)


def body(phase: str | None = None, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "x", "namespace": "ns", "resourceVersion": "1"}
    if deleting:
        meta["deletionTimestamp"] = "2024-05-01T12:00:00Z"
    return {"metadata": meta, "status": {"phase": phase} if phase else {}}


def test_a_new_object_is_stepped_at_once(tracker: ReassignmentTracker, steps: Steps) -> None:
    tracker.track("ns", "a", None, body())
    steps.wait_for("a", 1)
    settle(tracker)
    assert steps.count("a") == 1


def test_a_tick_polls_every_active_object_once(
    tracker: ReassignmentTracker, steps: Steps, clock: Clock
) -> None:
    for name in ("a", "b", "done"):
        tracker.track("ns", name, None, body())
    steps.phases["done"] = "Completed"
    settle(tracker)
    clock.advance(NEVER_S)
    assert tracker.tick() == 2  # not the Completed one
    settle(tracker)
    assert (steps.count("a"), steps.count("b"), steps.count("done")) == (2, 2, 1)


def test_an_object_stepped_just_before_a_tick_waits_for_the_next(
    tracker: ReassignmentTracker, steps: Steps, clock: Clock
) -> None:
    tracker.track("ns", "a", None, body())
    settle(tracker)
    assert tracker.tick() == 0  # stepped less than half an interval ago
    clock.advance(NEVER_S / 2)
    assert tracker.tick() == 1
    settle(tracker)
    assert steps.count("a") == 2


def test_the_timer_hands_over_the_live_body_without_a_step(
    tracker: ReassignmentTracker, steps: Steps, clock: Clock
) -> None:
    tracker.track("ns", "a", None, body())
    settle(tracker)
    live = body("Moving")
    tracker.track("ns", "a", None, live)  # the timer's
    settle(tracker)
    assert steps.count("a") == 1
    clock.advance(NEVER_S)
    tracker.tick()
    settle(tracker)
    assert steps.calls[-1] == ("a", live)


def test_a_change_while_stepping_is_stepped_again_never_at_once(
    tracker: ReassignmentTracker, steps: Steps
) -> None:
    gate = steps.block["a"] = threading.Event()
    tracker.track("ns", "a", None, body())
    wait_running(steps, "a")
    tracker.track("ns", "a", None, body(), urgent=True)
    tracker.track("ns", "a", None, body(), urgent=True)
    gate.set()
    steps.wait_for("a", 2)
    settle(tracker)
    assert steps.count("a") == 2 and not steps.overlapped


def test_a_blocked_step_does_not_hold_up_other_objects(
    tracker: ReassignmentTracker, steps: Steps
) -> None:
    gate = steps.block["slow"] = threading.Event()
    tracker.track("ns", "slow", None, body())
    tracker.track("ns", "fast", None, body())
    steps.wait_for("fast", 1)
    assert steps.count("slow") == 0
    gate.set()
    steps.wait_for("slow", 1)


def test_a_retry_delay_is_waited_for(
    tracker: ReassignmentTracker, steps: Steps, clock: Clock
) -> None:
    steps.fail["a"] = Retry(NEVER_S)
    tracker.track("ns", "a", None, body())
    settle(tracker)
    clock.advance(NEVER_S - 1)
    assert tracker.tick() == 0
    clock.advance(2)
    assert tracker.tick() == 1
    settle(tracker)
    assert steps.count("a") == 2


def test_an_object_gone_or_forgotten_is_no_longer_tracked(
    tracker: ReassignmentTracker, steps: Steps
) -> None:
    steps.phases["gone"] = None
    tracker.track("ns", "gone", None, body())
    tracker.track("ns", "deleted", None, body())
    settle(tracker)
    tracker.forget("ns", "deleted")
    assert tracker.tracked() == []


def test_an_object_being_deleted_is_left_to_its_delete_handler(
    tracker: ReassignmentTracker, steps: Steps, clock: Clock
) -> None:
    tracker.track("ns", "a", None, body())
    settle(tracker)
    tracker.track("ns", "a", None, body("Moving", deleting=True))
    clock.advance(NEVER_S)
    assert tracker.tick() == 0


def test_prepare_runs_once_per_tick_before_the_polls(steps: Steps, clock: Clock) -> None:
    order: list[str] = []

    def prepare() -> None:
        order.append(f"prepare with {len(steps.calls)} steps taken")

    tracker = ReassignmentTracker(steps, NEVER_S, workers=2, prepare=prepare, clock=clock)
    try:
        tracker.track("ns", "a", None, body())
        settle(tracker)
        clock.advance(NEVER_S)
        tracker.tick()
        settle(tracker)
    finally:
        tracker.close()
    assert order == ["prepare with 1 steps taken"]
    assert steps.count("a") == 2


def test_the_ticker_polls_at_its_interval(steps: Steps) -> None:
    tracker = ReassignmentTracker(steps, 0.05, workers=2)
    try:
        tracker.track("ns", "a", None, body())
        steps.wait_for("a", 4)
    finally:
        tracker.close()


def test_urgent_steps_go_before_queued_polls(steps: Steps, clock: Clock) -> None:
    gate = steps.block["first"] = threading.Event()
    tracker = ReassignmentTracker(steps, NEVER_S, workers=1, clock=clock)
    try:
        tracker.track("ns", "first", None, body())  # occupies the only worker
        wait_running(steps, "first")
        for name in ("p1", "p2"):
            with tracker._lock:  # tracked, last stepped long ago: polled at the tick
                tracker._tracked[("ns", name)] = _tracked_long_ago(tracker, name)
        clock.advance(NEVER_S)
        assert tracker.tick() == 3  # "first" again once its step is done
        tracker.track("ns", "new", None, body())
        gate.set()
        settle(tracker)
    finally:
        tracker.close()
    assert [n for n, _ in steps.calls] == ["first", "new", "p1", "p2", "first"]


def _tracked_long_ago(tracker: ReassignmentTracker, name: str) -> Any:
    from kpo_operator.reassignment_tracker import _Tracked

    return _Tracked(None, body(), phase="Moving", started_at=tracker.clock() - NEVER_S)


def test_workers_must_be_positive() -> None:
    step: Callable[..., str | None] = lambda *_: None  # noqa: E731
    with pytest.raises(ValueError):
        ReassignmentTracker(step, 1.0, workers=0)


def test_a_change_handlers_body_is_stepped_once_the_live_body_kept(
    tracker: ReassignmentTracker, steps: Steps, clock: Clock
) -> None:
    live = body("Moving")
    tracker.track("ns", "a", None, body())
    settle(tracker)
    tracker.track("ns", "a", None, live)  # the timer's, kept current by kopf
    edited = body("Moving")
    edited["metadata"]["resourceVersion"] = "2"
    tracker.track("ns", "a", None, edited, urgent=True)  # the update handler's
    settle(tracker)
    clock.advance(NEVER_S)
    tracker.tick()
    settle(tracker)
    assert [b for _, b in steps.calls[-2:]] == [edited, live] and edited != live
