"""One operator, two Kafka clusters, on real parts.

Two separate fleets of real broker processes, each under its own ZooKeeper chroot, one
operator process on the real kube-apiserver:

- fleet A is the operator's default connection (its ``KPO_BOOTSTRAP_SERVERS``): objects
  without ``spec.clusterRef`` act on it, as before KafkaClusters existed;
- fleet B is reached through a KafkaCluster ``b`` over a SASL_PLAINTEXT (SCRAM-SHA-512)
  listener, its user name and password in a Secret.

Both fleets have topics of the same names, a TopicReplicaQuota and a throttled
PartitionReassignment each, with different rates: each fleet's configs must carry
exactly its own throttles (no cross-talk), then none once the objects are gone. A
wrong password first, fixed by rotating the Secret, shows the reconnect; a quota naming
a KafkaCluster that does not exist is refused with a condition.
"""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any

import pytest

from kpo_devenv import ZooKeeperServer
from kpo_devenv.controlplane import ControlPlane
from kpo_devenv.kafka_cluster import KafkaCluster
from kpo_devenv.kafka_security import add_scram_user
from kpo_kafka.admin import KafkaPythonAdmin
from tests.integration.broker.conftest import ClusterFactory, wait_for
from tests.integration.operator.conftest import (
    LIST_KEYS,
    THROTTLE_KEYS,
    Stack,
    StackFactory,
    produce,
    reassignment,
)

pytestmark = pytest.mark.integration

KB = 1024
USER = "kpo-operator"
PASSWORD = "b-Secret-6c1f0e"
WRONG_PASSWORD = "wrong-Pw-93a7"
SCRAM_JAAS = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    'username="{u}" password="{p}";'
)
RATES = {"a": 700000, "b": 900000}
"""The quota rate on each fleet (bytes/s), below the moves' throttles: the quota wins."""
MOVE_RATE = {"a": 1024 * KB, "b": 2048 * KB}


def _fleet_b(factory: ClusterFactory, zookeeper: ZooKeeperServer) -> KafkaCluster:
    """Three brokers: PLAINTEXT between brokers, SASL_PLAINTEXT (SCRAM-SHA-512) for clients."""
    chroot = f"fleet-b-{uuid.uuid4().hex[:8]}"
    add_scram_user(f"{zookeeper.connect_string}/{chroot}", USER, PASSWORD)
    return factory(
        3,
        {
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": SCRAM_JAAS.format(
                u=USER, p=PASSWORD
            ),
        },
        listeners={"PLAINTEXT": "PLAINTEXT", "SASL_PLAINTEXT": "SASL_PLAINTEXT"},
        chroot=chroot,
    )


def _admin(cluster: KafkaCluster) -> KafkaPythonAdmin:
    return KafkaPythonAdmin(cluster.bootstrap_servers, "kpo-test", request_timeout_ms=10000)


def _create_topics(cluster: KafkaCluster) -> None:
    admin = _admin(cluster)
    try:
        admin.create_topic("moved", assignment={0: [0]}, wait_for_metadata=True)
        admin.create_topic("quota", assignment={0: [1, 2]}, wait_for_metadata=True)
    finally:
        admin.close()


def _throttles(cluster: KafkaCluster) -> dict[str, dict[str, str]]:
    """Every throttle config set on the fleet's brokers and topics."""
    admin = _admin(cluster)
    try:
        found = admin.describe_configs(
            brokers=[0, 1, 2], topics=["moved", "quota"], keys=THROTTLE_KEYS + LIST_KEYS
        )
    finally:
        admin.close()
    return {f"{r.kind} {r.name}": dict(v) for r, v in found.items() if v}


def _quota_only(rate: int) -> dict[str, dict[str, str]]:
    rates = {key: str(rate) for key in THROTTLE_KEYS}
    return {
        "broker 0": rates,
        "broker 1": rates,
        "broker 2": rates,
        "topic quota": {key: "*" for key in LIST_KEYS},
    }


