"""Replica fetchers: followers pull their partitions from the leaders.

Kafka's ReplicaFetcherThread.

One fetcher task per (leader broker, fetcher index) pair (``num.replica.fetchers``).
A partition joining a fetcher first truncates its log to the point where it diverges
from the leader, found with OffsetForLeaderEpoch (KIP-101, KIP-279), never by the HW
alone; then it fetches from its LEO. Each fetched batch is appended with the leader's
offsets, and the follower's HW becomes min(its LEO, the leader's HW) (Kafka's
``ReplicaFetcherThread.processPartitionData``).

Fetch sessions (KIP-227, :mod:`kpo_broker.server.fetch_session_handler`): each fetcher
keeps one session with its leader; after a full fetch its requests name only the partitions
whose fetch offset, log start offset or leader epoch changed, and list the ones it left out
as forgotten. A session error, a failed request or a new connection makes the next request
a full fetch again.

Replication quotas (KIP-73, Kafka's ``ReplicaFetcherThread.shouldFollowerThrottle``): a
partition is left out of the Fetch request while the follower is out of sync, the partition
is throttled on the follower side and the follower quota is exceeded; the bytes received for
throttled partitions are recorded in the follower quota. When every ready partition is left
out, the fetcher waits ``replica.fetch.backoff.ms`` (or until new partitions arrive) before
trying again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import Any

from kafka import errors as kafka_errors
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest, OffsetForLeaderEpochRequest

from kpo_broker.cancellation import cancel_and_wait
from kpo_broker.log.dir_failure import KafkaStorageError
from kpo_broker.log.errors import OffsetOutOfRangeError
from kpo_broker.protocol.client import BrokerClient, StreamConnector
from kpo_broker.server.fetch_session_handler import FetchSessionHandler, PartitionData
from kpo_broker.server.partition import Partition
from kpo_broker.server.replica_manager import ReplicaManager
from kpo_broker.server.replication_quota import ReplicationQuotaManager
from kpo_kafka.topic_partition import TopicPartition

log = logging.getLogger(__name__)

FETCH_VERSION = 11
OFFSET_FOR_LEADER_EPOCH_VERSION = 3
LIST_OFFSETS_VERSION = 4
#: ListOffsets timestamp asking for the log start offset (Kafka's EARLIEST_TIMESTAMP).
EARLIEST_TIMESTAMP = -2
UNDEFINED_EPOCH = -1


@dataclass
class FetchState:
    """A followed partition's progress in its fetcher.

    Attributes:
        leader_epoch: the leader epoch from the last LeaderAndIsr (sent as current_leader_epoch).
        fetch_offset: next offset to fetch (the local LEO).
        truncating: the log must be reconciled with the leader before fetching.
        delayed_until: loop time (s) before which the partition is not fetched (after errors).
        lag: the leader's HW minus the fetch offset after the last response (None: unknown).
    """

    leader_epoch: int
    fetch_offset: int = 0
    truncating: bool = True
    delayed_until: float = 0.0
    lag: int | None = None


@dataclass(frozen=True)
class FetcherSettings:
    """The ``replica.fetch.*`` settings.

    Attributes:
        max_wait_ms: replica.fetch.wait.max.ms.
        min_bytes: replica.fetch.min.bytes.
        max_bytes: replica.fetch.max.bytes, per partition.
        response_max_bytes: replica.fetch.response.max.bytes.
        backoff_ms: replica.fetch.backoff.ms after an error.
        request_timeout_ms: how long a fetch may take before the connection is reset.
        connector: opens connections with the inter-broker listener's security (TLS,
            SASL); None = PLAINTEXT.
    """

    max_wait_ms: int = 500
    min_bytes: int = 1
    max_bytes: int = 1048576
    response_max_bytes: int = 10485760
    backoff_ms: int = 1000
    request_timeout_ms: int = 30000
    connector: StreamConnector | None = None


class ReplicaFetcher:
    """Fetches every partition this broker follows from one leader.

    Args:
        broker_id: this broker's id (sent as ``replica_id``).
        leader_id: the source broker.
        address: (host, port) of the leader's inter-broker listener.
        replica_manager: where fetched records are appended.
        settings: fetch settings.
        quota: the follower-side replication quota (None: never throttle).
    """

    def __init__(
        self,
        broker_id: int,
        leader_id: int,
        address: tuple[str, int],
        replica_manager: ReplicaManager,
        settings: FetcherSettings,
        quota: ReplicationQuotaManager | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.leader_id = leader_id
        self.address = address
        self.rm = replica_manager
        self.settings = settings
        self.quota = quota
        self.partitions: dict[TopicPartition, FetchState] = {}
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._client: BrokerClient | None = None
        #: The incremental fetch session with the leader (KIP-227).
        self.session = FetchSessionHandler(leader_id)

    def add_partitions(self, epochs: dict[TopicPartition, int]) -> None:
        """Start following these partitions at the given leader epochs (truncating first)."""
        for tp, epoch in epochs.items():
            self.partitions[tp] = FetchState(epoch)
        self._wakeup.set()
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"fetcher-{self.leader_id}")

    def remove_partitions(self, tps: list[TopicPartition]) -> None:
        """Stop fetching these partitions."""
        for tp in tps:
            self.partitions.pop(tp, None)

    async def stop(self) -> None:
        """Stop the fetch loop and close the connection."""
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None
        await self._close_client()

    async def _close_client(self) -> None:
        self.session.handle_error()  # a new connection starts a new session
        if self._client is not None:
            with contextlib.suppress(Exception):
                await self._client.close()
            self._client = None

    async def _connection(self) -> BrokerClient:
        if self._client is None:
            client = BrokerClient(
                self.address[0],
                self.address[1],
                client_id=f"replica-fetcher-{self.broker_id}",
                request_timeout_ms=self.settings.request_timeout_ms + self.settings.max_wait_ms,
                connector=self.settings.connector,
            )
            await client.connect()
            self._client = client
        return self._client

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            now = loop.time()
            ready = [tp for tp, st in self.partitions.items() if st.delayed_until <= now]
            # With nothing ready, a session still holding partitions is sent their
            # removal (as Kafka's buildFetch does for an empty round).
            if not ready and not self.session.session_partitions:
                self._wakeup.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wakeup.wait(), self.settings.backoff_ms / 1000)
                continue
            try:
                truncating = [tp for tp in ready if self.partitions[tp].truncating]
                if truncating:
                    await self._truncate(truncating)
                    continue
                if not await self._fetch(ready):
                    # Everything ready is throttled (KIP-73): back off as Kafka does.
                    self._wakeup.clear()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._wakeup.wait(), self.settings.backoff_ms / 1000)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.info("fetch from broker %d failed: %s", self.leader_id, exc)
                await self._close_client()
                for tp in ready:
                    if tp in self.partitions:
                        self.partitions[tp].delayed_until = now + self.settings.backoff_ms / 1000

    def _delay(self, tp: TopicPartition) -> None:
        state = self.partitions.get(tp)
        if state is not None:
            state.delayed_until = (
                asyncio.get_running_loop().time() + self.settings.backoff_ms / 1000
            )

    async def _truncate(self, tps: list[TopicPartition]) -> None:
        """Reconcile logs with the leader using OffsetForLeaderEpoch (KIP-279)."""
        topics: dict[str, list[Any]] = {}
        for tp in tps:
            partition = self.rm.get_partition(tp)
            if partition is None:
                self.partitions.pop(tp, None)
                continue
            latest_epoch = partition.log.leader_epoch_cache.latest_epoch
            if latest_epoch is None:
                # No epoch recorded locally: fall back to the HW (KIP-101).
                self._truncate_to(tp, partition, partition.high_watermark)
                continue
            topics.setdefault(tp[0], []).append(
                OffsetForLeaderEpochRequest.OffsetForLeaderTopic.OffsetForLeaderPartition(
                    partition=tp[1],
                    current_leader_epoch=self.partitions[tp].leader_epoch,
                    leader_epoch=latest_epoch,
                )
            )
        if not topics:
            return
        request = OffsetForLeaderEpochRequest(
            replica_id=self.broker_id,
            topics=[
                OffsetForLeaderEpochRequest.OffsetForLeaderTopic(topic=t, partitions=p)
                for t, p in topics.items()
            ],
        )
        client = await self._connection()
        response = await client.send(request, OFFSET_FOR_LEADER_EPOCH_VERSION)
        for topic in response.topics:
            for result in topic.partitions:
                tp = TopicPartition(topic.topic, result.partition)
                state = self.partitions.get(tp)
                partition = self.rm.get_partition(tp)
                if state is None or partition is None:
                    continue
                if result.error_code != 0:
                    self._delay(tp)
                    continue
                plog = partition.log
                if result.leader_epoch == UNDEFINED_EPOCH:
                    offset = partition.high_watermark
                else:
                    _, local_end = plog.leader_epoch_cache.end_offset_for(
                        result.leader_epoch, plog.log_end_offset
                    )
                    offset = min(result.end_offset, local_end)
                self._truncate_to(tp, partition, offset)

    def _truncate_to(self, tp: TopicPartition, partition: Partition, offset: int) -> None:
        """Truncate the local log to ``offset`` (if below the LEO) and start fetching there."""
        plog = partition.log
        if offset < plog.log_end_offset:
            log.info("truncating %s from %d to %d", tp, plog.log_end_offset, offset)
            try:
                with self.rm.guard(partition, "error while truncating"):
                    plog.truncate_to(offset)
            except KafkaStorageError:  # the log dir went offline: stop fetching it
                self.partitions.pop(tp, None)
                return
        partition.high_watermark = min(partition.high_watermark, plog.log_end_offset)
        state = self.partitions.get(tp)
        if state is not None:
            state.fetch_offset = plog.log_end_offset
            state.truncating = False

    def _should_throttle(self, tp: TopicPartition, partition: Partition, state: FetchState) -> bool:
        """Kafka's ``ReplicaFetcherThread.shouldFollowerThrottle``.

        The follower is in sync when the last LeaderAndIsr listed it in the ISR, or when
        its last fetch reached the leader's HW (lag 0, as Kafka's fetch state).
        """
        if self.quota is None:
            return False
        in_sync = self.broker_id in partition.isr or state.lag == 0
        return self.quota.should_throttle(tp[0], tp[1], self.broker_id, in_sync)

    async def _fetch(self, tps: list[TopicPartition]) -> bool:
        """Send one Fetch for the unthrottled partitions; False if none was sent.

        As Kafka's ``ReplicaFetcherThread.buildFetch``: the partitions to fetch go through
        the fetch session (KIP-227), so an incremental request names only those whose
        fetch offset, log start offset or leader epoch changed. A partition left out this
        round (throttled, delayed after an error, truncating, removed) is forgotten by the
        session; its fetch state stays here and it is named again when it comes back. No
        request is sent when the session is empty and nothing is to be forgotten.
        """
        builder = self.session.new_builder()
        for tp in tps:
            partition = self.rm.get_partition(tp)
            if partition is None:
                self.partitions.pop(tp, None)
                continue
            state = self.partitions[tp]
            if self._should_throttle(tp, partition, state):
                continue
            state.fetch_offset = partition.log.log_end_offset
            builder.add(
                tp,
                PartitionData(
                    state.fetch_offset,
                    partition.log.log_start_offset,
                    self.settings.max_bytes,
                    state.leader_epoch,
                ),
            )
        fetch = builder.build()
        if not fetch.session_partitions and not fetch.to_forget:
            return False
        request = FetchRequest(
            replica_id=self.broker_id,
            max_wait_ms=self.settings.max_wait_ms,
            min_bytes=self.settings.min_bytes,
            max_bytes=self.settings.response_max_bytes,
            isolation_level=0,
            session_id=fetch.metadata.session_id,
            session_epoch=fetch.metadata.epoch,
            topics=_fetch_topics(fetch.to_send),
            forgotten_topics_data=_forgotten_topics(fetch.to_forget),
            rack_id="",
        )
        try:
            client = await self._connection()
            response = await client.send(request, FETCH_VERSION)
        except Exception:
            self.session.handle_error()
            raise
        received = [
            TopicPartition(topic.topic, data.partition_index)
            for topic in response.responses
            for data in topic.partitions
        ]
        if not self.session.handle_response(response.error_code, response.session_id, received):
            return True  # the next round is a full fetch
        out_of_range: list[TopicPartition] = []
        for topic in response.responses:
            for data in topic.partitions:
                tp = TopicPartition(topic.topic, data.partition_index)
                if data.error_code == kafka_errors.OffsetOutOfRangeError.errno:
                    out_of_range.append(tp)
                else:
                    self._process_partition(tp, data)
        if out_of_range:
            await self._handle_out_of_range(out_of_range)
        return True

    def _process_partition(self, tp: TopicPartition, data: Any) -> None:
        state = self.partitions.get(tp)
        partition = self.rm.get_partition(tp)
        if state is None or partition is None or partition.is_leader:
            return
        if data.error_code == 0:
            if partition.log.log_end_offset != state.fetch_offset:
                return  # the log changed under us (truncation, new epoch): refetch
            records = bytes(data.records or b"")
            try:
                with self.rm.guard(partition, "error while appending as follower to"):
                    partition.append_records_as_follower(records, data.high_watermark)
                    self._follow_log_start_offset(tp, partition, data.log_start_offset)
            except KafkaStorageError:  # the log dir went offline: this fetch stops
                self.partitions.pop(tp, None)
                return
            if records:  # Kafka's ReplicationBytesInPerSec
                self.rm.topic_stats.record_replication_in(tp[0], len(records))
            state.fetch_offset = partition.log.log_end_offset
            state.lag = max(0, data.high_watermark - state.fetch_offset)
            if self.quota is not None and self.quota.is_throttled(tp[0], tp[1], self.broker_id):
                self.quota.record(len(records))
        else:
            log.debug(
                "fetch of %s-%d from %d: error %d", tp[0], tp[1], self.leader_id, data.error_code
            )
            self._delay(tp)

    def _follow_log_start_offset(
        self, tp: TopicPartition, partition: Partition, leader_log_start_offset: int
    ) -> None:
        """Raise the follower's log start offset to the leader's (DeleteRecords, KIP-107).

        Kafka's ``ReplicaFetcherThread.processPartitionData``: the follower's next fetch
        reports the new start offset, so the leader's low watermark moves.
        """
        if leader_log_start_offset is None or leader_log_start_offset < 0:
            return
        try:
            if partition.log.maybe_increment_log_start_offset(
                leader_log_start_offset, partition.high_watermark
            ):
                log.info("%s-%d: log start offset now %d", *tp, leader_log_start_offset)
        except OffsetOutOfRangeError:  # above our HW: the next fetch brings us there
            pass

    async def _handle_out_of_range(self, tps: list[TopicPartition]) -> None:
        """Recover partitions whose fetch offset (LEO) is outside the leader's log.

        Kafka's ``fetchOffsetAndTruncate``: the leader's log start offset is asked with
        ListOffsets (EARLIEST, as a replica), since a Fetch error carries none. Below it,
        the follower restarts its log empty there (the leader deleted what the follower
        lacks); otherwise the follower's log ends past the leader's and is reconciled by
        leader epoch again. A partition the leader gave no start offset for waits out
        ``replica.fetch.backoff.ms``.
        """
        leader_starts = await self._leader_log_start_offsets(tps)
        for tp in tps:
            partition = self.rm.get_partition(tp)
            state = self.partitions.get(tp)
            if partition is None or state is None or partition.is_leader:
                continue
            leader_start = leader_starts.get(tp)
            if leader_start is None:
                self._delay(tp)
                continue
            if leader_start > partition.log.log_end_offset:
                log.info("%s-%d: restarting at the leader's log start offset %d", *tp, leader_start)
                partition.log.truncate_fully_and_start_at(leader_start)
                partition.high_watermark = leader_start
            else:
                state.truncating = True
            state.fetch_offset = partition.log.log_end_offset

    async def _leader_log_start_offsets(
        self, tps: list[TopicPartition]
    ) -> dict[TopicPartition, int]:
        """Ask the leader for the log start offset of ``tps``; errors are left out."""
        topics: dict[str, list[Any]] = {}
        for tp in tps:
            state = self.partitions.get(tp)
            if state is None:
                continue
            topics.setdefault(tp[0], []).append(
                ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
                    partition_index=tp[1],
                    current_leader_epoch=state.leader_epoch,
                    timestamp=EARLIEST_TIMESTAMP,
                )
            )
        if not topics:
            return {}
        request = ListOffsetsRequest(
            replica_id=self.broker_id,
            isolation_level=0,
            topics=[
                ListOffsetsRequest.ListOffsetsTopic(name=t, partitions=p) for t, p in topics.items()
            ],
        )
        client = await self._connection()
        response = await client.send(request, LIST_OFFSETS_VERSION)
        return {
            TopicPartition(topic.name, result.partition_index): result.offset
            for topic in response.topics
            for result in topic.partitions
            if result.error_code == 0
        }


def _fetch_topics(partitions: dict[TopicPartition, PartitionData]) -> list[Any]:
    """Build the ``topics`` of a Fetch request naming ``partitions``, grouped by topic."""
    topics: dict[str, list[Any]] = {}
    for (topic, index), data in partitions.items():
        topics.setdefault(topic, []).append(
            FetchRequest.FetchTopic.FetchPartition(
                partition=index,
                current_leader_epoch=data.current_leader_epoch,
                fetch_offset=data.fetch_offset,
                log_start_offset=data.log_start_offset,
                partition_max_bytes=data.max_bytes,
            )
        )
    return [FetchRequest.FetchTopic(topic=t, partitions=p) for t, p in topics.items()]


def _forgotten_topics(partitions: list[TopicPartition]) -> list[Any]:
    """Build the ``forgotten_topics_data`` of a Fetch request dropping ``partitions``."""
    topics: dict[str, list[int]] = {}
    for topic, index in partitions:
        topics.setdefault(topic, []).append(index)
    return [FetchRequest.ForgottenTopic(topic=t, partitions=p) for t, p in topics.items()]


class ReplicaFetcherManager:
    """Assigns followed partitions to fetchers by leader (and ``num.replica.fetchers``).

    Args:
        broker_id: this broker's id.
        replica_manager: where fetched data goes.
        settings: fetch settings.
        num_fetchers: ``num.replica.fetchers`` per source broker.
        quota: the follower-side replication quota shared by every fetcher (KIP-73).
    """

    def __init__(
        self,
        broker_id: int,
        replica_manager: ReplicaManager,
        settings: FetcherSettings,
        num_fetchers: int = 1,
        quota: ReplicationQuotaManager | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.rm = replica_manager
        self.settings = settings
        self.quota = quota
        self.num_fetchers = max(1, num_fetchers)
        self.fetchers: dict[tuple[int, int, tuple[str, int]], ReplicaFetcher] = {}

    def _index(self, tp: TopicPartition) -> int:
        return (hash(tp[0]) * 31 + tp[1]) % self.num_fetchers

    def add_partitions(
        self, partitions: dict[TopicPartition, tuple[int, int, tuple[str, int]]]
    ) -> None:
        """Follow partitions: tp -> (leader id, leader epoch, leader address)."""
        self.remove_partitions(list(partitions))
        groups: dict[tuple[int, int, tuple[str, int]], dict[TopicPartition, int]] = {}
        for tp, (leader, epoch, address) in partitions.items():
            groups.setdefault((leader, self._index(tp), address), {})[tp] = epoch
        for key, epochs in groups.items():
            fetcher = self.fetchers.get(key)
            if fetcher is None:
                fetcher = ReplicaFetcher(
                    self.broker_id, key[0], key[2], self.rm, self.settings, self.quota
                )
                self.fetchers[key] = fetcher
            fetcher.add_partitions(epochs)

    def remove_partitions(self, tps: list[TopicPartition]) -> None:
        """Stop following these partitions (leadership moved here, or the replica was stopped)."""
        for fetcher in self.fetchers.values():
            fetcher.remove_partitions(tps)

    async def shutdown_idle_fetchers(self) -> None:
        """Stop and forget the fetchers left without partitions.

        Kafka's ``AbstractFetcherManager.shutdownIdleFetcherThreads``, called after a
        LeaderAndIsr request moved partitions between fetchers: a fetcher whose leader
        no longer leads any partition followed here closes its connection.
        """
        for key, fetcher in list(self.fetchers.items()):
            if not fetcher.partitions:
                del self.fetchers[key]
                await fetcher.stop()

    async def shutdown(self) -> None:
        """Stop every fetcher."""
        for fetcher in self.fetchers.values():
            await fetcher.stop()
        self.fetchers.clear()
