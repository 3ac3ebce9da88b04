"""Produce (Kafka's appendRecords + DelayedProduce) on real logs: acks, waits and error codes."""

from __future__ import annotations

import asyncio
import threading

import pytest
from kafka import errors as kafka_errors

from kpo_broker.log.dir_failure import KAFKA_STORAGE_ERROR
from kpo_broker.log.epoch import LeaderEpochCache
from kpo_broker.server.fetch import FetchPartition, fetch_messages
from kpo_broker.server.produce import ProduceResult, append_records
from kpo_broker.server.replica_manager import ReplicaManager
from kpo_kafka.topic_partition import TopicPartition
from tests.unit.broker.log.batches import (
    craft_batch,
    decode_records,
    make_value_batch,
    record_bytes,
)
from tests.unit.broker.server.replicas import OpenBroker, hosted, leader_and_isr

TP = TopicPartition("orders", 0)
OTHER = TopicPartition("orders", 1)
MISSING = TopicPartition("nowhere", 0)


def _min_isr(value: int) -> dict[str, int]:
    return {"orders": value}


def _produce(
    rm: ReplicaManager,
    entries: dict[TopicPartition, bytes],
    acks: int,
    timeout_ms: int = 1000,
    min_insync_replicas: int = 1,
) -> dict[TopicPartition, ProduceResult]:
    return asyncio.run(
        append_records(rm, entries, acks, timeout_ms, lambda _topic: min_insync_replicas)
    )


async def _follower_fetch(rm: ReplicaManager, follower: int, offset: int) -> None:
    """A replica fetch by ``follower`` at ``offset`` (its LEO), as its fetcher sends it."""
    await fetch_messages(rm, follower, 0, 1, 1 << 20, [FetchPartition(TP, offset, 1 << 20)])


def test_acks_one_answers_after_the_local_append(open_broker: OpenBroker) -> None:
    rm = open_broker(0)
    rm.become_leader_or_follower(1, {TP: leader_and_isr(0, (0, 1))})
    first = _produce(rm, {TP: make_value_batch(5)}, acks=1)
    second = _produce(rm, {TP: make_value_batch(2)}, acks=1)
    assert (first[TP].error_code, first[TP].base_offset, first[TP].log_start_offset) == (0, 0, 0)
    assert (second[TP].error_code, second[TP].base_offset) == (0, 5)
    partition = hosted(rm, TP)
    assert partition.log_end_offset == 7
    assert partition.high_watermark == 0  # follower 1 has not fetched: nothing committed
    records = decode_records(partition.log.read(0, 1 << 20).to_bytes())
    assert [r.offset for r in records] == list(range(7))


def test_acks_zero_appends_like_acks_one(open_broker: OpenBroker) -> None:
    rm = open_broker(0)
    rm.become_leader_or_follower(1, {TP: leader_and_isr(0, (0, 1))})
    assert _produce(rm, {TP: make_value_batch(3)}, acks=0)[TP].error_code == 0
    assert hosted(rm, TP).log_end_offset == 3


def test_invalid_acks_are_refused_for_every_partition(open_broker: OpenBroker) -> None:
    rm = open_broker(0)
    rm.become_leader_or_follower(1, {TP: leader_and_isr(0, (0,))})
    results = _produce(rm, {TP: make_value_batch(1), MISSING: make_value_batch(1)}, acks=2)
    code = kafka_errors.InvalidRequiredAcksError.errno
    assert {tp: r.error_code for tp, r in results.items()} == {TP: code, MISSING: code}
    assert hosted(rm, TP).log_end_offset == 0


def test_errors_are_per_partition(open_broker: OpenBroker) -> None:
    rm = open_broker(0)
    rm.become_leader_or_follower(1, {TP: leader_and_isr(0, (0,)), OTHER: leader_and_isr(1, (1, 0))})
    corrupt = bytearray(make_value_batch(2))
    corrupt[-1] ^= 0xFF  # the batch CRC no longer matches
    results = _produce(
        rm,
        {TP: make_value_batch(2), OTHER: make_value_batch(2), MISSING: make_value_batch(2)},
        acks=1,
    )
    assert results[TP].error_code == 0
    assert results[OTHER].error_code == kafka_errors.NotLeaderForPartitionError.errno
    assert results[MISSING].error_code == kafka_errors.UnknownTopicOrPartitionError.errno
    assert (results[OTHER].base_offset, results[MISSING].base_offset) == (-1, -1)
    rejected = _produce(rm, {TP: bytes(corrupt)}, acks=1)[TP]
    assert rejected.error_code == kafka_errors.CorruptRecordError.errno
    assert rejected.error_message
    assert hosted(rm, TP).log_end_offset == 2


