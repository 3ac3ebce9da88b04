"""Cleaning one log: the offset map, segment groups, filtering and the swap (Kafka's ``Cleaner``).

A compacted log is split at its first dirty offset (the ``cleaner-offset-checkpoint``
entry) into a clean head and a dirty tail; the dirty tail ends at the first uncleanable
offset (the active segment, the high watermark, ``min.compaction.lag.ms``). One cleaning:

1. build the key -> latest offset map of the dirty section, stopping when the map is
   full (the rest stays dirty for the next round);
2. group the segments up to the map's end so each group fits one segment
   (``segment.bytes``, ``segment.index.bytes``, offsets relative to its base);
3. copy each group's batches through the filter of ``record_filter`` into a new segment
   written under ``.cleaned`` names (indexes built as it is written), flush it, and swap
   it in for the group (``Log.replace_segments``: ``.swap`` renames, old files
   ``.deleted``), unless the log was truncated, renamed, closed or lost one of those
   segments meanwhile, which aborts the cleaning.

Segments below the first uncleanable offset never change again except through retention
or the cleaner itself, so they are read without the log's lock; the lock is held only
for the swap. Reads and writes are paced by the shared ``Throttler``
(``log.cleaner.io.max.bytes.per.second``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from kpo_broker.log.log import Log, LogCleaningAbortedError
from kpo_broker.log.names import (
    CLEANED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    offset_file_name,
)
from kpo_broker.log.offset_map import OffsetMap
from kpo_broker.log.record_filter import CleanerFilter, filter_batches, keyed_records
from kpo_broker.log.records import iter_batches
from kpo_broker.log.segment import LogSegment
from kpo_broker.log.validation import max_decompressed_bytes
from kpo_kafka.topic_partition import TopicPartition

_log = logging.getLogger(__name__)
_MAX_RELATIVE_OFFSET = 2**31 - 1


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class Throttler:
    """Paces the cleaner threads' I/O to ``rate`` bytes/s on average (Kafka's ``Throttler``).

    Bytes are counted over windows of at least ``check_interval_s``; when a window's rate
    is above the desired one, the calling thread sleeps until it is not. Thread-safe.

    Args:
        rate: bytes/s (``log.cleaner.io.max.bytes.per.second``); infinite or <= 0 means
            unthrottled.
        check_interval_s: window length (Kafka: 300 ms).
        clock: monotonic seconds; sleep: blocks a number of seconds (tests inject both).
    """

    def __init__(
        self,
        rate: float,
        check_interval_s: float = 0.3,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.rate = rate
        self._interval = check_interval_s
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._period_start = clock()
        self._observed = 0.0

    def maybe_throttle(self, num_bytes: int) -> float:
        """Count ``num_bytes`` and sleep if the window's rate is too high.

        Returns:
            Seconds slept.
        """
        if not 0 < self.rate < float("inf"):
            return 0.0
        with self._lock:
            self._observed += num_bytes
            elapsed = self._clock() - self._period_start
            if elapsed < self._interval:
                return 0.0
            wait = self._observed / self.rate - elapsed
            if wait > 0:
                self._sleep(wait)
            self._period_start = self._clock()
            self._observed = 0.0
            return max(wait, 0.0)


@dataclass
class CleanerStats:
    """Counts of one cleaning (Kafka's ``CleanerStats``); times are monotonic seconds."""

    start: float = field(default_factory=time.monotonic)
    map_complete: float = -1.0
    end: float = -1.0
    bytes_read: int = 0
    bytes_written: int = 0
    map_bytes_read: int = 0
    map_messages_read: int = 0
    messages_read: int = 0
    messages_written: int = 0
    buffer_utilization: float = 0.0

    @property
    def elapsed_secs(self) -> float:
        """Seconds the cleaning took (0 until it is done)."""
        return max(0.0, self.end - self.start) if self.end >= 0 else 0.0


@dataclass(frozen=True)
class SegmentSize:
    """What grouping needs of one segment: base offset and file sizes in bytes."""

    base_offset: int
    log_bytes: int
    index_bytes: int
    time_index_bytes: int

    @classmethod
    def of(cls, segment: LogSegment) -> SegmentSize:
        """Sizes of a live segment."""
        return cls(
            segment.base_offset,
            segment.size,
            segment.offset_index.size_in_bytes,
            segment.time_index.size_in_bytes,
        )


def group_segments_by_size(
    segments: Sequence[SegmentSize],
    max_size: int,
    max_index_size: int,
    first_uncleanable_offset: int,
) -> list[list[int]]:
    """Group consecutive segments so each group's cleaned copy fits one segment.

    Kafka's ``Cleaner.groupSegmentsBySize``: a group's ``.log`` bytes stay within
    ``max_size`` (``segment.bytes``) and each index's within ``max_index_size``
    (``segment.index.bytes``), and every offset of the group stays within 2^31 - 1 of
    its first segment's base offset (the last offset of a segment is estimated by the
    next segment's base offset, or ``first_uncleanable_offset`` for the last one).

    Returns:
        Groups of positions in ``segments``, in order; every position appears once.
    """
    groups: list[list[int]] = []
    position = 0
    while position < len(segments):
        group = [position]
        head = segments[position]
        log_bytes, index_bytes, time_bytes = head.log_bytes, head.index_bytes, head.time_index_bytes
        position += 1
        while position < len(segments):
            candidate = segments[position]
            if position + 1 < len(segments):
                last_offset = segments[position + 1].base_offset - 1
            else:
                last_offset = first_uncleanable_offset - 1
            if not (
                log_bytes + candidate.log_bytes <= max_size
                and index_bytes + candidate.index_bytes <= max_index_size
                and time_bytes + candidate.time_index_bytes <= max_index_size
                and (
                    candidate.log_bytes == 0
                    or last_offset - segments[group[0]].base_offset <= _MAX_RELATIVE_OFFSET
                )
            ):
                break
            group.append(position)
            log_bytes += candidate.log_bytes
            index_bytes += candidate.index_bytes
            time_bytes += candidate.time_index_bytes
            position += 1
        groups.append(group)
    return groups


def segments_in_range(
    segments: Sequence[LogSegment], from_offset: int, to_offset: int
) -> list[LogSegment]:
    """Segments holding offsets in ``[from_offset, to_offset)`` (Kafka's ``logSegments``)."""
    found = []
    for position, segment in enumerate(segments):
        following = segments[position + 1] if position + 1 < len(segments) else None
        if segment.base_offset >= to_offset:
            break
        if following is not None and following.base_offset <= from_offset:
            continue
        found.append(segment)
    return found


@dataclass(frozen=True)
class LogToClean:
    """A log chosen for cleaning and its dirty range (Kafka's ``LogToClean``).

    Attributes:
        topic_partition: the partition.
        log: its log.
        first_dirty_offset: where the dirty section starts.
        first_uncleanable_offset: where the cleanable part of it ends (a segment base).
        clean_bytes: bytes of the segments before the dirty section.
        cleanable_bytes: bytes of the segments in the cleanable dirty range.
        need_compaction_now: ``max.compaction.lag.ms`` has passed for some dirty record.
        fence: the log's ``cleaner_fence`` when it was chosen.
    """

    topic_partition: TopicPartition
    log: Log
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    need_compaction_now: bool
    fence: int

    @property
    def total_bytes(self) -> int:
        """Clean plus cleanable bytes."""
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        """Cleanable bytes / total bytes: compared with ``min.cleanable.dirty.ratio``."""
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0


class Cleaner:
    """Cleans one log at a time for one cleaner thread.

    Args:
        cleaner_id: the thread's number, for logs.
        offset_map: the thread's map (its share of ``log.cleaner.dedupe.buffer.size``).
        io_buffer_size: bytes read per chunk (at least one whole batch is read).
        load_factor: ``log.cleaner.io.buffer.load.factor``: the map takes at most
            ``slots * load_factor`` keys per round.
        throttler: the shared I/O throttle.
        check_done: called between chunks with the log being cleaned; raises
            ``LogCleaningAbortedError`` to stop (abort, shutdown, the log changed).

    Raises:
        ValueError: the map cannot hold a single key at this load factor.
    """

    def __init__(
        self,
        cleaner_id: int,
        offset_map: OffsetMap,
        io_buffer_size: int,
        load_factor: float,
        throttler: Throttler,
        check_done: Callable[[LogToClean], None],
    ) -> None:
        if offset_map.slots * load_factor <= 1:
            raise ValueError(
                "offset map is too small to fit in even a single message; increase "
                "log.cleaner.dedupe.buffer.size or decrease log.cleaner.threads"
            )
        self.cleaner_id = cleaner_id
        self.offset_map = offset_map
        self.io_buffer_size = max(1, io_buffer_size)
        self.load_factor = load_factor
        self.throttler = throttler
        self._check_done = check_done

    def clean(self, cleanable: LogToClean, now_ms: int | None = None) -> tuple[int, CleanerStats]:
        """Clean the log's dirty range (Kafka's ``Cleaner.doClean``).

        Returns:
            The first offset not cleaned (the new ``cleaner-offset-checkpoint`` entry)
            and the statistics.

        Raises:
            LogCleaningAbortedError: the cleaning was aborted; segments already swapped
                in stay (each swap is complete on its own), nothing else changed.
            CorruptRecordError, RecordTooLargeError, UnsupportedCompressionTypeError: a
                batch cannot be read; the caller marks the partition uncleanable.
            OSError: disk failure.
        """
        now = _now_ms() if now_ms is None else now_ms
        log = cleanable.log
        stats = CleanerStats()
        upper = cleanable.first_uncleanable_offset
        self.build_offset_map(cleanable, cleanable.first_dirty_offset, upper, stats)
        end_offset = self.offset_map.latest_offset + 1
        stats.map_complete = time.monotonic()
        segments = segments_in_range(log.segments, 0, end_offset)
        sizes = [SegmentSize.of(segment) for segment in segments]
        config = log.config
        for group in group_segments_by_size(
            sizes, config.segment_bytes, config.segment_index_bytes, upper
        ):
            self.clean_segments(cleanable, [segments[p] for p in group], now, stats, upper)
        stats.buffer_utilization = self.offset_map.utilization
        stats.end = time.monotonic()
        return end_offset, stats

    def _chunks(
        self, cleanable: LogToClean, segment: LogSegment, position: int
    ) -> Iterator[tuple[int, bytes]]:
        """Yield ``(position, bytes)`` chunks of whole batches from ``position`` on."""
        records = segment.records
        chunk_start: int | None = None
        chunk_end = position
        for batch_position, header in records.batches_from(position):
            if chunk_start is None:
                chunk_start = batch_position
            elif batch_position + header.size_in_bytes - chunk_start > self.io_buffer_size:
                self._check_done(cleanable)
                yield chunk_start, records.pread(chunk_start, chunk_end - chunk_start)
                chunk_start = batch_position
            chunk_end = batch_position + header.size_in_bytes
        if chunk_start is not None:
            self._check_done(cleanable)
            yield chunk_start, records.pread(chunk_start, chunk_end - chunk_start)

    def build_offset_map(
        self, cleanable: LogToClean, start: int, end: int, stats: CleanerStats
    ) -> None:
        """Map the keys of ``[start, end)`` to their latest offsets (Kafka's ``buildOffsetMap``).

        Stops early when the map holds ``slots * load_factor`` keys; ``latest_offset``
        then tells how far it got.
        """
        offset_map = self.offset_map
        offset_map.clear()
        log = cleanable.log
        dirty = segments_in_range(log.segments, start, end)
        max_keys = int(offset_map.slots * self.load_factor)
        bound = max_decompressed_bytes(log.config.max_message_bytes)
        for position, segment in enumerate(dirty):
            next_start = dirty[position + 1].base_offset if position + 1 < len(dirty) else end
            begin = segment.offset_index.lookup(start).position
            for _chunk_position, chunk in self._chunks(cleanable, segment, begin):
                self.throttler.maybe_throttle(len(chunk))
                stats.map_bytes_read += len(chunk)
                for header, batch in iter_batches(chunk, verify_crc=False):
                    if header.base_offset >= end:
                        break
                    for key, offset in keyed_records(header, batch, bound):
                        if offset < start:
                            continue
                        if offset_map.size >= max_keys and offset_map.get(key) < 0:
                            _log.debug("offset map full at offset %d", offset)
                            return
                        offset_map.put(key, offset)
                        stats.map_messages_read += 1
                    if header.last_offset >= start:
                        offset_map.update_latest_offset(header.last_offset)
            offset_map.update_latest_offset(next_start - 1)

    def clean_segments(
        self,
        cleanable: LogToClean,
        segments: list[LogSegment],
        now_ms: int,
        stats: CleanerStats,
        upper_bound_offset: int,
    ) -> None:
        """Clean a group into one ``.cleaned`` segment and swap it in (Kafka's ``cleanSegments``).

        Raises:
            LogCleaningAbortedError: aborted; the ``.cleaned`` files are removed.
        """
        log = cleanable.log
        config = log.config
        base = segments[0].base_offset
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            (log.dir / (offset_file_name(base, suffix) + CLEANED_SUFFIX)).unlink(missing_ok=True)
        cleaned = LogSegment.open(log.dir, base, config, now_ms, CLEANED_SUFFIX)
        try:
            cleaner_filter = CleanerFilter(
                offset_map=self.offset_map,
                now_ms=now_ms,
                delete_retention_ms=config.delete_retention_ms,
                last_offsets_of_active_producers=log.last_offsets_of_active_producers(),
                upper_bound_offset=upper_bound_offset,
                max_decompressed_bytes=max_decompressed_bytes(config.max_message_bytes),
            )
            for segment in segments:
                for _position, chunk in self._chunks(cleanable, segment, 0):
                    self.throttler.maybe_throttle(len(chunk))
                    result = filter_batches(chunk, cleaner_filter)
                    stats.bytes_read += len(chunk)
                    stats.messages_read += result.messages_read
                    stats.messages_written += result.messages_retained
                    if result.headers:
                        stats.bytes_written += len(result.data)
                        cleaned.append(
                            bytes(result.data), result.headers, config.index_interval_bytes
                        )
                        self.throttler.maybe_throttle(len(result.data))
            cleaned.on_become_inactive()
            cleaned.flush()
            cleaned.set_last_modified(segments[-1].records.last_modified_ms)
            self._check_done(cleanable)
            _log.info(
                "cleaner %d: swapping in cleaned segment %d for %d segment(s) of %s",
                self.cleaner_id,
                base,
                len(segments),
                cleanable.topic_partition,
            )
            log.replace_segments([cleaned], segments, cleanable.fence)
        except Exception:
            cleaned.delete()
            raise


__all__ = [
    "Cleaner",
    "CleanerStats",
    "LogCleaningAbortedError",
    "LogToClean",
    "SegmentSize",
    "Throttler",
    "group_segments_by_size",
    "segments_in_range",
]
