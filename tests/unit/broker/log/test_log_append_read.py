from __future__ import annotations

import os
import socket
import struct
from pathlib import Path

import crc32c
import pytest

from kpo_broker.log.errors import (
    CorruptRecordError,
    InvalidRecordError,
    OffsetOutOfRangeError,
    OffsetsOutOfOrderError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    UnexpectedAppendOffsetError,
)
from kpo_broker.log.records import assign_offsets
from tests.unit.broker.log.batches import decode_records, headers_of, make_batch, make_value_batch
from tests.unit.broker.log.conftest import NOW_MS, OpenLog


def test_topic_and_partition_from_dir_name(open_log: OpenLog) -> None:
    log = open_log()
    assert (log.topic, log.partition) == ("my.topic-name", 3)
    assert log.log_start_offset == 0 and log.log_end_offset == 0 and log.size_in_bytes == 0


def test_leader_append_assigns_offsets_and_reads_back(open_log: OpenLog) -> None:
    log = open_log()
    first = log.append_as_leader(
        make_batch([b"a", b"b"], timestamps=[5, 9]) + make_batch([b"c"], timestamps=[7]),
        leader_epoch=3,
        now_ms=NOW_MS,
    )
    assert first.first_offset == 0 and first.last_offset == 2
    assert first.records_count == 3
    assert first.max_timestamp == 9 and first.offset_of_max_timestamp == 1
    second = log.append_as_leader(make_batch([b"d"]), leader_epoch=3, now_ms=NOW_MS)
    assert (second.first_offset, second.last_offset) == (3, 3)
    assert log.log_end_offset == 4
    data = log.read(0, 10**6).to_bytes()
    assert [(r.offset, r.value) for r in decode_records(data)] == [
        (0, b"a"),
        (1, b"b"),
        (2, b"c"),
        (3, b"d"),
    ]
    assert {h.partition_leader_epoch for h in headers_of(data)} == {3}
    assert first.valid_bytes + second.valid_bytes == log.size_in_bytes == len(data)


def test_read_starts_at_the_batch_containing_the_offset(open_log: OpenLog) -> None:
    log = open_log()
    batches = []
    for i in range(4):
        out, _ = assign_offsets(make_value_batch(3, 20, tag=i), 3 * i, 0)
        batches.append(out)
        log.append_as_leader(make_value_batch(3, 20, tag=i), leader_epoch=0, now_ms=NOW_MS)
    assert log.read(4, 10**6).to_bytes() == b"".join(batches[1:])
    info = log.read(5, 10**6)
    assert info.fetch_offset == 5 and info.size_in_bytes == sum(map(len, batches[1:]))
    # max_bytes keeps whole batches only
    assert log.read(0, len(batches[0]) * 2 - 1).to_bytes() == batches[0]
    # min_one_message returns one oversized batch; without it nothing
    assert log.read(0, 1).to_bytes() == batches[0]
    assert log.read(0, 1, min_one_message=False).to_bytes() == b""
    # max_offset (the HW) is exclusive and excludes a batch that straddles it
    assert log.read(0, 10**6, max_offset=6).to_bytes() == b"".join(batches[:2])
    assert log.read(0, 10**6, max_offset=7).to_bytes() == b"".join(batches[:2])
    assert log.read(6, 10**6, max_offset=6).slices == ()
    # at the LEO: empty; outside [log start, LEO]: error
    assert log.read(12, 10**6).slices == ()
    with pytest.raises(OffsetOutOfRangeError):
        log.read(13, 10**6)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 10**6)


def test_file_slices_can_be_sent_with_sendfile(open_log: OpenLog) -> None:
    log = open_log(segment_bytes=300)
    for i in range(6):
        log.append_as_leader(make_value_batch(2, 40, tag=i), leader_epoch=0, now_ms=NOW_MS)
    info = log.read(0, 10**6)
    assert len(info.slices) > 1  # crosses segments
    left, right = socket.socketpair()
    with left, right:
        for part in info.slices:
            sent = 0
            while sent < part.size:
                sent += os.sendfile(
                    left.fileno(), part.open_file().fileno(), part.position + sent, part.size - sent
                )
        received = b""
        while len(received) < info.size_in_bytes:
            received += right.recv(65536)
    assert received == info.to_bytes()
    assert len(decode_records(received)) == 12


def test_corrupt_batches_are_rejected_and_nothing_is_written(open_log: OpenLog) -> None:
    log = open_log()
    good = make_batch([b"ok"])
    bad = bytearray(make_batch([b"payload"]))
    bad[-2] ^= 0x40
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(good + bytes(bad), leader_epoch=0, now_ms=NOW_MS)
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(good + good[:30], leader_epoch=0, now_ms=NOW_MS)
    assert log.log_end_offset == 0 and log.size_in_bytes == 0


def _with_records_count(batch: bytes, count: int) -> bytes:
    patched = bytearray(batch)
    struct.pack_into(">i", patched, 57, count)
    struct.pack_into(">I", patched, 17, crc32c.crc32c(bytes(patched[21:])))
    return bytes(patched)


