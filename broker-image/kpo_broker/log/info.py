"""Result types of log appends and reads (Kafka's ``LogAppendInfo`` / ``FetchDataInfo``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from kpo_broker.log.filerecords import FileSlice


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
