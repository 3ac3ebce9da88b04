"""Topic creation, deletion and partition additions, written to ZooKeeper by any broker.

As Kafka's ``AdminZkClient`` (ZooKeeper mode): the broker that receives CreateTopics,
DeleteTopics or CreatePartitions validates the request, writes the assignment
(``/brokers/topics/<topic>``, placed as Kafka's ``AdminUtils.assignReplicasToBrokers``) or
the deletion marker (``/admin/delete_topics/<topic>``), and the controller does the rest
through its watches. The request then waits, up to its ``timeout_ms``, until the metadata
cache shows the outcome (leaders elected, topic gone), answering REQUEST_TIMED_OUT if not.
"""

from __future__ import annotations

import asyncio
import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from kafka import errors as kafka_errors

from kpo_broker.server.dynamic_config import InvalidTopicConfigError, validate_topic_config
from kpo_broker.server.metadata_cache import MetadataCache
from kpo_broker.zk.client import KafkaZkClient
from kpo_broker.zk.errors import TopicAlreadyExistsError
from kpo_broker.zk.model import ReplicaAssignment
from kpo_kafka.assignment import (
    BrokerMetadata,
    InconsistentBrokerRacksError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    assign_replicas_for_new_partitions,
    assign_replicas_to_brokers,
    validate_replica_assignment,
)

_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")
_POLL_S = 0.05


@dataclass(frozen=True)
class AdminResult:
    """Outcome of one topic in an admin request: Kafka error code and message."""

    error_code: int = 0
    message: str | None = None


OK = AdminResult()


def topic_name_error(name: str) -> str | None:
    """Return why ``name`` is not a legal topic name, or None (Kafka's ``Topic.validate``)."""
    if name in (".", ".."):
        return "topic name cannot be '.' or '..'"
    if not _LEGAL_TOPIC.match(name):
        return "topic names are 1-249 characters of ASCII alphanumerics, '.', '_' and '-'"
    return None


