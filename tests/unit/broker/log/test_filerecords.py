from __future__ import annotations

import gc
import os
import warnings
from pathlib import Path

import pytest

from kpo_broker.log.filerecords import FileRecords, SegmentFileCache
from tests.unit.broker.log.fds import open_files_under


def test_cache_closes_the_least_recently_used_file_and_it_reopens_on_use(tmp_path: Path) -> None:
    cache = SegmentFileCache(2)
    before = open_files_under(tmp_path)
    first, second, third = (FileRecords(tmp_path / f"{n}.log", cache) for n in "abc")
    assert len(cache) == 2 and open_files_under(tmp_path) == before + 2
    assert not first.is_open and second.is_open and third.is_open
    assert first.append(b"first") == 0
    assert first.is_open and not second.is_open
    assert second.append(b"second") == 0
    assert third.append(b"third") == 0
    assert [r.pread(0, 100) for r in (first, second, third)] == [b"first", b"second", b"third"]
    assert first.append(b"-more") == 5  # appends continue at the end after a reopen
    assert first.pread(0, 100) == b"first-more" and first.size == 10
    assert open_files_under(tmp_path) == before + 2
    for records in (first, second, third):
        records.close()
    assert len(cache) == 0 and open_files_under(tmp_path) == before


def test_a_slice_holds_no_descriptor_and_reopens_its_file_when_sent(tmp_path: Path) -> None:
    cache = SegmentFileCache(1)
    records = FileRecords(tmp_path / "a.log", cache)
    records.append(bytes(range(100)))
    slices = [records.slice(i, 10) for i in range(0, 100, 10)]
    FileRecords(tmp_path / "b.log", cache).close()  # evicts a.log from the cache
    before = open_files_under(tmp_path)
    assert not records.is_open
    records.rename(tmp_path / "a.log.deleted")  # a deleted segment, within the delete delay
    file = slices[2].open_file()
    FileRecords(tmp_path / "c.log", cache).close()  # evicted while the transfer holds it
    assert os.pread(file.fileno(), 10, 20) == bytes(range(20, 30))
    assert open_files_under(tmp_path) == before + 1
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        del file
        gc.collect()
    # Only this test's file: gc.collect() may finalize what earlier tests in this process left.
    assert not [
        w
        for w in caught
        if issubclass(w.category, ResourceWarning) and str(tmp_path) in str(w.message)
    ]
    assert open_files_under(tmp_path) == before
    assert b"".join(part.read_bytes() for part in slices) == bytes(range(100))
    records.delete()
    with pytest.raises(ValueError, match="closed"):
        slices[0].open_file()


def test_a_closed_file_is_not_reopened(tmp_path: Path) -> None:
    records = FileRecords(tmp_path / "a.log", SegmentFileCache(4))
    records.append(b"data")
    records.close()
    records.close()
    with pytest.raises(ValueError, match="closed"):
        records.pread(0, 4)
    with pytest.raises(ValueError, match="closed"):
        records.append(b"more")


def test_update_parent_dir_reopens_under_the_new_directory(tmp_path: Path) -> None:
    cache = SegmentFileCache(1)
    (tmp_path / "old").mkdir()
    records = FileRecords(tmp_path / "old" / "a.log", cache)
    records.append(b"before")
    FileRecords(tmp_path / "b.log", cache).close()
    os.replace(tmp_path / "old", tmp_path / "new")
    records.update_parent_dir(tmp_path / "new")
    records.append(b"-after")
    assert (tmp_path / "new" / "a.log").read_bytes() == b"before-after"
    records.close()


def test_cache_capacity_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        SegmentFileCache(0)
