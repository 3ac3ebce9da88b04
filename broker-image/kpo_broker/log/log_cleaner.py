"""The log cleaner's background threads (Kafka's ``LogCleaner`` and ``CleanerThread``).

``log.cleaner.threads`` threads each loop: take the dirtiest compacted log from the
``LogCleanerManager``, clean it with their own ``Cleaner`` (offset map of
``log.cleaner.dedupe.buffer.size / log.cleaner.threads`` bytes), record the new first
dirty offset; sleep ``log.cleaner.backoff.ms`` when no log needs cleaning. The threads
are plain OS threads: the broker's event loop keeps serving requests while they read,
filter and write segments; it only waits for a log's lock during the swap of a cleaned
segment (a few renames). A cleaning that fails unexpectedly marks its partition
uncleanable, as Kafka does; an abort (truncation, deletion, move) just ends the round.

Statistics of the last cleaning of each thread feed Kafka's gauges
``kafka.log:type=LogCleaner,name=...`` and ``kafka.log:type=LogCleanerManager,name=...``
(see ``docs/reference/metrics.md``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from kpo_broker.log.cleaner import Cleaner, CleanerStats, LogToClean, Throttler
from kpo_broker.log.cleaner_manager import LogCleanerManager, PreCleanStats
from kpo_broker.log.log import Log, LogCleaningAbortedError
from kpo_broker.log.offset_map import OffsetMap
from kpo_kafka.topic_partition import TopicPartition

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CleanerConfig:
    """The broker's ``log.cleaner.*`` settings (Kafka's ``CleanerConfig``).

    Attributes:
        num_threads: ``log.cleaner.threads`` (default 1).
        dedupe_buffer_size: ``log.cleaner.dedupe.buffer.size`` in bytes, shared by all
            threads (default 128 MiB).
        dedupe_buffer_load_factor: ``log.cleaner.io.buffer.load.factor`` (default 0.9).
        io_buffer_size: ``log.cleaner.io.buffer.size`` in bytes, shared by all threads,
            half for reading (default 512 KiB).
        max_io_bytes_per_second: ``log.cleaner.io.max.bytes.per.second`` (default
            unlimited).
        backoff_ms: ``log.cleaner.backoff.ms`` (default 15000).
        enable: ``log.cleaner.enable`` (default true).
    """

    num_threads: int = 1
    dedupe_buffer_size: int = 128 * 1024 * 1024
    dedupe_buffer_load_factor: float = 0.9
    io_buffer_size: int = 512 * 1024
    max_io_bytes_per_second: float = float("inf")
    backoff_ms: int = 15_000
    enable: bool = True


class _CleanerThread(threading.Thread):
    """One ``kafka-log-cleaner-thread-<n>``."""

    def __init__(self, cleaner_id: int, owner: LogCleaner) -> None:
        super().__init__(name=f"kafka-log-cleaner-thread-{cleaner_id}", daemon=True)
        self.owner = owner
        config = owner.config
        per_thread = min(config.dedupe_buffer_size // max(config.num_threads, 1), 2**31 - 1)
        self.cleaner = Cleaner(
            cleaner_id,
            OffsetMap(per_thread),
            config.io_buffer_size // max(config.num_threads, 1) // 2,
            config.dedupe_buffer_load_factor,
            owner.throttler,
            self._check_done,
        )
        self.last_stats = CleanerStats(end=time.monotonic())
        self.last_pre_clean_stats = PreCleanStats()
        self.failed = False

    def _check_done(self, cleanable: LogToClean) -> None:
        if self.owner.stopping.is_set():
            raise LogCleaningAbortedError("the log cleaner is shutting down")
        if self.owner.manager.is_aborted(cleanable.topic_partition):
            raise LogCleaningAbortedError(f"cleaning of {cleanable.topic_partition} was aborted")
        if cleanable.log.cleaner_fence != cleanable.fence:
            raise LogCleaningAbortedError(f"{cleanable.topic_partition} changed while cleaned")

    def run(self) -> None:
        try:
            while not self.owner.stopping.is_set():
                cleaned = self.owner.clean_filthiest_log(self)
                self.owner.manager.maintain_uncleanable_partitions()
                if not cleaned:
                    self.owner.stopping.wait(self.owner.config.backoff_ms / 1000)
        except Exception:
            self.failed = True
            _log.exception("%s died", self.name)


class LogCleaner:
    """Starts, stops and reports on the cleaner threads of one broker.

    Args:
        config: the ``log.cleaner.*`` settings.
        log_dirs: the broker's log dirs (``cleaner-offset-checkpoint`` in each).
        logs: returns the broker's current logs.
        high_watermark: returns a partition's high watermark (None if not hosted).
        skip: returns True for partitions not to clean now (moving between log dirs).
        on_io_error: called with (log dir, message, error) when a cleaning fails with an
            ``OSError``: the dir goes offline (``LogDirFailureChannel.maybe_add_offline_log_dir``,
            Kafka's ``CleanerThread`` on an ``IOException``).
    """

    def __init__(
        self,
        config: CleanerConfig,
        log_dirs: Iterable[Path],
        logs: Callable[[], Iterable[Log]],
        high_watermark: Callable[[TopicPartition], int | None],
        skip: Callable[[TopicPartition], bool] = lambda _tp: False,
        on_io_error: Callable[[Path, str, OSError], object] | None = None,
    ) -> None:
        self.config = config
        self._on_io_error = on_io_error
        self.manager = LogCleanerManager(log_dirs, logs, high_watermark, skip)
        self.stopping = threading.Event()
        self.throttler = Throttler(
            config.max_io_bytes_per_second, sleep=lambda seconds: self._pause(seconds)
        )
        self.threads: list[_CleanerThread] = []

    def _pause(self, seconds: float) -> None:
        """Throttle sleep that ends early at shutdown."""
        self.stopping.wait(seconds)

    def startup(self) -> None:
        """Start ``log.cleaner.threads`` threads (none when ``log.cleaner.enable`` is false)."""
        if not self.config.enable:
            _log.info("log cleaner disabled (log.cleaner.enable=false)")
            return
        self.stopping.clear()
        self.threads = [_CleanerThread(i, self) for i in range(self.config.num_threads)]
        for thread in self.threads:
            thread.start()
        _log.info("log cleaner started with %d thread(s)", len(self.threads))

    def shutdown(self, timeout_s: float = 30.0) -> None:
        """Stop the threads: a cleaning in progress is aborted at its next chunk."""
        self.stopping.set()
        for thread in self.threads:
            thread.join(timeout_s)
        self.threads = []

    def reconfigure(self, config: CleanerConfig) -> None:
        """Apply changed dynamic ``log.cleaner.*`` broker configs (Kafka's ``reconfigure``).

        The throttle takes the new rate at once; the threads are stopped and new ones
        started with the new settings (a cleaning in progress is aborted and redone).

        Raises:
            ValueError: ``log.cleaner.threads`` below 1, below half or above double the
                current count (Kafka's ``validateReconfiguration``).
        """
        current = self.config.num_threads
        if config.num_threads < 1:
            raise ValueError("Log cleaner threads should be at least 1")
        if config.num_threads < current / 2:
            raise ValueError(
                "Log cleaner threads cannot be reduced to less than half the current value "
                f"{current}"
            )
        if config.num_threads > current * 2:
            raise ValueError(
                f"Log cleaner threads cannot be increased to more than double the current value "
                f"{current}"
            )
        running = bool(self.threads)
        self.shutdown()
        self.config = config
        self.throttler.rate = config.max_io_bytes_per_second
        if running:
            self.startup()

    def clean_filthiest_log(self, thread: _CleanerThread) -> bool:
        """One round of a thread: clean the dirtiest log if any; True if one was cleaned."""
        stats = PreCleanStats()
        now_ms = time.time_ns() // 1_000_000
        cleanable = self.manager.grab_filthiest_compacted_log(now_ms, stats)
        if cleanable is None:
            return False
        thread.last_pre_clean_stats = stats
        end_offset: int | None = None
        tp = cleanable.topic_partition
        _log.info(
            "cleaner %d: cleaning %s, dirty range [%d, %d), cleanable ratio %.2f",
            thread.cleaner.cleaner_id,
            tp,
            cleanable.first_dirty_offset,
            cleanable.first_uncleanable_offset,
            cleanable.cleanable_ratio,
        )
        try:
            end_offset, clean_stats = thread.cleaner.clean(cleanable, now_ms)
            thread.last_stats = clean_stats
            _log.info(
                "cleaner %d cleaned %s [%d, %d): %d -> %d bytes, %d -> %d records in %.3f s",
                thread.cleaner.cleaner_id,
                tp,
                cleanable.first_dirty_offset,
                end_offset,
                clean_stats.bytes_read,
                clean_stats.bytes_written,
                clean_stats.messages_read,
                clean_stats.messages_written,
                clean_stats.elapsed_secs,
            )
        except LogCleaningAbortedError as exc:
            _log.info("cleaning of %s aborted: %s", tp, exc)
        except OSError as exc:
            directory = cleanable.log.dir.parent
            if self._on_io_error is None:
                _log.exception("cleaning of %s failed", tp)
            else:
                self._on_io_error(
                    directory, f"failed to clean up log for {tp} in dir {directory}", exc
                )
        except Exception:
            if cleanable.log.cleaner_fence != cleanable.fence:
                # the log was truncated, deleted or lost segments to retention under it
                _log.info("cleaning of %s aborted: the log changed", tp, exc_info=True)
            else:
                _log.exception("cleaning of %s failed; marking it uncleanable", tp)
                self.manager.mark_partition_uncleanable(cleanable.log.dir.parent, tp)
        finally:
            directory = cleanable.log.dir.parent
            try:
                self.manager.done_cleaning(tp, directory, end_offset)
            except OSError as exc:  # the cleaner-offset-checkpoint write failed
                if self._on_io_error is None:
                    raise
                self._on_io_error(directory, f"failed to checkpoint the cleaning of {tp}", exc)
        return True

    # ----------------------------------------------------------------- hooks of the log manager

    def abort_cleaning(self, tp: TopicPartition) -> None:
        """Abort a cleaning of ``tp`` in progress (never blocks)."""
        self.manager.abort_cleaning(tp)

    def update_checkpoints(self, log_dir: Path, remove: TopicPartition | None = None) -> None:
        """Rewrite ``log_dir``'s checkpoint, dropping ``remove`` (a deleted log)."""
        self.manager.update_checkpoints(log_dir, remove=remove)

    def handle_log_dir_failure(self, log_dir: Path) -> None:
        """Forget an offline log dir's ``cleaner-offset-checkpoint``."""
        self.manager.handle_log_dir_failure(log_dir)

    def alter_checkpoint_dir(self, tp: TopicPartition, source: Path, destination: Path) -> None:
        """Move ``tp``'s first dirty offset to its new log dir (KIP-113 move done)."""
        self.manager.alter_checkpoint_dir(tp, source, destination)

    # ----------------------------------------------------------------- metrics

    def max_buffer_utilization_percent(self) -> int:
        """``max-buffer-utilization-percent``: the fullest offset map of the last cleanings."""
        return int(max((t.last_stats.buffer_utilization for t in self.threads), default=0) * 100)

    def cleaner_recopy_percent(self) -> int:
        """``cleaner-recopy-percent``: bytes written / bytes read by the last cleanings."""
        written = sum(t.last_stats.bytes_written for t in self.threads)
        read = sum(t.last_stats.bytes_read for t in self.threads)
        return int(100 * written / max(read, 1))

    def max_clean_time_secs(self) -> int:
        """``max-clean-time-secs``: the longest of the last cleanings, s."""
        return int(max((t.last_stats.elapsed_secs for t in self.threads), default=0))

    def max_compaction_delay_secs(self) -> int:
        """``max-compaction-delay-secs``: how far past ``max.compaction.lag.ms``, s."""
        delays = (t.last_pre_clean_stats.max_compaction_delay_ms for t in self.threads)
        return int(max(delays, default=0) / 1000)

    def dead_thread_count(self) -> int:
        """``DeadThreadCount``: cleaner threads that died of an unexpected error."""
        return sum(1 for t in self.threads if t.failed or not t.is_alive())

    def gauges(self) -> list[tuple[str, str, dict[str, str], float]]:
        """Return ``(MBean type, name, tags, value)`` of Kafka's cleaner gauges."""
        manager = self.manager
        now_ms = time.time_ns() // 1_000_000
        values: list[tuple[str, str, dict[str, str], float]] = [
            (
                "LogCleaner",
                "max-buffer-utilization-percent",
                {},
                self.max_buffer_utilization_percent(),
            ),
            ("LogCleaner", "cleaner-recopy-percent", {}, self.cleaner_recopy_percent()),
            ("LogCleaner", "max-clean-time-secs", {}, self.max_clean_time_secs()),
            ("LogCleaner", "max-compaction-delay-secs", {}, self.max_compaction_delay_secs()),
            ("LogCleaner", "DeadThreadCount", {}, self.dead_thread_count()),
            (
                "LogCleanerManager",
                "max-dirty-percent",
                {},
                int(100 * manager.dirtiest_log_cleanable_ratio),
            ),
            (
                "LogCleanerManager",
                "time-since-last-run-ms",
                {},
                now_ms - manager.time_of_last_run_ms,
            ),
        ]
        for log_dir in manager.log_dirs:
            values.append(
                (
                    "LogCleanerManager",
                    "uncleanable-partitions-count",
                    {"logDirectory": str(log_dir)},
                    len(manager.uncleanable_partitions(log_dir)),
                )
            )
        return values
