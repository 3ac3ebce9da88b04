"""Future logs of intra-broker moves (KIP-113) in the LogManager."""

from __future__ import annotations

from pathlib import Path

import pytest

from kpo_broker.log.config import LogConfig
from kpo_broker.log.errors import LogDirectoryError
from kpo_broker.log.log import Log
from kpo_broker.log.log_dirs import LogDirNotFoundError
from kpo_broker.log.manager import LogManager
from kpo_broker.log.names import future_dir_name, is_future_dir_name, parse_log_dir_name
from kpo_kafka.topic_partition import TopicPartition
from tests.unit.broker.log.batches import decode_records, make_value_batch
from tests.unit.broker.log.conftest import NOW_MS

CONFIG = LogConfig(segment_bytes=600, index_interval_bytes=60, file_delete_delay_ms=0)
TP = TopicPartition("orders.v1-eu", 2)


@pytest.fixture
def dirs(tmp_path: Path) -> list[Path]:
    return [tmp_path / "d0", tmp_path / "d1"]


@pytest.fixture
def manager(dirs: list[Path]) -> LogManager:
    m = LogManager(dirs, CONFIG)
    m.startup(NOW_MS)
    return m


def _fill(log: Log, batches: int, epoch: int = 0, first_tag: int = 0) -> None:
    for i in range(batches):
        log.append_as_leader(
            make_value_batch(2, 25, tag=first_tag + i), leader_epoch=epoch, now_ms=NOW_MS
        )


def _copy_all(current: Log, future: Log) -> None:
    while future.log_end_offset < current.log_end_offset:
        future.append_as_follower(current.read(future.log_end_offset, 200).to_bytes())


def _values(log: Log) -> list[bytes | None]:
    data = log.read(log.log_start_offset, 1 << 20).to_bytes()
    return [r.value for r in decode_records(data)]


def _children(path: Path) -> list[str]:
    return sorted(p.name for p in path.iterdir() if p.is_dir())


def test_future_dir_names_parse_to_the_partition() -> None:
    name = future_dir_name(TP, "0123456789abcdef0123456789abcdef")
    assert name == "orders.v1-eu-2.0123456789abcdef0123456789abcdef-future"
    assert is_future_dir_name(name)
    assert not is_future_dir_name("orders.v1-eu-2")
    assert parse_log_dir_name(name) == TP


def test_create_copy_and_swap(manager: LogManager, dirs: list[Path]) -> None:
    current = manager.get_or_create_log(*TP, log_dir=dirs[0], now_ms=NOW_MS)
    _fill(current, 6, epoch=3)
    current.leader_epoch_cache.assign(4, current.log_end_offset)  # leader without appends
    future = manager.create_future_log(*TP, dirs[1], now_ms=NOW_MS)
    assert manager.create_future_log(*TP, dirs[1]) is future
    assert manager.get_future_log(*TP) is future
    assert manager.future_logs() == [future]
    assert future.dir.parent == dirs[1] and is_future_dir_name(future.dir.name)

    _copy_all(current, future)
    described = {info.path: info for info in manager.describe_log_dirs()}
    [moving] = described[dirs[1]].partitions
    assert moving.is_future and moving.offset_lag == 0 and moving.topic_partition == TP
    [staying] = described[dirs[0]].partitions
    assert not staying.is_future

    expected = _values(current)
    swapped = manager.replace_current_with_future_log(*TP, now_ms=NOW_MS)
    assert manager.get_log(*TP) is swapped
    assert manager.get_future_log(*TP) is None
    assert swapped.dir == dirs[1] / "orders.v1-eu-2"
    assert swapped.log_end_offset == 12
    assert _values(swapped) == expected
    assert swapped.leader_epoch_cache.entries[-1] == (4, 12)
    assert _children(dirs[0]) == []  # old dir deleted (delete delay 0)
    assert _children(dirs[1]) == ["orders.v1-eu-2"]
    assert manager.log_dir_of(*TP) == dirs[1]
    manager.shutdown()


def test_describe_reports_the_future_lag(manager: LogManager, dirs: list[Path]) -> None:
    current = manager.get_or_create_log(*TP, log_dir=dirs[0], now_ms=NOW_MS)
    _fill(current, 5)
    future = manager.create_future_log(*TP, dirs[1], now_ms=NOW_MS)
    future.append_as_follower(current.read(0, 1).to_bytes())  # one batch of two records
    described = {info.path: info for info in manager.describe_log_dirs()}
    [moving] = described[dirs[1]].partitions
    assert (moving.is_future, moving.offset_lag) == (True, 8)
    assert moving.size_in_bytes == future.size_in_bytes > 0
    manager.shutdown()


