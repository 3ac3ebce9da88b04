"""The ``.log`` file of one segment: appends, positional reads and batch scans (I/O).

Mirrors Kafka's ``FileRecords``: the file is only appended to or truncated, reads use
``os.pread`` so they never move the append position, and a scan walks batch headers
without reading the records themselves. A :class:`FileSlice` is a byte range of one such
file, which a Fetch response sends with ``sendfile``.

Descriptors: Kafka keeps every segment's file channel open, one descriptor per segment.
Here the open ``.log`` files of the whole process are bounded by a ``SegmentFileCache``
(least recently used first out), so a broker hosting more partitions than its descriptor
limit keeps working: a segment whose file was closed reopens it on its next use. A file
is closed when nothing refers to it any more: the cache and the segment drop their
references, while a ``sendfile`` in progress holds the file it was given until it is done.
"""

from __future__ import annotations

import io
import os
import resource
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from kpo_broker.log.errors import CorruptRecordError
from kpo_broker.log.records import HEADER_SIZE, BatchHeader, crc_matches, parse_header

_HEADER_SCAN_CHUNK = 16 * 1024
_VALIDATE_CHUNK = 1024 * 1024


class _SegmentFile(io.FileIO):
    """A ``.log`` file opened ``a+`` (binary, unbuffered) that closes itself when unreferenced.

    The cache and the segment only drop their references, so the file closes when its
    last holder (possibly a ``sendfile`` in progress) lets go. Closing in ``__del__``
    avoids the unclosed-file ``ResourceWarning`` of ``io``'s own finalizer.
    """

    def __del__(self) -> None:
        self.close()


_UNLIMITED_NOFILE = 1 << 20  # stands for an infinite RLIMIT_NOFILE
_MIN_CAPACITY = 16


