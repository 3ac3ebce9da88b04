"""Kafka refusing the operator (missing ACLs, bad credentials): conditions, no writes."""

from __future__ import annotations

import pytest

from kpo_kafka.admin_errors import api_error, authorization_error
from kpo_kafka.admin_types import KafkaAuthenticationError, KafkaAuthorizationError
from kpo_kafka.specs import PartitionReassignmentSpec
from kpo_operator.refusals import missing_cluster_operations, reassignment_needs
from tests.unit.operator.reassignment_env import Env, conditions, reassignment

EVERYTHING = frozenset({"Describe", "Alter", "DescribeConfigs", "AlterConfigs"})


def _spec(**spec: object) -> PartitionReassignmentSpec:
    return PartitionReassignmentSpec.from_object(reassignment("m", [("t", 0, [2, 1])], **spec))


def test_needs_follow_kafka_apis() -> None:
    plain = reassignment_needs(_spec())
    assert "AlterPartitionReassignments" in plain and "IncrementalAlterConfigs" not in plain
    full = reassignment_needs(_spec(throttle={"replicationRate": 10}, preferredLeaderElection=True))
    assert {"IncrementalAlterConfigs", "ElectLeaders"} <= set(full)
    assert missing_cluster_operations(None, full) == []
    assert missing_cluster_operations(EVERYTHING, full) == []
    assert missing_cluster_operations(EVERYTHING - {"Alter"}, full) == [
        "AlterPartitionReassignments needs Alter on Cluster:kafka-cluster",
        "ElectLeaders needs Alter on Cluster:kafka-cluster",
    ]
    assert missing_cluster_operations(EVERYTHING - {"AlterConfigs"}, full) == [
        "IncrementalAlterConfigs needs AlterConfigs on Cluster:kafka-cluster"
    ]


def test_missing_alter_on_cluster_refuses_before_any_write(env: Env) -> None:
    env.kafka.authorized_operations = EVERYTHING - {"Alter"}
    env.create("move", [("t", 0, [2, 1])], throttle={"replicationRate": 1000})

    with pytest.raises(KafkaAuthorizationError):
        env.reconcile()

    assert env.writes() == []
    status = env.status()
    assert status["phase"] == "Pending"
    assert conditions(status) == {
        "Ready": "False",
        "Reconciling": "False",
        "Stalled": "True",
        "Completed": "False",
    }
    stalled = next(c for c in status["conditions"] if c["type"] == "Stalled")
    assert stalled["reason"] == "AuthorizationFailed"
    assert stalled["message"].startswith(
        "AlterPartitionReassignments needs Alter on Cluster:kafka-cluster"
    )
    assert [e.reason for e in env.store.events_of("move")] == ["AuthorizationFailed"]

    # The same refusal again: no second Event; once granted, the move starts.
    with pytest.raises(KafkaAuthorizationError):
        env.reconcile()
    assert len(env.store.events_of("move")) == 1
    env.kafka.authorized_operations = EVERYTHING
    assert env.reconcile() == "Moving"
    assert conditions(env.status())["Stalled"] == "False"


def test_refused_call_mid_move_is_reported(env: Env) -> None:
    env.create("move", [("t", 0, [2, 1])])
    error = api_error(31)
    assert error is not None
    env.kafka.fail_next.append(authorization_error("ListPartitionReassignments", error))

    with pytest.raises(KafkaAuthorizationError):
        env.reconcile()

    stalled = next(c for c in env.status()["conditions"] if c["type"] == "Stalled")
    assert stalled["message"] == (
        "ListPartitionReassignments needs Describe on Cluster:kafka-cluster "
        "(CLUSTER_AUTHORIZATION_FAILED, 31)"
    )


def test_refused_credentials_are_reported(env: Env) -> None:
    env.create("move", [("t", 0, [2, 1])])
    env.kafka.fail_next.append(KafkaAuthenticationError("connect: SASL authentication failed"))
    with pytest.raises(KafkaAuthenticationError):
        env.reconcile()
    stalled = next(c for c in env.status()["conditions"] if c["type"] == "Stalled")
    assert stalled["reason"] == "AuthenticationFailed"
