"""Brokers whose ZooKeeper session expires come back.

A broker paused (SIGSTOP) for twice ``zookeeper.session.timeout.ms`` loses its session:
its ``/brokers/ids/<id>`` znode vanishes and the controller moves its leaderships away.
After SIGCONT it must register again with a new broker epoch (the czxid of the new
znode, KIP-380), accept the controller's newer leader epochs, catch up and rejoin the
ISR, as Kafka's broker does after ``SessionExpireListener.handleNewSession`` (and its
controller after ``Expire`` / ``RegisterBrokerAndReelect``). Records acknowledged with
acks=all before, during and after the pause must all be readable exactly once.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaTopicPartition

from kpo_broker.zk.client import KafkaZkClient
from kpo_devenv import ZooKeeperServer
from kpo_devenv.kafka_cluster import BrokerProcess, KafkaCluster
from kpo_kafka.topic_partition import TopicPartition
from tests.integration.broker.conftest import ClusterFactory, wait_cluster_ready, wait_for
from tests.integration.broker.server.helpers import consume_all, create_topic, leaders, zk_client

pytestmark = pytest.mark.integration

#: ``zookeeper.session.timeout.ms`` of the brokers (the cluster fixture's value).
SESSION_TIMEOUT_S = 6.0
TOPIC = "ledger"
PARTITIONS = 3


class AckedProducer:
    """Produces numbered records round-robin with acks=all, one at a time, in a thread.

    Attributes:
        acked: partition -> values acknowledged, in order.
        errors: send failures (the test expects none: the producer retries).
    """

    def __init__(self, cluster: KafkaCluster, topic: str, partitions: int) -> None:
        self.acked: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
        self.errors: list[BaseException] = []
        self._cluster, self._topic, self._partitions = cluster, topic, partitions
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="acked-producer")

    @property
    def count(self) -> int:
        """Records acknowledged so far."""
        return sum(len(v) for v in self.acked.values())

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(180)
        assert not self._thread.is_alive(), "the producer did not finish"

    def _run(self) -> None:
        producer = KafkaProducer(
            bootstrap_servers=self._cluster.bootstrap_servers,
            acks="all",
            linger_ms=2,
            retries=2**31 - 1,
            request_timeout_ms=15000,
            delivery_timeout_ms=120000,
        )
        i = 0
        try:
            while not self._stop.is_set():
                partition = i % self._partitions
                value = f"p{partition}-{i}".encode()
                try:
                    metadata = producer.send(self._topic, value=value, partition=partition).get(100)
                except BaseException as exc:
                    self.errors.append(exc)
                    return
                self.acked[metadata.partition].append(value)
                i += 1
        finally:
            producer.close()


@contextmanager
def paused(broker: BrokerProcess) -> Iterator[None]:
    """SIGSTOP ``broker`` for the block (a GC-like pause), SIGCONT after it, even on failure."""
    pid = broker.process.pid
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def broker_epoch(zk: KafkaZkClient, broker_id: int) -> int | None:
    """The broker's epoch (czxid of ``/brokers/ids/<id>``), None when it is not registered."""
    registration = zk.get_broker(broker_id)
    return None if registration is None else registration.epoch


