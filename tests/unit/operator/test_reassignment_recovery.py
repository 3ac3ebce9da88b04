"""ReassignmentReconciler: restarts, crashes, failed writes and an unavailable cluster.

``status.partitions`` is written before anything reaches Kafka (Pending), so an
operator that dies anywhere in a step resumes from the status alone: it submits
what was accepted and not submitted, never resubmits what is in flight, and
never loses a partition (as Kafka's ReassignPartitionsCommand records a reassignment in
``/admin/reassign_partitions`` before any broker acts on it; KIP-455
ListPartitionReassignments).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kpo_kafka.admin_types import KafkaAdminError, KafkaUnavailableError
from kpo_operator.store import ObjectStoreError
from tests.unit.operator.reassignment_env import (
    RATES_1000,
    T0,
    T1,
    Env,
    conditions,
    entry_of,
    no_throttles,
    partition_states,
    start_moving_two,
)


@pytest.fixture
def crash_once(env: Env) -> Iterator[Callable[[str], None]]:
    """Make the next call of one FakeKafkaAdmin method raise, as if the process died there."""
    originals: dict[str, Any] = {}

    def arm(method: str) -> None:
        original = getattr(env.kafka, method)
        originals[method] = original

        def crash(*args: Any, **kwargs: Any) -> Any:
            setattr(env.kafka, method, original)
            raise SystemExit(f"operator killed before {method}")

        setattr(env.kafka, method, crash)

    yield arm
    for method, original in originals.items():
        setattr(env.kafka, method, original)


def test_restarted_operator_resumes_without_resubmitting(moving: Env) -> None:
    moving.restart()
    mark = moving.mark()

    assert moving.reconcile() == "Moving"

    assert moving.writes(mark) == []  # throttles already right, nothing resubmitted
    moving.kafka.complete()
    assert moving.reconcile() == "Completed"
    assert len(moving.submissions()) == 1
    assert no_throttles(moving)


def test_restart_between_the_throttles_and_the_submission_submits_once(env: Env) -> None:
    env.create("move", [("t", 0, [2, 1])], throttle={"replicationRate": 1000})
    assert env.reconcile() == "Moving"  # throttles set; the process stops here
    env.restart()
    mark = env.mark()

    assert env.reconcile() == "Moving"

    assert env.writes(mark) == [("alter_partition_reassignments", {T0: [2, 1]})]
    assert partition_states(env.status()) == {T0: "Moving"}
    assert env.reconcile() == "Moving"
    assert len(env.submissions()) == 1


def test_crash_between_write_ahead_and_submission_submits_on_restart(
    env: Env, crash_once: Callable[[str], None]
) -> None:
    env.create("move", [("t", 0, [2, 1])], throttle={"replicationRate": 1000})
    crash_once("alter_partition_reassignments")
    assert env.reconcile() == "Moving"  # throttles
    with pytest.raises(SystemExit):
        env.reconcile()  # killed at the submission
    assert env.status()["phase"] == "Moving"
    assert partition_states(env.status()) == {T0: "Pending"}
    assert env.in_flight() == {}

    env.restart()
    assert env.reconcile() == "Moving"

    assert env.submissions() == [{T0: [2, 1]}]
    assert env.in_flight() == {T0: (2, 1)}
    assert partition_states(env.status()) == {T0: "Moving"}
    assert env.reconcile() == "Moving"
    assert len(env.submissions()) == 1


def test_crash_of_an_unthrottled_submission_submits_on_restart(
    env: Env, crash_once: Callable[[str], None]
) -> None:
    env.create("move", [("t", 0, [2, 1])])
    crash_once("alter_partition_reassignments")
    with pytest.raises(SystemExit):
        env.reconcile()  # same step: write-ahead, then killed at the submission
    assert partition_states(env.status()) == {T0: "Pending"}

    env.restart()
    assert env.reconcile() == "Moving"
    assert env.submissions() == [{T0: [2, 1]}]
    assert env.in_flight() == {T0: (2, 1)}


def test_crash_before_the_throttles_are_written_sets_them_before_submitting(
    env: Env, crash_once: Callable[[str], None]
) -> None:
    env.create("move", [("t", 0, [2, 1])], throttle={"replicationRate": 1000})
    crash_once("incremental_alter_configs")
    with pytest.raises(SystemExit):
        env.reconcile()
    assert partition_states(env.status()) == {T0: "Pending"} and no_throttles(env)

    env.restart()
    assert env.reconcile() == "Moving"

    assert env.broker_config(2) == RATES_1000
    assert env.submissions() == []  # submitted on the next step, as without the crash
    assert env.reconcile() == "Moving"
    assert env.submissions() == [{T0: [2, 1]}]


def test_status_write_failure_after_submission_does_not_resubmit(env: Env) -> None:
    env.create("move", [("t", 0, [2, 1])], throttle={"replicationRate": 1000})
    assert env.reconcile() == "Moving"  # write-ahead status and throttles
    env.store.fail_next_patch = [ObjectStoreError("apiserver unavailable")]
    with pytest.raises(ObjectStoreError):
        env.reconcile()  # submitted, but the status after the submission is lost
    assert partition_states(env.status()) == {T0: "Pending"}
    assert env.in_flight() == {T0: (2, 1)}

    assert env.reconcile() == "Moving"
    assert env.submissions() == [{T0: [2, 1]}]
    assert partition_states(env.status()) == {T0: "Moving"}


def test_crash_between_write_ahead_and_submission_of_an_edit(
    env: Env, crash_once: Callable[[str], None]
) -> None:
    start_moving_two(env)
    env.edit("move", partitions=[{"topic": "t", "partition": 0, "replicas": [3, 1]}])
    crash_once("alter_partition_reassignments")
    assert env.reconcile() == "Moving"  # throttles of the edit
    with pytest.raises(SystemExit):
        env.reconcile()  # killed at the submission
    status = env.status()
    assert partition_states(status) == {T0: "Pending", T1: "Pending"}
    assert entry_of(status, T1)["targetReplicas"] == [1, 2]  # t-1 is not forgotten
    assert env.in_flight() == {T0: (2, 1), T1: (3, 2)}

    env.restart()
    assert env.reconcile() == "Moving"

    assert env.in_flight() == {T0: (3, 1)}  # the edit reached Kafka, t-1 was reverted
    assert env.kafka.partitions[T1].replicas == [1, 2]
    assert env.submissions()[-1] == {T0: [3, 1], T1: [1, 2]}


def test_partition_cancelled_outside_the_operator_fails(moving: Env) -> None:
    moving.kafka.alter_partition_reassignments({T0: None})
    assert moving.reconcile() == "Failed"
    status = moving.status()
    assert partition_states(status) == {T0: "Failed"}
    assert "t-0" in status["message"] and "left flight" in status["message"]
    assert conditions(status)["Stalled"] == "True"
    assert no_throttles(moving)
    assert moving.store.events_of("move", "Failed")[0].type == "Warning"


def test_kafka_unavailable_on_a_new_object_changes_nothing(env: Env) -> None:
    env.create("move", [("t", 0, [2, 1])], throttle={"replicationRate": 1000})
    env.kafka.fail_next.append(KafkaUnavailableError("DescribeCluster: connection refused"))
    with pytest.raises(KafkaAdminError):
        env.reconcile()
    assert env.store.status_patches == 0 and env.status() == {}
    assert env.writes() == [] and env.store.events == []
    assert env.reconcile() == "Moving"
    assert partition_states(env.status()) == {T0: "Pending"}


def test_kafka_unavailable_while_moving_changes_nothing(moving: Env) -> None:
    before, patches = moving.status(), moving.store.status_patches
    events = len(moving.store.events)
    moving.kafka.complete()
    moving.kafka.fail_next.append(KafkaUnavailableError("Metadata: timed out"))
    with pytest.raises(KafkaAdminError):
        moving.reconcile()
    assert moving.status() == before and moving.store.status_patches == patches
    assert len(moving.store.events) == events
    assert moving.broker_config(0) == RATES_1000
    assert moving.reconcile() == "Completed"
