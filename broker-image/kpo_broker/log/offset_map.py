"""The cleaner's key -> latest offset map of a log's dirty section (Kafka's ``SkimpyOffsetMap``).

Kafka stores an MD5 hash of each key (16 bytes) and the offset (8 bytes) in a fixed
buffer of ``log.cleaner.dedupe.buffer.size / log.cleaner.threads`` bytes, so the number
of slots is that size divided by 24. This map keeps the same accounting: keys are stored
as their MD5 digest (a collision would merge two keys, with the probability Kafka
accepts), and ``slots`` is the buffer size divided by 24. A cleaning pass stops adding
keys once ``slots * log.cleaner.io.buffer.load.factor`` keys are mapped; the records after
the last mapped offset stay dirty for the next pass. The Python dict costs more than 24
bytes per key, so the memory actually used is a few times the configured size.
"""

from __future__ import annotations

import hashlib

#: Bytes one entry costs in Kafka's accounting: an MD5 digest and an int64 offset.
BYTES_PER_ENTRY = 16 + 8


class OffsetMap:
    """Key digest -> latest offset, bounded to ``slots`` entries.

    Args:
        memory_bytes: the buffer size this map accounts for (one cleaner thread's share
            of ``log.cleaner.dedupe.buffer.size``); at least 24.

    Raises:
        ValueError: ``memory_bytes`` leaves no slot.
    """

    def __init__(self, memory_bytes: int) -> None:
        self.slots = memory_bytes // BYTES_PER_ENTRY
        if self.slots < 1:
            raise ValueError(
                f"an offset map of {memory_bytes} bytes has no slot; "
                f"{BYTES_PER_ENTRY} bytes are needed per key"
            )
        self._offsets: dict[bytes, int] = {}
        self.latest_offset = -1

    @staticmethod
    def _digest(key: bytes) -> bytes:
        return hashlib.md5(key, usedforsecurity=False).digest()

    @property
    def size(self) -> int:
        """Number of distinct keys mapped."""
        return len(self._offsets)

    @property
    def utilization(self) -> float:
        """Fraction of the slots in use (Kafka's ``max-buffer-utilization-percent`` / 100)."""
        return len(self._offsets) / self.slots

    def put(self, key: bytes, offset: int) -> None:
        """Map ``key`` to ``offset`` (later offsets of a key replace earlier ones).

        Raises:
            OverflowError: the map is full and ``key`` is new.
        """
        digest = self._digest(key)
        if digest not in self._offsets and len(self._offsets) >= self.slots:
            raise OverflowError(f"offset map is full ({self.slots} keys)")
        self._offsets[digest] = offset
        self.latest_offset = offset

    def get(self, key: bytes) -> int:
        """Return the latest offset mapped for ``key``, -1 if it has none."""
        return self._offsets.get(self._digest(key), -1)

    def update_latest_offset(self, offset: int) -> None:
        """Raise ``latest_offset`` to ``offset``: the map covers the log up to there."""
        self.latest_offset = max(self.latest_offset, offset)

    def clear(self) -> None:
        """Forget every key and reset ``latest_offset`` to -1 (before each cleaning)."""
        self._offsets.clear()
        self.latest_offset = -1
