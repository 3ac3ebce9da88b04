"""Invalid PartitionReassignments on real parts: rejected with the reason, nothing changed.

Rules the CRD's schema enforces (duplicate partitions or replicas, logDirs length)
are refused by the real kube-apiserver; rules that need the cluster (topic and
partition exist, brokers alive, log dir known, no other reassignment in flight)
end ``Failed`` with a message naming each bad entry, and ZooKeeper shows no
reassignment and no throttle config.
"""

from __future__ import annotations

import pytest
import yaml
from kazoo.client import KazooClient

from tests.integration.broker.server.helpers import create_topic, describe
from tests.integration.operator.conftest import Stack, produce, reassignment

pytestmark = pytest.mark.integration


def zk_state(stack: Stack) -> dict[str, object]:
    """What a submission or a throttle would change in ZooKeeper (Kafka's 2.x layout)."""
    zk = KazooClient(hosts=stack.cluster.zookeeper_connect)
    zk.start(timeout=15)
    try:

        def configs(kind: str) -> dict[str, bytes]:
            base = f"/config/{kind}"
            names = zk.get_children(base) if zk.exists(base) else []
            return {n: zk.get(f"{base}/{n}")[0] for n in names}

        return {
            "legacy_reassign": zk.exists("/admin/reassign_partitions") is not None,
            "topic_configs": configs("topics"),
            "broker_configs": configs("brokers"),
            "assignment": zk.get("/brokers/topics/orders")[0],
        }
    finally:
        zk.stop()
        zk.close()


def test_schema_violations_are_refused_by_the_api_server(stack: Stack) -> None:
    bad = {
        "duplicate partition": [
            {"topic": "orders", "partition": 0, "replicas": [1, 2]},
            {"topic": "orders", "partition": 0, "replicas": [2, 0]},
        ],
        "duplicate replica": [{"topic": "orders", "partition": 0, "replicas": [1, 1]}],
        "logDirs length": [
            {"topic": "orders", "partition": 0, "replicas": [1, 2], "logDirs": ["any"]}
        ],
        "empty": [],
    }
    for what, partitions in bad.items():
        manifest = reassignment(f"bad-{what.replace(' ', '-').lower()}", partitions)
        out = stack.plane.kubectl(
            "-n",
            stack.namespace,
            "apply",
            "-f",
            "-",
            input_text=yaml.safe_dump(manifest),
            check=False,
        )
        assert out.returncode != 0, what
        assert "spec.partitions" in out.stderr, (what, out.stderr)
    assert stack.kubectl("get", "partitionreassignments", "-o", "name").strip() == ""


def test_cluster_rules_end_failed_naming_each_entry_and_change_nothing(stack: Stack) -> None:
    cluster = stack.cluster
    create_topic(cluster, "orders", assignment={0: [0, 1], 1: [1, 0]})
    produce(cluster, "orders", 2, 4 * 1024 * 1024)
    before = zk_state(stack)
    cases = {
        "unknown-topic": (
            [{"topic": "nope", "partition": 0, "replicas": [0, 1]}],
            "spec.partitions[0]: topic nope does not exist",
        ),
        "unknown-partition": (
            [{"topic": "orders", "partition": 9, "replicas": [0, 1]}],
            "spec.partitions[0]: partition orders-9 does not exist",
        ),
        "dead-broker": (
            [
                {"topic": "orders", "partition": 0, "replicas": [2, 1]},
                {"topic": "orders", "partition": 1, "replicas": [7, 0]},
            ],
            "spec.partitions[1]: broker 7 is not alive",
        ),
        "unknown-log-dir": (
            [
                {
                    "topic": "orders",
                    "partition": 0,
                    "replicas": [2, 1],
                    "logDirs": ["/no/such/dir", "any"],
                }
            ],
            "spec.partitions[0].logDirs: broker 2 has no log dir /no/such/dir",
        ),
    }
    for name, (partitions, _) in cases.items():
        stack.apply(reassignment(name, partitions, throttle={"replicationRate": 1024}))
    for name, (_, expected) in cases.items():
        status = stack.wait_phase(name, "Failed", 60)
        assert expected in status["message"], (name, status["message"])
        conditions = {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}
        assert conditions["Stalled"] == ("True", "ValidationFailed")
        assert conditions["Ready"][0] == "False"
        assert status["observedGeneration"] == 1
        assert any(e["type"] == "Warning" for e in stack.events(name))
    assert zk_state(stack) == before
    assert [p["replica_nodes"] for p in describe(cluster, "orders")] == [[0, 1], [1, 0]]


def test_a_partition_moved_by_another_object_is_refused(stack: Stack) -> None:
    cluster = stack.cluster
    create_topic(cluster, "orders", assignment={0: [0, 1], 1: [1, 0]})
    produce(cluster, "orders", 2, 4 * 1024 * 1024)
    slow = [{"topic": "orders", "partition": 0, "replicas": [2, 1]}]
    stack.apply(reassignment("first", slow, throttle={"replicationRate": 64 * 1024}))
    stack.wait_submitted("first")
    stack.apply(reassignment("second", [{"topic": "orders", "partition": 0, "replicas": [2, 0]}]))
    status = stack.wait_phase("second", "Failed", 60)
    assert (
        f"a reassignment of orders-0 by {stack.namespace}/first is in flight" in status["message"]
    )
    # The first one is untouched and still moving towards its own target.
    first = stack.status("first")
    assert first["phase"] == "Moving"
    assert first["partitions"][0]["targetReplicas"] == [2, 1]
