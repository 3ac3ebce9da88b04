from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kpo_broker.log.config import LogConfig
from kpo_broker.log.errors import LogDirectoryError
from kpo_broker.log.filerecords import SEGMENT_FILES
from kpo_broker.log.manager import LogManager
from kpo_kafka.topic_partition import TopicPartition
from tests.unit.broker.log.batches import make_value_batch
from tests.unit.broker.log.conftest import NOW_MS

CONFIG = LogConfig(segment_bytes=600, index_interval_bytes=60, file_delete_delay_ms=0)


@pytest.fixture
def dirs(tmp_path: Path) -> list[Path]:
    return [tmp_path / "d0", tmp_path / "d1", tmp_path / "d2"]


def _fill(manager: LogManager, topic: str, partition: int, batches: int) -> None:
    log = manager.get_or_create_log(topic, partition, now_ms=NOW_MS)
    for i in range(batches):
        log.append_as_leader(make_value_batch(2, 25, tag=i), leader_epoch=0, now_ms=NOW_MS)


def test_new_logs_go_to_the_dir_with_fewest_partitions(dirs: list[Path]) -> None:
    manager = LogManager(dirs, CONFIG)
    manager.startup(NOW_MS)
    placed = [manager.get_or_create_log("t", p, now_ms=NOW_MS).dir.parent for p in range(6)]
    assert placed == dirs + dirs
    assert manager.get_or_create_log("t", 0) is manager.get_log("t", 0)
    pinned = manager.get_or_create_log("u", 0, log_dir=dirs[2], now_ms=NOW_MS)
    assert pinned.dir == dirs[2] / "u-0"
    assert manager.get_or_create_log("v", 0, now_ms=NOW_MS).dir.parent in (dirs[0], dirs[1])
    assert manager.log_dir_of("u", 0) == dirs[2]
    assert manager.log_dir_of("missing", 0) is None
    with pytest.raises(LogDirectoryError):
        manager.get_or_create_log("w", 0, log_dir=dirs[0].parent / "elsewhere")
    manager.shutdown()


def test_startup_loads_every_dir_with_checkpoints(dirs: list[Path]) -> None:
    manager = LogManager(dirs, CONFIG)
    manager.startup(NOW_MS)
    _fill(manager, "orders.v1-eu", 0, 10)
    _fill(manager, "orders.v1-eu", 1, 3)
    _fill(manager, "audit", 0, 1)
    manager.write_high_watermarks(
        {TopicPartition("orders.v1-eu", 0): 20, TopicPartition("audit", 0): 1}
    )
    manager.shutdown()
    assert (dirs[0] / "recovery-point-offset-checkpoint").read_text() == "0\n1\norders.v1-eu 0 20\n"
    (dirs[1] / "not-a-partition").mkdir()
    (dirs[2] / "gone-0.0123456789abcdef0123456789abcdef-delete").mkdir()

    again = LogManager(dirs, CONFIG)
    again.startup(NOW_MS)
    logs = {log.topic_partition: log for log in again.all_logs()}
    assert sorted(logs) == [("audit", 0), ("orders.v1-eu", 0), ("orders.v1-eu", 1)]
    assert logs[TopicPartition("orders.v1-eu", 0)].log_end_offset == 20
    assert logs[TopicPartition("orders.v1-eu", 0)].recovery_point == 20
    assert again.read_high_watermarks() == {
        TopicPartition("orders.v1-eu", 0): 20,
        TopicPartition("audit", 0): 1,
    }
    assert not (dirs[2] / "gone-0.0123456789abcdef0123456789abcdef-delete").exists()
    described = {info.path: info for info in again.describe_log_dirs()}
    assert [p.topic_partition for p in described[dirs[0]].partitions] == [("orders.v1-eu", 0)]
    assert (
        described[dirs[0]].partitions[0].size_in_bytes
        == logs[TopicPartition("orders.v1-eu", 0)].size_in_bytes
    )
    assert described[dirs[0]].partitions[0].offset_lag == 0
    assert described[dirs[0]].total_bytes > 0
    again.shutdown()


