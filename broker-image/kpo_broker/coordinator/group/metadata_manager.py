"""Groups and committed offsets kept in ``__consumer_offsets`` (Kafka's ``GroupMetadataManager``).

Every group lives in one partition of ``__consumer_offsets`` (:func:`partition_for`);
the broker leading that partition is the group's coordinator. Group metadata and
offset commits are appended to that partition as records (:mod:`.records`) with
``offsets.commit.required.acks`` (default -1: every ISR member) and acknowledged only
when the append is, within ``offsets.commit.timeout.ms``. On becoming leader of a
partition its log is read from the start into the cache (the partition is *loading*:
COORDINATOR_LOAD_IN_PROGRESS until done); on losing leadership its groups are
dropped (NOT_COORDINATOR). Loads and unloads run one at a time, in the order the
leadership changes arrived, as Kafka's single-threaded ``group-metadata-manager``
scheduler runs them; a change older than the partition's newest coordinator epoch
(its leader epoch) is ignored.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafka.record.default_records import DefaultRecordBatch

from kpo_broker.coordinator.group.errors import (
    Errors,
    convert_append_error,
    convert_group_append_error,
)
from kpo_broker.coordinator.group.group import CommittedOffset, GroupMetadata, now_ms
from kpo_broker.coordinator.group.records import (
    GROUP_METADATA_TOPIC_NAME,
    GroupKey,
    GroupRecord,
    OffsetAndMetadata,
    OffsetKey,
    RecordFormatError,
    build_batch,
    group_metadata_key,
    group_metadata_value,
    offset_commit_key,
    offset_commit_value,
    partition_for,
    read_group_value,
    read_key,
    read_offset_value,
)
from kpo_broker.coordinator.group.states import GroupState
from kpo_broker.log.records import iter_batches
from kpo_broker.server import produce
from kpo_broker.server.errors import error_code_of
from kpo_broker.server.replica_manager import ReplicaManager
from kpo_kafka.topic_partition import TopicPartition

if TYPE_CHECKING:
    from kpo_broker.config import BrokerConfig

log = logging.getLogger(__name__)

GroupCallback = Callable[[GroupMetadata], None]


@dataclass(frozen=True)
class OffsetConfig:
    """The offset manager's settings (Kafka's ``OffsetConfig``).

    Attributes:
        num_partitions: ``offsets.topic.num.partitions``.
        replication_factor: ``offsets.topic.replication.factor``.
        segment_bytes: ``offsets.topic.segment.bytes``.
        compression_codec: ``offsets.topic.compression.codec`` (0 none ... 4 zstd).
        commit_timeout_ms: ``offsets.commit.timeout.ms``.
        commit_required_acks: ``offsets.commit.required.acks``.
        retention_ms: ``offsets.retention.minutes`` in ms.
        retention_check_interval_ms: ``offsets.retention.check.interval.ms``.
        load_buffer_size: ``offsets.load.buffer.size``.
        max_metadata_size: ``offset.metadata.max.bytes``.
    """

    num_partitions: int = 50
    replication_factor: int = 3
    segment_bytes: int = 104857600
    compression_codec: int = 0
    commit_timeout_ms: int = 5000
    commit_required_acks: int = -1
    retention_ms: int = 7 * 24 * 3600 * 1000
    retention_check_interval_ms: int = 600000
    load_buffer_size: int = 5242880
    max_metadata_size: int = 4096

    @classmethod
    def from_broker_config(cls, config: BrokerConfig) -> OffsetConfig:
        """Read the settings from a :class:`~kpo_broker.config.BrokerConfig`."""
        return cls(
            num_partitions=config.offsets_topic_num_partitions,
            replication_factor=config.offsets_topic_replication_factor,
            segment_bytes=config.offsets_topic_segment_bytes,
            compression_codec=config.offsets_topic_compression_codec,
            commit_timeout_ms=config.offsets_commit_timeout_ms,
            commit_required_acks=config.offsets_commit_required_acks,
            retention_ms=config.offsets_retention_minutes * 60 * 1000,
            retention_check_interval_ms=config.offsets_retention_check_interval_ms,
            load_buffer_size=config.offsets_load_buffer_size,
            max_metadata_size=config.offset_metadata_max_bytes,
        )


@dataclass(frozen=True)
class FetchedOffset:
    """One partition's answer in OffsetFetch (Kafka's ``OffsetFetchResponse.PartitionData``)."""

    offset: int = -1
    leader_epoch: int = -1
    metadata: str = ""
    error: int = 0


class GroupMetadataManager:
    """The group cache of one broker and its persistence in ``__consumer_offsets``.

    Args:
        broker_id: this broker's id.
        config: the offset settings.
        replica_manager: hosts the ``__consumer_offsets`` partitions.
        min_insync_replicas: topic -> its ``min.insync.replicas`` (acks=-1 appends).
        partition_count: the number of partitions of ``__consumer_offsets`` as it
            exists (None: not created yet, ``offsets.topic.num.partitions`` is used).
        clock: wall-clock time, ms.
    """

    def __init__(
        self,
        broker_id: int,
        config: OffsetConfig,
        replica_manager: ReplicaManager,
        min_insync_replicas: Callable[[str], int],
        partition_count: Callable[[], int | None],
        clock: Callable[[], int] = now_ms,
    ) -> None:
        self.broker_id = broker_id
        self.config = config
        self.replica_manager = replica_manager
        self._min_insync_replicas = min_insync_replicas
        self._existing_partition_count = partition_count
        self._partition_count: int | None = None
        self._clock = clock
        self.groups: dict[str, GroupMetadata] = {}
        self.loading_partitions: set[int] = set()
        self.owned_partitions: set[int] = set()
        self.epoch_for_partition: dict[int, int] = {}
        self._scheduler = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()
        self.shutting_down = False

    # ------------------------------------------------------------ lookups
    @property
    def partition_count(self) -> int:
        """Partitions of ``__consumer_offsets``: the topic's, fixed once it exists."""
        if self._partition_count is None:
            existing = self._existing_partition_count()
            if existing:
                self._partition_count = existing
            return existing or self.config.num_partitions
        return self._partition_count

    def partition_for(self, group_id: str) -> int:
        """Return the ``__consumer_offsets`` partition of ``group_id``."""
        return partition_for(group_id, self.partition_count)

    def is_partition_owned(self, partition: int) -> bool:
        """Whether this broker coordinates the groups of ``partition`` (loaded)."""
        return partition in self.owned_partitions

    def is_partition_loading(self, partition: int) -> bool:
        """Whether ``partition`` is being loaded."""
        return partition in self.loading_partitions

    def is_group_local(self, group_id: str) -> bool:
        """Whether this broker coordinates ``group_id``."""
        return self.is_partition_owned(self.partition_for(group_id))

    def is_group_loading(self, group_id: str) -> bool:
        """Whether the partition of ``group_id`` is being loaded."""
        return self.is_partition_loading(self.partition_for(group_id))

    @property
    def is_loading(self) -> bool:
        """Whether any partition is being loaded."""
        return bool(self.loading_partitions)

    def group_not_exists(self, group_id: str) -> bool:
        """Tell whether the group is coordinated here and does not exist (or is Dead)."""
        if not self.is_group_local(group_id):
            return False
        group = self.groups.get(group_id)
        return group is None or group.is_state(GroupState.DEAD)

    def get_group(self, group_id: str) -> GroupMetadata | None:
        """Return the cached group, or None."""
        return self.groups.get(group_id)

    def get_or_create_group(self, group_id: str, create: bool) -> GroupMetadata | None:
        """Return the cached group; with ``create``, a new Empty group when there is none."""
        group = self.groups.get(group_id)
        if group is None and create:
            group = GroupMetadata(group_id, GroupState.EMPTY, self._clock)
            self.groups[group_id] = group
        return group

    def add_group(self, group: GroupMetadata) -> GroupMetadata:
        """Cache ``group`` unless one with its id is cached; return the cached one."""
        return self.groups.setdefault(group.group_id, group)

    def _offsets_tp(self, group_id: str) -> TopicPartition:
        return TopicPartition(GROUP_METADATA_TOPIC_NAME, self.partition_for(group_id))

    def _is_local(self, tp: TopicPartition) -> bool:
        return self.replica_manager.get_partition(tp) is not None

    async def _append(self, tp: TopicPartition, records: bytes) -> tuple[int, int]:
        """Append ``records`` to ``tp`` and wait for the configured acks.

        The local append happens before the first suspension, so appends keep the
        order of the calls. Returns (error code, base offset).
        """
        results = await produce.append_records(
            self.replica_manager,
            {tp: records},
            self.config.commit_required_acks,
            self.config.commit_timeout_ms,
            self._min_insync_replicas,
            internal_topics_allowed=True,
        )
        result = results[tp]
        return result.error_code, result.base_offset

    # ------------------------------------------------------------ writes
    async def store_group(self, group: GroupMetadata, assignment: dict[str, bytes]) -> int:
        """Append the group's metadata with ``assignment``; return the error code.

        Errors are mapped as Kafka's ``storeGroup`` maps them (a timeout becomes
        REBALANCE_IN_PROGRESS, a lost leadership NOT_COORDINATOR).
        """
        tp = self._offsets_tp(group.group_id)
        if not self._is_local(tp):
            return Errors.NOT_COORDINATOR
        try:
            value = group_metadata_value(group.to_record(assignment))
        except ValueError:
            log.exception("cannot write metadata of group %s", group.group_id)
            return Errors.UNKNOWN_SERVER_ERROR
        records = build_batch(
            [(group_metadata_key(group.group_id), value)],
            self._clock(),
            self.config.compression_codec,
        )
        error, _ = await self._append(tp, records)
        if error:
            log.info("metadata of group %s not stored: error %d", group.group_id, error)
        return convert_group_append_error(error)

    async def store_offsets(
        self, group: GroupMetadata, offsets: dict[TopicPartition, OffsetAndMetadata]
    ) -> dict[TopicPartition, int]:
        """Append offset commits; return the error code of each partition.

        A commit whose metadata is longer than ``offset.metadata.max.bytes`` gets
        OFFSET_METADATA_TOO_LARGE and is not written.
        """
        valid = {
            tp: o
            for tp, o in offsets.items()
            if o.metadata is None or len(o.metadata) <= self.config.max_metadata_size
        }
        too_large = {tp: int(Errors.OFFSET_METADATA_TOO_LARGE) for tp in offsets if tp not in valid}
        if not valid:
            return too_large
        tp_offsets = self._offsets_tp(group.group_id)
        if not self._is_local(tp_offsets):
            return {tp: int(Errors.NOT_COORDINATOR) for tp in offsets}
        records = build_batch(
            [
                (offset_commit_key(group.group_id, tp.topic, tp.partition), offset_commit_value(o))
                for tp, o in valid.items()
            ],
            self._clock(),
            self.config.compression_codec,
        )
        group.prepare_offset_commit(valid)
        error, base_offset = await self._append(tp_offsets, records)
        dead = group.is_state(GroupState.DEAD)
        if error == 0:
            if not dead:
                for tp, o in valid.items():
                    group.on_offset_commit_append(tp, CommittedOffset(base_offset, o))
        else:
            if not dead:
                for tp, o in valid.items():
                    group.fail_pending_offset_write(tp, o)
            error = convert_append_error(error)
            log.info("offset commit of group %s failed: error %d", group.group_id, error)
        return {**{tp: int(error) for tp in valid}, **too_large}

    def get_offsets(
        self, group_id: str, require_stable: bool, partitions: list[TopicPartition] | None
    ) -> dict[TopicPartition, FetchedOffset]:
        """Return the committed offsets of ``partitions`` (None: every committed partition).

        Never stale: an unknown group answers -1 offsets; with ``require_stable`` a
        partition with a commit being written answers UNSTABLE_OFFSET_COMMIT.
        """
        group = self.groups.get(group_id)
        if group is None or group.is_state(GroupState.DEAD):
            return {tp: FetchedOffset() for tp in partitions or ()}
        chosen = list(group.offsets) if partitions is None else partitions
        out: dict[TopicPartition, FetchedOffset] = {}
        for tp in chosen:
            if require_stable and group.has_pending_offset_commits(tp):
                out[tp] = FetchedOffset(error=Errors.UNSTABLE_OFFSET_COMMIT)
                continue
            committed = group.offset(tp)
            if committed is None:
                out[tp] = FetchedOffset()
            else:
                out[tp] = FetchedOffset(
                    committed.offset,
                    -1 if committed.leader_epoch is None else committed.leader_epoch,
                    committed.metadata,
                )
        return out

    def cleanup_group_metadata(
        self,
        groups: list[GroupMetadata],
        selector: Callable[[GroupMetadata], dict[TopicPartition, OffsetAndMetadata]],
    ) -> int:
        """Remove offsets chosen by ``selector``, writing tombstones; return how many.

        An Empty group left without offsets becomes Dead, leaves the cache and (when
        it ever had a generation) gets a group metadata tombstone. Tombstones are
        appended without waiting for replication: a lost one is written again by the
        next cleanup, as in Kafka.
        """
        removed_count = 0
        for group in groups:
            removed = selector(group)
            if group.is_state(GroupState.EMPTY) and not group.has_offsets:
                log.info(
                    "group %s is now Dead (generation %d)", group.group_id, group.generation_id
                )
                group.transition_to(GroupState.DEAD)
            tp = self._offsets_tp(group.group_id)
            partition = self.replica_manager.get_partition(tp)
            if partition is None:
                continue
            tombstones: list[tuple[bytes, bytes | None]] = [
                (offset_commit_key(group.group_id, t.topic, t.partition), None) for t in removed
            ]
            if group.is_state(GroupState.DEAD) and self.groups.get(group.group_id) is group:
                del self.groups[group.group_id]
                if group.generation_id > 0:
                    tombstones.append((group_metadata_key(group.group_id), None))
            if not tombstones:
                continue
            try:
                with self.replica_manager.guard(partition, "error while appending to"):
                    partition.append_records_to_leader(
                        build_batch(tombstones, self._clock(), self.config.compression_codec),
                        0,
                        1,
                        self._clock(),
                    )
                self.replica_manager.watchers.notify(tp)
                removed_count += len(removed)
            except Exception as exc:
                log.warning(
                    "tombstones of group %s not written to %s: error %d",
                    group.group_id,
                    tp,
                    error_code_of(exc),
                )
        return removed_count

    def cleanup_expired_offsets(self) -> int:
        """Expire offsets past ``offsets.retention.minutes`` (Kafka's ``cleanupGroupMetadata``)."""
        now = self._clock()
        removed = self.cleanup_group_metadata(
            list(self.groups.values()),
            lambda g: g.remove_expired_offsets(now, self.config.retention_ms),
        )
        if removed:
            log.info("removed %d expired offsets", removed)
        return removed

    # ------------------------------------------------------------ load / unload
    def _maybe_update_epoch(self, partition: int, epoch: int | None) -> bool:
        current = self.epoch_for_partition.get(partition)
        if epoch is None:
            return True
        if current is None or epoch > current:
            self.epoch_for_partition[partition] = epoch
            return True
        return epoch == current

    def _schedule(self, coro: object, name: str) -> None:
        task = asyncio.ensure_future(coro)  # type: ignore[call-overload]
        task.set_name(name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def schedule_load(self, partition: int, epoch: int, on_loaded: GroupCallback) -> None:
        """Load the groups of ``partition`` in the background (this broker became its leader)."""
        log.info(
            "scheduling load of %s-%d for epoch %d", GROUP_METADATA_TOPIC_NAME, partition, epoch
        )
        if self._maybe_update_epoch_peek(partition, epoch):
            # Visible at once: requests for its groups answer COORDINATOR_LOAD_IN_PROGRESS
            # rather than NOT_COORDINATOR while the load waits for its turn.
            self.loading_partitions.add(partition)
        self._schedule(self._load(partition, epoch, on_loaded), f"load-offsets-{partition}")

    def _maybe_update_epoch_peek(self, partition: int, epoch: int) -> bool:
        current = self.epoch_for_partition.get(partition)
        return (current is None or epoch >= current) and partition not in self.owned_partitions

    def schedule_unload(
        self, partition: int, epoch: int | None, on_unloaded: GroupCallback
    ) -> None:
        """Drop the groups of ``partition`` in the background (this broker no longer leads it)."""
        log.info("scheduling unload of %s-%d", GROUP_METADATA_TOPIC_NAME, partition)
        self._schedule(self._unload(partition, epoch, on_unloaded), f"unload-offsets-{partition}")

    async def _load(self, partition: int, epoch: int, on_loaded: GroupCallback) -> None:
        async with self._scheduler:
            if not self._maybe_update_epoch(partition, epoch):
                log.info("not loading partition %d of epoch %d: newer epoch seen", partition, epoch)
                self.loading_partitions.discard(partition)
                return
            if partition in self.owned_partitions:
                self.loading_partitions.discard(partition)
                return
            self.loading_partitions.add(partition)
            start = self._clock()
            try:
                await self._do_load(partition, epoch, on_loaded)
                log.info(
                    "loaded %s-%d in %d ms for epoch %d",
                    GROUP_METADATA_TOPIC_NAME,
                    partition,
                    self._clock() - start,
                    epoch,
                )
            except Exception:
                log.exception("loading %s-%d failed", GROUP_METADATA_TOPIC_NAME, partition)
            finally:
                if self.epoch_for_partition.get(partition) == epoch and self._leads(partition):
                    self.owned_partitions.add(partition)
                self.loading_partitions.discard(partition)

    def _leads(self, partition: int) -> bool:
        p = self.replica_manager.get_partition(TopicPartition(GROUP_METADATA_TOPIC_NAME, partition))
        return p is not None and p.is_leader

    async def _do_load(self, partition: int, epoch: int, on_loaded: GroupCallback) -> None:
        tp = TopicPartition(GROUP_METADATA_TOPIC_NAME, partition)
        hosted = self.replica_manager.get_partition(tp)
        if hosted is None:
            log.warning("no log to load groups from for %s", tp)
            return
        plog = hosted.log
        offsets: dict[tuple[str, TopicPartition], CommittedOffset] = {}
        loaded: dict[str, GroupRecord] = {}
        removed: set[str] = set()
        position = plog.log_start_offset
        while position < plog.log_end_offset and not self.shutting_down:
            if self.replica_manager.get_partition(tp) is not hosted or not hosted.is_leader:
                log.info("stopped loading %s: no longer its leader", tp)
                return
            data = plog.read(position, self.config.load_buffer_size).to_bytes()
            if not data:
                break
            for header, raw in iter_batches(data, verify_crc=False):
                position = header.next_offset
                if header.is_control:
                    continue
                batch = DefaultRecordBatch(bytes(raw))
                for record in batch:
                    self._load_record(
                        record.key, record.value, header.base_offset, offsets, loaded, removed
                    )
            await asyncio.sleep(0)
        by_group: dict[str, dict[TopicPartition, CommittedOffset]] = {}
        for (group_id, committed_tp), committed in offsets.items():
            by_group.setdefault(group_id, {})[committed_tp] = committed
        for group_id, record in loaded.items():
            group = GroupMetadata.from_record(group_id, record, self._clock)
            self._install(group, by_group.pop(group_id, {}), on_loaded)
        for group_id, group_offsets in by_group.items():
            self._install(
                GroupMetadata(group_id, GroupState.EMPTY, self._clock), group_offsets, on_loaded
            )
        for group_id in removed:
            if group_id in self.groups and group_id not in by_group:
                log.warning("group %s was deleted in the log but is cached", group_id)

    def _load_record(
        self,
        key: bytes | None,
        value: bytes | None,
        batch_offset: int,
        offsets: dict[tuple[str, TopicPartition], CommittedOffset],
        loaded: dict[str, GroupRecord],
        removed: set[str],
    ) -> None:
        if key is None:
            log.warning("record without key in %s ignored", GROUP_METADATA_TOPIC_NAME)
            return
        try:
            decoded = read_key(bytes(key))
            if isinstance(decoded, OffsetKey):
                gtp = (decoded.group, TopicPartition(decoded.topic, decoded.partition))
                if value is None:
                    offsets.pop(gtp, None)
                else:
                    offsets[gtp] = CommittedOffset(batch_offset, read_offset_value(bytes(value)))
            elif isinstance(decoded, GroupKey):
                if value is None:
                    loaded.pop(decoded.group, None)
                    removed.add(decoded.group)
                else:
                    removed.discard(decoded.group)
                    loaded[decoded.group] = read_group_value(bytes(value))
            else:
                log.warning("record with key version %d ignored", decoded.version)
        except RecordFormatError as exc:
            log.warning("undecodable record in %s ignored: %s", GROUP_METADATA_TOPIC_NAME, exc)

    def _install(
        self,
        group: GroupMetadata,
        offsets: dict[TopicPartition, CommittedOffset],
        on_loaded: GroupCallback,
    ) -> None:
        group.initialize_offsets(offsets)
        current = self.add_group(group)
        if current is not group:
            log.debug("group %s already cached; the loaded copy is dropped", group.group_id)
            return
        on_loaded(group)

    async def _unload(self, partition: int, epoch: int | None, on_unloaded: GroupCallback) -> None:
        async with self._scheduler:
            if not self._maybe_update_epoch(partition, epoch):
                log.info(
                    "not unloading partition %d of epoch %s: newer epoch seen", partition, epoch
                )
                return
            self.owned_partitions.discard(partition)
            self.loading_partitions.discard(partition)
            count = 0
            for group in list(self.groups.values()):
                if self.partition_for(group.group_id) == partition:
                    on_unloaded(group)
                    self.groups.pop(group.group_id, None)
                    count += 1
            log.info(
                "unloaded %s-%d (epoch %s): %d groups",
                GROUP_METADATA_TOPIC_NAME,
                partition,
                epoch,
                count,
            )

    async def shutdown(self) -> None:
        """Stop loading and wait for scheduled loads and unloads to finish."""
        self.shutting_down = True
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