def test_acks_all_is_refused_before_the_append_when_the_isr_is_too_small(
    open_broker: OpenBroker,
) -> None:
    rm = open_broker(0)
    rm.become_leader_or_follower(1, {TP: leader_and_isr(0, (0, 1), isr=(0,))})
    result = _produce(rm, {TP: make_value_batch(3)}, acks=-1, min_insync_replicas=2)[TP]
    assert result.error_code == kafka_errors.NotEnoughReplicasError.errno
    assert hosted(rm, TP).log_end_offset == 0  # nothing was appended
    # acks=1 ignores min.insync.replicas.
    assert _produce(rm, {TP: make_value_batch(3)}, 1, min_insync_replicas=2)[TP].error_code == 0


def test_acks_all_waits_until_the_isr_has_the_records(open_broker: OpenBroker) -> None:
    rm = open_broker(0)
    rm.become_leader_or_follower(1, {TP: leader_and_isr(0, (0, 1, 2))})

    async def scenario() -> ProduceResult:
        produce = asyncio.create_task(
            append_records(rm, {TP: make_value_batch(4)}, -1, 5000, lambda _t: 2)
        )
        await asyncio.sleep(0.05)
        assert not produce.done()
        await _follower_fetch(rm, 1, 4)  # follower 1 has everything
        await asyncio.sleep(0.05)
        assert not produce.done()  # follower 2 is in the ISR too
        await _follower_fetch(rm, 2, 4)
        return (await asyncio.wait_for(produce, 1))[TP]

    result = asyncio.run(scenario())
    assert (result.error_code, result.base_offset) == (0, 0)
    assert hosted(rm, TP).high_watermark == 4


def test_acks_all_with_an_isr_of_the_leader_alone_completes_at_once(
    open_broker: OpenBroker,
) -> None:
    rm = open_broker(0)
    rm.become_leader_or_follower(1, {TP: leader_and_isr(0, (0, 1), isr=(0,))})
    result = _produce(rm, {TP: make_value_batch(2)}, acks=-1, timeout_ms=60000)[TP]
    assert (result.error_code, result.base_offset) == (0, 0)


def test_acks_all_times_out_when_a_follower_never_fetches(open_broker: OpenBroker) -> None:
    rm = open_broker(0)
    rm.become_leader_or_follower(1, {TP: leader_and_isr(0, (0, 1))})
    result = _produce(rm, {TP: make_value_batch(2)}, acks=-1, timeout_ms=50)[TP]
    assert result.error_code == kafka_errors.RequestTimedOutError.errno
    assert result.base_offset == -1
    # The records stay in the leader's log, uncommitted (Kafka does not roll them back).
    assert hosted(rm, TP).log_end_offset == 2
    assert hosted(rm, TP).high_watermark == 0


def test_acks_all_fails_when_the_isr_shrank_below_min_insync_after_the_append(
    open_broker: OpenBroker,
) -> None:
    rm = open_broker(0, replica_lag_time_max_ms=20)
    rm.become_leader_or_follower(1, {TP: leader_and_isr(0, (0, 1))})

    async def scenario() -> ProduceResult:
        produce = asyncio.create_task(
            append_records(rm, {TP: make_value_batch(2)}, -1, 5000, lambda _t: 2)
        )
        await asyncio.sleep(0.05)
        await rm.shrink_isrs()  # follower 1 never fetched: out of the ISR, HW moves
        return (await asyncio.wait_for(produce, 1))[TP]

    result = asyncio.run(scenario())
    assert result.error_code == kafka_errors.NotEnoughReplicasAfterAppendError.errno
    assert hosted(rm, TP).isr == (0,)
    assert hosted(rm, TP).high_watermark == 2


def test_acks_all_fails_when_leadership_moves_while_waiting(open_broker: OpenBroker) -> None:
    rm = open_broker(0)
    rm.become_leader_or_follower(1, {TP: leader_and_isr(0, (0, 1), leader_epoch=1)})

    async def scenario() -> ProduceResult:
        produce = asyncio.create_task(
            append_records(rm, {TP: make_value_batch(2)}, -1, 5000, lambda _t: 1)
        )
        await asyncio.sleep(0.05)
        rm.become_leader_or_follower(1, {TP: leader_and_isr(1, (0, 1), leader_epoch=2)})
        return (await asyncio.wait_for(produce, 1))[TP]

    result = asyncio.run(scenario())
    assert result.error_code == kafka_errors.NotLeaderForPartitionError.errno
    assert result.base_offset == -1


def test_acks_all_keeps_waiting_when_the_leader_stays_under_a_new_epoch(
    open_broker: OpenBroker,
) -> None:
    rm = open_broker(0)
    rm.become_leader_or_follower(1, {TP: leader_and_isr(0, (0, 1, 2), leader_epoch=1)})

    async def scenario() -> ProduceResult:
        produce = asyncio.create_task(
            append_records(rm, {TP: make_value_batch(2)}, -1, 5000, lambda _t: 2)
        )
        await asyncio.sleep(0.05)
        # The controller removed dead follower 2 from the ISR: same leader, epoch bumped
        # (Kafka's ZooKeeper controller, ReplicaStateMachine.doRemoveReplicasFromIsr). As
        # Kafka's DelayedProduce, the request waits on for the new ISR.
        rm.become_leader_or_follower(
            1, {TP: leader_and_isr(0, (0, 1, 2), isr=(0, 1), leader_epoch=2)}
        )
        await asyncio.sleep(0.05)
        assert not produce.done()
        await _follower_fetch(rm, 1, 2)
        return (await asyncio.wait_for(produce, 1))[TP]

    result = asyncio.run(scenario())
    assert (result.error_code, result.base_offset) == (0, 0)
    assert hosted(rm, TP).high_watermark == 2


