from __future__ import annotations

from pathlib import Path

import pytest

from kpo_broker.log.epoch import (
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    EpochEntry,
    LeaderEpochCache,
    deferred_checkpoints,
)
from kpo_broker.log.errors import CheckpointFormatError


@pytest.fixture
def cache(tmp_path: Path) -> LeaderEpochCache:
    return LeaderEpochCache(tmp_path / "leader-epoch-checkpoint")


def test_assign_adds_only_newer_epochs(cache: LeaderEpochCache) -> None:
    assert cache.latest_epoch is None
    assert cache.assign(2, 0)
    assert not cache.assign(2, 5)  # later batches of the same epoch
    assert not cache.assign(1, 10)  # an older epoch
    assert not cache.assign(3, -1)
    assert not cache.assign(-1, 12)  # batches without a leader epoch
    assert cache.assign(4, 10)
    assert not cache.assign(5, 9)  # start offset going backwards
    assert cache.entries == (EpochEntry(2, 0), EpochEntry(4, 10))
    assert cache.latest_epoch == 4
    assert cache.earliest_entry == EpochEntry(2, 0)


def test_checkpoint_file_format_and_reload(cache: LeaderEpochCache, tmp_path: Path) -> None:
    cache.assign(1, 0)
    cache.assign(3, 42)
    assert cache.path.read_text() == "0\n2\n1 0\n3 42\n"
    assert LeaderEpochCache(cache.path).entries == cache.entries
    assert not (tmp_path / "leader-epoch-checkpoint.tmp").exists()


def test_end_offset_for(cache: LeaderEpochCache) -> None:
    assert cache.end_offset_for(0, 100) == (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
    cache.assign(5, 11)
    cache.assign(6, 12)
    cache.assign(8, 20)
    leo = 30
    # the current (latest) epoch ends at the LEO
    assert cache.end_offset_for(8, leo) == (8, 30)
    # a past epoch ends where the next one starts
    assert cache.end_offset_for(5, leo) == (5, 12)
    assert cache.end_offset_for(6, leo) == (6, 20)
    # an epoch this leader never had: the largest known epoch below it
    assert cache.end_offset_for(7, leo) == (6, 20)
    # older than every entry (KIP-279): the requested epoch and the first start offset
    assert cache.end_offset_for(4, leo) == (4, 11)
    # newer than every entry, or undefined
    assert cache.end_offset_for(9, leo) == (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
    assert cache.end_offset_for(UNDEFINED_EPOCH, leo) == (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)


def test_epoch_for_offset_and_start_offset_of(cache: LeaderEpochCache) -> None:
    cache.assign(1, 5)
    cache.assign(3, 10)
    assert cache.epoch_for_offset(4) == UNDEFINED_EPOCH
    assert cache.epoch_for_offset(5) == 1
    assert cache.epoch_for_offset(9) == 1
    assert cache.epoch_for_offset(10) == 3
    assert cache.epoch_for_offset(1000) == 3
    assert cache.start_offset_of(3) == 10
    assert cache.start_offset_of(2) is None


def test_truncate_from_end(cache: LeaderEpochCache) -> None:
    for epoch, start in ((1, 0), (2, 10), (3, 20)):
        cache.assign(epoch, start)
    cache.truncate_from_end(20)
    assert cache.entries == (EpochEntry(1, 0), EpochEntry(2, 10))
    cache.truncate_from_end(15)
    assert cache.entries == (EpochEntry(1, 0), EpochEntry(2, 10))
    cache.truncate_from_end(0)
    assert cache.entries == ()
    assert LeaderEpochCache(cache.path).entries == ()


def test_truncate_from_start(cache: LeaderEpochCache) -> None:
    for epoch, start in ((1, 0), (2, 10), (3, 20)):
        cache.assign(epoch, start)
    cache.truncate_from_start(0)
    assert cache.entries[0] == EpochEntry(1, 0)
    cache.truncate_from_start(15)
    assert cache.entries == (EpochEntry(2, 15), EpochEntry(3, 20))
    cache.truncate_from_start(20)
    assert cache.entries == (EpochEntry(3, 20),)
    cache.truncate_from_start(25)
    assert cache.entries == (EpochEntry(3, 25),)
    assert LeaderEpochCache(cache.path).entries == (EpochEntry(3, 25),)


def test_malformed_checkpoint_raises(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_text("0\n2\n1 0\n")
    with pytest.raises(CheckpointFormatError):
        LeaderEpochCache(path)
    path.write_text("0\n2\n3 10\n2 20\n")
    with pytest.raises(CheckpointFormatError, match="order"):
        LeaderEpochCache(path)
    path.write_text("0\n1\n3 x\n")
    with pytest.raises(CheckpointFormatError):
        LeaderEpochCache(path)


def test_checkpoints_of_a_batch_are_written_at_its_flush(tmp_path: Path) -> None:
    caches = [LeaderEpochCache(tmp_path / f"p{i}" / "leader-epoch-checkpoint") for i in range(20)]
    for cache in caches:
        cache.path.parent.mkdir()
    with deferred_checkpoints() as batch:
        for cache in caches:
            cache.assign(0, 0)
            cache.assign(3, 5)
        assert not any(cache.path.exists() for cache in caches)
    assert batch.flush() == {}
    for cache in caches:
        assert LeaderEpochCache(cache.path).entries == (EpochEntry(0, 0), EpochEntry(3, 5))
    # Outside a batch, writes are immediate again.
    caches[0].assign(4, 9)
    assert LeaderEpochCache(caches[0].path).latest_entry == EpochEntry(4, 9)


def test_a_failed_checkpoint_write_of_a_batch_is_reported(tmp_path: Path) -> None:
    ok = LeaderEpochCache(tmp_path / "leader-epoch-checkpoint")
    gone = LeaderEpochCache(tmp_path / "missing-dir" / "leader-epoch-checkpoint")
    with deferred_checkpoints() as batch:
        ok.assign(1, 0)
        gone.assign(1, 0)
    failed = batch.flush()
    assert set(failed) == {gone}
    assert isinstance(failed[gone], FileNotFoundError)
    assert LeaderEpochCache(ok.path).entries == (EpochEntry(1, 0),)
