"""A :class:`~kpo_kafka.admin.KafkaAdmin` shared by threads: a small pool of clients.

kafka-python's ``KafkaAdminClient`` is not thread-safe (one network client, one
in-flight bookkeeping), and the operator reconciles objects in several threads at
once. Each Admin API call borrows an idle client for its duration (opening one while
fewer than ``size`` exist, waiting otherwise), so a slow call of one object (a
DescribeLogDirs over many partitions) does not wait for another object's call, and no
client is ever used by two threads at a time. Clients connect lazily and keep their
connections between calls; :meth:`KafkaAdminPool.reconnect` replaces them (new
bootstrap servers, a rotated password) without stopping the calls in flight.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager

from kpo_kafka.admin import KafkaAdmin
from kpo_kafka.admin_types import (
    ApiError,
    ClusterInfo,
    ConfigResource,
    ConfigResourceKind,
    LogDirState,
    PartitionInfo,
    Reassignment,
    ReplicaDirInfo,
    ReplicaKey,
)
from kpo_kafka.topic_partition import TopicPartition
from kpo_operator.metrics import admin_request_count


class KafkaAdminPool:
    """:class:`KafkaAdmin` over at most ``size`` clients, each used by one thread at a time.

    Args:
        connect: Makes a new client (e.g. a ``KafkaPythonAdmin``); called at most
            ``size`` times, when every existing client is busy.
        size: The most clients, hence the most Admin API calls in flight at once (>= 1).
        observe: Called with (Kafka request name, requests sent) for each call, e.g.
            :meth:`~kpo_operator.metrics.OperatorMetrics.admin_observer`.

    Raises:
        ValueError: ``size`` is below 1.

    Errors of the calls are the clients' (``KafkaAdminError``); a client that raised
    goes back to the pool (kafka-python reconnects on its next call).
    """

    def __init__(
        self,
        connect: Callable[[], KafkaAdmin],
        size: int,
        observe: Callable[[str, int], None] | None = None,
    ) -> None:
        if size < 1:
            raise ValueError(f"size must be >= 1, got {size}")
        self._connect = connect
        self._observe = observe
        self._slots = threading.BoundedSemaphore(size)
        self._lock = threading.Lock()
        self._idle: list[KafkaAdmin] = []
        self._clients: list[KafkaAdmin] = []
        self._retired: list[KafkaAdmin] = []

    @contextmanager
    def _borrow(self, api: str = "", requests: int = 1) -> Iterator[KafkaAdmin]:
        if self._observe is not None:
            self._observe(api, requests)
        with self._slots:
            with self._lock:
                client = self._idle.pop() if self._idle else None
                connect = self._connect
            if client is None:
                client = connect()
                with self._lock:
                    self._clients.append(client)
            try:
                yield client
            finally:
                with self._lock:
                    retired = any(c is client for c in self._retired)
                    if retired:
                        self._retired = [c for c in self._retired if c is not client]
                    else:
                        self._idle.append(client)
                if retired:
                    client.close()

    def reconnect(self, connect: Callable[[], KafkaAdmin]) -> None:
        """Make new clients with ``connect`` from now on; close the old ones.

        Idle clients are closed at once, clients in use when their call returns (that
        call finishes on the old connection).
        """
        with self._lock:
            self._connect = connect
            idle, self._idle = self._idle, []
            busy = [c for c in self._clients if not any(c is i for i in idle)]
            self._retired.extend(busy)
            self._clients = []
        for client in idle:
            client.close()

    @property
    def opened(self) -> int:
        """How many clients exist (at most ``size``)."""
        with self._lock:
            return len(self._clients)

    def describe_cluster(self) -> ClusterInfo:
        """See :meth:`KafkaAdmin.describe_cluster`."""
        with self._borrow("DescribeCluster") as admin:
            return admin.describe_cluster()

    def describe_topics(
        self, topics: Collection[str] | None = None
    ) -> dict[str, dict[int, PartitionInfo]]:
        """See :meth:`KafkaAdmin.describe_topics`."""
        with self._borrow("Metadata") as admin:
            return admin.describe_topics(topics)

    def list_partition_reassignments(
        self, partitions: Collection[TopicPartition] | None = None
    ) -> dict[TopicPartition, Reassignment]:
        """See :meth:`KafkaAdmin.list_partition_reassignments`."""
        with self._borrow("ListPartitionReassignments") as admin:
            return admin.list_partition_reassignments(partitions)

    def alter_partition_reassignments(
        self, targets: Mapping[TopicPartition, Sequence[int] | None]
    ) -> dict[TopicPartition, ApiError | None]:
        """See :meth:`KafkaAdmin.alter_partition_reassignments`."""
        with self._borrow("AlterPartitionReassignments") as admin:
            return admin.alter_partition_reassignments(targets)

    def describe_configs(
        self,
        brokers: Collection[int] = (),
        topics: Collection[str] = (),
        keys: Collection[str] | None = None,
    ) -> dict[ConfigResource, dict[str, str]]:
        """See :meth:`KafkaAdmin.describe_configs`."""
        requests = admin_request_count(brokers, bool(topics))
        with self._borrow("DescribeConfigs", requests) as admin:
            return admin.describe_configs(brokers, topics, keys)

    def broker_config_values(self, broker: int, keys: Collection[str]) -> dict[str, str]:
        """See :meth:`KafkaAdmin.broker_config_values`."""
        with self._borrow("DescribeConfigs") as admin:
            return admin.broker_config_values(broker, keys)

    def incremental_alter_configs(
        self, changes: Mapping[ConfigResource, Mapping[str, str | None]]
    ) -> dict[ConfigResource, ApiError | None]:
        """See :meth:`KafkaAdmin.incremental_alter_configs`."""
        with self._borrow("IncrementalAlterConfigs", _alter_requests(changes)) as admin:
            return admin.incremental_alter_configs(changes)

    def describe_log_dirs(
        self, brokers: Collection[int] | None = None, topics: Collection[str] | None = None
    ) -> dict[ReplicaKey, ReplicaDirInfo]:
        """See :meth:`KafkaAdmin.describe_log_dirs`."""
        with self._borrow("DescribeLogDirs", admin_request_count(brokers)) as admin:
            return admin.describe_log_dirs(brokers, topics)

    def log_dir_paths(self, brokers: Collection[int]) -> dict[int, frozenset[str]]:
        """See :meth:`KafkaAdmin.log_dir_paths`."""
        with self._borrow("DescribeLogDirs", len(brokers)) as admin:
            return admin.log_dir_paths(brokers)

    def log_dir_states(self, brokers: Collection[int]) -> dict[int, tuple[LogDirState, ...]]:
        """See :meth:`KafkaAdmin.log_dir_states`."""
        with self._borrow("DescribeLogDirs", len(brokers)) as admin:
            return admin.log_dir_states(brokers)

    def elect_preferred_leaders(
        self, partitions: Collection[TopicPartition]
    ) -> dict[TopicPartition, ApiError | None]:
        """See :meth:`KafkaAdmin.elect_preferred_leaders`."""
        with self._borrow("ElectLeaders") as admin:
            return admin.elect_preferred_leaders(partitions)

    def alter_replica_log_dirs(
        self, moves: Mapping[ReplicaKey, str]
    ) -> dict[ReplicaKey, ApiError | None]:
        """See :meth:`KafkaAdmin.alter_replica_log_dirs`."""
        with self._borrow("AlterReplicaLogDirs", len({key[0] for key in moves})) as admin:
            return admin.alter_replica_log_dirs(moves)

    def max_api_version(self, broker: int, api_key: int) -> int | None:
        """See :meth:`KafkaAdmin.max_api_version`."""
        with self._borrow() as admin:
            return admin.max_api_version(broker, api_key)

    def kafka_version(self, brokers: Collection[int]) -> str | None:
        """See :meth:`KafkaAdmin.kafka_version`."""
        with self._borrow("ApiVersions", len(brokers)) as admin:
            return admin.kafka_version(brokers)

    def close(self) -> None:
        """Close every client; the pool must not be used afterwards."""
        with self._lock:
            clients, self._clients, self._idle = self._clients, [], []
        for client in clients:
            client.close()


def _alter_requests(changes: Mapping[ConfigResource, Mapping[str, str | None]]) -> int:
    """IncrementalAlterConfigs requests: one per broker resource, one for all topics."""
    brokers = [r for r, e in changes.items() if e and r.kind is ConfigResourceKind.BROKER]
    topics = any(e and r.kind is not ConfigResourceKind.BROKER for r, e in changes.items())
    return len(brokers) + (1 if topics else 0)