def _default_capacity() -> int:
    """Half of the soft ``RLIMIT_NOFILE`` when first imported.

    The other half is left to sockets, index writes, checkpoints and files still held by
    transfers in progress.
    """
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        soft = _UNLIMITED_NOFILE
    return max(_MIN_CAPACITY, soft // 2)


class SegmentFileCache:
    """The ``.log`` files kept open, at most ``capacity``, least recently used closed first.

    Shared by every ``FileRecords`` of the process (``SEGMENT_FILES``), since the
    descriptor limit is per process. Thread-safe: log recovery and retention run in
    worker threads.

    Args:
        capacity: the most files kept open by the cache, >= 1. A file evicted while a
            ``sendfile`` or read holds it stays open beyond it until that is done.

    Raises:
        ValueError: ``capacity`` is below 1.
    """

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, not {capacity}")
        self.capacity = capacity
        self._open: OrderedDict[FileRecords, None] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        """Return the number of files the cache holds open."""
        return len(self._open)

    def touch(self, records: FileRecords) -> None:
        """Mark ``records``' file as just used, closing the least recently used beyond capacity."""
        with self._lock:
            self._open[records] = None
            self._open.move_to_end(records)
            while len(self._open) > self.capacity:
                evicted, _ = self._open.popitem(last=False)
                evicted.release_file()

    def forget(self, records: FileRecords) -> None:
        """Stop tracking ``records`` (its file was released by its owner)."""
        with self._lock:
            self._open.pop(records, None)


SEGMENT_FILES = SegmentFileCache(_default_capacity())


class FileRecords:
    """An append-only file of v2 record batches, opened only while in ``cache``.

    Args:
        path: the ``.log`` file; created empty if missing.
        cache: bounds the open ``.log`` files (the process-wide one by default).

    Every method may raise ``OSError`` (reopening the file included), and ``ValueError``
    once the object is closed.
    """

    def __init__(self, path: Path, cache: SegmentFileCache = SEGMENT_FILES) -> None:
        self.path = path
        self._cache = cache
        self._file: _SegmentFile | None = None
        self._closed = False
        file = self.open_file()
        self._size = os.fstat(file.fileno()).st_size

    def open_file(self) -> _SegmentFile:
        """Return the open file, reopening it if the cache closed it.

        The file stays open while the caller holds the returned object, even if the
        cache evicts it meanwhile (a ``sendfile`` in progress).
        """
        file = self._file
        if file is None:
            if self._closed:
                raise ValueError(f"segment file {self.path} is closed")
            file = _SegmentFile(self.path, "a+")
            self._file = file
        self._cache.touch(self)
        return file

    @property
    def is_open(self) -> bool:
        """True while this object holds its file open (not closed, not evicted)."""
        return self._file is not None

    def release_file(self) -> None:
        """Drop the reference to the open file (the cache evicts it); it reopens on use."""
        self._file = None

    @property
    def size(self) -> int:
        """Current file size in bytes."""
        return self._size

    @property
    def last_modified_ms(self) -> int:
        """The file's modification time in ms since the epoch."""
        file = self.open_file()  # held across the call: another thread may evict it
        return os.fstat(file.fileno()).st_mtime_ns // 1_000_000

    def append(self, data: bytes) -> int:
        """Append ``data`` (whole batches) and return the position it was written at."""
        position = self._size
        file = self.open_file()
        view = memoryview(data)
        while view:
            written = file.write(view)
            view = view[written:]
        self._size += len(data)
        return position

    def pread(self, position: int, size: int) -> bytes:
        """Read up to ``size`` bytes at ``position`` without moving the file position."""
        file = self.open_file()
        return os.pread(file.fileno(), size, position)

    def slice(self, position: int, size: int) -> FileSlice:
        """Return a ``FileSlice`` of this file for sendfile-style transfers."""
        return FileSlice(self, position, size)

    def batches_from(self, position: int) -> Iterator[tuple[int, BatchHeader]]:
        """Yield ``(position, header)`` of each batch from ``position`` to the end of file.

        Reads only headers (in chunks), never the records, and does not check CRCs.

        Raises:
            CorruptRecordError: a header is malformed or a batch runs past the end of file
                (only possible in a segment that was not recovered).
        """
        buf = b""
        buf_start = position
        end = self._size
        while position < end:
            if end - position < HEADER_SIZE:
                raise CorruptRecordError(f"{self.path}: torn batch header at {position}")
            relative = position - buf_start
            if relative + HEADER_SIZE > len(buf):
                buf = self.pread(position, _HEADER_SCAN_CHUNK)
                buf_start = position
                relative = 0
            header = parse_header(buf, relative)
            if position + header.size_in_bytes > end:
                raise CorruptRecordError(f"{self.path}: torn batch at {position}")
            yield position, header
            position += header.size_in_bytes

    def valid_batches(self) -> Iterator[tuple[int, BatchHeader]]:
        """Yield ``(position, header)`` of each batch whose CRC is valid, from the start.

        Stops silently at the first torn, malformed or CRC-failing batch; the caller
        truncates the file after the last yielded batch (segment recovery).
        """
        position = 0
        buf = b""
        buf_start = 0
        while position < self._size:
            relative = position - buf_start
            if relative + HEADER_SIZE > len(buf):
                buf, buf_start, relative = self.pread(position, _VALIDATE_CHUNK), position, 0
            try:
                header = parse_header(buf, relative)
            except CorruptRecordError:
                return
            size = header.size_in_bytes
            if position + size > self._size:
                return  # torn tail, or a corrupt length that must not be read
            if relative + size > len(buf):
                buf, buf_start, relative = (
                    self.pread(position, max(size, _VALIDATE_CHUNK)),
                    position,
                    0,
                )
            if relative + size > len(buf):
                return
            if not crc_matches(header, memoryview(buf)[relative : relative + size]):
                return
            yield position, header
            position += size

    def truncate_to(self, size: int) -> int:
        """Shrink the file to ``size`` bytes; return the number of bytes removed."""
        removed = max(0, self._size - size)
        if removed:
            file = self.open_file()
            os.ftruncate(file.fileno(), size)
            self._size = size
        return removed

    def flush(self) -> None:
        """Fsync the file."""
        file = self.open_file()
        os.fsync(file.fileno())

    def close(self) -> None:
        """Release the file (idempotent); a transfer in progress keeps it until done."""
        self._closed = True
        self._file = None
        self._cache.forget(self)

    def rename(self, new_path: Path) -> None:
        """Rename the file (e.g. to ``.deleted``); an open handle stays valid."""
        os.replace(self.path, new_path)
        self.path = new_path

    def update_parent_dir(self, directory: Path) -> None:
        """Follow a rename of the partition directory to ``directory`` (file name kept)."""
        self.path = directory / self.path.name

    def delete(self) -> None:
        """Close and remove the file (a missing file is ignored)."""
        self.close()
        self.path.unlink(missing_ok=True)


@dataclass(frozen=True)
class FileSlice:
    """A byte range of a segment's ``.log`` file, ready for ``sendfile``.

    The slice holds no descriptor: the file is opened (or taken from the segment file
    cache) when the slice is sent or read, so a Fetch response of thousands of partitions
    does not pin thousands of descriptors. A deleted segment's file stays readable until
    ``file.delete.delay.ms`` has passed (Kafka's in-flight read guarantee).

    Attributes:
        records: the segment's ``.log`` file.
        position: byte position of the first batch in the file.
        size: length in bytes; always a whole number of batches.
    """

    records: FileRecords
    position: int
    size: int

    def open_file(self) -> BinaryIO:
        """Return the open ``.log`` file; keep the reference for as long as the transfer lasts.

        Raises:
            ValueError: the segment's files were closed (log closed, or segment removed).
            OSError: the file could not be reopened.
        """
        return self.records.open_file()

    def read_bytes(self) -> bytes:
        """Read the slice with ``os.pread`` (the file position is not moved)."""
        return self.records.pread(self.position, self.size)
