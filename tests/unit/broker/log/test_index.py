from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from kpo_broker.log.errors import CorruptIndexError, InvalidIndexOffsetError
from kpo_broker.log.index import NO_TIMESTAMP, OffsetIndex, TimeIndex
from tests.unit.broker.log.fds import open_files_under


def test_offset_index_lookup_returns_greatest_entry_at_or_below(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "00000000000000000100.index", 100, 1024)
    assert index.lookup(150) == (100, 0)
    for offset, position in ((110, 4100), (120, 8300), (135, 12500)):
        index.append(offset, position)
    assert index.lookup(99) == (100, 0)
    assert index.lookup(109) == (100, 0)
    assert index.lookup(110) == (110, 4100)
    assert index.lookup(134) == (120, 8300)
    assert index.lookup(10_000) == (135, 12500)
    assert index.entries == 3
    assert index.size_in_bytes == 24


def test_offset_index_file_format_and_reload(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000100.index"
    index = OffsetIndex(path, 100, 1024)
    index.append(105, 4097)
    index.close()
    assert path.read_bytes() == (5).to_bytes(4, "big") + (4097).to_bytes(4, "big")
    again = OffsetIndex(path, 100, 1024)
    assert again.last_entry == (105, 4097)
    again.sanity_check(log_size=5000)


def test_offset_index_rejects_non_increasing_and_full(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "x.index", 0, 16)  # two entries
    index.append(5, 100)
    with pytest.raises(InvalidIndexOffsetError):
        index.append(5, 200)
    index.append(6, 200)
    assert index.is_full
    with pytest.raises(InvalidIndexOffsetError):
        index.append(7, 300)
    with pytest.raises(InvalidIndexOffsetError):
        OffsetIndex(tmp_path / "y.index", 10, 64).append(9, 0)


def test_offset_index_truncate(tmp_path: Path) -> None:
    path = tmp_path / "x.index"
    index = OffsetIndex(path, 0, 1024)
    for i in range(1, 6):
        index.append(i * 10, i * 1000)
    index.truncate_to(30)
    assert index.entries == 2 and index.last_entry == (20, 2000)
    assert path.stat().st_size == 16
    index.append(25, 2500)  # appends continue after truncation
    index.close()
    assert OffsetIndex(path, 0, 1024).last_entry == (25, 2500)


def test_offset_index_sanity_check_failures(tmp_path: Path) -> None:
    path = tmp_path / "x.index"
    index = OffsetIndex(path, 0, 1024)
    index.append(10, 5000)
    index.close()
    with pytest.raises(CorruptIndexError, match="beyond"):
        OffsetIndex(path, 0, 1024).sanity_check(log_size=4000)
    with path.open("ab") as f:
        f.write(b"\x00\x01\x02")
    with pytest.raises(CorruptIndexError, match="multiple"):
        OffsetIndex(path, 0, 1024).sanity_check(log_size=10_000)
    path.write_bytes(
        (20).to_bytes(4, "big") + (10).to_bytes(4, "big") + (15).to_bytes(4, "big") * 2
    )
    with pytest.raises(CorruptIndexError, match="order"):
        OffsetIndex(path, 0, 1024).sanity_check(log_size=10_000)


def test_time_index_appends_only_increasing_timestamps(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "x.timeindex", 50, 1200)
    assert index.last_entry == (NO_TIMESTAMP, 50)
    index.maybe_append(-1, 50)  # never stores "no timestamp"
    assert index.entries == 0
    index.maybe_append(1000, 55)
    index.maybe_append(1000, 60)  # same timestamp: ignored
    index.maybe_append(900, 61)  # lower: ignored
    index.maybe_append(2000, 70)
    assert index.entries == 2
    assert index.lookup(999) == (NO_TIMESTAMP, 50)
    assert index.lookup(1500) == (1000, 55)
    assert index.lookup(2000) == (2000, 70)
    with pytest.raises(InvalidIndexOffsetError):
        index.maybe_append(3000, 69)
    index.sanity_check(next_offset=71)
    with pytest.raises(CorruptIndexError):
        index.sanity_check(next_offset=70)
    index.truncate_to(70)
    assert index.last_entry == (1000, 55)


def test_time_index_file_format_and_full_check(tmp_path: Path) -> None:
    path = tmp_path / "x.timeindex"
    index = TimeIndex(path, 0, 12)  # one entry
    index.maybe_append(5, 3)
    assert index.is_full
    with pytest.raises(InvalidIndexOffsetError):
        index.maybe_append(6, 4)
    index.maybe_append(7, 4, skip_full_check=True)
    index.close()
    data = path.read_bytes()
    assert data[:12] == (5).to_bytes(8, "big") + (3).to_bytes(4, "big")
    assert TimeIndex(path, 0, 12).last_entry == (7, 4)


def test_indexes_hold_no_descriptor_and_write_entries_when_asked(tmp_path: Path) -> None:
    before = open_files_under(tmp_path)
    offsets = OffsetIndex(tmp_path / "x.index", 0, 1024)
    times = TimeIndex(tmp_path / "x.timeindex", 0, 1200)
    offsets.append(3, 4100)
    times.maybe_append(1000, 3)
    assert open_files_under(tmp_path) == before
    assert offsets.path.read_bytes() == b"" and times.path.read_bytes() == b""
    assert offsets.lookup(5) == (3, 4100) and times.lookup(1000) == (1000, 3)
    offsets.write_pending()
    times.write_pending()
    assert offsets.path.read_bytes() == (3).to_bytes(4, "big") + (4100).to_bytes(4, "big")
    assert times.path.read_bytes() == (1000).to_bytes(8, "big") + (3).to_bytes(4, "big")
    offsets.append(7, 8200)
    offsets.close()  # writes what is pending
    assert OffsetIndex(offsets.path, 0, 1024).last_entry == (7, 8200)
    assert open_files_under(tmp_path) == before


def test_truncation_of_pending_entries_and_of_a_torn_tail(tmp_path: Path) -> None:
    path = tmp_path / "x.index"
    entry = struct.Struct(">ii")
    path.write_bytes(entry.pack(1, 100) + entry.pack(2, 200) + b"\x00\x01\x02")
    index = OffsetIndex(path, 0, 1024)
    assert index.entries == 2
    index.append(3, 300)  # pending, after the torn tail in memory only
    index.truncate_to(10)  # nothing above 10, but the torn tail goes
    assert path.read_bytes() == entry.pack(1, 100) + entry.pack(2, 200) + entry.pack(3, 300)
    index.sanity_check(log_size=1000)
    index.append(4, 400)
    index.append(5, 500)
    index.truncate_to(5)  # one written and one pending entry stay
    assert path.read_bytes() == b"".join(entry.pack(i, i * 100) for i in range(1, 5))
    index.truncate_to(2)
    assert path.read_bytes() == entry.pack(1, 100) and index.last_entry == (1, 100)


def test_a_closed_index_answers_lookups_but_takes_no_entries(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "x.index", 0, 1024)
    index.append(1, 10)
    index.close()
    assert index.lookup(1) == (1, 10)
    with pytest.raises(ValueError, match="closed"):
        index.append(2, 20)


def test_update_parent_dir_writes_under_the_new_directory(tmp_path: Path) -> None:
    (tmp_path / "old").mkdir()
    index = TimeIndex(tmp_path / "old" / "x.timeindex", 0, 1200)
    os.replace(tmp_path / "old", tmp_path / "new")
    index.update_parent_dir(tmp_path / "new")
    index.maybe_append(1000, 3)
    index.close()
    assert TimeIndex(tmp_path / "new" / "x.timeindex", 0, 1200).last_entry == (1000, 3)
