"""Real Kafka clients (kafka-python, confluent-kafka) against a 3-broker cluster."""

from __future__ import annotations

import os
import resource

import pytest
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import Producer as ConfluentProducer
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

from tests.integration.broker.conftest import ClusterFactory, admin_client, wait_for
from tests.integration.broker.server.helpers import consume_all, create_topic

pytestmark = pytest.mark.integration


def _create_topic(cluster, name: str, partitions: int = 3, rf: int = 3) -> None:  # type: ignore[no-untyped-def]
    admin = admin_client(cluster)
    try:
        admin.create_topics(
            [NewTopic(name, partitions, rf, topic_configs={"min.insync.replicas": "2"})],
            timeout_ms=30000,
        )
    finally:
        admin.close()


def test_kafka_python_produces_acks_all_and_consumes_in_order(
    kafka_cluster_factory: ClusterFactory,
) -> None:
    cluster = kafka_cluster_factory(3)
    _create_topic(cluster, "orders")
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all", linger_ms=5)
    sent: dict[int, list[bytes]] = {0: [], 1: [], 2: []}
    for i in range(300):
        value = f"record-{i}".encode()
        metadata = producer.send("orders", value=value, partition=i % 3).get(timeout=30)
        assert metadata.offset == len(sent[metadata.partition])
        sent[metadata.partition].append(value)
    producer.close()

    consumer = KafkaConsumer(
        bootstrap_servers=cluster.bootstrap_servers,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=10000,
    )
    consumer.assign([TopicPartition("orders", p) for p in range(3)])
    got: dict[int, list[bytes]] = {0: [], 1: [], 2: []}
    for message in consumer:
        got[message.partition].append(message.value)
        if sum(len(v) for v in got.values()) == 300:
            break
    consumer.close()
    assert got == sent


def test_confluent_kafka_produces_and_consumes(kafka_cluster_factory: ClusterFactory) -> None:
    cluster = kafka_cluster_factory(3)
    _create_topic(cluster, "events", partitions=2)
    producer = ConfluentProducer(
        {"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "linger.ms": 5}
    )
    delivered: list[tuple[int, int]] = []

    def on_delivery(err, msg):  # type: ignore[no-untyped-def]
        assert err is None, err
        delivered.append((msg.partition(), msg.offset()))

    for i in range(200):
        producer.produce("events", value=f"e{i}".encode(), partition=i % 2, on_delivery=on_delivery)
    assert producer.flush(30) == 0
    assert len(delivered) == 200

    consumer = ConfluentConsumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": "tests",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    from confluent_kafka import TopicPartition as ConfluentTopicPartition

    consumer.assign([ConfluentTopicPartition("events", p, 0) for p in range(2)])
    values: list[bytes] = []

    def consumed_all() -> bool:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            values.append(message.value())
        return len(values) == 200

    wait_for(consumed_all, 60, "200 records")
    consumer.close()
    assert sorted(values) == sorted(f"e{i}".encode() for i in range(200))


CODECS = ("gzip", "snappy", "lz4", "zstd")


def test_compressed_batches_of_every_codec_from_both_clients(
    kafka_cluster_factory: ClusterFactory,
) -> None:
    """The leader decompresses every batch to validate it: all of Kafka's codecs must pass."""
    cluster = kafka_cluster_factory(1)
    create_topic(cluster, "packed", partitions=1, rf=1)
    expected: list[bytes] = []
    for codec in CODECS:
        producer = KafkaProducer(
            bootstrap_servers=cluster.bootstrap_servers,
            acks="all",
            linger_ms=20,
            compression_type=codec,
        )
        futures = [
            producer.send("packed", value=f"kp-{codec}-{i}".encode() * 10, partition=0)
            for i in range(100)
        ]
        producer.flush(30)
        assert all(f.get(timeout=30).offset >= 0 for f in futures)
        producer.close()
        expected += [f"kp-{codec}-{i}".encode() * 10 for i in range(100)]

        confluent = ConfluentProducer(
            {
                "bootstrap.servers": cluster.bootstrap_servers,
                "acks": "all",
                "linger.ms": 20,
                "compression.type": codec,
            }
        )
        errors: list[object] = []

        def on_delivery(err, _msg, errors=errors):  # type: ignore[no-untyped-def]
            if err is not None:
                errors.append(err)

        for i in range(100):
            value = f"ck-{codec}-{i}".encode() * 10
            confluent.produce("packed", value=value, partition=0, on_delivery=on_delivery)
        assert confluent.flush(30) == 0
        assert errors == []
        expected += [f"ck-{codec}-{i}".encode() * 10 for i in range(100)]

    consumer = KafkaConsumer(
        bootstrap_servers=cluster.bootstrap_servers,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=10000,
    )
    consumer.assign([TopicPartition("packed", 0)])
    got: list[bytes] = []
    for message in consumer:
        got.append(message.value)
        if len(got) == len(expected):
            break
    consumer.close()
    assert got == expected


def test_brokers_host_more_partitions_than_their_descriptor_limit(
    kafka_cluster_factory: ClusterFactory,
) -> None:
    """300 replicas per broker under ``ulimit -n 256`` (900 descriptors if each held three)."""
    limit, partitions = 256, 300
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))  # inherited by the brokers
    try:
        cluster = kafka_cluster_factory(2)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    create_topic(cluster, "many", partitions=partitions, rf=2)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all", linger_ms=5)
    for partition in range(partitions):
        producer.send("many", value=f"v{partition}".encode(), partition=partition)
    producer.flush(timeout=60)
    producer.close()
    got = consume_all(cluster, "many", partitions, partitions)
    assert all(values == [f"v{p}".encode()] for p, values in got.items())
    for broker in cluster.brokers.values():
        assert broker.is_running()
        assert len(os.listdir(f"/proc/{broker.process.pid}/fd")) < limit
