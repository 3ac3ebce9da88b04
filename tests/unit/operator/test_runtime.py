"""OperatorRuntime: objects reconcile concurrently, the steps of one object one at a time.

kopf runs the handlers in several threads; one object's slow Admin API call (here a
DescribeLogDirs that blocks until released) must not hold up another object's step,
while a second step of the same object waits for the first (per-object lock).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection

from kpo_kafka.admin_types import ReplicaDirInfo, ReplicaKey
from kpo_operator.resources import PARTITION_REASSIGNMENT
from kpo_operator.runtime import OperatorRuntime
from kpo_operator.settings import OperatorSettings
from tests.unit.operator.fake_kafka import FakeKafkaAdmin
from tests.unit.operator.fake_store import FakeObjectStore, MemoryLedgerStore
from tests.unit.operator.reassignment_env import NS, T0, U0, reassignment

WAIT_S = 10.0


class BlockingKafka(FakeKafkaAdmin):
    """DescribeLogDirs of topic ``t`` blocks until :attr:`release` is set."""

    def __init__(self) -> None:
        super().__init__(brokers={0: None, 1: None, 2: None, 3: None})
        self.blocked = threading.Event()
        self.release = threading.Event()

    def describe_log_dirs(
        self, brokers: Collection[int] | None = None, topics: Collection[str] | None = None
    ) -> dict[ReplicaKey, ReplicaDirInfo]:
        if topics is not None and "t" in topics and not self.release.is_set():
            self.blocked.set()
            assert self.release.wait(WAIT_S), "never released"
        return super().describe_log_dirs(brokers, topics)


def _runtime() -> tuple[OperatorRuntime, BlockingKafka, FakeObjectStore]:
    kafka = BlockingKafka()
    kafka.create_topic("t", {0: [0, 1]})
    kafka.create_topic("u", {0: [2, 3]})
    store = FakeObjectStore()
    store.apply(reassignment("a", [("t", 0, [2, 1])]))
    store.apply(reassignment("b", [("u", 0, [0, 3])]))
    settings = OperatorSettings(bootstrap_servers=("localhost:9092",))
    runtime = OperatorRuntime(settings, admin=kafka, store=store, ledger_store=MemoryLedgerStore())
    return runtime, kafka, store


def _step(runtime: OperatorRuntime, name: str, phases: dict[str, str | None]) -> threading.Thread:
    def run() -> None:
        phases[name] = runtime.run(
            "pr", NS, name, lambda: runtime.reassignments.reconcile(NS, name)
        )

    thread = threading.Thread(target=run, name=f"step-{name}", daemon=True)
    thread.start()
    return thread


def test_an_object_blocked_in_an_admin_call_does_not_block_another_object() -> None:
    runtime, kafka, _ = _runtime()
    phases: dict[str, str | None] = {}
    slow = _step(runtime, "a", phases)
    assert kafka.blocked.wait(WAIT_S)
    fast = _step(runtime, "b", phases)
    fast.join(WAIT_S)
    assert not fast.is_alive(), "b's step waited for a's Admin API call"
    assert phases == {"b": "Moving"}
    assert kafka.partitions[U0].target == [0, 3]
    assert slow.is_alive()
    kafka.release.set()
    slow.join(WAIT_S)
    assert phases == {"a": "Moving", "b": "Moving"}
    assert kafka.partitions[T0].target == [2, 1]


def test_steps_of_one_object_do_not_overlap() -> None:
    runtime, kafka, _ = _runtime()
    phases: dict[str, str | None] = {}
    first = _step(runtime, "a", phases)
    assert kafka.blocked.wait(WAIT_S)
    calls = len(kafka.calls)
    second = threading.Thread(
        target=lambda: runtime.run("pr", NS, "a", lambda: runtime.reassignments.reconcile(NS, "a")),
        daemon=True,
    )
    second.start()
    second.join(0.3)
    assert second.is_alive(), "a second step of the same object ran during the first"
    assert len(kafka.calls) == calls
    kafka.release.set()
    first.join(WAIT_S)
    second.join(WAIT_S)
    assert not first.is_alive() and not second.is_alive()
    assert phases == {"a": "Moving"}


def _wait(what: str, check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def test_handed_over_objects_are_stepped_by_the_tracker_until_they_complete() -> None:
    """What kopf's handlers do: hand the objects over; the tracker accepts, submits, finishes."""
    kafka = FakeKafkaAdmin(brokers={0: None, 1: None, 2: None, 3: None})
    kafka.create_topic("t", {0: [0, 1]})
    kafka.create_topic("u", {0: [2, 3]})
    store = FakeObjectStore()
    store.apply(reassignment("a", [("t", 0, [2, 1])], throttle={"replicationRate": 1000}))
    store.apply(reassignment("b", [("u", 0, [0, 3])], throttle={"replicationRate": 1000}))
    settings = OperatorSettings(bootstrap_servers=("localhost:9092",), poll_interval_s=0.1)
    runtime = OperatorRuntime(settings, admin=kafka, store=store, ledger_store=MemoryLedgerStore())
    try:
        for name in ("a", "b"):
            runtime.track(NS, name, None, None, urgent=True)

        def phase(name: str) -> object:
            return store.status_of(PARTITION_REASSIGNMENT, NS, name).get("phase")

        _wait("both submitted", lambda: kafka.partitions[T0].target == [2, 1])
        _wait("both submitted", lambda: kafka.partitions[U0].target == [0, 3])
        kafka.complete()
        _wait("both completed", lambda: phase("a") == phase("b") == "Completed")
        # Accepted together, confirmed by one sync, submitted in one request.
        submissions = [a for c, a in kafka.calls if c == "alter_partition_reassignments"]
        assert len(submissions) in (1, 2)  # one tick, or two when the two acceptances straddle one
        assert {tp for s in submissions for tp in s} == {T0, U0}  # type: ignore[attr-defined]
        store.delete(PARTITION_REASSIGNMENT, NS, "a")
        runtime.forget(PARTITION_REASSIGNMENT.plural, NS, "a")
        assert runtime.tracker.tracked() == [(NS, "b")]
    finally:
        runtime.close()


