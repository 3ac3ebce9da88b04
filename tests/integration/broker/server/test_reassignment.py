"""Partition reassignment (KIP-455) on a real 3-broker cluster: Admin API and ZooKeeper."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import pytest
from kafka import KafkaProducer, TopicPartition
from kafka.errors import KafkaConnectionError
from kazoo.client import KazooClient

from kpo_devenv.kafka_cluster import KafkaCluster
from tests.integration.broker.conftest import ClusterFactory, admin_client, wait_for
from tests.integration.broker.server.helpers import consume_all, create_topic, describe, zk_client

pytestmark = pytest.mark.integration

T = TypeVar("T")


def alter(cluster: KafkaCluster, reassignments: dict[TopicPartition, Any]) -> dict[Any, Any]:
    admin = admin_client(cluster)
    try:
        return dict(admin.alter_partition_reassignments(reassignments))
    finally:
        admin.close()


def ongoing(cluster: KafkaCluster) -> dict[Any, Any]:
    admin = admin_client(cluster)
    try:
        return dict(admin.list_partition_reassignments())
    finally:
        admin.close()


def wait_replicas(cluster: KafkaCluster, topic: str, replicas: list[int]) -> None:
    """Wait until AR = ``replicas`` with the same ISR, in ZooKeeper and in Metadata."""

    def done() -> bool:
        zk = zk_client(cluster)
        try:
            assignment = zk.get_replica_assignments([topic])[topic].partitions[0]
            state = zk.get_partition_states([TopicPartition(topic, 0)])
        finally:
            zk.close()
        lai = next(iter(state.values())).leader_and_isr
        meta = describe(cluster, topic)[0]
        return (
            list(assignment.replicas) == replicas
            and not assignment.is_being_reassigned
            and sorted(lai.isr) == sorted(replicas)
            and sorted(meta["replica_nodes"]) == sorted(replicas)
            and sorted(meta["isr_nodes"]) == sorted(replicas)
        )

    wait_for(done, 45, f"{topic}-0 on {replicas}")


def partition_dir_exists(cluster: KafkaCluster, broker_id: int, topic: str) -> bool:
    """Whether the broker still has the live log dir of ``<topic>-0``.

    A deleted log is renamed ``<topic>-0.<uuid>-delete`` at once and its files removed
    after ``file.delete.delay.ms`` (as in Kafka); the renamed dir does not count.
    """
    return (cluster.brokers[broker_id].log_dir / f"{topic}-0").exists()


def retrying(call: Callable[[], T]) -> T:
    """Retry an admin call while the client still tries a crashed broker's address."""
    for _ in range(20):
        try:
            return call()
        except KafkaConnectionError:
            time.sleep(0.5)
    return call()


def test_move_partition_while_producing(kafka_cluster_factory: ClusterFactory) -> None:
    cluster = kafka_cluster_factory(3)
    create_topic(cluster, "moves", assignment={0: [0, 1]})
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all", linger_ms=2)
    acked: list[bytes] = []
    stop = threading.Event()

    def produce() -> None:
        i = 0
        while not stop.is_set():
            value = f"m{i}".encode()
            producer.send("moves", value=value, partition=0).get(timeout=30)
            acked.append(value)
            i += 1

    writer = threading.Thread(target=produce)
    writer.start()
    try:
        wait_for(lambda: len(acked) >= 50, 30, "records before the move")
        assert alter(cluster, {TopicPartition("moves", 0): [2, 1]}) == {
            TopicPartition("moves", 0): None
        }
        wait_replicas(cluster, "moves", [2, 1])
        wait_for(lambda: not ongoing(cluster), 30, "no reassignment listed")
        count = len(acked)
        wait_for(lambda: len(acked) >= count + 50, 30, "records after the move")
    finally:
        stop.set()
        writer.join(60)
        producer.close()
    got = consume_all(cluster, "moves", 1, len(acked))
    assert got[0][: len(acked)] == acked
    assert describe(cluster, "moves")[0]["leader_id"] in (1, 2)
    wait_for(lambda: not partition_dir_exists(cluster, 0, "moves"), 30, "old replica deleted")
    assert partition_dir_exists(cluster, 2, "moves")


