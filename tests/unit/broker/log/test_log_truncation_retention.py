from __future__ import annotations

import pytest

from kpo_broker.log.config import LogConfig
from kpo_broker.log.errors import OffsetOutOfRangeError
from kpo_broker.log.log import Log
from kpo_broker.log.records import assign_offsets
from tests.unit.broker.log.batches import decode_records, make_value_batch
from tests.unit.broker.log.conftest import NOW_MS, OpenLog

DAY_MS = 86_400_000


def _config(**kwargs: int) -> LogConfig:
    base = {"segment_bytes": 600, "index_interval_bytes": 60, "file_delete_delay_ms": 0}
    base.update(kwargs)
    return LogConfig(**base)


def _fill(log: Log, batches: int, timestamp_ms: int = NOW_MS, epoch: int = 1) -> None:
    for i in range(batches):
        log.append_as_leader(
            make_value_batch(2, 25, timestamp_ms=timestamp_ms, tag=i), epoch, now_ms=NOW_MS
        )


def test_truncate_to_batch_boundary_and_inside_a_batch(open_log: OpenLog) -> None:
    log = open_log(_config())
    _fill(log, 10, epoch=1)
    _fill(log, 10, epoch=2)  # epoch 2 starts at offset 20
    segments_before = len(log.segments)
    assert log.truncate_to(30)
    assert log.log_end_offset == 30
    assert len(log.segments) < segments_before
    assert [r.offset for r in decode_records(log.read(0, 10**9).to_bytes())] == list(range(30))
    # offset 25 lies inside batch 24..25: the whole batch goes, LEO ends where data ends
    assert log.truncate_to(25)
    assert log.log_end_offset == 24
    assert log.leader_epoch_cache.entries == ((1, 0), (2, 20))
    assert log.truncate_to(20)
    assert log.leader_epoch_cache.entries == ((1, 0),)
    assert not log.truncate_to(20) and not log.truncate_to(100)
    info = log.append_as_leader(make_value_batch(1), leader_epoch=3, now_ms=NOW_MS)
    assert info.first_offset == 20
    assert log.leader_epoch_cache.entries == ((1, 0), (3, 20))
    assert log.read(19, 10**6).to_bytes()[:8] == (18).to_bytes(8, "big")


def test_truncate_to_survives_reopen(open_log: OpenLog) -> None:
    log = open_log(_config())
    _fill(log, 10)
    log.truncate_to(9)  # inside batch 8..9
    assert log.log_end_offset == 8
    log.close()
    again = open_log(_config())
    assert again.log_end_offset == 8
    assert len(decode_records(again.read(0, 10**9).to_bytes())) == 8


def test_truncate_fully_and_start_at(open_log: OpenLog) -> None:
    log = open_log(_config())
    _fill(log, 10)
    log.truncate_fully_and_start_at(500)
    assert (log.log_start_offset, log.log_end_offset, log.recovery_point) == (500, 500, 500)
    assert [s.base_offset for s in log.segments] == [500]
    assert log.leader_epoch_cache.entries == ()
    assert sorted(p.name for p in log.dir.glob("*.log")) == ["00000000000000000500.log"]
    data, _ = assign_offsets(make_value_batch(1), 500, 4)
    log.append_as_follower(data, now_ms=NOW_MS)
    assert log.log_end_offset == 501
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)


def test_retention_by_time_respects_the_high_watermark(open_log: OpenLog) -> None:
    log = open_log(_config(retention_ms=7 * DAY_MS))
    _fill(log, 12, timestamp_ms=NOW_MS - 10 * DAY_MS)  # old data, several segments
    old_segments = len(log.segments)
    _fill(log, 3, timestamp_ms=NOW_MS)
    assert len(log.segments) > old_segments
    # nothing is deleted at or after the HW
    assert log.delete_old_segments(NOW_MS, high_watermark=0) == 0
    second_base = log.segments[1].base_offset
    assert log.delete_old_segments(NOW_MS, high_watermark=second_base) == 1
    assert log.log_start_offset == second_base
    deleted = log.delete_old_segments(NOW_MS, high_watermark=log.log_end_offset)
    assert deleted == old_segments - 1
    assert log.log_start_offset == log.segments[0].base_offset
    assert log.segments[0].max_timestamp_so_far >= NOW_MS
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)
    assert decode_records(log.read(log.log_start_offset, 10**9).to_bytes())


def test_retention_never_deletes_the_active_segment(open_log: OpenLog) -> None:
    log = open_log(_config(retention_ms=DAY_MS))
    _fill(log, 3, timestamp_ms=NOW_MS - 5 * DAY_MS)
    assert len(log.segments) == 1
    assert log.delete_old_segments(NOW_MS, high_watermark=log.log_end_offset) == 0
    assert log.log_end_offset == 6


def test_retention_by_size(open_log: OpenLog) -> None:
    log = open_log(_config(retention_bytes=1500, retention_ms=-1))
    _fill(log, 30)
    total = log.size_in_bytes
    assert total > 3000
    deleted = log.delete_old_segments(NOW_MS, high_watermark=log.log_end_offset)
    assert deleted > 0
    assert log.size_in_bytes <= 1500 + log.segments[0].size
    assert log.size_in_bytes > 1500 - log.segments[0].size or len(log.segments) == 1
    assert log.log_start_offset == log.segments[0].base_offset


def test_log_start_offset_and_epoch_cache_after_retention(open_log: OpenLog) -> None:
    log = open_log(_config(retention_ms=DAY_MS))
    _fill(log, 8, timestamp_ms=NOW_MS - 2 * DAY_MS, epoch=1)
    _fill(log, 20, timestamp_ms=NOW_MS, epoch=2)
    log.delete_old_segments(NOW_MS, high_watermark=log.log_end_offset)
    start = log.log_start_offset
    assert start > 0
    assert log.leader_epoch_cache.entries[0].start_offset == start
    assert log.maybe_increment_log_start_offset(start + 1, high_watermark=log.log_end_offset)
    assert not log.maybe_increment_log_start_offset(start, high_watermark=log.log_end_offset)
    with pytest.raises(OffsetOutOfRangeError):
        log.maybe_increment_log_start_offset(10**6, high_watermark=log.log_end_offset)
    # segments wholly below the log start offset are deleted by the next cleanup
    log.maybe_increment_log_start_offset(log.segments[2].base_offset, log.log_end_offset)
    assert log.delete_old_segments(NOW_MS, log.log_end_offset) == 2


def test_deleted_segments_stay_readable_until_the_delay_passes(open_log: OpenLog) -> None:
    log = open_log(_config(retention_ms=DAY_MS, file_delete_delay_ms=60_000))
    _fill(log, 10, timestamp_ms=NOW_MS - 2 * DAY_MS)
    _fill(log, 1)
    in_flight = log.read(0, 10**9)
    expected = in_flight.to_bytes()
    assert log.delete_old_segments(NOW_MS, log.log_end_offset) > 0
    assert list(log.dir.glob("*.log.deleted"))
    assert list(log.dir.glob("*.index.deleted"))
    assert in_flight.to_bytes() == expected  # handles still open
    assert log.purge_deleted_segments(NOW_MS + 59_999) == 0
    assert log.purge_deleted_segments(NOW_MS + 60_000) > 0
    assert not list(log.dir.glob("*.deleted"))
