"""A new group's join takes ``group.initial.rebalance.delay.ms`` and nothing more (real brokers).

Kafka's GroupCoordinator holds the JoinGroup of an Empty group's first member for the
initial delay (``InitialDelayedJoin``), extends it only when another member joins during
it, and answers SyncGroup as soon as the leader's assignment is stored. The brokers here
keep Kafka's default delay (3000 ms): a lone member is answered after 3 s, well before a
second step (6 s) or any extra wait of the coordinator would end.

Timing bounds: a timer never fires early, so the lower bound is exact; the upper bound is
the delay plus :data:`MARGIN_S` (a few request round trips on a loaded machine, far less
than the second step a wrong timer would take). ``__consumer_offsets`` is created and the
group's coordinator found before any clock starts, so its creation is not measured.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer
from kafka.protocol.consumer.group import JoinGroupRequest, SyncGroupRequest
from kafka.protocol.metadata import FindCoordinatorRequest

from kpo_broker.coordinator.group.errors import Errors
from kpo_broker.protocol.client import BrokerClient
from kpo_devenv import ZooKeeperServer
from kpo_devenv.kafka_cluster import KafkaCluster
from tests.integration.broker.conftest import wait_cluster_ready, wait_for
from tests.integration.broker.server.helpers import create_topic

pytestmark = pytest.mark.integration

#: Kafka's default ``group.initial.rebalance.delay.ms``, left unset on the brokers.
DELAY_S = 3.0
#: Time a join may take beyond the delay: client and broker round trips under load.
MARGIN_S = 2.0
TOPIC = "join-delay"
PROPERTIES = {"offsets.topic.num.partitions": "3", "offsets.topic.replication.factor": "3"}
JOIN_VERSION = 5  # KIP-394: a JoinGroup without member id gets MEMBER_ID_REQUIRED
SYNC_VERSION = 3


@pytest.fixture(scope="module")
def cluster(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KafkaCluster]:
    """Three brokers with Kafka's default group settings and a 3-partition RF 3 topic."""
    chroot = f"join-delay-{uuid.uuid4().hex[:8]}"
    kafka = KafkaCluster(
        tmp_path_factory.mktemp(chroot), f"{zookeeper.connect_string}/{chroot}", 3, PROPERTIES
    )
    kafka.start()
    try:
        wait_cluster_ready(kafka)
        create_topic(kafka, TOPIC, partitions=3, rf=3)
        yield kafka
    finally:
        kafka.stop()


async def _send(port: int, request: Any, version: int) -> Any:
    client = BrokerClient("127.0.0.1", port, "join-delay-test", 60000)
    try:
        return await client.send(request, version)
    finally:
        await client.close()


def coordinator_port(cluster: KafkaCluster, group_id: str) -> int:
    """Wait until the group's coordinator is found and loaded; return its port."""
    found: list[int] = []

    def ready() -> bool:
        request = FindCoordinatorRequest(key=group_id, key_type=0)
        response = asyncio.run(_send(cluster.brokers[0].port, request, 2))
        if response.error_code != Errors.NONE:
            return False
        found[:] = [response.port]
        return True

    # Creating __consumer_offsets (first group of the module) takes a few seconds.
    wait_for(ready, 90, f"the coordinator of {group_id}")
    return found[0]


def _join(group_id: str, member_id: str) -> JoinGroupRequest:
    protocol = JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")
    return JoinGroupRequest(
        group_id=group_id,
        session_timeout_ms=10000,
        rebalance_timeout_ms=60000,
        member_id=member_id,
        group_instance_id=None,
        protocol_type="consumer",
        protocols=[protocol],
    )


def test_lone_member_join_is_held_for_the_initial_delay_only(cluster: KafkaCluster) -> None:
    """JoinGroup and SyncGroup on the wire: the broker's own hold time, one round trip each."""
    group_id = f"raw-{uuid.uuid4().hex[:8]}"
    port = coordinator_port(cluster, group_id)

    async def scenario() -> tuple[Any, float, Any, float]:
        client = BrokerClient("127.0.0.1", port, "join-delay-test", 60000)
        try:
            started = time.monotonic()
            first = await client.send(_join(group_id, ""), JOIN_VERSION)
            assert first.error_code == Errors.MEMBER_ID_REQUIRED and first.member_id
            assert time.monotonic() - started < MARGIN_S  # answered at once, not held
            started = time.monotonic()
            joined = await client.send(_join(group_id, first.member_id), JOIN_VERSION)
            join_s = time.monotonic() - started
            assignment = SyncGroupRequest.SyncGroupRequestAssignment(
                member_id=first.member_id, assignment=b"all"
            )
            sync = SyncGroupRequest(
                group_id=group_id,
                generation_id=joined.generation_id,
                member_id=first.member_id,
                group_instance_id=None,
                assignments=[assignment],
            )
            started = time.monotonic()
            synced = await client.send(sync, SYNC_VERSION)
            return joined, join_s, synced, time.monotonic() - started
        finally:
            await client.close()

    joined, join_s, synced, sync_s = asyncio.run(scenario())
    assert joined.error_code == Errors.NONE
    assert joined.generation_id == 1 and joined.leader == joined.member_id
    assert DELAY_S <= join_s < DELAY_S + MARGIN_S, f"JoinGroup answered after {join_s:.3f} s"
    assert synced.error_code == Errors.NONE and synced.assignment == b"all"
    assert sync_s < MARGIN_S, f"SyncGroup answered after {sync_s:.3f} s"


def test_consumer_is_assigned_one_initial_delay_after_subscribing(cluster: KafkaCluster) -> None:
    """confluent-kafka's ``subscribe()`` to ``on_assign``: the delay plus a few round trips."""
    group_id = f"client-{uuid.uuid4().hex[:8]}"
    coordinator_port(cluster, group_id)
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": group_id,
            "auto.offset.reset": "earliest",
        }
    )
    assigned: list[float] = []
    try:
        started = time.monotonic()
        consumer.subscribe([TOPIC], on_assign=lambda _c, _p: assigned.append(time.monotonic()))
        deadline = started + 60
        while not assigned and time.monotonic() < deadline:
            consumer.poll(0.05)
        assert assigned, "no assignment within 60 s"
        assignment = {tp.partition for tp in consumer.assignment()}
    finally:
        consumer.close()
    join_s = assigned[0] - started
    assert assignment == {0, 1, 2}
    assert DELAY_S <= join_s < DELAY_S + MARGIN_S, f"assigned after {join_s:.3f} s"
