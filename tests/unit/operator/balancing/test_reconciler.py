"""BalancingPolicyReconciler over the in-memory Kafka cluster and object store."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kpo_kafka.admin_types import LogDirState
from kpo_kafka.topic_partition import TopicPartition
from kpo_operator.balancing.fixes import (
    ANOMALY_ID_ANNOTATION,
    POLICY_LABEL,
    REPLAN_ANNOTATION,
)
from kpo_operator.balancing.maintenance import BrokerPod, StatefulSetState
from kpo_operator.balancing.reconciler import BalancingPolicyReconciler
from kpo_operator.resources import BALANCING_POLICY, PARTITION_REASSIGNMENT
from tests.unit.operator.fake_kafka import FakeKafkaAdmin
from tests.unit.operator.fake_store import FakeObjectStore

NS = "kafka"
START = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
RACKS = {0: "a", 1: "a", 2: "b", 3: "b", 4: "c", 5: "c"}


@dataclass
class Clock:
    now: datetime = START

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **kwargs: float) -> None:
        self.now += timedelta(**kwargs)


@dataclass
class Workloads:
    state: StatefulSetState | None = None
    calls: list[str] = field(default_factory=list)

    def statefulset(
        self, namespace: str, name: str, broker_id_offset: int = 0
    ) -> StatefulSetState | None:
        self.calls.append(f"{namespace}/{name}")
        return self.state


@dataclass
class World:
    kafka: FakeKafkaAdmin
    store: FakeObjectStore
    clock: Clock
    reconciler: BalancingPolicyReconciler
    workloads: Workloads

    def policy(self, name: str = "heal", **spec: Any) -> None:
        self.store.apply(
            {
                "apiVersion": "kpo.dev/v1alpha1",
                "kind": "BalancingPolicy",
                "metadata": {"name": name, "namespace": NS},
                "spec": spec,
            }
        )

    def check(self, name: str = "heal") -> dict[str, Any]:
        self.reconciler.reconcile(NS, name, self.workloads)
        return self.store.status_of(BALANCING_POLICY, NS, name)

    def anomaly(self, status: dict[str, Any], anomaly_id: str) -> dict[str, Any]:
        return next(a for a in status["anomalies"] if a["id"] == anomaly_id)

    def fix(self, name: str) -> dict[str, Any]:
        found = self.store.get(PARTITION_REASSIGNMENT, NS, name)
        assert found is not None, name
        return found

    def set_phase(self, name: str, phase: str) -> None:
        self.store.patch_status(PARTITION_REASSIGNMENT, NS, name, {"phase": phase})


@pytest.fixture
def world() -> World:
    kafka = FakeKafkaAdmin(brokers=dict(RACKS))
    # 12 partitions, RF 3 over racks a, b, c; broker 0 holds replicas of 6 of them
    assignment = {}
    for p in range(12):
        assignment[p] = [p % 6, (p + 2) % 6, (p + 4) % 6]
    kafka.create_topic("orders", assignment)
    for p, replicas in assignment.items():
        for b in replicas:
            kafka.set_size(b, "orders", p, 1000 * (p + 1))
    store = FakeObjectStore()
    clock = Clock()
    return World(kafka, store, clock, BalancingPolicyReconciler(kafka, store, clock), Workloads())


def _kill(kafka: FakeKafkaAdmin, broker: int) -> None:
    """The broker leaves the cluster; its replicas leave the ISR, leaders move on."""
    del kafka.brokers[broker]
    for part in kafka.partitions.values():
        if broker in part.isr:
            part.isr.remove(broker)
        if part.leader == broker:
            part.leader = part.isr[0] if part.isr else None


def _targets(fix: dict[str, Any]) -> dict[TopicPartition, list[int]]:
    return {
        TopicPartition(p["topic"], p["partition"]): p["replicas"] for p in fix["spec"]["partitions"]
    }


def test_broker_failure_waits_for_threshold_then_restores_rf_with_racks(world: World) -> None:
    world.policy(
        detectors={"brokerFailure": {"threshold": "10m"}},
        budget={"replicationRate": 6_000_000},
    )
    _kill(world.kafka, 0)
    status = world.check()
    anomaly = world.anomaly(status, "BrokerFailure/0")
    assert anomaly["state"] == "Waiting" and anomaly["waitingFor"] == "Threshold"
    assert status["brokers"]["absent"] == [0]
    assert not world.store.list(PARTITION_REASSIGNMENT)

    world.clock.advance(minutes=10)
    status = world.check()
    anomaly = world.anomaly(status, "BrokerFailure/0")
    assert anomaly["state"] == "Fixing", anomaly
    [name] = anomaly["fixes"]
    fix = world.fix(name)
    assert fix["metadata"]["labels"][POLICY_LABEL] == "heal"
    assert fix["metadata"]["annotations"][ANOMALY_ID_ANNOTATION] == "BrokerFailure/0"
    assert fix["metadata"]["ownerReferences"][0]["kind"] == "BalancingPolicy"
    targets = _targets(fix)
    affected = {tp for tp, p in world.kafka.partitions.items() if 0 in p.replicas}
    assert set(targets) == affected
    for tp, replicas in targets.items():
        assert 0 not in replicas and len(set(replicas)) == 3
        assert len({RACKS[b] for b in replicas}) == 3, (tp, replicas)  # racks respected
        old = world.kafka.partitions[tp].replicas
        kept = [b for b in old if b != 0]
        assert [b for b in replicas if b in kept] == kept  # replaced in place
    # the budget: 6 MB/s over the brokers receiving replicas
    receivers = {b for tp, r in targets.items() for b in r} - {
        b for tp in targets for b in world.kafka.partitions[tp].replicas
    }
    assert fix["spec"]["throttle"]["replicationRate"] == 6_000_000 // len(receivers)
    assert [e.reason for e in world.store.events_of("heal")][:2] == [
        "AnomalyWaiting",
        "AnomalyFixing",
    ]

    world.set_phase(name, "Moving")
    assert world.anomaly(world.check(), "BrokerFailure/0")["state"] == "Fixing"
    # the fix completes: the broker holds no replica any more
    for tp, replicas in targets.items():
        part = world.kafka.partitions[tp]
        part.replicas, part.isr = list(replicas), list(replicas)
    world.set_phase(name, "Completed")
    status = world.check()
    assert world.anomaly(status, "BrokerFailure/0")["state"] == "Fixed"
    assert status["openAnomalies"] == 0 and status["runningFixes"] == 0


def test_manual_approval_leaves_a_suspended_fix(world: World) -> None:
    world.policy(detectors={"brokerFailure": {"threshold": "0s", "approval": "Manual"}})
    _kill(world.kafka, 3)
    anomaly = world.anomaly(world.check(), "BrokerFailure/3")
    assert (anomaly["state"], anomaly["waitingFor"]) == ("Waiting", "Approval")
    [name] = anomaly["fixes"]
    assert world.fix(name)["spec"]["suspend"] is True
    world.set_phase(name, "Suspended")
    assert world.anomaly(world.check(), "BrokerFailure/3")["waitingFor"] == "Approval"
    world.store.set_spec(PARTITION_REASSIGNMENT, NS, name, suspend=False)
    world.set_phase(name, "Moving")
    anomaly = world.anomaly(world.check(), "BrokerFailure/3")
    assert anomaly["state"] == "Fixing" and anomaly["fixes"] == [name]


def test_maintenance_annotation_and_rollout_hold_healing(world: World) -> None:
    world.policy(
        detectors={"brokerFailure": {"threshold": "0s"}},
        maintenance={"statefulSet": "kpo-broker"},
    )
    _kill(world.kafka, 2)
    world.workloads.state = StatefulSetState(
        name="kpo-broker",
        namespace=NS,
        replicas=6,
        ready_replicas=5,
        updated_replicas=3,
        current_revision="old",
        update_revision="new",
        generation=2,
        observed_generation=2,
        pods={
            b: BrokerPod(
                broker_id=b,
                name=f"kpo-broker-{b}",
                phase="Running",
                ready=b != 2,
                terminating=b == 2,
                evicted=False,
                created=START - timedelta(hours=1),
                revision="new" if b > 2 else "old",
                crash_looping=False,
                waiting_reason=None,
                node_name="n1",
                node_exists=True,
                node_ready=True,
                node_unschedulable=False,
            )
            for b in range(6)
        },
    )
    status = world.check()
    anomaly = world.anomaly(status, "BrokerFailure/2")
    assert (anomaly["state"], anomaly["waitingFor"]) == ("Waiting", "Maintenance")
    assert status["maintenance"]
    assert not world.store.list(PARTITION_REASSIGNMENT)

    # the pod crash-loops: a failure even mid-rollout
    pods = dict(world.workloads.state.pods)
    pods[2] = BrokerPod(**{**pods[2].__dict__, "terminating": False, "crash_looping": True})
    world.workloads.state = StatefulSetState(**{**world.workloads.state.__dict__, "pods": pods})
    assert world.anomaly(world.check(), "BrokerFailure/2")["state"] == "Fixing"


def test_annotation_holds_every_fix(world: World) -> None:
    world.policy(detectors={"brokerFailure": {"threshold": "0s"}})
    world.store.objects[("balancingpolicies", NS, "heal")]["metadata"]["annotations"] = {
        "kpo.dev/maintenance": "disk replacement on broker 1"
    }
    _kill(world.kafka, 1)
    status = world.check()
    anomaly = world.anomaly(status, "BrokerFailure/1")
    assert anomaly["waitingFor"] == "Maintenance"
    assert "disk replacement" in status["maintenance"]


def test_destination_dying_mid_fix_is_replanned(world: World) -> None:
    world.policy(detectors={"brokerFailure": {"threshold": "0s"}})
    _kill(world.kafka, 0)
    [first] = world.anomaly(world.check(), "BrokerFailure/0")["fixes"]
    world.set_phase(first, "Moving")
    receivers = {b for r in _targets(world.fix(first)).values() for b in r}
    victim = next(b for b in sorted(receivers) if b not in (0,))
    _kill(world.kafka, victim)
    world.check()
    fix = world.fix(first)
    assert fix["spec"]["cancel"] is True
    assert REPLAN_ANNOTATION in fix["metadata"]["annotations"]
    world.set_phase(first, "Cancelled")
    anomaly = world.anomaly(world.check(), "BrokerFailure/0")
    assert anomaly["state"] == "Fixing" and len(anomaly["fixes"]) == 2
    for replicas in _targets(world.fix(anomaly["fixes"][1])).values():
        assert 0 not in replicas and victim not in replicas


def test_disk_usage_waits_for_a_window(world: World) -> None:
    world.policy(
        detectors={"diskUsage": {"thresholdPercent": 80, "threshold": "0s"}},
        windows=[{"schedule": "0 1 * * *", "duration": "2h", "timeZone": "UTC"}],
    )
    for b in RACKS:
        for path in world.kafka.log_dirs_of(b):
            world.kafka.dir_states[(b, path)] = LogDirState(path, True, 1_000_000, 900_000)
    full = world.kafka.log_dirs_of(4)[0]
    world.kafka.dir_states[(4, full)] = LogDirState(full, True, 100_000, 5_000)
    status = world.check()
    [anomaly] = [a for a in status["anomalies"] if a["kind"] == "DiskUsage"]
    assert (anomaly["state"], anomaly["waitingFor"]) == ("Waiting", "Window")
    assert status["window"]["state"] == "Closed"
    world.clock.now = datetime(2026, 12, 2, 1, 30, tzinfo=UTC)
    status = world.check()
    [anomaly] = [a for a in status["anomalies"] if a["kind"] == "DiskUsage"]
    assert anomaly["state"] == "Fixing", anomaly
    assert status["window"]["state"] == "Open"


def test_one_policy_per_cluster(world: World) -> None:
    world.policy("first", detectors={"brokerFailure": {}})
    world.store.objects[("balancingpolicies", NS, "first")]["metadata"]["creationTimestamp"] = (
        "2026-12-01T10:00:00Z"
    )
    world.policy("second", detectors={"brokerFailure": {}})
    world.store.objects[("balancingpolicies", NS, "second")]["metadata"]["creationTimestamp"] = (
        "2026-12-01T11:00:00Z"
    )
    status = world.check("second")
    stalled = next(c for c in status["conditions"] if c["type"] == "Stalled")
    assert stalled["status"] == "True" and stalled["reason"] == "Superseded"
    assert world.check("first")["conditions"][0]["reason"] == "Checked"


def test_invalid_spec_is_stalled(world: World) -> None:
    world.policy(windows=[{"schedule": "not cron at all", "duration": "1h"}])
    status = world.check()
    stalled = next(c for c in status["conditions"] if c["type"] == "Stalled")
    assert stalled["reason"] == "InvalidSpec" and "windows" in stalled["message"]


def test_two_fixes_share_the_budget(world: World) -> None:
    world.policy(
        detectors={"brokerFailure": {"threshold": "0s"}},
        budget={"replicationRate": 12_000_000},
    )
    _kill(world.kafka, 0)
    _kill(world.kafka, 1)
    status = world.check()
    [first] = world.anomaly(status, "BrokerFailure/0")["fixes"]
    [second] = world.anomaly(status, "BrokerFailure/1")["fixes"]
    for name in (first, second):
        world.set_phase(name, "Moving")
    status = world.check()
    rates = {n: world.fix(n)["spec"]["throttle"]["replicationRate"] for n in (first, second)}
    receivers = status["budget"]["receivingBrokers"]
    gaining = {
        b
        for n in (first, second)
        for tp, r in _targets(world.fix(n)).items()
        for b in set(r) - set(world.kafka.partitions[tp].replicas)
    }
    assert receivers == len(gaining) > 0
    assert set(rates.values()) == {12_000_000 // receivers}
    assert status["budget"]["fixRate"] * receivers <= 12_000_000


def test_a_failed_fix_is_tried_again_after_an_hour_under_a_new_name(world: World) -> None:
    world.policy(detectors={"brokerFailure": {"threshold": "0s"}})
    _kill(world.kafka, 0)
    [first] = world.anomaly(world.check(), "BrokerFailure/0")["fixes"]
    world.set_phase(first, "Failed")
    assert world.anomaly(world.check(), "BrokerFailure/0")["state"] == "Failed"
    world.clock.advance(minutes=30)
    assert world.anomaly(world.check(), "BrokerFailure/0")["state"] == "Failed"
    world.clock.advance(minutes=31)
    anomaly = world.anomaly(world.check(), "BrokerFailure/0")
    assert anomaly["state"] == "Fixing"
    [second] = anomaly["fixes"]
    assert second != first and second.endswith("-2")
    assert world.anomaly(world.check(), "BrokerFailure/0")["state"] == "Fixing"


def test_a_suspended_fix_is_withdrawn_when_its_broker_returns(world: World) -> None:
    world.policy(detectors={"brokerFailure": {"threshold": "0s", "approval": "Manual"}})
    rack = world.kafka.brokers[4]
    _kill(world.kafka, 4)
    [name] = world.anomaly(world.check(), "BrokerFailure/4")["fixes"]
    world.kafka.brokers[4] = rack
    anomaly = world.anomaly(world.check(), "BrokerFailure/4")
    assert anomaly["state"] == "Fixed" and "cancelled" in anomaly["message"]
    assert world.fix(name)["spec"]["cancel"] is True


def _new_broker(world: World, broker: int, rack: str) -> None:
    world.kafka.brokers[broker] = rack


def test_goal_violation_waits_for_the_window_then_balances(world: World) -> None:
    world.policy(
        detectors={"goalViolation": {"tolerancePercent": 10, "threshold": "0s"}},
        windows=[{"schedule": "0 1 * * *", "duration": "2h"}],
    )
    _new_broker(world, 6, "a")  # an empty broker: the others hold more than the mean
    status = world.check()
    anomaly = world.anomaly(status, "GoalViolation")
    assert (anomaly["state"], anomaly["waitingFor"]) == ("Waiting", "Window")
    world.clock.now = datetime(2026, 12, 2, 1, 15, tzinfo=UTC)
    anomaly = world.anomaly(world.check(), "GoalViolation")
    assert anomaly["state"] == "Fixing", anomaly
    [name] = anomaly["fixes"]
    targets = _targets(world.fix(name))
    assert any(6 in r for r in targets.values()), targets
    assert world.fix(name)["metadata"]["labels"]["kpo.dev/anomaly-kind"] == "goal-violation"


def test_goal_violation_with_manual_approval_leaves_a_suspended_fix(world: World) -> None:
    world.policy(
        detectors={
            "goalViolation": {"threshold": "0s", "approval": "Manual", "respectWindows": False}
        }
    )
    _new_broker(world, 6, "b")
    anomaly = world.anomaly(world.check(), "GoalViolation")
    assert (anomaly["state"], anomaly["waitingFor"]) == ("Waiting", "Approval")
    assert world.fix(anomaly["fixes"][0])["spec"]["suspend"] is True


def test_goal_violation_is_not_checked_while_a_broker_is_absent(world: World) -> None:
    world.policy(detectors={"goalViolation": {"threshold": "0s", "respectWindows": False}})
    _new_broker(world, 6, "c")
    _kill(world.kafka, 0)
    status = world.check()
    assert not [a for a in status.get("anomalies") or [] if a["kind"] == "GoalViolation"]


def test_a_partition_on_two_absent_brokers_gets_both_replaced_in_one_fix(world: World) -> None:
    world.policy(detectors={"brokerFailure": {"threshold": "0s"}})
    _kill(world.kafka, 0)
    _kill(world.kafka, 2)
    status = world.check()
    fixes = [n for a in status["anomalies"] for n in a.get("fixes") or []]
    assert fixes
    for name in fixes:
        for replicas in _targets(world.fix(name)).values():
            assert not {0, 2} & set(replicas), replicas
            assert len({RACKS[b] for b in replicas}) == 3, replicas


def test_a_partition_waits_while_its_other_absent_broker_is_in_its_threshold(
    world: World,
) -> None:
    world.policy(detectors={"brokerFailure": {"threshold": "5m"}})
    _kill(world.kafka, 0)
    world.check()
    world.clock.advance(minutes=4)
    _kill(world.kafka, 2)  # shares every partition of broker 0
    world.clock.advance(minutes=1)
    status = world.check()
    anomaly = world.anomaly(status, "BrokerFailure/0")
    assert (anomaly["state"], anomaly["waitingFor"]) == ("Waiting", "Threshold"), anomaly
    assert "absent broker 2" in anomaly["message"]
    assert not world.store.list(PARTITION_REASSIGNMENT)
    world.clock.advance(minutes=5)
    status = world.check()
    assert world.anomaly(status, "BrokerFailure/0")["state"] == "Fixing"


def test_the_budget_share_holds_once_the_fix_is_in_flight(world: World) -> None:
    world.policy(
        detectors={"brokerFailure": {"threshold": "0s"}},
        budget={"replicationRate": 6_000_000},
    )
    _kill(world.kafka, 0)
    [name] = world.anomaly(world.check(), "BrokerFailure/0")["fixes"]
    rate = world.fix(name)["spec"]["throttle"]["replicationRate"]
    receivers = world.store.status_of(BALANCING_POLICY, NS, "heal")["budget"]["receivingBrokers"]
    assert rate == 6_000_000 // receivers
    # Kafka has the move: Metadata's replicas now include the adding ones.
    world.kafka.alter_partition_reassignments(
        {tp: list(r) for tp, r in _targets(world.fix(name)).items()}
    )
    world.set_phase(name, "Moving")
    status = world.check()
    assert status["budget"]["receivingBrokers"] == receivers
    assert world.fix(name)["spec"]["throttle"]["replicationRate"] == rate


def test_anomalies_and_fixes_are_counted_in_the_metrics(world: World) -> None:
    from kpo_operator.metrics import OperatorMetrics

    metrics = OperatorMetrics()
    reconciler = BalancingPolicyReconciler(
        world.kafka, world.store, world.clock, metrics=metrics, cluster="default"
    )
    world.policy(detectors={"brokerFailure": {"threshold": "0s"}})
    _kill(world.kafka, 0)
    reconciler.reconcile(NS, "heal", world.workloads)
    labels = {"cluster": "default", "policy": f"{NS}/heal", "kind": "BrokerFailure"}
    value = metrics.registry.get_sample_value
    assert value("kpo_operator_balancing_anomalies", {**labels, "state": "Fixing"}) == 1
    assert value("kpo_operator_balancing_anomalies", {**labels, "state": "Waiting"}) == 0
    fixes = {"cluster": "default", "kind": "broker-failure"}
    assert value("kpo_operator_balancing_fixes_total", fixes) == 1
