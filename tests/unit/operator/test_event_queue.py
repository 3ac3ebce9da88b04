"""QueuedEvents: a step records an Event without waiting; they are posted in order."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from kpo_operator.event_queue import QueuedEvents
from kpo_operator.resources import PARTITION_REASSIGNMENT
from kpo_operator.store import NORMAL, WARNING
from tests.unit.operator.fake_store import FakeObjectStore
from tests.unit.operator.reassignment_env import NS, reassignment

WAIT_S = 10.0


class SlowEvents(FakeObjectStore):
    """Posting an Event waits for :attr:`gate`; the first one fails."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.failed = False

    def event(self, obj: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        assert self.gate.wait(WAIT_S)
        if not self.failed:
            self.failed = True
            raise RuntimeError("API server gone")
        super().event(obj, type_, reason, message)


def test_events_are_posted_later_in_order_and_the_rest_goes_straight_through() -> None:
    inner = SlowEvents()
    store = QueuedEvents(inner)
    obj = store.create(PARTITION_REASSIGNMENT, NS, reassignment("a", [("t", 0, [1])]))
    assert obj is not None
    for reason in ("Lost", "Accepted", "Submitted"):
        store.event(obj, NORMAL, reason, f"{reason} it")  # returns at once
    store.event(obj, WARNING, "Failed", "it failed")
    assert inner.events_of("a") == []
    assert store.get(PARTITION_REASSIGNMENT, NS, "a") is not None
    assert store.patch_status(PARTITION_REASSIGNMENT, NS, "a", {"phase": "Moving"}) is not None
    assert [o["metadata"]["name"] for o in store.list(PARTITION_REASSIGNMENT)] == ["a"]
    inner.gate.set()
    assert store.flush(WAIT_S)
    # The first post failed (logged, best effort); the others went out in order.
    assert [(e.type, e.reason) for e in inner.events_of("a")] == [
        (NORMAL, "Accepted"),
        (NORMAL, "Submitted"),
        (WARNING, "Failed"),
    ]


def test_a_full_queue_drops_new_events() -> None:
    inner = SlowEvents()
    inner.failed = True
    store = QueuedEvents(inner, max_queued=2)
    obj = reassignment("a", [("t", 0, [1])])
    obj["metadata"]["namespace"] = NS
    for i in range(6):
        store.event(obj, NORMAL, f"E{i}", "")
    inner.gate.set()
    assert store.flush(WAIT_S)
    reasons = [e.reason for e in inner.events_of("a")]
    assert 2 <= len(reasons) <= 3 and reasons == sorted(reasons) and reasons[0] == "E0"


def test_flush_without_events_returns_at_once() -> None:
    assert QueuedEvents(FakeObjectStore()).flush(0.0)
