"""Leaders change their ISRs through the controller with AlterPartition (KIP-497).

Real brokers: a follower back from a restart rejoins the ISR of every partition it
follows in a few AlterPartition requests (one per batch, not one per partition), and
the controller answers AlterPartition on the wire as Kafka's does: the current state
for a change already applied (v3, topics by id), STALE_BROKER_EPOCH for a request
under an old broker epoch, NOT_CONTROLLER from any other broker.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kafka import errors as kafka_errors

from kpo_broker.protocol.client import BrokerClient
from kpo_broker.protocol.interbroker import AlterPartitionRequest
from kpo_broker.zk.data import topic_id_to_uuid
from kpo_devenv.kafka_cluster import KafkaCluster
from kpo_kafka.topic_partition import TopicPartition
from tests.integration.broker.conftest import ClusterFactory, wait_for
from tests.integration.broker.server.helpers import create_topic, describe, zk_client
from tests.integration.broker.server.test_fetch_sessions import metric

pytestmark = pytest.mark.integration

REQUESTS = "kafka_network_requestmetrics_requests_total"


def alter_partition(cluster: KafkaCluster, broker_id: int, request: Any, version: int) -> Any:
    """Send ``request`` to ``broker_id`` and return the decoded response."""

    async def send() -> Any:
        port = cluster.brokers[broker_id].port
        client = BrokerClient("127.0.0.1", port, "alter-partition-test")
        try:
            return await client.send(request, version)
        finally:
            await client.close()

    return asyncio.run(send())


def in_sync(cluster: KafkaCluster, topic: str, isr: list[int]) -> bool:
    return all(sorted(p["isr_nodes"]) == isr for p in describe(cluster, topic))


def test_a_restarted_follower_rejoins_every_isr_in_a_few_requests(
    kafka_cluster_factory: ClusterFactory,
) -> None:
    cluster = kafka_cluster_factory(2, metrics=True)
    partitions = 300
    create_topic(cluster, "rejoin", assignment={p: [0, 1] for p in range(partitions)})
    wait_for(lambda: in_sync(cluster, "rejoin", [0, 1]), 60, "both replicas in sync")

    cluster.brokers[1].stop()  # controlled shutdown: the controller takes 1 out of the ISRs
    wait_for(lambda: in_sync(cluster, "rejoin", [0]), 60, "ISRs without broker 1")
    before = sum(metric(cluster, b, REQUESTS, request="AlterPartition") for b in (0,))
    cluster.brokers[1].start()
    wait_for(lambda: in_sync(cluster, "rejoin", [0, 1]), 60, "broker 1 back in every ISR")

    # Broker 0 leads every partition; the requests went to the controller (0 or 1).
    sent = sum(metric(cluster, b, REQUESTS, request="AlterPartition") for b in (0, 1)) - before
    assert 1 <= sent <= partitions / 10, sent
    with zk_client(cluster) as zk:
        assert zk.get_isr_change_notifications() == []  # nothing written the old way


def test_the_controller_answers_alter_partition_as_kafka_does(
    kafka_cluster_factory: ClusterFactory,
) -> None:
    cluster = kafka_cluster_factory(2)
    create_topic(cluster, "answers", assignment={0: [0, 1]})
    wait_for(lambda: in_sync(cluster, "answers", [0, 1]), 60, "in sync")
    tp = TopicPartition("answers", 0)
    with zk_client(cluster) as zk:
        controller = zk.get_controller_id()
        state = zk.get_partition_states([tp])[tp].leader_and_isr
        topic_id = zk.get_replica_assignments(["answers"])["answers"].topic_id
        epochs = {b: zk.get_broker(b).epoch for b in (0, 1)}  # type: ignore[union-attr]
    assert controller is not None
    other = 1 - controller
    topic = AlterPartitionRequest.TopicData
    partition = topic.PartitionData

    def request(broker_epoch: int) -> Any:
        members = [partition.BrokerState(broker_id=b, broker_epoch=epochs[b]) for b in (0, 1)]
        entry = partition(
            partition_index=0,
            leader_epoch=state.leader_epoch,
            new_isr_with_epochs=[m for m in members if m.broker_id in state.isr],
            leader_recovery_state=0,
            partition_epoch=state.partition_epoch,
        )
        return AlterPartitionRequest(
            broker_id=state.leader,
            broker_epoch=broker_epoch,
            topics=[topic(topic_id=topic_id_to_uuid(topic_id), partitions=[entry])],
        )

    # The change is the current state: answered with it, nothing written.
    answer = alter_partition(cluster, controller, request(epochs[state.leader]), 3)
    assert answer.error_code == 0
    [topic_answer] = answer.topics
    assert topic_answer.topic_id == topic_id_to_uuid(topic_id)
    [p] = topic_answer.partitions
    assert (p.error_code, p.leader_id, p.leader_epoch, sorted(p.isr), p.partition_epoch) == (
        0,
        state.leader,
        state.leader_epoch,
        sorted(state.isr),
        state.partition_epoch,
    )

    stale = alter_partition(cluster, controller, request(epochs[state.leader] - 1), 3)
    assert stale.error_code == kafka_errors.StaleBrokerEpochError.errno
    not_controller = alter_partition(cluster, other, request(epochs[state.leader]), 3)
    assert not_controller.error_code == kafka_errors.NotControllerError.errno
    with zk_client(cluster) as zk:
        assert zk.get_partition_states([tp])[tp].leader_and_isr == state