def _quota(name: str, fleet: str, cluster_ref: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "topics": {"names": ["quota"]},
        "leaderReplicationThrottledRate": RATES[fleet],
        "followerReplicationThrottledRate": RATES[fleet],
        "leaderReplicationThrottledReplicas": "*",
        "followerReplicationThrottledReplicas": "*",
    }
    if cluster_ref is not None:
        spec["clusterRef"] = cluster_ref
    return {
        "apiVersion": "kpo.dev/v1alpha1",
        "kind": "TopicReplicaQuota",
        "metadata": {"name": name},
        "spec": spec,
    }


def _secret(stack: Stack, password: str) -> None:
    encoded = {k: base64.b64encode(v.encode()).decode() for k, v in (("username", USER),)}
    encoded["password"] = base64.b64encode(password.encode()).decode()
    stack.kubectl(
        "apply",
        "-f",
        "-",
        input_text=json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "b-user"},
                "data": encoded,
            }
        ),
    )


def _conditions(stack: Stack, plural: str, name: str) -> dict[str, dict[str, Any]]:
    status = stack.get(plural, name).get("status") or {}
    return {c["type"]: c for c in status.get("conditions", [])}


def _wait_condition(
    stack: Stack, plural: str, name: str, kind: str, status: str, timeout_s: float = 60
) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    def reached() -> bool:
        seen.clear()
        seen.update(_conditions(stack, plural, name).get(kind, {}))
        return seen.get("status") == status

    try:
        wait_for(reached, timeout_s, f"{plural}/{name} {kind}={status}")
    except AssertionError as exc:
        raise AssertionError(
            f"{exc}; last: {seen}\noperator log:\n{stack.operator.log_tail(30)}"
        ) from exc
    return seen


