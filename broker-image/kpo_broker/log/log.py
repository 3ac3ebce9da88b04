"""One partition's log (Kafka's ``UnifiedLog``) in ``<log dir>/<topic>-<partition>``.

Offsets: the log start offset is the first readable offset, the log end offset (LEO)
the next offset to be written (Kafka's ``UnifiedLog.logStartOffset`` and
``logEndOffset``; the high watermark is the partition's, not the log's). Segment
bookkeeping is in ``local_log.LocalLog``. Single-threaded: one event loop drives it.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Concatenate, ParamSpec, TypeVar

from kpo_broker.log.config import LogConfig
from kpo_broker.log.epoch import LeaderEpochCache
from kpo_broker.log.errors import (
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    UnexpectedAppendOffsetError,
)
from kpo_broker.log.info import FetchDataInfo, LogAppendInfo, OffsetAndTimestamp
from kpo_broker.log.loader import load_segments
from kpo_broker.log.local_log import LocalLog
from kpo_broker.log.names import LEADER_EPOCH_CHECKPOINT, parse_log_dir_name
from kpo_broker.log.producer_state import ProducerStateManager
from kpo_broker.log.reads import MAX_TIMESTAMP, offset_for_timestamp
from kpo_broker.log.records import BatchHeader, assign_offsets
from kpo_broker.log.retention import SegmentSummary, deletable_segment_count
from kpo_broker.log.segment import LogSegment
from kpo_broker.log.validation import (
    summarize_append,
    validate_producer_batches,
    validate_replicated_batches,
)
from kpo_kafka.topic_partition import TopicPartition

# Re-exported for callers that take everything about a Log from this module.

_log = logging.getLogger(__name__)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _locked(method: Callable[Concatenate[Log, _P], _R]) -> Callable[Concatenate[Log, _P], _R]:
    """Run ``method`` holding the log's lock (Kafka's ``UnifiedLog.lock``)."""

    @functools.wraps(method)
    def wrapper(self: Log, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        with self.lock:
            return method(self, *args, **kwargs)

    return wrapper


class LogCleaningAbortedError(Exception):
    """The log changed under a cleaning (truncated, renamed, closed): the swap is refused."""


class Log:
    """The log of one partition. Create with ``Log.open``.

    Adds to ``LocalLog`` (segments, LEO, recovery point): batch validation and offset
    assignment, the leader epoch cache, the idempotent producer state (KIP-98), the log
    start offset and retention; fetch reads and timestamp lookups (over the segment
    read functions of :mod:`kpo_broker.log.reads`). Every method may raise ``OSError``
    when the disk fails.

    Threads: the event loop appends, reads and truncates; retention and the log cleaner
    run in worker threads. Every change of the segment list holds ``lock`` (appends,
    rolls, truncation, retention, the cleaner's swap, renames, close), as Kafka's
    ``UnifiedLog.lock``. Reads take a snapshot of the segment list and need no lock: a
    segment swapped out stays readable until ``file.delete.delay.ms`` has passed.
    """

    def __init__(
        self, local: LocalLog, log_start_offset: int, leader_epoch_cache: LeaderEpochCache
    ) -> None:
        self._local = local
        self._tp = parse_log_dir_name(local.dir.name)
        self._log_start_offset = log_start_offset
        self._epoch_cache = leader_epoch_cache
        self._producer_state = ProducerStateManager()
        self.last_flush_ms = _now_ms()
        self.lock = threading.RLock()
        self._cleaner_fence = 0
        self._lowest_truncation: int | None = None

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

        The producer state is rebuilt from the batch headers (there are no snapshot files).

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
            CorruptRecordError: a batch header below the recovery point is malformed.
        """
        parse_log_dir_name(directory.name)
        now = _now_ms() if now_ms is None else now_ms
        directory.mkdir(parents=True, exist_ok=True)
        segments, _truncated = load_segments(
            directory, config, recovery_point, log_start_offset, now
        )
        cache = LeaderEpochCache(directory / LEADER_EPOCH_CHECKPOINT)
        local = LocalLog(directory, config, segments, recovery_point)
        log = cls(local, max(log_start_offset, segments[0].base_offset), cache)
        if log.log_end_offset < log.log_start_offset:
            _log.warning("%s: LEO below the log start offset, starting afresh", directory)
            log.truncate_fully_and_start_at(log.log_start_offset)
        cache.truncate_from_end(log.log_end_offset)
        cache.truncate_from_start(log.log_start_offset)
        log._load_producer_state()
        return log

    # ----------------------------------------------------------------- properties

    @property
    def dir(self) -> Path:
        """The partition directory."""
        return self._local.dir

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
        return self._local.config

    @property
    def log_start_offset(self) -> int:
        """First offset readable by fetches (raised by retention and DeleteRecords)."""
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        """The LEO: offset the next appended record will get."""
        return self._local.log_end_offset

    @property
    def recovery_point(self) -> int:
        """Offset below which every byte has been fsynced."""
        return self._local.recovery_point

    @property
    def size_in_bytes(self) -> int:
        """Total size of all live segments' ``.log`` files in bytes."""
        return self._local.size_in_bytes

    @property
    def leader_epoch_cache(self) -> LeaderEpochCache:
        """The partition's leader epoch cache (``leader-epoch-checkpoint``)."""
        return self._epoch_cache

    @property
    def producer_state(self) -> ProducerStateManager:
        """The idempotent producers' epochs and last batches (read; the log updates it)."""
        return self._producer_state

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        """Live segments, oldest first; the last is the active segment."""
        return self._local.segments

    @property
    def active_segment(self) -> LogSegment:
        """The segment appends go to."""
        return self._local.active_segment

    @_locked
    def update_config(self, config: LogConfig) -> None:
        """Apply a changed topic config (IncrementalAlterConfigs); affects future rolls."""
        self._local.config = config

    # ----------------------------------------------------------------- appends

    @_locked
    def append_as_leader(
        self, records: bytes, leader_epoch: int, now_ms: int | None = None
    ) -> LogAppendInfo:
        """Validate a producer's batches, assign offsets from the LEO and append them.

        Each batch gets the next offsets and ``partitionLeaderEpoch = leader_epoch``, and
        its ``maxTimestamp`` per ``message.timestamp.type``; the epoch cache records where
        ``leader_epoch`` started. A retry of batches already
        appended (KIP-98) appends nothing and returns their original offsets with
        ``duplicate=True``.

        Raises:
            CorruptRecordError, InvalidRecordError, RecordTooLargeError,
                UnsupportedCompressionTypeError: see ``validate_producer_batches``.
            InvalidRecordError, InvalidProducerEpochError, OutOfOrderSequenceError:
                idempotent producer checks, see ``ProducerStateManager.check_leader_append``.
            RecordBatchTooLargeError: the append is larger than ``segment.bytes``.
        """
        now = _now_ms() if now_ms is None else now_ms
        validated = validate_producer_batches(records, self.config, now, str(self._tp))
        if not validated.headers:
            return summarize_append((), 0)
        duplicate = self._producer_state.check_leader_append(validated.headers)
        if duplicate is not None:
            return duplicate
        data, assigned = assign_offsets(validated.records, self.log_end_offset, leader_epoch, False)
        info = self._append(data, assigned, now)
        return dataclasses.replace(info, log_append_time=validated.log_append_time)

    @_locked
    def append_as_follower(self, records: bytes, now_ms: int | None = None) -> LogAppendInfo:
        """Append batches fetched from the leader, keeping their offsets and epochs.

        The epoch cache learns each new ``partitionLeaderEpoch`` at the batch's base offset;
        the producer state records the batches without checking them.

        Raises:
            CorruptRecordError, RecordTooLargeError, OffsetsOutOfOrderError: see
                ``validate_replicated_batches``.
            UnexpectedAppendOffsetError: the first offset is below the LEO.
            RecordBatchTooLargeError: one batch is larger than ``segment.bytes``.

        A fetch may return more than ``segment.bytes`` (the leader's read continues into
        later segments, unlike Kafka's); such an append is split into runs of whole
        batches that each fit a segment, so the follower rolls as the leader did.
        """
        headers = validate_replicated_batches(records, self.config.max_message_bytes)
        if not headers:
            return summarize_append((), 0)
        if headers[0].base_offset < self.log_end_offset:
            raise UnexpectedAppendOffsetError(
                f"{self._tp}: follower append starts at {headers[0].base_offset}, "
                f"below the LEO {self.log_end_offset}",
                headers[0].base_offset,
                headers[-1].last_offset,
            )
        data = bytes(records)
        if len(data) <= self.config.segment_bytes:
            return self._append(data, headers, now_ms)
        runs: list[tuple[int, int, int, int]] = []  # byte start, byte end, header range
        start = end = first = 0
        for index, header in enumerate(headers):
            if end - start + header.size_in_bytes > self.config.segment_bytes and end > start:
                runs.append((start, end, first, index))
                start, first = end, index
            end += header.size_in_bytes
        runs.append((start, end, first, len(headers)))
        for low, high, first_header, last_header in runs:
            self._append(data[low:high], headers[first_header:last_header], now_ms)
        return summarize_append(headers, len(data))

    def _append(
        self, data: bytes, headers: tuple[BatchHeader, ...], now_ms: int | None
    ) -> LogAppendInfo:
        if len(data) > self.config.segment_bytes:
            raise RecordBatchTooLargeError(
                f"append of {len(data)} bytes exceeds segment.bytes {self.config.segment_bytes}"
            )
        info = summarize_append(headers, len(data))
        self._local.append(
            data, headers, info.max_timestamp, _now_ms() if now_ms is None else now_ms
        )
        for header in headers:
            self._epoch_cache.assign(header.partition_leader_epoch, header.base_offset)
        self._producer_state.update(headers)
        if self.log_end_offset - self.recovery_point >= self.config.flush_messages:
            self.flush()  # flush.messages: Kafka's UnifiedLog.append
        return info

    @_locked
    def roll(self, now_ms: int | None = None) -> LogSegment:
        """Start a new active segment at the LEO (an empty active segment is kept)."""
        return self._local.roll(_now_ms() if now_ms is None else now_ms)

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
        if not self._log_start_offset <= start_offset <= self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"{self._tp}: offset {start_offset} is outside "
                f"[{self._log_start_offset}, {self.log_end_offset}]"
            )
        if start_offset == self.log_end_offset or (
            max_offset is not None and start_offset >= max_offset
        ):
            return FetchDataInfo(start_offset)
        slices = self._local.read(start_offset, max_bytes, max_offset, min_one_message)
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
            self._local.segments, timestamp_ms, self._log_start_offset, self.log_end_offset
        )

    def max_timestamp_and_offset(self) -> OffsetAndTimestamp | None:
        """Return ``(offset, timestamp)`` of the largest timestamp (ListOffsets -3, KIP-734).

        The offset is the last offset of the batch holding it; None if no batch has one.
        """
        return self.fetch_offset_by_timestamp(MAX_TIMESTAMP)

    # ----------------------------------------------------------------- truncation and retention

    @_locked
    def truncate_to(self, offset: int) -> bool:
        """Truncate so the log ends before ``offset`` (follower truncation, KIP-101).

        Batch granularity, as in Kafka: the batch containing ``offset`` is removed whole.
        The LEO becomes ``offset`` when it is a batch boundary, else the base offset of the
        removed batch (Kafka would report ``offset`` even then; this log keeps the LEO
        equal to where the data really ends). The epoch cache, recovery point and log
        start offset are lowered to the new LEO if above it; the producer state forgets
        the removed batches (rebuilt from the log if a producer lost all cached ones).

        Returns:
            True if anything was removed (False when ``offset >= LEO``).

        Raises:
            ValueError: ``offset`` is negative.
        """
        if offset < 0:
            raise ValueError(f"cannot truncate to negative offset {offset}")
        if offset >= self.log_end_offset:
            return False
        if offset < self._local.segments[0].base_offset:
            self.truncate_fully_and_start_at(offset)
            return True
        self._local.truncate_to(offset, _now_ms())
        self._note_truncation(self.log_end_offset)
        self._log_start_offset = min(self._log_start_offset, self.log_end_offset)
        self._epoch_cache.truncate_from_end(self.log_end_offset)
        if not self._producer_state.truncate_to(self.log_end_offset):
            self._load_producer_state()
        return True

    @_locked
    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and restart the log empty at ``offset``.

        Used when a follower's log is entirely behind the leader's log start offset. The
        LEO, log start offset and recovery point all become ``offset``; the epoch cache and
        the producer state are cleared.
        """
        self._local.truncate_fully_and_start_at(offset, _now_ms())
        self._note_truncation(offset)
        self._log_start_offset = offset
        self._epoch_cache.clear()
        self._producer_state.clear()

    def _note_truncation(self, offset: int) -> None:
        self._cleaner_fence += 1
        if self._lowest_truncation is None or offset < self._lowest_truncation:
            self._lowest_truncation = offset

    # ----------------------------------------------------------------- log cleaner support

    @property
    def cleaner_fence(self) -> int:
        """Changes whenever the log is truncated, renamed, closed or loses segments to retention.

        A cleaning that began under another value is aborted (Kafka aborts the cleaning of
        a log being truncated or deleted, ``LogCleanerManager.abortCleaning``).
        """
        return self._cleaner_fence

    @_locked
    def take_lowest_truncation(self) -> int | None:
        """Return the lowest offset the log was truncated to since the last call, and reset.

        The log cleaner lowers its ``cleaner-offset-checkpoint`` entry to it (Kafka's
        ``LogCleaner.maybeTruncateCheckpoint``). None if there was no truncation.
        """
        lowest, self._lowest_truncation = self._lowest_truncation, None
        return lowest

    @_locked
    def last_offsets_of_active_producers(self) -> dict[int, int]:
        """Map producer id -> last offset of its latest batch (``lastRecordsOfActiveProducers``).

        The cleaner keeps those batches, emptied if need be, so the producers' sequence
        numbers and epochs survive compaction and the producer state rebuilt on open.
        """
        return {
            pid: entry.last_offset
            for pid, entry in self._producer_state.producers.items()
            if entry.last_offset >= 0
        }

    @_locked
    def replace_segments(
        self, new_segments: list[LogSegment], old_segments: list[LogSegment], fence: int
    ) -> None:
        """Swap the cleaner's ``.cleaned`` segments in for ``old_segments`` (see ``LocalLog``).

        Args:
            new_segments: segments opened with the ``.cleaned`` suffix, flushed.
            old_segments: the consecutive live segments they replace (same offsets).
            fence: ``cleaner_fence`` when the cleaning began.

        Raises:
            LogCleaningAbortedError: the log was truncated, renamed or closed since, or
                an old segment was removed (retention); nothing was changed.
        """
        if fence != self._cleaner_fence:
            raise LogCleaningAbortedError(f"{self._tp} changed while being cleaned")
        live = {id(segment) for segment in self._local.segments}
        if any(id(segment) not in live for segment in old_segments):
            raise LogCleaningAbortedError(f"{self._tp}: a cleaned segment was removed meanwhile")
        self._local.replace_segments(new_segments, old_segments, _now_ms())

    def _load_producer_state(self) -> None:
        """Rebuild the producer state from every segment's batch headers (records unread)."""
        headers = (h for s in self._local.segments for _, h in s.records.batches_from(0))
        self._producer_state.rebuild(headers, self._log_start_offset)

    @_locked
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
        self._producer_state.truncate_head(new_offset)
        return True

    @_locked
    def delete_old_segments(self, now_ms: int, high_watermark: int) -> int:
        """Apply retention (``retention.ms``, ``retention.bytes``, log start offset).

        Never deletes the active segment or a segment holding offsets at or after
        ``high_watermark``. Advances the log start offset to the first remaining segment.
        Also removes files of earlier deletions whose ``file.delete.delay.ms`` has passed.

        Returns:
            The number of segments deleted.
        """
        self._local.purge_deleted_segments(now_ms)
        segments = self._local.segments
        summaries = [SegmentSummary(s.base_offset, s.size, s.largest_timestamp) for s in segments]
        count = deletable_segment_count(
            summaries, self.config, now_ms, high_watermark, self._log_start_offset
        )
        if count == 0:
            return 0
        self._cleaner_fence += 1
        self._local.remove_segments(list(segments[:count]), now_ms)
        new_start = max(self._log_start_offset, segments[count].base_offset)
        if new_start > self._log_start_offset:
            self._log_start_offset = new_start
            self._epoch_cache.truncate_from_start(new_start)
            self._producer_state.truncate_head(new_start)
        _log.info("%s: retention deleted %d segments", self._tp, count)
        return count

    @_locked
    def purge_deleted_segments(self, now_ms: int) -> int:
        """Remove files of deleted segments whose ``file.delete.delay.ms`` has passed.

        Returns:
            The number of segments whose files were removed.
        """
        return self._local.purge_deleted_segments(now_ms)

    # ----------------------------------------------------------------- durability and lifecycle

    @_locked
    def flush(self, offset: int | None = None) -> None:
        """Fsync data in ``[recovery_point, offset)`` (LEO by default); advance the point."""
        self._local.flush(offset)
        self.last_flush_ms = _now_ms()

    def flush_if_due(self, now_ms: int) -> bool:
        """Fsync if the last fsync is at least ``flush.ms`` old and data is unflushed.

        Kafka's ``LogManager.flushDirtyLogs`` check for one log.

        Returns:
            True if the log was flushed.
        """
        if self.recovery_point >= self.log_end_offset:
            return False
        if now_ms - self.last_flush_ms < self.config.flush_ms:
            return False
        self.flush()
        return True

    @_locked
    def close(self) -> None:
        """Close every segment (writing final time index entries); idempotent.

        Files of deleted segments still waiting for ``file.delete.delay.ms`` are removed now.
        """
        self._cleaner_fence += 1
        self._local.close()

    @_locked
    def rename_dir(self, new_dir: Path) -> None:
        """Rename the partition directory to ``new_dir`` (e.g. ``-delete``), keeping it usable.

        Kafka's ``UnifiedLog.renameDir``: segment files are reopened under the new name.
        The topic partition stays the one parsed when the log was opened.
        """
        self._cleaner_fence += 1
        self._local.rename_dir(new_dir)

    @_locked
    def delete(self) -> None:
        """Close the log and remove its directory with everything in it."""
        self._cleaner_fence += 1
        self._local.delete()
