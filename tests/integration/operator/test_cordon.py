"""Kafka 4.x tools on real parts: cordoning drained brokers (KIP-1066), fenced brokers (KIP-1073).

A PartitionReassignment that takes every replica off broker 2 drains it. On Apache Kafka
4.4 (KRaft, ``metadata.version`` 4.4) the operator sets ``cordoned.log.dirs=*`` on broker 2
while the move runs: DescribeLogDirs v5 reports its log dir cordoned, the controller places
a new topic's replicas only on the other brokers and refuses a manual assignment naming
broker 2; when the move completes (or is cancelled) the key is removed again. On Apache
Kafka 3.9 (ZooKeeper mode) and on this project's brokers, which have no such config, the
operator writes nothing, says so (condition ``Cordoned`` False, reason ``NotSupported``)
and the move completes as before. A target broker the KRaft controller has fenced is
refused before anything is written (reason ``BrokerFenced``).
"""

from __future__ import annotations

from typing import Any

import pytest

from kpo_devenv.kafka_cluster import KafkaCluster
from kpo_kafka.admin import KafkaPythonAdmin
from kpo_kafka.admin_types import KafkaRequestError
from tests.integration.broker.conftest import admin_client, wait_for
from tests.integration.broker.server.helpers import create_topic, describe, wait_metadata_replicas
from tests.integration.operator.conftest import (
    CORDONED_LOG_DIRS,
    FLAVORS,
    KAFKA4_KRAFT,
    FlavoredStack,
    Stack,
    produce,
    reassignment,
)

pytestmark = pytest.mark.integration

DRAIN = [
    {"topic": "drain", "partition": 0, "replicas": [1, 0]},
    {"topic": "drain", "partition": 1, "replicas": [0, 1]},
]


def cordon_configs(cluster: KafkaCluster) -> dict[int, str]:
    """Broker -> its per-broker dynamic ``cordoned.log.dirs``, where set."""
    admin = KafkaPythonAdmin(cluster.bootstrap_servers, "kpo-test", request_timeout_ms=10000)
    try:
        found = admin.describe_configs(brokers=sorted(cluster.brokers), keys=[CORDONED_LOG_DIRS])
    finally:
        admin.close()
    return {int(r.name): v[CORDONED_LOG_DIRS] for r, v in found.items() if CORDONED_LOG_DIRS in v}


def cordoned_dirs(cluster: KafkaCluster, broker: int) -> list[bool]:
    """``IsCordoned`` of each log dir of ``broker`` (DescribeLogDirs v5)."""
    admin = admin_client(cluster)
    try:
        answers = admin.describe_log_dirs(brokers=[broker])
    finally:
        admin.close()
    return [bool(d.get("is_cordoned")) for a in answers for d in a["log_dirs"]]


def condition(status: dict[str, Any], type_: str = "Cordoned") -> dict[str, Any]:
    found = [c for c in status.get("conditions", []) if c["type"] == type_]
    return dict(found[0]) if found else {}


def start_drain(stack: Stack, rate: int, total_bytes: int) -> None:
    """Topic ``drain`` with replicas on broker 2, then a move taking them all to 0 and 1."""
    create_topic(stack.cluster, "drain", assignment={0: [2, 0], 1: [1, 2]})
    produce(stack.cluster, "drain", 2, total_bytes)
    stack.apply(reassignment("drain-2", DRAIN, throttle={"replicationRate": rate}))