def test_swap_refuses_a_future_log_behind(manager: LogManager, dirs: list[Path]) -> None:
    current = manager.get_or_create_log(*TP, log_dir=dirs[0], now_ms=NOW_MS)
    _fill(current, 2)
    manager.create_future_log(*TP, dirs[1], now_ms=NOW_MS)
    with pytest.raises(LogDirectoryError, match="future LEO"):
        manager.replace_current_with_future_log(*TP)
    assert manager.get_log(*TP) is current
    manager.shutdown()


def test_future_log_errors_and_abort(manager: LogManager, dirs: list[Path]) -> None:
    with pytest.raises(LogDirectoryError, match="no log"):
        manager.create_future_log(*TP, dirs[1])
    manager.get_or_create_log(*TP, log_dir=dirs[0], now_ms=NOW_MS)
    with pytest.raises(LogDirectoryError, match="already in"):
        manager.create_future_log(*TP, dirs[0])
    with pytest.raises(LogDirNotFoundError):
        manager.create_future_log(*TP, dirs[0].parent / "elsewhere")
    manager.create_future_log(*TP, dirs[1], now_ms=NOW_MS)
    assert manager.abort_future_log(*TP, now_ms=NOW_MS)
    assert not manager.abort_future_log(*TP)
    assert _children(dirs[1]) == []
    manager.shutdown()


def test_delete_log_deletes_the_future_log_too(manager: LogManager, dirs: list[Path]) -> None:
    manager.get_or_create_log(*TP, log_dir=dirs[0], now_ms=NOW_MS)
    manager.create_future_log(*TP, dirs[1], now_ms=NOW_MS)
    assert manager.delete_log(*TP, now_ms=NOW_MS)
    assert manager.get_future_log(*TP) is None
    assert _children(dirs[0]) == [] and _children(dirs[1]) == []
    manager.shutdown()


def test_preferred_dir_places_a_new_log(manager: LogManager, dirs: list[Path]) -> None:
    manager.get_or_create_log("other", 0, log_dir=dirs[1], now_ms=NOW_MS)
    manager.set_preferred_log_dir(*TP, dirs[1])  # the dir with more partitions
    assert manager.get_or_create_log(*TP, now_ms=NOW_MS).dir.parent == dirs[1]
    with pytest.raises(LogDirNotFoundError):
        manager.set_preferred_log_dir(*TP, dirs[0].parent / "elsewhere")
    manager.shutdown()


def test_restart_keeps_a_future_log_and_its_data(dirs: list[Path]) -> None:
    first = LogManager(dirs, CONFIG)
    first.startup(NOW_MS)
    current = first.get_or_create_log(*TP, log_dir=dirs[0], now_ms=NOW_MS)
    _fill(current, 4)
    future = first.create_future_log(*TP, dirs[1], now_ms=NOW_MS)
    future.append_as_follower(current.read(0, 200).to_bytes())
    copied = future.log_end_offset
    future_name = future.dir.name
    first.shutdown()

    again = LogManager(dirs, CONFIG)
    again.startup(NOW_MS)
    reloaded = again.get_future_log(*TP)
    assert reloaded is not None and reloaded.dir == dirs[1] / future_name
    assert reloaded.log_end_offset == copied > 0
    assert reloaded.recovery_point == copied  # checkpointed in the future log's dir
    current = again.get_log(*TP)
    assert current is not None and current.dir.parent == dirs[0]
    _copy_all(current, reloaded)
    assert again.replace_current_with_future_log(*TP).dir.parent == dirs[1]
    again.shutdown()


def test_restart_after_a_crash_mid_swap_promotes_the_future_log(dirs: list[Path]) -> None:
    first = LogManager(dirs, CONFIG)
    first.startup(NOW_MS)
    current = first.get_or_create_log(*TP, log_dir=dirs[0], now_ms=NOW_MS)
    _fill(current, 3)
    future = first.create_future_log(*TP, dirs[1], now_ms=NOW_MS)
    _copy_all(current, future)
    expected = _values(current)
    first.shutdown()
    # the swap renamed the current log for deletion, then the broker died
    (dirs[0] / "orders.v1-eu-2").rename(
        dirs[0] / "orders.v1-eu-2.00000000000000000000000000000000-delete"
    )

    again = LogManager(dirs, CONFIG)
    again.startup(NOW_MS)
    promoted = again.get_log(*TP)
    assert promoted is not None and promoted.dir == dirs[1] / "orders.v1-eu-2"
    assert again.get_future_log(*TP) is None
    assert _values(promoted) == expected
    assert _children(dirs[0]) == []
    again.shutdown()
