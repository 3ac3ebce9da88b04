"""Producer batches are validated in full before the leader appends them.

Each crafted batch has a valid CRC, so only a check of its body can refuse it; every
refusal must leave the log untouched (LEO and size unchanged).
"""

from __future__ import annotations

import os

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka import codec as kafka_codec
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from kpo_broker.log.compression import (
    CODEC_GZIP,
    CODEC_LZ4,
    CODEC_SNAPPY,
    CODEC_ZSTD,
    decompress_records,
)
from kpo_broker.log.config import LOG_APPEND_TIME, LogConfig
from kpo_broker.log.errors import (
    CorruptRecordError,
    InvalidLogConfigError,
    InvalidRecordError,
    LogError,
    RecordTooLargeError,
)
from kpo_broker.log.log import Log
from kpo_broker.log.records import HEADER_SIZE, iter_batches
from kpo_broker.log.validation import max_decompressed_bytes, validate_producer_batches
from tests.unit.broker.log.batches import (
    craft_batch,
    decode_records,
    headers_of,
    make_batch,
    record_bytes,
)
from tests.unit.broker.log.conftest import NOW_MS, OpenLog

ENCODERS = {
    CODEC_GZIP: kafka_codec.gzip_encode,
    CODEC_SNAPPY: kafka_codec.snappy_encode,
    CODEC_LZ4: kafka_codec.lz4_encode,
    CODEC_ZSTD: kafka_codec.zstd_encode,
}


def records_of(batch: bytes) -> bytes:
    return batch[HEADER_SIZE:]


def assert_refused(log: Log, records: bytes, error: type[LogError]) -> LogError:
    before = (log.log_end_offset, log.size_in_bytes)
    with pytest.raises(error) as caught:
        log.append_as_leader(records, leader_epoch=0, now_ms=NOW_MS)
    assert (log.log_end_offset, log.size_in_bytes) == before
    return caught.value


def test_a_record_count_of_a_billion_over_one_record_is_corrupt(open_log: OpenLog) -> None:
    log = open_log()
    one = make_batch([b"only"])
    lying = craft_batch(records_of(one), 10**9)
    error = assert_refused(log, lying, CorruptRecordError)
    assert "10" in str(error) and error.error_code == 2
    assert log.log_end_offset == 0


def test_garbage_records_are_corrupt(open_log: OpenLog) -> None:
    log = open_log()
    assert_refused(log, craft_batch(os.urandom(200), 3), CorruptRecordError)
    assert_refused(log, craft_batch(b"\xff" * 64, 1), CorruptRecordError)
    assert_refused(log, craft_batch(b"", 1), CorruptRecordError)


def test_a_gzip_flag_on_garbage_is_corrupt(open_log: OpenLog) -> None:
    log = open_log()
    plain = make_batch([b"a", b"b"])
    for codec in ENCODERS:
        assert_refused(log, craft_batch(records_of(plain), 2, attributes=codec), CorruptRecordError)
    truncated = ENCODERS[CODEC_GZIP](records_of(plain))[:-6]
    assert_refused(log, craft_batch(truncated, 2, attributes=CODEC_GZIP), CorruptRecordError)


def test_unknown_codecs_are_corrupt(open_log: OpenLog) -> None:
    log = open_log()
    body = records_of(make_batch([b"a"]))
    for codec in (5, 6, 7):
        error = assert_refused(log, craft_batch(body, 1, attributes=codec), CorruptRecordError)
        assert "compression type" in str(error)


def test_a_record_length_of_2_pow_31_is_corrupt(open_log: OpenLog) -> None:
    log = open_log()
    huge = record_bytes(0, b"value", length=2**31)
    assert_refused(log, craft_batch(huge, 1), CorruptRecordError)
    negative = record_bytes(0, b"value", length=-5)
    assert_refused(log, craft_batch(negative, 1), CorruptRecordError)
    short = record_bytes(0, b"value", length=3)
    assert_refused(log, craft_batch(short, 1), CorruptRecordError)


def test_a_64_mib_gzip_bomb_is_too_large(open_log: OpenLog) -> None:
    log = open_log()
    bomb = ENCODERS[CODEC_GZIP](record_bytes(0, bytes(64 * 1024 * 1024)))
    batch = craft_batch(bomb, 1, attributes=CODEC_GZIP)
    assert len(batch) < log.config.max_message_bytes
    error = assert_refused(log, batch, RecordTooLargeError)
    assert error.error_code == 10
    assert str(max_decompressed_bytes(log.config.max_message_bytes)) in str(error)


