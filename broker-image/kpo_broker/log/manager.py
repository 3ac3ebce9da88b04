"""All partition logs of one broker across its log dirs (Kafka's ``LogManager``).

Each log dir holds ``<topic>-<partition>`` directories plus three checkpoint files
(``replication-offset-checkpoint``, ``recovery-point-offset-checkpoint``,
``log-start-offset-checkpoint``) and a ``.lock`` file held with ``flock`` while the broker
runs, so two brokers cannot share a dir. Deleted logs are renamed
``<topic>-<partition>.<uuid hex>-delete`` and removed after ``file.delete.delay.ms``
(or at the next startup). Single-threaded, plain file I/O.

Intra-broker replica moves (KIP-113): a replica moving to another log dir of this
broker gets a future log ``<topic>-<partition>.<uuid hex>-future`` there; once it has
caught up, ``replace_current_with_future_log`` renames it to the partition directory and
deletes the old one. The old log is renamed ``-delete`` before the future log is
renamed, so a crash in between leaves only the future log, promoted at startup.

Failing log dirs (Kafka's ``LogManager.handleLogDirFailure``): I/O on a dir runs under its
``LogDirFailureChannel.guard``; the first ``OSError`` takes the dir offline. The broker
then calls ``handle_log_dir_failure``, which closes and forgets the dir's logs, releases
its lock and stops checkpointing it; with no live dir left the broker halts (exit 1,
Kafka's ``Exit.halt(1)``). An offline dir is listed by ``describe_log_dirs`` as offline
and gets no new logs until the broker restarts.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from kpo_broker.log.checkpoints import OffsetCheckpointFile
from kpo_broker.log.config import LogConfig
from kpo_broker.log.dir_failure import KafkaStorageError, LogDirFailureChannel
from kpo_broker.log.epoch import deferred_checkpoints
from kpo_broker.log.errors import LogDirectoryError
from kpo_broker.log.log import Log
from kpo_broker.log.log_cleaner import LogCleaner
from kpo_broker.log.log_dirs import (
    LogDirInfo,
    LogDirNotFoundError,
    carry_over_current_state,
    describe_partition_log,
    promote_future_log,
)
from kpo_broker.log.names import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    delete_dir_name,
    future_dir_name,
    is_delete_dir_name,
    is_future_dir_name,
    log_dir_name,
    parse_log_dir_name,
)
from kpo_kafka.topic_partition import TopicPartition

LOCK_FILE = ".lock"
_log = logging.getLogger(__name__)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def halt_broker(message: str) -> None:
    """Log ``message`` as fatal and end the process with status 1 (Kafka's ``Exit.halt(1)``).

    No shutdown hook runs: the logs of the failed dirs cannot be flushed, and the
    others are recovered from their recovery points at the next start.
    """
    _log.critical(message)
    for handler in logging.getLogger().handlers:
        with contextlib.suppress(Exception):
            handler.flush()
    os._exit(1)


def _log_only(message: str) -> None:
    """Log ``message`` only: the halt of a broker already shutting down."""
    _log.error(message)


class LogManager:
    """Creates, loads, checkpoints, cleans and deletes the logs of every log dir.

    Also holds the future logs of intra-broker moves (KIP-113), as Kafka's
    ``LogManager`` does: at most one per partition, in another log dir than its log.

    Args:
        log_dirs: the broker's ``log.dirs``; created if missing.
        default_config: the broker-level ``LogConfig``.
        topic_config: returns a topic's effective config (topic overrides applied);
            ``default_config`` for every topic if None.
        failure_channel: where I/O errors on a log dir are reported; a new one if None.
        halt: called with Kafka's fatal message when no log dir is left online
            (default :func:`halt_broker`, exit 1).

    Attributes:
        failure_channel: the broker's ``LogDirFailureChannel``.
    """

    def __init__(
        self,
        log_dirs: Sequence[Path],
        default_config: LogConfig,
        topic_config: Callable[[str], LogConfig] | None = None,
        failure_channel: LogDirFailureChannel | None = None,
        halt: Callable[[str], None] = halt_broker,
    ) -> None:
        if not log_dirs:
            raise LogDirectoryError("at least one log dir is needed")
        self.log_dirs = [Path(path) for path in log_dirs]
        self.failure_channel = failure_channel or LogDirFailureChannel(self.log_dirs)
        self._halt = halt
        self._dir_locks: dict[Path, int] = {}
        self.default_config = default_config
        self._topic_config = topic_config or (lambda _topic: default_config)
        self._logs: dict[TopicPartition, Log] = {}
        self._log_counts: Counter[Path] = Counter()  # current logs per log dir
        self._pending_deletes: list[tuple[int, Log, Path]] = []
        # Deleted logs are scheduled on the event loop and removed on worker threads.
        self._deletes_lock = threading.Lock()
        self._future_logs: dict[TopicPartition, Log] = {}
        self._preferred_dirs: dict[TopicPartition, Path] = {}
        self.cleaner: LogCleaner | None = None

    def attach_cleaner(self, cleaner: LogCleaner) -> None:
        """Use ``cleaner`` for compacted logs; it is told of deletions and moves.

        Kafka's ``LogManager`` owns its ``LogCleaner``; here the broker builds it once the
        replica manager (high watermarks) exists, then starts it with ``cleaner.startup``.
        ``shutdown`` stops it before closing the logs.
        """
        self.cleaner = cleaner

    def current_logs(self) -> list[Log]:
        """Every live log, unordered; safe to call from a worker thread."""
        return list(self._logs.values())

    def _lock(self, log_dir: Path) -> None:
        fd = os.open(log_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            raise LogDirectoryError(f"log dir {log_dir} is in use by another process") from exc
        self._dir_locks[log_dir] = fd

    def _unlock(self, log_dir: Path) -> None:
        fd = self._dir_locks.pop(log_dir, None)
        if fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
            with contextlib.suppress(OSError):
                os.close(fd)

    # ----------------------------------------------------------------- online and offline dirs

    @property
    def live_log_dirs(self) -> list[Path]:
        """The log dirs still online, in ``log.dirs`` order."""
        offline = set(self.failure_channel.offline_dirs)
        return [d for d in self.log_dirs if d not in offline]

    def handle_log_dir_failure(self, log_dir: Path) -> list[TopicPartition]:
        """Stop serving every log of an offline dir (Kafka's ``LogManager.handleLogDirFailure``).

        Its current and future logs are closed (files that cannot be closed cleanly are
        abandoned) and forgotten, the cleaner forgets them, its lock is released and it
        is no longer checkpointed. When no dir is left online the broker halts.

        Returns:
            The partitions whose current log was in ``log_dir``, sorted.
        """
        log_dir = Path(log_dir)
        _log.warning("stopping serving logs in dir %s", log_dir)
        if not self.live_log_dirs:
            self._halt(
                "Shutdown broker because all log dirs in "
                f"{', '.join(str(d) for d in self.log_dirs)} have failed"
            )
        offline = sorted(tp for tp, log in self._logs.items() if log.dir.parent == log_dir)
        for tp in offline:
            log = self._remove_log(tp)
            if log is not None:
                self._abandon(log)
        offline_futures = sorted(
            tp for tp, log in self._future_logs.items() if log.dir.parent == log_dir
        )
        for tp in offline_futures:
            self._abandon(self._future_logs.pop(tp))
        if self.cleaner is not None:
            self.cleaner.handle_log_dir_failure(log_dir)
            for tp in offline:
                self.cleaner.abort_cleaning(tp)
        with self._deletes_lock:
            lost = [e for e in self._pending_deletes if e[2].parent == log_dir]
            self._pending_deletes = [e for e in self._pending_deletes if e[2].parent != log_dir]
        for _, log, _ in lost:
            self._abandon(log)
        self._preferred_dirs = {
            tp: path for tp, path in self._preferred_dirs.items() if path != log_dir
        }
        self._unlock(log_dir)
        _log.warning(
            "logs of %s and future logs of %s are offline after the failure of log dir %s",
            [str(tp) for tp in offline],
            [str(tp) for tp in offline_futures],
            log_dir,
        )
        return offline

    @staticmethod
    def _abandon(log: Log) -> None:
        """Close a log of a failed dir, ignoring further errors (Kafka's ``closeHandlers``)."""
        try:
            log.close()
        except Exception as exc:
            _log.debug("closing %s after its dir failed: %s", log.dir, exc)

    def _guard(self, path: Path, what: str) -> contextlib.AbstractContextManager[None]:
        return self.failure_channel.guard(path, what)

    def startup(self, now_ms: int | None = None) -> None:
        """Lock every log dir and load every ``<topic>-<partition>`` directory in it.

        Directories ending in ``-delete`` are removed; ``-future`` directories are loaded
        as future logs (KIP-113), or promoted to the current log when the partition has
        none (a crash during the swap); other directories whose name is not a partition
        are skipped with a warning. Each log is recovered from its checkpointed recovery
        point and log start offset.

        A dir that cannot be created, locked or read (``OSError``) goes offline and the
        others load (Kafka's ``createAndValidateLogDirs`` and ``loadLogs``).

        Raises:
            LogDirectoryError: a dir is locked by another process, a partition exists
                in two log dirs, or no log dir could be loaded.
            CheckpointFormatError: a checkpoint file is malformed.
        """
        now = _now_ms() if now_ms is None else now_ms
        for log_dir in self.log_dirs:
            current: dict[TopicPartition, Log] = {}
            futures: dict[TopicPartition, Log] = {}
            try:
                self._load_dir(log_dir, now, current, futures)
            except OSError as exc:
                self.failure_channel.maybe_add_offline_log_dir(
                    log_dir, f"cannot load log dir {log_dir}", exc
                )
                for log in [*current.values(), *futures.values()]:
                    self._abandon(log)
                self._unlock(log_dir)
                continue
            for tp, log in current.items():
                self._add_log(tp, log)
            self._future_logs.update(futures)
        if not self.live_log_dirs:
            raise LogDirectoryError(
                f"none of the log dirs {', '.join(str(d) for d in self.log_dirs)} can be used"
            )
        for tp in [tp for tp in self._future_logs if tp not in self._logs]:
            _log.info("promoting future log %s: its current log was already removed", tp)
            self._add_log(tp, promote_future_log(self._future_logs.pop(tp), now))

    def _load_dir(
        self,
        log_dir: Path,
        now: int,
        current: dict[TopicPartition, Log],
        futures: dict[TopicPartition, Log],
    ) -> None:
        """Lock ``log_dir`` and open its logs into ``current`` and ``futures``.

        Raises:
            OSError: the dir cannot be created, locked or read.
            LogDirectoryError, CheckpointFormatError: as :meth:`startup`.
        """
        log_dir.mkdir(parents=True, exist_ok=True)
        self._lock(log_dir)
        recovery_points = OffsetCheckpointFile(log_dir / RECOVERY_POINT_CHECKPOINT).read()
        start_offsets = OffsetCheckpointFile(log_dir / LOG_START_OFFSET_CHECKPOINT).read()
        # Loading truncates leader epoch caches to each log's end (an empty log loses its
        # entries): their checkpoints are written together at the end, concurrently, not
        # one fsync after another (Kafka 3.8+ writes them asynchronously, KAFKA-16541).
        with deferred_checkpoints() as checkpoints:
            self._open_logs(log_dir, now, recovery_points, start_offsets, current, futures)
        failed = checkpoints.flush()
        if failed:
            raise next(iter(failed.values()))

    def _open_logs(
        self,
        log_dir: Path,
        now: int,
        recovery_points: Mapping[TopicPartition, int],
        start_offsets: Mapping[TopicPartition, int],
        current: dict[TopicPartition, Log],
        futures: dict[TopicPartition, Log],
    ) -> None:
        """Open every partition directory of ``log_dir`` (see :meth:`_load_dir`)."""
        for child in sorted(log_dir.iterdir()):
            if not child.is_dir():
                continue
            if is_delete_dir_name(child.name):
                _log.info("removing deleted log %s", child)
                shutil.rmtree(child, ignore_errors=True)
                continue
            try:
                tp = parse_log_dir_name(child.name)
            except LogDirectoryError:
                _log.warning("skipping %s: not a partition directory", child)
                continue
            loaded = futures if is_future_dir_name(child.name) else current
            earlier = (self._future_logs if loaded is futures else self._logs).get(tp)
            if earlier is not None:
                raise LogDirectoryError(f"{tp} found in both {earlier.dir.parent} and {log_dir}")
            loaded[tp] = Log.open(
                child,
                self._topic_config(tp.topic),
                recovery_point=recovery_points.get(tp, 0),
                now_ms=now,
                log_start_offset=start_offsets.get(tp, 0),
            )

    def _add_log(self, tp: TopicPartition, log: Log) -> None:
        """Make ``log`` the partition's current log and count it in its log dir."""
        self._logs[tp] = log
        self._log_counts[log.dir.parent] += 1

    def _remove_log(self, tp: TopicPartition) -> Log | None:
        """Take the partition's current log out (before it is renamed); None if none."""
        log = self._logs.pop(tp, None)
        if log is not None:
            self._log_counts[log.dir.parent] -= 1
        return log

    def get_log(self, topic: str, partition: int) -> Log | None:
        """Return the partition's log, None if this broker has none."""
        return self._logs.get(TopicPartition(topic, partition))

    def all_logs(self) -> list[Log]:
        """Every live log, sorted by topic and partition."""
        return [self._logs[tp] for tp in sorted(self._logs)]

    def log_dir_of(self, topic: str, partition: int) -> Path | None:
        """Return the log dir holding the partition, None if there is no such log."""
        log = self.get_log(topic, partition)
        return log.dir.parent if log is not None else None

    def get_or_create_log(
        self,
        topic: str,
        partition: int,
        config: LogConfig | None = None,
        log_dir: Path | None = None,
        now_ms: int | None = None,
        is_new: bool = True,
    ) -> Log:
        """Return the partition's log, creating it if absent (on LeaderAndIsr).

        Args:
            topic: topic name.
            partition: partition index.
            config: config of a new log (the topic's config if None).
            log_dir: where to create it; by default the dir an AlterReplicaLogDirs named
                for it (``set_preferred_log_dir``), else the online log dir with the
                fewest partitions (ties go to the earlier dir in ``log_dirs``), as Kafka does.
            now_ms: creation time in ms.
            is_new: the partition was just created (LeaderAndIsr ``is_new``). An absent
                log of an older partition is not created while a dir is offline: it may
                be in that dir (Kafka's ``getOrCreateLog``).

        Raises:
            LogDirectoryError: ``log_dir`` is not one of this broker's log dirs, or the
                topic name is illegal.
            KafkaStorageError: no log dir is online, ``log_dir`` is offline, a dir is
                offline and the partition is not new, or creating the log failed with an
                I/O error (its dir is then offline).
        """
        tp = TopicPartition(topic, partition)
        existing = self._logs.get(tp)
        if existing is not None:
            return existing
        offline_dirs = self.failure_channel.offline_dirs
        if not is_new and offline_dirs:
            raise KafkaStorageError(
                f"cannot create a log for {tp}: log dirs {[str(d) for d in offline_dirs]} "
                "are offline"
            )
        if log_dir is None:
            log_dir = self._preferred_dirs.get(tp)
        live = self.live_log_dirs
        if log_dir is None:
            if not live:
                raise KafkaStorageError(f"cannot create a log for {tp}: no log dir is online")
            log_dir = min(live, key=lambda path: self._log_counts[path])
        elif Path(log_dir) not in self.log_dirs:
            raise LogDirectoryError(f"{log_dir} is not a log dir of this broker")
        elif Path(log_dir) not in live:
            raise KafkaStorageError(f"cannot create a log for {tp}: {log_dir} is offline")
        directory = Path(log_dir) / log_dir_name(tp)
        parse_log_dir_name(directory.name)
        with self._guard(Path(log_dir), f"error while creating log for {tp} in dir {log_dir}"):
            log = Log.open(directory, config or self._topic_config(topic), now_ms=now_ms)
        self._add_log(tp, log)
        self._preferred_dirs.pop(tp, None)
        return log

    def delete_log(self, topic: str, partition: int, now_ms: int | None = None) -> bool:
        """Remove the partition's log (StopReplica with delete, topic deletion).

        The directory is renamed ``<topic>-<partition>.<uuid hex>-delete`` at once, then
        its files are closed and removed after ``file.delete.delay.ms``. A future log of
        the partition is deleted too.

        Returns:
            False if there was no such log.
        """
        tp = TopicPartition(topic, partition)
        self._preferred_dirs.pop(tp, None)
        self.abort_future_log(topic, partition, now_ms)
        log = self._remove_log(tp)
        if log is None:
            return False
        if self.cleaner is not None:
            self.cleaner.abort_cleaning(tp)
        self._schedule_delete(log, now_ms)
        if self.cleaner is not None:
            with self._guard(log.dir.parent, f"error while deleting {tp}"):
                self.cleaner.update_checkpoints(log.dir.parent, remove=tp)
        return True

    def _schedule_delete(self, log: Log, now_ms: int | None) -> None:
        """Rename ``log`` to ``-delete`` now; close and remove it after the delete delay."""
        renamed = log.dir.with_name(delete_dir_name(log.topic_partition, uuid.uuid4().hex))
        with self._guard(log.dir.parent, f"error while deleting {log.topic_partition}"):
            log.rename_dir(renamed)
        now = _now_ms() if now_ms is None else now_ms
        with self._deletes_lock:
            self._pending_deletes.append((now + log.config.file_delete_delay_ms, log, renamed))
        self._purge_deleted_logs(now)

    def has_due_deletes(self, now_ms: int) -> bool:
        """Tell whether a deleted log's ``file.delete.delay.ms`` has run out (cheap)."""
        with self._deletes_lock:
            return any(deadline <= now_ms for deadline, _, _ in self._pending_deletes)

    def delete_due_logs(self, now_ms: int) -> None:
        """Close and remove the deleted logs whose delete delay has run out.

        Kafka's ``kafka-delete-logs`` task (``LogManager.deleteLogs``): a deleted log's
        ``-delete`` directory goes ``file.delete.delay.ms`` after the deletion, not at the
        next retention check.
        """
        self._purge_deleted_logs(now_ms)

    def _purge_deleted_logs(self, now_ms: int | None) -> None:
        with self._deletes_lock:
            due = [e for e in self._pending_deletes if now_ms is None or e[0] <= now_ms]
            self._pending_deletes = [e for e in self._pending_deletes if e not in due]
        for _, log, path in due:
            try:
                with self._guard(path, f"error while deleting {path}"):
                    log.close()
            except KafkaStorageError:
                pass
            shutil.rmtree(path, ignore_errors=True)

    # ----------------------------------------------------------------- future logs (KIP-113)

    def _require_log_dir(self, log_dir: Path) -> Path:
        path = Path(log_dir)
        if path not in self.log_dirs:
            raise LogDirNotFoundError(f"{log_dir} is not a log dir of this broker")
        return path

    def set_preferred_log_dir(self, topic: str, partition: int, log_dir: Path) -> None:
        """Remember that a not yet created log of the partition goes to ``log_dir``.

        AlterReplicaLogDirs for a replica this broker does not host yet (KIP-113): the log
        is created there when LeaderAndIsr arrives (see ``get_or_create_log``).

        Raises:
            LogDirNotFoundError: ``log_dir`` is not one of this broker's log dirs.
        """
        self._preferred_dirs[TopicPartition(topic, partition)] = self._require_log_dir(log_dir)

    def get_future_log(self, topic: str, partition: int) -> Log | None:
        """Return the partition's future log (a move in progress), None if none."""
        return self._future_logs.get(TopicPartition(topic, partition))

    def future_logs(self) -> list[Log]:
        """Every future log, sorted by topic and partition."""
        return [self._future_logs[tp] for tp in sorted(self._future_logs)]

    def create_future_log(
        self, topic: str, partition: int, log_dir: Path, now_ms: int | None = None
    ) -> Log:
        """Return the partition's future log in ``log_dir``, creating it if needed (KIP-113).

        A future log already in another dir is aborted first (the destination changed).
        The new future log starts empty at the current log's log start offset.

        Raises:
            LogDirNotFoundError: ``log_dir`` is not one of this broker's log dirs.
            LogDirectoryError: the partition has no current log, or it is in ``log_dir``.
            KafkaStorageError: ``log_dir`` is offline or failed while creating the log.
        """
        tp = TopicPartition(topic, partition)
        path = self._require_log_dir(log_dir)
        current = self._logs.get(tp)
        if current is None:
            raise LogDirectoryError(f"{tp} has no log on this broker")
        if current.dir.parent == path:
            raise LogDirectoryError(f"{tp} is already in {path}")
        existing = self._future_logs.get(tp)
        if existing is not None:
            if existing.dir.parent == path:
                return existing
            self.abort_future_log(topic, partition, now_ms)
        self.failure_channel.check_online(path)
        directory = path / future_dir_name(tp, uuid.uuid4().hex)
        with self._guard(path, f"error while creating future log for {tp} in dir {path}"):
            future = Log.open(directory, current.config, now_ms=now_ms)
            if current.log_start_offset > 0:
                future.truncate_fully_and_start_at(current.log_start_offset)
        self._future_logs[tp] = future
        return future

    def abort_future_log(self, topic: str, partition: int, now_ms: int | None = None) -> bool:
        """Stop a move: delete the partition's future log (renamed ``-delete`` first).

        Returns:
            False if there was no future log.
        """
        future = self._future_logs.pop(TopicPartition(topic, partition), None)
        if future is None:
            return False
        self._schedule_delete(future, now_ms)
        return True

    def replace_current_with_future_log(
        self, topic: str, partition: int, now_ms: int | None = None
    ) -> Log:
        """Finish a move (KIP-113): the future log becomes the partition's log.

        The caller checks that the future log's LEO equals the current log's LEO. The
        current log's leader epoch entries and log start offset are carried over; the
        current directory is renamed ``-delete`` (its files stay open for in-flight reads
        until ``file.delete.delay.ms``), then the future directory is renamed
        ``<topic>-<partition>`` and reopened.

        Returns:
            The partition's new log (the caller swaps it into the ``Partition``).

        Raises:
            LogDirectoryError: no current or no future log, or their LEOs differ.
        """
        tp = TopicPartition(topic, partition)
        current, future = self._logs.get(tp), self._future_logs.get(tp)
        if current is None or future is None:
            raise LogDirectoryError(f"{tp} has no move in progress")
        if current.log_end_offset != future.log_end_offset:
            raise LogDirectoryError(
                f"{tp}: future LEO {future.log_end_offset} != LEO {current.log_end_offset}"
            )
        del self._future_logs[tp]
        self._remove_log(tp)
        now = _now_ms() if now_ms is None else now_ms
        self._schedule_delete(current, now)
        if self.cleaner is not None:
            self.cleaner.abort_cleaning(tp)
        source = current.dir.parent
        new_log = promote_future_log(future, now)
        carry_over_current_state(current, new_log)
        self._add_log(tp, new_log)
        if self.cleaner is not None:
            self.cleaner.alter_checkpoint_dir(tp, source, new_log.dir.parent)
        return new_log

    # ----------------------------------------------------------------- checkpoints, retention

    def update_topic_config(self, topic: str, config: LogConfig) -> None:
        """Apply a changed topic config to every local partition of ``topic``."""
        for tp, log in self._logs.items():
            if tp.topic == topic:
                log.update_config(config)

    def _logs_by_dir(self, with_future: bool = False) -> dict[Path, list[Log]]:
        """Return the logs of each online dir (offline dirs are left out)."""
        grouped: dict[Path, list[Log]] = {path: [] for path in self.live_log_dirs}
        futures = list(self._future_logs.values()) if with_future else []
        for log in [*self._logs.values(), *futures]:
            if log.dir.parent in grouped:
                grouped[log.dir.parent].append(log)
        return grouped

    def read_high_watermarks(self) -> dict[TopicPartition, int]:
        """Read ``replication-offset-checkpoint`` of every log dir and merge them.

        Raises:
            CheckpointFormatError: a file is malformed.
        """
        result: dict[TopicPartition, int] = {}
        for log_dir in self.live_log_dirs:
            try:
                with self._guard(log_dir, f"error while reading {REPLICATION_OFFSET_CHECKPOINT}"):
                    checkpoint = OffsetCheckpointFile(log_dir / REPLICATION_OFFSET_CHECKPOINT)
                    result.update(checkpoint.read())
            except KafkaStorageError:
                continue
        return result

    def write_high_watermarks(self, high_watermarks: Mapping[TopicPartition, int]) -> None:
        """Write each log dir's ``replication-offset-checkpoint`` for the logs it holds.

        Partitions without a local log are ignored; local logs absent from the mapping
        are left out of the file. Offline dirs are skipped; a dir whose write fails goes
        offline (Kafka's ``checkpointHighWatermarks``) and the others are still written.
        """
        for log_dir, logs in self._logs_by_dir().items():
            entries = {
                log.topic_partition: high_watermarks[log.topic_partition]
                for log in logs
                if log.topic_partition in high_watermarks
            }
            with (
                contextlib.suppress(KafkaStorageError),
                self._guard(log_dir, f"error while writing {REPLICATION_OFFSET_CHECKPOINT}"),
            ):
                OffsetCheckpointFile(log_dir / REPLICATION_OFFSET_CHECKPOINT).write(entries)

    def checkpoint_recovery_points_and_log_start_offsets(self) -> None:
        """Write each log dir's recovery point and log start offset checkpoints.

        Future logs are included, in the dir holding them. Offline dirs are skipped; a
        dir whose write fails goes offline and the others are still written.
        """
        for log_dir, logs in self._logs_by_dir(with_future=True).items():
            with (
                contextlib.suppress(KafkaStorageError),
                self._guard(
                    log_dir,
                    "error while writing the recovery point and log start offset checkpoints",
                ),
            ):
                OffsetCheckpointFile(log_dir / RECOVERY_POINT_CHECKPOINT).write(
                    {log.topic_partition: log.recovery_point for log in logs}
                )
                OffsetCheckpointFile(log_dir / LOG_START_OFFSET_CHECKPOINT).write(
                    {log.topic_partition: log.log_start_offset for log in logs}
                )

    def cleanup_logs(self, now_ms: int, high_watermarks: Mapping[TopicPartition, int]) -> int:
        """Run retention on every log whose high watermark is given (Kafka's log cleanup task).

        Logs missing from ``high_watermarks`` keep all their segments this round. Files of
        earlier deletions whose ``file.delete.delay.ms`` passed are removed.

        Returns:
            The number of segments deleted.

        A log whose segment deletion fails with an I/O error takes its dir offline; the
        other logs are still cleaned.
        """
        deleted = 0
        for tp, log in list(self._logs.items()):
            with (
                contextlib.suppress(KafkaStorageError),
                self._guard(log.dir, f"error while deleting segments of {tp}"),
            ):
                if tp in high_watermarks:
                    deleted += log.delete_old_segments(now_ms, high_watermarks[tp])
                else:
                    log.purge_deleted_segments(now_ms)
        for future in list(self._future_logs.values()):
            with (
                contextlib.suppress(KafkaStorageError),
                self._guard(future.dir, f"error while deleting segments of {future.dir.name}"),
            ):
                future.purge_deleted_segments(now_ms)
        self._purge_deleted_logs(now_ms)
        return deleted

    def flush_dirty_logs(self, now_ms: int) -> int:
        """Fsync every log whose last fsync is ``flush.ms`` old (Kafka's ``flushDirtyLogs``).

        Returns:
            The number of logs flushed (a log whose fsync fails takes its dir offline).
        """
        flushed = 0
        for log in list(self._logs.values()):
            with (
                contextlib.suppress(KafkaStorageError),
                self._guard(log.dir, f"error while flushing {log.topic_partition}"),
            ):
                flushed += 1 if log.flush_if_due(now_ms) else 0
        return flushed

    def describe_log_dirs(self) -> list[LogDirInfo]:
        """Per log dir: each partition's size in bytes and the file system's capacity.

        Future logs (KIP-113) are listed in their dir with ``is_future`` and their lag
        behind the current log's LEO. Offline dirs are listed with ``online`` false and
        nothing else (DescribeLogDirs answers KAFKA_STORAGE_ERROR for them).
        """
        result = []
        grouped = self._logs_by_dir(with_future=True)
        for log_dir in self.log_dirs:
            logs = grouped.get(log_dir)
            if logs is None:
                result.append(LogDirInfo(log_dir, (), -1, -1, online=False))
                continue
            try:
                with self._guard(log_dir, "error while describing the log dir"):
                    usage = shutil.disk_usage(log_dir)
            except KafkaStorageError:
                result.append(LogDirInfo(log_dir, (), -1, -1, online=False))
                continue
            partitions = tuple(
                sorted(
                    (
                        describe_partition_log(
                            log,
                            self._logs.get(log.topic_partition)
                            if self._future_logs.get(log.topic_partition) is log
                            else None,
                        )
                        for log in logs
                    ),
                    key=lambda info: (info.topic_partition, info.is_future),
                )
            )
            result.append(LogDirInfo(log_dir, partitions, usage.total, usage.free))
        return result

    def shutdown(self) -> None:
        """Flush and close every log, checkpoint it, and release the dir locks.

        Writes the recovery point and log start offset checkpoints after the flush, and
        finishes pending log deletions. Offline dirs were closed when they failed; a log
        whose flush fails now takes its dir offline and is abandoned, without failing the
        shutdown of the others (Kafka's ``LogManager.shutdown``), and without halting.
        """
        if self.cleaner is not None:
            self.cleaner.shutdown()
        self._halt = _log_only
        every = [*self._logs.values(), *self._future_logs.values()]
        for log in every:
            with (
                contextlib.suppress(KafkaStorageError),
                self._guard(log.dir, f"error while flushing {log.dir.name} at shutdown"),
            ):
                log.flush()
        self.checkpoint_recovery_points_and_log_start_offsets()
        for log in every:
            self._abandon(log)
        self._purge_deleted_logs(None)
        self._logs.clear()
        self._log_counts.clear()
        self._future_logs.clear()
        for log_dir in list(self._dir_locks):
            self._unlock(log_dir)
