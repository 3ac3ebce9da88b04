"""One log segment: a ``.log`` file plus its offset and time indexes (Kafka's ``LogSegment``).

Index entries are added while appending or recovering, one per batch once more than
``index.interval.bytes`` have been written since the previous entry. The offset index
entry is ``(base offset of the batch, its position)``; Kafka stores the batch's last
offset instead, which is equally correct but makes lookups scan one batch more. The time
index entry is ``(largest timestamp so far, last offset of the batch holding it)``.
"""

from __future__ import annotations

import os
import random
from collections.abc import Sequence
from pathlib import Path

from kpo_broker.log.config import LogConfig
from kpo_broker.log.errors import CorruptRecordError
from kpo_broker.log.filerecords import FileRecords, FileSlice
from kpo_broker.log.index import NO_TIMESTAMP, OffsetIndex, TimeIndex
from kpo_broker.log.info import OffsetAndTimestamp
from kpo_broker.log.names import (
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    offset_file_name,
)
from kpo_broker.log.records import BatchHeader, find_timestamp_in_batch

_MAX_RELATIVE_OFFSET = 2**31 - 1


def random_segment_jitter(config: LogConfig) -> int:
    """Draw a segment's roll jitter in ms, in ``[0, min(segment.jitter.ms, segment.ms))``.

    Kafka's ``LogConfig.randomSegmentJitter``; 0 when ``segment.jitter.ms`` is 0.
    """
    if config.segment_jitter_ms <= 0:
        return 0
    return random.randrange(min(config.segment_jitter_ms, config.segment_ms))


