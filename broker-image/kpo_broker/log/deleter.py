"""Delayed removal of deleted segments (Kafka's ``file.delete.delay.ms``).

A segment leaving the log is renamed to ``*.deleted`` at once, but its files stay usable
until the delay has passed: a ``FileSlice`` handed out earlier reopens the renamed file
when it is sent, and a ``sendfile`` already in progress holds its file until done.
Leftover ``*.deleted`` files from a crash are removed when the log is loaded.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from kpo_broker.log.segment import LogSegment


class SegmentDeleter:
    """Segments waiting for their files to be removed, with their deadlines in ms."""

    def __init__(self) -> None:
        self._pending: list[tuple[int, LogSegment]] = []

    @property
    def pending(self) -> int:
        """Number of segments whose files are not removed yet."""
        return len(self._pending)

    def schedule(self, segments: Iterable[LogSegment], now_ms: int, delay_ms: int) -> None:
        """Rename ``segments`` to ``*.deleted`` and remove them at ``now_ms + delay_ms``.

        With ``delay_ms == 0`` the files are removed immediately.
        """
        for segment in segments:
            segment.rename_to_deleted()
            if delay_ms <= 0:
                segment.delete()
            else:
                self._pending.append((now_ms + delay_ms, segment))

    def update_parent_dir(self, directory: Path) -> None:
        """Follow a rename of the partition directory holding the pending segments."""
        for _deadline, segment in self._pending:
            segment.update_parent_dir(directory)

    def purge(self, now_ms: int | None) -> int:
        """Remove files whose deadline is ``<= now_ms`` (all if ``now_ms`` is None).

        Returns:
            Number of segments whose files were removed.
        """
        remaining = []
        removed = 0
        for deadline, segment in self._pending:
            if now_ms is None or deadline <= now_ms:
                segment.delete()
                removed += 1
            else:
                remaining.append((deadline, segment))
        self._pending = remaining
        return removed
