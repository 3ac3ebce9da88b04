"""Which compacted log to clean next and each log's cleaning state (``LogCleanerManager``).

Each log dir holds a ``cleaner-offset-checkpoint`` (``topic partition offset`` lines): the
first dirty offset of each compacted log in it. A cleaner thread takes the log whose
cleanable dirty ratio is highest among those above their ``min.cleanable.dirty.ratio``
(or with records older than ``max.compaction.lag.ms``), cleans it, and records the new
first dirty offset.

Cleaning states (Kafka's ``LogCleaningState``), one per partition in the table, absent
when idle::

    (idle)       --grab-->   IN_PROGRESS
    IN_PROGRESS  --done-->   (idle)          checkpoint updated
    IN_PROGRESS  --abort-->  ABORTED
    ABORTED      --done-->   (idle)          checkpoint not updated

Kafka's abort blocks until the cleaner thread stops; here ``abort_cleaning`` only marks
the state, because the event loop must never wait for a cleaner thread: the log itself
refuses the cleaner's swap once it was truncated, renamed or closed (``Log.cleaner_fence``),
and the thread sees the mark at its next chunk.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from kpo_broker.log.checkpoints import OffsetCheckpointFile
from kpo_broker.log.cleaner import LogToClean, segments_in_range
from kpo_broker.log.errors import CheckpointFormatError, LogError
from kpo_broker.log.log import Log
from kpo_broker.log.segment import LogSegment
from kpo_kafka.topic_partition import TopicPartition

_log = logging.getLogger(__name__)

#: The per-log-dir checkpoint file of first dirty offsets (Kafka's name).
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"


class LogCleaningState(Enum):
    """A partition's cleaning state while it is in the table (Kafka's names)."""

    IN_PROGRESS = "LogCleaningInProgress"
    ABORTED = "LogCleaningAborted"


#: (state, event) -> next state; None leaves the table (idle).
TRANSITIONS: dict[tuple[LogCleaningState | None, str], LogCleaningState | None] = {
    (None, "grab"): LogCleaningState.IN_PROGRESS,
    (LogCleaningState.IN_PROGRESS, "done"): None,
    (LogCleaningState.IN_PROGRESS, "abort"): LogCleaningState.ABORTED,
    (LogCleaningState.ABORTED, "abort"): LogCleaningState.ABORTED,
    (LogCleaningState.ABORTED, "done"): None,
    (None, "abort"): None,
}


@dataclass(frozen=True)
class OffsetsToClean:
    """Kafka's ``OffsetsToClean``: the dirty range, and whether the checkpoint was invalid."""

    first_dirty_offset: int
    first_uncleanable_dirty_offset: int
    force_update_checkpoint: bool = False


def _non_active_segments_from(segments: tuple[LogSegment, ...], offset: int) -> list[LogSegment]:
    """Return the segments from the one holding ``offset``, active excluded (Kafka's name)."""
    return [s for s in segments_in_range(segments, offset, 2**63 - 1) if s is not segments[-1]]


def cleanable_offsets(
    log: Log, last_clean_offset: int | None, now_ms: int, high_watermark: int
) -> OffsetsToClean:
    """Kafka's ``LogCleanerManager.cleanableOffsets``.

    The first dirty offset is the checkpointed one, reset to the log start offset when it
    is below it or above the LEO. The first uncleanable offset is the lowest of: the high
    watermark (this broker has no transactions, so it is the last stable offset), the
    active segment's base offset, and the base offset of the first dirty segment whose
    largest timestamp is within ``min.compaction.lag.ms`` of now.
    """
    start = log.log_start_offset
    checkpoint = start if last_clean_offset is None else last_clean_offset
    force = False
    if checkpoint < start or checkpoint > log.log_end_offset:
        checkpoint, force = start, True
    segments = log.segments
    candidates = [high_watermark, segments[-1].base_offset]
    lag = max(log.config.min_compaction_lag_ms, 0)
    if lag > 0:
        for segment in _non_active_segments_from(segments, checkpoint):
            if segment.largest_timestamp > now_ms - lag:
                candidates.append(segment.base_offset)
                break
    return OffsetsToClean(checkpoint, max(checkpoint, min(candidates)), force)


