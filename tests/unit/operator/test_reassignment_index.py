"""The cluster's index of PartitionReassignments shared by the steps and the throttle sync.

With 200 objects of 2,000 partitions on one cluster, listing every PartitionReassignment
(every object's status) at every throttle sync is too costly: a sync takes them from
the :class:`~kpo_operator.reassignment_index.ReassignmentIndex` the steps keep current (the one
the in-flight owners come from). These tests pin what the sync must still see without a
list: an acceptance just written, a phase that stops throttling, a deletion; what it sees
at the next list: objects written elsewhere or removed behind the operator's back; that
an older copy never replaces a newer one; and the ``resourceVersion`` keyed caches.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from kpo_kafka.topic_partition import TopicPartition
from kpo_operator import throttle_writer
from kpo_operator.cluster_registry import OWNERS_RELIST_S
from kpo_operator.reassignment import ReassignmentReconciler
from kpo_operator.reassignment_index import ReassignmentIndex
from kpo_operator.resources import PARTITION_REASSIGNMENT, TOPIC_REPLICA_QUOTA, ResourceKind
from kpo_operator.throttle_writer import ThrottleWriter
from tests.unit.operator.fake_store import FakeObjectStore, MemoryLedgerStore
from tests.unit.operator.reassignment_env import NS, T0, Clock, Env, no_throttles, reassignment

MOVE = f"PartitionReassignment {NS}/move"
OTHER = f"PartitionReassignment {NS}/other"
THROTTLE = {"replicationRate": 1000}
U0 = TopicPartition("u", 0)


class _Lists:
    """Counts the store's lists by kind, with the bytes of a JSON answer of each."""

    def __init__(self, store: FakeObjectStore) -> None:
        self.calls: list[tuple[str, int]] = []
        inner = store.list

        def counting(kind: ResourceKind) -> list[dict[str, Any]]:
            found = inner(kind)
            self.calls.append((kind.kind, len(json.dumps({"items": found}))))
            return found

        store.list = counting  # type: ignore[method-assign]

    def of(self, kind: ResourceKind, since: int = 0) -> list[int]:
        """Bytes of each list of ``kind`` since call ``since``."""
        return [size for k, size in self.calls[since:] if k == kind.kind]


def _moving_two(env: Env) -> None:
    """``move`` (t-0 -> [2, 1]) and ``other`` (u-0 -> [0, 3]), both throttled and submitted."""
    env.create("move", [("t", 0, [2, 1])], throttle=THROTTLE)
    env.create("other", [("u", 0, [0, 3])], throttle=THROTTLE)
    for _ in range(2):  # accept and throttle, then submit
        assert env.reconcile("move") == "Moving"
        assert env.reconcile("other") == "Moving"
    assert set(env.in_flight()) == {T0, U0}


def test_a_sync_lists_no_reassignment_within_the_interval() -> None:
    env = Env()
    lists = _Lists(env.store)
    _moving_two(env)
    mark = len(lists.calls)
    syncs = 0
    for _ in range(5):  # poll rounds of 2 s: each object steps, syncs run in between
        env.clock.advance(2.0)
        for name in ("move", "other"):
            assert env.reconcile(name) == "Moving"
            env.writer.sync()
            syncs += 1
    assert lists.of(PARTITION_REASSIGNMENT, mark) == []
    assert len(lists.of(TOPIC_REPLICA_QUOTA, mark)) == syncs  # few and small: still listed
    env.clock.advance(OWNERS_RELIST_S)
    result = env.writer.sync()
    assert len(lists.of(PARTITION_REASSIGNMENT, mark)) == 1  # the interval's one list
    assert set(result.contributions) == {MOVE, OTHER}


def test_without_a_shared_index_each_sync_lists_every_object() -> None:
    # What a sync cost before (a writer over its own index of no age): the comparison point.
    env = Env()
    lists = _Lists(env.store)
    _moving_two(env)
    writer = ThrottleWriter(env.kafka, env.store, env.ledger, clock=env.clock)
    mark = len(lists.calls)
    for _ in range(3):
        assert set(writer.sync().contributions) == {MOVE, OTHER}
    listed = lists.of(PARTITION_REASSIGNMENT, mark)
    assert len(listed) == 3 and min(listed) > 0


