"""ReassignmentReconciler cordoning the brokers a move drains (KIP-1066) over the fake cluster.

Broker 0 holds only t-0 (on [0, 1]): moving t-0 to [2, 1] drains it. On a Kafka 4.3+
cluster (DescribeLogDirs v5) the operator sets ``cordoned.log.dirs=*`` on broker 0 before
submitting, and puts the previous value back when the move completes, is cancelled or
deleted; older clusters are left alone and the move goes on (condition ``NotSupported``).
"""

from __future__ import annotations

from typing import Any

import pytest

from kpo_kafka.admin_errors import api_error
from kpo_kafka.admin_types import ConfigResource
from kpo_operator.cordon_writer import CordonWriter, MemoryCordonStore
from kpo_operator.cordons import CORDONED_LOG_DIRS, CordonLedger
from kpo_operator.resources import PARTITION_REASSIGNMENT
from tests.unit.operator.reassignment_env import NS, T0, Env, partition_states

CORDONS = ConfigResource.broker(0)


def with_cordons(env: Env, store: MemoryCordonStore | None = None) -> MemoryCordonStore:
    """Give ``env``'s reconciler a cordon writer (a restart keeps ``store``)."""
    store = store or MemoryCordonStore()
    env.reconciler.cordons = CordonWriter(env.kafka, env.store, store, clock=env.clock)
    return store


def condition(status: dict[str, Any], type_: str = "Cordoned") -> dict[str, Any]:
    [found] = [c for c in status.get("conditions", []) if c["type"] == type_]
    return dict(found)


def cordon_writes(env: Env, since: int = 0) -> list[Any]:
    return [
        a
        for c, a in env.kafka.calls[since:]
        if c == "incremental_alter_configs"
        and isinstance(a, dict)
        and any(CORDONED_LOG_DIRS in v for v in a.values())
    ]


@pytest.fixture
def kafka43(env: Env) -> Env:
    env.kafka.describe_log_dirs_version = 5
    with_cordons(env)
    return env


def test_a_drained_broker_is_cordoned_before_submission_and_released_at_the_end(
    kafka43: Env,
) -> None:
    env = kafka43
    env.create("move", [("t", 0, [2, 1])])
    assert env.reconcile() == "Moving"
    assert env.broker_config(0) == {CORDONED_LOG_DIRS: "*"}
    calls = env.calls()
    assert calls.index("incremental_alter_configs") < calls.index("alter_partition_reassignments")
    status = env.status()
    assert status["cordon"]["drainedBrokers"] == [0]
    assert status["cordon"]["cordonedBrokers"] == [0]
    assert condition(status)["status"] == "True"
    assert env.store.events_of("move", "Cordoned")

    env.kafka.complete(T0)
    assert env.reconcile() == "Completed"
    assert env.broker_config(0) == {}
    status = env.status()
    assert condition(status)["reason"] == "Released"
    assert status["cordon"]["cordonedBrokers"] == []
    assert condition(status, "Completed")["status"] == "True"
    mark = env.mark()
    assert env.reconcile() == "Completed"
    assert cordon_writes(env, mark) == []


def test_the_previous_per_broker_value_is_put_back(kafka43: Env) -> None:
    env = kafka43
    env.kafka.configs[CORDONS] = {CORDONED_LOG_DIRS: ""}
    env.create("move", [("t", 0, [2, 1])])
    env.reconcile()
    assert env.broker_config(0) == {CORDONED_LOG_DIRS: "*"}
    env.kafka.complete(T0)
    assert env.reconcile() == "Completed"
    assert env.broker_config(0) == {CORDONED_LOG_DIRS: ""}


def test_a_move_draining_nothing_writes_no_cordon(kafka43: Env) -> None:
    env = kafka43
    env.create("move", [("t", 1, [1, 3])])  # broker 2 keeps u-0
    assert env.reconcile() == "Moving"
    assert cordon_writes(env) == [] and "cordon" not in env.status()
    assert "max_api_version" not in env.calls()


def test_a_cordon_set_by_someone_else_is_left_alone(kafka43: Env) -> None:
    env = kafka43
    env.kafka.configs[CORDONS] = {CORDONED_LOG_DIRS: "/data/a"}
    env.create("move", [("t", 0, [2, 1])])
    assert env.reconcile() == "Moving"
    assert env.broker_config(0) == {CORDONED_LOG_DIRS: "/data/a"}
    assert condition(env.status())["reason"] == "CordonedOutside"
    env.kafka.complete(T0)
    assert env.reconcile() == "Completed"
    assert env.broker_config(0) == {CORDONED_LOG_DIRS: "/data/a"}
    assert condition(env.status())["reason"] == "CordonedOutside"
    assert cordon_writes(env) == []