def test_one_operator_drives_two_clusters_without_cross_talk(
    stack_factory: StackFactory,
    kafka_cluster_factory: ClusterFactory,
    zookeeper: ZooKeeperServer,
    control_plane: ControlPlane,
) -> None:
    stack = stack_factory(3, env={"KPO_CLUSTER_INTERVAL_S": "2"})
    fleet_a = stack.cluster
    fleet_b = _fleet_b(kafka_cluster_factory, zookeeper)
    for fleet in (fleet_a, fleet_b):
        _create_topics(fleet)
        produce(fleet, "moved", 1, 512 * KB)

    # The KafkaCluster first with a wrong password: not Ready, nothing leaks.
    _secret(stack, WRONG_PASSWORD)
    stack.apply(
        {
            "apiVersion": "kpo.dev/v1alpha1",
            "kind": "KafkaCluster",
            "metadata": {"name": "b"},
            "spec": {
                "bootstrapServers": fleet_b.bootstrap_servers_for("SASL_PLAINTEXT").split(","),
                "config": {
                    "security.protocol": "SASL_PLAINTEXT",
                    "sasl.mechanism": "SCRAM-SHA-512",
                },
                "secretRefs": {
                    "sasl.username": {"name": "b-user", "key": "username"},
                    "sasl.password": {"name": "b-user", "key": "password"},
                },
                "requestTimeoutMs": 5000,
            },
        }
    )
    refused = _wait_condition(stack, "kafkaclusters", "b", "Ready", "False")
    # kafka-python reports refused SASL credentials as a bootstrap timeout.
    assert refused["reason"] == "Unreachable", refused
    assert "refused the SASL credentials" in refused["message"]
    # The password rotated in the Secret: the operator reconnects on its next refresh.
    _secret(stack, PASSWORD)
    _wait_condition(stack, "kafkaclusters", "b", "Ready", "True")
    status = stack.get("kafkaclusters", "b")["status"]
    admin = _admin(fleet_b)
    try:
        info = admin.describe_cluster()
    finally:
        admin.close()
    assert status["clusterId"] == info.cluster_id
    assert status["brokerCount"] == 3
    assert status["controllerId"] == info.controller_id
    assert status["kafkaVersion"]  # inferred from ApiVersions, e.g. "3.9"
    assert _conditions(stack, "kafkaclusters", "b")["Reachable"]["status"] == "True"
    printed = stack.kubectl("get", "kafkaclusters", "b")
    assert info.cluster_id in printed and status["kafkaVersion"] in printed

    # A quota and a throttled move on each fleet; a quota naming no KafkaCluster.
    for fleet, ref, target in (("a", None, [1]), ("b", "b", [2])):
        stack.apply(_quota(f"q{fleet}", fleet, ref))
        extra = {"clusterRef": ref} if ref else {}
        stack.apply(
            reassignment(
                f"move-{fleet}",
                [{"topic": "moved", "partition": 0, "replicas": target}],
                throttle={"replicationRate": MOVE_RATE[fleet]},
                **extra,
            )
        )
    stack.apply(_quota("qx", "a", "missing"))
    stalled = _wait_condition(stack, "topicreplicaquotas", "qx", "Stalled", "True")
    assert stalled["reason"] == "ClusterNotFound"
    assert "KafkaCluster" in stalled["message"] and "missing not found" in stalled["message"]
    assert [e["reason"] for e in stack.events("qx")] == ["ClusterNotFound"]

    for fleet in ("a", "b"):
        stack.wait_phase(f"move-{fleet}", "Completed", 120)
        _wait_condition(stack, "topicreplicaquotas", f"q{fleet}", "Ready", "True")
    assert _throttles(fleet_a) == _quota_only(RATES["a"])
    assert _throttles(fleet_b) == _quota_only(RATES["b"])
    for fleet, cluster, replicas in (("a", fleet_a, (1,)), ("b", fleet_b, (2,))):
        admin = _admin(cluster)
        try:
            assert admin.describe_topics(["moved"])["moved"][0].replicas == replicas, fleet
        finally:
            admin.close()
    quota_b = stack.get("topicreplicaquotas", "qb")["status"]
    assert {b["leaderReplicationThrottledRate"] for b in quota_b["brokers"]} == {RATES["b"]}

    # One ledger key per cluster in the ledger ConfigMap.
    ledger = json.loads(stack.kubectl("get", "configmap", "kpo-throttle-ledger", "-o", "json"))
    assert set(ledger["data"]) == {"ledger.json", f"ledger.{stack.namespace}.b.json"}
    assert json.loads(ledger["data"][f"ledger.{stack.namespace}.b.json"])["clusterId"] == (
        info.cluster_id
    )

    # The KafkaCluster waits while a quota names it; then everything goes, throttles too.
    stack.kubectl("delete", "kafkacluster", "b", "--wait=false")
    in_use = _wait_condition(stack, "kafkaclusters", "b", "Ready", "False")
    assert in_use["reason"] == "InUse" and "TopicReplicaQuota" in in_use["message"]
    stack.kubectl("delete", "topicreplicaquotas", "qa", "qb", "qx", "--timeout=60s")
    wait_for(lambda: not stack.exists("kafkaclusters", "b"), 60, "KafkaCluster b deleted")
    assert _throttles(fleet_a) == {}
    assert _throttles(fleet_b) == {}
    ledger = json.loads(stack.kubectl("get", "configmap", "kpo-throttle-ledger", "-o", "json"))
    assert set(ledger["data"]) == {"ledger.json"}  # B's (empty) ledger went with it

    # No secret in the log, the objects or their Events.
    texts = [
        stack.operator.log_path.read_text(),
        stack.kubectl("get", "partitionreassignments,topicreplicaquotas", "-o", "json"),
        stack.kubectl("get", "events", "-o", "json"),
    ]
    for text in texts:
        assert PASSWORD not in text and WRONG_PASSWORD not in text
