"""The alter-log-dirs copier (KIP-113): throttle, copy steps and swaps."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from kpo_broker.log.config import LogConfig
from kpo_broker.log.log import Log
from kpo_broker.log.manager import LogManager
from kpo_broker.server.log_dir_mover import (
    ALTER_LOG_DIRS_RATE_CONFIG,
    IoThrottle,
    LogDirMover,
    copy_step,
    parse_rate,
)
from kpo_broker.server.partition import IsrChange, LeaderAndIsrState, Partition
from kpo_broker.server.replica_manager import ReplicaManager
from kpo_kafka.topic_partition import TopicPartition
from tests.unit.broker.log.batches import decode_records, make_value_batch

NOW_MS = 1_700_000_000_000
CONFIG = LogConfig(segment_bytes=600, index_interval_bytes=60, file_delete_delay_ms=0)
TP = TopicPartition("events", 0)


class NoIsrWrites:
    async def write_isr(
        self, tp: TopicPartition, partition: Partition, change: IsrChange
    ) -> int | None:
        raise AssertionError("no ISR change expected")


@pytest.fixture
def dirs(tmp_path: Path) -> list[Path]:
    return [tmp_path / "d0", tmp_path / "d1"]


@pytest.fixture
def manager(dirs: list[Path]) -> Iterator[LogManager]:
    m = LogManager(dirs, CONFIG)
    m.startup(NOW_MS)
    yield m
    m.shutdown()


def _lead(rm: ReplicaManager, epoch: int = 1) -> Partition:
    state = LeaderAndIsrState(1, 0, epoch, (0,), 0, (0,))
    assert rm.become_leader_or_follower(1, {TP: state})[TP].error_code == 0
    partition = rm.get_partition(TP)
    assert partition is not None
    return partition


def _produce(partition: Partition, batches: int, first_tag: int = 0) -> None:
    for i in range(batches):
        partition.log.append_as_leader(
            make_value_batch(2, 25, tag=first_tag + i), partition.leader_epoch, NOW_MS
        )


def _values(log: Log) -> list[bytes | None]:
    return [r.value for r in decode_records(log.read(log.log_start_offset, 1 << 20).to_bytes())]


def test_throttle_paces_bytes_to_the_rate() -> None:
    throttle = IoThrottle()
    assert throttle.record(10_000, 0.0) == 0.0
    assert throttle.step_bytes(1 << 20) == 1 << 20
    throttle.rate_bytes_per_s = 1000
    assert throttle.step_bytes(1 << 20) == 1000
    assert throttle.record(500, 10.0) == pytest.approx(0.5)
    assert throttle.record(500, 10.5) == pytest.approx(0.5)
    assert throttle.record(100, 20.0) == pytest.approx(0.1)  # idle time is not banked
    throttle.rate_bytes_per_s = 0
    assert throttle.rate_bytes_per_s is None


def test_parse_rate_prefers_the_first_config() -> None:
    key = ALTER_LOG_DIRS_RATE_CONFIG
    assert parse_rate([{}, {}]) is None
    assert parse_rate([{key: "2048"}, {key: "10"}]) == 2048
    assert parse_rate([{}, {key: "10"}]) == 10
    assert parse_rate([{key: "-1"}]) is None
    assert parse_rate([{key: "fast"}]) is None


def test_copy_step_copies_whole_batches_and_follows_truncation(
    manager: LogManager, dirs: list[Path]
) -> None:
    current = manager.get_or_create_log(*TP, log_dir=dirs[0], now_ms=NOW_MS)
    for i in range(4):
        current.append_as_leader(make_value_batch(2, 25, tag=i), 1, NOW_MS)
    future = manager.create_future_log(*TP, dirs[1], now_ms=NOW_MS)
    step = copy_step(current, future, 1)  # at least one batch (KIP-74)
    assert (step.caught_up, future.log_end_offset) == (False, 2)
    assert step.copied_bytes == future.size_in_bytes > 0
    while not copy_step(current, future, 200).caught_up:
        pass
    assert future.log_end_offset == 8
    # the current log is truncated (fetcher, KIP-279) and refilled under a new epoch
    current.truncate_to(4)
    current.append_as_leader(make_value_batch(2, 25, tag=100), 2, NOW_MS)
    while not copy_step(current, future, 200).caught_up:
        pass
    assert _values(future) == _values(current)
    assert future.log_end_offset == 6


def test_run_once_moves_a_hosted_partition_and_swaps_its_log(
    manager: LogManager, dirs: list[Path]
) -> None:
    rm = ReplicaManager(0, manager, NoIsrWrites())
    partition = _lead(rm)
    old_log = partition.log
    _produce(partition, 5)
    target = dirs[1] if old_log.dir.parent == dirs[0] else dirs[0]
    manager.create_future_log(*TP, target, now_ms=NOW_MS)
    mover = LogDirMover(manager, rm, max_step_bytes=100)
    assert mover.run_once(0.0) >= 0  # one batch copied, not caught up
    assert partition.log is old_log
    _produce(partition, 2, first_tag=50)  # appends keep arriving during the move
    for _ in range(20):
        mover.run_once(0.0)
        if partition.log is not old_log:
            break
    assert partition.log.dir == target / "events-0"
    assert manager.get_future_log(*TP) is None
    assert partition.log.log_end_offset == 14
    assert partition.log.leader_epoch_cache.latest_epoch == 1
    assert [p.name for p in old_log.dir.parent.iterdir() if p.is_dir()] == []
    _produce(partition, 1, first_tag=99)  # the new log takes appends
    assert partition.log.log_end_offset == 16
    assert mover.run_once(0.0) == -1.0  # nothing left to move


def test_moves_wait_for_the_partition_to_be_hosted(manager: LogManager, dirs: list[Path]) -> None:
    rm = ReplicaManager(0, manager, NoIsrWrites())
    log = manager.get_or_create_log(*TP, log_dir=dirs[0], now_ms=NOW_MS)
    log.append_as_leader(make_value_batch(2, 25), 0, NOW_MS)
    future = manager.create_future_log(*TP, dirs[1], now_ms=NOW_MS)
    mover = LogDirMover(manager, rm)
    assert mover.run_once(0.0) == -1.0
    assert future.log_end_offset == 0


def test_the_task_copies_with_the_rate_read_from_configs(
    manager: LogManager, dirs: list[Path]
) -> None:
    rm = ReplicaManager(0, manager, NoIsrWrites())
    partition = _lead(rm)
    _produce(partition, 3)
    target = dirs[1] if partition.log.dir.parent == dirs[0] else dirs[0]
    rates: list[float | None] = []

    def read_rate() -> float | None:
        rates.append(1e9)
        return 1e9

    async def scenario() -> None:
        mover = LogDirMover(manager, rm, read_rate)
        mover.start()
        manager.create_future_log(*TP, target, now_ms=NOW_MS)
        mover.wake()
        for _ in range(200):
            if partition.log.dir.parent == target:
                break
            await asyncio.sleep(0.01)
        await mover.stop()
        assert mover.throttle.rate_bytes_per_s == 1e9

    asyncio.run(scenario())
    assert partition.log.dir.parent == target
    assert rates
