"""Shared set-up of the ReassignmentReconciler tests (not a conftest: imported explicitly).

:class:`Env` is one operator process (a real ThrottleWriter and a ReassignmentReconciler)
over the in-memory Kafka (:mod:`tests.unit.operator.fake_kafka`) and API server
(:mod:`tests.unit.operator.fake_store`), with an injected clock. The cluster has
brokers 0-3, topic ``t`` (t-0 on [0, 1], t-1 on [1, 2]) and topic ``u`` (u-0 on [2, 3]).

A throttled object takes two steps to reach Kafka: the first writes the accepted
targets (Pending) and the throttle configs, the second submits them with
AlterPartitionReassignments (so that brokers have the throttles before the new
replicas fetch); :func:`start_moving` and :func:`start_moving_two` take both steps.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from kpo_kafka.admin_errors import api_error
from kpo_kafka.admin_types import ConfigResource
from kpo_kafka.topic_partition import TopicPartition
from kpo_operator.cluster_registry import OWNERS_RELIST_S
from kpo_operator.reassignment import ReassignmentReconciler
from kpo_operator.reassignment_index import ReassignmentIndex
from kpo_operator.resources import PARTITION_REASSIGNMENT
from kpo_operator.throttle_writer import ThrottleWriter
from kpo_operator.throttles import (
    FOLLOWER_RATE,
    FOLLOWER_REPLICAS,
    LEADER_RATE,
    LEADER_REPLICAS,
)
from tests.unit.operator.fake_kafka import FakeKafkaAdmin
from tests.unit.operator.fake_store import FakeObjectStore, MemoryLedgerStore

NS = "ns"
ERROR_POLICY_VIOLATION = 44  # Kafka protocol error code
T0: TopicPartition = ("t", 0)
T1: TopicPartition = ("t", 1)
U0: TopicPartition = ("u", 0)
BASE = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)
RATES_1000 = {LEADER_RATE: "1000", FOLLOWER_RATE: "1000"}
KAFKA_WRITES = frozenset(
    {
        "alter_partition_reassignments",
        "incremental_alter_configs",
        "alter_replica_log_dirs",
        "elect_preferred_leaders",
    }
)


class Clock:
    """Monotonic seconds and the matching wall-clock time, advanced by the test."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t

    def now(self) -> datetime:
        return BASE + timedelta(seconds=self.t - 1000.0)

    def advance(self, seconds: float) -> None:
        self.t += seconds


class Env:
    """One operator process (writer + reconciler) over a fake cluster and API server."""

    def __init__(self) -> None:
        self.kafka = FakeKafkaAdmin(brokers={0: None, 1: None, 2: None, 3: None})
        self.kafka.create_topic("t", {0: [0, 1], 1: [1, 2]})
        self.kafka.create_topic("u", {0: [2, 3]})
        self.store = FakeObjectStore()
        self.ledger = MemoryLedgerStore()
        self.clock = Clock()
        self.restart()

    def restart(self) -> None:
        """A new operator process: fresh writer and reconciler, same cluster and store.

        They share one index of the objects, listed every :data:`OWNERS_RELIST_S`, as a
        :class:`~kpo_operator.cluster_registry.ClusterRuntime` builds them.
        """
        self.index = ReassignmentIndex(self.store, OWNERS_RELIST_S, clock=self.clock)
        self.writer = ThrottleWriter(
            self.kafka, self.store, self.ledger, clock=self.clock, index=self.index
        )
        self.reconciler = ReassignmentReconciler(
            self.kafka,
            self.store,
            self.writer,
            rate_window_s=60.0,
            throttle_resync_s=30.0,
            clock=self.clock,
            now=self.clock.now,
            owners=self.index,
        )

    def create(
        self, name: str, partitions: Sequence[tuple[str, int, list[int]]], **spec: Any
    ) -> None:
        self.store.apply(reassignment(name, partitions, **spec))

    def edit(self, name: str, **spec: Any) -> None:
        """Change spec fields (``None`` removes one), bumping the generation."""
        self.store.set_spec(PARTITION_REASSIGNMENT, NS, name, **spec)

    def reconcile(self, name: str = "move") -> str | None:
        return self.reconciler.reconcile(NS, name)

    def finalize(self, name: str = "move") -> bool:
        return self.reconciler.finalize(NS, name)

    def status(self, name: str = "move") -> dict[str, Any]:
        return self.store.status_of(PARTITION_REASSIGNMENT, NS, name)

    def mark(self) -> int:
        """Position in the Admin API call log, for ``writes``/``submissions`` since then."""
        return len(self.kafka.calls)

    def writes(self, since: int = 0) -> list[tuple[str, object]]:
        return [c for c in self.kafka.calls[since:] if c[0] in KAFKA_WRITES]

    def submissions(self, since: int = 0) -> list[object]:
        return [a for c, a in self.kafka.calls[since:] if c == "alter_partition_reassignments"]

    def calls(self, since: int = 0) -> list[str]:
        return [c for c, _ in self.kafka.calls[since:]]

    def broker_config(self, broker: int) -> dict[str, str]:
        return dict(self.kafka.configs.get(ConfigResource.broker(broker), {}))

    def topic_config(self, topic: str) -> dict[str, str]:
        return dict(self.kafka.configs.get(ConfigResource.topic(topic), {}))

    def in_flight(self) -> dict[TopicPartition, tuple[int, ...]]:
        return {tp: r.target for tp, r in self.kafka.list_partition_reassignments().items()}


