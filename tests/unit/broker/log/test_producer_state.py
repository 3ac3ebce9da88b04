"""Idempotent producer state (KIP-98): duplicates, sequences, epochs, rebuild, truncation."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kpo_broker.log.config import LogConfig
from kpo_broker.log.errors import InvalidRecordError
from kpo_broker.log.log import Log
from kpo_broker.log.producer_state import (
    MAX_CACHED_BATCHES,
    MAX_SEQUENCE,
    InvalidProducerEpochError,
    OutOfOrderSequenceError,
    ProducerStateManager,
    in_sequence,
    next_sequence,
)
from kpo_broker.log.records import BatchHeader, assign_offsets
from kpo_broker.server.errors import error_code_of
from tests.unit.broker.log.batches import decode_records, headers_of, make_batch
from tests.unit.broker.log.conftest import NOW_MS, OpenLog

LEADER_EPOCH = 4


def idem(pid: int, epoch: int, seq: int, count: int = 1, tag: str = "v", ts: int = 1_000) -> bytes:
    """A batch of ``count`` records from producer ``pid``/``epoch`` starting at ``seq``."""
    return make_batch(
        [f"{tag}{i}".encode() for i in range(count)],
        timestamp_ms=ts,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
    )


def append(log: Log, records: bytes) -> tuple[int, int, bool]:
    info = log.append_as_leader(records, LEADER_EPOCH, now_ms=NOW_MS)
    return info.first_offset, info.last_offset, info.duplicate


def assigned(records: bytes, base_offset: int, epoch: int = LEADER_EPOCH) -> bytes:
    """``records`` with offsets assigned from ``base_offset``, as a follower fetches them."""
    return assign_offsets(records, base_offset, epoch)[0]


def _headers(records: bytes, base_offset: int = 0) -> tuple[BatchHeader, ...]:
    return assign_offsets(records, base_offset, LEADER_EPOCH)[1]


# ----------------------------------------------------------------- sequence arithmetic


def test_sequence_arithmetic_wraps_at_int32_max() -> None:
    assert next_sequence(5, 3) == 8
    assert next_sequence(MAX_SEQUENCE, 1) == 0
    assert next_sequence(MAX_SEQUENCE - 1, 4) == 2
    assert in_sequence(MAX_SEQUENCE, 0)
    assert in_sequence(7, 8)
    assert not in_sequence(7, 9) and not in_sequence(MAX_SEQUENCE, 1)


# ----------------------------------------------------------------- leader appends


def test_retry_returns_the_original_offsets_and_appends_nothing(open_log: OpenLog) -> None:
    log = open_log()
    assert append(log, idem(7, 0, 0, 2, tag="a")) == (0, 1, False)
    assert append(log, idem(7, 0, 2, 3, tag="b")) == (2, 4, False)
    size, leo = log.size_in_bytes, log.log_end_offset
    info = log.append_as_leader(idem(7, 0, 0, 2, tag="a"), LEADER_EPOCH, now_ms=NOW_MS)
    assert info.duplicate
    assert (info.first_offset, info.last_offset) == (0, 1)
    assert info.max_timestamp == 1_001 and info.offset_of_max_timestamp == 1
    assert info.records_count == 0 and info.valid_bytes == 0
    assert append(log, idem(7, 0, 2, 3, tag="b")) == (2, 4, True)
    assert (log.size_in_bytes, log.log_end_offset) == (size, leo)
    assert [r.value for r in decode_records(log.read(0, 10**6).to_bytes())] == [
        b"a0",
        b"a1",
        b"b0",
        b"b1",
        b"b2",
    ]
    # The producer goes on after the retries.
    assert append(log, idem(7, 0, 5, 1)) == (5, 5, False)


def test_only_the_last_five_batches_are_recognised(open_log: OpenLog) -> None:
    log = open_log()
    for seq in range(MAX_CACHED_BATCHES + 1):
        append(log, idem(3, 0, seq))
    for seq in range(1, MAX_CACHED_BATCHES + 1):
        assert append(log, idem(3, 0, seq)) == (seq, seq, True)
    with pytest.raises(OutOfOrderSequenceError):
        append(log, idem(3, 0, 0))
    entry = log.producer_state.last_entry(3)
    assert entry is not None and len(entry.batches) == MAX_CACHED_BATCHES


def test_sequence_gap_is_out_of_order_and_appends_nothing(open_log: OpenLog) -> None:
    log = open_log()
    append(log, idem(1, 0, 0, 3))
    with pytest.raises(OutOfOrderSequenceError) as raised:
        append(log, idem(1, 0, 4))
    assert raised.value.error_code == 45 and error_code_of(raised.value) == 45
    with pytest.raises(OutOfOrderSequenceError):
        append(log, idem(1, 0, 2))  # overlaps the last batch without matching it
    assert log.log_end_offset == 3
    assert append(log, idem(1, 0, 3)) == (3, 3, False)


def test_older_epoch_is_fenced(open_log: OpenLog) -> None:
    log = open_log()
    append(log, idem(9, 0, 0))
    append(log, idem(9, 1, 0))
    with pytest.raises(InvalidProducerEpochError) as raised:
        append(log, idem(9, 0, 1))
    assert raised.value.error_code == 47 and error_code_of(raised.value) == 47
    # A retry from the old epoch is fenced too: duplicates must match the current epoch.
    with pytest.raises(InvalidProducerEpochError):
        append(log, idem(9, 0, 0))
    assert log.log_end_offset == 2


def test_new_epoch_must_start_at_sequence_zero(open_log: OpenLog) -> None:
    log = open_log()
    append(log, idem(2, 0, 0, 5))
    with pytest.raises(OutOfOrderSequenceError):
        append(log, idem(2, 1, 5))
    assert append(log, idem(2, 1, 0)) == (5, 5, False)
    entry = log.producer_state.last_entry(2)
    assert entry is not None and (entry.producer_epoch, entry.last_sequence) == (1, 0)
    assert len(entry.batches) == 1  # the old epoch's batches are forgotten


def test_unknown_producer_is_accepted_at_any_sequence(open_log: OpenLog) -> None:
    log = open_log()
    assert append(log, idem(11, 3, 42, 2)) == (0, 1, False)
    assert append(log, idem(11, 3, 44)) == (2, 2, False)
    with pytest.raises(OutOfOrderSequenceError):
        append(log, idem(11, 3, 46))


def test_sequences_wrap_around(open_log: OpenLog) -> None:
    log = open_log()
    append(log, idem(5, 0, MAX_SEQUENCE - 1, 2))  # sequences MAX-1, MAX
    assert append(log, idem(5, 0, 0, 1)) == (2, 2, False)
    assert append(log, idem(5, 0, 1, 1)) == (3, 3, False)
    # One batch spanning the wrap: MAX-1, MAX, 0, 1.
    other = open_log(name="other-0")
    append(other, idem(6, 0, MAX_SEQUENCE - 1, 4))
    entry = other.producer_state.last_entry(6)
    assert entry is not None and entry.last_sequence == 1
    assert append(other, idem(6, 0, MAX_SEQUENCE - 1, 4)) == (0, 3, True)
    assert append(other, idem(6, 0, 2)) == (4, 4, False)


def test_batches_without_producer_id_are_not_tracked(open_log: OpenLog) -> None:
    log = open_log()
    plain = make_batch([b"x"])
    assert append(log, plain) == (0, 0, False)
    assert append(log, plain) == (1, 1, False)  # no idempotence: appended again
    assert dict(log.producer_state.producers) == {}


def test_several_batches_of_one_producer_in_one_request(open_log: OpenLog) -> None:
    log = open_log()
    assert append(log, idem(8, 0, 0, 2) + idem(8, 0, 2, 2)) == (0, 3, False)
    with pytest.raises(OutOfOrderSequenceError):
        append(log, idem(8, 0, 4, 2) + idem(8, 0, 7, 1))
    assert log.log_end_offset == 4
    # Retrying the whole request is a duplicate spanning both batches.
    info = log.append_as_leader(idem(8, 0, 0, 2) + idem(8, 0, 2, 2), LEADER_EPOCH)
    assert info.duplicate and (info.first_offset, info.last_offset) == (0, 3)


def test_request_mixing_retried_and_new_batches_is_rejected(open_log: OpenLog) -> None:
    log = open_log()
    append(log, idem(8, 0, 0, 2))
    with pytest.raises(InvalidRecordError):
        append(log, idem(8, 0, 0, 2) + idem(8, 0, 2, 1))
    with pytest.raises(InvalidRecordError):
        append(log, idem(8, 0, 0, 2) + make_batch([b"plain"]))
    assert log.log_end_offset == 2


def test_negative_base_sequence_with_a_producer_id_is_invalid(open_log: OpenLog) -> None:
    log = open_log()
    with pytest.raises(InvalidRecordError):
        append(log, idem(4, 0, -1))
    assert log.log_end_offset == 0


# ----------------------------------------------------------------- followers


def test_follower_appends_record_state_without_checks(open_log: OpenLog) -> None:
    log = open_log()
    log.append_as_follower(assigned(idem(1, 0, 10, 2), 0))
    log.append_as_follower(assigned(idem(1, 0, 50), 2))  # a gap: not checked
    log.append_as_follower(assigned(idem(1, 2, 0), 3))
    log.append_as_follower(assigned(idem(1, 1, 9), 4))  # an older epoch: taken as is
    entry = log.producer_state.last_entry(1)
    assert entry is not None
    assert (entry.producer_epoch, entry.last_sequence, entry.last_offset) == (1, 9, 4)
    # Once leader, the replicated state is enforced.
    assert append(log, idem(1, 1, 9)) == (4, 4, True)
    with pytest.raises(InvalidProducerEpochError):
        append(log, idem(1, 0, 0))
    assert append(log, idem(1, 1, 10)) == (5, 5, False)


# ----------------------------------------------------------------- rebuild


def _state(log: Log) -> dict[int, tuple[int, list[tuple[int, int, int, int]]]]:
    return {
        pid: (
            e.producer_epoch,
            [(b.first_sequence, b.last_sequence, b.first_offset, b.last_offset) for b in e.batches],
        )
        for pid, e in log.producer_state.producers.items()
    }


def test_state_is_rebuilt_on_reopen(open_log: OpenLog) -> None:
    config = LogConfig(segment_bytes=300, file_delete_delay_ms=0)
    log = open_log(config)
    for seq in range(8):
        append(log, idem(1, 0, seq))
        append(log, idem(2, 3, 2 * seq, 2))
    append(log, make_batch([b"plain"]))
    assert len(log.segments) > 2
    before = _state(log)
    log.close()
    reopened = open_log(config)
    assert _state(reopened) == before
    assert append(reopened, idem(2, 3, 14, 2)) == (22, 23, True)
    with pytest.raises(OutOfOrderSequenceError):
        append(reopened, idem(1, 0, 9))
    assert append(reopened, idem(1, 0, 8)) == (25, 25, False)


def test_rebuild_skips_batches_below_the_log_start_offset() -> None:
    records = idem(1, 0, 0) + idem(2, 0, 0) + idem(1, 0, 1)
    manager = ProducerStateManager()
    manager.rebuild(_headers(records), log_start_offset=2)
    assert set(manager.producers) == {1}
    entry = manager.last_entry(1)
    assert entry is not None and [b.first_offset for b in entry.batches] == [2]


# ----------------------------------------------------------------- truncation and retention


def test_truncation_forgets_removed_batches(open_log: OpenLog) -> None:
    log = open_log()
    append(log, idem(1, 0, 0, 2))  # 0-1
    append(log, idem(2, 0, 0))  # 2
    append(log, idem(1, 0, 2, 2))  # 3-4
    log.truncate_to(3)
    entry = log.producer_state.last_entry(1)
    assert entry is not None and (entry.last_sequence, entry.last_offset) == (1, 1)
    assert append(log, idem(1, 0, 2, 2)) == (3, 4, False)  # not a duplicate any more


def test_truncation_of_a_producers_whole_epoch_rebuilds_from_the_log(open_log: OpenLog) -> None:
    log = open_log()
    append(log, idem(1, 0, 0, 3))  # 0-2, epoch 0
    append(log, idem(1, 1, 0))  # 3, epoch 1
    append(log, idem(2, 0, 0))  # 4
    log.truncate_to(3)
    entry = log.producer_state.last_entry(1)
    assert entry is not None
    assert (entry.producer_epoch, entry.last_sequence, entry.last_offset) == (0, 2, 2)
    assert log.producer_state.last_entry(2) is None
    assert append(log, idem(1, 0, 3)) == (3, 3, False)


def test_truncate_fully_forgets_every_producer(open_log: OpenLog) -> None:
    log = open_log()
    append(log, idem(1, 0, 0))
    log.truncate_fully_and_start_at(100)
    assert dict(log.producer_state.producers) == {}
    assert append(log, idem(1, 0, 5)) == (100, 100, False)
    log.truncate_to(50)  # below the first segment: starts afresh again
    assert dict(log.producer_state.producers) == {}


def test_producers_whose_batches_left_the_log_are_forgotten(open_log: OpenLog) -> None:
    log = open_log(LogConfig(segment_bytes=200, file_delete_delay_ms=0, retention_ms=1000))
    append(log, idem(1, 0, 0, 2, ts=NOW_MS - 10_000))  # the first segment: old data only
    append(log, idem(1, 0, 2, 2, ts=NOW_MS - 10_000))
    for seq in range(6):
        append(log, idem(2, 0, 2 * seq, 2, ts=NOW_MS))
    assert len(log.segments) > 2
    deleted = log.delete_old_segments(NOW_MS, high_watermark=log.log_end_offset)
    assert deleted == 1 and log.log_start_offset == 4
    assert set(log.producer_state.producers) == {2}
    # The forgotten producer is accepted again, at any sequence (KIP-360).
    assert append(log, idem(1, 0, 9))[2] is False
    start = log.log_start_offset
    log.maybe_increment_log_start_offset(log.log_end_offset, log.log_end_offset)
    assert start < log.log_start_offset and dict(log.producer_state.producers) == {}


def test_expired_producers_are_forgotten() -> None:
    manager = ProducerStateManager()
    manager.update(_headers(idem(1, 0, 0, ts=1_000) + idem(2, 0, 0, ts=5_000)))
    assert manager.remove_expired_producers(now_ms=6_000, expiration_ms=5_000) == 1
    assert set(manager.producers) == {2}
    assert manager.remove_expired_producers(now_ms=6_000, expiration_ms=5_000) == 0


# ----------------------------------------------------------------- property


@settings(max_examples=40, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 5), min_size=1, max_size=12),
    start=st.sampled_from([0, 17, MAX_SEQUENCE - 3]),
    data=st.data(),
)
def test_any_of_the_last_five_batches_retried_gets_its_offsets(
    sizes: list[int], start: int, data: st.DataObject
) -> None:
    manager = ProducerStateManager()
    offset, seq, appended = 0, start, []
    for size in sizes:
        records = idem(3, 2, seq, size)
        assert manager.check_leader_append(headers_of(records)) is None
        manager.update(_headers(records, offset))
        appended.append((records, offset, offset + size - 1))
        offset, seq = offset + size, next_sequence(seq, size)
    records, first, last = data.draw(st.sampled_from(appended[-MAX_CACHED_BATCHES:]))
    info = manager.check_leader_append(headers_of(records))
    assert info is not None and info.duplicate
    assert (info.first_offset, info.last_offset) == (first, last)
    assert manager.check_leader_append(headers_of(idem(3, 2, seq))) is None
