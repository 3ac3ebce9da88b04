"""The main job on real parts: a throttled PartitionReassignment applied with kubectl.

Real kube-apiserver + etcd, the operator as a process, data produced and consumed with
kafka-python; the cluster is ours (three broker processes on a real ZooKeeper), Apache
Kafka 3.9 in ZooKeeper mode, or Apache Kafka 4.x in KRaft mode (``flavor``).
"""

from __future__ import annotations

import hashlib
import time
from datetime import UTC, datetime

import pytest

from kpo_kafka.admin import KafkaPythonAdmin
from kpo_kafka.admin_types import ConfigResource
from kpo_kafka.topic_partition import TopicPartition
from tests.integration.broker.conftest import wait_for
from tests.integration.broker.server.helpers import (
    consume_all,
    create_topic,
    describe,
    wait_metadata_replicas,
)
from tests.integration.operator.conftest import (
    FLAVORS,
    LIST_KEYS,
    RECORD,
    FlavoredStack,
    produce,
    reassignment,
    throttle_configs,
)

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("flavor", FLAVORS)
def test_main_job_throttled_move_completes_and_data_is_on_the_new_replicas(
    flavored_stack: FlavoredStack, flavor: str
) -> None:
    # Two quota samples instead of Kafka's 11: the same average rate without an initial burst
    # of ~11 s worth of data, so the move visibly progresses for the whole ~12 s.
    stack = flavored_stack(flavor, properties={"replication.quota.window.num": "2"})
    cluster = stack.cluster
    create_topic(cluster, "orders", assignment={0: [0, 1], 1: [1, 0]})
    digests = produce(cluster, "orders", 2, 50 * 1024 * 1024)
    rate = 4 * 1024 * 1024  # bytes/s: broker 2 receives 50 MB in about 12 s
    stack.apply(
        reassignment(
            "orders-to-2",
            [
                {"topic": "orders", "partition": 0, "replicas": [2, 1]},
                {"topic": "orders", "partition": 1, "replicas": [2, 0]},
            ],
            throttle={"replicationRate": rate},
        )
    )
    moving = stack.wait_submitted("orders-to-2")
    # While it moves: throttles are set, status shows progress and an ETA.
    configs = throttle_configs(cluster, "orders")
    assert configs[ConfigResource.broker(2)]["follower.replication.throttled.rate"] == str(rate)
    assert set(configs[ConfigResource.topic("orders")]) == set(LIST_KEYS)
    seen_eta: list[str] = []
    seen_progress: list[int] = []

    def finished() -> bool:
        status = stack.status("orders-to-2")
        if status.get("eta"):
            seen_eta.append(status["eta"])
        totals = status.get("totals") or {}
        if totals.get("bytesDone") is not None:
            seen_progress.append(int(totals["bytesDone"]))
        return status.get("phase") == "Completed"

    wait_for(finished, 120, "Completed")
    assert moving["startTime"]
    assert seen_eta, "no ETA was reported while moving"
    assert datetime.strptime(seen_eta[0], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).year >= 2024
    assert any(b > 0 for b in seen_progress), "no progress was reported while moving"
    status = stack.status("orders-to-2")
    assert status["totals"]["progress"] == "100%"
    assert status["totals"]["bytesDone"] == status["totals"]["bytesTotal"] >= 50 * 1024 * 1024
    assert status["observedGeneration"] == 1
    conditions = {c["type"]: c["status"] for c in status["conditions"]}
    assert conditions == {
        "Ready": "True",
        "Reconciling": "False",
        "Stalled": "False",
        "Completed": "True",
    }
    # kubectl wait works on the condition.
    stack.kubectl(
        "wait", "--for=condition=Completed", "partitionreassignment/orders-to-2", "--timeout=5s"
    )
    # Throttles are gone, the assignment is the target, every record is readable.
    assert throttle_configs(cluster, "orders") == {}
    wait_metadata_replicas(cluster, "orders", {0: [2, 1], 1: [2, 0]})
    wait_for(
        lambda: all(
            sorted(p["isr_nodes"]) == sorted(p["replica_nodes"])
            for p in describe(cluster, "orders")
        ),
        30,
        "full ISR",
    )
    # Read from the new replicas: make broker 2 the leader of both (preferred replica) with
    # a preferred leader election (stopping the others would take a KRaft quorum with them).
    admin = KafkaPythonAdmin(cluster.bootstrap_servers, "kpo-test", request_timeout_ms=10000)
    try:
        wanted = [TopicPartition("orders", 0), TopicPartition("orders", 1)]
        elected = admin.elect_preferred_leaders(wanted)
    finally:
        admin.close()
    assert elected == dict.fromkeys(wanted), elected
    wait_for(
        lambda: all(p["leader_id"] == 2 for p in describe(cluster, "orders")),
        60,
        "broker 2 leads both partitions",
    )
    got = consume_all(cluster, "orders", 2, 50 * 1024 * 1024 // RECORD, timeout_s=120)
    for partition, values in got.items():
        digest = hashlib.sha256()
        for value in values:
            digest.update(value)
        assert digest.hexdigest() == digests[partition]
    reasons = [e["reason"] for e in stack.events("orders-to-2")]
    assert "Submitted" in reasons and "Completed" in reasons
    # Applying the same spec again is a no-op.
    before = stack.get("partitionreassignments", "orders-to-2")
    stack.apply(
        reassignment(
            "orders-to-2",
            [
                {"topic": "orders", "partition": 0, "replicas": [2, 1]},
                {"topic": "orders", "partition": 1, "replicas": [2, 0]},
            ],
            throttle={"replicationRate": rate},
        )
    )
    time.sleep(2)
    after = stack.get("partitionreassignments", "orders-to-2")
    assert after["metadata"]["generation"] == before["metadata"]["generation"]
    assert after["status"] == before["status"]
