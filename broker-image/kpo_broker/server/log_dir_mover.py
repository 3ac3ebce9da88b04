"""The alter-log-dirs copier: moves replicas between log dirs of this broker (KIP-113).

Kafka's ``ReplicaAlterLogDirsThread`` (started by ``ReplicaManager.alterReplicaLogDirs``) as
one asyncio task: for every future log of a hosted partition it reads batches from the
partition's current local log at the future log's LEO and appends them to the future log,
throttled by the dynamic broker config ``replica.alter.log.dirs.io.max.bytes.per.second``
(bytes/s; unthrottled when unset). When the future log has caught up with the current log's
LEO, the swap happens in the same synchronous step, so no append can slip in between: the
log manager renames the dirs and the ``Partition`` gets the new log object.

``copy_step`` and ``IoThrottle`` are pure logic over ``Log`` objects; ``LogDirMover``
only schedules them on the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass

from kpo_broker.cancellation import cancel_and_wait
from kpo_broker.log.epoch import UNDEFINED_EPOCH
from kpo_broker.log.errors import UnexpectedAppendOffsetError
from kpo_broker.log.log import Log
from kpo_broker.log.manager import LogManager
from kpo_broker.server.config_admin import DEFAULT_BROKER_ENTITY
from kpo_broker.server.replica_manager import ReplicaManager
from kpo_broker.zk.client import KafkaZkClient

log = logging.getLogger(__name__)

#: Dynamic broker config throttling the copy, bytes/s (Kafka's name).
ALTER_LOG_DIRS_RATE_CONFIG = "replica.alter.log.dirs.io.max.bytes.per.second"
#: Bytes read per copy step when unthrottled (Kafka's ``replica.fetch.max.bytes`` default).
DEFAULT_STEP_BYTES = 1024 * 1024
#: How often the throttle rate is re-read while moves are in progress, s.
RATE_REFRESH_INTERVAL_S = 1.0
#: Pause when a move made no progress, s.
IDLE_RETRY_S = 0.1
#: Pause after a failed step, s.
ERROR_BACKOFF_S = 1.0


class IoThrottle:
    """Paces byte copies to at most ``rate_bytes_per_s`` on average (a leaky bucket).

    Args:
        rate_bytes_per_s: the limit in bytes/s; None or <= 0 means unthrottled.
    """

    def __init__(self, rate_bytes_per_s: float | None = None) -> None:
        self._rate: float | None = None
        self._free_at = 0.0
        self.rate_bytes_per_s = rate_bytes_per_s

    @property
    def rate_bytes_per_s(self) -> float | None:
        """The current limit in bytes/s, None when unthrottled."""
        return self._rate

    @rate_bytes_per_s.setter
    def rate_bytes_per_s(self, rate: float | None) -> None:
        self._rate = rate if rate is not None and rate > 0 else None

    def step_bytes(self, max_bytes: int) -> int:
        """Bytes to copy in the next step: ``max_bytes``, capped to one second's quota."""
        if self._rate is None:
            return max_bytes
        return max(1, min(max_bytes, int(self._rate)))

    def record(self, num_bytes: int, now_s: float) -> float:
        """Account ``num_bytes`` copied at ``now_s`` (monotonic seconds).

        Returns:
            Seconds to wait before the next copy (0 when unthrottled or under the rate).
        """
        if self._rate is None:
            self._free_at = now_s
            return 0.0
        self._free_at = max(self._free_at, now_s) + num_bytes / self._rate
        return max(0.0, self._free_at - now_s)


@dataclass(frozen=True)
class StepResult:
    """What one ``copy_step`` did.

    Attributes:
        copied_bytes: bytes appended to the future log.
        caught_up: the future log's LEO equals the current log's LEO afterwards.
    """

    copied_bytes: int
    caught_up: bool


def reconcile_future_log(current: Log, future: Log) -> None:
    """Truncate the future log where it diverges from the current log.

    The current log may have been truncated by its replica fetcher (KIP-101/KIP-279) or
    had its log start offset raised by retention. As a follower does with its leader,
    the future log asks the current log's epoch cache for the end of its latest epoch
    and truncates there; it restarts empty at the current log start offset when the
    epoch is unknown or its data is no longer in the current log.
    """
    latest_epoch = future.leader_epoch_cache.latest_epoch
    if latest_epoch is not None:
        epoch, end = current.leader_epoch_cache.end_offset_for(latest_epoch, current.log_end_offset)
        if epoch == UNDEFINED_EPOCH:
            future.truncate_fully_and_start_at(current.log_start_offset)
        elif end < future.log_end_offset:
            future.truncate_to(end)
    if future.log_end_offset > current.log_end_offset:
        future.truncate_to(current.log_end_offset)
    if future.log_end_offset < current.log_start_offset:
        future.truncate_fully_and_start_at(current.log_start_offset)


