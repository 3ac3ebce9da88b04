"""Sparse offset and time indexes of one segment (Kafka's ``OffsetIndex`` / ``TimeIndex``).

Both are append-only files of fixed-size big-endian entries, kept in memory as arrays:

* offset index ``<base offset>.index``: (relative offset int32, file position int32),
  8 bytes; maps an offset to the byte position of a batch at or before it.
* time index ``<base offset>.timeindex``: (timestamp int64, relative offset int32),
  12 bytes; maps a timestamp to the offset of the largest timestamp seen so far.

An entry is added every ``index.interval.bytes`` of log (see ``segment.py``), so a
lookup returns the greatest entry at or below the target and the caller scans forward.
Unlike Kafka the files are not preallocated; ``segment.index.bytes`` only bounds the
number of entries (a full index rolls the segment).

Descriptors: an index holds no open file. Kafka memory-maps its indexes and closes the
file channel, so a segment costs one descriptor (its ``.log``). Python's ``mmap`` (before
3.13's ``trackfd=False``) keeps a duplicate of the descriptor, so here the entries live
in memory and the file is opened only for the system call that changes it: appended
entries are buffered and written by ``write_pending`` (the segment calls it at the end of
each append, recovery and roll, so the file matches the entries between calls);
truncation, fsync and rename open the file by name, or not at all.
"""

from __future__ import annotations

import bisect
import os
import struct
from array import array
from pathlib import Path
from typing import NamedTuple

from kpo_broker.log.errors import CorruptIndexError, InvalidIndexOffsetError

_MAX_RELATIVE_OFFSET = 2**31 - 1
NO_TIMESTAMP = -1


class OffsetPosition(NamedTuple):
    """An offset index entry: absolute ``offset`` and byte ``position`` in the .log file."""

    offset: int
    position: int


class TimestampOffset(NamedTuple):
    """A time index entry: ``timestamp`` in ms and the absolute ``offset`` holding it."""

    timestamp: int
    offset: int


