"""Replica fetchers (Kafka's ReplicaFetcherThread and fetcher manager) against in-process leaders.

Both brokers have real logs; the follower's fetcher talks to the leader's real fetch and
OffsetForLeaderEpoch code through :class:`InProcessLeaders` instead of a socket.
"""

from __future__ import annotations

import asyncio

from kpo_broker.server.fetcher import FetcherSettings, ReplicaFetcherManager
from kpo_broker.server.replica_manager import ReplicaManager, now_ms
from kpo_broker.server.replication_quota import ReplicationQuotaManager, ThrottledReplicas
from kpo_kafka.topic_partition import TopicPartition
from tests.unit.broker.log.batches import decode_records, make_value_batch
from tests.unit.broker.server.replicas import (
    InProcessLeaders,
    OpenBroker,
    eventually,
    hosted,
    leader_and_isr,
)

TP = TopicPartition("orders", 0)
OTHER = TopicPartition("orders", 1)
SETTINGS = FetcherSettings(max_wait_ms=20, backoff_ms=20)


def _produce(rm: ReplicaManager, tp: TopicPartition, count: int, tag: int = 0) -> None:
    """Append ``count`` records as one batch on the leader (acks=1)."""
    hosted(rm, tp).append_records_to_leader(make_value_batch(count, tag=tag), 1, 1, now_ms())


def _records(rm: ReplicaManager, tp: TopicPartition) -> list[tuple[int, bytes | None]]:
    log = hosted(rm, tp).log
    data = log.read(log.log_start_offset, 1 << 24).to_bytes()
    return [(r.offset, r.value) for r in decode_records(data)]


def _follow(
    manager: ReplicaFetcherManager,
    address: tuple[str, int],
    leader: int,
    epoch: int,
    *tps: TopicPartition,
) -> None:
    manager.add_partitions({tp: (leader, epoch, address) for tp in tps})


def test_a_follower_replicates_the_leader_and_joins_the_isr(
    open_broker: OpenBroker, network: InProcessLeaders
) -> None:
    leader = open_broker(0)
    follower = open_broker(1)
    state = leader_and_isr(0, (0, 1), isr=(0,), leader_epoch=1)
    leader.become_leader_or_follower(1, {TP: state})
    follower.become_leader_or_follower(1, {TP: state})
    _produce(leader, TP, 4)
    _produce(leader, TP, 3, tag=50)
    address = network.add(leader)

    async def scenario() -> None:
        manager = ReplicaFetcherManager(1, follower, SETTINGS)
        try:
            _follow(manager, address, 0, 1, TP)
            await eventually(lambda: hosted(leader, TP).isr == (0, 1))
            # Records produced while following arrive too, and commit on both sides.
            _produce(leader, TP, 2, tag=100)
            await eventually(lambda: hosted(follower, TP).high_watermark == 9)
        finally:
            await manager.shutdown()

    asyncio.run(scenario())
    assert _records(follower, TP) == _records(leader, TP)
    assert hosted(leader, TP).high_watermark == 9
    assert hosted(follower, TP).log.leader_epoch_cache.entries == ((1, 0),)
    assert follower.topic_stats.topic("orders").replication_bytes_in == (
        hosted(leader, TP).log.size_in_bytes
    )


def test_a_divergent_follower_truncates_to_the_leader_epoch_end_offset(
    open_broker: OpenBroker, network: InProcessLeaders
) -> None:
    """KIP-101/KIP-279: the old leader's unreplicated tail is replaced by the new leader's."""
    old, new = open_broker(1), open_broker(0)
    epoch1 = leader_and_isr(1, (1, 0), leader_epoch=1)
    old.become_leader_or_follower(1, {TP: epoch1})
    new.become_leader_or_follower(1, {TP: epoch1})
    _produce(old, TP, 5, tag=0)  # offsets 0-4, replicated to broker 0 below
    common = hosted(old, TP).log.read(0, 1 << 20).to_bytes()
    hosted(new, TP).append_records_as_follower(common, leader_high_watermark=5)
    _produce(old, TP, 3, tag=100)  # offsets 5-7 at epoch 1: never replicated
    # Broker 0 is elected under epoch 2 and writes its own offsets 5-7.
    epoch2 = leader_and_isr(0, (1, 0), isr=(0,), leader_epoch=2)
    new.become_leader_or_follower(2, {TP: epoch2})
    _produce(new, TP, 3, tag=200)
    old.become_leader_or_follower(2, {TP: epoch2})
    address = network.add(new)

    async def scenario() -> None:
        manager = ReplicaFetcherManager(1, old, SETTINGS)
        try:
            _follow(manager, address, 0, 2, TP)
            await eventually(lambda: hosted(new, TP).isr == (0, 1))
        finally:
            await manager.shutdown()

    asyncio.run(scenario())
    assert _records(old, TP) == _records(new, TP)
    # Only the new leader's tail was fetched: the common prefix stayed.
    tail = hosted(new, TP).log.read(5, 1 << 20).to_bytes()
    assert old.topic_stats.topic("orders").replication_bytes_in == len(tail)
    assert [value[:1] for _, value in _records(old, TP) if value is not None] == [
        bytes([i]) for i in (0, 1, 2, 3, 4, 200, 201, 202)
    ]
    assert hosted(old, TP).log.leader_epoch_cache.entries == ((1, 0), (2, 5))


