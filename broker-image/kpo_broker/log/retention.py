"""Which old segments retention may delete (pure logic of Kafka's ``deleteOldSegments``).

Deletion always takes a prefix of the segment list, oldest first, and a segment is only
eligible when every offset in it is below the high watermark (its successor's base offset
``<=`` HW) and it is not the active (last) segment. Three rules run in Kafka's order,
each on what the previous ones left (Kafka's ``UnifiedLog.deleteOldSegments``; the
documentation's "Implementation: Log", Deletes):

1. ``retention.ms``: the segment's largest timestamp is more than ``retention.ms`` old;
2. ``retention.bytes``: the log is larger than ``retention.bytes`` and removing the
   segment does not take it below the limit;
3. log start offset: the whole segment is below the log start offset (DeleteRecords,
   KIP-107).

Rules 1 and 2 apply only when ``cleanup.policy`` includes ``delete``; a ``compact``-only
log keeps its segments until the log start offset passes them (Kafka's
``UnifiedLog.deleteOldSegments``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kpo_broker.log.config import LogConfig


@dataclass(frozen=True)
class SegmentSummary:
    """What retention needs to know about a segment.

    Attributes:
        base_offset: the segment's first offset.
        size: its ``.log`` size in bytes.
        largest_timestamp: largest batch timestamp in ms (or the file's mtime).
    """

    base_offset: int
    size: int
    largest_timestamp: int


def _eligible(segments: Sequence[SegmentSummary], index: int, high_watermark: int) -> bool:
    """Not the active segment and wholly below the high watermark."""
    return index + 1 < len(segments) and segments[index + 1].base_offset <= high_watermark


def deletable_segment_count(
    segments: Sequence[SegmentSummary],
    config: LogConfig,
    now_ms: int,
    high_watermark: int,
    log_start_offset: int,
) -> int:
    """Return how many leading segments retention deletes.

    Args:
        segments: every segment of the log, oldest first; the last one is active.
        config: supplies ``retention.ms`` and ``retention.bytes`` (-1 disables each),
            applied only if ``cleanup.policy`` includes ``delete``.
        now_ms: the current time in ms.
        high_watermark: the partition's HW; data at or after it is never deleted.
        log_start_offset: the log start offset.
    """
    count = 0
    if config.delete and config.retention_ms >= 0:
        while _eligible(segments, count, high_watermark) and (
            now_ms - segments[count].largest_timestamp > config.retention_ms
        ):
            count += 1
    if config.delete and config.retention_bytes >= 0:
        excess = sum(segment.size for segment in segments[count:]) - config.retention_bytes
        while _eligible(segments, count, high_watermark) and excess - segments[count].size >= 0:
            excess -= segments[count].size
            count += 1
    while _eligible(segments, count, high_watermark) and (
        segments[count + 1].base_offset <= log_start_offset
    ):
        count += 1
    return count
