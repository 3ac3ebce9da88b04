"""The replica manager: every partition replica on this broker, and produce/fetch against them.

As Kafka's ``ReplicaManager``: applies the controller's LeaderAndIsr and StopReplica
requests (fenced by controller epoch and leader epoch), appends produced records on
leaders and waits for ``acks=all``, serves consumer fetches up to the HW and replica
fetches up to the LEO (updating the leader's view of each follower), and proposes ISR
changes, which an :class:`IsrWriter` asks the controller for (AlterPartition, KIP-497).

Partitions whose log dir failed (``LogDirFailureChannel``) are offline here until the
broker restarts (Kafka's ``HostedPartition.Offline``): requests on them are answered
KAFKA_STORAGE_ERROR (56), LeaderAndIsr included, which is how the controller learns
which replicas it must treat as offline.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from kafka import errors as kafka_errors

from kpo_broker.log.config import LogConfig
from kpo_broker.log.dir_failure import KafkaStorageError
from kpo_broker.log.epoch import LeaderEpochCache, deferred_checkpoints
from kpo_broker.log.log import Log
from kpo_broker.log.manager import LogManager
from kpo_broker.server.alter_partition_manager import IsrChangeAbandonedError
from kpo_broker.server.delayed import PartitionWatchers
from kpo_broker.server.errors import StaleControllerEpochError
from kpo_broker.server.metrics import BrokerTopicStats
from kpo_broker.server.partition import (
    IsrChange,
    LeaderAndIsrState,
    Partition,
)
from kpo_kafka.topic_partition import TopicPartition

log = logging.getLogger(__name__)


def now_ms() -> int:
    """Wall-clock time in ms."""
    return int(time.time() * 1000)


#: A LeaderAndIsr's checkpoint writes taking this long or more are logged at INFO, s.
SLOW_CHECKPOINTS_S = 1.0


class IsrWriter(Protocol):
    """Gets a leader's ISR change applied (by the controller, with AlterPartition)."""

    async def write_isr(
        self, tp: TopicPartition, partition: Partition, change: IsrChange
    ) -> int | None:
        """Apply ``change``; return the new partition epoch, or None when it was refused.

        Refused: the controller's state moved on (a stale leader epoch or partition
        epoch), a proposed member is not eligible, or a newer change replaced it.

        Raises:
            IsrChangeAbandonedError: the outcome is unknown (the broker is stopping).
        """
        ...


@dataclass(frozen=True)
class LeaderAndIsrResult:
    """Outcome of one partition in a LeaderAndIsr request.

    Attributes:
        error_code: Kafka error code (0 on success).
        became_leader: this broker now leads the partition under a new epoch.
        became_follower: this broker now follows a new leader (fetcher must restart).
    """

    error_code: int
    became_leader: bool = False
    became_follower: bool = False