def test_a_follower_newer_than_its_leader_waits_for_the_leader_to_catch_up(
    open_broker: OpenBroker, network: InProcessLeaders
) -> None:
    """KIP-320: an epoch the leader does not know yet is retried after the backoff."""
    leader = open_broker(0)
    follower = open_broker(1)
    leader.become_leader_or_follower(1, {TP: leader_and_isr(0, (0, 1), isr=(0,), leader_epoch=1)})
    _produce(leader, TP, 3)
    follower.become_leader_or_follower(1, {TP: leader_and_isr(0, (0, 1), isr=(0,), leader_epoch=2)})
    hosted(follower, TP).log.leader_epoch_cache.assign(1, 0)  # a past epoch it took part in
    address = network.add(leader)

    async def scenario() -> None:
        manager = ReplicaFetcherManager(1, follower, SETTINGS)
        try:
            _follow(manager, address, 0, 2, TP)
            await asyncio.sleep(0.2)
            assert hosted(follower, TP).log_end_offset == 0  # UNKNOWN_LEADER_EPOCH
            assert TP in manager.fetchers[(0, 0, address)].partitions
            leader.become_leader_or_follower(
                1, {TP: leader_and_isr(0, (0, 1), isr=(0,), leader_epoch=2)}
            )
            await eventually(lambda: hosted(follower, TP).log_end_offset == 3)
        finally:
            await manager.shutdown()

    asyncio.run(scenario())


def test_a_partition_the_source_no_longer_leads_backs_off_without_stalling_others(
    open_broker: OpenBroker, network: InProcessLeaders
) -> None:
    leader = open_broker(0)
    follower = open_broker(1)
    state = leader_and_isr(0, (0, 1, 2), isr=(0,), leader_epoch=1)
    leader.become_leader_or_follower(1, {TP: state, OTHER: state})
    follower.become_leader_or_follower(1, {TP: state, OTHER: state})
    address = network.add(leader)

    async def scenario() -> None:
        manager = ReplicaFetcherManager(1, follower, SETTINGS)
        try:
            _follow(manager, address, 0, 1, TP, OTHER)
            _produce(leader, TP, 1)
            _produce(leader, OTHER, 1)
            await eventually(lambda: hosted(follower, OTHER).log_end_offset == 1)
            # Broker 2 took orders-1 over; broker 1 has not heard of it yet.
            leader.become_leader_or_follower(
                1, {OTHER: leader_and_isr(2, (0, 1, 2), isr=(2,), leader_epoch=2)}
            )
            _produce(leader, TP, 1)
            await eventually(lambda: hosted(follower, TP).log_end_offset == 2)
            fetcher = manager.fetchers[(0, 0, address)]
            assert OTHER in fetcher.partitions  # kept, retried after the backoff
            assert fetcher.partitions[OTHER].delayed_until > 0  # NOT_LEADER_OR_FOLLOWER
            assert hosted(follower, OTHER).log_end_offset == 1
        finally:
            await manager.shutdown()

    asyncio.run(scenario())


