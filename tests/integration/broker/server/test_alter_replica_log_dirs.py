"""Intra-broker replica moves (KIP-113) on real brokers with two log dirs each."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaProducer
from kafka.admin import ConfigResource, ConfigResourceType
from kafka.errors import NoError

from kpo_devenv import ZooKeeperServer
from kpo_devenv.kafka_cluster import KafkaCluster
from tests.integration.broker.conftest import admin_client, wait_cluster_ready, wait_for
from tests.integration.broker.server.helpers import consume_all, create_topic, leaders

pytestmark = pytest.mark.integration

TOPIC = "moving"
RATE_CONFIG = "replica.alter.log.dirs.io.max.bytes.per.second"
VALUE_BYTES = 1000


@pytest.fixture
def cluster(zookeeper: ZooKeeperServer, tmp_path: Path) -> Iterator[KafkaCluster]:
    chroot = f"kafka-{uuid.uuid4().hex[:8]}"
    kafka = KafkaCluster(
        tmp_path / chroot, f"{zookeeper.connect_string}/{chroot}", 2, log_dir_count=2
    )
    try:
        kafka.start()
        wait_cluster_ready(kafka)
        yield kafka
    finally:
        kafka.stop()


def log_dirs_of(cluster: KafkaCluster, broker_id: int) -> dict[str, list[dict[str, Any]]]:
    """Log dir -> partitions of ``TOPIC`` there, as DescribeLogDirs reports them."""
    admin = admin_client(cluster)
    try:
        [answer] = admin.describe_log_dirs(brokers=[broker_id])
    finally:
        admin.close()
    result: dict[str, list[dict[str, Any]]] = {}
    for entry in answer["log_dirs"]:
        assert entry["error_code"] == 0
        assert entry["total_bytes"] > 0
        result[entry["log_dir"]] = [
            part
            for topic in entry["topics"]
            if topic["name"] == TOPIC
            for part in topic["partitions"]
        ]
    return result


class Writer(threading.Thread):
    """Produces numbered records with acks=all until stopped; keeps the acknowledged ones."""

    def __init__(self, cluster: KafkaCluster) -> None:
        super().__init__(daemon=True)
        self.producer = KafkaProducer(
            bootstrap_servers=cluster.bootstrap_servers, acks="all", retries=10
        )
        self.acked: list[bytes] = []
        self.failed = 0
        self.halt = threading.Event()

    def run(self) -> None:
        n = 0
        while not self.halt.is_set():
            value = f"live-{n:06d}".encode().ljust(VALUE_BYTES, b".")
            n += 1
            try:
                self.producer.send(TOPIC, value, partition=0).get(timeout=30)
                self.acked.append(value)
            except Exception:
                self.failed += 1
            self.halt.wait(0.05)
        self.producer.close()


def test_move_a_live_leader_replica_to_the_other_log_dir(cluster: KafkaCluster) -> None:
    create_topic(cluster, TOPIC, partitions=1, rf=2)
    leader = leaders(cluster, TOPIC)[0]
    broker = cluster.brokers[leader]
    dirs = [str(d) for d in broker.log_dirs]
    before = log_dirs_of(cluster, leader)
    [source] = [d for d, parts in before.items() if parts]
    [target] = [d for d in dirs if d != source]
    assert set(before) == set(dirs)

    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all")
    initial = [f"old-{i:06d}".encode().ljust(VALUE_BYTES, b".") for i in range(300)]
    for value in initial:
        producer.send(TOPIC, value, partition=0)
    producer.flush()
    producer.close()

    admin = admin_client(cluster)
    try:
        admin.alter_configs(
            [ConfigResource(ConfigResourceType.BROKER, str(leader), {RATE_CONFIG: "100000"})],
            raise_on_unknown=False,
            incremental=True,
        )
        writer = Writer(cluster)
        writer.start()
        answer = admin.alter_replica_log_dirs({(TOPIC, 0, leader): target})
    finally:
        admin.close()
    assert list(answer.values()) == [NoError]

    seen_future: list[dict[str, Any]] = []

    def moved() -> bool:
        now = log_dirs_of(cluster, leader)
        seen_future.extend(p for p in now[target] if p["is_future_key"])
        return [p["is_future_key"] for p in now[target]] == [False] and now[source] == []

    try:
        wait_for(moved, 90, "the replica to move to the other log dir")
    finally:
        writer.halt.set()
        writer.join(60)
    assert seen_future, "DescribeLogDirs never showed the future replica"
    assert all(p["offset_lag"] >= 0 for p in seen_future)
    assert any(p["offset_lag"] > 0 for p in seen_future)
    assert not (Path(source) / f"{TOPIC}-0").exists()
    assert [p.name for p in Path(target).iterdir() if p.name.startswith(TOPIC)] == [f"{TOPIC}-0"]
    assert writer.acked, "no record was acknowledged during the move"

    expected = len(initial) + len(writer.acked) + writer.failed
    got = consume_all(cluster, TOPIC, 1, len(initial) + len(writer.acked), timeout_s=60)[0]
    assert len(got) <= expected
    assert set(initial) | set(writer.acked) <= set(got)
