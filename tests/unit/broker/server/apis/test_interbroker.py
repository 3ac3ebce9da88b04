"""The LeaderAndIsr handler moves partitions between fetchers and shuts down idle ones.

Kafka's ReplicaManager.becomeLeaderOrFollower: partitions that leave a fetcher are
removed from it, then ``shutdownIdleFetcherThreads`` stops fetchers left without any.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from kpo_broker.protocol.interbroker import (
    LeaderAndIsrLiveLeader,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrTopicState,
    UpdateMetadataRequest,
)
from kpo_broker.server.apis.interbroker import handle_leader_and_isr, handle_update_metadata
from kpo_broker.server.auth_helper import AuthHelper
from kpo_broker.server.fetcher import FetcherSettings, ReplicaFetcherManager
from kpo_broker.server.metadata_cache import BrokerInfo, MetadataCache
from kpo_broker.server.request_context import RequestContext
from kpo_broker.zk.model import ControllerEpoch, EndPoint
from kpo_kafka.topic_partition import TopicPartition
from tests.unit.broker.server.replicas import (
    InProcessLeaders,
    OpenBroker,
    eventually,
    hosted,
    leader_and_isr,
)

TP = TopicPartition("orders", 0)
OTHER = TopicPartition("orders", 1)
VERSION = 4
LEADER_AND_ISR = 4


def _request(
    network: InProcessLeaders, states: dict[TopicPartition, tuple[int, int, list[int]]]
) -> Any:
    """A LeaderAndIsr request: tp -> (leader, leader epoch, replicas = ISR)."""
    return LeaderAndIsrRequest(
        version=VERSION,
        controller_id=0,
        controller_epoch=1,
        broker_epoch=10,
        topic_states=[
            LeaderAndIsrTopicState(
                topic_name="orders",
                partition_states=[
                    LeaderAndIsrPartitionState(
                        partition_index=tp.partition,
                        controller_epoch=1,
                        leader=leader,
                        leader_epoch=epoch,
                        isr=replicas,
                        zk_version=0,
                        replicas=replicas,
                        adding_replicas=[],
                        removing_replicas=[],
                        is_new=False,
                    )
                    for tp, (leader, epoch, replicas) in states.items()
                ],
            )
        ],
        live_leaders=[
            LeaderAndIsrLiveLeader(broker_id=rm.broker_id, host_name=host, port=port)
            for (host, port), rm in network.leaders.items()
        ],
    )


def test_a_fetcher_left_without_partitions_is_shut_down(
    open_broker: OpenBroker, network: InProcessLeaders
) -> None:
    leader0, leader2, this = open_broker(0), open_broker(2), open_broker(1)
    leader0.become_leader_or_follower(1, {TP: leader_and_isr(0, (0, 1), leader_epoch=1)})
    leader2.become_leader_or_follower(1, {OTHER: leader_and_isr(2, (2, 1), leader_epoch=1)})
    address0, address2 = network.add(leader0), network.add(leader2)
    fetchers = ReplicaFetcherManager(1, this, FetcherSettings(max_wait_ms=20, backoff_ms=20))
    broker = SimpleNamespace(
        broker_id=1,
        broker_epoch=10,
        topic_configs=SimpleNamespace(knows=lambda _topic: True),
        replica_manager=this,
        fetchers=fetchers,
        metadata_cache=MetadataCache(),
        zk=SimpleNamespace(get_controller_epoch=lambda: ControllerEpoch(1, 0)),
        group_coordinator=None,
        auth=AuthHelper(),
    )
    ctx = RequestContext(LEADER_AND_ISR, VERSION, 1, "controller", "PLAINTEXT")

    async def scenario() -> None:
        try:
            first = await handle_leader_and_isr(
                broker, ctx, _request(network, {TP: (0, 1, [0, 1]), OTHER: (2, 1, [2, 1])})
            )
            assert [e.error_code for e in first.partition_errors] == [0, 0]
            assert set(fetchers.fetchers) == {(0, 0, address0), (2, 0, address2)}
            await eventually(lambda: len(network.connections) == 2)
            # This broker is elected leader of orders-1: broker 2's fetcher has nothing left.
            second = await handle_leader_and_isr(
                broker, ctx, _request(network, {OTHER: (1, 2, [1, 2])})
            )
            assert [e.error_code for e in second.partition_errors] == [0]
            assert set(fetchers.fetchers) == {(0, 0, address0)}
            assert [c.closed for c in network.connections if c.address == address2] == [True]
            assert hosted(this, OTHER).is_leader
            assert TP in fetchers.fetchers[(0, 0, address0)].partitions
        finally:
            await fetchers.shutdown()

    asyncio.run(scenario())


def test_a_controller_epoch_unknown_to_zookeeper_is_refused() -> None:
    """A stray UpdateMetadata claiming a future epoch would fence out the real controller."""
    live = BrokerInfo(1, (EndPoint("PLAINTEXT", "h", 9092),), None)
    cache = MetadataCache(controller_epoch=1, controller_id=1, brokers={1: live})
    broker = SimpleNamespace(
        broker_epoch=10,
        metadata_cache=cache,
        zk=SimpleNamespace(get_controller_epoch=lambda: ControllerEpoch(2, 1)),
        group_coordinator=None,
        auth=AuthHelper(),
    )
    ctx = RequestContext(6, 0, 1, "stray", "PLAINTEXT")

    def update(epoch: int) -> Any:
        request = UpdateMetadataRequest[0](
            controller_id=7, controller_epoch=epoch, ungrouped_partition_states=[], live_brokers=[]
        )
        return asyncio.run(handle_update_metadata(broker, ctx, request))  # type: ignore[arg-type]

    assert update(2_000_000_000).error_code == 11  # STALE_CONTROLLER_EPOCH
    assert (cache.controller_epoch, set(cache.brokers)) == (1, {1})
    assert update(2).error_code == 0  # the epoch ZooKeeper recorded: a new controller
    assert (cache.controller_epoch, cache.brokers) == (2, {})