@pytest.mark.parametrize("codec", sorted(ENCODERS))
def test_every_codec_is_bounded(codec: int) -> None:
    data = records_of(make_batch([bytes(5000)] * 10))
    compressed = ENCODERS[codec](data)
    assert decompress_records(codec, compressed, len(data)) == data
    with pytest.raises(RecordTooLargeError):
        decompress_records(codec, compressed, len(data) - 1)
    with pytest.raises(CorruptRecordError):
        decompress_records(codec, compressed[: len(compressed) // 2], len(data))


def test_the_decompression_bound_follows_max_message_bytes() -> None:
    assert max_decompressed_bytes(1_048_588) == 8 * 1_048_588
    assert max_decompressed_bytes(100) == 800
    assert max_decompressed_bytes(100 * 1024 * 1024) == 256 * 1024 * 1024
    assert max_decompressed_bytes(512 * 1024 * 1024) == 512 * 1024 * 1024


def test_trailing_bytes_after_the_records_are_corrupt(open_log: OpenLog) -> None:
    log = open_log()
    body = records_of(make_batch([b"a", b"b"]))
    error = assert_refused(log, craft_batch(body + b"\x00\x00\x00", 2), CorruptRecordError)
    assert "unconsumed" in str(error)
    gzipped = ENCODERS[CODEC_GZIP](body + b"\x01")
    assert_refused(log, craft_batch(gzipped, 2, attributes=CODEC_GZIP), CorruptRecordError)


def test_fewer_records_than_declared_are_corrupt(open_log: OpenLog) -> None:
    log = open_log()
    body = records_of(make_batch([b"a", b"b"]))
    assert_refused(log, craft_batch(body, 3), CorruptRecordError)


def test_wrong_offset_deltas_are_invalid_records_with_record_errors(open_log: OpenLog) -> None:
    log = open_log()
    body = record_bytes(0, b"a") + record_bytes(2, b"b") + record_bytes(2, b"c")
    error = assert_refused(log, craft_batch(body, 3), InvalidRecordError)
    assert isinstance(error, InvalidRecordError) and error.error_code == 87
    assert [e.batch_index for e in error.record_errors] == [1]
    assert "offset delta 2, expected 1" in error.record_errors[0].message
    reversed_body = record_bytes(1, b"a") + record_bytes(0, b"b")
    error = assert_refused(log, craft_batch(reversed_body, 2), InvalidRecordError)
    assert isinstance(error, InvalidRecordError)
    assert [e.batch_index for e in error.record_errors] == [0, 1]
    gzipped = ENCODERS[CODEC_GZIP](body)
    assert_refused(log, craft_batch(gzipped, 3, attributes=CODEC_GZIP), InvalidRecordError)


def test_header_rules_are_invalid_records(open_log: OpenLog) -> None:
    log = open_log()
    body = records_of(make_batch([b"a", b"b"]))
    assert_refused(log, craft_batch(body, 2, last_offset_delta=5), InvalidRecordError)
    assert_refused(log, craft_batch(body, 2, last_offset_delta=-1), InvalidRecordError)
    assert_refused(log, craft_batch(body, 0, last_offset_delta=-1), InvalidRecordError)
    assert_refused(log, craft_batch(body, 2, attributes=0x20), InvalidRecordError)  # control
    for magic in (0, 1, 3):
        error = assert_refused(log, craft_batch(body, 2, magic=magic), InvalidRecordError)
        assert "magic" in str(error)


def test_one_bad_batch_refuses_the_whole_partition_data(open_log: OpenLog) -> None:
    log = open_log()
    good = make_batch([b"ok"])
    bad = craft_batch(os.urandom(50), 2)
    assert_refused(log, good + bad + good, CorruptRecordError)
    assert_refused(log, good + good[:40], CorruptRecordError)
    assert log.append_as_leader(good + good, 0, NOW_MS).last_offset == 1


def test_batch_size_is_checked_against_max_message_bytes(open_log: OpenLog) -> None:
    log = open_log(max_message_bytes=1000)
    error = assert_refused(log, make_batch([bytes(1200)]), RecordTooLargeError)
    assert error.error_code == 10 and "max.message.bytes" in str(error)
    # compressed: the batch counts as sent; its records may inflate to 8 x 1000 bytes
    fits = make_batch([bytes(400)] * 15, compression_type=CODEC_GZIP)
    assert len(fits) < 1000
    assert log.append_as_leader(fits, 0, NOW_MS).records_count == 15
    inflates = make_batch([bytes(400)] * 30, compression_type=CODEC_GZIP)
    assert len(inflates) < 1000
    error = assert_refused(log, inflates, RecordTooLargeError)
    assert "decompresses to more than 8000 bytes" in str(error)


@pytest.mark.parametrize("codec", sorted(ENCODERS))
def test_compressed_batches_of_every_codec_are_appended(open_log: OpenLog, codec: int) -> None:
    log = open_log()
    values = [f"value-{i}".encode() * 20 for i in range(50)]
    info = log.append_as_leader(make_batch(values, compression_type=codec), 0, NOW_MS)
    assert (info.first_offset, info.last_offset, info.records_count) == (0, 49, 50)
    data = log.read(0, 10**7).to_bytes()
    assert [r.value for r in decode_records(data)] == values
    assert headers_of(data)[0].compression_type == codec


def test_create_time_sets_the_batch_max_timestamp_from_the_records(open_log: OpenLog) -> None:
    log = open_log()
    body = records_of(make_batch([b"a", b"b", b"c"], timestamps=[10, 50, 20]))
    # the header claims max 5 and LogAppendTime: the leader rewrites both (CreateTime topic)
    batch = craft_batch(body, 3, attributes=0x08, base_timestamp=10, max_timestamp=5)
    info = log.append_as_leader(batch, 0, NOW_MS)
    assert info.max_timestamp == 50 and info.log_append_time == -1
    data = log.read(0, 10**6).to_bytes()
    header = headers_of(data)[0]  # iter_batches checks the recomputed CRC
    assert header.max_timestamp == 50 and not header.is_log_append_time
    assert [r.timestamp for r in decode_records(data)] == [10, 50, 20]


def test_log_append_time_stamps_the_leader_clock(open_log: OpenLog) -> None:
    log = open_log(LogConfig(file_delete_delay_ms=0, message_timestamp_type=LOG_APPEND_TIME))
    info = log.append_as_leader(
        make_batch([b"a", b"b"], timestamps=[1, 2], compression_type=CODEC_GZIP), 0, NOW_MS
    )
    assert info.log_append_time == NOW_MS and info.max_timestamp == NOW_MS
    data = log.read(0, 10**6).to_bytes()
    header = headers_of(data)[0]
    assert header.is_log_append_time and header.max_timestamp == NOW_MS
    assert [r.timestamp for r in decode_records(data)] == [NOW_MS, NOW_MS]
    assert log.fetch_offset_by_timestamp(NOW_MS) == (0, NOW_MS)


def test_timestamp_type_config_is_parsed_and_checked() -> None:
    config = LogConfig.from_topic_config({"message.timestamp.type": "LogAppendTime"})
    assert config.message_timestamp_type == LOG_APPEND_TIME
    assert config.to_topic_config()["message.timestamp.type"] == "LogAppendTime"
    with pytest.raises(InvalidLogConfigError):
        LogConfig.from_topic_config({"message.timestamp.type": "WallClock"})


def test_valid_batches_keep_their_bytes_under_create_time() -> None:
    batches = make_batch([b"a", b"b"]) + make_batch([b"c"], compression_type=CODEC_GZIP)
    validated = validate_producer_batches(batches, LogConfig(), NOW_MS)
    assert validated.records == batches
    assert [h.records_count for h in validated.headers] == [2, 1]
    assert [h for h, _ in iter_batches(batches)] == list(validated.headers)


def test_idempotent_batches_are_validated_too(open_log: OpenLog) -> None:
    log = open_log()
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=7,
        producer_epoch=0,
        base_sequence=0,
        batch_size=1 << 20,
    )
    builder.append(0, timestamp=1, key=None, value=b"x", headers=[])
    good = bytes(builder.build())
    assert DefaultRecordBatch(good).producer_id == 7
    lying = bytearray(good)
    lying[57:61] = (5).to_bytes(4, "big")  # recordsCount
    lying[23:27] = (4).to_bytes(4, "big")  # lastOffsetDelta
    lying[17:21] = crc32c.crc32c(bytes(lying[21:])).to_bytes(4, "big")
    assert_refused(log, bytes(lying), CorruptRecordError)
    assert log.append_as_leader(good, 0, NOW_MS).records_count == 1


def test_unused_attribute_bits_are_ignored(open_log: OpenLog) -> None:
    log = open_log()
    body = records_of(make_batch([b"a", b"b"]))
    info = log.append_as_leader(craft_batch(body, 2, attributes=-0x8000 | 0x40), 0, NOW_MS)
    assert (info.records_count, info.max_timestamp) == (2, 1_001)
    assert headers_of(log.read(0, 10**6).to_bytes())[0].attributes == -0x8000 | 0x40


@settings(max_examples=300, deadline=None)
@given(
    codec=st.sampled_from([0, *sorted(ENCODERS)]),
    position=st.integers(0, 10_000),
    value=st.integers(0, 255),
    cut=st.integers(0, 64),
)
def test_mutated_bodies_behind_a_valid_crc_only_raise_log_errors(
    codec: int, position: int, value: int, cut: int
) -> None:
    batch = make_batch([f"v{i}".encode() * 7 for i in range(9)], compression_type=codec)
    body = bytearray(records_of(batch))
    body[position % len(body)] = value
    mutated = craft_batch(bytes(body[: len(body) - cut]), 9, attributes=codec)
    try:
        validated = validate_producer_batches(mutated, LogConfig(), NOW_MS)
    except LogError:
        return
    assert [h.records_count for h in validated.headers] == [9]