def test_one_sync_before_the_polls_confirms_every_object_waiting_to_submit() -> None:
    kafka = FakeKafkaAdmin(brokers={0: None, 1: None, 2: None, 3: None})
    kafka.create_topic("t", {0: [0, 1]})
    kafka.create_topic("u", {0: [2, 3]})
    store = FakeObjectStore()
    store.apply(reassignment("a", [("t", 0, [2, 1])], throttle={"replicationRate": 1000}))
    store.apply(reassignment("b", [("u", 0, [0, 3])], throttle={"replicationRate": 1000}))
    settings = OperatorSettings(bootstrap_servers=("localhost:9092",))
    runtime = OperatorRuntime(settings, admin=kafka, store=store, ledger_store=MemoryLedgerStore())
    reconciler = runtime.reassignments
    assert not reconciler.confirm_throttles()  # nobody waits
    for name in ("a", "b"):
        assert reconciler.reconcile(NS, name) == "Moving"
    assert kafka.list_partition_reassignments() == {}
    before = len(kafka.calls)
    assert reconciler.confirm_throttles()
    assert [c for c, _ in kafka.calls[before:]].count("describe_configs") == 1
    before = len(kafka.calls)
    for name in ("a", "b"):
        assert reconciler.reconcile(NS, name) == "Moving"
    # Submitted without a sync of their own.
    assert [c for c, _ in kafka.calls[before:]].count("describe_configs") == 0
    assert {tp: r.target for tp, r in kafka.list_partition_reassignments().items()} == {
        T0: (2, 1),
        U0: (0, 3),
    }
    assert not reconciler.confirm_throttles()