def test_same_partition_in_two_dirs_is_an_error(dirs: list[Path]) -> None:
    for d in dirs[:2]:
        (d / "t-0").mkdir(parents=True)
    with pytest.raises(LogDirectoryError, match="both"):
        LogManager(dirs, CONFIG).startup(NOW_MS)


def test_a_locked_dir_cannot_be_used_twice(dirs: list[Path]) -> None:
    first = LogManager(dirs[:1], CONFIG)
    first.startup(NOW_MS)
    with pytest.raises(LogDirectoryError, match="in use"):
        LogManager(dirs[:1], CONFIG).startup(NOW_MS)
    first.shutdown()
    second = LogManager(dirs[:1], CONFIG)
    second.startup(NOW_MS)
    second.shutdown()


def test_delete_log_renames_then_removes(dirs: list[Path]) -> None:
    config = LogConfig(segment_bytes=600, file_delete_delay_ms=1000)
    manager = LogManager(dirs[:1], config)
    manager.startup(NOW_MS)
    _fill(manager, "t", 0, 3)
    assert manager.delete_log("t", 0, now_ms=NOW_MS)
    assert not manager.delete_log("t", 0)
    assert manager.get_log("t", 0) is None
    leftovers = [p.name for p in dirs[0].iterdir() if p.is_dir()]
    assert (
        len(leftovers) == 1 and leftovers[0].startswith("t-0.") and leftovers[0].endswith("-delete")
    )
    manager.cleanup_logs(NOW_MS + 999, {})
    assert (dirs[0] / leftovers[0]).exists()
    manager.cleanup_logs(NOW_MS + 1000, {})
    assert not (dirs[0] / leftovers[0]).exists()
    # a new log of the same partition starts empty
    assert manager.get_or_create_log("t", 0, now_ms=NOW_MS).log_end_offset == 0
    manager.shutdown()


def test_a_deleted_log_goes_when_its_delete_delay_runs_out(dirs: list[Path]) -> None:
    """Kafka's kafka-delete-logs task: not at the next retention check, at the deadline."""
    config = LogConfig(segment_bytes=600, file_delete_delay_ms=1000)
    manager = LogManager(dirs[:1], config)
    manager.startup(NOW_MS)
    _fill(manager, "t", 0, 3)
    assert manager.delete_log("t", 0, now_ms=NOW_MS)
    [leftover] = [p for p in dirs[0].iterdir() if p.name.endswith("-delete")]
    assert not manager.has_due_deletes(NOW_MS + 999)
    manager.delete_due_logs(NOW_MS + 999)
    assert leftover.exists()
    assert manager.has_due_deletes(NOW_MS + 1000)
    manager.delete_due_logs(NOW_MS + 1000)
    assert not leftover.exists() and not manager.has_due_deletes(NOW_MS + 5000)
    manager.shutdown()


def test_cleanup_logs_applies_retention_with_high_watermarks(dirs: list[Path]) -> None:
    config = LogConfig(segment_bytes=600, retention_bytes=700, file_delete_delay_ms=0)
    manager = LogManager(dirs[:2], config)
    manager.startup(NOW_MS)
    _fill(manager, "a", 0, 20)
    _fill(manager, "b", 0, 20)
    log_a, log_b = manager.get_log("a", 0), manager.get_log("b", 0)
    assert log_a is not None and log_b is not None
    a_segments = len(log_a.segments)
    deleted = manager.cleanup_logs(NOW_MS, {TopicPartition("a", 0): 40})
    assert deleted > 0
    assert len(log_a.segments) == a_segments - deleted
    assert log_a.log_start_offset > 0
    assert log_b.log_start_offset == 0
    manager.checkpoint_recovery_points_and_log_start_offsets()
    a_dir = manager.log_dir_of("a", 0)
    assert a_dir is not None
    start = log_a.log_start_offset
    assert (a_dir / "log-start-offset-checkpoint").read_text() == f"0\n1\na 0 {start}\n"
    manager.shutdown()


