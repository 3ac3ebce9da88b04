"""The typed statuses read from and give back the camelCase dicts unchanged."""

from __future__ import annotations

from typing import Any

import pytest

from kpo_kafka.states import MoveState, Phase
from kpo_operator.progress import PartitionProgress, PartitionStatus
from kpo_operator.reassignment import ObjectMemory, ReassignmentReconciler
from kpo_operator.status_models import (
    KafkaClusterStatus,
    QuotaStatus,
    ReassignmentStatus,
)
from tests.unit.operator.reassignment_env import T0, Env, start_moving_two

CONDITION = {
    "type": "Ready",
    "status": "True",
    "reason": "Applied",
    "message": "",
    "observedGeneration": 3,
    "lastTransitionTime": "2024-05-01T12:00:00Z",
}


def _round_trips(status: dict[str, Any]) -> None:
    assert ReassignmentStatus.from_status(status).to_status() == status


def test_every_status_a_lifecycle_writes_round_trips(env: Env) -> None:
    env.create("move", [("t", 0, [2, 1])], suspend=True, throttle={"replicationRate": 1000})
    assert env.reconcile() == "Suspended"
    _round_trips(env.status())
    env.edit("move", suspend=False)
    env.reconcile()
    env.reconcile()
    env.kafka.set_size(0, "t", 0, 10_000)
    env.kafka.set_size(2, "t", 0, 2_000)
    env.clock.advance(5)
    assert env.reconcile() == "Moving"
    moving = env.status()
    assert {"totals", "partitions", "throttle", "startTime", "conditions"} <= set(moving)
    _round_trips(moving)
    typed = ReassignmentStatus.from_status(moving)
    assert typed.phase is Phase.MOVING and typed.replication_rate == 1000
    assert typed.totals is not None and typed.totals.bytes_total == 10_000
    assert typed.condition("Reconciling") is not None
    env.edit("move", cancel=True)
    env.reconcile()
    env.reconcile()
    cancelled = env.status()
    assert cancelled["phase"] == "Cancelled"
    _round_trips(cancelled)


def test_completed_and_failed_statuses_round_trip(env: Env) -> None:
    start_moving_two(env)
    env.kafka.complete(T0)
    env.kafka.complete(("t", 1))
    assert env.reconcile() == "Completed"
    _round_trips(env.status())
    env.create("bad", [("t", 0, [9, 1])])
    assert env.reconcile("bad") == "Failed"
    _round_trips(env.status("bad"))


def test_unknown_keys_are_kept_and_none_reads_as_absent() -> None:
    raw = {"phase": "Moving", "futureField": {"a": [1]}, "eta": None, "message": ""}
    typed = ReassignmentStatus.from_status(raw)
    assert typed.eta is None and typed.message == ""
    assert typed.to_status() == {"phase": "Moving", "futureField": {"a": [1]}, "message": ""}
    assert ReassignmentStatus.from_status(None).to_status() == {}


def test_a_phase_outside_the_crd_is_refused() -> None:
    with pytest.raises(ValueError, match="phase"):
        ReassignmentStatus.from_status({"phase": "Paused"})


def test_quota_status_round_trips() -> None:
    status = {
        "observedGeneration": 3,
        "conditions": [CONDITION, {**CONDITION, "type": "RateConflict", "status": "False"}],
        "brokers": [
            {"brokerId": 0, "leaderReplicationThrottledRate": 10},
            {"brokerId": 1, "followerReplicationThrottledRate": 20},
        ],
        "topics": [{"topic": "t", "leaderReplicationThrottledReplicas": "0:1,1:2"}],
    }
    typed = QuotaStatus.from_status(status)
    assert typed.to_status() == status
    assert typed.brokers is not None and typed.brokers[1].follower_replication_throttled_rate == 20
    assert typed.condition("RateConflict") is not None


def test_kafka_cluster_status_round_trips() -> None:
    status = {
        "observedGeneration": 1,
        "clusterId": "abc",
        "controllerId": 1,
        "brokerCount": 3,
        "fencedBrokers": [],
        "kafkaVersion": "3.9",
        "lastRefreshTime": "2024-05-01T12:00:00Z",
        "conditions": [CONDITION],
    }
    typed = KafkaClusterStatus.from_status(status)
    assert typed.to_status() == status
    assert typed.controller_id == 1 and typed.fenced_brokers == []


def test_one_writer_of_partition_entries() -> None:
    progress = PartitionProgress(
        "t", 0, MoveState.MOVING, (0, 1), (2, 1), (2,), (0,), (0, 1), 0, 5, 9
    )
    entry = PartitionStatus.from_progress(progress, MoveState.MOVING, "m", ["/d", "any"])
    written = entry.to_status()
    assert PartitionStatus.from_status(written) == entry
    assert (
        progress.to_status() == PartitionStatus.from_progress(progress, progress.state).to_status()
    )
    assert written["message"] == "m" and written["targetLogDirs"] == ["/d", "any"]


def test_forget_drops_everything_remembered_of_an_object(env: Env) -> None:
    start_moving_two(env)
    env.clock.advance(5)
    env.reconcile()
    reconciler: ReassignmentReconciler = env.reconciler
    [(uid, memory)] = reconciler._memory.items()
    assert isinstance(memory, ObjectMemory)
    assert memory.spec is not None and memory.accepted is not None and memory.rate is not None
    reconciler.forget(uid)
    assert reconciler._memory == {}