def max_compaction_delay(log: Log, first_dirty_offset: int, now_ms: int) -> int:
    """Ms by which the oldest dirty segment is past ``max.compaction.lag.ms`` (0 if not).

    Kafka's ``maxCompactionDelay``: compares the first batch timestamp of each dirty
    non-active segment with now - ``max.compaction.lag.ms``.
    """
    earliest: int | None = None
    for segment in _non_active_segments_from(log.segments, first_dirty_offset):
        header = segment.first_batch_header()
        if header is not None and header.max_timestamp > 0:
            ts = header.max_timestamp
            earliest = ts if earliest is None else min(earliest, ts)
    if earliest is None:
        return 0
    clean_until = now_ms - max(log.config.max_compaction_lag_ms, 0)
    return clean_until - earliest if earliest < clean_until else 0


def calculate_cleanable_bytes(
    segments: tuple[LogSegment, ...], first_dirty_offset: int, uncleanable_offset: int
) -> tuple[int, int]:
    """Kafka's ``calculateCleanableBytes``: ``(first uncleanable segment base, dirty bytes)``."""
    non_active = _non_active_segments_from(segments, uncleanable_offset)
    first_uncleanable = non_active[0] if non_active else segments[-1]
    end = first_uncleanable.base_offset
    dirty = segments_in_range(segments, min(first_dirty_offset, end), end)
    return end, sum(segment.size for segment in dirty)


@dataclass
class PreCleanStats:
    """Kafka's ``PreCleanStats`` of one choice of a log."""

    max_compaction_delay_ms: int = 0
    delayed_partitions: int = 0
    cleanable_partitions: int = 0


