from __future__ import annotations

from pathlib import Path

from kpo_broker.log.config import LogConfig
from kpo_broker.log.log import Log
from kpo_broker.log.names import offset_file_name
from tests.unit.broker.log.batches import decode_records, make_value_batch
from tests.unit.broker.log.conftest import NOW_MS, OpenLog

CONFIG = LogConfig(segment_bytes=600, index_interval_bytes=60, file_delete_delay_ms=0)


def _fill(log: Log, batches: int, records: int = 2) -> bytes:
    for i in range(batches):
        log.append_as_leader(make_value_batch(records, 25, tag=i), leader_epoch=1, now_ms=NOW_MS)
    return log.read(log.log_start_offset, 10**9).to_bytes()


def _last_log_file(log_dir: Path) -> Path:
    return sorted(log_dir.glob("*.log"))[-1]


def test_segments_roll_by_size_with_20_digit_names(open_log: OpenLog) -> None:
    log = open_log(CONFIG)
    _fill(log, 20)
    assert len(log.segments) > 3
    assert all(s.size <= CONFIG.segment_bytes for s in log.segments)
    names = sorted(p.name for p in log.dir.glob("*.log"))
    assert names == [offset_file_name(s.base_offset, ".log") for s in log.segments]
    assert names[0] == "00000000000000000000.log"
    bases = [s.base_offset for s in log.segments]
    assert bases == sorted(bases) and len(set(bases)) == len(bases)
    assert len(decode_records(log.read(0, 10**9).to_bytes())) == 40


def test_reopen_keeps_data_and_indexes(open_log: OpenLog) -> None:
    log = open_log(CONFIG)
    before = _fill(log, 20)
    indexes = {p.name: p.read_bytes() for p in log.dir.glob("*index")}
    log.close()
    again = open_log(CONFIG, recovery_point=log.log_end_offset)
    assert again.log_end_offset == 40
    assert again.read(0, 10**9).to_bytes() == before
    for offset in range(0, 40, 3):
        assert decode_records(again.read(offset, 10**9).to_bytes())[0].offset <= offset
    assert {p.name: p.read_bytes() for p in again.dir.glob("*index")} == indexes


def test_deleted_or_corrupt_index_files_are_rebuilt(open_log: OpenLog) -> None:
    log = open_log(CONFIG)
    before = _fill(log, 20)
    indexes = {p.name: p.read_bytes() for p in log.dir.glob("*index")}
    assert any(indexes.values())
    log.close()
    paths = sorted(log.dir.glob("*.index"))
    paths[0].unlink()
    (log.dir / paths[1].name.replace(".index", ".timeindex")).unlink()
    paths[2].write_bytes(b"\x7f\xff\xff\xff" * 5)  # garbage: positions beyond the segment
    again = open_log(CONFIG, recovery_point=40)  # nothing needs recovery but the indexes
    assert {p.name: p.read_bytes() for p in again.dir.glob("*index")} == indexes
    assert again.read(0, 10**9).to_bytes() == before
    assert decode_records(again.read(25, 10**9).to_bytes())[0].offset <= 25


def test_torn_tail_is_truncated_on_reopen(open_log: OpenLog) -> None:
    log = open_log(CONFIG)
    before = _fill(log, 12)
    log.close()
    torn = make_value_batch(3, 25)
    last = _last_log_file(log.dir)
    size = last.stat().st_size
    with last.open("ab") as f:
        f.write(torn[: len(torn) // 2])
    again = open_log(CONFIG, recovery_point=log.log_end_offset)
    assert again.log_end_offset == 24
    assert last.stat().st_size == size
    assert again.read(0, 10**9).to_bytes() == before
    again.append_as_leader(make_value_batch(1), leader_epoch=1, now_ms=NOW_MS)
    assert again.log_end_offset == 25


def test_garbage_tail_is_truncated(open_log: OpenLog) -> None:
    log = open_log(CONFIG)
    before = _fill(log, 5)
    log.close()
    with _last_log_file(log.dir).open("ab") as f:
        f.write(b"\x00" * 40 + b"\xff" * 40)
    again = open_log(CONFIG)
    assert again.log_end_offset == 10
    assert again.read(0, 10**9).to_bytes() == before


def test_flipped_byte_in_the_last_batch_is_truncated(open_log: OpenLog) -> None:
    log = open_log(CONFIG)
    before = _fill(log, 12)
    last_batch_size = len(make_value_batch(2, 25))
    log.close()
    last = _last_log_file(log.dir)
    data = bytearray(last.read_bytes())
    data[-5] ^= 0x01
    last.write_bytes(bytes(data))
    again = open_log(CONFIG)
    assert again.log_end_offset == 22
    assert again.read(0, 10**9).to_bytes() == before[:-last_batch_size]


def test_corruption_in_an_earlier_segment_drops_later_segments(open_log: OpenLog) -> None:
    log = open_log(CONFIG)
    _fill(log, 20)
    second = log.segments[1]
    log.close()
    path = log.dir / offset_file_name(second.base_offset, ".log")
    data = bytearray(path.read_bytes())
    data[len(make_value_batch(2, 25)) + 30] ^= 0xFF  # inside the segment's second batch
    path.write_bytes(bytes(data))
    again = open_log(CONFIG, recovery_point=0)
    assert len(again.segments) == 2
    assert again.log_end_offset == second.base_offset + 2
    assert len(decode_records(again.read(0, 10**9).to_bytes())) == again.log_end_offset


def test_stray_files_are_removed(open_log: OpenLog) -> None:
    log = open_log(CONFIG)
    _fill(log, 3)
    log.close()
    strays = [
        "00000000000000000000.log.deleted",
        "00000000000000000007.log.swap",  # at or above a .cleaned file: an unfinished swap
        "00000000000000000100.index",
        "leader-epoch-checkpoint.tmp",
        "00000000000000000005.log.cleaned",
    ]
    for name in strays:
        (log.dir / name).write_bytes(b"junk")
    again = open_log(CONFIG)
    assert again.log_end_offset == 6
    assert not any((again.dir / name).exists() for name in strays)


def test_epoch_cache_is_truncated_to_the_leo_on_open(open_log: OpenLog) -> None:
    log = open_log(CONFIG)
    _fill(log, 3)
    log.close()
    (log.dir / "leader-epoch-checkpoint").write_text("0\n3\n1 0\n2 6\n3 9\n")
    again = open_log(CONFIG)
    assert again.leader_epoch_cache.entries == ((1, 0),)


def test_flush_advances_the_recovery_point(open_log: OpenLog) -> None:
    log = open_log(CONFIG)
    _fill(log, 10)
    assert log.recovery_point == 0
    log.flush(log.active_segment.base_offset)
    assert log.recovery_point == log.active_segment.base_offset
    log.flush()
    assert log.recovery_point == log.log_end_offset == 20


def test_huge_corrupt_length_in_the_tail_is_truncated(open_log: OpenLog) -> None:
    log = open_log(CONFIG)
    before = _fill(log, 3)
    log.close()
    header = bytearray(make_value_batch(1)[:61])
    header[8:12] = (2**31 - 1).to_bytes(4, "big")
    with _last_log_file(log.dir).open("ab") as f:
        f.write(bytes(header))
    again = open_log(CONFIG)
    assert again.log_end_offset == 6
    assert again.read(0, 10**9).to_bytes() == before
