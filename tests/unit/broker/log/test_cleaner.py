"""The log cleaner's pure parts and one cleaning of a real log directory.

Offset map, segment grouping, the batch filter (overwrites, tombstones and their delete
horizon, keyless records, empty batches kept for producers), a whole ``Cleaner`` round on
a ``Log`` (offsets, indexes, epoch cache and producer state stay valid, the result
survives a reopen), the choice of the dirtiest log and the ``cleaner-offset-checkpoint``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kpo_broker.log.cleaner import (
    Cleaner,
    LogToClean,
    SegmentSize,
    Throttler,
    group_segments_by_size,
)
from kpo_broker.log.cleaner_manager import (
    CLEANER_OFFSET_CHECKPOINT,
    LogCleanerManager,
    LogCleaningState,
    cleanable_offsets,
)
from kpo_broker.log.config import LogConfig
from kpo_broker.log.errors import InvalidRecordError
from kpo_broker.log.log import Log, LogCleaningAbortedError
from kpo_broker.log.offset_map import OffsetMap
from kpo_broker.log.record_filter import (
    DELETE_HORIZON_MASK,
    CleanerFilter,
    decode_records,
    filter_batches,
)
from kpo_broker.log.records import iter_batches
from tests.unit.broker.log.batches import CODEC_GZIP, make_batch
from tests.unit.broker.log.batches import decode_records as kp_decode
from tests.unit.broker.log.conftest import NOW_MS, OpenLog

COMPACT = LogConfig(
    segment_bytes=600,
    file_delete_delay_ms=0,
    cleanup_policy=("compact",),
    delete_retention_ms=1000,
    min_cleanable_dirty_ratio=0.01,
)


def _keyed(pairs: list[tuple[bytes | None, bytes | None]], **kwargs: int) -> bytes:
    return make_batch([v for _k, v in pairs], keys=[k for k, _v in pairs], **kwargs)


def _filter(
    offset_map: OffsetMap,
    now_ms: int = NOW_MS,
    producers: dict[int, int] | None = None,
    upper: int = 10**9,
) -> CleanerFilter:
    return CleanerFilter(offset_map, now_ms, 1000, producers or {}, upper, 10**8)


def _never_done(_cleanable: LogToClean) -> None:
    return None


def _cleaner(memory: int = 24 * 1000, check_done=_never_done) -> Cleaner:  # type: ignore[no-untyped-def]
    return Cleaner(0, OffsetMap(memory), 4096, 0.9, Throttler(float("inf")), check_done)


def _latest(log: Log) -> dict[bytes, tuple[int, bytes | None]]:
    """Key -> (offset, value) of its latest record, as read through the log."""
    latest: dict[bytes, tuple[int, bytes | None]] = {}
    for record in kp_decode(log.read(log.log_start_offset, 10**9).to_bytes()):
        assert record.key is not None
        latest[record.key] = (record.offset, record.value)
    return latest


def _fill(log: Log, rounds: int, keys: int = 4, epoch: int = 0) -> None:
    """``rounds`` batches overwriting ``keys`` keys; then a roll so all is cleanable."""
    for r in range(rounds):
        pairs = [(b"k%d" % k, b"v%d-%d" % (k, r)) for k in range(keys)]
        log.append_as_leader(_keyed(pairs, timestamp_ms=NOW_MS + r), epoch, now_ms=NOW_MS)


def _to_clean(log: Log, first_dirty: int = 0, upper: int | None = None) -> LogToClean:
    end = log.active_segment.base_offset if upper is None else upper
    return LogToClean(
        log.topic_partition, log, first_dirty, end, 0, log.size_in_bytes, False, log.cleaner_fence
    )


# ----------------------------------------------------------------- offset map


def test_offset_map_keeps_the_latest_offset_per_key_within_its_slots() -> None:
    offset_map = OffsetMap(24 * 3)
    assert offset_map.slots == 3
    offset_map.put(b"a", 1)
    offset_map.put(b"b", 2)
    offset_map.put(b"a", 5)
    assert (offset_map.get(b"a"), offset_map.get(b"b"), offset_map.get(b"c")) == (5, 2, -1)
    assert offset_map.latest_offset == 5 and offset_map.size == 2
    offset_map.put(b"c", 6)
    with pytest.raises(OverflowError):
        offset_map.put(b"d", 7)
    assert offset_map.utilization == 1.0
    offset_map.update_latest_offset(9)
    assert offset_map.latest_offset == 9
    offset_map.clear()
    assert (offset_map.size, offset_map.latest_offset) == (0, -1)
    with pytest.raises(ValueError, match="no slot"):
        OffsetMap(23)


# ----------------------------------------------------------------- grouping


def test_groups_respect_segment_and_index_sizes_and_relative_offsets() -> None:
    sizes = [SegmentSize(0, 300, 8, 12), SegmentSize(10, 300, 8, 12), SegmentSize(20, 300, 8, 12)]
    assert group_segments_by_size(sizes, 600, 1000, 30) == [[0, 1], [2]]
    assert group_segments_by_size(sizes, 10_000, 24, 30) == [[0, 1], [2]]
    assert group_segments_by_size(sizes, 10_000, 1000, 30) == [[0, 1, 2]]
    far = [SegmentSize(0, 10, 0, 0), SegmentSize(2**31, 10, 0, 0)]
    assert group_segments_by_size(far, 10_000, 1000, 2**31 + 5) == [[0], [1]]
    assert group_segments_by_size([], 100, 100, 0) == []


# ----------------------------------------------------------------- batch filter


def test_overwritten_records_go_and_offsets_stay() -> None:
    offset_map = OffsetMap(24 * 100)
    offset_map.put(b"a", 2)
    offset_map.put(b"b", 1)
    batch = _keyed([(b"a", b"1"), (b"b", b"2"), (b"a", b"3")])
    result = filter_batches(batch, _filter(offset_map))
    records = kp_decode(bytes(result.data))
    assert [(r.offset, r.key, r.value) for r in records] == [(1, b"b", b"2"), (2, b"a", b"3")]
    header = result.headers[0]
    assert (header.base_offset, header.last_offset_delta, header.records_count) == (0, 2, 2)
    assert (result.messages_read, result.messages_retained) == (3, 2)


def test_a_batch_keeping_everything_is_copied_unchanged() -> None:
    offset_map = OffsetMap(24 * 100)
    batch = _keyed([(b"a", b"1"), (b"b", b"2")])
    offset_map.put(b"a", 0)
    offset_map.put(b"b", 1)
    assert bytes(filter_batches(batch, _filter(offset_map)).data) == batch


def test_tombstones_get_a_delete_horizon_then_go_after_it() -> None:
    offset_map = OffsetMap(24 * 100)
    offset_map.put(b"a", 0)
    offset_map.put(b"b", 1)
    batch = _keyed([(b"a", None), (b"b", b"x")], timestamps=[NOW_MS - 50, NOW_MS - 40])
    first = filter_batches(batch, _filter(offset_map, now_ms=NOW_MS))
    header = first.headers[0]
    assert header.attributes & DELETE_HORIZON_MASK
    assert header.base_timestamp == NOW_MS + 1000
    records = kp_decode(bytes(first.data))
    # record timestamps are rebased on the horizon, so they read back unchanged
    assert [(r.key, r.value, r.timestamp) for r in records] == [
        (b"a", None, NOW_MS - 50),
        (b"b", b"x", NOW_MS - 40),
    ]
    assert header.max_timestamp == NOW_MS - 40
    before = filter_batches(bytes(first.data), _filter(offset_map, now_ms=NOW_MS + 999))
    assert bytes(before.data) == bytes(first.data)
    after = filter_batches(bytes(first.data), _filter(offset_map, now_ms=NOW_MS + 1000))
    assert [(r.key, r.value) for r in kp_decode(bytes(after.data))] == [(b"b", b"x")]


def test_records_past_the_map_stay_and_keyless_records_go() -> None:
    offset_map = OffsetMap(24 * 100)
    offset_map.put(b"a", 1)
    batch = _keyed([(None, b"no key"), (b"a", b"1"), (b"a", b"later")])
    result = filter_batches(batch, _filter(offset_map))
    assert [(r.offset, r.value) for r in kp_decode(bytes(result.data))] == [
        (1, b"1"),
        (2, b"later"),
    ]


def test_emptied_batches_go_unless_a_producer_or_the_round_end_needs_them() -> None:
    offset_map = OffsetMap(24 * 100)
    offset_map.put(b"a", 10)
    idempotent = _keyed([(b"a", b"old")], producer_id=7, producer_epoch=2, base_sequence=4)
    assert not filter_batches(idempotent, _filter(offset_map)).headers
    kept = filter_batches(idempotent, _filter(offset_map, producers={7: 0}))
    (header,) = kept.headers
    assert (header.records_count, header.producer_id, header.producer_epoch) == (0, 7, 2)
    assert (header.base_sequence, header.last_offset_delta, header.base_timestamp) == (4, 0, -1)
    assert kp_decode(bytes(kept.data)) == []
    plain = _keyed([(b"a", b"old")])
    (end,) = filter_batches(plain, _filter(offset_map, upper=1)).headers
    assert end.records_count == 0 and end.next_offset == 1


def test_a_compressed_batch_is_rewritten_with_its_codec() -> None:
    offset_map = OffsetMap(24 * 100)
    offset_map.put(b"a", 1)
    offset_map.put(b"b", 2)
    batch = _keyed([(b"a", b"1" * 50), (b"a", b"2" * 50), (b"b", b"3" * 50)], compression_type=1)
    result = filter_batches(batch, _filter(offset_map))
    assert result.headers[0].compression_type == CODEC_GZIP
    assert [r.offset for r in kp_decode(bytes(result.data))] == [1, 2]
    (header, data) = next(iter(iter_batches(bytes(result.data))))
    assert [r.offset_delta for r in decode_records(header, data, 10**6)] == [1, 2]


# ----------------------------------------------------------------- a cleaning of a real log


def test_cleaning_keeps_the_latest_value_per_key_with_its_offset(open_log: OpenLog) -> None:
    log = open_log(COMPACT)
    _fill(log, 12)
    log.append_as_leader(_keyed([(b"k1", None)]), 0, now_ms=NOW_MS)  # tombstone
    log.roll(NOW_MS)
    before = _latest(log)
    leo = log.log_end_offset
    size_before = log.size_in_bytes
    end, stats = _cleaner().clean(_to_clean(log), now_ms=NOW_MS)
    assert end == log.active_segment.base_offset == leo
    assert _latest(log) == before
    records = kp_decode(log.read(0, 10**9).to_bytes())
    assert len(records) == 4  # k0, k2, k3 and the k1 tombstone (horizon not reached)
    assert log.size_in_bytes < size_before / 4
    assert stats.messages_read == 49 and stats.messages_written == 4
    for record in records:  # every kept offset can still be fetched from the index
        fetched = kp_decode(log.read(record.offset, 10**9).to_bytes())
        assert record.offset in [r.offset for r in fetched]
    assert log.log_end_offset == leo
    assert log.leader_epoch_cache.entries[0].start_offset == 0
    assert not list(log.dir.glob("*.cleaned")) and not list(log.dir.glob("*.swap"))
    log.close()
    again = open_log(COMPACT)
    assert _latest(again) == before and again.log_end_offset == leo


def test_tombstones_disappear_in_a_cleaning_after_their_horizon(open_log: OpenLog) -> None:
    log = open_log(COMPACT)
    _fill(log, 3)
    log.append_as_leader(_keyed([(b"k1", None)]), 0, now_ms=NOW_MS)
    log.roll(NOW_MS)
    _cleaner().clean(_to_clean(log), now_ms=NOW_MS)
    assert b"k1" in _latest(log)
    _cleaner().clean(_to_clean(log), now_ms=NOW_MS + 1000)
    assert sorted(_latest(log)) == [b"k0", b"k2", b"k3"]


def test_an_idempotent_producers_last_batch_survives_as_its_state(open_log: OpenLog) -> None:
    log = open_log(COMPACT)
    for sequence in range(3):
        batch = _keyed(
            [(b"k", b"v%d" % sequence)], producer_id=9, producer_epoch=0, base_sequence=sequence
        )
        log.append_as_leader(batch, 0, now_ms=NOW_MS)
    log.append_as_leader(_keyed([(b"k", b"plain")]), 0, now_ms=NOW_MS)
    log.roll(NOW_MS)
    _cleaner().clean(_to_clean(log), now_ms=NOW_MS)
    entry = log.producer_state.last_entry(9)
    assert entry is not None and entry.last_sequence == 2
    log.close()
    again = open_log(COMPACT)
    reopened = again.producer_state.last_entry(9)
    assert reopened is not None and reopened.last_sequence == 2 and reopened.last_offset == 2
    retry = _keyed([(b"k", b"v2")], producer_id=9, producer_epoch=0, base_sequence=2)
    assert again.append_as_leader(retry, 0, now_ms=NOW_MS).first_offset == 2  # a duplicate


def test_a_small_map_cleans_in_several_rounds(open_log: OpenLog) -> None:
    log = open_log(COMPACT)
    for r in range(6):
        pairs = [(b"key-%d" % k, b"%d" % r) for k in range(r * 3, r * 3 + 3)]
        log.append_as_leader(_keyed(pairs), 0, now_ms=NOW_MS)
    log.roll(NOW_MS)
    before = _latest(log)
    cleaner = _cleaner(memory=24 * 5)  # 4 keys per round
    first_dirty = 0
    rounds = 0
    while first_dirty < log.active_segment.base_offset:
        first_dirty, _stats = cleaner.clean(_to_clean(log, first_dirty), now_ms=NOW_MS)
        rounds += 1
    assert rounds > 2 and _latest(log) == before


def test_a_truncation_during_cleaning_aborts_the_swap(open_log: OpenLog) -> None:
    log = open_log(COMPACT)
    _fill(log, 8)
    log.roll(NOW_MS)
    _fill(log, 1)
    cleanable = _to_clean(log)
    log.truncate_to(log.active_segment.base_offset)
    before = [segment.base_offset for segment in log.segments]
    with pytest.raises(LogCleaningAbortedError):
        _cleaner().clean(cleanable, now_ms=NOW_MS)
    assert [segment.base_offset for segment in log.segments] == before
    assert not list(log.dir.glob("*.cleaned")) and not list(log.dir.glob("*.swap"))


def test_keyless_records_are_refused_in_a_compacted_topic(open_log: OpenLog) -> None:
    log = open_log(COMPACT)
    with pytest.raises(InvalidRecordError, match="Compacted topic cannot accept message without"):
        log.append_as_leader(_keyed([(b"k", b"v"), (None, b"v")]), 0, now_ms=NOW_MS)
    assert log.log_end_offset == 0
    plain = open_log(LogConfig(file_delete_delay_ms=0), name="plain-0")
    assert plain.append_as_leader(_keyed([(None, b"v")]), 0, now_ms=NOW_MS).records_count == 1


def test_compact_only_logs_skip_time_and_size_retention(open_log: OpenLog) -> None:
    config = LogConfig(
        segment_bytes=600,
        file_delete_delay_ms=0,
        retention_ms=1,
        retention_bytes=1,
        cleanup_policy=("compact",),
    )
    log = open_log(config)
    _fill(log, 10)
    assert log.delete_old_segments(NOW_MS + 10**9, log.log_end_offset) == 0
    both = open_log(
        LogConfig(
            segment_bytes=600,
            file_delete_delay_ms=0,
            retention_ms=1,
            cleanup_policy=("compact", "delete"),
        ),
        name="both-0",
    )
    _fill(both, 10)
    assert both.delete_old_segments(NOW_MS + 10**9, both.log_end_offset) > 0


# ----------------------------------------------------------------- choosing logs, checkpoints


def test_dirty_range_stops_at_the_high_watermark_and_the_compaction_lag(open_log: OpenLog) -> None:
    log = open_log(COMPACT)
    _fill(log, 12)
    offsets = cleanable_offsets(log, None, NOW_MS, high_watermark=5)
    assert (offsets.first_dirty_offset, offsets.first_uncleanable_dirty_offset) == (0, 5)
    full = cleanable_offsets(log, None, NOW_MS, log.log_end_offset)
    assert full.first_uncleanable_dirty_offset == log.active_segment.base_offset
    lagging = open_log(
        LogConfig(segment_bytes=600, cleanup_policy=("compact",), min_compaction_lag_ms=10**6),
        name="lag-0",
    )
    _fill(lagging, 12)
    lagged = cleanable_offsets(lagging, None, NOW_MS + 20, lagging.log_end_offset)
    assert lagged.first_uncleanable_dirty_offset == 0
    bad = cleanable_offsets(log, 10**6, NOW_MS, log.log_end_offset)
    assert bad.force_update_checkpoint and bad.first_dirty_offset == 0


def test_manager_picks_the_dirtiest_log_and_checkpoints_its_progress(
    open_log: OpenLog, tmp_path: Path
) -> None:
    dirty = open_log(COMPACT, name="dirty-0")
    _fill(dirty, 12)
    dirty.roll(NOW_MS)
    plain = open_log(LogConfig(segment_bytes=600, file_delete_delay_ms=0), name="plain-0")
    _fill(plain, 12)
    plain.roll(NOW_MS)
    logs = [dirty, plain]
    manager = LogCleanerManager([tmp_path], lambda: logs, lambda tp: 10**9)
    chosen = manager.grab_filthiest_compacted_log(NOW_MS)
    assert chosen is not None and chosen.log is dirty
    assert manager.cleaning_state(dirty.topic_partition) is LogCleaningState.IN_PROGRESS
    assert manager.grab_filthiest_compacted_log(NOW_MS) is None  # in progress; plain: delete
    end, _stats = _cleaner().clean(chosen, now_ms=NOW_MS)
    manager.done_cleaning(dirty.topic_partition, tmp_path, end)
    assert manager.all_cleaner_checkpoints() == {dirty.topic_partition: end}
    assert (tmp_path / CLEANER_OFFSET_CHECKPOINT).exists()
    assert manager.grab_filthiest_compacted_log(NOW_MS) is None  # clean now
    dirty.truncate_to(end - 2)
    point = dirty.log_end_offset
    assert 0 < point < end
    _fill(dirty, 12)
    dirty.roll(NOW_MS)
    again = manager.grab_filthiest_compacted_log(NOW_MS)
    assert again is not None and again.first_dirty_offset == point  # lowered by the truncation
    manager.abort_cleaning(dirty.topic_partition)
    assert manager.is_aborted(dirty.topic_partition)
    manager.done_cleaning(dirty.topic_partition, tmp_path, 10**6)
    assert manager.all_cleaner_checkpoints() == {dirty.topic_partition: point}
    assert manager.cleaning_state(dirty.topic_partition) is None


def test_throttler_sleeps_to_the_configured_rate() -> None:
    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    throttler = Throttler(1000.0, 0.3, clock=lambda: now[0], sleep=sleep)
    now[0] = 0.5
    throttler.maybe_throttle(2000)  # 2000 B in 0.5 s at 1000 B/s: wait 1.5 s
    assert slept == [pytest.approx(1.5)]
    assert Throttler(float("inf")).maybe_throttle(10**9) == 0.0


def test_a_follower_append_larger_than_a_segment_is_split_across_segments(
    open_log: OpenLog,
) -> None:
    leader = open_log(COMPACT, name="leader-0")
    _fill(leader, 12)
    data = leader.read(0, 10**9).to_bytes()
    assert len(data) > COMPACT.segment_bytes
    follower = open_log(COMPACT, name="follower-0")
    info = follower.append_as_follower(data)
    assert (info.first_offset, info.last_offset) == (0, leader.log_end_offset - 1)
    assert follower.read(0, 10**9).to_bytes() == data
    assert len(follower.segments) > 1


def test_max_compaction_lag_forces_a_clean_below_the_dirty_ratio(
    open_log: OpenLog, tmp_path: Path
) -> None:
    lazy = LogConfig(
        segment_bytes=600,
        file_delete_delay_ms=0,
        cleanup_policy=("compact",),
        min_cleanable_dirty_ratio=1.0,  # never reached by the ratio alone
        max_compaction_lag_ms=60_000,
    )
    log = open_log(lazy)
    _fill(log, 12)
    log.roll(NOW_MS)
    manager = LogCleanerManager([tmp_path], lambda: [log], lambda tp: 10**9)
    assert manager.grab_filthiest_compacted_log(NOW_MS + 1_000) is None
    chosen = manager.grab_filthiest_compacted_log(NOW_MS + 120_000)
    assert chosen is not None and chosen.need_compaction_now