def test_an_unreachable_leader_is_retried_after_the_backoff(
    open_broker: OpenBroker, network: InProcessLeaders
) -> None:
    leader = open_broker(0)
    follower = open_broker(1)
    state = leader_and_isr(0, (0, 1), isr=(0,), leader_epoch=1)
    leader.become_leader_or_follower(1, {TP: state})
    follower.become_leader_or_follower(1, {TP: state})
    _produce(leader, TP, 3)
    address = network.add(leader)
    network.unreachable.add(address)

    async def scenario() -> None:
        manager = ReplicaFetcherManager(1, follower, SETTINGS)
        try:
            _follow(manager, address, 0, 1, TP)
            await eventually(lambda: len(network.connections) >= 2)  # retried
            assert hosted(follower, TP).log_end_offset == 0
            network.unreachable.clear()
            await eventually(lambda: hosted(follower, TP).log_end_offset == 3)
        finally:
            await manager.shutdown()

    asyncio.run(scenario())


def test_the_follower_quota_holds_back_throttled_out_of_sync_partitions(
    open_broker: OpenBroker, network: InProcessLeaders
) -> None:
    """KIP-73 on the follower side: throttled, out of sync and over quota: not fetched."""
    leader = open_broker(0)
    follower = open_broker(1)
    state = leader_and_isr(0, (0, 1), isr=(0,), leader_epoch=1)
    leader.become_leader_or_follower(1, {TP: state, OTHER: state})
    follower.become_leader_or_follower(1, {TP: state, OTHER: state})
    _produce(leader, TP, 3)
    _produce(leader, OTHER, 3)
    address = network.add(leader)
    quota = ReplicationQuotaManager(quota_bytes_per_second=1)
    quota.mark_throttled("orders", ThrottledReplicas(replicas=frozenset({(0, 1)})))
    quota.record(1000)

    async def scenario() -> None:
        manager = ReplicaFetcherManager(1, follower, SETTINGS, quota=quota)
        try:
            _follow(manager, address, 0, 1, TP, OTHER)
            await eventually(lambda: hosted(follower, OTHER).log_end_offset == 3)
            await asyncio.sleep(0.1)
            assert hosted(follower, TP).log_end_offset == 0  # orders-0 on broker 1 waits
            recorded = quota.total_recorded_bytes
            quota.update_quota(1 << 30)  # the throttle is raised: no longer over quota
            await eventually(lambda: hosted(follower, TP).log_end_offset == 3)
            # Only the throttled partition's bytes count against the follower quota.
            size = hosted(follower, TP).log.size_in_bytes
            assert quota.total_recorded_bytes == recorded + size
        finally:
            await manager.shutdown()

    asyncio.run(scenario())


def test_removed_partitions_are_no_longer_fetched(
    open_broker: OpenBroker, network: InProcessLeaders
) -> None:
    leader = open_broker(0)
    follower = open_broker(1)
    state = leader_and_isr(0, (0, 1), isr=(0,), leader_epoch=1)
    leader.become_leader_or_follower(1, {TP: state, OTHER: state})
    follower.become_leader_or_follower(1, {TP: state, OTHER: state})
    address = network.add(leader)

    async def scenario() -> None:
        manager = ReplicaFetcherManager(1, follower, SETTINGS)
        try:
            _follow(manager, address, 0, 1, TP, OTHER)
            _produce(leader, TP, 1)
            _produce(leader, OTHER, 1)
            await eventually(lambda: hosted(follower, TP).log_end_offset == 1)
            await eventually(lambda: hosted(follower, OTHER).log_end_offset == 1)
            manager.remove_partitions([TP])
            _produce(leader, TP, 1)
            _produce(leader, OTHER, 1)
            await eventually(lambda: hosted(follower, OTHER).log_end_offset == 2)
            await asyncio.sleep(0.1)
            assert hosted(follower, TP).log_end_offset == 1
        finally:
            await manager.shutdown()

    asyncio.run(scenario())


