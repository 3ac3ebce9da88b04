"""One partition's log: an ordered list of segments (Kafka's ``UnifiedLog``/``LocalLog``).

The log lives in ``<log dir>/<topic>-<partition>`` (seed 002 section 5.5). Appends go to
the last (active) segment, which is rolled by size, age or index capacity; reads locate
the segment by base offset and scan from its offset index. Offsets: the log start offset
is the first readable offset, the log end offset (LEO) the next offset to be written
(seed 003 section 6.1). Deleted segments are renamed ``*.deleted`` and their files kept
open for ``file.delete.delay.ms`` so in-flight ``sendfile`` transfers can finish.
Single-threaded: the broker calls it from one event loop.
"""

from __future__ import annotations

import logging
import shutil
import time
from pathlib import Path

from kpo_broker.log.checkpoints import fsync_dir
from kpo_broker.log.config import LogConfig
from kpo_broker.log.deleter import SegmentDeleter
from kpo_broker.log.epoch import LeaderEpochCache
from kpo_broker.log.errors import (
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    UnexpectedAppendOffsetError,
)
from kpo_broker.log.info import FetchDataInfo, LogAppendInfo, OffsetAndTimestamp
from kpo_broker.log.loader import load_segments
from kpo_broker.log.names import LEADER_EPOCH_CHECKPOINT, TopicPartition, parse_log_dir_name
from kpo_broker.log.reads import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    floor_segment_position,
    offset_for_timestamp,
    read_slices,
)
from kpo_broker.log.records import BatchHeader, assign_offsets
from kpo_broker.log.retention import SegmentSummary, deletable_segment_count
from kpo_broker.log.segment import LogSegment
from kpo_broker.log.validation import (
    summarize_append,
    validate_producer_batches,
    validate_replicated_batches,
)

__all__ = [
    "EARLIEST_LOCAL_TIMESTAMP",
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "FetchDataInfo",
    "Log",
    "LogAppendInfo",
    "LogConfig",
    "OffsetAndTimestamp",
]

