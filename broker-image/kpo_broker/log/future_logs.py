"""Intra-broker replica moves (KIP-113, seed 000 section 4.3): the future logs of a LogManager.

A replica moving to another log dir of this broker gets a future log
``<topic>-<partition>.<uuid hex>-future`` there; once it has caught up,
``replace_current_with_future_log`` renames it to the partition directory and deletes
the old one. The old log is renamed ``-delete`` before the future log is renamed, so a
crash in between leaves only the future log, promoted at startup.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

from kpo_broker.log.errors import LogDirectoryError
from kpo_broker.log.log import Log
from kpo_broker.log.log_dirs import (
    LogDirNotFoundError,
    carry_over_current_state,
    promote_future_log,
)
from kpo_broker.log.names import TopicPartition, future_dir_name


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class FutureLogsMixin:
    """Future-log bookkeeping mixed into :class:`~kpo_broker.log.manager.LogManager`."""

    log_dirs: list[Path]
    _logs: dict[TopicPartition, Log]
    _future_logs: dict[TopicPartition, Log]
    _preferred_dirs: dict[TopicPartition, Path]

    def _schedule_delete(self, log: Log, now_ms: int | None) -> None:
        raise NotImplementedError

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
        directory = path / future_dir_name(tp, uuid.uuid4().hex)
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
        del self._logs[tp]
        now = _now_ms() if now_ms is None else now_ms
        self._schedule_delete(current, now)
        new_log = promote_future_log(future, now)
        carry_over_current_state(current, new_log)
        self._logs[tp] = new_log
        return new_log
