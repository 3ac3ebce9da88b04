"""ReassignmentReconciler: validation as ReassignPartitionsCommand does, and ``suspend``.

An invalid object ends ``Failed`` naming every bad entry and changes nothing in
Kafka; ``Failed`` is final until the spec changes. A suspended object is planned
(bytes to move, duration at the throttle) without any write to Kafka.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kpo_operator.throttles import FOLLOWER_RATE, LEADER_RATE
from tests.unit.operator.reassignment_env import (
    NS,
    RATES_1000,
    T0,
    Env,
    conditions,
    partition_states,
    reassignment,
)


def _outside_reassignment(env: Env) -> None:
    env.kafka.alter_partition_reassignments({T0: [3, 1]})


def _other_object(env: Env) -> None:
    env.create("other", [("t", 0, [3, 1])])
    assert env.reconcile("other") == "Moving"


@pytest.mark.parametrize(
    ("partitions", "extra", "prepare", "expected"),
    [
        ([("nope", 0, [0, 1])], {}, None, "spec.partitions[0]: topic nope does not exist"),
        ([("t", 9, [0, 1])], {}, None, "spec.partitions[0]: partition t-9 does not exist"),
        ([("t", 0, [0, 7])], {}, None, "spec.partitions[0]: broker 7 is not alive"),
        (
            [("t", 1, [2, 3]), ("t", 0, [2, 1]), ("t", 0, [3, 1])],
            {},
            None,
            "spec.partitions[1]: partition t-0 is listed 2 times",
        ),
        (
            [("t", 1, [2, 3]), ("t", 0, [2, 1])],
            {},
            _other_object,
            "spec.partitions[1]: a reassignment of t-0 by ns/other is in flight",
        ),
        (
            [("t", 0, [2, 1])],
            {},
            _outside_reassignment,
            "spec.partitions[0]: a reassignment of t-0 not made by this operator is in flight",
        ),
        (
            [("t", 0, [2, 1])],
            {"logDirs": ["/data/broker-2/d9", "any"]},
            None,
            "spec.partitions[0].logDirs: broker 2 has no log dir /data/broker-2/d9",
        ),
    ],
    ids=[
        "unknown-topic",
        "unknown-partition",
        "dead-broker",
        "duplicate-partition",
        "in-flight-other-object",
        "in-flight-outside",
        "unknown-log-dir",
    ],
)
def test_invalid_spec_fails_naming_the_entry_and_writes_nothing(
    env: Env,
    partitions: list[tuple[str, int, list[int]]],
    extra: dict[str, Any],
    prepare: Callable[[Env], None] | None,
    expected: str,
) -> None:
    if prepare is not None:
        prepare(env)
    obj = reassignment("move", partitions, throttle={"replicationRate": 1000})
    for entry in obj["spec"]["partitions"]:
        entry.update(extra)
    env.store.apply(obj)
    mark = env.mark()
    configs_before = {r: dict(c) for r, c in env.kafka.configs.items()}

    assert env.reconcile() == "Failed"

    assert env.writes(mark) == []
    assert env.kafka.configs == configs_before
    status = env.status()
    assert status["phase"] == "Failed"
    assert expected in status["message"]
    assert "partitions" not in status and "throttle" not in status
    assert conditions(status)["Stalled"] == "True"
    assert conditions(status)["Ready"] == "False"
    [event] = env.store.events_of("move")
    assert event.type == "Warning" and expected in event.message


def test_failed_is_final_until_the_spec_changes(env: Env) -> None:
    env.create("move", [("t", 0, [2, 7])])
    assert env.reconcile() == "Failed"
    mark, patches = env.mark(), env.store.status_patches
    assert env.reconcile() == "Failed"
    assert env.kafka.calls[mark:] == [] and env.store.status_patches == patches

    env.edit("move", partitions=[{"topic": "t", "partition": 0, "replicas": [2, 1]}])
    assert env.reconcile() == "Moving"
    assert env.submissions() == [{T0: [2, 1]}]
    assert env.status()["observedGeneration"] == 2


def test_schema_error_fails_without_reading_kafka(env: Env) -> None:
    env.store.apply(
        {
            "apiVersion": "kpo.dev/v1alpha1",
            "kind": "PartitionReassignment",
            "metadata": {"name": "move", "namespace": NS},
            "spec": {"partitions": [{"topic": "t", "partition": 0, "replicas": []}]},
        }
    )
    assert env.reconcile() == "Failed"
    assert env.kafka.calls == []
    assert "spec.partitions[0].replicas" in env.status()["message"]


def test_suspend_plans_without_submitting_then_unsuspend_submits(env: Env) -> None:
    env.kafka.set_size(0, "t", 0, 50_000)
    env.create("move", [("t", 0, [2, 1])], throttle={"replicationRate": 1000}, suspend=True)

    assert env.reconcile() == "Suspended"

    assert env.writes() == []
    status = env.status()
    assert status["totals"]["bytesTotal"] == 50_000
    assert status["predictedDuration"] == "50s"
    assert "50000 bytes" in status["message"]
    assert partition_states(status) == {T0: "Pending"}
    assert conditions(status)["Ready"] == "False"
    assert conditions(status)["Reconciling"] == "False"
    patches = env.store.status_patches
    assert env.reconcile() == "Suspended"
    assert env.store.status_patches == patches and env.writes() == []

    env.edit("move", suspend=False)
    assert env.reconcile() == "Moving"  # throttles first
    assert env.broker_config(2) == {LEADER_RATE: "1000", FOLLOWER_RATE: "1000"}
    assert env.submissions() == []
    assert env.status()["observedGeneration"] == 2
    assert env.reconcile() == "Moving"
    assert env.submissions() == [{T0: [2, 1]}]
    assert env.broker_config(2) == RATES_1000