def partition_states(zk: KafkaZkClient) -> dict[int, tuple[int, int, tuple[int, ...]]]:
    """Partition -> (leader, leader epoch, ISR) of :data:`TOPIC` from ZooKeeper."""
    states = zk.get_partition_states([TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
    return {
        tp.partition: (
            s.leader_and_isr.leader,
            s.leader_and_isr.leader_epoch,
            tuple(s.leader_and_isr.isr),
        )
        for tp, s in states.items()
    }


def expire_session(cluster: KafkaCluster, zk: KafkaZkClient, broker_id: int) -> int:
    """Pause ``broker_id`` past its session timeout, resume it, and wait until it is back.

    While paused: its registration vanishes and no partition keeps it as leader. After
    SIGCONT: it registers again with a higher broker epoch and rejoins every ISR.

    Returns:
        its new broker epoch.
    """
    old_epoch = broker_epoch(zk, broker_id)
    assert old_epoch is not None
    paused_at = time.monotonic()
    with paused(cluster.brokers[broker_id]):
        wait_for(
            lambda: broker_id not in zk.get_live_broker_ids(),
            3 * SESSION_TIMEOUT_S,
            f"broker {broker_id} to leave /brokers/ids",
        )
        wait_for(
            lambda: all(leader != broker_id for leader, _, _ in partition_states(zk).values()),
            30,
            f"leaderships moved off broker {broker_id}",
        )
        time.sleep(max(0.0, paused_at + 2 * SESSION_TIMEOUT_S - time.monotonic()))
    resumed_at = time.monotonic()
    wait_for(
        lambda: (broker_epoch(zk, broker_id) or -1) > old_epoch,
        SESSION_TIMEOUT_S + 15,
        f"broker {broker_id} registered again with a new epoch",
    )
    assert time.monotonic() - resumed_at < SESSION_TIMEOUT_S + 15
    wait_for(
        lambda: all(broker_id in isr for _, _, isr in partition_states(zk).values()),
        60,
        f"broker {broker_id} back in every ISR",
    )
    new_epoch = broker_epoch(zk, broker_id)
    assert new_epoch is not None
    return new_epoch


def assert_exactly_once(cluster: KafkaCluster, producer: AckedProducer) -> None:
    """Every acknowledged record is read back once, in order, and nothing else is in the log."""
    assert producer.errors == []
    got = consume_all(cluster, TOPIC, PARTITIONS, producer.count)
    for partition in range(PARTITIONS):
        assert got[partition] == producer.acked[partition], f"partition {partition} differs"
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers)
    try:
        tps = [KafkaTopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        ends = consumer.end_offsets(tps)
    finally:
        consumer.close()
    assert {tp.partition: end for tp, end in ends.items()} == {
        p: len(v) for p, v in producer.acked.items()
    }


def test_a_leader_whose_session_expires_registers_again_and_rejoins_the_isr(
    kafka_cluster_factory: ClusterFactory,
) -> None:
    cluster = kafka_cluster_factory(3)
    create_topic(cluster, TOPIC, PARTITIONS, 3, configs={"min.insync.replicas": "2"})
    zk = zk_client(cluster)
    producer = AckedProducer(cluster, TOPIC, PARTITIONS)
    try:
        controller = zk.get_controller_id()
        led = leaders(cluster, TOPIC)
        victim = next((b for b in led.values() if b != controller), led[0])
        first_epoch = broker_epoch(zk, victim)
        assert first_epoch is not None
        producer.start()
        wait_for(lambda: producer.count >= 150, 60, "records before the pause")
        second_epoch = expire_session(cluster, zk, victim)
        assert second_epoch > first_epoch
        before = producer.count
        wait_for(lambda: producer.count >= before + 150, 60, "records after the first expiry")
        # A second expiry of the same broker works too.
        third_epoch = expire_session(cluster, zk, victim)
        assert third_epoch > second_epoch
        before = producer.count
        wait_for(lambda: producer.count >= before + 150, 60, "records after the second expiry")
    finally:
        producer.stop()
        zk.close()
    wait_cluster_ready(cluster)
    assert_exactly_once(cluster, producer)


def test_the_controller_whose_session_expires_resigns_and_a_new_one_takes_over(
    kafka_cluster_factory: ClusterFactory,
) -> None:
    cluster = kafka_cluster_factory(3)
    create_topic(cluster, TOPIC, PARTITIONS, 3, configs={"min.insync.replicas": "2"})
    zk = zk_client(cluster)
    producer = AckedProducer(cluster, TOPIC, PARTITIONS)
    try:
        old_controller = zk.get_controller_id()
        old_epoch = zk.get_controller_epoch()
        assert old_controller is not None and old_epoch is not None
        producer.start()
        wait_for(lambda: producer.count >= 150, 60, "records before the pause")
        expire_session(cluster, zk, old_controller)
        controller = zk.get_controller_id()
        epoch = zk.get_controller_epoch()
        assert controller is not None and epoch is not None
        assert controller != old_controller
        assert epoch.epoch > old_epoch.epoch
        before = producer.count
        wait_for(lambda: producer.count >= before + 150, 60, "records after the expiry")
        # The old controller went back to standby: the new one handles a second expiry.
        expire_session(cluster, zk, old_controller)
        assert zk.get_controller_id() == controller
    finally:
        producer.stop()
        zk.close()
    wait_cluster_ready(cluster)
    assert_exactly_once(cluster, producer)


def test_a_zookeeper_outage_longer_than_the_session_timeout_is_survived(
    tmp_path: Path,
) -> None:
    """ZooKeeper (its own server here) is down for twice the session timeout.

    ZooKeeper reloads its sessions at start-up and renews their timeouts, and the brokers
    try to reconnect at least every second, so their sessions usually survive; a broker
    whose session expired anyway registers again as after a pause. Either way every
    broker is registered, every partition led with a full ISR and acks=all writes go on.
    """
    server = ZooKeeperServer(tmp_path / "zookeeper")
    server.start()
    cluster = KafkaCluster(tmp_path / "cluster", f"{server.connect_string}/kafka", 3)
    try:
        cluster.start()
        wait_cluster_ready(cluster)
        create_topic(cluster, TOPIC, PARTITIONS, 3, configs={"min.insync.replicas": "2"})
        producer = AckedProducer(cluster, TOPIC, PARTITIONS)
        try:
            producer.start()
            wait_for(lambda: producer.count >= 150, 60, "records before the outage")
            server.stop()
            time.sleep(2 * SESSION_TIMEOUT_S)
            server = ZooKeeperServer(tmp_path / "zookeeper", port=server.port)
            server.start()
            zk = zk_client(cluster)
            try:
                wait_for(
                    lambda: zk.get_live_broker_ids() == [0, 1, 2],
                    SESSION_TIMEOUT_S + 15,
                    "every broker registered after the outage",
                )
                wait_for(
                    lambda: all(
                        len(isr) == 3 and leader >= 0
                        for leader, _, isr in partition_states(zk).values()
                    ),
                    60,
                    "every partition led with a full ISR",
                )
            finally:
                zk.close()
            before = producer.count
            wait_for(lambda: producer.count >= before + 150, 60, "records after the outage")
        finally:
            producer.stop()
        wait_cluster_ready(cluster)
        assert_exactly_once(cluster, producer)
    finally:
        cluster.stop()
        server.stop()