def test_size_and_consistency_limits(open_log: OpenLog) -> None:
    log = open_log(max_message_bytes=200, segment_bytes=1000)
    with pytest.raises(RecordTooLargeError):
        log.append_as_leader(make_value_batch(1, 300), leader_epoch=0, now_ms=NOW_MS)
    with pytest.raises(RecordBatchTooLargeError):
        log.append_as_leader(make_value_batch(1, 100) * 8, leader_epoch=0, now_ms=NOW_MS)
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(_with_records_count(make_value_batch(2, 5), 3), 0, NOW_MS)
    assert log.log_end_offset == 0
    empty = log.append_as_leader(b"", leader_epoch=0, now_ms=NOW_MS)
    assert (empty.first_offset, empty.records_count, empty.valid_bytes) == (-1, 0, 0)


def test_follower_append_keeps_leader_offsets_and_epochs(open_log: OpenLog) -> None:
    log = open_log()
    leader_data = b""
    offset = 0
    for epoch in (1, 1, 4):
        out, headers = assign_offsets(make_value_batch(2, 8), offset, epoch)
        leader_data += out
        offset = headers[-1].next_offset
    info = log.append_as_follower(leader_data, now_ms=NOW_MS)
    assert (info.first_offset, info.last_offset, info.records_count) == (0, 5, 6)
    assert log.read(0, 10**6).to_bytes() == leader_data
    assert log.leader_epoch_cache.entries == ((1, 0), (4, 4))
    with pytest.raises(UnexpectedAppendOffsetError) as raised:
        log.append_as_follower(assign_offsets(make_value_batch(1), 5, 4)[0])
    assert raised.value.first_offset == 5
    # a gap (compacted leader data) is accepted
    gap, _ = assign_offsets(make_value_batch(1), 10, 5)
    log.append_as_follower(gap, now_ms=NOW_MS)
    assert log.log_end_offset == 11
    assert log.read(7, 10**6).to_bytes() == gap
    out_of_order = (
        assign_offsets(make_value_batch(1), 20, 5)[0]
        + assign_offsets(make_value_batch(1), 15, 5)[0]
    )
    with pytest.raises(OffsetsOutOfOrderError):
        log.append_as_follower(out_of_order)


def test_leader_epoch_cache_follows_appends(open_log: OpenLog, tmp_path: Path) -> None:
    log = open_log()
    log.append_as_leader(make_value_batch(2), leader_epoch=0, now_ms=NOW_MS)
    log.append_as_leader(make_value_batch(2), leader_epoch=0, now_ms=NOW_MS)
    log.append_as_leader(make_value_batch(3), leader_epoch=2, now_ms=NOW_MS)
    assert log.leader_epoch_cache.entries == ((0, 0), (2, 4))
    assert log.leader_epoch_cache.end_offset_for(0, log.log_end_offset) == (0, 4)
    assert log.leader_epoch_cache.end_offset_for(2, log.log_end_offset) == (2, 7)
    assert (tmp_path / "my.topic-name-3" / "leader-epoch-checkpoint").read_text() == (
        "0\n2\n0 0\n2 4\n"
    )


def test_fetch_offset_by_timestamp(open_log: OpenLog) -> None:
    log = open_log(segment_bytes=250, index_interval_bytes=50)
    for i in range(8):
        log.append_as_leader(
            make_batch([b"x" * 30, b"y" * 30], timestamps=[1000 + 100 * i, 1050 + 100 * i]),
            leader_epoch=0,
            now_ms=NOW_MS,
        )
    assert len(log.segments) > 2
    assert log.fetch_offset_by_timestamp(1000) == (0, 1000)
    assert log.fetch_offset_by_timestamp(1001) == (1, 1050)
    assert log.fetch_offset_by_timestamp(1420) == (9, 1450)
    assert log.fetch_offset_by_timestamp(1451) == (10, 1500)
    assert log.fetch_offset_by_timestamp(99_999) is None
    assert log.fetch_offset_by_timestamp(-2) == (0, -1)
    assert log.fetch_offset_by_timestamp(-1) == (16, -1)
    assert log.max_timestamp_and_offset() == (15, 1750)


def test_roll_by_segment_ms_and_explicit_roll(open_log: OpenLog) -> None:
    log = open_log(segment_ms=1000)
    log.append_as_leader(make_value_batch(1, timestamp_ms=10_000), 0, NOW_MS)
    log.append_as_leader(make_value_batch(1, timestamp_ms=10_900), 0, NOW_MS)
    assert len(log.segments) == 1
    log.append_as_leader(make_value_batch(1, timestamp_ms=11_001), 0, NOW_MS)
    assert [s.base_offset for s in log.segments] == [0, 2]
    # the rolled segment got its final time index entry
    assert log.segments[0].time_index.last_entry == (10_900, 1)
    log.roll(NOW_MS)
    assert [s.base_offset for s in log.segments] == [0, 2, 3]
    log.roll(NOW_MS)  # an empty active segment is kept
    assert [s.base_offset for s in log.segments] == [0, 2, 3]
    assert len(decode_records(log.read(0, 10**6).to_bytes())) == 3
