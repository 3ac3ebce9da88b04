"""BalancingPolicy on real parts: a broker killed for good is healed, a rollout is not.

Real kube-apiserver + etcd, the operator as a process, our brokers on a real ZooKeeper in
three racks; records produced with acks=all and read back after the heal.
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

import pytest

from kpo_kafka.admin import KafkaPythonAdmin
from tests.integration.broker.conftest import wait_for
from tests.integration.broker.server.helpers import consume_all, create_topic
from tests.integration.operator.conftest import RECORD, Stack, StackFactory, produce

pytestmark = pytest.mark.integration

RACKS = ["a", "b", "c", "a", "b", "c"]
TOPIC = "orders"
PARTITIONS = 6
POLICY_ENV = {"KPO_POLICY_INTERVAL_S": "2"}


def _policy(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kpo.dev/v1alpha1",
        "kind": "BalancingPolicy",
        "metadata": {"name": name},
        "spec": spec,
    }


def _status(stack: Stack, name: str) -> dict[str, Any]:
    found: dict[str, Any] = stack.get("balancingpolicies", name).get("status") or {}
    return found


def _anomaly(stack: Stack, name: str, anomaly_id: str) -> dict[str, Any]:
    for entry in _status(stack, name).get("anomalies") or []:
        if entry.get("id") == anomaly_id:
            found: dict[str, Any] = entry
            return found
    return {}


def _wait_anomaly(
    stack: Stack, name: str, anomaly_id: str, state: str, timeout_s: float
) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    def reached() -> bool:
        seen.clear()
        seen.update(_anomaly(stack, name, anomaly_id))
        return seen.get("state") == state

    try:
        wait_for(reached, timeout_s, f"{anomaly_id} {state}")
    except AssertionError as exc:
        raise AssertionError(
            f"{exc}; last: {json.dumps(seen)}; status: {json.dumps(_status(stack, name))[:1500]}"
            f"\noperator log:\n{stack.operator.log_tail(40)}"
        ) from exc
    return dict(seen)


def _assignment(stack: Stack) -> dict[int, tuple[list[int], list[int]]]:
    admin = KafkaPythonAdmin(stack.cluster.bootstrap_servers, "kpo-test", 10000)
    try:
        info = admin.describe_topics([TOPIC])[TOPIC]
    finally:
        admin.close()
    return {p: (list(i.replicas), list(i.isr)) for p, i in info.items()}


def _patch_status(stack: Stack, kind: str, name: str, status: dict[str, Any]) -> None:
    """Write an object's status as its controller (or kubelet) would: none runs here."""
    stack.kubectl(
        "patch",
        kind,
        name,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": status}),
    )


def _healing_stack(stack_factory: StackFactory) -> Stack:
    stack = stack_factory(6, racks=RACKS, env=POLICY_ENV)
    # Every partition on three racks; broker 0 holds a replica of half of them.
    assignment = {p: [p % 6, (p + 1) % 6, (p + 2) % 6] for p in range(PARTITIONS)}
    create_topic(stack.cluster, TOPIC, assignment=assignment)
    return stack


