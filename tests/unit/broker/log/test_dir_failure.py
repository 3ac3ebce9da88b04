"""LogDirFailureChannel and LogManager's handling of failing log dirs (Kafka's KAFKA-4763).

The I/O errors are real ``OSError``s from the file system: a checkpoint path that is a
directory, a partition path taken by a file, a log dir path that is a file.
"""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from kpo_broker.log.config import LogConfig
from kpo_broker.log.dir_failure import KafkaStorageError, LogDirFailureChannel
from kpo_broker.log.errors import KAFKA_STORAGE_ERROR, LogDirectoryError
from kpo_broker.log.manager import LogManager
from kpo_broker.log.names import REPLICATION_OFFSET_CHECKPOINT
from kpo_kafka.topic_partition import TopicPartition
from tests.unit.broker.log.batches import make_value_batch
from tests.unit.broker.log.conftest import NOW_MS

CONFIG = LogConfig(segment_bytes=600, index_interval_bytes=60, file_delete_delay_ms=0)


def test_a_dir_goes_offline_once_and_listeners_hear_it_once(tmp_path: Path) -> None:
    d0, d1 = tmp_path / "d0", tmp_path / "d1"
    channel = LogDirFailureChannel([d0, d1])
    heard: list[Path] = []
    channel.add_listener(heard.append)
    full = OSError(errno.ENOSPC, "No space left on device")
    assert channel.maybe_add_offline_log_dir(d1 / "t-0" / "0.log", "append", full)
    assert not channel.maybe_add_offline_log_dir(d1, "flush", full)
    assert heard == [d1]
    assert channel.offline_dirs == [d1]
    assert channel.has_offline_log_dir(d1) and not channel.has_offline_log_dir(d0)
    channel.check_online(d0 / "t-1")
    with pytest.raises(KafkaStorageError):
        channel.check_online(d1 / "t-1")


def test_guard_turns_an_os_error_into_kafka_storage_error(tmp_path: Path) -> None:
    d0 = tmp_path / "d0"
    channel = LogDirFailureChannel([d0])
    with pytest.raises(KafkaStorageError) as raised, channel.guard(d0 / "t-0", "append to t-0"):
        raise OSError(errno.EMFILE, "Too many open files")
    assert raised.value.error_code == KAFKA_STORAGE_ERROR == 56
    assert isinstance(raised.value.__cause__, OSError)
    assert channel.offline_dirs == [d0]
    with channel.guard(d0, "nothing"):  # no error: nothing happens
        pass
    with pytest.raises(ValueError), channel.guard(d0, "not I/O"):
        raise ValueError("other errors pass through")


def _manager(dirs: list[Path], halted: list[str]) -> LogManager:
    manager = LogManager(dirs, CONFIG, halt=halted.append)
    manager.startup(NOW_MS)
    return manager


def test_a_failing_checkpoint_takes_only_its_dir_offline(tmp_path: Path) -> None:
    dirs = [tmp_path / "d0", tmp_path / "d1"]
    halted: list[str] = []
    manager = _manager(dirs, halted)
    for p in range(4):
        log = manager.get_or_create_log("t", p, now_ms=NOW_MS)
        log.append_as_leader(make_value_batch(2, 25), leader_epoch=0, now_ms=NOW_MS)
    (dirs[1] / REPLICATION_OFFSET_CHECKPOINT).mkdir()  # the write fails: IsADirectoryError
    hws = {TopicPartition("t", p): 2 for p in range(4)}
    manager.write_high_watermarks(hws)  # does not raise
    assert manager.failure_channel.offline_dirs == [dirs[1]]
    written = (dirs[0] / REPLICATION_OFFSET_CHECKPOINT).read_text().splitlines()
    assert written[1:] == ["2", "t 0 2", "t 2 2"]

    offline = manager.handle_log_dir_failure(dirs[1])
    assert offline == [TopicPartition("t", 1), TopicPartition("t", 3)]
    assert manager.get_log("t", 1) is None and manager.get_log("t", 0) is not None
    assert halted == []
    assert manager.live_log_dirs == [dirs[0]]
    described = {info.path: info for info in manager.describe_log_dirs()}
    assert not described[dirs[1]].online and described[dirs[1]].partitions == ()
    assert described[dirs[0]].online and len(described[dirs[0]].partitions) == 2
    # New partitions go to the live dir; an old partition's log is not re-created while
    # a dir is offline (it may be there); a log cannot be placed in the offline dir.
    assert manager.get_or_create_log("u", 0, now_ms=NOW_MS).dir.parent == dirs[0]
    with pytest.raises(KafkaStorageError):
        manager.get_or_create_log("t", 1, now_ms=NOW_MS, is_new=False)
    with pytest.raises(KafkaStorageError):
        manager.get_or_create_log("v", 0, log_dir=dirs[1], now_ms=NOW_MS)
    manager.checkpoint_recovery_points_and_log_start_offsets()
    manager.shutdown()  # a clean shutdown with an offline dir does not raise
    assert halted == []


def test_the_last_dir_failing_halts_with_kafkas_message(tmp_path: Path) -> None:
    dirs = [tmp_path / "d0"]
    halted: list[str] = []
    manager = _manager(dirs, halted)
    (dirs[0] / "t-0").write_text("a file where the partition dir goes")
    with pytest.raises(KafkaStorageError):
        manager.get_or_create_log("t", 0, now_ms=NOW_MS)
    manager.handle_log_dir_failure(dirs[0])
    assert halted == [f"Shutdown broker because all log dirs in {dirs[0]} have failed"]
    with pytest.raises(KafkaStorageError):
        manager.get_or_create_log("t", 1, now_ms=NOW_MS)
    manager.shutdown()


def test_a_dir_that_cannot_be_loaded_starts_offline(tmp_path: Path) -> None:
    dirs = [tmp_path / "d0", tmp_path / "d1"]
    dirs[1].write_text("not a directory")  # mkdir/lock fail with an OSError
    halted: list[str] = []
    manager = _manager(dirs, halted)
    assert manager.failure_channel.offline_dirs == [dirs[1]]
    assert manager.get_or_create_log("t", 0, now_ms=NOW_MS).dir.parent == dirs[0]
    manager.shutdown()
    with pytest.raises(LogDirectoryError):
        LogManager([dirs[1]], CONFIG).startup(NOW_MS)