def copy_step(current: Log, future: Log, max_bytes: int) -> StepResult:
    """Copy up to ``max_bytes`` of whole batches from ``current`` to ``future``.

    Reads at the future log's LEO (at least one batch, KIP-74) and appends as a follower
    does, keeping offsets and leader epochs.

    Raises:
        kpo_broker.log errors: a batch failed validation; OSError: disk failure.
    """
    reconcile_future_log(current, future)
    data = current.read(future.log_end_offset, max_bytes).to_bytes()
    copied = 0
    if data:
        try:
            copied = future.append_as_follower(data).valid_bytes
        except UnexpectedAppendOffsetError as exc:
            # The log start offset was inside a batch: restart at that batch.
            future.truncate_fully_and_start_at(exc.first_offset)
            copied = future.append_as_follower(data).valid_bytes
    return StepResult(copied, future.log_end_offset == current.log_end_offset)


class LogDirMover:
    """Runs the moves of every future log of a hosted partition (one asyncio task).

    Args:
        log_manager: the broker's log manager (future logs and the swap).
        replica_manager: the hosted partitions; a move runs only while its partition
            is hosted, and the swap replaces ``Partition.log``.
        read_rate: returns the ``replica.alter.log.dirs.io.max.bytes.per.second`` in
            force (None: unthrottled); called in a worker thread at most once per
            ``RATE_REFRESH_INTERVAL_S`` while moves are in progress (it may read ZooKeeper).
        max_step_bytes: bytes read per step when unthrottled.
    """

    def __init__(
        self,
        log_manager: LogManager,
        replica_manager: ReplicaManager,
        read_rate: Callable[[], float | None] | None = None,
        max_step_bytes: int = DEFAULT_STEP_BYTES,
    ) -> None:
        self.log_manager = log_manager
        self.replica_manager = replica_manager
        self.throttle = IoThrottle()
        self._read_rate = read_rate
        self._max_step_bytes = max_step_bytes
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._rate_read_at = float("-inf")

    def start(self) -> None:
        """Start the copier task on the running loop (idempotent)."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="alter-log-dirs")

    def wake(self) -> None:
        """Tell the copier that a move was added (AlterReplicaLogDirs, LeaderAndIsr)."""
        self._wakeup.set()

    async def stop(self) -> None:
        """Cancel the copier task and wait for it; future logs stay for the next start."""
        task, self._task = self._task, None
        if task is not None:
            await cancel_and_wait(task)

    def run_once(self, now_s: float) -> float:
        """Make one step on every movable future log; swap the caught-up ones.

        Args:
            now_s: monotonic time in s, for the throttle.

        Returns:
            Seconds to wait before the next round: the throttle's delay, or -1.0 when
            there is nothing to move (wait for ``wake``).
        """
        delay = -1.0
        for future in self.log_manager.future_logs():
            tp = future.topic_partition
            partition = self.replica_manager.get_partition(tp)
            current = self.log_manager.get_log(tp.topic, tp.partition)
            if partition is None or current is None:
                continue
            step = copy_step(current, future, self.throttle.step_bytes(self._max_step_bytes))
            if step.caught_up:
                partition.log = self.log_manager.replace_current_with_future_log(*tp)
                log.info("%s moved to log dir %s", tp, partition.log.dir.parent)
            elif step.copied_bytes == 0:
                delay = max(delay, IDLE_RETRY_S)
            delay = max(delay, self.throttle.record(step.copied_bytes, now_s))
        return delay

    async def _refresh_rate(self, now_s: float) -> None:
        if self._read_rate is None or now_s - self._rate_read_at < RATE_REFRESH_INTERVAL_S:
            return
        self._rate_read_at = now_s
        try:
            self.throttle.rate_bytes_per_s = await asyncio.to_thread(self._read_rate)
        except Exception:
            log.exception("cannot read %s; keeping the previous rate", ALTER_LOG_DIRS_RATE_CONFIG)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            self._wakeup.clear()
            if self.log_manager.future_logs():
                await self._refresh_rate(loop.time())
            try:
                delay = self.run_once(loop.time())
            except Exception:
                log.exception("alter-log-dirs step failed")
                delay = ERROR_BACKOFF_S
            if delay < 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wakeup.wait(), RATE_REFRESH_INTERVAL_S)
            else:
                await asyncio.sleep(delay)


def parse_rate(configs: list[dict[str, str]]) -> float | None:
    """Return the first ``replica.alter.log.dirs.io.max.bytes.per.second`` found, bytes/s.

    Args:
        configs: dynamic config maps in precedence order (``/config/brokers/<id>``, then
            ``/config/brokers/<default>``).

    Returns:
        The rate, None when unset or not a positive number.
    """
    for config in configs:
        value = config.get(ALTER_LOG_DIRS_RATE_CONFIG)
        if value is not None:
            try:
                rate = float(value)
            except ValueError:
                return None
            return rate if rate > 0 else None
    return None


def zk_rate_reader(zk: KafkaZkClient, broker_id: int) -> Callable[[], float | None]:
    """Return a ``read_rate`` for ``LogDirMover`` reading this broker's dynamic configs.

    The function reads ``/config/brokers/<broker_id>`` and ``/config/brokers/<default>``
    (blocking ZooKeeper calls) and applies ``parse_rate``.
    """

    def read() -> float | None:
        names = [str(broker_id), DEFAULT_BROKER_ENTITY]
        entities = zk.get_entity_configs("brokers", names)
        return parse_rate([dict(entities[name].config) for name in names])

    return read