def test_topic_config_provider_and_updates(dirs: list[Path]) -> None:
    special = LogConfig(segment_bytes=1000)
    manager = LogManager(dirs[:1], CONFIG, lambda topic: special if topic == "s" else CONFIG)
    manager.startup(NOW_MS)
    assert manager.get_or_create_log("s", 0, now_ms=NOW_MS).config == special
    assert manager.get_or_create_log("o", 0, now_ms=NOW_MS).config == CONFIG
    manager.update_topic_config("o", special)
    updated = manager.get_log("o", 0)
    assert updated is not None and updated.config == special
    manager.shutdown()


def test_a_deleted_log_stays_readable_under_its_new_name_until_removed(
    dirs: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(SEGMENT_FILES, "capacity", 1)  # every segment file reopens on use
    config = LogConfig(segment_bytes=600, file_delete_delay_ms=1000)
    manager = LogManager(dirs[:1], config)
    manager.startup(NOW_MS)
    _fill(manager, "t", 0, 8)
    log = manager.get_log("t", 0)
    assert log is not None and len(log.segments) > 1
    data = log.read(0, 1 << 20).to_bytes()
    assert manager.delete_log("t", 0, now_ms=NOW_MS)
    assert log.dir.name.endswith("-delete") and log.dir.exists()
    assert log.read(0, 1 << 20).to_bytes() == data
    manager.cleanup_logs(NOW_MS + 1000, {})
    assert not log.dir.exists()
    manager.shutdown()


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_a_partition_costs_at_most_one_descriptor(dirs: list[Path]) -> None:
    manager = LogManager(dirs[:1], CONFIG)
    manager.startup(NOW_MS)
    before = _open_fds()
    for partition in range(50):
        _fill(manager, "t", partition, 3)
    assert _open_fds() - before <= 50  # the .log file; the indexes hold none
    manager.shutdown()


# Run in a subprocess: RLIMIT_NOFILE is lowered before kpo_broker sizes its file cache.
_MANY_PARTITIONS = """
import json, os, resource, sys
from pathlib import Path
limit, partitions, log_dir = int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])
resource.setrlimit(resource.RLIMIT_NOFILE, (limit, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
from kpo_broker.log.config import LogConfig
from kpo_broker.log.manager import LogManager
from tests.unit.broker.log.batches import make_value_batch
config = LogConfig(file_delete_delay_ms=0)
manager = LogManager([log_dir], config)
manager.startup()
for partition in range(partitions):
    log = manager.get_or_create_log("t", partition)
    log.append_as_leader(make_value_batch(2, 25, tag=partition), leader_epoch=0)
while_serving = len(os.listdir("/proc/self/fd"))
readable = sum(1 for log in manager.all_logs() if log.read(0, 1 << 20).to_bytes())
manager.shutdown()
restarted = LogManager([log_dir], config)
restarted.startup()
reloaded = len(restarted.all_logs())
after_restart = len(os.listdir("/proc/self/fd"))
restarted.shutdown()
print(json.dumps([while_serving, readable, reloaded, after_restart]))
"""


def test_a_log_manager_holds_more_partitions_than_its_descriptor_limit(tmp_path: Path) -> None:
    """1,500 partitions under a 1,024 descriptor limit (4,500 descriptors if each held three)."""
    limit, partitions = 1024, 1500
    repo = Path(__file__).resolve().parents[4]
    result = subprocess.run(
        [sys.executable, "-c", _MANY_PARTITIONS, str(limit), str(partitions), str(tmp_path)],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    while_serving, readable, reloaded, after_restart = json.loads(result.stdout)
    assert readable == reloaded == partitions
    assert while_serving < limit and after_restart < limit
