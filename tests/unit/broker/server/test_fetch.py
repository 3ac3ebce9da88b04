"""Fetch (Kafka's fetchMessages + DelayedFetch) on real logs.

Consumers read up to the HW, followers up to the LEO; a replica fetch moves the
leader's HW; long polling; per-partition errors; KIP-74 sizes; the leader-side
replication quota (KIP-73).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from kafka import errors as kafka_errors

from kpo_broker.server.fetch import (
    CONSUMER_REPLICA_ID,
    FetchPartition,
    FetchPartitionResult,
    fetch_messages,
)
from kpo_broker.server.partition import Partition
from kpo_broker.server.replica_manager import ReplicaManager, now_ms
from kpo_broker.server.replication_quota import ReplicationQuotaManager, ThrottledReplicas
from kpo_kafka.topic_partition import TopicPartition
from tests.unit.broker.log.batches import decode_records, make_value_batch
from tests.unit.broker.server.replicas import OpenBroker, hosted, leader_and_isr

TP = TopicPartition("orders", 0)
OTHER = TopicPartition("orders", 1)
MISSING = TopicPartition("nowhere", 0)
MAX = 1 << 20

CaughtUpHook = Callable[[TopicPartition, Partition, int], Awaitable[None]]


def _fetch(
    rm: ReplicaManager,
    replica_id: int,
    partitions: list[FetchPartition],
    max_wait_ms: int = 0,
    min_bytes: int = 1,
    max_bytes: int = MAX,
    on_follower_caught_up: CaughtUpHook | None = None,
    leader_quota: ReplicationQuotaManager | None = None,
) -> dict[TopicPartition, FetchPartitionResult]:
    return asyncio.run(
        fetch_messages(
            rm,
            replica_id,
            max_wait_ms,
            min_bytes,
            max_bytes,
            partitions,
            on_follower_caught_up,
            leader_quota,
        )
    )


def _offsets(result: FetchPartitionResult) -> list[int]:
    if result.records is None:
        return []
    return [r.offset for r in decode_records(result.records.to_bytes())]


def _append(rm: ReplicaManager, tp: TopicPartition, count: int, size: int = 10) -> None:
    hosted(rm, tp).append_records_to_leader(make_value_batch(count, size), 1, 1, now_ms())


def _leader(open_broker: OpenBroker, isr: tuple[int, ...] = (0, 1)) -> ReplicaManager:
    """Broker 0 leading TP (replicas 0, 1, 2) at leader epoch 3."""
    rm = open_broker(0)
    rm.become_leader_or_follower(1, {TP: leader_and_isr(0, (0, 1, 2), isr=isr, leader_epoch=3)})
    return rm


def test_consumers_read_up_to_the_high_watermark_followers_up_to_the_leo(
    open_broker: OpenBroker,
) -> None:
    rm = _leader(open_broker)
    _append(rm, TP, 5)
    consumer = _fetch(rm, CONSUMER_REPLICA_ID, [FetchPartition(TP, 0, MAX)])[TP]
    assert (consumer.error_code, consumer.high_watermark, _offsets(consumer)) == (0, 0, [])
    follower = _fetch(rm, 1, [FetchPartition(TP, 0, MAX)])[TP]
    assert (follower.error_code, _offsets(follower)) == (0, [0, 1, 2, 3, 4])
    assert follower.log_start_offset == 0


def test_a_replica_fetch_reports_the_follower_leo_and_moves_the_high_watermark(
    open_broker: OpenBroker,
) -> None:
    rm = _leader(open_broker)
    _append(rm, TP, 5)
    caught_up: list[tuple[TopicPartition, int]] = []

    async def hook(tp: TopicPartition, partition: Partition, follower: int) -> None:
        caught_up.append((tp, follower))

    _fetch(rm, 1, [FetchPartition(TP, 0, MAX)], on_follower_caught_up=hook)
    assert hosted(rm, TP).high_watermark == 0  # fetch offset 0: follower 1 has nothing yet
    second = _fetch(rm, 1, [FetchPartition(TP, 5, MAX)], on_follower_caught_up=hook)[TP]
    # The second fetch's offset is follower 1's LEO: the ISR (0, 1) has all five records.
    assert hosted(rm, TP).high_watermark == 5
    assert second.high_watermark == 5  # the response carries the HW it caused
    assert caught_up == []  # follower 1 is in the ISR: no expansion to consider
    consumer = _fetch(rm, CONSUMER_REPLICA_ID, [FetchPartition(TP, 0, MAX)])[TP]
    assert _offsets(consumer) == [0, 1, 2, 3, 4]


def test_a_replica_fetch_from_a_follower_outside_the_isr_calls_the_expansion_hook(
    open_broker: OpenBroker,
) -> None:
    rm = _leader(open_broker, isr=(0,))
    _append(rm, TP, 3)
    caught_up: list[tuple[TopicPartition, int]] = []

    async def hook(tp: TopicPartition, partition: Partition, follower: int) -> None:
        caught_up.append((tp, follower))

    _fetch(rm, 1, [FetchPartition(TP, 0, MAX)], on_follower_caught_up=hook)
    _fetch(rm, 1, [FetchPartition(TP, 3, MAX)], on_follower_caught_up=hook)
    assert caught_up == [(TP, 1), (TP, 1)]


def test_a_fetch_from_a_broker_that_is_not_a_replica_records_nothing(
    open_broker: OpenBroker,
) -> None:
    rm = _leader(open_broker, isr=(0,))
    _append(rm, TP, 2)
    result = _fetch(rm, 7, [FetchPartition(TP, 2, MAX)])[TP]
    assert result.error_code == 0
    assert 7 not in hosted(rm, TP).remote_replicas


def test_a_consumer_fetch_waits_for_the_high_watermark_to_move(open_broker: OpenBroker) -> None:
    rm = _leader(open_broker, isr=(0,))

    async def scenario() -> tuple[FetchPartitionResult, float]:
        started = time.monotonic()
        fetch = asyncio.create_task(
            fetch_messages(rm, CONSUMER_REPLICA_ID, 5000, 1, MAX, [FetchPartition(TP, 0, MAX)])
        )
        await asyncio.sleep(0.05)
        assert not fetch.done()
        _append(rm, TP, 3)  # ISR of one: the HW moves with the append
        rm.watchers.notify(TP)
        results = await asyncio.wait_for(fetch, 1)
        return results[TP], time.monotonic() - started

    result, elapsed = asyncio.run(scenario())
    assert _offsets(result) == [0, 1, 2]
    assert elapsed < 2


def test_a_consumer_fetch_does_not_return_records_above_the_high_watermark_early(
    open_broker: OpenBroker,
) -> None:
    rm = _leader(open_broker)  # ISR (0, 1): appends alone do not move the HW

    async def scenario() -> FetchPartitionResult:
        fetch = asyncio.create_task(
            fetch_messages(rm, CONSUMER_REPLICA_ID, 5000, 1, MAX, [FetchPartition(TP, 0, MAX)])
        )
        await asyncio.sleep(0.02)
        _append(rm, TP, 3)
        rm.watchers.notify(TP)
        await asyncio.sleep(0.05)
        assert not fetch.done()  # woken, but nothing is committed yet
        await fetch_messages(rm, 1, 0, 1, MAX, [FetchPartition(TP, 3, MAX)])
        return (await asyncio.wait_for(fetch, 1))[TP]

    assert _offsets(asyncio.run(scenario())) == [0, 1, 2]


def test_a_fetch_returns_empty_after_max_wait(open_broker: OpenBroker) -> None:
    rm = _leader(open_broker, isr=(0,))
    started = time.monotonic()
    result = _fetch(rm, CONSUMER_REPLICA_ID, [FetchPartition(TP, 0, MAX)], max_wait_ms=100)[TP]
    elapsed = time.monotonic() - started
    assert (result.error_code, _offsets(result)) == (0, [])
    assert 0.09 <= elapsed < 2


def test_min_bytes_holds_the_answer_until_enough_data(open_broker: OpenBroker) -> None:
    rm = _leader(open_broker, isr=(0,))
    _append(rm, TP, 1)
    one_batch = hosted(rm, TP).log.size_in_bytes

    async def scenario() -> FetchPartitionResult:
        fetch = asyncio.create_task(
            fetch_messages(
                rm, CONSUMER_REPLICA_ID, 5000, one_batch + 1, MAX, [FetchPartition(TP, 0, MAX)]
            )
        )
        await asyncio.sleep(0.05)
        assert not fetch.done()  # one batch is below min_bytes
        _append(rm, TP, 1)
        rm.watchers.notify(TP)
        return (await asyncio.wait_for(fetch, 1))[TP]

    assert _offsets(asyncio.run(scenario())) == [0, 1]


def test_errors_are_per_partition_and_answered_without_waiting(open_broker: OpenBroker) -> None:
    rm = open_broker(0)
    rm.become_leader_or_follower(
        1,
        {
            TP: leader_and_isr(0, (0,), leader_epoch=3),
            OTHER: leader_and_isr(1, (1, 0), leader_epoch=3),
        },
    )
    _append(rm, TP, 2)
    started = time.monotonic()
    results = _fetch(
        rm,
        CONSUMER_REPLICA_ID,
        [
            FetchPartition(TP, 0, MAX, current_leader_epoch=3),
            FetchPartition(OTHER, 0, MAX),
            FetchPartition(MISSING, 0, MAX),
        ],
        max_wait_ms=5000,
        min_bytes=MAX,
    )
    assert time.monotonic() - started < 2
    assert (results[TP].error_code, _offsets(results[TP])) == (0, [0, 1])
    assert results[OTHER].error_code == kafka_errors.NotLeaderForPartitionError.errno
    assert results[MISSING].error_code == kafka_errors.UnknownTopicOrPartitionError.errno
    assert (results[OTHER].high_watermark, results[OTHER].log_start_offset) == (-1, -1)
    assert results[OTHER].records is None


def test_leader_epoch_and_offset_errors(open_broker: OpenBroker) -> None:
    rm = _leader(open_broker, isr=(0,))
    _append(rm, TP, 2)
    codes = {
        name: _fetch(rm, CONSUMER_REPLICA_ID, [request])[TP].error_code
        for name, request in {
            "fenced": FetchPartition(TP, 0, MAX, current_leader_epoch=2),
            "unknown epoch": FetchPartition(TP, 0, MAX, current_leader_epoch=4),
            "beyond the LEO": FetchPartition(TP, 3, MAX),
            "at the LEO": FetchPartition(TP, 2, MAX),
        }.items()
    }
    assert codes == {
        "fenced": kafka_errors.FencedLeaderEpochError.errno,
        "unknown epoch": kafka_errors.UnknownLeaderEpochError.errno,
        "beyond the LEO": kafka_errors.OffsetOutOfRangeError.errno,
        "at the LEO": 0,
    }


def test_the_first_batch_is_returned_whole_even_above_max_bytes(open_broker: OpenBroker) -> None:
    """KIP-74: max_bytes is soft for the first batch, then the response stops."""
    rm = open_broker(0)
    rm.become_leader_or_follower(1, {TP: leader_and_isr(0, (0,)), OTHER: leader_and_isr(0, (0,))})
    _append(rm, TP, 4, size=200)
    _append(rm, TP, 4, size=200)
    _append(rm, OTHER, 4, size=200)
    results = _fetch(
        rm,
        CONSUMER_REPLICA_ID,
        [FetchPartition(TP, 0, MAX), FetchPartition(OTHER, 0, MAX)],
        max_bytes=100,
    )
    assert _offsets(results[TP]) == [0, 1, 2, 3]  # one whole batch of ~850 bytes
    assert results[OTHER].error_code == 0
    assert _offsets(results[OTHER]) == []  # the response budget is spent
    # partition_max_bytes limits each partition, except for the response's first batch.
    limited = _fetch(
        rm,
        CONSUMER_REPLICA_ID,
        [FetchPartition(TP, 0, 100), FetchPartition(OTHER, 0, 100)],
    )
    assert (_offsets(limited[TP]), _offsets(limited[OTHER])) == ([0, 1, 2, 3], [])


def _throttled_leader_quota() -> ReplicationQuotaManager:
    """A leader quota of 1 byte/s over ``orders`` replicas on broker 0, already exceeded."""
    quota = ReplicationQuotaManager(quota_bytes_per_second=1)
    quota.mark_throttled("orders", ThrottledReplicas(replicas=frozenset({(0, 0)})))
    quota.record(1000)
    assert quota.is_quota_exceeded()
    return quota


def test_the_leader_quota_holds_back_followers_outside_the_isr(open_broker: OpenBroker) -> None:
    """KIP-73: throttled partition, follower out of sync, quota exceeded: no records."""
    rm = _leader(open_broker, isr=(0, 1))
    _append(rm, TP, 3)
    quota = _throttled_leader_quota()
    recorded = quota.total_recorded_bytes
    started = time.monotonic()
    held = _fetch(rm, 2, [FetchPartition(TP, 0, MAX)], max_wait_ms=100, leader_quota=quota)[TP]
    assert time.monotonic() - started >= 0.09  # throttled data counts as no data: waits
    assert (held.error_code, _offsets(held), held.high_watermark) == (0, [], 0)
    # Follower 1 is in the ISR: never throttled, and its bytes count against the quota.
    served = _fetch(rm, 1, [FetchPartition(TP, 0, MAX)], leader_quota=quota)[TP]
    assert _offsets(served) == [0, 1, 2]
    assert served.records is not None
    assert quota.total_recorded_bytes == recorded + served.records.size_in_bytes
    # Consumers are never throttled, and never recorded.
    _fetch(rm, 1, [FetchPartition(TP, 3, MAX)])  # commit the records for the consumer
    consumer = _fetch(rm, CONSUMER_REPLICA_ID, [FetchPartition(TP, 0, MAX)], leader_quota=quota)
    assert _offsets(consumer[TP]) == [0, 1, 2]
    assert quota.total_recorded_bytes == recorded + served.records.size_in_bytes


def test_unthrottled_partitions_are_served_and_not_recorded(open_broker: OpenBroker) -> None:
    rm = _leader(open_broker, isr=(0, 1))
    _append(rm, TP, 3)
    quota = ReplicationQuotaManager(quota_bytes_per_second=1)
    quota.record(1000)  # exceeded, but no replica is throttled
    recorded = quota.total_recorded_bytes
    result = _fetch(rm, 2, [FetchPartition(TP, 0, MAX)], leader_quota=quota)[TP]
    assert _offsets(result) == [0, 1, 2]
    assert quota.total_recorded_bytes == recorded


def test_fetched_bytes_are_counted_as_consumer_or_replication_traffic(
    open_broker: OpenBroker,
) -> None:
    rm = _leader(open_broker, isr=(0,))
    _append(rm, TP, 3)
    size = hosted(rm, TP).log.size_in_bytes
    _fetch(rm, CONSUMER_REPLICA_ID, [FetchPartition(TP, 0, MAX)])
    _fetch(rm, 1, [FetchPartition(TP, 0, MAX)])
    _fetch(rm, 1, [FetchPartition(TP, 3, MAX)])  # nothing returned: nothing counted
    stats = rm.topic_stats.topic("orders")
    assert (stats.bytes_out, stats.replication_bytes_out) == (size, size)