def test_broker_killed_for_good_is_healed_with_racks_and_data_intact(
    stack_factory: StackFactory,
) -> None:
    stack = _healing_stack(stack_factory)
    digests = produce(stack.cluster, TOPIC, PARTITIONS, 3 * 1024 * 1024)
    stack.apply(
        _policy(
            "heal",
            detectors={"brokerFailure": {"threshold": "15s"}},
            budget={"replicationRate": 8 * 1024 * 1024},
        )
    )
    wait_for(lambda: bool(_status(stack, "heal").get("lastCheckTime")), 60, "first check")
    stack.cluster.brokers[0].kill()
    killed_at = time.monotonic()

    waiting = _wait_anomaly(stack, "heal", "BrokerFailure/0", "Waiting", 60)
    assert waiting["waitingFor"] == "Threshold"
    fixing = _wait_anomaly(stack, "heal", "BrokerFailure/0", "Fixing", 90)
    assert time.monotonic() - killed_at >= 15
    [fix] = fixing["fixes"]
    pr = stack.get("partitionreassignments", fix)
    assert pr["metadata"]["labels"]["kpo.dev/balancing-policy"] == "heal"
    assert pr["metadata"]["ownerReferences"][0]["kind"] == "BalancingPolicy"
    _wait_anomaly(stack, "heal", "BrokerFailure/0", "Fixed", 180)

    racks = dict(enumerate(RACKS))
    for partition, (replicas, isr) in _assignment(stack).items():
        assert 0 not in replicas, (partition, replicas)
        assert len(replicas) == 3 and sorted(isr) == sorted(replicas), (partition, replicas, isr)
        assert len({racks[b] for b in replicas}) == 3, (partition, replicas)
    got = consume_all(stack.cluster, TOPIC, PARTITIONS, 3 * 1024 * 1024 // RECORD)
    for partition, records in got.items():
        digest = hashlib.sha256(b"".join(records)).hexdigest()
        assert digest == digests[partition], partition
    reasons = [e["reason"] for e in stack.events("heal")]
    for reason in ("AnomalyWaiting", "AnomalyFixing", "AnomalyFixed"):
        assert reason in reasons, reasons


def test_broker_down_during_a_rollout_is_not_healed(stack_factory: StackFactory) -> None:
    stack = _healing_stack(stack_factory)
    produce(stack.cluster, TOPIC, PARTITIONS, 1024 * 1024)
    # The brokers' StatefulSet as the chart makes it, rolling out (no kubelet runs here:
    # its status says what a controller would).
    stack.apply(
        {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": {"name": "kpo-broker"},
            "spec": {
                "replicas": 6,
                "serviceName": "kpo-broker-headless",
                "selector": {"matchLabels": {"app": "kpo-broker"}},
                "template": {
                    "metadata": {"labels": {"app": "kpo-broker"}},
                    "spec": {"containers": [{"name": "broker", "image": "kpo-broker:dev"}]},
                },
            },
        }
    )
    _patch_status(
        stack,
        "statefulset",
        "kpo-broker",
        {
            "replicas": 6,
            "readyReplicas": 5,
            "currentReplicas": 3,
            "updatedReplicas": 3,
            "currentRevision": "kpo-broker-old",
            "updateRevision": "kpo-broker-new",
            "observedGeneration": 1,
        },
    )
    stack.apply(
        _policy(
            "heal",
            detectors={"brokerFailure": {"threshold": "5s", "approval": "Manual"}},
            maintenance={"statefulSet": "kpo-broker"},
            budget={"replicationRate": 4 * 1024 * 1024},
        )
    )
    wait_for(lambda: bool(_status(stack, "heal").get("lastCheckTime")), 60, "first check")
    stack.cluster.brokers[2].kill()
    waiting = _wait_anomaly(stack, "heal", "BrokerFailure/2", "Waiting", 60)
    deadline = time.monotonic() + 20  # well past the threshold
    while time.monotonic() < deadline:
        anomaly = _anomaly(stack, "heal", "BrokerFailure/2")
        assert anomaly.get("state") == "Waiting", anomaly
        time.sleep(1)
    anomaly = _anomaly(stack, "heal", "BrokerFailure/2")
    assert anomaly["waitingFor"] == "Maintenance", anomaly
    assert "kpo-broker-2" in anomaly["message"], anomaly  # no kubelet: its pod is not back
    assert "rolling out" in _status(stack, "heal")["maintenance"]
    assert not anomaly.get("fixes"), waiting
    assert not json.loads(stack.kubectl("get", "partitionreassignments", "-o", "json"))["items"]

    # The broker comes back with the rollout: cleared, nothing moved.
    stack.cluster.brokers[2].start()
    _wait_anomaly(stack, "heal", "BrokerFailure/2", "Fixed", 90)
    assert not json.loads(stack.kubectl("get", "partitionreassignments", "-o", "json"))["items"]

    # Down for good after the rollout finished, its pod crash-looping: a failure, healed;
    # Manual approval leaves a suspended fix with its plan.
    _patch_status(
        stack,
        "statefulset",
        "kpo-broker",
        {
            "currentRevision": "kpo-broker-new",
            "updatedReplicas": 6,
            "currentReplicas": 6,
        },
    )
    # No controller manager runs here to create the namespace's default ServiceAccount.
    stack.kubectl("create", "serviceaccount", "default")
    stack.apply(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "kpo-broker-2",
                "labels": {"app": "kpo-broker", "controller-revision-hash": "kpo-broker-new"},
            },
            "spec": {"containers": [{"name": "broker", "image": "kpo-broker:dev"}]},
        }
    )
    _patch_status(
        stack,
        "pod",
        "kpo-broker-2",
        {
            "phase": "Running",
            "containerStatuses": [
                {
                    "name": "broker",
                    "image": "kpo-broker:dev",
                    "imageID": "",
                    "ready": False,
                    "restartCount": 5,
                    "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                }
            ],
        },
    )
    stack.cluster.brokers[2].kill()
    anomaly = _wait_anomaly(stack, "heal", "BrokerFailure/2", "Waiting", 60)
    wait_for(
        lambda: _anomaly(stack, "heal", "BrokerFailure/2").get("waitingFor") == "Approval",
        90,
        "a suspended fix",
    )
    [fix] = _anomaly(stack, "heal", "BrokerFailure/2")["fixes"]
    status = stack.wait_phase(fix, "Suspended")
    assert status["predictedDuration"], status
    assert stack.get("partitionreassignments", fix)["spec"]["suspend"] is True


def _copied_bytes(stack: Stack, original: dict[int, list[int]]) -> int:
    """Bytes on replicas that were not in ``original`` (what the fixes copied so far)."""
    admin = KafkaPythonAdmin(stack.cluster.bootstrap_servers, "kpo-test", 10000)
    try:
        live = [b for b, broker in stack.cluster.brokers.items() if broker.is_running()]
        dirs = admin.describe_log_dirs(live, [TOPIC])
    finally:
        admin.close()
    total = 0
    for (broker, _, partition), info in dirs.items():
        if broker not in original[partition]:
            total += info.size_bytes
    return total


def test_two_fixes_at_once_stay_within_the_budget(stack_factory: StackFactory) -> None:
    budget = 3 * 1024 * 1024  # bytes/s for both fixes together
    # Two quota samples of 1 s: the rate holds from the start (no 11 s burst allowance).
    stack = stack_factory(6, {"replication.quota.window.num": "2"}, racks=RACKS, env=POLICY_ENV)
    original = {p: [p % 6, (p + 1) % 6, (p + 2) % 6] for p in range(PARTITIONS)}
    create_topic(stack.cluster, TOPIC, assignment=original)
    produce(stack.cluster, TOPIC, PARTITIONS, 48 * 1024 * 1024)
    stack.apply(
        _policy(
            "heal",
            detectors={"brokerFailure": {"threshold": "10s"}},
            budget={"replicationRate": budget},
        )
    )
    wait_for(lambda: bool(_status(stack, "heal").get("lastCheckTime")), 60, "first check")
    stack.cluster.brokers[0].kill()
    stack.cluster.brokers[4].kill()
    first = _wait_anomaly(stack, "heal", "BrokerFailure/0", "Fixing", 120)
    second = _wait_anomaly(stack, "heal", "BrokerFailure/4", "Fixing", 30)
    fixes = [*first["fixes"], *second["fixes"]]
    rates = {f: stack.get("partitionreassignments", f)["spec"]["throttle"] for f in fixes}
    receivers = _status(stack, "heal")["budget"]["receivingBrokers"]
    assert receivers >= 2, _status(stack, "heal")
    assert {r["replicationRate"] for r in rates.values()} == {budget // receivers}, rates

    samples: list[tuple[float, int]] = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        samples.append((time.monotonic(), _copied_bytes(stack, original)))
        states = {_anomaly(stack, "heal", a).get("state") for a in ("BrokerFailure/0",)}
        if states == {"Fixed"} and len(samples) > 10:
            break
        time.sleep(0.5)
    # The rate from the first copied bytes until most of the first wave is copied (both
    # fixes run then). DescribeLogDirs sizes grow by whole fetches (replica.fetch.max.bytes,
    # 1 MiB, per receiving broker), so the measurement is within one fetch per broker.
    copying = [(t, b) for t, b in samples if b > 0]
    assert len(copying) >= 2, samples
    final = copying[-1][1]
    (t0, b0), (t1, b1) = copying[0], next((t, b) for t, b in copying if b >= 0.8 * final)
    assert t1 > t0, samples
    rate = (b1 - b0) / (t1 - t0)
    fetches = receivers * 1024 * 1024 / (t1 - t0)
    assert rate <= budget * 1.05 + fetches, (rate, budget, fetches, samples)
    assert rate >= budget * 0.5, (rate, budget, samples)  # the budget is used, not starved
    _wait_anomaly(stack, "heal", "BrokerFailure/4", "Fixed", 240)
    for partition, (replicas, isr) in _assignment(stack).items():
        assert not {0, 4} & set(replicas) and sorted(isr) == sorted(replicas), partition


def test_a_fix_whose_destination_dies_is_planned_again_on_live_brokers(
    stack_factory: StackFactory,
) -> None:
    stack = stack_factory(6, {"replication.quota.window.num": "2"}, racks=RACKS, env=POLICY_ENV)
    original = {p: [p % 6, (p + 1) % 6, (p + 2) % 6] for p in range(PARTITIONS)}
    create_topic(stack.cluster, TOPIC, assignment=original)
    digests = produce(stack.cluster, TOPIC, PARTITIONS, 24 * 1024 * 1024)
    stack.apply(
        _policy(
            "heal",
            detectors={"brokerFailure": {"threshold": "5s"}},
            budget={"replicationRate": 512 * 1024},  # slow: the move is still running below
        )
    )
    wait_for(lambda: bool(_status(stack, "heal").get("lastCheckTime")), 60, "first check")
    stack.cluster.brokers[0].kill()
    fixing = _wait_anomaly(stack, "heal", "BrokerFailure/0", "Fixing", 90)
    [first] = fixing["fixes"]
    stack.wait_submitted(first, 60)
    targets = stack.get("partitionreassignments", first)["spec"]["partitions"]
    destination = next(
        b for p in targets for b in p["replicas"] if b not in original[p["partition"]]
    )
    stack.cluster.brokers[destination].kill()

    # The first fix is cancelled and a second one moves the replicas to live brokers.
    stack.wait_phase(first, "Cancelled", 120)
    assert "kpo.dev/replan" in stack.get("partitionreassignments", first)["metadata"]["annotations"]
    _wait_anomaly(stack, "heal", "BrokerFailure/0", "Fixed", 300)
    fixes = _anomaly(stack, "heal", "BrokerFailure/0")["fixes"]
    assert len(fixes) >= 2 and fixes[0] == first
    assert stack.status(fixes[-1])["phase"] == "Completed"
    _wait_anomaly(stack, "heal", f"BrokerFailure/{destination}", "Fixed", 300)
    for partition, (replicas, isr) in _assignment(stack).items():
        assert not {0, destination} & set(replicas), (partition, replicas)
        assert len(replicas) == 3 and sorted(isr) == sorted(replicas), (partition, replicas)
    got = consume_all(stack.cluster, TOPIC, PARTITIONS, 24 * 1024 * 1024 // RECORD)
    for partition, records in got.items():
        assert hashlib.sha256(b"".join(records)).hexdigest() == digests[partition]
