"""Leader and controller failures on real broker processes (kill -9).

As Kafka's KafkaController.onBrokerFailure and onBrokerStartup, with the ISR and high
watermark rules of Kafka's Partition.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from typing import Any

import pytest
from kafka import KafkaProducer
from kafka.errors import KafkaTimeoutError
from kafka.protocol.metadata import MetadataRequest

from kpo_broker.protocol.client import BrokerClient
from kpo_broker.protocol.errors import ProtocolError
from kpo_broker.protocol.interbroker import LeaderAndIsrRequest
from tests.integration.broker.conftest import ClusterFactory, wait_cluster_ready, wait_for
from tests.integration.broker.server.helpers import (
    consume_all,
    create_topic,
    describe,
    leaders,
    zk_client,
)

pytestmark = pytest.mark.integration


def test_killing_a_leader_under_acks_all_loses_and_duplicates_nothing(
    kafka_cluster_factory: ClusterFactory,
) -> None:
    cluster = kafka_cluster_factory(3)
    create_topic(cluster, "payments", partitions=3, rf=3, configs={"min.insync.replicas": "2"})
    victim = leaders(cluster, "payments")[0]
    acked: dict[int, list[bytes]] = {0: [], 1: [], 2: []}
    errors: list[BaseException] = []
    stop = threading.Event()

    def produce() -> None:
        producer = KafkaProducer(
            bootstrap_servers=cluster.bootstrap_servers,
            acks="all",
            linger_ms=2,
            retries=2**31 - 1,
            request_timeout_ms=15000,
            delivery_timeout_ms=120000,
        )
        i = 0
        try:
            while not stop.is_set() or i < 600:
                partition = i % 3
                value = f"p{partition}-{i}".encode()
                try:
                    metadata = producer.send("payments", value=value, partition=partition).get(60)
                except BaseException as exc:
                    errors.append(exc)
                    return
                acked[metadata.partition].append(value)
                i += 1
                if i >= 3000:
                    return
        finally:
            # Bounded: kafka-python 3.0's sender thread can loop on an IllegalStateError for an
            # in-flight batch that completed during the leader's death, and an unbounded
            # close() would then wait forever (every record was already acknowledged or failed).
            with contextlib.suppress(KafkaTimeoutError):
                producer.close(timeout=30)

    thread = threading.Thread(target=produce)
    thread.start()
    wait_for(lambda: sum(len(v) for v in acked.values()) >= 150, 60, "records before the kill")
    cluster.brokers[victim].kill()
    wait_for(
        lambda: leaders(cluster, "payments").get(0, victim) != victim, 60, "a new leader of p0"
    )
    stop.set()
    thread.join(180)
    assert not thread.is_alive()
    assert errors == []
    total = sum(len(v) for v in acked.values())
    assert total >= 600
    got = consume_all(cluster, "payments", 3, total)
    for partition in range(3):
        assert got[partition] == acked[partition], f"partition {partition} differs"


def test_controller_failover_bumps_the_epoch_and_fences_the_old_controller(
    kafka_cluster_factory: ClusterFactory,
) -> None:
    cluster = kafka_cluster_factory(3)
    create_topic(cluster, "audit", partitions=3, rf=2)
    zk = zk_client(cluster)
    try:
        old_controller = zk.get_controller_id()
        old_epoch = zk.get_controller_epoch()
        assert old_controller is not None and old_epoch is not None
        cluster.brokers[old_controller].kill()

        def new_controller() -> bool:
            cid = zk.get_controller_id()
            epoch = zk.get_controller_epoch()
            return (
                cid not in (None, old_controller)
                and epoch is not None
                and (epoch.epoch == old_epoch.epoch + 1)
            )

        wait_for(new_controller, 60, "a new controller with epoch + 1")
        controller = zk.get_controller_id()
        assert controller is not None
    finally:
        zk.close()
    wait_cluster_ready(cluster)
    # A later broker failure is still handled by the new controller.
    survivors = [b for b in cluster.brokers if b not in (old_controller, controller)]
    victim = survivors[0]
    cluster.brokers[victim].kill()
    wait_for(
        lambda: all(
            p["leader_id"] not in (victim, old_controller) and p["leader_id"] >= 0
            for p in describe(cluster, "audit")
            if set(p["replica_nodes"]) - {victim, old_controller}
        ),
        60,
        "leaders moved off the killed brokers",
    )
    # A request carrying the old controller epoch is rejected as stale.
    broker = cluster.brokers[controller]
    assert _send_leader_and_isr(broker.port, old_epoch.epoch) == 11  # STALE_CONTROLLER_EPOCH


def _send_leader_and_isr(port: int, controller_epoch: int) -> int:
    async def send() -> int:
        client = BrokerClient("127.0.0.1", port, "stale-controller")
        try:
            request = LeaderAndIsrRequest(
                controller_id=99,
                controller_epoch=controller_epoch,
                broker_epoch=-1,
                topic_states=[],
                live_leaders=[],
            )
            response = await client.send(request, 4)
            return int(response.error_code)
        finally:
            await client.close()

    return asyncio.run(send())


def test_restarted_follower_catches_up_and_rejoins_the_isr(
    kafka_cluster_factory: ClusterFactory,
) -> None:
    cluster = kafka_cluster_factory(3)
    create_topic(cluster, "ledger", partitions=1, rf=3, configs={"min.insync.replicas": "2"})
    leader = leaders(cluster, "ledger")[0]
    follower = next(b for b in cluster.brokers if b != leader)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all")
    values = [f"r{i}".encode() for i in range(400)]
    for value in values[:200]:
        producer.send("ledger", value=value, partition=0)
    producer.flush(60)
    cluster.brokers[follower].kill()
    for value in values[200:]:
        producer.send("ledger", value=value, partition=0)
    producer.flush(60)
    producer.close()
    wait_for(
        lambda: follower not in describe(cluster, "ledger")[0]["isr_nodes"],
        60,
        "the killed follower out of the ISR",
    )
    cluster.brokers[follower].start()
    wait_for(
        lambda: follower in describe(cluster, "ledger")[0]["isr_nodes"],
        90,
        "the restarted follower back in the ISR",
    )
    # Leave the restarted follower as the only live replica: it must hold everything.
    for broker_id in cluster.brokers:
        if broker_id != follower:
            cluster.brokers[broker_id].stop()
    wait_for(lambda: leaders(cluster, "ledger").get(0) == follower, 60, "the follower leading")
    assert consume_all(cluster, "ledger", 1, 400)[0] == values


def test_a_restarted_broker_answers_clients_only_with_the_clusters_metadata(
    kafka_cluster_factory: ClusterFactory,
) -> None:
    """Restarted at once after kill -9, a broker waits out its old registration (its
    ZooKeeper session lives on until it expires), then the controller's UpdateMetadata.

    A client asking it for metadata meanwhile is answered only with the cluster's: every
    broker and the topic. Answered from the empty cache, it would be told of no brokers
    and INVALID_REPLICATION_FACTOR for the topic (auto-created with no live broker), and
    librdkafka would drop every broker it knew.
    """
    cluster = kafka_cluster_factory(3)
    create_topic(cluster, "ledger", partitions=3, rf=3)
    victim = cluster.brokers[1]
    victim.kill()
    victim.start()  # returns once the port accepts connections
    answers = _metadata_answers(victim.port, "ledger", seconds=15)
    assert answers, "no Metadata answer within 15 s"
    assert all(a == ([0, 1, 2], 0, 3) for a in answers), answers


def _metadata_answers(port: int, topic: str, seconds: float) -> list[tuple[list[int], int, int]]:
    """(broker ids, topic error code, partition count) of each Metadata answer from ``port``.

    Asks as librdkafka does on connecting (v9, auto-creation allowed), on a new connection
    each time, for ``seconds``.
    """

    async def ask() -> list[tuple[list[int], int, int]]:
        answers: list[tuple[list[int], int, int]] = []
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            client = BrokerClient("127.0.0.1", port, "rdkafka-like", request_timeout_ms=20000)
            try:
                request = MetadataRequest(
                    topics=[MetadataRequest.MetadataRequestTopic(name=topic, topic_id=None)],
                    allow_auto_topic_creation=True,
                    include_cluster_authorized_operations=False,
                    include_topic_authorized_operations=False,
                )
                response: Any = await client.send(request, 9)
            except ProtocolError:
                await asyncio.sleep(0.05)
                continue
            finally:
                await client.close()
            [entry] = response.topics
            answers.append(
                (
                    sorted(b.node_id for b in response.brokers),
                    entry.error_code,
                    len(entry.partitions),
                )
            )
            await asyncio.sleep(0.1)
        return answers

    return asyncio.run(ask())