def test_replication_factor_up_then_down(kafka_cluster_factory: ClusterFactory) -> None:
    cluster = kafka_cluster_factory(3)
    create_topic(cluster, "rf", assignment={0: [0]})
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all")
    for i in range(100):
        producer.send("rf", value=f"r{i}".encode(), partition=0)
    producer.flush(30)
    tp = TopicPartition("rf", 0)

    assert alter(cluster, {tp: [0, 1, 2]}) == {tp: None}
    wait_replicas(cluster, "rf", [0, 1, 2])

    assert alter(cluster, {tp: [2]}) == {tp: None}
    wait_replicas(cluster, "rf", [2])
    assert describe(cluster, "rf")[0]["leader_id"] == 2
    for i in range(100, 120):
        producer.send("rf", value=f"r{i}".encode(), partition=0)
    producer.flush(30)
    producer.close()
    got = consume_all(cluster, "rf", 1, 120)
    assert got[0] == [f"r{i}".encode() for i in range(120)]
    for broker_id in (0, 1):
        wait_for(lambda b=broker_id: not partition_dir_exists(cluster, b, "rf"), 30, "deleted")


def test_cancel_reverts_to_the_original_replicas(kafka_cluster_factory: ClusterFactory) -> None:
    cluster = kafka_cluster_factory(3)
    zk = zk_client(cluster)
    try:
        controller_id = zk.get_controller_id()
    finally:
        zk.close()
    assert controller_id is not None
    target, keep = [b for b in (0, 1, 2) if b != controller_id]
    create_topic(cluster, "cancel", assignment={0: [controller_id, keep]})
    tp = TopicPartition("cancel", 0)
    # A crashed broker stays registered until its session times out (6 s): the
    # reassignment to it is accepted but cannot complete, so it can be cancelled.
    cluster.brokers[target].kill()

    assert retrying(lambda: alter(cluster, {tp: [target, keep]})) == {tp: None}
    listed = retrying(lambda: ongoing(cluster))
    assert listed[tp]["adding_replicas"] == [target]
    assert listed[tp]["removing_replicas"] == [controller_id]

    assert retrying(lambda: alter(cluster, {tp: None})) == {tp: None}
    assert retrying(lambda: ongoing(cluster)) == {}
    wait_replicas(cluster, "cancel", [keep, controller_id])
    assert retrying(lambda: describe(cluster, "cancel"))[0]["leader_id"] in (controller_id, keep)
    assert retrying(lambda: alter(cluster, {tp: None}))[tp].errno == 85


def test_invalid_target_is_rejected(kafka_cluster_factory: ClusterFactory) -> None:
    cluster = kafka_cluster_factory(3)
    create_topic(cluster, "bad", assignment={0: [0, 1]})
    tp = TopicPartition("bad", 0)
    assert alter(cluster, {tp: [0, 7]})[tp].errno == 39
    assert alter(cluster, {TopicPartition("nope", 0): [0]})[TopicPartition("nope", 0)].errno == 3
    assert ongoing(cluster) == {}


def test_legacy_znode_reassignment(kafka_cluster_factory: ClusterFactory) -> None:
    cluster = kafka_cluster_factory(3)
    create_topic(cluster, "legacy", assignment={0: [0, 1]})
    kazoo = KazooClient(hosts=cluster.zookeeper_connect)
    kazoo.start()
    try:
        data = {
            "version": 1,
            "partitions": [{"topic": "legacy", "partition": 0, "replicas": [1, 2]}],
        }
        kazoo.create("/admin/reassign_partitions", json.dumps(data).encode(), makepath=True)
        wait_replicas(cluster, "legacy", [1, 2])
        wait_for(lambda: kazoo.exists("/admin/reassign_partitions") is None, 30, "znode deleted")
    finally:
        kazoo.stop()
        kazoo.close()
    wait_for(lambda: not partition_dir_exists(cluster, 0, "legacy"), 30, "old replica deleted")
