"""``status.partitions`` of a moving object: written on a change, byte counters at an interval.

At scale, the totals, rate and ETA are refreshed at every step, but
the per-partition entries (up to 2,000) are written only when something other than their
byte counters changed, or when ``partition_status_interval_s`` passed since
``status.partitionsUpdateTime``; a JSON merge patch without ``partitions`` leaves them as
they are.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import pytest

from kpo_kafka.states import MoveState, Phase
from kpo_kafka.topic_partition import TopicPartition
from kpo_operator.progress import PartitionStatus
from kpo_operator.reassignment import ReassignmentReconciler
from kpo_operator.reassignment_status import (
    StatusUpdate,
    partitions_due,
    render_status,
    status_patch,
)
from kpo_operator.resources import ResourceKind
from tests.unit.operator.reassignment_env import BASE, T0, T1, Env, entry_of, start_moving_two

INTERVAL_S = 10.0


def _entry(state: MoveState = MoveState.MOVING, done: int = 0, **changes: Any) -> PartitionStatus:
    entry = PartitionStatus("t", 0, state, (0, 1), (2, 1), (2,), (0,), (0, 1), 0, done, 9_000)
    return entry._replace(**changes)


def _old(*entries: PartitionStatus) -> dict[TopicPartition, PartitionStatus]:
    return {e.key: e for e in entries}


def test_byte_counters_alone_wait_for_the_interval() -> None:
    old, written = _old(_entry(done=1_000)), BASE
    assert not partitions_due(old, [_entry(done=5_000)], written, BASE + timedelta(seconds=9), 10)
    assert partitions_due(old, [_entry(done=5_000)], written, BASE + timedelta(seconds=10), 10)
    bytes_total = _entry(done=1_000, bytes_total=12_000)  # the leader's log grew
    assert not partitions_due(old, [bytes_total], written, BASE + timedelta(seconds=1), 10)


@pytest.mark.parametrize(
    "changed",
    [
        _entry(MoveState.COMPLETED, done=9_000),
        _entry(isr=(0, 1, 2)),
        _entry(leader=1),
        _entry(adding=(), removing=()),
        _entry(message="left flight without reaching its target replicas"),
        _entry(target_log_dirs=("/data/d1", "any")),
    ],
)
def test_any_other_change_is_written_at_once(changed: PartitionStatus) -> None:
    old = _old(_entry(done=1_000))
    assert partitions_due(old, [changed], BASE, BASE + timedelta(seconds=1), 10)


def test_entries_added_or_dropped_never_written_or_no_interval_are_due() -> None:
    old, soon = _old(_entry()), BASE + timedelta(seconds=1)
    other = _entry(partition=1)
    assert partitions_due(old, [_entry(), other], BASE, soon, 10)
    assert partitions_due(old, [other], BASE, soon, 10)
    assert partitions_due(old, [_entry(done=5)], None, soon, 10)  # written by an older operator
    assert partitions_due(old, [_entry(done=5)], BASE, soon, 0)  # 0: every step


def test_the_patch_leaves_partitions_out_unless_rewritten() -> None:
    old = render_status({}, StatusUpdate(Phase.MOVING, "m", 1, [_entry()]), BASE)
    assert old["partitionsUpdateTime"] == "2024-05-01T12:00:00Z"
    later = BASE + timedelta(seconds=3)
    kept = render_status(old, StatusUpdate(Phase.MOVING, "n", 1), later)
    assert "partitions" not in status_patch(old, kept) and status_patch(old, kept)["message"]
    assert kept["partitionsUpdateTime"] == old["partitionsUpdateTime"]
    same = render_status(old, StatusUpdate(Phase.MOVING, "n", 1, [_entry()]), later)
    assert "partitions" not in status_patch(old, same)  # nothing changed: not stamped either
    assert same["partitionsUpdateTime"] == old["partitionsUpdateTime"]
    moved = render_status(old, StatusUpdate(Phase.MOVING, "n", 1, [_entry(done=7)]), later)
    assert status_patch(old, moved)["partitions"][0]["bytesDone"] == 7
    assert moved["partitionsUpdateTime"] == "2024-05-01T12:00:03Z"


def _paced(env: Env) -> list[Mapping[str, Any]]:
    """Restart ``env``'s operator with the interval; return the status patches it sends."""
    env.reconciler = ReassignmentReconciler(
        env.kafka,
        env.store,
        env.writer,
        rate_window_s=60.0,
        partition_status_interval_s=INTERVAL_S,
        clock=env.clock,
        now=env.clock.now,
    )
    bodies: list[Mapping[str, Any]] = []
    patch = env.store.patch_status

    def recording(kind: ResourceKind, namespace: str, name: str, body: Mapping[str, Any]) -> None:
        bodies.append(body)
        patch(kind, namespace, name, body)

    env.store.patch_status = recording  # type: ignore[method-assign]
    return bodies


def test_totals_every_step_entries_at_the_interval_and_completions_at_once(env: Env) -> None:
    start_moving_two(env)
    env.kafka.set_size(0, "t", 0, 10_000)
    env.kafka.set_size(1, "t", 1, 10_000)
    bodies = _paced(env)
    assert env.reconcile() == "Moving"  # leader sizes changed: entries are due (new totals)
    first = env.status()
    written_at = first["partitionsUpdateTime"]
    for second in range(1, 10):
        env.clock.advance(1)
        env.kafka.set_size(2, "t", 0, 500 * second)
        env.kafka.set_size(3, "t", 1, 300 * second)
        del bodies[:]
        assert env.reconcile() == "Moving"
        status = env.status()
        assert status["totals"]["bytesDone"] == 800 * second  # refreshed every step
        assert len(bodies) == 1 and "partitions" not in bodies[0]  # one small PATCH
        assert status["partitionsUpdateTime"] == written_at
        assert entry_of(status, T0)["bytesDone"] == entry_of(first, T0)["bytesDone"]
    env.clock.advance(1)  # 10 s after the entries were written: byte counters too
    env.kafka.set_size(2, "t", 0, 5_000)
    assert env.reconcile() == "Moving"
    status = env.status()
    assert entry_of(status, T0)["bytesDone"] == 5_000
    assert status["partitionsUpdateTime"] == "2024-05-01T12:00:" + f"{int(env.clock.t - 1000):02d}Z"
    env.clock.advance(1)
    env.kafka.complete(T0)  # a state change is written at the next step, not 10 s later
    assert env.reconcile() == "Moving"
    status = env.status()
    assert entry_of(status, T0)["state"] == "Completed"
    assert entry_of(status, T1)["state"] == "Moving"
    assert status["totals"]["partitionsDone"] == 1