class ReplicaManager:
    """The partitions hosted on this broker.

    Args:
        broker_id: this broker's ``broker.id``.
        log_manager: the started log manager.
        isr_writer: gets ISR changes applied (AlterPartition to the controller).
        replica_lag_time_max_ms: ``replica.lag.time.max.ms``.
        log_config_for: topic -> LogConfig for new logs (the topic's effective configs).
        known_partition: whether the metadata cache knows a partition; one known there but
            not hosted here is NOT_LEADER_OR_FOLLOWER rather than UNKNOWN_TOPIC_OR_PARTITION
            (Kafka's ``ReplicaManager.getPartitionOrError``), so a client whose metadata still
            names a replica removed by a reassignment refreshes its metadata.

    Attributes:
        topic_stats: traffic counters of the hosted topics (Kafka's ``BrokerTopicStats``).
        offline_partitions: hosted partitions whose log dir failed.
    """

    def __init__(
        self,
        broker_id: int,
        log_manager: LogManager,
        isr_writer: IsrWriter,
        replica_lag_time_max_ms: int = 30000,
        log_config_for: Callable[[str], LogConfig] | None = None,
        known_partition: Callable[[TopicPartition], bool] | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.known_partition = known_partition
        self.log_manager = log_manager
        self.isr_writer = isr_writer
        self.log_config_for = log_config_for
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.partitions: dict[TopicPartition, Partition] = {}
        self.controller_epoch = -1
        self.watchers = PartitionWatchers()
        self._high_watermarks = log_manager.read_high_watermarks()
        self.topic_stats = BrokerTopicStats()
        self.offline_partitions: set[TopicPartition] = set()
        self._isr_updates: set[asyncio.Future[object]] = set()
        self._leader_and_isr_lock = asyncio.Lock()
        self._epoch_checkpoints_pending: dict[TopicPartition, asyncio.Future[None]] = {}

    # ---------------------------------------------------------- lookups
    def get_partition(self, tp: TopicPartition) -> Partition | None:
        """Return the hosted partition ``tp``, or None."""
        return self.partitions.get(tp)

    def leader_partition(self, tp: TopicPartition, current_leader_epoch: int = -1) -> Partition:
        """Return ``tp`` if this broker leads it at ``current_leader_epoch`` (-1: any).

        Raises:
            kafka.errors.UnknownTopicOrPartitionError: not hosted here, unknown to the metadata.
            kafka.errors.NotLeaderForPartitionError: not hosted here but known to the metadata
                (NOT_LEADER_OR_FOLLOWER, e.g. a replica a reassignment removed).
            KafkaStorageError: hosted in a log dir taken offline (KAFKA_STORAGE_ERROR).
            NotLeaderOrFollowerError, FencedLeaderEpochError, UnknownLeaderEpochError.
        """
        partition = self.partitions.get(tp)
        if partition is None:
            if tp in self.offline_partitions:
                raise KafkaStorageError(f"partition {tp[0]}-{tp[1]} is in an offline log dir")
            if self.known_partition is not None and self.known_partition(tp):
                raise kafka_errors.NotLeaderForPartitionError(f"{tp[0]}-{tp[1]}")
            raise kafka_errors.UnknownTopicOrPartitionError(f"{tp[0]}-{tp[1]}")
        partition.require_leader(current_leader_epoch)
        return partition

    # ---------------------------------------------------------- failing log dirs
    @contextlib.contextmanager
    def guard(self, partition: Partition, what: str) -> Iterator[None]:
        """Run I/O on ``partition``'s log; an ``OSError`` takes its log dir offline.

        Raises:
            KafkaStorageError: the block raised an ``OSError`` (see
                ``LogDirFailureChannel.guard``).
        """
        channel = self.log_manager.failure_channel
        with channel.guard(partition.log.dir, f"{what} {partition.topic}-{partition.partition}"):
            yield

    def handle_log_dir_failure(self, log_dir: Path) -> list[TopicPartition]:
        """Stop serving the partitions whose log is in ``log_dir`` (Kafka: ``handleLogDirFailure``).

        They become offline partitions: every later request on them, LeaderAndIsr
        included, gets KAFKA_STORAGE_ERROR; waiting produce requests are woken (they
        complete with NOT_LEADER_OR_FOLLOWER). The caller stops their fetchers.

        Returns:
            The partitions taken offline, sorted.
        """
        offline = sorted(tp for tp, p in self.partitions.items() if p.log.dir.parent == log_dir)
        for tp in offline:
            self._mark_partition_offline(tp)
        topics = {tp[0] for tp in offline}
        for topic in topics:
            if all(p.topic != topic for p in self.partitions.values()):
                self.topic_stats.remove_topic(topic)
        return offline

    def _mark_partition_offline(self, tp: TopicPartition) -> None:
        self.partitions.pop(tp, None)
        self.offline_partitions.add(tp)
        self._high_watermarks.pop(tp, None)
        self.watchers.notify(tp)

    # ---------------------------------------------------- controller requests
    def check_controller_epoch(self, controller_epoch: int) -> None:
        """Fence requests from stale controllers; remember the newest epoch.

        Raises:
            StaleControllerEpochError: ``controller_epoch`` is older than one already seen.
        """
        if controller_epoch < self.controller_epoch:
            raise StaleControllerEpochError(
                f"controller epoch {controller_epoch} < {self.controller_epoch}"
            )
        self.controller_epoch = controller_epoch

    def become_leader_or_follower(
        self, controller_epoch: int, states: dict[TopicPartition, LeaderAndIsrState]
    ) -> dict[TopicPartition, LeaderAndIsrResult]:
        """Apply a LeaderAndIsr request (Kafka's ``ReplicaManager.becomeLeaderOrFollower``).

        A partition state is applied only when its leader epoch is newer than the one
        held (a request with the same or an older epoch gets STALE_CONTROLLER_EPOCH for
        that partition) and this broker is one of its replicas. A partition in an offline
        log dir, or whose log fails to be created or updated (its dir then goes
        offline), gets KAFKA_STORAGE_ERROR.

        Raises:
            StaleControllerEpochError: the whole request comes from a stale controller.
        """
        self.check_controller_epoch(controller_epoch)
        results: dict[TopicPartition, LeaderAndIsrResult] = {}
        with deferred_checkpoints() as checkpoints:
            self._apply_leader_and_isr_states(states, results)
        failed = checkpoints.flush()
        if failed:
            self._fail_epoch_checkpoints(failed, results)
        return results

    async def become_leader_or_follower_async(
        self, controller_epoch: int, states: dict[TopicPartition, LeaderAndIsrState]
    ) -> dict[TopicPartition, LeaderAndIsrResult]:
        """:meth:`become_leader_or_follower`, its checkpoints written off the event loop.

        A LeaderAndIsr making this broker leader of thousands of partitions writes as many
        fsynced ``leader-epoch-checkpoint`` files (about 0.6-3 s for 1,000 here). Kafka
        writes them on a request handler thread while its other handler threads serve
        other requests; here the writer threads write them while the event loop serves
        other connections (the UpdateMetadata behind this request on the controller's
        connection still waits, as in Kafka). Appends to the partitions whose checkpoint
        is being written wait until it is durable (:meth:`wait_for_epoch_checkpoints`;
        Kafka holds them with the partition's ``leaderIsrUpdateLock``), so no record is
        written under a leader epoch the checkpoint does not hold yet. LeaderAndIsr
        requests are applied one at a time.

        Raises:
            StaleControllerEpochError: the whole request comes from a stale controller.
        """
        async with self._leader_and_isr_lock:
            self.check_controller_epoch(controller_epoch)
            results: dict[TopicPartition, LeaderAndIsrResult] = {}
            with deferred_checkpoints() as checkpoints:
                self._apply_leader_and_isr_states(states, results)
            if not checkpoints.pending:
                return results
            durable: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            held = [tp for tp, r in results.items() if r.error_code == 0]
            for tp in held:
                self._epoch_checkpoints_pending[tp] = durable
            count, began = checkpoints.pending, time.monotonic()
            try:
                failed = await asyncio.to_thread(checkpoints.flush)
                took = time.monotonic() - began
                log.log(
                    logging.INFO if took >= SLOW_CHECKPOINTS_S else logging.DEBUG,
                    "LeaderAndIsr: %d leader epoch checkpoints written in %.2f s",
                    count,
                    took,
                )
            finally:
                for tp in held:
                    if self._epoch_checkpoints_pending.get(tp) is durable:
                        del self._epoch_checkpoints_pending[tp]
                durable.set_result(None)
            if failed:
                self._fail_epoch_checkpoints(failed, results)
            return results

    async def wait_for_epoch_checkpoints(self, partitions: Iterable[TopicPartition]) -> None:
        """Wait until the leader epoch checkpoints being written for ``partitions`` are durable.

        Returns at once unless a LeaderAndIsr applied by
        :meth:`become_leader_or_follower_async` is still writing theirs.
        """
        if not self._epoch_checkpoints_pending:
            return
        pending = {self._epoch_checkpoints_pending.get(tp) for tp in partitions} - {None}
        for durable in pending:
            assert durable is not None
            await asyncio.shield(durable)

    def _apply_leader_and_isr_states(
        self,
        states: dict[TopicPartition, LeaderAndIsrState],
        results: dict[TopicPartition, LeaderAndIsrResult],
    ) -> None:
        """Apply each partition's state, filling ``results``."""
        now = now_ms()
        for tp, state in states.items():
            if self.broker_id not in state.replicas:
                results[tp] = LeaderAndIsrResult(kafka_errors.UnknownTopicOrPartitionError.errno)
                continue
            if tp in self.offline_partitions:
                results[tp] = LeaderAndIsrResult(KafkaStorageError.error_code)
                continue
            partition = self.partitions.get(tp)
            if partition is not None and state.leader_epoch <= partition.leader_epoch:
                results[tp] = LeaderAndIsrResult(kafka_errors.StaleControllerEpochError.errno)
                continue
            try:
                results[tp] = self._apply_leader_and_isr(tp, partition, state, now)
            except KafkaStorageError as exc:
                log.error("skipped the LeaderAndIsr state change of %s-%s: %s", tp[0], tp[1], exc)
                self._mark_partition_offline(tp)
                results[tp] = LeaderAndIsrResult(KafkaStorageError.error_code)
                continue
            self.watchers.notify(tp)

    def _fail_epoch_checkpoints(
        self,
        failed: dict[LeaderEpochCache, OSError],
        results: dict[TopicPartition, LeaderAndIsrResult],
    ) -> None:
        """Take the log dirs of failed leader epoch checkpoint writes offline.

        Their partitions are answered KAFKA_STORAGE_ERROR, as when the write fails during
        the state change itself.
        """
        for tp, result in list(results.items()):
            partition = self.partitions.get(tp)
            if result.error_code != 0 or partition is None:
                continue
            error = failed.get(partition.log.leader_epoch_cache)
            if error is None:
                continue
            try:
                with self.guard(partition, "error while writing the leader epoch checkpoint of"):
                    raise error
            except KafkaStorageError as exc:
                log.error("LeaderAndIsr of %s-%s: %s", tp[0], tp[1], exc)
                self._mark_partition_offline(tp)
                results[tp] = LeaderAndIsrResult(KafkaStorageError.error_code)

    def _apply_leader_and_isr(
        self, tp: TopicPartition, partition: Partition | None, state: LeaderAndIsrState, now: int
    ) -> LeaderAndIsrResult:
        """Create the partition if needed and make it leader or follower under ``state``.

        Raises:
            KafkaStorageError: the log dir is offline, or failed during the change.
        """
        if partition is None:
            partition = self._create_partition(tp, state.is_new)
        with self.guard(partition, "error while applying LeaderAndIsr to"):
            if state.leader == self.broker_id:
                became = partition.make_leader(state, now)
                return LeaderAndIsrResult(0, became_leader=became)
            changed = partition.make_follower(state)
            return LeaderAndIsrResult(0, became_follower=changed)

    def _create_partition(self, tp: TopicPartition, is_new: bool = True) -> Partition:
        config = self.log_config_for(tp[0]) if self.log_config_for else None
        plog: Log = self.log_manager.get_or_create_log(tp[0], tp[1], config, is_new=is_new)
        partition = Partition(
            tp[0], tp[1], self.broker_id, plog, high_watermark=self._high_watermarks.get(tp, 0)
        )
        self.partitions[tp] = partition
        return partition

    def stop_replicas(
        self, controller_epoch: int, partitions: Iterable[tuple[TopicPartition, bool]]
    ) -> dict[TopicPartition, int]:
        """Apply a StopReplica request: stop serving each partition, deleting its log if asked.

        Args:
            controller_epoch: the sender's controller epoch.
            partitions: (topic-partition, delete_partition) pairs.

        Returns:
            Error code per partition (0 on success; KAFKA_STORAGE_ERROR for a partition
            in an offline log dir).

        Raises:
            StaleControllerEpochError: the request comes from a stale controller.
        """
        self.check_controller_epoch(controller_epoch)
        results: dict[TopicPartition, int] = {}
        for tp, delete in partitions:
            if tp in self.offline_partitions:  # Kafka: HostedPartition.Offline
                results[tp] = KafkaStorageError.error_code
                continue
            partition = self.partitions.pop(tp, None)
            self.watchers.notify(tp)
            if delete:
                if self.log_manager.get_log(tp[0], tp[1]) is not None:
                    try:
                        self.log_manager.delete_log(tp[0], tp[1])
                    except KafkaStorageError as exc:
                        log.error("StopReplica of %s-%s: %s", tp[0], tp[1], exc)
                        self._mark_partition_offline(tp)
                        results[tp] = KafkaStorageError.error_code
                        continue
                self._high_watermarks.pop(tp, None)
                if all(p.topic != tp[0] for p in self.partitions.values()):
                    self.topic_stats.remove_topic(tp[0])
            elif partition is not None:
                self._high_watermarks[tp] = partition.high_watermark
            results[tp] = 0
        return results

    # ------------------------------------------------------------ ISR
    async def maybe_expand_isr(
        self, tp: TopicPartition, partition: Partition, follower: int
    ) -> None:
        """Write an ISR expansion for ``follower`` when it has caught up."""
        change = partition.propose_isr_expansion(follower)
        if change is not None:
            await self._write_isr(tp, partition, change)

    async def shrink_isrs(self) -> None:
        """Remove lagging followers from the ISR of every partition led here."""
        now = now_ms()
        writes = []
        for tp, partition in list(self.partitions.items()):
            change = partition.propose_isr_shrink(now, self.replica_lag_time_max_ms)
            if change is not None:
                writes.append(self._write_isr(tp, partition, change))
        if writes:  # together: the ISR writer sends them in one AlterPartition request
            await asyncio.gather(*writes)

    def run_in_background(self, isr_updates: Awaitable[object]) -> None:
        """Let ISR changes (:meth:`maybe_expand_isr`, :meth:`shrink_isrs`) finish on their own.

        A fetch or the periodic shrink check must not wait for the controller's answer,
        which may take long (no controller, a failover); the change stays pending on its
        partition meanwhile (Kafka's ``Partition`` submits to its ``AlterPartitionManager``
        and returns).
        """
        task = asyncio.ensure_future(isr_updates)
        self._isr_updates.add(task)
        task.add_done_callback(self._isr_update_done)

    def _isr_update_done(self, task: asyncio.Future[object]) -> None:
        self._isr_updates.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("ISR update failed", exc_info=task.exception())

    async def _write_isr(self, tp: TopicPartition, partition: Partition, change: IsrChange) -> None:
        """Ask for ``change``; apply it only when the controller accepted it.

        A refused or unanswered change leaves the ISR (and so the HW) as it was: a leader
        the controller already replaced (a zombie after a session expiry: stale broker
        epoch, stale leader epoch) never shrinks the ISR to itself and never acknowledges
        acks=all records on its own (Kafka's ``Partition.handleAlterPartitionError``).
        """
        try:
            version = await self.isr_writer.write_isr(tp, partition, change)
            failure = None
        except IsrChangeAbandonedError as exc:
            version, failure = None, str(exc)
        except Exception as exc:
            log.exception("ISR update of %s-%s failed", *tp)
            version, failure = None, repr(exc)
        if self.partitions.get(tp) is not partition:
            return
        if version is None:
            if partition.apply_isr_change(change, None, unknown=failure is not None):
                self.watchers.notify(tp)
            # A refusal is routine (the controller changed the state, e.g. in a controlled
            # shutdown of thousands of partitions): DEBUG; no answer is worth INFO.
            log.log(
                logging.DEBUG if failure is None else logging.INFO,
                "ISR update of %s-%s to %s %s; awaiting the controller",
                tp[0],
                tp[1],
                list(change.isr),
                "refused" if failure is None else f"not answered: {failure}",
            )
            return
        log.debug("ISR of %s-%s is now %s", tp[0], tp[1], list(change.isr))
        if partition.apply_isr_change(change, version):
            self.watchers.notify(tp)

    # ----------------------------------------------------- checkpoints
    def checkpoint_high_watermarks(self) -> None:
        """Write every hosted partition's HW to its log dir's ``replication-offset-checkpoint``."""
        for tp, partition in self.partitions.items():
            self._high_watermarks[tp] = partition.high_watermark
        self.log_manager.write_high_watermarks(dict(self._high_watermarks))
