"""Checks run on record batches before they are appended (pure logic).

Kafka's ``UnifiedLog.analyzeAndValidateRecords`` plus the v2 checks of ``LogValidator``:
every batch must be a complete, CRC-valid magic v2 batch no larger than
``max.message.bytes``. Batches from producers must also have a record count matching
their offset range; batches from the leader (follower appends) must have increasing
offsets, but may have fewer records than offsets after compaction.
"""

from __future__ import annotations

from collections.abc import Sequence

from kpo_broker.log.errors import (
    InvalidRecordError,
    OffsetsOutOfOrderError,
    RecordTooLargeError,
)
from kpo_broker.log.info import LogAppendInfo
from kpo_broker.log.records import NO_TIMESTAMP, BatchHeader, iter_batches


def _check_size(header: BatchHeader, max_message_bytes: int) -> None:
    if header.size_in_bytes > max_message_bytes:
        raise RecordTooLargeError(
            f"batch of {header.size_in_bytes} bytes exceeds max.message.bytes {max_message_bytes}"
        )


def validate_producer_batches(
    records: bytes | bytearray | memoryview, max_message_bytes: int
) -> tuple[BatchHeader, ...]:
    """Validate a producer's batches before the leader assigns offsets.

    Args:
        records: the partition's records from a Produce request.
        max_message_bytes: the topic's ``max.message.bytes``.

    Returns:
        The batch headers, in order (offsets not yet assigned).

    Raises:
        CorruptRecordError: bad magic, torn batch or CRC mismatch.
        RecordTooLargeError: a batch is larger than ``max.message.bytes``.
        InvalidRecordError: a batch has no records, or its ``recordsCount`` differs from
            ``lastOffsetDelta + 1``.
    """
    headers = []
    for header, _batch in iter_batches(records, verify_crc=True):
        _check_size(header, max_message_bytes)
        if header.records_count <= 0 or header.last_offset_delta < 0:
            raise InvalidRecordError(
                f"batch reports {header.records_count} records and last offset delta "
                f"{header.last_offset_delta}"
            )
        if header.records_count != header.last_offset_delta + 1:
            raise InvalidRecordError(
                f"batch has {header.records_count} records but last offset delta "
                f"{header.last_offset_delta}"
            )
        headers.append(header)
    return tuple(headers)


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