class LogSegment:
    """A segment whose file names start with ``base_offset`` (20 digits).

    Use ``LogSegment.open``. Not thread-safe: the broker drives it from one event loop.
    Holds at most one descriptor, its ``.log`` file's, and only while the process-wide
    ``SegmentFileCache`` keeps it open; the indexes hold none (see ``index.py``).
    """

    def __init__(
        self,
        base_offset: int,
        records: FileRecords,
        offset_index: OffsetIndex,
        time_index: TimeIndex,
        created_ms: int,
        indexes_were_missing: bool,
    ) -> None:
        self.base_offset = base_offset
        self.records = records
        self.offset_index = offset_index
        self.time_index = time_index
        self.created_ms = created_ms
        self.indexes_were_missing = indexes_were_missing
        self._bytes_since_last_index_entry = 0
        self._rolling_based_timestamp: int | None = None
        self.max_timestamp_so_far = NO_TIMESTAMP
        self.offset_of_max_timestamp_so_far = base_offset
        self._closed = False
        self.roll_jitter_ms = 0
        self._load_max_timestamp()

    @classmethod
    def open(
        cls,
        directory: Path,
        base_offset: int,
        config: LogConfig,
        now_ms: int,
        file_suffix: str = "",
    ) -> LogSegment:
        """Open (or create) the segment files ``<base_offset>.log/.index/.timeindex``.

        Indexes are read as found; call ``check_indexes`` or ``recover`` before trusting
        them. ``now_ms`` is the creation time used by ``segment.ms`` when the segment
        holds no timestamps. ``file_suffix`` is appended to the three names, e.g.
        ``.cleaned`` for a segment the log cleaner writes (Kafka's ``LogSegment.open``).
        """
        index_path = directory / (offset_file_name(base_offset, INDEX_SUFFIX) + file_suffix)
        time_index_path = directory / (
            offset_file_name(base_offset, TIME_INDEX_SUFFIX) + file_suffix
        )
        missing = not index_path.exists() or not time_index_path.exists()
        segment = cls(
            base_offset,
            FileRecords(directory / (offset_file_name(base_offset, LOG_SUFFIX) + file_suffix)),
            OffsetIndex(index_path, base_offset, config.segment_index_bytes),
            TimeIndex(time_index_path, base_offset, config.segment_index_bytes),
            now_ms,
            missing,
        )
        segment.roll_jitter_ms = random_segment_jitter(config)
        return segment

    @property
    def size(self) -> int:
        """Size of the ``.log`` file in bytes."""
        return self.records.size

    @property
    def largest_timestamp(self) -> int:
        """Largest batch timestamp in ms, or the file's mtime if there is none (retention)."""
        if self.max_timestamp_so_far >= 0:
            return self.max_timestamp_so_far
        return self.records.last_modified_ms

    def _load_max_timestamp(self) -> None:
        """Set the max timestamp from the last time index entry plus the unindexed tail."""
        last = self.time_index.last_entry
        self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far = last
        start = self.offset_index.last_entry.position
        if start > self.records.size:
            return  # a corrupt index; check_indexes will report it
        try:
            for _position, header in self.records.batches_from(start):
                self._observe_timestamp(header)
        except CorruptRecordError:
            return  # a torn tail; recovery will rescan

    def _observe_timestamp(self, header: BatchHeader) -> None:
        if header.max_timestamp > self.max_timestamp_so_far:
            self.max_timestamp_so_far = header.max_timestamp
            self.offset_of_max_timestamp_so_far = header.last_offset

    def _index_batch(self, header: BatchHeader, position: int, index_interval_bytes: int) -> None:
        """Track the batch's timestamp and add index entries when the interval is passed."""
        self._observe_timestamp(header)
        if self._bytes_since_last_index_entry > index_interval_bytes:
            if not self.offset_index.is_full and not self.time_index.is_full:
                self.offset_index.append(header.base_offset, position)
                self.time_index.maybe_append(
                    self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far
                )
            self._bytes_since_last_index_entry = 0
        self._bytes_since_last_index_entry += header.size_in_bytes

    def can_convert_to_relative_offset(self, offset: int) -> bool:
        """Tell whether ``offset - base_offset`` fits the indexes' int32 relative offsets."""
        return 0 <= offset - self.base_offset <= _MAX_RELATIVE_OFFSET

    def append(
        self, records: bytes, headers: Sequence[BatchHeader], index_interval_bytes: int
    ) -> None:
        """Append validated batches with assigned offsets and update the indexes.

        Args:
            records: whole v2 batches, offsets already assigned.
            headers: their headers, in order (as returned by ``assign_offsets``).
            index_interval_bytes: ``index.interval.bytes`` of the log.
        """
        position = self.records.append(records)
        for header in headers:
            self._index_batch(header, position, index_interval_bytes)
            position += header.size_in_bytes
        self._write_pending_index_entries()

    def _write_pending_index_entries(self) -> None:
        self.offset_index.write_pending()
        self.time_index.write_pending()

    def read(
        self, start_offset: int, max_size: int, max_offset: int | None, min_one_message: bool
    ) -> FileSlice | None:
        """Return whole batches from the batch containing ``start_offset``.

        Args:
            start_offset: the first offset wanted.
            max_size: byte budget; batches that would exceed it are left out.
            max_offset: exclusive bound; a batch whose last offset is ``>=`` it is left
                out (the high watermark for consumer fetches). None for no bound.
            min_one_message: return the first batch even if larger than ``max_size``.

        Returns:
            None if no batch of this segment ends at or after ``start_offset``; otherwise a
            slice, possibly of size 0 when the first batch is excluded by the bounds.
        """
        start = self.offset_index.lookup(start_offset).position
        first_position: int | None = None
        total = 0
        for position, header in self.records.batches_from(start):
            if first_position is None:
                if header.last_offset < start_offset:
                    continue
                first_position = position
            if max_offset is not None and header.last_offset >= max_offset:
                break
            if total + header.size_in_bytes > max_size and not (total == 0 and min_one_message):
                break
            total += header.size_in_bytes
        if first_position is None:
            return None
        return self.records.slice(first_position, total)

    def read_next_offset(self) -> int:
        """Return the offset after the last batch (the base offset if empty).

        Raises:
            CorruptRecordError: the tail of an unrecovered segment is torn or malformed.
        """
        next_offset = self.base_offset
        for _position, header in self.records.batches_from(self.offset_index.last_entry.position):
            next_offset = header.next_offset
        return next_offset

    def first_batch_header(self) -> BatchHeader | None:
        """Header of the segment's first batch, None if the segment is empty."""
        for _position, header in self.records.batches_from(0):
            return header
        return None

    def find_offset_by_timestamp(
        self, target_timestamp: int, min_offset: int
    ) -> OffsetAndTimestamp | None:
        """Return the first record at or after ``min_offset`` with timestamp >= target.

        Looks up the time index, then the offset index, then scans batches whose
        ``maxTimestamp`` reaches the target and decodes their records (KIP-33).
        """
        entry = self.time_index.lookup(target_timestamp)
        start = self.offset_index.lookup(max(entry.offset, min_offset)).position
        for position, header in self.records.batches_from(start):
            if header.max_timestamp < target_timestamp or header.last_offset < min_offset:
                continue
            batch = self.records.pread(position, header.size_in_bytes)
            found = find_timestamp_in_batch(batch, target_timestamp, min_offset)
            if found is not None:
                return OffsetAndTimestamp(*found)
        return None

    def time_waited_for_roll(self, now_ms: int, max_timestamp_in_messages: int) -> int:
        """Ms since the segment started, for ``segment.ms``.

        Measured from the first batch's max timestamp to the incoming batches' max
        timestamp, or from the segment's creation to ``now_ms`` if there is no timestamp.
        """
        if self._rolling_based_timestamp is None and self.size > 0:
            first = self.first_batch_header()
            self._rolling_based_timestamp = first.max_timestamp if first else None
        if self._rolling_based_timestamp is not None and self._rolling_based_timestamp >= 0:
            return max_timestamp_in_messages - self._rolling_based_timestamp
        return now_ms - self.created_ms

    def should_roll(
        self,
        config: LogConfig,
        messages_size: int,
        max_timestamp_in_messages: int,
        max_offset_in_messages: int,
        now_ms: int,
    ) -> bool:
        """Tell whether an append of ``messages_size`` bytes must go to a new segment.

        Rolls when the segment would exceed ``segment.bytes``, a non-empty segment is
        older than ``segment.ms`` less its ``roll_jitter_ms`` (``segment.jitter.ms``), an
        index is full, or the append's last offset cannot be stored relative to the base
        offset (Kafka's ``LogSegment.shouldRoll``).
        """
        if self.size > config.segment_bytes - messages_size:
            return True
        if self.size > 0 and (
            self.time_waited_for_roll(now_ms, max_timestamp_in_messages)
            > config.segment_ms - self.roll_jitter_ms
        ):
            return True
        if self.offset_index.is_full or self.time_index.is_full:
            return True
        return not self.can_convert_to_relative_offset(max_offset_in_messages)

    def check_indexes(self) -> None:
        """Sanity-check both indexes against the ``.log`` file.

        Raises:
            CorruptIndexError: an index is malformed or points outside the segment.
            CorruptRecordError: the segment's tail is torn (found while locating its end).
        """
        self.offset_index.sanity_check(self.size)
        self.time_index.sanity_check(self.read_next_offset())

    def recover(self, index_interval_bytes: int) -> int:
        """Rebuild both indexes from the batches and cut the file after the last valid one.

        A batch is valid if complete, v2, CRC-correct, with offsets increasing and
        storable relative to the base offset (Kafka's ``LogSegment.recover``).

        Returns:
            Number of bytes truncated from the end of the file (0 if it was intact).
        """
        self.offset_index.reset()
        self.time_index.reset()
        self.max_timestamp_so_far = NO_TIMESTAMP
        self.offset_of_max_timestamp_so_far = self.base_offset
        self._bytes_since_last_index_entry = 0
        self._rolling_based_timestamp = None
        valid_end = 0
        next_offset = self.base_offset
        for position, header in self.records.valid_batches():
            if header.base_offset < next_offset or not self.can_convert_to_relative_offset(
                header.last_offset
            ):
                break
            self._index_batch(header, position, index_interval_bytes)
            next_offset = header.next_offset
            valid_end = position + header.size_in_bytes
        self._write_pending_index_entries()
        self.indexes_were_missing = False
        return self.records.truncate_to(valid_end)

    def truncate_to(self, offset: int) -> int:
        """Remove the batch containing ``offset`` (or the first after it) and all later ones.

        Truncation is at batch granularity, as in Kafka: when ``offset`` falls inside a
        batch that whole batch goes. Returns the number of bytes removed.
        """
        start = self.offset_index.lookup(offset).position
        cut: tuple[int, BatchHeader] | None = None
        for position, header in self.records.batches_from(start):
            if header.last_offset >= offset:
                cut = (position, header)
                break
        if cut is None:
            return 0
        position, header = cut
        self.offset_index.truncate_to(header.base_offset)
        self.time_index.truncate_to(header.base_offset)
        removed = self.records.truncate_to(position)
        self._bytes_since_last_index_entry = 0
        self._load_max_timestamp()
        if self.size == 0:
            self._rolling_based_timestamp = None
        return removed

    def on_become_inactive(self) -> None:
        """Write the final time index entry (largest timestamp) when the segment is rolled."""
        if self.max_timestamp_so_far >= 0:
            self.time_index.maybe_append(
                self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far, skip_full_check=True
            )
            self.time_index.write_pending()

    def flush(self) -> None:
        """Fsync the log and both index files."""
        self.records.flush()
        self.offset_index.flush()
        self.time_index.flush()

    def close(self) -> None:
        """Write the final time index entry and release all three files (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self.on_become_inactive()
        self.records.close()
        self.offset_index.close()
        self.time_index.close()

    def change_file_suffixes(self, old_suffix: str, new_suffix: str) -> None:
        """Rename the ``.log``, ``.index`` and ``.timeindex`` files, in that order.

        Kafka's ``LogSegment.changeFileSuffixes``: ``old_suffix`` (e.g. ``.cleaned``) is
        replaced by ``new_suffix`` (e.g. ``.swap``, or ``""`` for the final name). Open
        handles stay valid.
        """
        for part in (self.records, self.offset_index, self.time_index):
            name = part.path.name
            if old_suffix and not name.endswith(old_suffix):
                raise ValueError(f"{part.path} does not end with {old_suffix}")
            stem = name[: len(name) - len(old_suffix)] if old_suffix else name
            part.rename(part.path.with_name(stem + new_suffix))

    def set_last_modified(self, mtime_ms: int) -> None:
        """Set the ``.log`` file's modification time (Kafka keeps it across cleaning)."""
        seconds = mtime_ms / 1000
        os.utime(self.records.path, (seconds, seconds))

    def rename_to_deleted(self) -> None:
        """Append ``.deleted`` to the three file names; open handles stay usable."""
        for part in (self.records, self.offset_index, self.time_index):
            part.rename(part.path.with_name(part.path.name + DELETED_SUFFIX))

    def update_parent_dir(self, directory: Path) -> None:
        """Follow a rename of the partition directory (Kafka's ``LogSegment.updateParentDir``).

        The files were moved with the directory; only the names used to reopen them change.
        """
        for part in (self.records, self.offset_index, self.time_index):
            part.update_parent_dir(directory)

    def delete(self) -> None:
        """Close and remove the three files under their current names."""
        self._closed = True
        self.records.delete()
        self.offset_index.delete()
        self.time_index.delete()
