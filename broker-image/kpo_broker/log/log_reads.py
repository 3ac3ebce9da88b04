"""The read side of ``Log``: fetch reads and timestamp lookups (a base class of ``Log``).

Kept apart from ``log.py`` so that module stays about state changes; the segment-level
work is in ``reads``. Reads never change the log.
"""

from __future__ import annotations

from kpo_broker.log.errors import OffsetOutOfRangeError
from kpo_broker.log.info import FetchDataInfo, OffsetAndTimestamp
from kpo_broker.log.local_log import LocalLog
from kpo_broker.log.names import TopicPartition
from kpo_broker.log.reads import MAX_TIMESTAMP, offset_for_timestamp


class LogReads:
    """Read methods over a partition's segments; ``Log`` provides the state they read.

    Attributes:
        _local: the segments and the LEO.
        _tp: the partition (for error messages).
        _log_start_offset: the first readable offset.
    """

    _local: LocalLog
    _tp: TopicPartition
    _log_start_offset: int

    @property
    def log_end_offset(self) -> int:
        """The LEO: offset the next appended record will get."""
        return self._local.log_end_offset

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
