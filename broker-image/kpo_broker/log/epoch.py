"""Leader epoch cache of one partition (Kafka's ``LeaderEpochFileCache``, KIP-101/KIP-279).

Holds the sequence of ``(leader epoch, start offset)`` entries: the first offset each
leader epoch wrote. Followers use it through OffsetsForLeaderEpoch to find where their
log diverges from the leader's and truncate there instead of at the high watermark
(KIP-101: truncating to the high watermark could lose or diverge acknowledged
records across leader changes). Every change rewrites the
partition's ``leader-epoch-checkpoint`` file (``epoch startOffset`` lines) atomically.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

from kpo_broker.log.checkpoints import parse_non_negative, read_checkpoint, write_checkpoint
from kpo_broker.log.errors import CheckpointFormatError

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1

_log = logging.getLogger(__name__)


class EpochEntry(NamedTuple):
    """A leader epoch and the first offset written in it."""

    epoch: int
    start_offset: int


#: Threads writing the checkpoints of one :class:`EpochCheckpointBatch` concurrently.
CHECKPOINT_WRITERS = 8

_current_batch = threading.local()
_writers: ThreadPoolExecutor | None = None
_writers_lock = threading.Lock()


def _checkpoint_writers() -> ThreadPoolExecutor:
    """Return the process's checkpoint writer threads, started at the first batch and kept."""
    global _writers
    with _writers_lock:
        if _writers is None:
            _writers = ThreadPoolExecutor(
                CHECKPOINT_WRITERS, thread_name_prefix="leader-epoch-checkpoint"
            )
        return _writers


class EpochCheckpointBatch:
    """Leader epoch checkpoint writes held until the end of a batch, then run concurrently.

    A LeaderAndIsr request making this broker leader of thousands of partitions writes
    as many ``leader-epoch-checkpoint`` files, each fsynced with its directory (as Kafka's
    ``LeaderEpochFileCache`` does). One after another that is thousands of fsyncs in a
    row; here they run on :data:`CHECKPOINT_WRITERS` long-lived threads, each writing one
    share of the files in a row, so the file system can commit them together and the
    thread that flushes hands out a few tasks, not one per file (each hand-off costs a
    switch of the interpreter lock, which the broker's event loop and controller share).
    The caller answers the request only after :meth:`flush`, so every checkpoint is
    durable before the controller learns the change was applied.
    """

    def __init__(self) -> None:
        self._pending: dict[Path, LeaderEpochCache] = {}

    @property
    def pending(self) -> int:
        """Number of checkpoints held for :meth:`flush`."""
        return len(self._pending)

    def add(self, cache: LeaderEpochCache) -> None:
        """Write ``cache``'s checkpoint at :meth:`flush` (once, however often it changed)."""
        self._pending[cache.path] = cache

    def flush(self) -> dict[LeaderEpochCache, OSError]:
        """Write every held checkpoint, concurrently; return the ones that failed.

        Returns:
            cache -> the ``OSError`` its write raised (the caller takes its log dir offline).
        """
        caches = list(self._pending.values())
        self._pending.clear()
        if not caches:
            return {}
        if len(caches) == 1:
            return _write_quietly(caches)
        shares = [caches[i::CHECKPOINT_WRITERS] for i in range(CHECKPOINT_WRITERS)]
        failed: dict[LeaderEpochCache, OSError] = {}
        for outcome in _checkpoint_writers().map(_write_quietly, [s for s in shares if s]):
            failed.update(outcome)
        return failed


def _write_quietly(caches: list[LeaderEpochCache]) -> dict[LeaderEpochCache, OSError]:
    """Write each cache's checkpoint in turn; return the ones whose write failed."""
    failed: dict[LeaderEpochCache, OSError] = {}
    for cache in caches:
        try:
            cache.write()
        except OSError as exc:
            failed[cache] = exc
    return failed


@contextmanager
def deferred_checkpoints() -> Iterator[EpochCheckpointBatch]:
    """Hold the leader epoch checkpoint writes made on this thread inside the block.

    Yields the batch; the caller must :meth:`~EpochCheckpointBatch.flush` it after the
    block (writes made after the block are immediate again).
    """
    batch = EpochCheckpointBatch()
    previous = getattr(_current_batch, "batch", None)
    _current_batch.batch = batch
    try:
        yield batch
    finally:
        _current_batch.batch = previous


