"""The segments of one partition directory and its LEO (Kafka 3.x's ``LocalLog``).

Bookkeeping only: which segments exist, where the log ends, rolling, reading slices,
truncating and removing segments, flushing. Record validation, the leader epoch cache,
the log start offset and retention policy live in ``log.Log`` on top of this.
Removed segments go through ``SegmentDeleter`` (``file.delete.delay.ms``).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from kpo_broker.log.checkpoints import fsync_dir
from kpo_broker.log.config import LogConfig
from kpo_broker.log.deleter import SegmentDeleter
from kpo_broker.log.filerecords import FileSlice
from kpo_broker.log.names import CLEANED_SUFFIX, SWAP_SUFFIX
from kpo_broker.log.reads import floor_segment_position, read_slices
from kpo_broker.log.records import BatchHeader
from kpo_broker.log.segment import LogSegment


class LocalLog:
    """Ordered segments (never empty; the last is active) and the log end offset.

    Args:
        directory: the partition directory.
        config: the log config (segment size and age, index interval, delete delay).
        segments: loaded segments, oldest first.
        recovery_point: offset below which data is known to be fsynced.
    """

    def __init__(
        self, directory: Path, config: LogConfig, segments: list[LogSegment], recovery_point: int
    ) -> None:
        self.dir = directory
        self.config = config
        self._segments = segments
        self._log_end_offset = segments[-1].read_next_offset()
        self._recovery_point = min(recovery_point, self._log_end_offset)
        self._deleter = SegmentDeleter()
        self._closed = False

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        """Live segments, oldest first."""
        return tuple(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        """The last segment, which appends go to."""
        return self._segments[-1]

    @property
    def log_end_offset(self) -> int:
        """The LEO: offset after the last batch."""
        return self._log_end_offset

    @property
    def recovery_point(self) -> int:
        """Offset below which every byte has been fsynced."""
        return self._recovery_point

    @property
    def size_in_bytes(self) -> int:
        """Total size of the live segments' ``.log`` files."""
        return sum(segment.size for segment in self._segments)

    def append(
        self,
        data: bytes,
        headers: tuple[BatchHeader, ...],
        max_timestamp: int,
        now_ms: int,
    ) -> None:
        """Append validated batches with final offsets, rolling first if needed.

        Args:
            data: the batches, ``headers[0].base_offset >= log_end_offset``.
            headers: their headers, in order, non-empty.
            max_timestamp: largest batch ``maxTimestamp`` of the append (``segment.ms``).
            now_ms: current time in ms.
        """
        segment = self.active_segment
        if segment.should_roll(
            self.config, len(data), max_timestamp, headers[-1].last_offset, now_ms
        ):
            segment = self.roll(now_ms, headers[0].base_offset)
        segment.append(data, headers, self.config.index_interval_bytes)
        self._log_end_offset = headers[-1].next_offset

    def roll(self, now_ms: int, new_base_offset: int | None = None) -> LogSegment:
        """Start a new active segment at ``new_base_offset`` (the LEO by default).

        The old active segment gets its final time index entry. An empty active segment
        is kept if it already starts there, otherwise replaced.
        """
        base = self._log_end_offset if new_base_offset is None else new_base_offset
        active = self.active_segment
        if active.size == 0:
            if active.base_offset == base:
                return active
            self._segments.pop()
            active.delete()
        else:
            active.on_become_inactive()
        segment = LogSegment.open(self.dir, base, self.config, now_ms)
        self._segments.append(segment)
        return segment

    def read(
        self, start_offset: int, max_bytes: int, max_offset: int | None, min_one_message: bool
    ) -> tuple[FileSlice, ...]:
        """Return slices of whole batches from ``start_offset``; see ``reads.read_slices``."""
        return read_slices(self._segments, start_offset, max_bytes, max_offset, min_one_message)

    def truncate_to(self, offset: int, now_ms: int) -> None:
        """Remove the batch holding ``offset`` and everything after it (``offset`` < LEO).

        Segments starting after ``offset`` are removed; the LEO becomes the end of the
        remaining data. ``offset`` must not be below the first segment's base offset.
        """
        keep = floor_segment_position(self._segments, offset) + 1
        self.remove_segments(self._segments[keep:], now_ms)
        self.active_segment.truncate_to(offset)
        self._log_end_offset = self.active_segment.read_next_offset()
        self._recovery_point = min(self._recovery_point, self._log_end_offset)

    def truncate_fully_and_start_at(self, offset: int, now_ms: int) -> None:
        """Remove every segment and start empty at ``offset`` (LEO and recovery point)."""
        self.remove_segments(list(self._segments), now_ms)
        self._segments = [LogSegment.open(self.dir, offset, self.config, now_ms)]
        self._log_end_offset = offset
        self._recovery_point = offset

    def remove_segments(self, doomed: list[LogSegment], now_ms: int) -> None:
        """Take ``doomed`` out of the log and schedule their files for deletion.

        Callers never remove the only segment except in ``truncate_fully_and_start_at``.
        """
        ids = {id(segment) for segment in doomed}
        self._segments = [segment for segment in self._segments if id(segment) not in ids]
        self._deleter.schedule(doomed, now_ms, self.config.file_delete_delay_ms)

    def replace_segments(
        self, new_segments: list[LogSegment], old_segments: list[LogSegment], now_ms: int
    ) -> None:
        """Swap cleaned segments in for ``old_segments`` crash-safely (``replaceSegments``).

        ``new_segments`` are open under ``.cleaned`` names. Steps, each recoverable by
        ``loader.load_segments`` after a crash: rename the new segments' files to
        ``.swap`` (highest base offset first, ``.log`` first within a segment), take the old
        segments out of the log and rename their files ``.deleted`` (removed after
        ``file.delete.delay.ms``; reads in flight keep working), rename the ``.swap`` files
        to their final names, fsync the directory.

        Args:
            new_segments: the replacement segments; together they cover exactly the
                offsets of ``old_segments``.
            old_segments: consecutive live segments of this log.
            now_ms: current time in ms (the delete delay starts now).

        Raises:
            ValueError: an old segment is not (or no longer) part of this log.
        """
        live = {id(segment): position for position, segment in enumerate(self._segments)}
        positions = [live.get(id(segment)) for segment in old_segments]
        if any(position is None for position in positions):
            raise ValueError("a segment to replace is no longer part of the log")
        first = min(p for p in positions if p is not None)
        new_sorted = sorted(new_segments, key=lambda segment: segment.base_offset)
        for segment in reversed(new_sorted):
            segment.change_file_suffixes(CLEANED_SUFFIX, SWAP_SUFFIX)
        doomed = {id(segment) for segment in old_segments}
        kept = [segment for segment in self._segments if id(segment) not in doomed]
        self._segments = kept[:first] + new_sorted + kept[first:]
        self._deleter.schedule(old_segments, now_ms, self.config.file_delete_delay_ms)
        for segment in new_sorted:
            segment.change_file_suffixes(SWAP_SUFFIX, "")
        fsync_dir(self.dir)

    def purge_deleted_segments(self, now_ms: int) -> int:
        """Remove files of removed segments whose ``file.delete.delay.ms`` has passed."""
        return self._deleter.purge(now_ms)

    def flush(self, offset: int | None = None) -> None:
        """Fsync segments holding data in ``[recovery_point, offset)`` and advance the point.

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
        fsync_dir(self.dir)
        self._recovery_point = target

    def rename_dir(self, new_dir: Path) -> None:
        """Rename the partition directory to ``new_dir`` (Kafka's ``LocalLog.renameDir``).

        Segments, including those waiting for deletion, reopen their files under it.
        """
        os.replace(self.dir, new_dir)
        self.dir = new_dir
        for segment in self._segments:
            segment.update_parent_dir(new_dir)
        self._deleter.update_parent_dir(new_dir)

    def close(self) -> None:
        """Close every segment and remove files still waiting for deletion; idempotent."""
        if self._closed:
            return
        self._closed = True
        for segment in self._segments:
            segment.close()
        self._deleter.purge(None)

    def delete(self) -> None:
        """Close and remove the whole directory."""
        self.close()
        shutil.rmtree(self.dir, ignore_errors=True)