def test_a_value_changed_during_the_move_is_repaired_then_a_later_change_is_kept(
    kafka43: Env,
) -> None:
    env = kafka43
    env.create("move", [("t", 0, [2, 1])])
    env.reconcile()
    env.kafka.configs[CORDONS] = {}  # someone uncordons while the move still drains it
    env.clock.advance(31)
    assert env.reconcile() == "Moving"
    assert env.broker_config(0) == {CORDONED_LOG_DIRS: "*"}
    env.kafka.configs[CORDONS] = {CORDONED_LOG_DIRS: "/data/b"}
    env.kafka.complete(T0)
    assert env.reconcile() == "Completed"
    assert env.broker_config(0) == {CORDONED_LOG_DIRS: "/data/b"}


def test_cancel_releases_the_cordon_before_restoring_the_order(kafka43: Env) -> None:
    env = kafka43
    env.create("move", [("t", 0, [2, 1])])
    env.reconcile()
    env.edit("move", cancel=True)
    mark = env.mark()
    assert env.reconcile() == "Cancelling"
    calls = env.calls(mark)
    assert calls.index("incremental_alter_configs") < calls.index("alter_partition_reassignments")
    assert env.broker_config(0) == {}
    assert env.reconcile() == "Cancelled"
    assert condition(env.status())["reason"] == "Released"


def test_deletion_releases_the_cordon(kafka43: Env) -> None:
    env = kafka43
    env.create("move", [("t", 0, [2, 1])])
    env.reconcile()
    env.store.delete(PARTITION_REASSIGNMENT, NS, "move")
    for _ in range(5):
        if env.finalize():
            break
    else:
        pytest.fail("the finalizer never let the object go")
    assert env.broker_config(0) == {}
    assert env.in_flight() == {}


def test_a_restarted_operator_still_releases_what_it_set(kafka43: Env) -> None:
    env = kafka43
    store = with_cordons(env)
    env.create("move", [("t", 0, [2, 1])])
    env.reconcile()
    assert CordonLedger.from_json(store.text or "").brokers.keys() == {0}
    env.restart()
    with_cordons(env, store)
    env.kafka.complete(T0)
    assert env.reconcile() == "Completed"
    assert env.broker_config(0) == {}
    assert CordonLedger.from_json(store.text or "").brokers == {}


def test_kafka_before_4_3_is_not_cordoned_and_the_move_goes_on(env: Env) -> None:
    with_cordons(env)  # DescribeLogDirs v4: Kafka 3.9, ZooKeeper mode, this project's brokers
    env.create("move", [("t", 0, [2, 1])])
    assert env.reconcile() == "Moving"
    assert cordon_writes(env) == []
    assert "describe_configs" not in [c for c, a in env.kafka.calls if a and "cordoned" in str(a)]
    cond = condition(env.status())
    assert (cond["status"], cond["reason"]) == ("False", "NotSupported")
    assert "Kafka < 4.3" in cond["message"]
    assert env.in_flight() == {T0: (2, 1)}
    env.kafka.complete(T0)
    assert env.reconcile() == "Completed"
    assert partition_states(env.status()) == {T0: "Completed"}
    assert condition(env.status())["reason"] == "NotSupported"


def test_a_cordon_kafka_refuses_is_reported_and_the_move_goes_on(kafka43: Env) -> None:
    env = kafka43
    write = env.kafka.incremental_alter_configs

    def refuse(changes: Any) -> Any:
        if any(CORDONED_LOG_DIRS in v for v in changes.values()):
            env.kafka.calls.append(("incremental_alter_configs", dict(changes)))
            text = "requires metadata.version >= 4.3-IV0"
            return dict.fromkeys(changes, api_error(40, text))
        return write(changes)

    env.kafka.incremental_alter_configs = refuse  # type: ignore[method-assign]
    env.create("move", [("t", 0, [2, 1])])
    assert env.reconcile() == "Moving"
    cond = condition(env.status())
    assert cond["reason"] == "NotSupported" and "metadata.version" in cond["message"]
    assert env.in_flight() == {T0: (2, 1)}
    env.kafka.complete(T0)
    assert env.reconcile() == "Completed"
    assert env.broker_config(0) == {}