@pytest.mark.parametrize("flavor", FLAVORS)
def test_a_drained_broker_is_cordoned_while_it_is_drained(
    flavored_stack: FlavoredStack, flavor: str
) -> None:
    stack = flavored_stack(flavor, properties={"replication.quota.window.num": "2"})
    cluster = stack.cluster
    raw = admin_client(cluster)
    try:
        others = raw.list_topics()
    finally:
        raw.close()
    assert others == [], f"broker 2 must hold nothing else to be drained: {others}"
    if flavor != KAFKA4_KRAFT:
        start_drain(stack, 4 * 1024 * 1024, 2 * 1024 * 1024)
        status = stack.wait_phase("drain-2", "Completed", 120)
        cond = condition(status)
        assert (cond["status"], cond["reason"]) == ("False", "NotSupported"), status
        assert "Kafka < 4.3" in cond["message"]
        assert status["cordon"]["drainedBrokers"] == [2]
        assert cordon_configs(cluster) == {}
        assert all(2 not in p["replica_nodes"] for p in describe(cluster, "drain"))
        return

    # About 4 MiB at 128 KiB/s: the move lasts about 30 s unless sped up below.
    start_drain(stack, 128 * 1024, 4 * 1024 * 1024)
    wait_for(lambda: condition(stack.status("drain-2")).get("status") == "True", 60, "cordoned")
    status = stack.status("drain-2")
    assert status["phase"] == "Moving", status
    assert status["cordon"] == {
        "drainedBrokers": [2],
        "cordonedBrokers": [2],
        "message": status["cordon"]["message"],
    }
    assert cordon_configs(cluster) == {2: "*"}
    assert cordoned_dirs(cluster, 2) and all(cordoned_dirs(cluster, 2))
    assert not any(cordoned_dirs(cluster, 0))
    # Nothing new lands on broker 2 while it is drained: the controller's placement skips
    # it, and an assignment naming it is refused.
    create_topic(cluster, "fresh", partitions=6, rf=2)
    # Each KRaft broker learns the topic from the metadata log on its own: the broker this
    # Metadata request reaches may not know it yet although another one answered.
    fresh: list[dict[str, Any]] = []

    def known() -> bool:
        fresh[:] = describe(cluster, "fresh")
        return len(fresh) == 6

    wait_for(known, 30, "the broker asked knowing 'fresh'")
    placed = {b for p in fresh for b in p["replica_nodes"]}
    assert placed == {0, 1}, placed
    admin = KafkaPythonAdmin(cluster.bootstrap_servers, "kpo-test", request_timeout_ms=10000)
    try:
        with pytest.raises(KafkaRequestError, match="cordoned"):
            admin.create_topic("onto-2", assignment={0: [2, 0]})
    finally:
        admin.close()
    assert stack.status("drain-2")["phase"] == "Moving", "the move ended before the checks"
    # Faster now (a live throttle change), then the cordon goes with the move.
    stack.apply(reassignment("drain-2", DRAIN, throttle={"replicationRate": 64 * 1024 * 1024}))
    status = stack.wait_phase("drain-2", "Completed", 120)
    cond = condition(status)
    assert (cond["status"], cond["reason"]) == ("False", "Released"), status
    assert status["cordon"]["cordonedBrokers"] == []
    assert cordon_configs(cluster) == {}
    assert not any(cordoned_dirs(cluster, 2))
    reasons = [e["reason"] for e in stack.events("drain-2")]
    assert "Cordoned" in reasons and "Released" in reasons


def test_cancelling_a_drain_removes_the_cordon_and_restores_the_replicas(
    flavored_stack: FlavoredStack,
) -> None:
    stack = flavored_stack(KAFKA4_KRAFT, properties={"replication.quota.window.num": "2"})
    cluster = stack.cluster
    start_drain(stack, 32 * 1024, 8 * 1024 * 1024)  # minutes: cancelled long before
    wait_for(lambda: condition(stack.status("drain-2")).get("status") == "True", 60, "cordoned")
    assert cordon_configs(cluster) == {2: "*"}
    stack.apply(
        reassignment("drain-2", DRAIN, throttle={"replicationRate": 32 * 1024}, cancel=True)
    )
    status = stack.wait_phase("drain-2", "Cancelled", 90)
    assert condition(status)["reason"] == "Released"
    assert cordon_configs(cluster) == {}
    # Partitions still moving went back to their replicas, in their original order (an
    # assignment Kafka refuses while broker 2 is cordoned); one that completed first stays.
    states = {p["partition"]: p["state"] for p in status["partitions"]}
    assert "Cancelled" in states.values(), status
    wanted = {
        partition: original if states[partition] == "Cancelled" else target
        for partition, original, target in ((0, [2, 0], [1, 0]), (1, [1, 2], [0, 1]))
    }
    wait_metadata_replicas(cluster, "drain", wanted)


def test_a_move_onto_a_fenced_broker_is_refused(flavored_stack: FlavoredStack) -> None:
    stack = flavored_stack(KAFKA4_KRAFT, properties={"replication.quota.window.num": "2"})
    cluster = stack.cluster
    create_topic(cluster, "fence", partitions=1, rf=2, assignment={0: [0, 1]})
    admin = KafkaPythonAdmin(cluster.bootstrap_servers, "kpo-test", request_timeout_ms=10000)
    node = cluster.brokers[2]
    node.stop()
    try:
        # The controller fences a broker that stopped heartbeating (broker.session.timeout.ms).
        wait_for(lambda: admin.describe_cluster().fenced_brokers == {2}, 60, "broker 2 fenced")
        assert 2 not in admin.describe_cluster().brokers
        stack.apply(
            reassignment("onto-fenced", [{"topic": "fence", "partition": 0, "replicas": [2, 1]}])
        )
        status = stack.wait_phase("onto-fenced", "Failed", 60)
        stalled = condition(status, "Stalled")
        assert (stalled["status"], stalled["reason"]) == ("True", "BrokerFenced"), status
        assert "broker 2 is fenced" in status["message"]
        assert [p["replica_nodes"] for p in describe(cluster, "fence")] == [[0, 1]]
    finally:
        node.start()
        wait_for(lambda: 2 in admin.describe_cluster().brokers, 90, "broker 2 unfenced")
        admin.close()