def reassignment(
    name: str, partitions: Sequence[tuple[str, int, list[int]]], **spec: Any
) -> dict[str, Any]:
    """A PartitionReassignment object as ``kubectl apply`` would send it."""
    entries: list[dict[str, Any]] = [
        {"topic": t, "partition": p, "replicas": list(r)} for t, p, r in partitions
    ]
    return {
        "apiVersion": "kpo.dev/v1alpha1",
        "kind": "PartitionReassignment",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"partitions": entries, **spec},
    }


def conditions(status: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in status.get("conditions", [])}


def partition_states(status: dict[str, Any]) -> dict[TopicPartition, str]:
    return {(e["topic"], e["partition"]): e["state"] for e in status.get("partitions", [])}


def entry_of(status: dict[str, Any], tp: TopicPartition) -> dict[str, Any]:
    """The ``status.partitions`` entry of ``tp``."""
    [found] = [e for e in status.get("partitions", []) if (e["topic"], e["partition"]) == tp]
    return dict(found)


def no_throttles(env: Env) -> bool:
    owned = {LEADER_RATE, FOLLOWER_RATE, LEADER_REPLICAS, FOLLOWER_REPLICAS}
    return not any(owned & set(values) for values in env.kafka.configs.values())


def start_moving(env: Env) -> Env:
    """``move``: t-0 [0,1] -> [2,1] at 1000 bytes/s, throttled (step 1) then submitted (step 2)."""
    env.create("move", [("t", 0, [2, 1])], throttle={"replicationRate": 1000})
    assert env.reconcile() == "Moving"
    assert env.submissions() == []
    assert env.reconcile() == "Moving"
    assert env.in_flight() == {T0: (2, 1)}
    return env


def start_moving_two(env: Env) -> Env:
    """``move``: t-0 -> [2,1] and t-1 [1,2] -> [3,2] at 1000 bytes/s, both in flight."""
    env.create("move", [("t", 0, [2, 1]), ("t", 1, [3, 2])], throttle={"replicationRate": 1000})
    assert env.reconcile() == "Moving"
    assert env.submissions() == []
    assert env.reconcile() == "Moving"
    assert env.in_flight() == {T0: (2, 1), T1: (3, 2)}
    return env


def refuse_config_writes(env: Env, times: int) -> None:
    """The next ``times`` IncrementalAlterConfigs calls fail for every resource."""
    write = env.kafka.incremental_alter_configs
    left = {"n": times}

    def refuse(changes: Any) -> Any:
        if left["n"] <= 0:
            return write(changes)
        left["n"] -= 1
        env.kafka.calls.append(("incremental_alter_configs", dict(changes)))
        failure = api_error(ERROR_POLICY_VIOLATION, "refused by a test")
        return dict.fromkeys(changes, failure)

    env.kafka.incremental_alter_configs = refuse  # type: ignore[method-assign]
