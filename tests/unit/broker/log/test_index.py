from __future__ import annotations

from pathlib import Path

import pytest

from kpo_broker.log.errors import CorruptIndexError, InvalidIndexOffsetError
from kpo_broker.log.index import NO_TIMESTAMP, OffsetIndex, TimeIndex


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