def test_idle_fetchers_are_shut_down_and_busy_ones_keep_fetching(
    open_broker: OpenBroker, network: InProcessLeaders
) -> None:
    """Kafka's shutdownIdleFetcherThreads, after partitions left a fetcher."""
    leader0, leader2 = open_broker(0), open_broker(2)
    follower = open_broker(1)
    from_0 = leader_and_isr(0, (0, 1), isr=(0,), leader_epoch=1)
    from_2 = leader_and_isr(2, (2, 1), isr=(2,), leader_epoch=1)
    leader0.become_leader_or_follower(1, {TP: from_0})
    leader2.become_leader_or_follower(1, {OTHER: from_2})
    follower.become_leader_or_follower(1, {TP: from_0, OTHER: from_2})
    address0, address2 = network.add(leader0), network.add(leader2)

    async def scenario() -> None:
        manager = ReplicaFetcherManager(1, follower, SETTINGS)
        try:
            _follow(manager, address0, 0, 1, TP)
            _follow(manager, address2, 2, 1, OTHER)
            _produce(leader2, OTHER, 1)
            await eventually(lambda: hosted(follower, OTHER).log_end_offset == 1)
            idle = manager.fetchers[(2, 0, address2)]
            connection = next(c for c in network.connections if c.address == address2)
            await manager.shutdown_idle_fetchers()
            assert set(manager.fetchers) == {(0, 0, address0), (2, 0, address2)}  # none idle
            manager.remove_partitions([OTHER])
            await manager.shutdown_idle_fetchers()
            assert set(manager.fetchers) == {(0, 0, address0)}
            assert connection.closed
            assert not [t for t in asyncio.all_tasks() if t.get_name() == "fetcher-2"]
            _produce(leader0, TP, 2)
            await eventually(lambda: hosted(follower, TP).log_end_offset == 2)
            # Following broker 2 again starts a new fetcher.
            _follow(manager, address2, 2, 1, OTHER)
            _produce(leader2, OTHER, 1)
            await eventually(lambda: hosted(follower, OTHER).log_end_offset == 2)
            assert manager.fetchers[(2, 0, address2)] is not idle
        finally:
            await manager.shutdown()
        assert manager.fetchers == {}

    asyncio.run(scenario())


def test_partitions_are_spread_over_num_replica_fetchers_per_leader(
    open_broker: OpenBroker, network: InProcessLeaders
) -> None:
    leader = open_broker(0)
    follower = open_broker(1)
    tps = [TopicPartition("orders", i) for i in range(8)]
    state = leader_and_isr(0, (0, 1), isr=(0,), leader_epoch=1)
    leader.become_leader_or_follower(1, dict.fromkeys(tps, state))
    follower.become_leader_or_follower(1, dict.fromkeys(tps, state))
    address = network.add(leader)

    async def scenario() -> None:
        manager = ReplicaFetcherManager(1, follower, SETTINGS, num_fetchers=3)
        try:
            _follow(manager, address, 0, 1, *tps)
            assert {key[0] for key in manager.fetchers} == {0}
            assert {key[1] for key in manager.fetchers} <= {0, 1, 2}
            followed = [tp for f in manager.fetchers.values() for tp in f.partitions]
            assert sorted(followed) == tps  # each partition in exactly one fetcher
            for tp in tps:
                _produce(leader, tp, 1)
            await eventually(lambda: all(hosted(follower, tp).log_end_offset == 1 for tp in tps))
        finally:
            await manager.shutdown()

    asyncio.run(scenario())


def test_a_follower_behind_the_leader_log_start_restarts_there(
    open_broker: OpenBroker, network: InProcessLeaders
) -> None:
    """The leader deleted what the follower lacks: the follower starts at the leader's start."""
    leader = open_broker(0)
    follower = open_broker(1)
    state = leader_and_isr(0, (0, 1), isr=(0,), leader_epoch=1)
    leader.become_leader_or_follower(1, {TP: state})
    follower.become_leader_or_follower(1, {TP: state})
    for i in range(6):
        _produce(leader, TP, 1, tag=i)
    assert hosted(leader, TP).log.maybe_increment_log_start_offset(4, 6)
    address = network.add(leader)

    async def scenario() -> None:
        manager = ReplicaFetcherManager(1, follower, SETTINGS)
        try:
            _follow(manager, address, 0, 1, TP)
            await eventually(lambda: hosted(follower, TP).log_end_offset == 6, timeout_s=3)
        finally:
            await manager.shutdown()

    asyncio.run(scenario())
    assert hosted(follower, TP).log.log_start_offset == 4
    assert _records(follower, TP) == _records(leader, TP)


def _named(request: object) -> set[TopicPartition]:
    """The partitions a Fetch request names."""
    return {
        TopicPartition(topic.topic, p.partition)
        for topic in request.topics  # type: ignore[attr-defined]
        for p in topic.partitions
    }


