"""Topic configs the log applies: compression.type, timestamp bounds, flush.*, segment.jitter.ms."""

from __future__ import annotations

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from kpo_broker.log.compression import CODEC_GZIP, CODEC_LZ4, CODEC_SNAPPY, CODEC_ZSTD
from kpo_broker.log.config import LogConfig
from kpo_broker.log.errors import InvalidTimestampError, RecordTooLargeError
from kpo_broker.log.segment import random_segment_jitter
from tests.unit.broker.log.batches import decode_records, headers_of, make_batch
from tests.unit.broker.log.conftest import NOW_MS, OpenLog

CODECS = {"gzip": CODEC_GZIP, "snappy": CODEC_SNAPPY, "lz4": CODEC_LZ4, "zstd": CODEC_ZSTD}


@pytest.mark.parametrize("target", sorted(CODECS))
@pytest.mark.parametrize("source", [0, CODEC_GZIP, CODEC_ZSTD])
def test_the_leader_recompresses_to_the_topic_codec(
    open_log: OpenLog, source: int, target: str
) -> None:
    log = open_log(LogConfig(file_delete_delay_ms=0, compression_type=target))
    values = [f"value-{i}".encode() * 30 for i in range(40)]
    keys = [f"k{i}".encode() for i in range(40)]
    batch = make_batch(values, keys=keys, compression_type=source, timestamp_ms=NOW_MS)
    info = log.append_as_leader(batch, 0, NOW_MS)
    assert (info.first_offset, info.last_offset) == (0, 39)
    data = log.read(0, 10**7).to_bytes()
    (header,) = headers_of(data)  # iter_batches checks the CRC
    assert header.compression_type == CODECS[target]
    assert [r.value for r in decode_records(data)] == values
    assert [r.key for r in decode_records(data)] == keys
    assert header.max_timestamp == NOW_MS + 39


def test_uncompressed_topics_store_batches_uncompressed(open_log: OpenLog) -> None:
    log = open_log(LogConfig(file_delete_delay_ms=0, compression_type="uncompressed"))
    log.append_as_leader(make_batch([b"x" * 100] * 5, compression_type=CODEC_LZ4), 0, NOW_MS)
    data = log.read(0, 10**6).to_bytes()
    assert headers_of(data)[0].compression_type == 0
    assert [r.value for r in decode_records(data)] == [b"x" * 100] * 5


def test_producer_keeps_each_batch_codec(open_log: OpenLog) -> None:
    log = open_log(LogConfig(file_delete_delay_ms=0, compression_type="producer"))
    batch = make_batch([b"a" * 200, b"b" * 200], compression_type=CODEC_SNAPPY)
    log.append_as_leader(batch, 0, NOW_MS)
    assert headers_of(log.read(0, 10**6).to_bytes())[0].compression_type == CODEC_SNAPPY


def test_recompression_keeps_the_idempotent_producer_fields(open_log: OpenLog) -> None:
    log = open_log(LogConfig(file_delete_delay_ms=0, compression_type="gzip"))
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=7,
        producer_epoch=2,
        base_sequence=0,
        batch_size=1 << 20,
    )
    for i in range(3):
        builder.append(i, timestamp=NOW_MS, key=None, value=b"v%d" % i, headers=[])
    batch = bytes(builder.build())
    log.append_as_leader(batch, 0, NOW_MS)
    duplicate = log.append_as_leader(batch, 0, NOW_MS)  # a retry is still recognised
    assert duplicate.duplicate and log.log_end_offset == 3
    header = headers_of(log.read(0, 10**6).to_bytes())[0]
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 2, 0)
    assert header.compression_type == CODEC_GZIP


def test_a_recompressed_batch_above_max_message_bytes_is_refused(open_log: OpenLog) -> None:
    config = LogConfig(file_delete_delay_ms=0, compression_type="uncompressed")
    log = open_log(dataclass_replace(config, max_message_bytes=2000))
    batch = make_batch([bytes(500)] * 10, compression_type=CODEC_GZIP)
    assert len(batch) < 2000
    with pytest.raises(RecordTooLargeError):
        log.append_as_leader(batch, 0, NOW_MS)
    assert log.log_end_offset == 0


def dataclass_replace(config: LogConfig, **changes: int) -> LogConfig:
    import dataclasses

    return dataclasses.replace(config, **changes)


