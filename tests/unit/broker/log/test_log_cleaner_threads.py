"""The cleaner threads on a real log manager: background cleaning, deletion, metrics."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest

from kpo_broker.log.config import LogConfig
from kpo_broker.log.log import Log
from kpo_broker.log.log_cleaner import CleanerConfig, LogCleaner
from kpo_broker.log.manager import LogManager
from kpo_broker.server.metrics import BrokerState, BrokerTopicStats, RequestStats
from kpo_broker.server.metrics_collector import BrokerMetricsCollector
from tests.unit.broker.log.batches import decode_records, make_batch
from tests.unit.broker.log.conftest import NOW_MS

COMPACT = LogConfig(
    segment_bytes=600,
    file_delete_delay_ms=0,
    cleanup_policy=("compact",),
    min_cleanable_dirty_ratio=0.01,
)


def _wait(condition, timeout_s: float = 20) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _records(log: Log) -> list[Any]:
    """The log's records, read again when a cleaner thread replaced a segment mid-read.

    With ``file.delete.delay.ms`` 0 a replaced segment's file is closed at once, so a read
    handed out just before fails when its bytes are read, as a fetch would in Kafka.
    """
    for _ in range(100):
        try:
            return decode_records(log.read(0, 10**9).to_bytes())
        except ValueError as exc:
            if "is closed" not in str(exc):
                raise
    raise AssertionError("every read raced a segment replacement")


def test_threads_clean_in_the_background_and_report_metrics(tmp_path: Path) -> None:
    manager = LogManager([tmp_path], COMPACT)
    manager.startup()
    cleaner = LogCleaner(
        CleanerConfig(num_threads=2, dedupe_buffer_size=24 * 2000, backoff_ms=50),
        manager.log_dirs,
        manager.current_logs,
        lambda tp: 10**9,  # every appended offset is below the high watermark
    )
    manager.attach_cleaner(cleaner)
    log = manager.get_or_create_log("keyed", 0)
    for r in range(20):
        batch = make_batch([b"v%d" % r] * 3, keys=[b"a", b"b", b"c"])
        log.append_as_leader(batch, 0, now_ms=NOW_MS)
    log.roll()
    cleaner.startup()
    try:
        _wait(lambda: len(_records(log)) == 3)
        records = _records(log)
        assert [(r.offset, r.key, r.value) for r in records] == [
            (57, b"a", b"v19"),
            (58, b"b", b"v19"),
            (59, b"c", b"v19"),
        ]
        _wait(lambda: cleaner.manager.all_cleaner_checkpoints() != {})
        assert cleaner.manager.all_cleaner_checkpoints() == {log.topic_partition: 60}
        registry = CollectorRegistry(auto_describe=False)
        state = BrokerState(
            logs=[], partitions=[], topic_stats=BrokerTopicStats(), log_cleaner=cleaner
        )
        registry.register(BrokerMetricsCollector(lambda: state, RequestStats()))
        text = generate_latest(registry).decode()
        assert "kafka_log_logcleaner_cleaner_recopy_percent " in text
        assert "kafka_log_logcleaner_deadthreadcount 0.0" in text
        uncleanable = "kafka_log_logcleanermanager_uncleanable_partitions_count"
        assert f'{uncleanable}{{logDirectory="{tmp_path}"}} 0.0' in text
        manager.delete_log("keyed", 0)
        assert cleaner.manager.all_cleaner_checkpoints() == {}
    finally:
        manager.shutdown()
    assert cleaner.threads == []


def test_a_finished_log_dir_move_takes_the_cleaner_checkpoint_along(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = LogManager(dirs, COMPACT)
    manager.startup()
    cleaner = LogCleaner(CleanerConfig(enable=False), dirs, manager.current_logs, lambda tp: 0)
    manager.attach_cleaner(cleaner)
    try:
        log = manager.get_or_create_log("keyed", 0, log_dir=dirs[0])
        log.append_as_leader(make_batch([b"v"], keys=[b"k"]), 0, now_ms=NOW_MS)
        cleaner.manager.update_checkpoints(dirs[0], update=(log.topic_partition, 1))
        future = manager.create_future_log("keyed", 0, dirs[1])
        future.append_as_follower(log.read(0, 10**9).to_bytes())
        moved = manager.replace_current_with_future_log("keyed", 0)
        assert moved.dir.parent == dirs[1]
        assert (dirs[1] / "cleaner-offset-checkpoint").read_text().split("\n")[2] == "keyed 0 1"
        assert (dirs[0] / "cleaner-offset-checkpoint").read_text().split("\n")[1] == "0"
    finally:
        manager.shutdown()


def test_appends_on_the_event_loop_go_on_while_a_log_is_cleaned(tmp_path: Path) -> None:
    """The cleaning runs in its thread: the loop keeps appending to the same log meanwhile."""
    import asyncio

    config = LogConfig(
        segment_bytes=64 * 1024,
        file_delete_delay_ms=0,
        cleanup_policy=("compact",),
        min_cleanable_dirty_ratio=0.01,
    )
    manager = LogManager([tmp_path], config)
    manager.startup()
    cleaner = LogCleaner(
        CleanerConfig(backoff_ms=50), manager.log_dirs, manager.current_logs, lambda tp: 10**12
    )
    manager.attach_cleaner(cleaner)
    log = manager.get_or_create_log("busy", 0)
    for r in range(300):
        keys = [b"key-%d" % k for k in range(50)]
        log.append_as_leader(make_batch([b"%d" % r * 20] * 50, keys=keys), 0, now_ms=NOW_MS)
    log.roll()
    cleaned_before = len(decode_records(log.read(0, 10**9).to_bytes()))

    async def append_while_cleaning() -> tuple[int, float]:
        appends, worst_gap = 0, 0.0
        cleaner.startup()
        last = time.monotonic()
        while not cleaner.manager.all_cleaner_checkpoints():
            batch = make_batch([b"new-%d" % appends], keys=[b"fresh-%d" % appends])
            log.append_as_leader(batch, 0)
            appends += 1
            await asyncio.sleep(0.001)
            now = time.monotonic()
            worst_gap, last = max(worst_gap, now - last), now
            assert now - last < 60
        return appends, worst_gap

    try:
        appends, worst_gap = asyncio.run(asyncio.wait_for(append_while_cleaning(), 60))
        records = decode_records(log.read(0, 10**9).to_bytes())
        latest = {r.key: r.value for r in records}
        assert appends > 10 and worst_gap < 1.0
        assert all(latest[b"key-%d" % k] == b"299" * 20 for k in range(50))
        assert all(latest[b"fresh-%d" % i] == b"new-%d" % i for i in range(appends))
        assert len(records) < cleaned_before
    finally:
        manager.shutdown()


def test_reconfigure_restarts_the_threads_within_kafkas_bounds(tmp_path: Path) -> None:
    import dataclasses

    import pytest

    cleaner = LogCleaner(CleanerConfig(num_threads=2, backoff_ms=50), [tmp_path], list, lambda _: 0)
    cleaner.startup()
    try:
        first = list(cleaner.threads)
        new = dataclasses.replace(cleaner.config, num_threads=3, max_io_bytes_per_second=1e6)
        cleaner.reconfigure(new)
        assert len(cleaner.threads) == 3 and cleaner.throttler.rate == 1e6
        assert not any(thread.is_alive() for thread in first)
        for bad in (0, 1, 7):
            with pytest.raises(ValueError, match="Log cleaner threads"):
                cleaner.reconfigure(dataclasses.replace(new, num_threads=bad))
        assert len(cleaner.threads) == 3
    finally:
        cleaner.shutdown()
