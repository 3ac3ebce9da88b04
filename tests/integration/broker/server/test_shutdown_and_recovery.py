"""Controlled shutdown and crash recovery of a broker's log, on real broker processes."""

from __future__ import annotations

import pytest
from kafka import KafkaProducer

from kpo_kafka.topic_partition import TopicPartition
from tests.integration.broker.conftest import ClusterFactory, wait_for
from tests.integration.broker.server.helpers import (
    consume_all,
    create_topic,
    describe,
    leaders,
    zk_client,
)

pytestmark = pytest.mark.integration


def test_controlled_shutdown_moves_every_leadership_before_exit(
    kafka_cluster_factory: ClusterFactory,
) -> None:
    cluster = kafka_cluster_factory(3)
    create_topic(cluster, "orders", partitions=6, rf=3)
    before = describe(cluster, "orders")
    victim = before[0]["leader_id"]
    led = [p["partition_index"] for p in before if p["leader_id"] == victim]
    assert led
    broker = cluster.brokers[victim]
    broker.stop()
    log = (broker.workdir / "broker.log").read_text()
    assert "controlled shutdown succeeded" in log
    # The controller writes each new leader to ZooKeeper before it answers ControlledShutdown
    # (the brokers' metadata caches follow asynchronously, through UpdateMetadata).
    zk = zk_client(cluster)
    try:
        states = zk.get_partition_states(
            [TopicPartition("orders", p["partition_index"]) for p in before]
        )
    finally:
        zk.close()
    for tp, state in states.items():
        leader_and_isr = state.leader_and_isr
        assert leader_and_isr.leader != victim
        assert leader_and_isr.leader >= 0
        assert victim not in leader_and_isr.isr
        if tp.partition in led:
            assert leader_and_isr.leader_epoch > before[tp.partition]["leader_epoch"]
    # ...and every broker's metadata follows.
    wait_for(
        lambda: all(p["leader_id"] not in (victim, -1) for p in describe(cluster, "orders")),
        30,
        "metadata without the stopped broker as leader",
    )


def test_crash_corrupted_log_tail_is_truncated_and_acked_data_kept(
    kafka_cluster_factory: ClusterFactory,
) -> None:
    cluster = kafka_cluster_factory(3)
    create_topic(cluster, "single", assignment={0: [0]})
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all")
    values = [f"v{i}".encode() * 20 for i in range(200)]
    for value in values:
        producer.send("single", value=value, partition=0)
    producer.flush(60)
    producer.close()
    broker = cluster.brokers[0]
    broker.kill()
    segments = sorted((broker.log_dir / "single-0").glob("*.log"))
    assert segments
    with segments[-1].open("ab") as tail:
        # Half a batch header and garbage: what a crash in the middle of a write leaves.
        tail.write(b"\x00\x00\x00\x00\x00\x00\x00\xc8\x00\x00\x01\x00" + b"\xde\xad" * 50)
    broker.start()
    wait_for(lambda: leaders(cluster, "single").get(0) == 0, 60, "broker 0 leading again")
    assert consume_all(cluster, "single", 1, 200)[0] == values
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all")
    metadata = producer.send("single", value=b"after-restart", partition=0).get(30)
    producer.close()
    assert metadata.offset == 200