def test_a_sync_right_after_an_acceptance_includes_it_without_a_list() -> None:
    env = Env()
    lists = _Lists(env.store)
    env.create("move", [("t", 0, [2, 1])], throttle=THROTTLE)
    assert env.writer.sync().contributions == {}  # the index lists: no status yet
    mark = len(lists.calls)
    assert env.reconcile("move") == "Moving"  # writes the acceptance (write-ahead)
    result = env.writer.sync()
    assert lists.of(PARTITION_REASSIGNMENT, mark) == []
    assert set(result.contributions) == {MOVE}
    assert result.contributions[MOVE].broker_rates  # the accepted throttle
    [held] = env.index.objects()
    stored = env.store.objects[(PARTITION_REASSIGNMENT.plural, NS, "move")]
    assert held["status"] == stored["status"]
    # It carries the version the API server answered the patch with.
    assert held["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]


def test_a_phase_that_stops_throttling_stops_contributing_at_the_next_sync() -> None:
    env = Env()
    lists = _Lists(env.store)
    _moving_two(env)
    mark = len(lists.calls)
    env.kafka.complete(T0)
    assert env.reconcile("move") == "Completed"
    result = env.writer.sync()
    assert lists.of(PARTITION_REASSIGNMENT, mark) == []
    assert set(result.contributions) == {OTHER}
    assert env.topic_config("t") == {}  # move's pairs are gone, not written back
    env.kafka.complete(U0)
    assert env.reconcile("other") == "Completed"
    assert env.writer.sync().contributions == {}
    assert no_throttles(env)


def test_a_deleted_object_stops_contributing() -> None:
    env = Env()
    lists = _Lists(env.store)
    _moving_two(env)
    mark = len(lists.calls)
    env.store.delete(PARTITION_REASSIGNMENT, NS, "move")
    while not env.finalize("move"):  # cancels, then drops its throttles and forgets it
        pass
    env.store.remove(PARTITION_REASSIGNMENT, NS, "move")
    result = env.writer.sync()
    assert lists.of(PARTITION_REASSIGNMENT, mark) == []
    assert set(result.contributions) == {OTHER}
    assert [o["metadata"]["name"] for o in env.index.objects()] == ["other"]
    env.clock.advance(OWNERS_RELIST_S)  # a list does not bring it back either
    assert set(env.writer.sync().contributions) == {OTHER}


def test_an_object_removed_behind_the_operators_back_leaves_at_the_next_list() -> None:
    env = Env()
    _moving_two(env)
    env.store.remove(PARTITION_REASSIGNMENT, NS, "move")  # its finalizer removed by hand
    assert set(env.writer.sync().contributions) == {MOVE, OTHER}  # as last seen
    env.clock.advance(OWNERS_RELIST_S)
    assert set(env.writer.sync().contributions) == {OTHER}
    assert env.topic_config("t") == {}


def test_objects_written_by_another_process_are_picked_up_by_the_next_list() -> None:
    env = Env()
    lists = _Lists(env.store)
    env.create("move", [("t", 0, [2, 1])], throttle=THROTTLE)
    assert env.reconcile("move") == "Moving"
    # Another operator process (an old one still running during a rollout) accepts
    # ``other``: its status is written in the API server, not through this index.
    elsewhere = ReassignmentReconciler(
        env.kafka,
        env.store,
        ThrottleWriter(env.kafka, env.store, MemoryLedgerStore(), clock=env.clock),
        clock=env.clock,
        now=env.clock.now,
    )
    env.create("other", [("u", 0, [0, 3])], throttle=THROTTLE)
    assert elsewhere.reconcile(NS, "other") == "Moving"
    mark = len(lists.calls)
    assert set(env.writer.sync().contributions) == {MOVE}  # not listed since
    env.clock.advance(OWNERS_RELIST_S)
    assert set(env.writer.sync().contributions) == {MOVE, OTHER}
    assert len(lists.of(PARTITION_REASSIGNMENT, mark)) == 1
    assert env.index.owners(exclude="x") == {T0: f"{NS}/move", U0: f"{NS}/other"}
    # A restarted operator starts from a list.
    env.restart()
    assert set(env.writer.sync().contributions) == {MOVE, OTHER}


def _status(phase: str, *tps: TopicPartition) -> dict[str, Any]:
    entries = [
        {"topic": topic, "partition": partition, "state": "Moving", "targetReplicas": [2, 1]}
        for topic, partition in tps
    ]
    return {"phase": phase, "throttle": THROTTLE, "partitions": entries}


def _versioned(version: str, status: dict[str, Any]) -> dict[str, Any]:
    obj = reassignment("move", [("t", 0, [2, 1])])
    obj["metadata"] = {**obj["metadata"], "resourceVersion": version}
    obj["status"] = status
    return obj


def test_a_steps_read_older_than_a_write_does_not_replace_it() -> None:
    store, clock = FakeObjectStore(), Clock()
    index = ReassignmentIndex(store, OWNERS_RELIST_S, clock=clock)
    assert index.objects() == []
    read_at = clock()
    clock.advance(1.0)
    index.written(_versioned("6", _status("Completed")))  # written after the step's read
    index.seen(_versioned("5", _status("Moving", T0)), frozenset({T0}), read_at)
    [held] = index.objects()
    assert held["metadata"]["resourceVersion"] == "6"
    assert index.owners(exclude="x") == {}
    clock.advance(1.0)
    index.seen(_versioned("7", _status("Moving", T0)), frozenset({T0}), clock())  # newer
    assert index.owners(exclude="x") == {T0: f"{NS}/move"}


@pytest.mark.parametrize("forgotten", [False, True], ids=["written", "forgotten"])
def test_a_list_begun_before_a_write_does_not_bring_the_old_status_back(forgotten: bool) -> None:
    store, clock = FakeObjectStore(), Clock()
    store.apply(reassignment("move", [("t", 0, [2, 1])]))
    store.patch_status(PARTITION_REASSIGNMENT, NS, "move", _status("Moving", T0))
    index = ReassignmentIndex(store, OWNERS_RELIST_S, clock=clock)
    assert index.owners(exclude="x") == {T0: f"{NS}/move"}
    clock.advance(OWNERS_RELIST_S)
    inner = store.list

    def slow(kind: ResourceKind) -> list[dict[str, Any]]:
        answer = inner(kind)  # the API server's answer is made...
        clock.advance(0.5)  # ...and while it travels, a step writes or forgets the object
        if forgotten:
            index.forget(f"{NS}/move")
        else:
            index.written(_versioned("99", _status("Completed")))
        return answer

    store.list = slow  # type: ignore[method-assign]
    assert index.owners(exclude="x") == {}
    objects = index.objects()
    assert [o["metadata"]["resourceVersion"] for o in objects] == ([] if forgotten else ["99"])


def test_version_keyed_caches_hold_across_write_through_and_lists(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    env = Env()
    _moving_two(env)
    env.writer.sync()
    parsed: list[object] = []
    inner = throttle_writer.accepted_spec
    monkeypatch.setattr(
        throttle_writer, "accepted_spec", lambda status: (parsed.append(1), inner(status))[1]
    )
    for _ in range(3):  # each step writes its totals: a new version, the same accepted work
        env.clock.advance(2.0)
        assert env.reconcile("move") == "Moving"
        env.writer.sync()
    assert parsed == []
    before = {o["metadata"]["name"]: o for o in env.index.objects()}
    env.clock.advance(OWNERS_RELIST_S)
    env.writer.sync()  # lists: the versions are the index's, its copies are kept
    after = {o["metadata"]["name"]: o for o in env.index.objects()}
    assert all(after[name] is before[name] for name in before)
    assert parsed == []
