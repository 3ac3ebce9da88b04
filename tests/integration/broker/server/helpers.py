"""Helpers shared by the broker cluster tests: topics, leaders, ZooKeeper state, records."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kafka import KafkaConsumer, TopicPartition
from kafka.admin import NewTopic

from kpo_broker.zk.client import KafkaZkClient
from kpo_devenv.kafka_cluster import KafkaCluster
from kpo_kafka.admin import KafkaPythonAdmin
from kpo_kafka.admin_types import KafkaUnavailableError
from tests.integration.broker.conftest import admin_client, wait_for


def create_topic(
    cluster: KafkaCluster,
    name: str,
    partitions: int = 3,
    rf: int = 3,
    configs: dict[str, str] | None = None,
    assignment: dict[int, list[int]] | None = None,
) -> None:
    """Create a topic through the Admin API; wait until every running broker's Metadata
    lists it with a leader for each partition (whichever broker answers next knows it)."""
    admin = admin_client(cluster)
    try:
        if assignment is not None:
            topic = NewTopic(
                name, -1, -1, replica_assignments=assignment, topic_configs=configs or {}
            )
        else:
            topic = NewTopic(name, partitions, rf, topic_configs=configs or {})
        admin.create_topics([topic], timeout_ms=30000)
    finally:
        admin.close()
    count = len(assignment) if assignment is not None else partitions
    running = [i for i, broker in cluster.brokers.items() if broker.is_running()]
    waiter = KafkaPythonAdmin(cluster.bootstrap_servers, "tests", request_timeout_ms=10000)
    try:
        waiter.wait_for_topics({name: count}, timeout_ms=30000, brokers=running)
    finally:
        waiter.close()


def describe(cluster: KafkaCluster, topic: str) -> list[dict[str, Any]]:
    """The partitions of ``topic`` as Metadata reports them (sorted by partition)."""
    admin = admin_client(cluster)
    try:
        info = admin.describe_topics([topic])[0]
    finally:
        admin.close()
    return sorted(info["partitions"], key=lambda p: p["partition_index"])


def wait_every_broker(
    cluster: KafkaCluster,
    topic: str,
    check: Callable[[list[dict[str, Any]]], bool],
    what: str,
    timeout_s: float = 30,
) -> None:
    """Wait until every running broker's own Metadata for ``topic`` passes ``check``.

    ``check`` gets that broker's partitions of ``topic`` (sorted by partition, as
    :func:`describe` returns them). Each broker answers Metadata from its own cache, which
    follows the controller's a moment later, so a state one broker reports may not yet be
    what the next client request, answered by another broker, sees.
    """
    admin = KafkaPythonAdmin(cluster.bootstrap_servers, "tests", request_timeout_ms=10000)

    def everywhere() -> bool:
        for broker_id, broker in cluster.brokers.items():
            if not broker.is_running():
                continue
            try:
                topics = admin.metadata_on(broker_id, [topic])
            except KafkaUnavailableError:
                return False
            partitions = sorted(topics[0]["partitions"], key=lambda p: p["partition_index"])
            if not check(partitions):
                return False
        return True

    try:
        wait_for(everywhere, timeout_s, f"every running broker's Metadata: {what}")
    finally:
        admin.close()


def wait_metadata_replicas(
    cluster: KafkaCluster, topic: str, replicas: dict[int, list[int]], timeout_s: float = 30
) -> None:
    """Wait until every running broker's Metadata reports ``replicas`` (partition -> replica
    list) for ``topic``.

    A move is complete once the controller has written the new assignment to ZooKeeper; the
    brokers learn it from UpdateMetadata shortly after, so the broker a client asks may still
    answer with the old replicas for a moment (as in Kafka).

    Raises:
        AssertionError: Metadata still differs after ``timeout_s`` seconds.
    """

    def reports(partitions: list[dict[str, Any]]) -> bool:
        found = {p["partition_index"]: list(p["replica_nodes"]) for p in partitions}
        return {partition: found.get(partition, []) for partition in replicas} == replicas

    wait_every_broker(cluster, topic, reports, f"{topic} replicas {replicas}", timeout_s)


def leaders(cluster: KafkaCluster, topic: str) -> dict[int, int]:
    """Partition -> leader id for partitions that have a live leader."""
    return {
        p["partition_index"]: p["leader_id"]
        for p in describe(cluster, topic)
        if p["leader_id"] >= 0 and p["error_code"] == 0
    }


def zk_client(cluster: KafkaCluster) -> KafkaZkClient:
    """A connected ZooKeeper client on the cluster's chroot (close it after use)."""
    zk = KafkaZkClient(cluster.zookeeper_connect)
    zk.connect()
    return zk


def consume_all(
    cluster: KafkaCluster, topic: str, partitions: int, expected: int, timeout_s: float = 60
) -> dict[int, list[bytes]]:
    """Read every partition from offset 0 until ``expected`` records arrived in total."""
    consumer = KafkaConsumer(
        bootstrap_servers=cluster.bootstrap_servers,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        request_timeout_ms=10000,
    )
    consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
    got: dict[int, list[bytes]] = {p: [] for p in range(partitions)}

    def done() -> bool:
        for records in consumer.poll(timeout_ms=500).values():
            for record in records:
                got[record.partition].append(record.value)
        return sum(len(v) for v in got.values()) >= expected

    try:
        wait_for(done, timeout_s, f"{expected} records of {topic}")
    finally:
        consumer.close()
    return got
