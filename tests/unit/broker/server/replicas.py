"""Real replica managers over log dirs in a temp dir, with ZooKeeper faked in memory.

Shared by the unit tests of the replica manager, produce, fetch and the replica fetchers:
every partition has a real :class:`~kpo_broker.log.log.Log` on disk; only the edges are
fakes: ZooKeeper (the leader's ISR writes) in memory, and the fetchers' connections to
their leaders in-process.

    from tests.unit.broker.server.replicas import InMemoryIsrWriter, leader_and_isr
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest, OffsetForLeaderEpochRequest

from kpo_broker.log.config import LogConfig
from kpo_broker.server.fetch import FetchPartition, fetch_messages
from kpo_broker.server.fetch_metadata import FetchMetadata
from kpo_broker.server.fetch_session import FetchManager, SessionResponse, new_fetch_manager
from kpo_broker.server.offsets import list_offset, offset_for_leader_epoch
from kpo_broker.server.partition import IsrChange, LeaderAndIsrState, Partition
from kpo_broker.server.replica_manager import ReplicaManager
from kpo_broker.server.replication_quota import ReplicationQuotaManager
from kpo_kafka.topic_partition import TopicPartition

NOW_MS = 1_700_000_000_000
CONFIG = LogConfig(file_delete_delay_ms=0)


class InMemoryIsrWriter:
    """The controller's partition epochs in a dict: it accepts a change of the current one.

    A partition's epoch starts at the one the leader holds when it first asks; a test
    that sets ``partition_epochs[tp]`` to something else plays a controller that changed
    the state meanwhile (it refuses with INVALID_UPDATE_VERSION, as Kafka's does).

    Attributes:
        partition_epochs: tp -> current partition epoch (the state znode version).
        writes: every successful write, in order: (tp, new ISR).
        fail_with: when set, every write raises it (ZooKeeper unreachable).
        on_write: called with ``tp`` before a write is decided (to interleave events).
    """

    def __init__(self) -> None:
        self.partition_epochs: dict[TopicPartition, int] = {}
        self.writes: list[tuple[TopicPartition, tuple[int, ...]]] = []
        self.fail_with: Exception | None = None
        self.on_write: Callable[[TopicPartition], None] | None = None

    async def write_isr(
        self, tp: TopicPartition, partition: Partition, change: IsrChange
    ) -> int | None:
        if self.on_write is not None:
            self.on_write(tp)
        if self.fail_with is not None:
            raise self.fail_with
        current = self.partition_epochs.setdefault(tp, partition.partition_epoch)
        if change.expected_partition_epoch != current:
            return None
        self.partition_epochs[tp] = current + 1
        self.writes.append((tp, change.isr))
        return current + 1


def leader_and_isr(
    leader: int,
    replicas: tuple[int, ...],
    isr: tuple[int, ...] | None = None,
    leader_epoch: int = 1,
    partition_epoch: int = 0,
    controller_epoch: int = 1,
) -> LeaderAndIsrState:
    """One partition's LeaderAndIsr state; the ISR defaults to every replica."""
    return LeaderAndIsrState(
        controller_epoch=controller_epoch,
        leader=leader,
        leader_epoch=leader_epoch,
        isr=replicas if isr is None else isr,
        partition_epoch=partition_epoch,
        replicas=replicas,
    )


#: Opens broker ``broker_id``'s replica manager over ``<tmp>/broker-<id>`` (the
#: ``open_broker`` fixture; reopening the same id is a restart over the same log dir).
OpenBroker = Callable[..., ReplicaManager]


async def eventually(condition: Callable[[], bool], timeout_s: float = 5.0) -> None:
    """Wait until ``condition()`` holds, polling every 10 ms; fail after ``timeout_s``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not condition():
        assert loop.time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.01)


def hosted(rm: ReplicaManager, tp: TopicPartition) -> Partition:
    """The partition ``tp`` hosted by ``rm`` (fails the test if it is not hosted)."""
    partition = rm.get_partition(tp)
    assert partition is not None, f"{tp} is not hosted on broker {rm.broker_id}"
    return partition


class InProcessLeaders:
    """The network edge of replica fetchers: leaders served in-process, without sockets.

    Stands in for :class:`~kpo_broker.protocol.client.BrokerClient` (tests monkeypatch
    ``kpo_broker.server.fetcher.BrokerClient`` with :meth:`connect_to`). A Fetch is answered
    by the leader's real :func:`~kpo_broker.server.fetch.fetch_messages` (ISR expansion
    hook included), an OffsetForLeaderEpoch or a ListOffsets by the real functions of
    :mod:`kpo_broker.server.offsets`, as the leader's request handlers do; only the wire
    encoding is skipped.

    Attributes:
        leaders: (host, port) -> the replica manager of the broker listening there.
        unreachable: addresses whose connections are refused.
        connections: every connection opened, in order.
        leader_quota: the leaders' leader-side replication quota (KIP-73), if any.
        fetch_managers: address -> the leader's fetch sessions (KIP-227), as its broker has.
        fetches: every Fetch served: (address, request, the session response).
    """

    def __init__(self) -> None:
        self.leaders: dict[tuple[str, int], ReplicaManager] = {}
        self.unreachable: set[tuple[str, int]] = set()
        self.connections: list[LeaderConnection] = []
        self.leader_quota: ReplicationQuotaManager | None = None
        self.fetch_managers: dict[tuple[str, int], FetchManager] = {}
        self.fetches: list[tuple[tuple[str, int], Any, SessionResponse]] = []

    def add(self, rm: ReplicaManager) -> tuple[str, int]:
        """Serve ``rm`` (with a fresh fetch session cache); return its address."""
        address = (f"broker-{rm.broker_id}", 9092)
        self.leaders[address] = rm
        self.fetch_managers[address] = new_fetch_manager(1000)
        return address

    def connect_to(
        self,
        host: str,
        port: int,
        client_id: str = "",
        request_timeout_ms: int = 30000,
        connector: object = None,
    ) -> LeaderConnection:
        """Build a connection as ``BrokerClient(host, port, client_id=..., ...)`` does."""
        connection = LeaderConnection(self, (host, port))
        self.connections.append(connection)
        return connection


class LeaderConnection:
    """One fetcher's connection to a leader of :class:`InProcessLeaders`."""

    def __init__(self, network: InProcessLeaders, address: tuple[str, int]) -> None:
        self.network = network
        self.address = address
        self.connected = False
        self.closed = False

    async def connect(self) -> None:
        if self.address in self.network.unreachable or self.address not in self.network.leaders:
            raise ConnectionRefusedError(f"{self.address} refused the connection")
        self.connected = True

    async def close(self) -> None:
        self.closed = True

    async def send(self, request: Any, version: int) -> Any:
        if self.closed or not self.connected:
            raise ConnectionError("not connected")
        if self.address in self.network.unreachable:
            raise ConnectionResetError(f"{self.address} went away")
        leader = self.network.leaders[self.address]
        if isinstance(request, FetchRequest):
            return await self._fetch(leader, request)
        if isinstance(request, OffsetForLeaderEpochRequest):
            return self._offset_for_leader_epoch(leader, request)
        if isinstance(request, ListOffsetsRequest):
            return self._list_offsets(leader, request)
        raise AssertionError(f"unexpected request {type(request).__name__}")

    async def _fetch(self, leader: ReplicaManager, request: Any) -> Any:
        fetch_data = {
            TopicPartition(topic.topic, p.partition): FetchPartition(
                TopicPartition(topic.topic, p.partition),
                p.fetch_offset,
                p.partition_max_bytes,
                p.current_leader_epoch,
            )
            for topic in request.topics
            for p in topic.partitions
        }
        to_forget = [
            TopicPartition(topic.topic, index)
            for topic in request.forgotten_topics_data or ()
            for index in topic.partitions
        ]
        context = self.network.fetch_managers[self.address].new_context(
            FetchMetadata(request.session_id, request.session_epoch),
            request.replica_id >= 0,
            fetch_data,
            to_forget,
        )
        results = await fetch_messages(
            leader,
            request.replica_id,
            request.max_wait_ms,
            request.min_bytes,
            request.max_bytes,
            context.partitions(),
            leader.maybe_expand_isr,
            self.network.leader_quota,
        )
        session = context.response(results)
        self.network.fetches.append((self.address, request, session))
        by_topic: dict[str, list[SimpleNamespace]] = {}
        for (topic, index), result in session.partitions.items():
            records = result.records.to_bytes() if result.records is not None else b""
            by_topic.setdefault(topic, []).append(
                SimpleNamespace(
                    partition_index=index,
                    error_code=result.error_code,
                    high_watermark=result.high_watermark,
                    log_start_offset=result.log_start_offset,
                    records=records,
                )
            )
        return SimpleNamespace(
            error_code=session.error_code,
            session_id=session.session_id,
            responses=[SimpleNamespace(topic=t, partitions=p) for t, p in by_topic.items()],
        )

    def _offset_for_leader_epoch(self, leader: ReplicaManager, request: Any) -> Any:
        topics = []
        for topic in request.topics:
            partitions = []
            for p in topic.partitions:
                answer = offset_for_leader_epoch(
                    leader,
                    TopicPartition(topic.topic, p.partition),
                    p.current_leader_epoch,
                    p.leader_epoch,
                )
                partitions.append(
                    SimpleNamespace(
                        partition=p.partition,
                        error_code=answer.error_code,
                        leader_epoch=answer.leader_epoch,
                        end_offset=answer.end_offset,
                    )
                )
            topics.append(SimpleNamespace(topic=topic.topic, partitions=partitions))
        return SimpleNamespace(topics=topics)

    def _list_offsets(self, leader: ReplicaManager, request: Any) -> Any:
        topics = []
        for topic in request.topics:
            partitions = []
            for p in topic.partitions:
                answer = list_offset(
                    leader,
                    TopicPartition(topic.name, p.partition_index),
                    p.timestamp,
                    p.current_leader_epoch,
                    request.replica_id,
                )
                partitions.append(
                    SimpleNamespace(
                        partition_index=p.partition_index,
                        error_code=answer.error_code,
                        offset=answer.offset,
                    )
                )
            topics.append(SimpleNamespace(name=topic.name, partitions=partitions))
        return SimpleNamespace(topics=topics)
