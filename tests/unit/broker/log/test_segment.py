from __future__ import annotations

import os
from pathlib import Path

import pytest

from kpo_broker.log.config import LogConfig
from kpo_broker.log.filerecords import SEGMENT_FILES
from kpo_broker.log.records import assign_offsets
from kpo_broker.log.segment import LogSegment
from tests.unit.broker.log.batches import make_value_batch
from tests.unit.broker.log.fds import open_files_under

CONFIG = LogConfig(index_interval_bytes=100, segment_bytes=10_000, segment_ms=1000)


def _filled_segment(tmp_path: Path, batches: int = 10) -> tuple[LogSegment, list[bytes]]:
    segment = LogSegment.open(tmp_path, 50, CONFIG, now_ms=0)
    written = []
    offset = 50
    for i in range(batches):
        data, headers = assign_offsets(
            make_value_batch(3, 40, timestamp_ms=1000 + 10 * i), offset, 0
        )
        segment.append(data, headers, CONFIG.index_interval_bytes)
        written.append(data)
        offset = headers[-1].next_offset
    return segment, written


def test_file_names_and_append_read(tmp_path: Path) -> None:
    segment, written = _filled_segment(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "00000000000000000050.index",
        "00000000000000000050.log",
        "00000000000000000050.timeindex",
    ]
    assert segment.size == sum(map(len, written))
    assert segment.offset_index.entries > 0
    assert segment.read_next_offset() == 80
    part = segment.read(56, 10**6, None, True)
    assert part is not None and part.read_bytes() == b"".join(written[2:])
    # bounded by bytes, and by an exclusive max offset
    part = segment.read(50, len(written[0]) + 1, None, True)
    assert part is not None and part.read_bytes() == written[0]
    part = segment.read(50, 10**6, 59, True)
    assert part is not None and part.read_bytes() == b"".join(written[:3])
    assert segment.read(80, 10**6, None, True) is None
    segment.close()


def test_max_timestamp_and_find_by_timestamp(tmp_path: Path) -> None:
    segment, _ = _filled_segment(tmp_path)
    assert segment.max_timestamp_so_far == 1092
    assert segment.offset_of_max_timestamp_so_far == 79
    assert segment.find_offset_by_timestamp(1041, 0) == (63, 1041)
    assert segment.find_offset_by_timestamp(1043, 0) == (65, 1050)
    assert segment.find_offset_by_timestamp(0, 60) == (60, 1031)
    assert segment.find_offset_by_timestamp(5000, 0) is None
    segment.close()
    reopened = LogSegment.open(tmp_path, 50, CONFIG, now_ms=0)
    assert reopened.max_timestamp_so_far == 1092
    reopened.check_indexes()
    reopened.close()


def test_recover_rebuilds_identical_indexes_and_cuts_garbage(tmp_path: Path) -> None:
    segment, written = _filled_segment(tmp_path)
    index_bytes = segment.offset_index.path.read_bytes()
    time_index_bytes = segment.time_index.path.read_bytes()
    segment.records.append(b"\x00garbage-tail")
    assert segment.recover(CONFIG.index_interval_bytes) == len(b"\x00garbage-tail")
    assert segment.offset_index.path.read_bytes() == index_bytes
    assert segment.time_index.path.read_bytes() == time_index_bytes
    assert segment.size == sum(map(len, written))
    segment.close()


def test_truncate_to_removes_the_containing_batch(tmp_path: Path) -> None:
    segment, written = _filled_segment(tmp_path)
    removed = segment.truncate_to(64)  # inside the fifth batch (62..64)
    assert removed == sum(map(len, written[4:]))
    assert segment.read_next_offset() == 62
    assert segment.max_timestamp_so_far == 1032
    assert all(o < 62 for o in segment.offset_index._keys)
    segment.check_indexes()
    assert segment.truncate_to(62) == 0
    segment.close()


def test_should_roll(tmp_path: Path) -> None:
    segment = LogSegment.open(tmp_path, 0, CONFIG, now_ms=0)
    assert not segment.should_roll(CONFIG, 100, 5000, 10, now_ms=10**9)  # empty: no time roll
    data, headers = assign_offsets(make_value_batch(1, 10, timestamp_ms=1000), 0, 0)
    segment.append(data, headers, CONFIG.index_interval_bytes)
    assert not segment.should_roll(CONFIG, 100, 1500, 10, now_ms=0)
    assert segment.should_roll(CONFIG, 100, 2001, 10, now_ms=0)  # segment.ms by timestamps
    assert segment.should_roll(CONFIG, CONFIG.segment_bytes, 1000, 10, now_ms=0)
    assert segment.should_roll(CONFIG, 100, 1000, 2**31, now_ms=0)  # relative offset overflow
    segment.close()


def test_a_segment_holds_one_descriptor_its_log_file(tmp_path: Path) -> None:
    before = open_files_under(tmp_path)
    segment, _written = _filled_segment(tmp_path)
    assert open_files_under(tmp_path) == before + 1
    segment.on_become_inactive()
    segment.flush()
    assert segment.offset_index.path.stat().st_size == segment.offset_index.size_in_bytes
    assert segment.time_index.path.stat().st_size == segment.time_index.size_in_bytes
    segment.close()
    assert open_files_under(tmp_path) == before


def test_update_parent_dir_follows_a_renamed_partition_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(SEGMENT_FILES, "capacity", 1)
    old, new = tmp_path / "old", tmp_path / "new"
    old.mkdir()
    segment, written = _filled_segment(old, batches=2)
    LogSegment.open(tmp_path, 0, CONFIG, now_ms=0).close()  # evicts the segment's .log
    os.replace(old, new)
    segment.update_parent_dir(new)
    data, headers = assign_offsets(make_value_batch(3, 40, timestamp_ms=2000), 56, 0)
    segment.append(data, headers, CONFIG.index_interval_bytes)
    part = segment.read(50, 10**6, None, True)
    assert part is not None and part.read_bytes() == b"".join([*written, data])
    assert segment.max_timestamp_so_far >= 2000
    segment.close()
    reopened = LogSegment.open(new, 50, CONFIG, now_ms=0)
    reopened.check_indexes()
    assert reopened.max_timestamp_so_far == segment.max_timestamp_so_far
    reopened.close()