def _forgotten(request: object) -> set[TopicPartition]:
    return {
        TopicPartition(topic.topic, index)
        for topic in request.forgotten_topics_data  # type: ignore[attr-defined]
        for index in topic.partitions
    }


def test_an_idle_follower_fetches_incrementally_naming_nothing(
    open_broker: OpenBroker, network: InProcessLeaders
) -> None:
    """KIP-227: after a full fetch, only a partition that moved is named again."""
    leader = open_broker(0)
    follower = open_broker(1)
    state = leader_and_isr(0, (0, 1), leader_epoch=1)
    leader.become_leader_or_follower(1, {TP: state, OTHER: state})
    follower.become_leader_or_follower(1, {TP: state, OTHER: state})
    address = network.add(leader)

    async def scenario() -> None:
        manager = ReplicaFetcherManager(1, follower, SETTINGS)
        try:
            _follow(manager, address, 0, 1, TP, OTHER)
            await eventually(lambda: len(network.fetches) >= 5)
            first, *rest = network.fetches
            assert (first[1].session_id, first[1].session_epoch) == (0, 0)
            assert _named(first[1]) == {TP, OTHER}
            session_id = first[2].session_id
            assert session_id != 0
            for epoch, (_, request, response) in enumerate(rest[:4], start=1):
                assert (request.session_id, request.session_epoch) == (session_id, epoch)
                assert _named(request) == set() and _forgotten(request) == set()
                assert response.partitions == {}
            # New records on one partition: the leader answers it alone, and the follower's
            # next fetch names it alone, at its new fetch offset.
            seen = len(network.fetches)
            _produce(leader, TP, 2)
            await eventually(lambda: hosted(follower, TP).log_end_offset == 2)
            await eventually(lambda: any(_named(f[1]) for f in network.fetches[seen:]))
            named = [f[1] for f in network.fetches[seen:] if _named(f[1])]
            assert _named(named[0]) == {TP}
            assert [p.fetch_offset for t in named[0].topics for p in t.partitions] == [2]
            await eventually(lambda: hosted(leader, TP).high_watermark == 2)
        finally:
            await manager.shutdown()

    asyncio.run(scenario())


def test_a_throttled_partition_is_forgotten_then_named_again_from_its_offset(
    open_broker: OpenBroker, network: InProcessLeaders
) -> None:
    """As Kafka's buildFetch: a partition left out by the quota leaves the session only."""
    leader = open_broker(0)
    follower = open_broker(1)
    state = leader_and_isr(0, (0, 1), isr=(0,), leader_epoch=1)
    leader.become_leader_or_follower(1, {TP: state, OTHER: state})
    follower.become_leader_or_follower(1, {TP: state, OTHER: state})
    for tag in (0, 10, 20):  # three batches; a fetch returns one (max_bytes 1, KIP-74)
        _produce(leader, TP, 2, tag=tag)
    address = network.add(leader)
    # 1 byte/s: the first batch fetched for the throttled orders-0 exceeds the quota.
    quota = ReplicationQuotaManager(quota_bytes_per_second=1)
    quota.mark_throttled("orders", ThrottledReplicas(replicas=frozenset({(0, 1)})))
    settings = FetcherSettings(max_wait_ms=20, backoff_ms=20, max_bytes=1)

    async def scenario() -> None:
        manager = ReplicaFetcherManager(1, follower, settings, quota=quota)
        try:
            _follow(manager, address, 0, 1, TP, OTHER)
            await eventually(lambda: any(TP in _forgotten(f[1]) for f in network.fetches))
            assert _named(network.fetches[0][1]) == {TP, OTHER}
            held = hosted(follower, TP).log_end_offset
            assert held == 2
            seen = len(network.fetches)
            await asyncio.sleep(0.1)
            assert all(TP not in _named(f[1]) for f in network.fetches[seen:])
            assert hosted(follower, TP).log_end_offset == held
            quota.update_quota(1 << 30)  # under quota: orders-0 is fetched again
            await eventually(lambda: hosted(follower, TP).log_end_offset == 6)
            back = next(f[1] for f in network.fetches[seen:] if TP in _named(f[1]))
            offsets = [p.fetch_offset for t in back.topics for p in t.partitions]
            assert offsets == [held]  # named again from where it stopped
        finally:
            await manager.shutdown()

    asyncio.run(scenario())
