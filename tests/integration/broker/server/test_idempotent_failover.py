"""Idempotent produce across leader changes and restarts, on real brokers (KIP-98).

A raw client (kpo's ``BrokerClient`` with kafka-python's request classes) plays an idempotent
producer whose answer was lost: it appends batches on the leader with acks=all, the leader
is killed (kill -9) after the followers replicated them, and the very same batches are sent
again to the new leader. As in Kafka (``UnifiedLog.analyzeAndValidateProducerState``,
``ProducerStateEntry.findDuplicateBatch``), the new leader knows the producer from the
batches it replicated: each retry of one of the producer's last 5 batches is answered with
no error and its original base offset, and nothing is appended again. Then every broker is
restarted, so each rebuilds the producer state from its log, and the retries are still
recognised. The sequence and epoch rules of ``ProducerAppendInfo`` apply at the new leader:
a gap is OUT_OF_ORDER_SEQUENCE_NUMBER, a new epoch must start at sequence 0, an older epoch
is INVALID_PRODUCER_EPOCH, and a producer id the partition never saw is accepted at any
sequence (Kafka 2.5+: its batches may have been removed by retention).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as ConfluentPartition
from kafka.protocol.producer import InitProducerIdRequest, ProduceRequest

from kpo_broker.protocol.client import BrokerClient
from kpo_devenv.kafka_cluster import KafkaCluster
from kpo_kafka.topic_partition import TopicPartition
from tests.integration.broker.conftest import ClusterFactory, wait_cluster_ready, wait_for
from tests.integration.broker.server.helpers import create_topic, leaders, zk_client
from tests.unit.broker.log.batches import make_batch

pytestmark = pytest.mark.integration

TOPIC = "idempotent-failover"
NONE = 0
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47

_Topic = ProduceRequest.TopicProduceData
_Partition = _Topic.PartitionProduceData


def _port(cluster: KafkaCluster, broker_id: int) -> int:
    return int(cluster.brokers[broker_id].bootstrap.rsplit(":", 1)[1])


def _request(port: int, request: Any, version: int) -> Any:
    async def send() -> Any:
        client = BrokerClient("127.0.0.1", port, "idempotent-raw", 30000)
        try:
            return await client.send(request, version)
        finally:
            await client.close()

    return asyncio.run(send())


def _init_producer_id(cluster: KafkaCluster, broker_id: int) -> tuple[int, int]:
    request = InitProducerIdRequest(
        transactional_id=None, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1
    )
    response = _request(_port(cluster, broker_id), request, 4)
    assert response.error_code == NONE, response
    return response.producer_id, response.producer_epoch


def _produce(cluster: KafkaCluster, broker_id: int, batch: bytes) -> tuple[int, int]:
    """Send one batch to partition 0 of :data:`TOPIC` with acks=all (see :func:`_produce_to`)."""
    return _produce_to(cluster, broker_id, TOPIC, batch)


def _batch(pid: int, epoch: int, sequence: int, values: Sequence[bytes]) -> bytes:
    return make_batch(
        list(values),
        timestamp_ms=int(time.time() * 1000),
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=sequence,
    )


def _leader(cluster: KafkaCluster) -> int:
    return leaders(cluster, TOPIC)[0]


def _wait_full_isr(cluster: KafkaCluster) -> None:
    def full() -> bool:
        zk = zk_client(cluster)
        try:
            state = zk.get_partition_states([TopicPartition(TOPIC, 0)])[TopicPartition(TOPIC, 0)]
        finally:
            zk.close()
        return len(state.leader_and_isr.isr) == len(cluster.brokers)

    wait_for(full, 90, "a full ISR")


def _read_values(cluster: KafkaCluster) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": f"idempotent-check-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.assign([ConfluentPartition(TOPIC, 0, 0)])
    values: list[bytes] = []
    idle = 0
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline and idle < 6:
            msg = consumer.poll(0.5)
            if msg is None:
                idle += 1
                continue
            if msg.error() is None:
                idle = 0
                values.append(msg.value())
    finally:
        consumer.close()
    return values


def test_retries_after_a_leader_kill_and_restarts_are_answered_with_the_original_offsets(
    kafka_cluster_factory: ClusterFactory,
) -> None:
    cluster = kafka_cluster_factory(3)
    create_topic(cluster, TOPIC, 1, 3, configs={"min.insync.replicas": "2"})
    _wait_full_isr(cluster)
    first = _leader(cluster)
    pid, epoch = _init_producer_id(cluster, first)

    # Six batches, so the first falls out of the 5 batches remembered per producer.
    batches = [_batch(pid, epoch, 2 * i, [b"a%d" % i, b"b%d" % i]) for i in range(6)]
    offsets = []
    for batch in batches:
        error, offset = _produce(cluster, first, batch)
        assert error == NONE
        offsets.append(offset)
    assert offsets == [0, 2, 4, 6, 8, 10]

    # The answers were "lost": the leader dies, a follower that replicated them takes over.
    cluster.brokers[first].kill()
    wait_for(lambda: _leader(cluster) != first, 60, "a new leader")
    second = _leader(cluster)
    for index in (5, 1, 4):  # the retried batches, in any order among the last five
        assert _produce(cluster, second, batches[index]) == (NONE, offsets[index])

    # The sequence and epoch rules hold at the new leader.
    assert _produce(cluster, second, _batch(pid, epoch, 14, [b"gap"]))[0] == (
        OUT_OF_ORDER_SEQUENCE_NUMBER
    )
    assert _produce(cluster, second, _batch(pid, epoch + 1, 5, [b"bumped"]))[0] == (
        OUT_OF_ORDER_SEQUENCE_NUMBER
    )
    bumped = _batch(pid, epoch + 1, 0, [b"c0", b"c1"])
    error, bumped_offset = _produce(cluster, second, bumped)
    assert (error, bumped_offset) == (NONE, 12)
    assert _produce(cluster, second, _batch(pid, epoch, 12, [b"zombie"]))[0] == (
        INVALID_PRODUCER_EPOCH
    )
    # A producer id the partition never saw may start at any sequence (Kafka 2.5+).
    other_pid, other_epoch = _init_producer_id(cluster, second)
    assert other_pid != pid
    assert _produce(cluster, second, _batch(other_pid, other_epoch, 7, [b"o7"])) == (NONE, 14)

    # Every broker restarts: the producer state is rebuilt from each log.
    cluster.brokers[first].start()
    _wait_full_isr(cluster)
    for broker in cluster.brokers.values():
        broker.stop()
    for broker in cluster.brokers.values():
        broker.start()
    wait_cluster_ready(cluster)
    _wait_full_isr(cluster)
    third = _leader(cluster)
    assert _produce(cluster, third, bumped) == (NONE, bumped_offset)
    assert _produce(cluster, third, _batch(other_pid, other_epoch, 7, [b"o7"])) == (NONE, 14)
    assert _produce(cluster, third, _batch(pid, epoch + 1, 2, [b"c2"])) == (NONE, 15)
    assert _produce(cluster, third, _batch(other_pid, other_epoch, 9, [b"o9"]))[0] == (
        OUT_OF_ORDER_SEQUENCE_NUMBER
    )

    values = _read_values(cluster)
    expected = [v for i in range(6) for v in (b"a%d" % i, b"b%d" % i)]
    assert values == [*expected, b"c0", b"c1", b"o7", b"c2"]


def _partition_state(cluster: KafkaCluster, topic: str) -> tuple[int, int, tuple[int, ...]]:
    """(leader, leader epoch, ISR) of partition 0 of ``topic`` in ZooKeeper."""
    tp = TopicPartition(topic, 0)
    zk = zk_client(cluster)
    try:
        lai = zk.get_partition_states([tp])[tp].leader_and_isr
    finally:
        zk.close()
    return lai.leader, lai.leader_epoch, tuple(lai.isr)


def test_a_write_waiting_for_a_dead_follower_is_acknowledged_once_the_controller_drops_it(
    kafka_cluster_factory: ClusterFactory,
) -> None:
    """The leader stays while the controller removes a dead follower under a new leader epoch.

    Kafka's DelayedProduce keeps waiting and acknowledges the write once the smaller ISR
    has it. Answering NOT_LEADER_OR_FOLLOWER instead (the leader epoch changed) tells the
    idempotent producer the batch was not written although it was: librdkafka then treats
    it as not persisted and, after any later epoch bump, sends it again under the new
    epoch, where no broker can recognise it (duplicates in the fault suite).
    """
    # Only the controller removes the dead follower (the leader's own lag check is later).
    cluster = kafka_cluster_factory(3, properties={"replica.lag.time.max.ms": "120000"})
    topic = "dead-follower"
    create_topic(cluster, topic, configs={"min.insync.replicas": "2"}, assignment={0: [0, 1, 2]})
    wait_for(lambda: _partition_state(cluster, topic)[2] == (0, 1, 2), 60, "a full ISR")
    leader, epoch_before, _isr = _partition_state(cluster, topic)
    assert leader == 0
    zk = zk_client(cluster)
    try:
        controller = zk.get_controller_id()
    finally:
        zk.close()
    follower = 2 if controller != 2 else 1
    pid, producer_epoch = _init_producer_id(cluster, leader)

    cluster.brokers[follower].kill()
    batch = _batch(pid, producer_epoch, 0, [b"w0", b"w1"])
    request = ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=60000,
        topic_data=[_Topic(name=topic, partition_data=[_Partition(0, batch)])],
    )
    answer = _request(_port(cluster, leader), request, 9).responses[0].partition_responses[0]
    leader_after, epoch_after, isr_after = _partition_state(cluster, topic)
    assert (leader_after, follower in isr_after) == (0, False)
    assert epoch_after > epoch_before  # the controller's ISR removal bumped the epoch
    assert (answer.error_code, answer.base_offset) == (NONE, 0)
    # The batch was written once: its retry is a duplicate, the next batch follows it.
    assert _produce_to(cluster, leader, topic, batch) == (NONE, 0)
    assert _produce_to(cluster, leader, topic, _batch(pid, producer_epoch, 2, [b"w2"])) == (
        NONE,
        2,
    )


def _produce_to(cluster: KafkaCluster, broker_id: int, topic: str, batch: bytes) -> tuple[int, int]:
    request = ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=15000,
        topic_data=[_Topic(name=topic, partition_data=[_Partition(0, batch)])],
    )
    answer = _request(_port(cluster, broker_id), request, 9).responses[0].partition_responses[0]
    return answer.error_code, answer.base_offset