class LeaderEpochCache:
    """The epoch -> start offset history of one partition, persisted to ``path``.

    Entries always have strictly increasing epochs and non-decreasing start offsets.

    Args:
        path: the partition's ``leader-epoch-checkpoint`` file; read if present.

    Raises:
        CheckpointFormatError: the file is malformed or its entries are out of order.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: list[EpochEntry] = []
        self._write_lock = threading.Lock()
        for epoch, start_offset in read_checkpoint(path, 2):
            entry = EpochEntry(
                parse_non_negative(path, epoch), parse_non_negative(path, start_offset)
            )
            if self._entries and (
                entry.epoch <= self._entries[-1].epoch
                or entry.start_offset < self._entries[-1].start_offset
            ):
                raise CheckpointFormatError(f"{path}: entry {entry} is out of order")
            self._entries.append(entry)

    @property
    def entries(self) -> tuple[EpochEntry, ...]:
        """All entries, oldest first."""
        return tuple(self._entries)

    @property
    def latest_entry(self) -> EpochEntry | None:
        """The newest entry, None if the cache is empty."""
        return self._entries[-1] if self._entries else None

    @property
    def latest_epoch(self) -> int | None:
        """The newest leader epoch, None if the cache is empty."""
        return self._entries[-1].epoch if self._entries else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        """The oldest entry, None if the cache is empty."""
        return self._entries[0] if self._entries else None

    def _flush(self) -> None:
        batch: EpochCheckpointBatch | None = getattr(_current_batch, "batch", None)
        if batch is not None:
            batch.add(self)
        else:
            self.write()

    def write(self) -> None:
        """Write the checkpoint file now (atomically, fsynced; one writer at a time).

        Raises:
            OSError: the write failed.
        """
        with self._write_lock:
            write_checkpoint(self.path, list(self._entries))

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` started at ``start_offset``.

        Only a newer epoch at a start offset not below the latest one is added (Kafka 2.0's
        ``assign``); anything else, such as every later batch of the current epoch, is
        ignored. Negative epochs (batches without a leader epoch) are ignored.

        Returns:
            True if an entry was added (and the checkpoint rewritten).
        """
        latest = self.latest_entry
        if epoch < 0 or start_offset < 0:
            return False
        if latest is not None and (epoch <= latest.epoch or start_offset < latest.start_offset):
            if epoch != latest.epoch:
                _log.warning(
                    "%s: ignoring leader epoch %d at offset %d, latest entry is %s",
                    self.path,
                    epoch,
                    start_offset,
                    latest,
                )
            return False
        self._entries.append(EpochEntry(epoch, start_offset))
        self._flush()
        return True

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """Answer OffsetsForLeaderEpoch: ``(epoch, end offset)`` for ``requested_epoch``.

        KIP-279 semantics (Kafka 2.0 and later):

        * undefined requested epoch, or newer than every known epoch:
          ``(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)``;
        * the latest epoch: ``(requested_epoch, log_end_offset)``;
        * an older epoch: the largest known epoch ``<=`` it, and the start offset of the
          first epoch after it;
        * below the first entry: ``(requested_epoch, first entry's start offset)``. (KIP-101
          in Kafka 0.11 answered ``UNDEFINED_EPOCH_OFFSET`` here; KIP-279 changed it so a
          follower can still truncate to the leader's earliest known epoch.)

        Args:
            requested_epoch: the follower's (or consumer's) epoch.
            log_end_offset: the log's LEO, the end of the latest epoch.
        """
        if requested_epoch == UNDEFINED_EPOCH or not self._entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if self._entries[-1].epoch == requested_epoch:
            return requested_epoch, log_end_offset
        floor: EpochEntry | None = None
        for entry in self._entries:
            if entry.epoch > requested_epoch:
                if floor is None:
                    return requested_epoch, entry.start_offset
                return floor.epoch, entry.start_offset
            floor = entry
        return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET

    def epoch_for_offset(self, offset: int) -> int:
        """Return the epoch whose range holds ``offset`` (ListOffsets v4+, KIP-320).

        ``UNDEFINED_EPOCH`` (-1) if ``offset`` is before the first entry or the cache is empty.
        """
        found = UNDEFINED_EPOCH
        for entry in self._entries:
            if entry.start_offset > offset:
                break
            found = entry.epoch
        return found

    def start_offset_of(self, epoch: int) -> int | None:
        """Return the start offset recorded for exactly ``epoch``, None if it has no entry."""
        for entry in self._entries:
            if entry.epoch == epoch:
                return entry.start_offset
        return None

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop entries starting at or after ``end_offset`` (the log was truncated to it)."""
        if end_offset < 0:
            return
        keep = [entry for entry in self._entries if entry.start_offset < end_offset]
        if len(keep) != len(self._entries):
            self._entries = keep
            self._flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """Drop history before ``start_offset`` (the log start offset advanced).

        Entries starting before it are removed; the epoch covering ``start_offset`` is kept
        with its start moved up to ``start_offset``.
        """
        if start_offset < 0 or not self._entries or self._entries[0].start_offset >= start_offset:
            return
        earlier = [entry for entry in self._entries if entry.start_offset < start_offset]
        later = [entry for entry in self._entries if entry.start_offset >= start_offset]
        if not later or later[0].start_offset > start_offset:
            later.insert(0, EpochEntry(earlier[-1].epoch, start_offset))
        self._entries = later
        self._flush()

    def clear(self) -> None:
        """Remove every entry (the log was truncated fully)."""
        if self._entries:
            self._entries = []
            self._flush()
        elif not self.path.exists():
            self._flush()
