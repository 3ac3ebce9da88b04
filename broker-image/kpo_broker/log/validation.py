"""Checks run on record batches before they are appended (pure logic).

Kafka's ``UnifiedLog.analyzeAndValidateRecords`` and ``LogValidator``. Batches from
producers (``validate_producer_batches``) are checked in full, header and body, before
the leader assigns offsets: any failure refuses the partition's whole append. Batches a
follower fetches from the leader (``validate_replicated_batches``) are trusted as Kafka
trusts them: only their framing, CRC, size and offset order are checked.

Decompression bound: a compressed batch's records section may inflate to at most
``DECOMPRESSION_FACTOR`` (8) times ``max.message.bytes``, and never more than
``MAX_DECOMPRESSED_BYTES`` (256 MiB) unless ``max.message.bytes`` itself is larger.
Kafka sets no such bound, but it reads records from a stream; this broker holds the
inflated section in memory and decodes it in Python (about 4 us per record), so the
bound caps both the memory and the event-loop time one batch can take (a 64 MiB gzip
bomb fits in 70 KB). With the default ``max.message.bytes`` of 1048588 the bound is
8 MiB, above what clients write: librdkafka and kafka-python close a batch on its
uncompressed size, and the Java producer, which may fill a batch further on its
estimate of the compressed size, splits a batch refused with ``MESSAGE_TOO_LARGE``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import crc32c
from kafka.record.default_records import DefaultRecordBatch

from kpo_broker.log.compression import (
    CODEC_GZIP,
    CODEC_LZ4,
    CODEC_OF_COMPRESSION_TYPE,
    CODEC_ZSTD,
    compress_records,
    decompress_records,
)
from kpo_broker.log.config import LOG_APPEND_TIME, LogConfig
from kpo_broker.log.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    OffsetsOutOfOrderError,
    RecordError,
    RecordTooLargeError,
)
from kpo_broker.log.info import LogAppendInfo
from kpo_broker.log.records import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    CRC_OFFSET,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAGIC_V2,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    crc_matches,
    iter_batches,
    parse_header,
    set_max_timestamp,
)

DECOMPRESSION_FACTOR = 8
MAX_DECOMPRESSED_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class ValidatedRecords:
    """A producer's batches after validation, ready for offset assignment.

    Attributes:
        records: the batches; each ``maxTimestamp`` and timestamp type set by the leader
            (CRC recomputed where they changed), offsets not yet assigned.
        headers: the batches' headers, in order, matching ``records``.
        log_append_time: the leader's clock in ms when the topic uses LogAppendTime,
            else -1 (the Produce response's ``log_append_time_ms``).
    """

    records: bytes
    headers: tuple[BatchHeader, ...]
    log_append_time: int = NO_TIMESTAMP


def _check_size(header: BatchHeader, max_message_bytes: int) -> None:
    if header.size_in_bytes > max_message_bytes:
        raise RecordTooLargeError(
            f"batch of {header.size_in_bytes} bytes exceeds max.message.bytes {max_message_bytes}"
        )


def max_decompressed_bytes(max_message_bytes: int) -> int:
    """Largest size in bytes a compressed batch's records section may inflate to.

    ``DECOMPRESSION_FACTOR * max_message_bytes``, capped at ``MAX_DECOMPRESSED_BYTES``
    but never below ``max_message_bytes`` (see the module doc).
    """
    return max(
        max_message_bytes, min(DECOMPRESSION_FACTOR * max_message_bytes, MAX_DECOMPRESSED_BYTES)
    )


def validate_producer_batches(
    records: bytes | bytearray | memoryview,
    config: LogConfig,
    now_ms: int,
    topic_partition: str = "",
) -> ValidatedRecords:
    """Validate a producer's batches as the leader does before it assigns offsets.

    Kafka's ``LogValidator.validateMessagesAndAssignOffsets`` for a client append, per
    batch: magic 2; size within ``max.message.bytes``; CRC; ``recordsCount`` equal to
    ``lastOffsetDelta + 1`` and positive; not a control batch; the records section
    decompressed within the bound of the module doc; exactly ``recordsCount`` records
    decoded, each of consistent length, with no bytes left over; offset deltas
    ``0..n-1`` in order; in a compacted topic (``cleanup.policy`` with ``compact``) every
    record has a key (Kafka's ``LogValidator.validateKey``). The batch's ``maxTimestamp``
    is then set per
    ``message.timestamp.type``: the largest record timestamp (CreateTime) or ``now_ms``
    (LogAppendTime).

    Args:
        records: the partition's records from a Produce request.
        config: the topic's log config (``max.message.bytes``, ``message.timestamp.type``).
        now_ms: the leader's clock, ms.
        topic_partition: ``<topic>-<partition>``, named in the keyless-record error.

    Returns:
        The validated batches; empty when ``records`` is empty.

    Raises:
        CorruptRecordError: torn batch, CRC mismatch, unknown codec, undecodable or
            inconsistent records section (record count, record sizes, trailing bytes).
        InvalidRecordError: magic other than 2, a bad offset range or record count in
            the header, a control batch, or records whose offset deltas are not
            ``0..n-1`` or, in a compacted topic, that have no key (listed in
            ``record_errors``; the message names ``topic_partition``).
        RecordTooLargeError: a batch above ``max.message.bytes``, or one that
            decompresses beyond the bound.
        UnsupportedCompressionTypeError: the codec's library is not installed.
    """
    view = memoryview(records)
    out = bytearray()
    headers: list[BatchHeader] = []
    log_append_time = config.message_timestamp_type == LOG_APPEND_TIME
    target_codec = CODEC_OF_COMPRESSION_TYPE.get(config.compression_type)
    position = 0
    while position < len(view):
        index = len(headers)
        if len(view) - position > MAGIC_OFFSET and view[position + MAGIC_OFFSET] != MAGIC_V2:
            raise InvalidRecordError(
                f"batch {index} has magic {view[position + MAGIC_OFFSET]}; "
                f"Produce accepts only magic {MAGIC_V2}"
            )
        header = parse_header(view, position)
        end = position + header.size_in_bytes
        if end > len(view):
            raise CorruptRecordError(
                f"batch {index} needs {header.size_in_bytes} bytes, "
                f"only {len(view) - position} remain"
            )
        _check_size(header, config.max_message_bytes)
        batch = view[position:end]
        if not crc_matches(header, batch):
            raise CorruptRecordError(f"CRC32C mismatch in batch {index}")
        _check_batch_header(index, header)
        timestamps, body = _decode_records(
            index, header, batch, config.max_message_bytes, config.compact, topic_partition
        )
        if not log_append_time:
            _check_timestamps(index, header, timestamps, config, now_ms)
        max_timestamp = now_ms if log_append_time else max(timestamps)
        start = len(out)
        if target_codec is not None and target_codec != header.compression_type:
            rebuilt = recompress_batch(batch, body, target_codec, config)
            header = parse_header(rebuilt, 0)
            _check_size(header, config.max_message_bytes)
            out += rebuilt
        else:
            out += batch
        headers.append(
            set_max_timestamp(memoryview(out)[start:], header, log_append_time, max_timestamp)
        )
        position = end
    return ValidatedRecords(
        bytes(out), tuple(headers), now_ms if log_append_time and headers else NO_TIMESTAMP
    )


def _check_batch_header(index: int, header: BatchHeader) -> None:
    """Kafka's ``LogValidator.validateBatch`` for a client's batch."""
    if header.last_offset_delta < 0:
        raise InvalidRecordError(
            f"batch {index} has a negative last offset delta {header.last_offset_delta}"
        )
    if header.records_count <= 0:
        raise InvalidRecordError(f"batch {index} reports {header.records_count} records")
    if header.records_count != header.last_offset_delta + 1:
        raise InvalidRecordError(
            f"batch {index} has {header.records_count} records but last offset delta "
            f"{header.last_offset_delta}"
        )
    if header.is_control:
        raise InvalidRecordError(f"batch {index} is a control batch; producers cannot write one")


def _check_timestamps(
    index: int, header: BatchHeader, timestamps: list[int], config: LogConfig, now_ms: int
) -> None:
    """Refuse CreateTime records outside the topic's timestamp bounds (KIP-937).

    Kafka's ``LogValidator.validateTimestamp``: a record whose timestamp is more than
    ``message.timestamp.before.max.ms`` behind or ``message.timestamp.after.max.ms`` ahead
    of the leader's clock fails its batch with INVALID_TIMESTAMP; records without a
    timestamp (-1) pass.

    Raises:
        InvalidTimestampError: listing the offending records.
    """
    low = now_ms - config.message_timestamp_before_max_ms
    high = now_ms + config.message_timestamp_after_max_ms
    if low <= min(timestamps) and max(timestamps) <= high:
        return  # the common case: every record within bounds (-1 included when low <= -1)
    errors = [
        RecordError(
            position,
            f"Timestamp {timestamp} of message with offset {header.base_offset + position} is "
            f"out of range. The timestamp should be within [{low}, {high}]",
        )
        for position, timestamp in enumerate(timestamps)
        if timestamp != NO_TIMESTAMP
        and (
            now_ms - timestamp > config.message_timestamp_before_max_ms
            or timestamp - now_ms > config.message_timestamp_after_max_ms
        )
    ]
    if errors:
        raise InvalidTimestampError(
            f"One or more records in batch {index} have been rejected due to invalid timestamp",
            tuple(errors),
        )


def recompress_batch(
    batch: memoryview | bytes, body: bytes, codec: int, config: LogConfig
) -> bytearray:
    """Rebuild one batch with its records section in ``codec`` (Kafka's recompression).

    Kafka's ``LogValidator`` rewrites a producer's batch whose codec differs from the
    topic's ``compression.type`` (unless that is ``producer``): same header fields
    (producer id, epoch, sequence, timestamps, record count), the records section
    compressed with the topic's codec and level, attributes, batch length and CRC updated.

    Args:
        batch: the producer's batch.
        body: its uncompressed records section.
        codec: the target codec id.
        config: the topic's log config (compression levels).

    Returns:
        The new batch.
    """
    level = {
        CODEC_GZIP: config.compression_gzip_level,
        CODEC_LZ4: config.compression_lz4_level,
        CODEC_ZSTD: config.compression_zstd_level,
    }.get(codec)
    rebuilt = bytearray(batch[:HEADER_SIZE]) + compress_records(codec, body, level)
    attributes = int.from_bytes(
        rebuilt[ATTRIBUTES_OFFSET : ATTRIBUTES_OFFSET + 2], "big", signed=True
    )
    attributes = (attributes & ~COMPRESSION_MASK) | codec
    rebuilt[ATTRIBUTES_OFFSET : ATTRIBUTES_OFFSET + 2] = attributes.to_bytes(2, "big", signed=True)
    rebuilt[8:12] = (len(rebuilt) - LOG_OVERHEAD).to_bytes(4, "big", signed=True)
    rebuilt[CRC_OFFSET : CRC_OFFSET + 4] = crc32c.crc32c(rebuilt[ATTRIBUTES_OFFSET:]).to_bytes(
        4, "big"
    )
    return rebuilt


def _decode_records(
    index: int,
    header: BatchHeader,
    batch: memoryview,
    max_message_bytes: int,
    compacted: bool = False,
    topic_partition: str = "",
) -> tuple[list[int], bytes]:
    """Decode every record of a batch; return their CreateTime timestamps (ms) and body.

    The body is the uncompressed records section (for recompression).

    The records section is decompressed within the bound, then read with kafka-python's
    ``DefaultRecordBatch`` over a copy of the batch marked uncompressed and CreateTime
    (so each record's timestamp is ``baseTimestamp + timestampDelta``).

    Raises:
        As ``validate_producer_batches`` for the batch's body.
    """
    body = decompress_records(
        header.compression_type,
        batch[HEADER_SIZE:],
        max_decompressed_bytes(max_message_bytes),
    )
    plain = bytearray(batch[:HEADER_SIZE])
    attributes = header.attributes & ~(COMPRESSION_MASK | TIMESTAMP_TYPE_MASK)
    plain[ATTRIBUTES_OFFSET : ATTRIBUTES_OFFSET + 2] = attributes.to_bytes(2, "big", signed=True)
    plain += body
    timestamps: list[int] = []
    record_errors: list[RecordError] = []
    try:
        for position, record in enumerate(DefaultRecordBatch(plain)):
            delta = record.offset - header.base_offset
            if delta != position:
                record_errors.append(
                    RecordError(position, f"offset delta {delta}, expected {position}")
                )
            if compacted and record.key is None:
                record_errors.append(RecordError(position, _no_key_message(topic_partition)))
            timestamps.append(record.timestamp)
    except Exception as exc:  # kafka-python raises several types for a bad body
        raise CorruptRecordError(
            f"batch {index} declares {header.records_count} records; its records section "
            f"is invalid after {len(timestamps)} of them: {exc}"
        ) from exc
    if record_errors:
        if compacted and all(e.message == _no_key_message(topic_partition) for e in record_errors):
            raise InvalidRecordError(_no_key_message(topic_partition), tuple(record_errors))
        raise InvalidRecordError(
            f"batch {index} has records whose offset deltas are not 0..{header.last_offset_delta}",
            tuple(record_errors),
        )
    return timestamps, body


def _no_key_message(topic_partition: str) -> str:
    """Kafka's ``LogValidator`` message for a keyless record in a compacted topic."""
    where = f" in topic partition {topic_partition}" if topic_partition else ""
    return f"Compacted topic cannot accept message without key{where}."


def validate_replicated_batches(
    records: bytes | bytearray | memoryview, max_message_bytes: int
) -> tuple[BatchHeader, ...]:
    """Validate batches fetched from the leader, which keep the leader's offsets.

    Raises:
        CorruptRecordError: bad magic, torn batch or CRC mismatch.
        RecordTooLargeError: a batch is larger than ``max.message.bytes``.
        OffsetsOutOfOrderError: a batch does not start after the previous batch's end, or
            has a negative offset delta.
    """
    headers: list[BatchHeader] = []
    for header, _batch in iter_batches(records, verify_crc=True):
        _check_size(header, max_message_bytes)
        if header.last_offset_delta < 0 or (
            headers and header.base_offset < headers[-1].next_offset
        ):
            raise OffsetsOutOfOrderError(
                f"batch with offsets {header.base_offset}..{header.last_offset} is out of order"
            )
        headers.append(header)
    return tuple(headers)


def summarize_append(headers: Sequence[BatchHeader], valid_bytes: int) -> LogAppendInfo:
    """Build the ``LogAppendInfo`` of batches with final offsets (-1 fields when empty).

    ``offset_of_max_timestamp`` is the last offset of the first batch holding the
    largest ``maxTimestamp`` (Kafka's shallow offset of the max timestamp).
    """
    if not headers:
        return LogAppendInfo(-1, -1, NO_TIMESTAMP, -1, 0, 0)
    max_timestamp = NO_TIMESTAMP
    offset_of_max = -1
    for header in headers:
        if header.max_timestamp > max_timestamp:
            max_timestamp = header.max_timestamp
            offset_of_max = header.last_offset
    return LogAppendInfo(
        first_offset=headers[0].base_offset,
        last_offset=headers[-1].last_offset,
        max_timestamp=max_timestamp,
        offset_of_max_timestamp=offset_of_max,
        records_count=sum(header.records_count for header in headers),
        valid_bytes=valid_bytes,
    )
