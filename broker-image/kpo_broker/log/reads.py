"""Read paths over a list of segments: fetch slices and timestamp lookups.

Segment-level work behind ``Log.read``/``LocalLog.read`` and
``Log.fetch_offset_by_timestamp`` (Kafka's ``LocalLog.read`` and
``UnifiedLog.fetchOffsetByTimestamp``); the functions only read segment files.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from kpo_broker.log.filerecords import FileSlice
from kpo_broker.log.info import OffsetAndTimestamp
from kpo_broker.log.records import NO_TIMESTAMP
from kpo_broker.log.segment import LogSegment

# Special ListOffsets timestamps (Kafka's ListOffsetsRequest; -3 from KIP-734, -4 KIP-405).
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4


def floor_segment_position(segments: Sequence[LogSegment], offset: int) -> int:
    """Index of the last segment whose base offset is ``<= offset`` (0 if none is)."""
    index = bisect.bisect_right(segments, offset, key=lambda s: s.base_offset) - 1
    return max(index, 0)


def read_slices(
    segments: Sequence[LogSegment],
    start_offset: int,
    max_bytes: int,
    max_offset: int | None,
    min_one_message: bool,
) -> tuple[FileSlice, ...]:
    """Collect whole batches from the batch holding ``start_offset`` onwards.

    Continues into later segments while the byte budget lasts (Kafka stops at the end of
    the first segment; returning more per fetch changes nothing for clients).

    Args:
        segments: the log's segments, oldest first.
        start_offset: first offset wanted (already range-checked by the caller).
        max_bytes: byte budget.
        max_offset: exclusive bound on batch last offsets, or None.
        min_one_message: let the first batch exceed ``max_bytes`` (KIP-74).
    """
    slices: list[FileSlice] = []
    remaining = max_bytes
    offset = start_offset
    for segment in segments[floor_segment_position(segments, start_offset) :]:
        if remaining <= 0 and (slices or not min_one_message):
            break
        offset = max(offset, segment.base_offset)
        part = segment.read(offset, remaining, max_offset, min_one_message and not slices)
        if part is None:
            continue
        if part.size == 0:
            break
        slices.append(part)
        remaining -= part.size
        if part.position + part.size < segment.size:
            break  # stopped inside this segment by the budget or max_offset
    return tuple(slices)


def offset_for_timestamp(
    segments: Sequence[LogSegment],
    timestamp_ms: int,
    log_start_offset: int,
    log_end_offset: int,
) -> OffsetAndTimestamp | None:
    """Answer ListOffsets: the first record at or after the log start with ts >= target.

    Special targets: -2 (earliest) and -4 (earliest local, no tiered storage here) give
    the log start offset, -1 (latest) the LEO, both with timestamp -1; -3 (KIP-734) gives
    the largest timestamp with the last offset of its batch. Other negatives give None.

    Raises:
        CorruptRecordError, UnsupportedCompressionTypeError: a batch cannot be decoded.
    """
    if timestamp_ms in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
        return OffsetAndTimestamp(log_start_offset, NO_TIMESTAMP)
    if timestamp_ms == LATEST_TIMESTAMP:
        return OffsetAndTimestamp(log_end_offset, NO_TIMESTAMP)
    if timestamp_ms == MAX_TIMESTAMP:
        best = max(segments, key=lambda s: s.max_timestamp_so_far)
        if best.max_timestamp_so_far < 0:
            return None
        return OffsetAndTimestamp(best.offset_of_max_timestamp_so_far, best.max_timestamp_so_far)
    if timestamp_ms < 0:
        return None
    for segment in segments:
        if segment.max_timestamp_so_far >= timestamp_ms:
            found = segment.find_offset_by_timestamp(timestamp_ms, log_start_offset)
            if found is not None:
                return found
    return None
