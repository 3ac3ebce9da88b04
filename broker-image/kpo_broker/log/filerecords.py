"""The ``.log`` file of one segment: appends, positional reads and batch scans (I/O).

Mirrors Kafka's ``FileRecords``: the file is only appended to or truncated, reads use
``os.pread`` so they never move the append position, and a scan walks batch headers
without reading the records themselves.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from kpo_broker.log.errors import CorruptRecordError
from kpo_broker.log.info import FileSlice
from kpo_broker.log.records import HEADER_SIZE, BatchHeader, crc_matches, parse_header

_HEADER_SCAN_CHUNK = 16 * 1024
_VALIDATE_CHUNK = 1024 * 1024


class FileRecords:
    """An append-only file of v2 record batches.

    Args:
        path: the ``.log`` file; created empty if missing.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.file = open(path, "a+b", buffering=0)  # noqa: SIM115 - closed in close()
        self._size = os.fstat(self.file.fileno()).st_size

    @property
    def size(self) -> int:
        """Current file size in bytes."""
        return self._size

    @property
    def last_modified_ms(self) -> int:
        """The file's modification time in ms since the epoch."""
        return os.fstat(self.file.fileno()).st_mtime_ns // 1_000_000

    def append(self, data: bytes) -> int:
        """Append ``data`` (whole batches) and return the position it was written at."""
        position = self._size
        view = memoryview(data)
        while view:
            written = self.file.write(view)
            view = view[written:]
        self._size += len(data)
        return position

    def pread(self, position: int, size: int) -> bytes:
        """Read up to ``size`` bytes at ``position`` without moving the file position."""
        return os.pread(self.file.fileno(), size, position)

    def slice(self, position: int, size: int) -> FileSlice:
        """Return a ``FileSlice`` of this file for sendfile-style transfers."""
        return FileSlice(self.file, position, size)

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
            os.ftruncate(self.file.fileno(), size)
            self._size = size
        return removed

    def flush(self) -> None:
        """Fsync the file."""
        os.fsync(self.file.fileno())

    def close(self) -> None:
        """Close the file handle."""
        self.file.close()

    def rename(self, new_path: Path) -> None:
        """Rename the file (e.g. to ``.deleted``); the open handle stays valid."""
        os.replace(self.path, new_path)
        self.path = new_path

    def delete(self) -> None:
        """Close and remove the file (a missing file is ignored)."""
        self.close()
        self.path.unlink(missing_ok=True)