_log = logging.getLogger(__name__)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class Log:
    """The log of one partition. Create with ``Log.open``.

    Raises (from every method): ``OSError`` when the disk fails.
    """

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        segments: list[LogSegment],
        log_start_offset: int,
        recovery_point: int,
        leader_epoch_cache: LeaderEpochCache,
    ) -> None:
        self._dir = directory
        self._tp = parse_log_dir_name(directory.name)
        self._config = config
        self._segments = segments
        self._log_end_offset = segments[-1].read_next_offset()
        self._log_start_offset = log_start_offset
        self._recovery_point = min(recovery_point, self._log_end_offset)
        self._epoch_cache = leader_epoch_cache
        self._deleter = SegmentDeleter()
        self._closed = False

    @classmethod
    def open(
        cls,
        directory: Path,
        config: LogConfig,
        recovery_point: int = 0,
        now_ms: int | None = None,
        log_start_offset: int = 0,
    ) -> Log:
        """Open (creating if needed) the log in ``directory`` and recover it.

        Args:
            directory: ``<log dir>/<topic>-<partition>``.
            config: the topic's log config.
            recovery_point: checkpointed offset below which data is flushed
                (``recovery-point-offset-checkpoint``); later data is CRC-checked.
            now_ms: current time in ms (wall clock if None).
            log_start_offset: checkpointed log start offset (``log-start-offset-checkpoint``);
                raised to the first segment's base offset if below it.

        Raises:
            LogDirectoryError: the directory name is not ``<topic>-<partition>``.
            CheckpointFormatError: the leader epoch checkpoint is malformed.
        """
        parse_log_dir_name(directory.name)
        now = _now_ms() if now_ms is None else now_ms
        directory.mkdir(parents=True, exist_ok=True)
        segments, _truncated = load_segments(
            directory, config, recovery_point, log_start_offset, now
        )
        cache = LeaderEpochCache(directory / LEADER_EPOCH_CHECKPOINT)
        log = cls(
            directory,
            config,
            segments,
            max(log_start_offset, segments[0].base_offset),
            recovery_point,
            cache,
        )
        if log.log_end_offset < log.log_start_offset:
            _log.warning("%s: LEO below the log start offset, starting afresh", directory)
            log.truncate_fully_and_start_at(log.log_start_offset)
        cache.truncate_from_end(log.log_end_offset)
        cache.truncate_from_start(log.log_start_offset)
        return log

    # ----------------------------------------------------------------- properties

    @property
    def dir(self) -> Path:
        """The partition directory."""
        return self._dir

    @property
    def topic_partition(self) -> TopicPartition:
        """Topic and partition, parsed from the directory name."""
        return self._tp

    @property
    def topic(self) -> str:
        """The topic name (may contain ``-`` and ``.``)."""
        return self._tp.topic

    @property
    def partition(self) -> int:
        """The partition index."""
        return self._tp.partition

    @property
    def config(self) -> LogConfig:
        """The current log config."""
        return self._config

    @property
    def log_start_offset(self) -> int:
        """First offset readable by fetches (raised by retention and DeleteRecords)."""
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        """The LEO: offset the next appended record will get."""
        return self._log_end_offset

    @property
    def recovery_point(self) -> int:
        """Offset below which every byte has been fsynced."""
        return self._recovery_point

    @property
    def size_in_bytes(self) -> int:
        """Total size of all live segments' ``.log`` files in bytes."""
        return sum(segment.size for segment in self._segments)

    @property
    def leader_epoch_cache(self) -> LeaderEpochCache:
        """The partition's leader epoch cache (``leader-epoch-checkpoint``)."""
        return self._epoch_cache

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        """Live segments, oldest first; the last is the active segment."""
        return tuple(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        """The segment appends go to."""
        return self._segments[-1]

    def update_config(self, config: LogConfig) -> None:
        """Apply a changed topic config (IncrementalAlterConfigs); affects future rolls."""
        self._config = config

    # ----------------------------------------------------------------- appends

    def append_as_leader(
        self, records: bytes, leader_epoch: int, now_ms: int | None = None
    ) -> LogAppendInfo:
        """Validate a producer's batches, assign offsets from the LEO and append them.

        Each batch gets the next offsets and ``partitionLeaderEpoch = leader_epoch``; the
        epoch cache records where ``leader_epoch`` started.

        Raises:
            CorruptRecordError, InvalidRecordError, RecordTooLargeError: see
                ``validate_producer_batches``.
            RecordBatchTooLargeError: the append is larger than ``segment.bytes``.
        """
        headers = validate_producer_batches(records, self._config.max_message_bytes)
        if not headers:
            return summarize_append((), 0)
        data, assigned = assign_offsets(records, self._log_end_offset, leader_epoch, False)
        return self._append(data, assigned, now_ms)

    def append_as_follower(self, records: bytes, now_ms: int | None = None) -> LogAppendInfo:
        """Append batches fetched from the leader, keeping their offsets and epochs.

        The epoch cache learns each new ``partitionLeaderEpoch`` at the batch's base offset.

        Raises:
            CorruptRecordError, RecordTooLargeError, OffsetsOutOfOrderError: see
                ``validate_replicated_batches``.
            UnexpectedAppendOffsetError: the first offset is below the LEO.
            RecordBatchTooLargeError: the append is larger than ``segment.bytes``.
        """
        headers = validate_replicated_batches(records, self._config.max_message_bytes)
        if not headers:
            return summarize_append((), 0)
        if headers[0].base_offset < self._log_end_offset:
            raise UnexpectedAppendOffsetError(
                f"{self._tp}: follower append starts at {headers[0].base_offset}, "
                f"below the LEO {self._log_end_offset}",
                headers[0].base_offset,
                headers[-1].last_offset,
            )
        return self._append(bytes(records), headers, now_ms)

    def _append(
        self, data: bytes, headers: tuple[BatchHeader, ...], now_ms: int | None
    ) -> LogAppendInfo:
        if len(data) > self._config.segment_bytes:
            raise RecordBatchTooLargeError(
                f"append of {len(data)} bytes exceeds segment.bytes {self._config.segment_bytes}"
            )
        info = summarize_append(headers, len(data))
        now = _now_ms() if now_ms is None else now_ms
        segment = self.active_segment
        if segment.should_roll(self._config, len(data), info.max_timestamp, info.last_offset, now):
            segment = self.roll(now, new_base_offset=info.first_offset)
        segment.append(data, headers, self._config.index_interval_bytes)
        for header in headers:
            self._epoch_cache.assign(header.partition_leader_epoch, header.base_offset)
        self._log_end_offset = headers[-1].next_offset
        return info

    def maybe_assign_epoch_start_offset(self, leader_epoch: int, start_offset: int) -> None:
        """Record that ``leader_epoch`` starts at ``start_offset`` (on becoming leader)."""
        self._epoch_cache.assign(leader_epoch, start_offset)

    def roll(self, now_ms: int | None = None, new_base_offset: int | None = None) -> LogSegment:
        """Start a new active segment at ``new_base_offset`` (the LEO by default).

        An empty active segment is reused if it already starts there, or replaced.
        """
        now = _now_ms() if now_ms is None else now_ms
        base = self._log_end_offset if new_base_offset is None else new_base_offset
        active = self.active_segment
        if active.size == 0:
            if active.base_offset == base:
                return active
            self._segments.pop()
            active.delete()
        else:
            active.on_become_inactive()
        segment = LogSegment.open(self._dir, base, self._config, now)
        self._segments.append(segment)
        return segment

    # ----------------------------------------------------------------- reads

    def read(
        self,
        start_offset: int,
        max_bytes: int,
        max_offset: int | None = None,
        min_one_message: bool = True,
    ) -> FetchDataInfo:
        """Read whole batches starting with the batch that contains ``start_offset``.

        Args:
            start_offset: fetch offset, within ``[log_start_offset, LEO]``.
            max_bytes: byte budget (the partition's ``max_bytes`` in a Fetch request).
            max_offset: exclusive upper bound, e.g. the high watermark for consumers; a
                batch ending at or after it is not returned. None reads up to the LEO.
            min_one_message: return the first batch even when it exceeds ``max_bytes``
                (KIP-74), so consumers always make progress.

        Returns:
            Slices of possibly several segments; empty when reading at the LEO or bound.

        Raises:
            OffsetOutOfRangeError: ``start_offset`` is outside ``[log_start_offset, LEO]``.
        """
        if start_offset < self._log_start_offset or start_offset > self._log_end_offset:
            raise OffsetOutOfRangeError(
                f"{self._tp}: offset {start_offset} is outside "
                f"[{self._log_start_offset}, {self._log_end_offset}]"
            )
        if start_offset == self._log_end_offset or (
            max_offset is not None and start_offset >= max_offset
        ):
            return FetchDataInfo(start_offset)
        slices = read_slices(self._segments, start_offset, max_bytes, max_offset, min_one_message)
        return FetchDataInfo(start_offset, slices)

    def fetch_offset_by_timestamp(self, timestamp_ms: int) -> OffsetAndTimestamp | None:
        """Answer ListOffsets: the first record whose timestamp is ``>= timestamp_ms``.

        Searches the time index, then the offset index, then the records (KIP-33).
        Special values (see ``reads.offset_for_timestamp``): -2 earliest, -1 latest,
        -3 max timestamp, -4 earliest local.

        Returns:
            ``(offset, timestamp)``, or None when no record is that recent.

        Raises:
            CorruptRecordError, UnsupportedCompressionTypeError: a batch's records
                cannot be decoded.
        """
        return offset_for_timestamp(
            self._segments, timestamp_ms, self._log_start_offset, self._log_end_offset
        )

    def max_timestamp_and_offset(self) -> OffsetAndTimestamp | None:
        """Return ``(offset, timestamp)`` of the largest timestamp (ListOffsets -3, KIP-734).

        The offset is the last offset of the batch holding it; None if no batch has one.
        """
        return self.fetch_offset_by_timestamp(MAX_TIMESTAMP)

    # ----------------------------------------------------------------- truncation and retention

    def truncate_to(self, offset: int) -> bool:
        """Truncate so the log ends before ``offset`` (follower truncation, KIP-101).

        Batch granularity, as in Kafka: the batch containing ``offset`` is removed whole.
        The LEO becomes ``offset`` when it is a batch boundary, else the base offset of the
        removed batch (Kafka would report ``offset`` even then; this log keeps the LEO
        equal to where the data really ends). The epoch cache, recovery point and log
        start offset are lowered to the new LEO if above it.

        Returns:
            True if anything was removed (False when ``offset >= LEO``).
        """
        if offset < 0:
            raise ValueError(f"cannot truncate to negative offset {offset}")
        if offset >= self._log_end_offset:
            return False
        if offset < self._segments[0].base_offset:
            self.truncate_fully_and_start_at(offset)
            return True
        keep = floor_segment_position(self._segments, offset) + 1
        self._schedule_delete(self._segments[keep:], _now_ms())
        del self._segments[keep:]
        active = self.active_segment
        active.truncate_to(offset)
        self._log_end_offset = active.read_next_offset()
        self._log_start_offset = min(self._log_start_offset, self._log_end_offset)
        self._recovery_point = min(self._recovery_point, self._log_end_offset)
        self._epoch_cache.truncate_from_end(self._log_end_offset)
        return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and restart the log empty at ``offset``.

        Used when a follower's log is entirely behind the leader's log start offset. The
        LEO, log start offset and recovery point all become ``offset``; the epoch cache is
        cleared.
        """
        now = _now_ms()
        self._schedule_delete(self._segments, now)
        self._segments = [LogSegment.open(self._dir, offset, self._config, now)]
        self._log_end_offset = offset
        self._log_start_offset = offset
        self._recovery_point = offset
        self._epoch_cache.clear()

    def maybe_increment_log_start_offset(self, new_offset: int, high_watermark: int) -> bool:
        """Raise the log start offset (DeleteRecords, KIP-107); never lowers it.

        Raises:
            OffsetOutOfRangeError: ``new_offset`` is above the high watermark.
        """
        if new_offset > high_watermark:
            raise OffsetOutOfRangeError(
                f"{self._tp}: log start offset {new_offset} above high watermark {high_watermark}"
            )
        if new_offset <= self._log_start_offset:
            return False
        self._log_start_offset = new_offset
        self._epoch_cache.truncate_from_start(new_offset)
        return True

    def delete_old_segments(self, now_ms: int, high_watermark: int) -> int:
        """Apply retention (``retention.ms``, ``retention.bytes``, log start offset).

        Never deletes the active segment or a segment holding offsets at or after
        ``high_watermark``. Advances the log start offset to the first remaining segment.
        Also removes files of earlier deletions whose ``file.delete.delay.ms`` has passed.

        Returns:
            The number of segments deleted.
        """
        self._deleter.purge(now_ms)
        summaries = [
            SegmentSummary(s.base_offset, s.size, s.largest_timestamp) for s in self._segments
        ]
        count = deletable_segment_count(
            summaries, self._config, now_ms, high_watermark, self._log_start_offset
        )
        if count == 0:
            return 0
        doomed = self._segments[:count]
        del self._segments[:count]
        self._schedule_delete(doomed, now_ms)
        new_start = max(self._log_start_offset, self._segments[0].base_offset)
        if new_start > self._log_start_offset:
            self._log_start_offset = new_start
            self._epoch_cache.truncate_from_start(new_start)
        _log.info("%s: retention deleted %d segments", self._tp, count)
        return count

    def _schedule_delete(self, segments: list[LogSegment], now_ms: int) -> None:
        self._deleter.schedule(segments, now_ms, self._config.file_delete_delay_ms)

    def purge_deleted_segments(self, now_ms: int) -> int:
        """Remove files of deleted segments whose ``file.delete.delay.ms`` has passed.

        Returns:
            The number of segments whose files were removed.
        """
        return self._deleter.purge(now_ms)

    # ----------------------------------------------------------------- durability and lifecycle

    def flush(self, offset: int | None = None) -> None:
        """Fsync the segments holding data in ``[recovery_point, offset)``; advance the point.

        Args:
            offset: flush up to this offset (the LEO by default).
        """
        target = self._log_end_offset if offset is None else min(offset, self._log_end_offset)
        if target <= self._recovery_point:
            return
        for position, segment in enumerate(self._segments):
            following = self._segments[position + 1] if position + 1 < len(self._segments) else None
            if following is not None and following.base_offset <= self._recovery_point:
                continue
            if segment.base_offset >= target:
                break
            segment.flush()
        fsync_dir(self._dir)
        self._recovery_point = target

    def close(self) -> None:
        """Close every segment (writing final time index entries); idempotent.

        Files of deleted segments still waiting for ``file.delete.delay.ms`` are removed now.
        """
        if self._closed:
            return
        self._closed = True
        for segment in self._segments:
            segment.close()
        self._deleter.purge(None)

    def delete(self) -> None:
        """Close the log and remove its directory with everything in it."""
        self.close()
        shutil.rmtree(self._dir, ignore_errors=True)
