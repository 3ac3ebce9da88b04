"""Result types of log appends and reads (Kafka's ``LogAppendInfo`` / ``FetchDataInfo``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, BinaryIO, NamedTuple

if TYPE_CHECKING:
    from kpo_broker.log.filerecords import FileRecords


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


@dataclass(frozen=True)
class FetchDataInfo:
    """Batches returned by ``Log.read`` for a fetch starting at ``fetch_offset``.

    Attributes:
        fetch_offset: the offset the fetch asked for; the first batch contains it (so
            its base offset may be lower) or starts after it.
        slices: the file ranges holding the batches, in offset order; empty when there is
            nothing to return (fetch at the LEO or HW, or max bytes too small).
    """

    fetch_offset: int
    slices: tuple[FileSlice, ...] = ()

    @property
    def size_in_bytes(self) -> int:
        """Total bytes over all slices."""
        return sum(part.size for part in self.slices)

    def to_bytes(self) -> bytes:
        """Concatenate all slices into memory (for tests and non-sendfile transports)."""
        return b"".join(part.read_bytes() for part in self.slices)


@dataclass(frozen=True)
class LogAppendInfo:
    """What one append wrote (Kafka's ``LogAppendInfo``).

    Attributes:
        first_offset: base offset of the first batch, -1 for an empty append.
        last_offset: last offset of the last batch, -1 for an empty append.
        max_timestamp: largest batch ``maxTimestamp`` in ms, -1 if none.
        offset_of_max_timestamp: last offset of the first batch holding
            ``max_timestamp`` (Kafka's "shallow" offset of the max timestamp), -1 if none.
        records_count: number of records (sum of the batches' ``recordsCount``).
        valid_bytes: bytes appended to the log.
        duplicate: True when an idempotent producer retried batches the log already
            holds (KIP-98): nothing was appended, the offsets are the original ones,
            ``records_count`` and ``valid_bytes`` are 0. The producer is answered with
            ``first_offset`` and no error, as Kafka does.
        log_append_time: the leader's clock in ms stamped on the batches when the topic
            uses LogAppendTime, else -1 (Kafka's ``logAppendTime``).
    """

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    records_count: int
    valid_bytes: int
    duplicate: bool = False
    log_append_time: int = -1


class OffsetAndTimestamp(NamedTuple):
    """Result of a timestamp lookup: the found ``offset`` and its ``timestamp`` (ms).

    ``timestamp`` is -1 for the earliest/latest special lookups, as Kafka's ListOffsets.
    """

    offset: int
    timestamp: int
