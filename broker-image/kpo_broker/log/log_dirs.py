"""Log dir descriptions (DescribeLogDirs) and the steps of an intra-broker move (KIP-113).

Helpers of ``manager.LogManager``, kept apart so that module stays about bookkeeping.
A move copies a replica into a future log ``<topic>-<partition>.<uuid hex>-future`` in
another log dir of the same broker (AlterReplicaLogDirs, KIP-113); once the future log has
caught up with the current log, it takes the current log's leader epoch history and
log start offset and is renamed to ``<topic>-<partition>`` (``promote_future_log``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from kpo_broker.log.checkpoints import fsync_dir
from kpo_broker.log.errors import LogDirectoryError
from kpo_broker.log.log import Log
from kpo_broker.log.names import log_dir_name
from kpo_kafka.topic_partition import TopicPartition


class LogDirNotFoundError(LogDirectoryError):
    """A path named in a request is not one of this broker's ``log.dirs`` (LOG_DIR_NOT_FOUND)."""


@dataclass(frozen=True)
class PartitionDirInfo:
    """One partition in a DescribeLogDirs answer.

    Attributes:
        topic_partition: the partition.
        size_in_bytes: total size of its segments.
        offset_lag: for a future log, the current log's LEO minus the future log's LEO
            (KIP-113); 0 for a current log.
        is_future: whether this is the future log of an intra-broker move.
    """

    topic_partition: TopicPartition
    size_in_bytes: int
    offset_lag: int = 0
    is_future: bool = False


@dataclass(frozen=True)
class LogDirInfo:
    """One log dir in a DescribeLogDirs answer (KIP-113, totals from KIP-827).

    Attributes:
        path: the log dir.
        partitions: its partitions, sorted, a current log before a future log.
        total_bytes: size of the file system holding it (-1 when offline).
        usable_bytes: free bytes usable by the broker on that file system (-1 when offline).
        online: False once an I/O error took the dir offline (``LogDirFailureChannel``).
    """

    path: Path
    partitions: tuple[PartitionDirInfo, ...]
    total_bytes: int
    usable_bytes: int
    online: bool = True


def describe_partition_log(log: Log, current: Log | None) -> PartitionDirInfo:
    """Describe ``log``; ``current`` is the partition's current log when ``log`` is its future.

    Args:
        log: a current or future log.
        current: None when ``log`` is a current log; else the current log, whose LEO the
            future log's lag is measured against (never negative).
    """
    if current is None:
        return PartitionDirInfo(log.topic_partition, log.size_in_bytes)
    lag = max(current.log_end_offset - log.log_end_offset, 0)
    return PartitionDirInfo(log.topic_partition, log.size_in_bytes, lag, is_future=True)


def carry_over_current_state(current: Log, promoted: Log) -> None:
    """Give a promoted future log the current log's leader epochs and log start offset.

    A leader records its epoch's start in the epoch cache at the LEO without appending
    a batch (KIP-101); the copied batches do not carry such entries, and reopening a log
    drops entries at its LEO, so they are assigned again after the promotion.
    """
    for entry in current.leader_epoch_cache.entries:
        promoted.leader_epoch_cache.assign(entry.epoch, entry.start_offset)
    if current.log_start_offset > promoted.log_start_offset:
        promoted.maybe_increment_log_start_offset(current.log_start_offset, promoted.log_end_offset)


def promote_future_log(future: Log, now_ms: int) -> Log:
    """Flush and close a future log, rename it ``<topic>-<partition>``, and reopen it.

    The rename is fsynced in the parent dir. Reopening is cheap: everything is below the
    recovery point, so only batch headers are read (producer state).

    Returns:
        The reopened log, now the partition's current log.

    Raises:
        OSError: the rename or reopening failed.
        LogDirectoryError: a directory named ``<topic>-<partition>`` is in the way.
    """
    future.flush()
    future.close()
    target = future.dir.with_name(log_dir_name(future.topic_partition))
    if target.exists():
        raise LogDirectoryError(f"cannot promote {future.dir}: {target} exists")
    os.replace(future.dir, target)
    fsync_dir(target.parent)
    return Log.open(
        target,
        future.config,
        recovery_point=future.log_end_offset,
        now_ms=now_ms,
        log_start_offset=future.log_start_offset,
    )
