from __future__ import annotations

import struct

import pytest
from kafka.record.default_records import DefaultRecordBatch

from kpo_broker.log.errors import CorruptRecordError
from kpo_broker.log.records import (
    HEADER_SIZE,
    assign_offsets,
    find_timestamp_in_batch,
    iter_batches,
    parse_header,
    record_timestamps,
    valid_prefix_length,
)
from tests.unit.broker.log.batches import CODEC_GZIP, decode_records, make_batch


def test_header_fields_match_the_encoder() -> None:
    batch = make_batch([b"a", b"b", b"c"], timestamps=[10, 30, 20])
    header = parse_header(batch)
    assert header.magic == 2
    assert header.base_offset == 0
    assert header.last_offset_delta == 2
    assert header.records_count == 3
    assert header.base_timestamp == 10
    assert header.max_timestamp == 30
    assert header.size_in_bytes == len(batch)
    assert header.last_offset == 2
    assert header.next_offset == 3
    assert header.compression_type == 0
    assert not header.is_transactional and not header.is_control
    assert header.crc == DefaultRecordBatch(batch).crc


def test_iter_batches_yields_each_batch_with_its_bytes() -> None:
    first, second = make_batch([b"x"]), make_batch([b"y", b"z"])
    found = list(iter_batches(first + second))
    assert [bytes(view) for _h, view in found] == [first, second]
    assert [h.records_count for h, _v in found] == [1, 2]
    assert list(iter_batches(b"")) == []


def test_crc_mismatch_is_rejected() -> None:
    batch = bytearray(make_batch([b"hello world"]))
    batch[-3] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        list(iter_batches(bytes(batch)))
    # without verification the header still parses
    assert len(list(iter_batches(bytes(batch), verify_crc=False))) == 1


def test_bad_magic_is_rejected() -> None:
    batch = bytearray(make_batch([b"v"]))
    batch[16] = 1
    with pytest.raises(CorruptRecordError, match="magic"):
        list(iter_batches(bytes(batch), verify_crc=False))


def test_impossible_length_and_torn_tail_are_rejected() -> None:
    batch = bytearray(make_batch([b"v"]))
    struct.pack_into(">i", batch, 8, 10)
    with pytest.raises(CorruptRecordError, match="length"):
        list(iter_batches(bytes(batch)))
    good = make_batch([b"v"])
    with pytest.raises(CorruptRecordError):
        list(iter_batches(good + good[:-1]))
    with pytest.raises(CorruptRecordError):
        list(iter_batches(good + b"\x00" * 5))


def test_valid_prefix_length_stops_at_a_torn_or_corrupt_tail() -> None:
    a, b = make_batch([b"one"]), make_batch([b"two", b"three"])
    assert valid_prefix_length(a + b) == len(a + b)
    assert valid_prefix_length(a + b[: len(b) // 2]) == len(a)
    assert valid_prefix_length(a + b"\xff" * 7) == len(a)
    flipped = bytearray(b)
    flipped[-1] ^= 1
    assert valid_prefix_length(a + bytes(flipped) + a) == len(a)
    assert valid_prefix_length(b"") == 0
    assert valid_prefix_length(b"\x00" * HEADER_SIZE) == 0


def test_assign_offsets_rewrites_offsets_and_epoch_keeping_the_crc_valid() -> None:
    data = make_batch([b"a", b"b"]) + make_batch([b"c"]) + make_batch([b"d", b"e", b"f"])
    out, headers = assign_offsets(data, 100, 7)
    assert [(h.base_offset, h.last_offset) for h in headers] == [(100, 101), (102, 102), (103, 105)]
    assert all(h.partition_leader_epoch == 7 for h in headers)
    assert len(out) == len(data)
    for header, view in iter_batches(out, verify_crc=True):
        reader = DefaultRecordBatch(bytes(view))
        assert reader.validate_crc()
        assert reader.base_offset == header.base_offset
        assert reader.leader_epoch == 7
    assert [r.offset for r in decode_records(out)] == list(range(100, 106))
    assert [r.value for r in decode_records(out)] == [b"a", b"b", b"c", b"d", b"e", b"f"]
    assert data != out  # the input is not modified
    assert parse_header(data).base_offset == 0


def test_record_timestamps_reads_plain_and_compressed_batches() -> None:
    for codec in (0, CODEC_GZIP):
        batch = make_batch([b"v" * 50] * 4, timestamps=[5, 50, 7, 60], compression_type=codec)
        out, _ = assign_offsets(batch, 10, 0)
        assert list(record_timestamps(out)) == [(10, 5), (11, 50), (12, 7), (13, 60)]
        assert find_timestamp_in_batch(out, 40, 0) == (11, 50)
        assert find_timestamp_in_batch(out, 40, 12) == (13, 60)
        assert find_timestamp_in_batch(out, 61, 0) is None