class TopicAdmin:
    """Admin operations on topics for one broker.

    Args:
        zk: the ZooKeeper client.
        metadata_cache: for live brokers and to observe the controller's progress.
        num_partitions: ``num.partitions`` (CreateTopics with -1, auto-creation).
        default_replication_factor: ``default.replication.factor``.
        delete_topic_enable: ``delete.topic.enable``.
    """

    def __init__(
        self,
        zk: KafkaZkClient,
        metadata_cache: MetadataCache,
        num_partitions: int = 1,
        default_replication_factor: int = 1,
        delete_topic_enable: bool = True,
    ) -> None:
        self.zk = zk
        self.cache = metadata_cache
        self.num_partitions = num_partitions
        self.default_replication_factor = default_replication_factor
        self.delete_topic_enable = delete_topic_enable

    def _live_brokers(self) -> list[BrokerMetadata]:
        return [BrokerMetadata(b.broker_id, b.rack) for b in self.cache.brokers.values()]

    async def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        assignments: Mapping[int, Sequence[int]] | None,
        configs: Mapping[str, str],
        validate_only: bool = False,
        timeout_ms: int = 0,
    ) -> AdminResult:
        """Validate and create one topic (CreateTopics).

        ``num_partitions``/``replication_factor`` of -1 take the broker defaults; an
        explicit ``assignments`` requires both to be -1, as Kafka does.
        """
        if (reason := topic_name_error(name)) is not None:
            return AdminResult(kafka_errors.InvalidTopicError.errno, reason)
        if name in self.cache.partitions:
            return AdminResult(
                kafka_errors.TopicAlreadyExistsError.errno, f"Topic '{name}' already exists."
            )
        try:
            validate_topic_config(configs)
        except InvalidTopicConfigError as exc:
            return AdminResult(kafka_errors.InvalidConfigurationError.errno, str(exc))
        try:
            assignment = self._assignment(name, num_partitions, replication_factor, assignments)
        except _AdminError as exc:
            return exc.result
        if validate_only:
            return OK
        try:
            await asyncio.to_thread(self.zk.create_topic, name, assignment, dict(configs))
        except TopicAlreadyExistsError:
            return AdminResult(
                kafka_errors.TopicAlreadyExistsError.errno, f"Topic '{name}' already exists."
            )
        if timeout_ms > 0 and not await self._wait(lambda: self._has_leaders(name), timeout_ms):
            return AdminResult(
                kafka_errors.RequestTimedOutError.errno,
                "topic created; its leaders were not elected within the timeout",
            )
        return OK

    def _assignment(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        assignments: Mapping[int, Sequence[int]] | None,
    ) -> dict[int, list[int]]:
        brokers = self._live_brokers()
        if assignments:
            if num_partitions != -1 or replication_factor != -1:
                raise _AdminError(
                    kafka_errors.InvalidRequestError.errno,
                    "both numPartitions and replicationFactor must be -1 with an assignment",
                )
            try:
                validate_replica_assignment(assignments, [b.id for b in brokers])
            except InvalidReplicaAssignmentError as exc:
                raise _AdminError(
                    kafka_errors.InvalidReplicationAssignmentError.errno, str(exc)
                ) from exc
            return {p: list(r) for p, r in assignments.items()}
        partitions = self.num_partitions if num_partitions == -1 else num_partitions
        rf = self.default_replication_factor if replication_factor == -1 else replication_factor
        if partitions < 1:
            raise _AdminError(
                kafka_errors.InvalidPartitionsError.errno, "number of partitions must be >= 1"
            )
        try:
            return assign_replicas_to_brokers(brokers, partitions, rf)
        except InvalidReplicationFactorError as exc:
            raise _AdminError(kafka_errors.InvalidReplicationFactorError.errno, str(exc)) from exc
        except (InvalidPartitionsError, InconsistentBrokerRacksError) as exc:
            raise _AdminError(kafka_errors.InvalidRequestError.errno, str(exc)) from exc

    async def auto_create(self, name: str) -> int:
        """Create ``name`` with the defaults (Metadata auto-creation); return the error code.

        Returns LEADER_NOT_AVAILABLE (5) when the topic is being created, as Kafka does.
        """
        result = await self.create_topic(name, -1, -1, None, {})
        if result.error_code in (0, kafka_errors.TopicAlreadyExistsError.errno):
            return int(kafka_errors.LeaderNotAvailableError.errno)
        return result.error_code

    def _has_leaders(self, name: str) -> bool:
        partitions = self.cache.partitions.get(name)
        return partitions is not None and all(p.leader >= 0 for p in partitions.values())

    async def _wait(self, done: Callable[[], bool], timeout_ms: int) -> bool:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        while not done():
            if loop.time() >= deadline:
                return False
            await asyncio.sleep(_POLL_S)
        return True

    async def delete_topics(self, names: Sequence[str], timeout_ms: int) -> dict[str, AdminResult]:
        """Queue topics for deletion (DeleteTopics) and wait for the controller to finish."""
        results: dict[str, AdminResult] = {}
        to_delete = []
        for name in names:
            if not self.delete_topic_enable:
                results[name] = AdminResult(
                    kafka_errors.TopicDeletionDisabledError.errno, "delete.topic.enable is false"
                )
            elif name not in self.cache.partitions:
                results[name] = AdminResult(
                    kafka_errors.UnknownTopicOrPartitionError.errno, "unknown topic"
                )
            else:
                results[name] = OK
                to_delete.append(name)
        if to_delete:
            await asyncio.to_thread(self.zk.mark_topics_for_deletion, to_delete)
            if timeout_ms > 0:
                await self._wait(
                    lambda: all(n not in self.cache.partitions for n in to_delete), timeout_ms
                )
                for name in to_delete:
                    if name in self.cache.partitions:
                        results[name] = AdminResult(
                            kafka_errors.RequestTimedOutError.errno,
                            "deletion is in progress but did not finish within the timeout",
                        )
        return results

    async def create_partitions(
        self,
        name: str,
        count: int,
        assignments: Sequence[Sequence[int]] | None,
        validate_only: bool,
        timeout_ms: int,
    ) -> AdminResult:
        """Add partitions to ``name`` so it has ``count`` in all (CreatePartitions).

        A name that is not a legal topic name names no topic: UNKNOWN_TOPIC_OR_PARTITION.
        """
        if topic_name_error(name) is not None:
            return AdminResult(kafka_errors.UnknownTopicOrPartitionError.errno, "unknown topic")
        current = await asyncio.to_thread(self.zk.get_replica_assignments, [name])
        topic = current.get(name)
        if topic is None:
            return AdminResult(kafka_errors.UnknownTopicOrPartitionError.errno, "unknown topic")
        existing = {p: list(a.replicas) for p, a in topic.partitions.items()}
        brokers = self._live_brokers()
        try:
            if assignments:
                if len(assignments) != count - len(existing):
                    raise InvalidReplicaAssignmentError(
                        f"{len(assignments)} assignments for {count - len(existing)} new partitions"
                    )
                added = {len(existing) + i: list(r) for i, r in enumerate(assignments)}
                validate_replica_assignment(
                    added,
                    [b.id for b in brokers],
                    start_partition_id=len(existing),
                    replication_factor=len(existing[0]),
                )
            else:
                added = assign_replicas_for_new_partitions(brokers, existing, count)
        except InvalidPartitionsError as exc:
            return AdminResult(kafka_errors.InvalidPartitionsError.errno, str(exc))
        except InvalidReplicationFactorError as exc:
            return AdminResult(kafka_errors.InvalidReplicationFactorError.errno, str(exc))
        except (InvalidReplicaAssignmentError, InconsistentBrokerRacksError) as exc:
            return AdminResult(kafka_errors.InvalidReplicationAssignmentError.errno, str(exc))
        if validate_only:
            return OK
        new_assignment = dict(topic.partitions)
        for p, replicas in added.items():
            new_assignment[p] = ReplicaAssignment(tuple(replicas))
        version = await asyncio.to_thread(
            functools.partial(
                self.zk.set_replica_assignment,
                name,
                new_assignment,
                topic.zk_version,
                topic_id=topic.topic_id,
            )
        )
        if version is None:
            return AdminResult(
                kafka_errors.ReassignmentInProgressError.errno,
                "the topic's assignment changed concurrently; retry",
            )
        if timeout_ms > 0:
            await self._wait(
                lambda: (
                    len(self.cache.partitions.get(name, {})) >= count and self._has_leaders(name)
                ),
                timeout_ms,
            )
        return OK


class _AdminError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.result = AdminResult(code, message)
