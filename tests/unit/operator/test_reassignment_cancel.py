"""ReassignmentReconciler: ``cancel: true`` and deletion (the finalizer).

The in-flight partitions this object submitted are cancelled (KIP-455: reverted
to OAR), the object stays ``Cancelling`` until none is in flight, its original
replica order is restored and its throttles removed, then it is ``Cancelled``.
A refused throttle removal keeps it ``Cancelling`` (and the finalizer in place).
"""

from __future__ import annotations

import pytest

from kpo_operator.resources import PARTITION_REASSIGNMENT
from tests.unit.operator.reassignment_env import (
    NS,
    RATES_1000,
    T0,
    T1,
    Env,
    conditions,
    no_throttles,
    partition_states,
    refuse_config_writes,
    start_moving_two,
)


def test_cancel_while_moving_reverts_and_removes_throttles(moving: Env) -> None:
    moving.edit("move", cancel=True)

    assert moving.reconcile() == "Cancelling"
    assert moving.submissions()[-1] == {T0: None}
    assert moving.status()["phase"] == "Cancelling"

    assert moving.reconcile() == "Cancelled"
    assert moving.kafka.partitions[T0].replicas == [0, 1]
    assert moving.in_flight() == {}
    assert no_throttles(moving)
    status = moving.status()
    assert partition_states(status) == {T0: "Cancelled"}
    assert conditions(status)["Ready"] == "True" and conditions(status)["Completed"] == "False"
    assert moving.reconcile() == "Cancelled"
    assert len(moving.submissions()) == 2


def test_cancel_restores_the_original_replica_order(moving: Env) -> None:
    moving.edit("move", cancel=True)
    assert moving.reconcile() == "Cancelling"
    moving.kafka.partitions[T0].replicas = [1, 0]  # reverted in the in-flight order

    assert moving.reconcile() == "Cancelling"
    assert moving.submissions()[-1] == {T0: [0, 1]}
    assert moving.reconcile() == "Cancelled"
    assert moving.kafka.partitions[T0].replicas == [0, 1]
    assert partition_states(moving.status()) == {T0: "Cancelled"}
    assert no_throttles(moving)


def test_cancel_before_submission(env: Env) -> None:
    env.create("move", [("t", 0, [2, 1])], suspend=True)
    assert env.reconcile() == "Suspended"
    env.edit("move", cancel=True)
    assert env.reconcile() == "Cancelled"
    assert env.writes() == []


def test_cancel_between_the_throttles_and_the_submission(env: Env) -> None:
    env.create("move", [("t", 0, [2, 1])], throttle={"replicationRate": 1000})
    assert env.reconcile() == "Moving"  # throttles set, nothing submitted yet
    assert env.broker_config(2) == RATES_1000
    env.edit("move", cancel=True)

    assert env.reconcile() == "Cancelled"

    assert env.submissions() == []
    assert no_throttles(env)
    assert env.kafka.partitions[T0].replicas == [0, 1]
    status = env.status()
    assert partition_states(status) == {T0: "Cancelled"}
    assert "completionTime" in status


def test_cancel_after_some_partitions_completed(env: Env) -> None:
    start_moving_two(env)
    env.kafka.complete(T1)
    env.edit("move", cancel=True)

    assert env.reconcile() == "Cancelling"
    assert env.submissions()[-1] == {T0: None}  # only what is still in flight
    assert env.reconcile() == "Cancelled"

    assert partition_states(env.status()) == {T0: "Cancelled", T1: "Completed"}
    assert env.kafka.partitions[T1].replicas == [3, 2]
    assert "1 had already completed" in env.status()["message"]
    assert no_throttles(env)


def test_cancel_stays_cancelling_while_the_throttle_removal_fails(moving: Env) -> None:
    moving.edit("move", cancel=True)
    assert moving.reconcile() == "Cancelling"
    refuse_config_writes(moving, times=1)

    assert moving.reconcile() == "Cancelling"

    assert moving.in_flight() == {}
    assert "removing throttles failed" in moving.status()["message"]
    assert moving.broker_config(2) == RATES_1000
    assert moving.reconcile() == "Cancelled"
    assert no_throttles(moving)
    assert len(moving.store.events_of("move", "Cancelled")) == 1


@pytest.mark.parametrize("deleted", [False, True], ids=["cancel", "delete"])
def test_cancel_of_an_edit_not_submitted_yet_reverts_the_partition(
    moving: Env, deleted: bool
) -> None:
    moving.edit("move", partitions=[{"topic": "t", "partition": 0, "replicas": [3, 1]}])
    assert moving.reconcile() == "Moving"  # step 1 of the edit: t-0 still moving to [2, 1]
    if deleted:
        moving.store.delete(PARTITION_REASSIGNMENT, NS, "move")
    else:
        moving.edit("move", cancel=True)

    released = [moving.finalize() if deleted else moving.reconcile() for _ in range(3)]

    assert moving.in_flight() == {}
    assert moving.kafka.partitions[T0].replicas == [0, 1]
    assert moving.status()["phase"] == "Cancelled"
    assert released[-1] in (True, "Cancelled")


def test_finalize_while_moving_waits_for_the_cancellation(moving: Env) -> None:
    moving.store.delete(PARTITION_REASSIGNMENT, NS, "move")

    assert moving.finalize() is False
    assert moving.status()["phase"] == "Cancelling"
    assert moving.submissions()[-1] == {T0: None}

    assert moving.finalize() is True
    assert moving.in_flight() == {}
    assert moving.kafka.partitions[T0].replicas == [0, 1]
    assert no_throttles(moving)
    moving.store.remove(PARTITION_REASSIGNMENT, NS, "move")
    assert moving.finalize() is True


def test_finalize_of_a_never_submitted_object_writes_nothing(env: Env) -> None:
    env.create("move", [("t", 0, [2, 1])], suspend=True)
    assert env.reconcile() == "Suspended"
    env.store.delete(PARTITION_REASSIGNMENT, NS, "move")
    assert env.finalize() is True
    assert env.writes() == []


def test_finalize_waits_until_the_throttles_are_removed(moving: Env) -> None:
    moving.kafka.complete()
    moving.store.delete(PARTITION_REASSIGNMENT, NS, "move")
    refuse_config_writes(moving, times=2)

    assert moving.finalize() is False
    assert moving.finalize() is False
    assert moving.status()["phase"] == "Cancelling"
    assert moving.broker_config(2) == RATES_1000

    assert moving.finalize() is True
    assert no_throttles(moving)
    assert moving.status()["phase"] == "Cancelled"
    assert partition_states(moving.status()) == {T0: "Completed"}  # it had reached its target