def test_acks_all_fails_when_the_leader_was_a_follower_meanwhile(
    open_broker: OpenBroker,
) -> None:
    rm = open_broker(0)
    rm.become_leader_or_follower(1, {TP: leader_and_isr(0, (0, 1), leader_epoch=1)})

    async def scenario() -> ProduceResult:
        produce = asyncio.create_task(
            append_records(rm, {TP: make_value_batch(2)}, -1, 5000, lambda _t: 1)
        )
        await asyncio.sleep(0.05)
        # Follower for a moment (its records may have been truncated), then leader again
        # before the request is looked at: the wait belonged to the earlier leadership.
        rm.become_leader_or_follower(1, {TP: leader_and_isr(1, (0, 1), leader_epoch=2)})
        rm.become_leader_or_follower(1, {TP: leader_and_isr(0, (0, 1), leader_epoch=3)})
        return (await asyncio.wait_for(produce, 1))[TP]

    assert asyncio.run(scenario()).error_code == kafka_errors.NotLeaderForPartitionError.errno


def test_acks_all_answers_kafka_storage_error_when_the_log_dir_fails_while_waiting(
    open_broker: OpenBroker,
) -> None:
    rm = open_broker(0)
    rm.become_leader_or_follower(1, {TP: leader_and_isr(0, (0, 1))})
    log_dir = hosted(rm, TP).log.dir.parent

    async def scenario() -> ProduceResult:
        produce = asyncio.create_task(
            append_records(rm, {TP: make_value_batch(2)}, -1, 5000, lambda _t: 1)
        )
        await asyncio.sleep(0.05)
        rm.handle_log_dir_failure(log_dir)
        return (await asyncio.wait_for(produce, 1))[TP]

    result = asyncio.run(scenario())
    assert (result.error_code, result.base_offset) == (KAFKA_STORAGE_ERROR, -1)


def test_invalid_records_carry_record_errors_and_append_nothing(open_broker: OpenBroker) -> None:
    rm = open_broker(0)
    rm.become_leader_or_follower(1, {TP: leader_and_isr(0, (0,)), OTHER: leader_and_isr(0, (0,))})
    deltas = record_bytes(0, b"a") + record_bytes(2, b"b") + record_bytes(2, b"c")
    garbage = craft_batch(bytes(range(40)), 2)
    results = _produce(rm, {TP: craft_batch(deltas, 3), OTHER: garbage}, acks=1)
    invalid, corrupt = results[TP], results[OTHER]
    assert (invalid.error_code, invalid.base_offset) == (87, -1)
    assert [e.batch_index for e in invalid.record_errors] == [1]
    assert (corrupt.error_code, corrupt.record_errors) == (2, ())
    assert corrupt.error_message
    assert hosted(rm, TP).log_end_offset == hosted(rm, OTHER).log_end_offset == 0


def test_a_produce_waits_while_the_new_leaders_epoch_checkpoint_is_written(
    open_broker: OpenBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The checkpoint is written off the event loop; the append waits until it is durable.

    Other work on the loop goes on meanwhile (the loop is not blocked by the fsyncs), and
    the record lands under the new leader epoch only once the checkpoint holds it.
    """
    rm = open_broker(0)
    rm.become_leader_or_follower(1, {TP: leader_and_isr(0, (0,), leader_epoch=1)})
    release = threading.Event()
    written: list[tuple[int, ...]] = []
    original = LeaderEpochCache.write

    def slow_write(cache: LeaderEpochCache) -> None:
        release.wait(10)
        original(cache)
        written.append(tuple(e.epoch for e in cache.entries))

    monkeypatch.setattr(LeaderEpochCache, "write", slow_write)

    async def scenario() -> tuple[bool, bool, dict[TopicPartition, ProduceResult]]:
        change = asyncio.ensure_future(
            rm.become_leader_or_follower_async(1, {TP: leader_and_isr(0, (0,), leader_epoch=2)})
        )
        await asyncio.sleep(0.05)
        produce = asyncio.ensure_future(
            append_records(rm, {TP: make_value_batch(1)}, 1, 1000, lambda _topic: 1)
        )
        await asyncio.sleep(0.05)  # the loop runs: this coroutine was scheduled again
        held = not produce.done() and not change.done()
        release.set()
        await change
        result = await produce
        return held, written == [(1, 2)], result

    held, durable_first, result = asyncio.run(scenario())
    assert held
    assert durable_first
    assert result[TP].error_code == 0
    batch = hosted(rm, TP).log.read(0, 1 << 20).to_bytes()
    assert int.from_bytes(batch[12:16], "big") == 2  # partitionLeaderEpoch of the new leader