def test_timestamps_outside_the_bounds_are_invalid(open_log: OpenLog) -> None:
    log = open_log(
        LogConfig(
            file_delete_delay_ms=0,
            message_timestamp_before_max_ms=60_000,
            message_timestamp_after_max_ms=1_000,
        )
    )
    too_old = make_batch([b"a", b"b"], timestamps=[NOW_MS, NOW_MS - 60_001])
    with pytest.raises(InvalidTimestampError) as caught:
        log.append_as_leader(too_old, 0, NOW_MS)
    assert caught.value.error_code == 32
    assert [e.batch_index for e in caught.value.record_errors] == [1]
    assert "out of range" in caught.value.record_errors[0].message
    too_new = make_batch([b"a"], timestamps=[NOW_MS + 1_001])
    with pytest.raises(InvalidTimestampError):
        log.append_as_leader(too_new, 0, NOW_MS)
    assert log.log_end_offset == 0
    edge = make_batch([b"a", b"b"], timestamps=[NOW_MS - 60_000, NOW_MS + 1_000])
    assert log.append_as_leader(edge, 0, NOW_MS).records_count == 2


def test_timestamp_bounds_do_not_apply_to_log_append_time(open_log: OpenLog) -> None:
    log = open_log(
        LogConfig(
            file_delete_delay_ms=0,
            message_timestamp_type="LogAppendTime",
            message_timestamp_before_max_ms=0,
        )
    )
    assert log.append_as_leader(make_batch([b"a"], timestamps=[5]), 0, NOW_MS).records_count == 1


def test_flush_messages_fsyncs_after_that_many_records(open_log: OpenLog) -> None:
    log = open_log(LogConfig(file_delete_delay_ms=0, flush_messages=3))
    log.append_as_leader(make_batch([b"a", b"b"]), 0, NOW_MS)
    assert log.recovery_point == 0
    log.append_as_leader(make_batch([b"c"]), 0, NOW_MS)
    assert log.recovery_point == 3
    unflushed = open_log(name="other-0")
    unflushed.append_as_leader(make_batch([b"a"] * 5), 0, NOW_MS)
    assert unflushed.recovery_point == 0


def test_flush_ms_fsyncs_logs_whose_last_flush_is_that_old(open_log: OpenLog) -> None:
    log = open_log(LogConfig(file_delete_delay_ms=0, flush_ms=1_000))
    log.append_as_leader(make_batch([b"a"]), 0, NOW_MS)
    assert not log.flush_if_due(log.last_flush_ms + 999)
    assert log.flush_if_due(log.last_flush_ms + 1_000)
    assert log.recovery_point == 1
    assert not log.flush_if_due(log.last_flush_ms + 10_000)  # nothing left to flush


def test_segment_jitter_is_below_both_bounds() -> None:
    assert random_segment_jitter(LogConfig()) == 0
    jitters = {
        random_segment_jitter(LogConfig(segment_ms=50, segment_jitter_ms=1000)) for _ in range(200)
    }
    assert jitters <= set(range(50)) and len(jitters) > 10


def test_segment_jitter_rolls_earlier(open_log: OpenLog) -> None:
    log = open_log(LogConfig(file_delete_delay_ms=0, segment_ms=1_000, segment_jitter_ms=1_000))
    log.append_as_leader(make_batch([b"a"], timestamps=[NOW_MS]), 0, NOW_MS)
    jitter = log.active_segment.roll_jitter_ms
    assert 0 <= jitter < 1_000
    log.append_as_leader(make_batch([b"b"], timestamps=[NOW_MS + 1_000 - jitter]), 0, NOW_MS)
    assert len(log.segments) == 1  # waited exactly segment.ms - jitter: not yet
    log.append_as_leader(make_batch([b"c"], timestamps=[NOW_MS + 1_001 - jitter]), 0, NOW_MS)
    assert len(log.segments) == 2


def test_records_without_timestamp_pass_but_do_not_hide_others(open_log: OpenLog) -> None:
    log = open_log(LogConfig(file_delete_delay_ms=0, message_timestamp_before_max_ms=1_000))
    mixed = make_batch([b"a", b"b", b"c"], timestamps=[NOW_MS - 5_000, -1, NOW_MS])
    with pytest.raises(InvalidTimestampError) as caught:
        log.append_as_leader(mixed, 0, NOW_MS)
    assert [e.batch_index for e in caught.value.record_errors] == [0]
    assert log.append_as_leader(make_batch([b"d"], timestamps=[-1]), 0, NOW_MS).records_count == 1
