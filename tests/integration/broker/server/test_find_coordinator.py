"""FindCoordinator on real brokers: the offsets topic waits for enough brokers; batched keys."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kafka.protocol.metadata import FindCoordinatorRequest

from kpo_broker.coordinator.group.errors import Errors
from kpo_broker.coordinator.group.records import partition_for
from kpo_broker.protocol.client import BrokerClient
from tests.integration.broker.conftest import ClusterFactory, wait_cluster_ready, wait_for
from tests.integration.broker.server.helpers import leaders, zk_client

pytestmark = pytest.mark.integration

PARTITIONS = 4


def find_coordinator(port: int, keys: list[str], version: int) -> Any:
    """Send one FindCoordinator (group keys) to the broker on ``port``; return the response."""

    async def send() -> Any:
        client = BrokerClient("127.0.0.1", port, "find-coordinator", 30000)
        try:
            if version >= 4:
                request = FindCoordinatorRequest(key_type=0, coordinator_keys=keys)
            else:
                request = FindCoordinatorRequest(key=keys[0], key_type=0)
            return await client.send(request, version)
        finally:
            await client.close()

    return asyncio.run(send())


def test_offsets_topic_waits_for_its_replication_factor(
    kafka_cluster_factory: ClusterFactory,
) -> None:
    """With fewer live brokers than ``offsets.topic.replication.factor`` nothing is created."""
    cluster = kafka_cluster_factory(
        3,
        {"offsets.topic.num.partitions": str(PARTITIONS), "offsets.topic.replication.factor": "3"},
    )
    for broker_id in (1, 2):
        cluster.brokers[broker_id].stop()
    wait_cluster_ready(cluster)
    port = cluster.brokers[0].port
    response = find_coordinator(port, ["g1"], 3)
    assert response.error_code == Errors.COORDINATOR_NOT_AVAILABLE
    assert response.node_id == -1
    zk = zk_client(cluster)
    try:
        assert "__consumer_offsets" not in zk.get_all_topics()
    finally:
        zk.close()

    for broker_id in (1, 2):
        cluster.brokers[broker_id].start()
    wait_cluster_ready(cluster)
    keys = ["g1", "g2", "another-group", "x"]

    def all_found() -> bool:
        response = find_coordinator(port, keys, 4)
        return all(c.error_code == 0 for c in response.coordinators)

    wait_for(all_found, 60, "coordinators of every group")
    batched = find_coordinator(port, keys, 4)
    offsets_leaders = leaders(cluster, "__consumer_offsets")
    assert len(offsets_leaders) == PARTITIONS
    for coordinator in batched.coordinators:
        expected = offsets_leaders[partition_for(coordinator.key, PARTITIONS)]
        assert coordinator.node_id == expected
        assert coordinator.port == cluster.brokers[expected].port
    single = find_coordinator(cluster.brokers[1].port, ["another-group"], 2)
    assert single.error_code == 0
    assert single.node_id == offsets_leaders[partition_for("another-group", PARTITIONS)]