class _IndexFile:
    """Common storage of both indexes: two parallel arrays plus the entries not yet written.

    Invariant: the file holds the first ``entries - len(pending) / entry size`` entries
    (plus ``_trailing_bytes`` of a torn entry found at load); ``_pending`` the rest.
    """

    _struct: struct.Struct

    def __init__(self, path: Path, base_offset: int, max_index_size: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_size // self._struct.size)
        self._keys = array("q")
        self._values = array("q")
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            data = b""
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o666))
        self._trailing_bytes = len(data) % self._struct.size
        usable = len(data) - self._trailing_bytes
        for first, second in self._struct.iter_unpack(data[:usable]):
            key, value = self._decode(first, second)
            self._keys.append(key)
            self._values.append(value)
        self._pending = bytearray()
        self._closed = False

    def _decode(self, first: int, second: int) -> tuple[int, int]:
        raise NotImplementedError

    def _encode(self, key: int, value: int) -> bytes:
        raise NotImplementedError

    @property
    def entries(self) -> int:
        """Number of entries in the index."""
        return len(self._keys)

    @property
    def is_full(self) -> bool:
        """True once the index holds ``segment.index.bytes // entry size`` entries."""
        return len(self._keys) >= self.max_entries

    @property
    def size_in_bytes(self) -> int:
        """Size of the index file in bytes."""
        return len(self._keys) * self._struct.size

    def _relative(self, offset: int) -> int:
        relative = offset - self.base_offset
        if not 0 <= relative <= _MAX_RELATIVE_OFFSET:
            raise InvalidIndexOffsetError(
                f"offset {offset} does not fit as a relative offset of base {self.base_offset}"
            )
        return relative

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError(f"index {self.path} is closed")

    def _write(self, key: int, value: int) -> None:
        self._check_open()
        self._pending += self._encode(key, value)
        self._keys.append(key)
        self._values.append(value)

    def write_pending(self) -> None:
        """Append the entries added since the last call to the file (no fsync).

        Opens the file for this one write only; does nothing when no entry is pending.
        """
        if not self._pending:
            return
        self._check_open()
        data = bytes(self._pending)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        try:
            done = 0
            while done < len(data):
                done += os.write(fd, data[done:])
        finally:
            os.close(fd)
        self._pending.clear()

    def _truncate_entries(self, count: int) -> None:
        if count >= len(self._keys) and not self._trailing_bytes:
            return
        self._check_open()
        size = self._struct.size
        written = len(self._keys) - len(self._pending) // size
        del self._keys[count:]
        del self._values[count:]
        if count < written or self._trailing_bytes:
            os.truncate(self.path, min(count, written) * size)
            written = min(count, written)
            self._trailing_bytes = 0
        del self._pending[(count - written) * size :]
        self.write_pending()

    def reset(self) -> None:
        """Remove every entry (before a rebuild)."""
        self._truncate_entries(0)

    def flush(self) -> None:
        """Write pending entries and fsync the index file."""
        self.write_pending()
        fd = os.open(self.path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def close(self) -> None:
        """Write pending entries; the index must not be changed afterwards (lookups work)."""
        if not self._closed:
            self.write_pending()
            self._closed = True

    def delete(self) -> None:
        """Drop pending entries and remove the index file (a missing file is ignored)."""
        self._pending.clear()
        self._closed = True
        self.path.unlink(missing_ok=True)

    def rename(self, new_path: Path) -> None:
        """Rename the file (e.g. to ``.deleted``); later writes go to the new name."""
        os.replace(self.path, new_path)
        self.path = new_path

    def update_parent_dir(self, directory: Path) -> None:
        """Follow a rename of the partition directory to ``directory`` (file name kept)."""
        self.path = directory / self.path.name

    def _check_layout(self) -> None:
        if self._trailing_bytes:
            raise CorruptIndexError(
                f"index {self.path} size is not a multiple of {self._struct.size} bytes"
            )


class OffsetIndex(_IndexFile):
    """Offset index of one segment: offset -> byte position of a batch at or before it.

    Args:
        path: the ``.index`` file; created empty if missing.
        base_offset: the segment's base offset (entries store offsets relative to it).
        max_index_size: ``segment.index.bytes``; bounds the number of 8-byte entries.
    """

    _struct = struct.Struct(">ii")

    def _decode(self, first: int, second: int) -> tuple[int, int]:
        return self.base_offset + first, second

    def _encode(self, key: int, value: int) -> bytes:
        return self._struct.pack(self._relative(key), value)

    @property
    def last_entry(self) -> OffsetPosition:
        """The last entry, or ``(base_offset, 0)`` when the index is empty."""
        if not self._keys:
            return OffsetPosition(self.base_offset, 0)
        return OffsetPosition(self._keys[-1], self._values[-1])

    def lookup(self, target_offset: int) -> OffsetPosition:
        """Return the greatest entry with ``offset <= target_offset``.

        Falls back to ``(base_offset, 0)``, the start of the segment, when every entry
        is above the target or the index is empty.
        """
        slot = bisect.bisect_right(self._keys, target_offset) - 1
        if slot < 0:
            return OffsetPosition(self.base_offset, 0)
        return OffsetPosition(self._keys[slot], self._values[slot])

    def append(self, offset: int, position: int) -> None:
        """Append ``(offset, position)``; offsets must strictly increase.

        Raises:
            InvalidIndexOffsetError: offset not above the last entry, not representable
                relative to the base offset, or the index is full.
        """
        if self._keys and offset <= self._keys[-1]:
            raise InvalidIndexOffsetError(
                f"offset {offset} is not above the last offset index entry {self._keys[-1]}"
            )
        if self.is_full:
            raise InvalidIndexOffsetError(f"offset index {self.path} is full")
        self._write(offset, position)

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is ``>= offset``."""
        self._truncate_entries(bisect.bisect_left(self._keys, offset))

    def sanity_check(self, log_size: int) -> None:
        """Check the file is whole, ordered and points inside a ``log_size``-byte log.

        Raises:
            CorruptIndexError: partial trailing entry, offsets not strictly increasing,
                positions decreasing or at/after the end of the log.
        """
        self._check_layout()
        previous = OffsetPosition(self.base_offset - 1, 0)
        for offset, position in zip(self._keys, self._values, strict=True):
            if offset <= previous.offset or position < previous.position:
                raise CorruptIndexError(f"offset index {self.path} is not in order at {offset}")
            if position >= log_size:
                raise CorruptIndexError(
                    f"offset index {self.path} points at position {position} "
                    f"beyond the {log_size}-byte log"
                )
            previous = OffsetPosition(offset, position)


class TimeIndex(_IndexFile):
    """Time index of one segment: timestamp -> offset of the largest timestamp so far.

    Args:
        path: the ``.timeindex`` file; created empty if missing.
        base_offset: the segment's base offset.
        max_index_size: ``segment.index.bytes``; bounds the number of 12-byte entries.
    """

    _struct = struct.Struct(">qi")

    def _decode(self, first: int, second: int) -> tuple[int, int]:
        return first, self.base_offset + second

    def _encode(self, key: int, value: int) -> bytes:
        return self._struct.pack(key, self._relative(value))

    @property
    def last_entry(self) -> TimestampOffset:
        """The last entry, or ``(NO_TIMESTAMP, base_offset)`` when empty."""
        if not self._keys:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return TimestampOffset(self._keys[-1], self._values[-1])

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """Return the greatest entry with ``timestamp <= target_timestamp``.

        Falls back to ``(NO_TIMESTAMP, base_offset)`` when there is none: the search
        then starts at the beginning of the segment.
        """
        slot = bisect.bisect_right(self._keys, target_timestamp) - 1
        if slot < 0:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return TimestampOffset(self._keys[slot], self._values[slot])

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Append ``(timestamp, offset)`` if ``timestamp`` is above the last entry's.

        An empty index compares against ``NO_TIMESTAMP``, so -1 is never stored.

        Args:
            timestamp: largest timestamp seen so far in the segment, ms.
            offset: offset of the batch holding it; must not go below the last entry's.
            skip_full_check: allow one entry past the limit (the final entry written when
                the segment becomes inactive, as Kafka does).

        Raises:
            InvalidIndexOffsetError: the offset goes backwards or the index is full.
        """
        if self._keys and offset < self._values[-1]:
            raise InvalidIndexOffsetError(
                f"offset {offset} is below the last time index offset {self._values[-1]}"
            )
        if timestamp <= self.last_entry.timestamp:
            return
        if self.is_full and not skip_full_check:
            raise InvalidIndexOffsetError(f"time index {self.path} is full")
        self._write(timestamp, offset)

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is ``>= offset``."""
        keep = len(self._values)
        while keep > 0 and self._values[keep - 1] >= offset:
            keep -= 1
        self._truncate_entries(keep)

    def sanity_check(self, next_offset: int) -> None:
        """Check the file is whole, ordered, and refers to offsets below ``next_offset``.

        Raises:
            CorruptIndexError: partial trailing entry, timestamps not strictly increasing,
                offsets decreasing, or an offset outside the segment.
        """
        self._check_layout()
        previous = TimestampOffset(NO_TIMESTAMP, self.base_offset)
        for timestamp, offset in zip(self._keys, self._values, strict=True):
            if timestamp <= previous.timestamp or offset < previous.offset:
                raise CorruptIndexError(f"time index {self.path} is not in order at {offset}")
            if offset >= next_offset:
                raise CorruptIndexError(
                    f"time index {self.path} refers to offset {offset} at or after "
                    f"the segment's next offset {next_offset}"
                )
            previous = TimestampOffset(timestamp, offset)