class LogCleanerManager:
    """The cleaning states, checkpoints and choice of logs; thread-safe (one lock).

    Args:
        log_dirs: the broker's log dirs (one checkpoint file each).
        logs: returns the current logs (the log manager's).
        high_watermark: returns a partition's high watermark, None when this broker
            does not host it as a replica (such a log is not cleaned).
        skip: returns True for a partition not to clean now (a log-dir move in progress).
    """

    def __init__(
        self,
        log_dirs: Iterable[Path],
        logs: Callable[[], Iterable[Log]],
        high_watermark: Callable[[TopicPartition], int | None],
        skip: Callable[[TopicPartition], bool] = lambda _tp: False,
    ) -> None:
        self.log_dirs = [Path(d) for d in log_dirs]
        self._checkpoints = {
            d: OffsetCheckpointFile(d / CLEANER_OFFSET_CHECKPOINT) for d in self.log_dirs
        }
        self._logs = logs
        self._high_watermark = high_watermark
        self._skip = skip
        self._lock = threading.RLock()
        self._states: dict[TopicPartition, LogCleaningState] = {}
        self._uncleanable: dict[Path, set[TopicPartition]] = {}
        self.dirtiest_log_cleanable_ratio = 0.0
        self.time_of_last_run_ms = time.time_ns() // 1_000_000

    # ----------------------------------------------------------------- states

    def _transition(self, tp: TopicPartition, event: str) -> LogCleaningState | None:
        state = self._states.get(tp)
        if (state, event) not in TRANSITIONS:
            raise ValueError(f"cleaning of {tp}: no transition from {state} on {event}")
        new = TRANSITIONS[(state, event)]
        if new is None:
            self._states.pop(tp, None)
        else:
            self._states[tp] = new
        return state

    def cleaning_state(self, tp: TopicPartition) -> LogCleaningState | None:
        """Return the partition's state, None when idle."""
        with self._lock:
            return self._states.get(tp)

    def abort_cleaning(self, tp: TopicPartition) -> None:
        """Abort a cleaning of ``tp`` in progress (deletion, truncation, move); never blocks."""
        with self._lock:
            self._transition(tp, "abort")

    def is_aborted(self, tp: TopicPartition) -> bool:
        """Tell whether the cleaning of ``tp`` was aborted (Kafka's ``checkCleaningAborted``)."""
        with self._lock:
            return self._states.get(tp) is LogCleaningState.ABORTED

    # ----------------------------------------------------------------- checkpoints

    def all_cleaner_checkpoints(self) -> dict[TopicPartition, int]:
        """First dirty offset of every partition, from every log dir's checkpoint."""
        result: dict[TopicPartition, int] = {}
        with self._lock:
            for checkpoint in self._checkpoints.values():
                try:
                    result.update(checkpoint.read())
                except (CheckpointFormatError, OSError) as exc:
                    _log.error("cannot read %s: %s", checkpoint.path, exc)
        return result

    def update_checkpoints(
        self,
        log_dir: Path,
        update: tuple[TopicPartition, int] | None = None,
        remove: TopicPartition | None = None,
    ) -> None:
        """Rewrite ``log_dir``'s checkpoint: drop partitions without a log, apply the change."""
        with self._lock:
            checkpoint = self._checkpoints.get(Path(log_dir))
            if checkpoint is None:
                return
            live = {log.topic_partition for log in self._logs()}
            try:
                entries = {tp: o for tp, o in checkpoint.read().items() if tp in live}
            except CheckpointFormatError as exc:
                _log.error("rewriting malformed %s: %s", checkpoint.path, exc)
                entries = {}
            if remove is not None:
                entries.pop(remove, None)
            if update is not None:
                entries[update[0]] = update[1]
            checkpoint.write(entries)

    def handle_log_dir_failure(self, log_dir: Path) -> None:
        """Stop checkpointing an offline log dir (Kafka: ``handleLogDirFailure``)."""
        with self._lock:
            self._checkpoints.pop(Path(log_dir), None)

    def alter_checkpoint_dir(self, tp: TopicPartition, source: Path, destination: Path) -> None:
        """Move ``tp``'s checkpoint entry to another log dir (a finished KIP-113 move)."""
        with self._lock:
            checkpoint = self._checkpoints.get(Path(source))
            offset = checkpoint.read().get(tp) if checkpoint is not None else None
            if offset is None:
                return
            self.update_checkpoints(source, remove=tp)
            self.update_checkpoints(destination, update=(tp, offset))
            if tp in self._uncleanable.get(Path(source), set()):
                self._uncleanable[Path(source)].discard(tp)
                self.mark_partition_uncleanable(destination, tp)

    # ----------------------------------------------------------------- uncleanable partitions

    def mark_partition_uncleanable(self, log_dir: Path, tp: TopicPartition) -> None:
        """Stop cleaning ``tp`` (its cleaning failed unexpectedly), as Kafka does."""
        with self._lock:
            self._uncleanable.setdefault(Path(log_dir), set()).add(tp)

    def uncleanable_partitions(self, log_dir: Path) -> set[TopicPartition]:
        """Partitions of ``log_dir`` no longer cleaned after an error."""
        with self._lock:
            return set(self._uncleanable.get(Path(log_dir), set()))

    def maintain_uncleanable_partitions(self) -> None:
        """Forget uncleanable partitions whose log is gone."""
        with self._lock:
            live = {log.topic_partition for log in self._logs()}
            for partitions in self._uncleanable.values():
                partitions.intersection_update(live)
            for log_dir in [d for d, p in self._uncleanable.items() if not p]:
                del self._uncleanable[log_dir]

    # ----------------------------------------------------------------- choosing a log

    def grab_filthiest_compacted_log(
        self, now_ms: int, stats: PreCleanStats | None = None
    ) -> LogToClean | None:
        """Choose the dirtiest cleanable compacted log and mark it in progress.

        Kafka's ``grabFilthiestCompactedLog``: among compacted logs not in progress, not
        uncleanable, hosted (a high watermark is known) and not moving, each gets its
        dirty range; a log qualifies when its cleanable ratio is above its
        ``min.cleanable.dirty.ratio``, or when ``max.compaction.lag.ms`` has passed and
        it has cleanable bytes. The one with the highest ratio is returned.
        """
        stats = stats or PreCleanStats()
        with self._lock:
            self.time_of_last_run_ms = now_ms
            last_clean = self.all_cleaner_checkpoints()
            candidates: list[LogToClean] = []
            for log in self._logs():
                tp = log.topic_partition
                if not log.config.compact or tp in self._states or self._skip(tp):
                    continue
                if tp in self._uncleanable.get(log.dir.parent, set()):
                    continue
                high_watermark = self._high_watermark(tp)
                if high_watermark is None:
                    continue
                try:
                    candidate = self._to_clean(log, last_clean.get(tp), now_ms, high_watermark)
                except (LogError, OSError, ValueError) as exc:
                    _log.warning("cannot compute the dirty range of %s: %s", tp, exc)
                    self.mark_partition_uncleanable(log.dir.parent, tp)
                    continue
                delay = max_compaction_delay(log, candidate.first_dirty_offset, now_ms)
                stats.max_compaction_delay_ms = max(stats.max_compaction_delay_ms, delay)
                if delay > 0:
                    stats.delayed_partitions += 1
                if candidate.total_bytes > 0:
                    candidates.append(candidate)
            self.dirtiest_log_cleanable_ratio = max(
                (c.cleanable_ratio for c in candidates), default=0.0
            )
            cleanable = [
                c
                for c in candidates
                if (c.need_compaction_now and c.cleanable_bytes > 0)
                or c.cleanable_ratio > c.log.config.min_cleanable_dirty_ratio
            ]
            if not cleanable:
                return None
            stats.cleanable_partitions = len(cleanable)
            filthiest = max(cleanable, key=lambda c: c.cleanable_ratio)
            self._transition(filthiest.topic_partition, "grab")
            return filthiest

    def _to_clean(
        self, log: Log, last_clean: int | None, now_ms: int, high_watermark: int
    ) -> LogToClean:
        tp = log.topic_partition
        fence = log.cleaner_fence
        truncated = log.take_lowest_truncation()
        if truncated is not None and last_clean is not None and last_clean > truncated:
            last_clean = truncated
            self.update_checkpoints(log.dir.parent, update=(tp, truncated))
        offsets = cleanable_offsets(log, last_clean, now_ms, high_watermark)
        if offsets.force_update_checkpoint:
            self.update_checkpoints(log.dir.parent, update=(tp, offsets.first_dirty_offset))
        segments = log.segments
        first_dirty = offsets.first_dirty_offset
        clean_bytes = sum(s.size for s in segments_in_range(segments, -1, first_dirty))
        first_uncleanable, cleanable_bytes = calculate_cleanable_bytes(
            segments, first_dirty, offsets.first_uncleanable_dirty_offset
        )
        delay = max_compaction_delay(log, first_dirty, now_ms)
        return LogToClean(
            tp, log, first_dirty, first_uncleanable, clean_bytes, cleanable_bytes, delay > 0, fence
        )

    def done_cleaning(self, tp: TopicPartition, log_dir: Path, end_offset: int | None) -> None:
        """End a cleaning: record ``end_offset`` as the first dirty offset unless aborted.

        ``end_offset`` None means the cleaning failed or was aborted: nothing is recorded.
        """
        with self._lock:
            previous = self._transition(tp, "done")
            if previous is LogCleaningState.IN_PROGRESS and end_offset is not None:
                self.update_checkpoints(log_dir, update=(tp, end_offset))

    def states(self) -> Mapping[TopicPartition, LogCleaningState]:
        """Return a copy of the state table."""
        with self._lock:
            return dict(self._states)
