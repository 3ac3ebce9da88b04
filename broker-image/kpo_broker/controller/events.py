"""The events the controller processes, one class per kind.

Kafka's controller (ZooKeeper mode) is single threaded: ZooKeeper watches, broker
requests (ControlledShutdown, ElectLeaders), scheduled tasks and broker responses only
*enqueue* events, and one thread applies them in order (the inputs: ZooKeeper
listeners, broker channels, scheduled preferred leader elections). Events that
need an answer carry a :class:`concurrent.futures.Future` completed by that thread.

When the controller cannot process a queued event (it resigned, or is shutting down),
the event is *preempted*: :meth:`ControllerEvent.preempt` fails its future with the given
error so that the waiting request handler answers, as Kafka's ``preempt()`` does.
"""

from __future__ import annotations

import contextlib
import enum
from collections.abc import Mapping
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field
from typing import Any

from kpo_broker.zk.model import ReplicaAssignment
from kpo_kafka.topic_partition import TopicPartition

#: Answer of an ElectLeaders event: partition -> (Kafka error code, error message or None).
ElectionResults = dict[TopicPartition, tuple[int, str | None]]
#: Answer of an AlterPartitionReassignments event: partition -> (error code, message or None).
ReassignmentResults = dict[TopicPartition, tuple[int, str | None]]


class ElectionType(enum.IntEnum):
    """Kind of leader election asked for by ElectLeaders (KIP-460 wire values)."""

    PREFERRED = 0
    UNCLEAN = 1


class ElectionTrigger(enum.Enum):
    """Who asked for a replica leader election (Kafka's ``ElectionTrigger``)."""

    ZK_TRIGGERED = "zk"  # /admin/preferred_replica_election
    ADMIN_CLIENT = "admin"  # the ElectLeaders API
    AUTO_TRIGGERED = "auto"  # auto.leader.rebalance.enable


class ControllerEvent:
    """Base class of every controller event.

    Subclasses are dataclasses; :attr:`name` is used in logs and metrics.
    """

    @property
    def name(self) -> str:
        """The event's kind, e.g. ``"BrokerChange"``."""
        return type(self).__name__

    def preempt(self, error: BaseException) -> None:
        """Answer the event without processing it; the default event has nobody waiting.

        Args:
            error: why the event is not processed (e.g. the controller resigned).
        """


@dataclass(frozen=True)
class Startup(ControllerEvent):
    """The broker started its controller: register watches and run for election."""


@dataclass(frozen=True)
class ControllerChange(ControllerEvent):
    """``/controller`` was created or changed: resign if another broker now holds it."""


@dataclass(frozen=True)
class Reelect(ControllerEvent):
    """``/controller`` was deleted: resign if needed and run for election again."""


@dataclass(frozen=True)
class Expire(ControllerEvent):
    """The ZooKeeper session expired: resign (ephemeral ``/controller`` is gone)."""


@dataclass(frozen=True)
class SessionReestablished(ControllerEvent):
    """A new ZooKeeper session is up after an expiry: re-register watches and re-elect."""


@dataclass(frozen=True)
class BrokerChange(ControllerEvent):
    """The children of ``/brokers/ids`` changed: brokers started or failed (``BrokerChange``)."""


@dataclass(frozen=True)
class BrokerModifications(ControllerEvent):
    """A live broker's registration znode changed (e.g. new endpoints)."""

    broker_id: int


@dataclass(frozen=True)
class TopicChange(ControllerEvent):
    """The children of ``/brokers/topics`` changed: topics created or removed (``TopicChange``)."""


@dataclass(frozen=True)
class PartitionModifications(ControllerEvent):
    """``/brokers/topics/<topic>`` changed: partitions were added (or a reassignment written)."""

    topic: str


@dataclass(frozen=True)
class TopicUncleanLeaderElectionEnable(ControllerEvent):
    """A topic's ``unclean.leader.election.enable`` became true: elect its offline partitions.

    Kafka's ``TopicUncleanLeaderElectionEnable`` (sent by the topic config handler).
    """

    topic: str


@dataclass(frozen=True)
class TopicDeletion(ControllerEvent):
    """The children of ``/admin/delete_topics`` changed: topics are queued for deletion."""


@dataclass(frozen=True)
class IsrChangeNotification(ControllerEvent):
    """New ``/isr_change_notification`` children: leaders changed ISRs; tell every broker."""


@dataclass(frozen=True)
class PreferredReplicaElectionZNode(ControllerEvent):
    """``/admin/preferred_replica_election`` was created: elect the preferred leaders it names."""


@dataclass(frozen=True)
class AutoPreferredReplicaLeaderElection(ControllerEvent):
    """Periodic check (``leader.imbalance.check.interval.seconds``) of the leader imbalance."""


@dataclass(frozen=True)
class ControlledShutdown(ControllerEvent):
    """A broker asks to shut down cleanly (ControlledShutdown API).

    The future receives the partitions the broker still leads once the controller moved
    what it could; the broker retries until the set is empty (Kafka's
    ``controlled.shutdown.max.retries``).

    Attributes:
        broker_id: the broker shutting down.
        broker_epoch: its broker epoch (KIP-380); -1 from requests older than v2.
        result: completed with ``set[TopicPartition]``, or failed with a
            :class:`~kpo_broker.controller.errors.ControllerError`.
    """

    broker_id: int
    broker_epoch: int
    result: Future[set[TopicPartition]] = field(default_factory=Future, compare=False)

    def preempt(self, error: BaseException) -> None:
        """Fail the future with ``error``."""
        _fail(self.result, error)


@dataclass(frozen=True)
class AlterPartitionReceived(ControllerEvent):
    """A leader asks for ISR changes (AlterPartition API, KIP-497).

    Attributes:
        broker_id: the leader.
        broker_epoch: its broker epoch; a stale one fails the whole request.
        proposals: partition -> the proposed change
            (:class:`~kpo_broker.controller.alter_partition.ProposedIsr`), for topics
            named by name (v0-v1).
        proposals_by_topic_id: Kafka topic id -> partition index -> proposed change, for
            topics named by id (v2+); the controller resolves the names.
        request_version: the AlterPartition version.
        result: completed with an
            :class:`~kpo_broker.controller.alter_partition.AlterPartitionResult`, or
            failed with a :class:`~kpo_broker.controller.errors.ControllerError`
            (NOT_CONTROLLER, STALE_BROKER_EPOCH) for the whole request.
    """

    broker_id: int
    broker_epoch: int
    proposals: Mapping[TopicPartition, Any]
    proposals_by_topic_id: Mapping[str, Mapping[int, Any]]
    request_version: int
    result: Future[Any] = field(default_factory=Future, compare=False)

    def preempt(self, error: BaseException) -> None:
        """Fail the future with ``error``."""
        _fail(self.result, error)


@dataclass(frozen=True)
class ElectLeaders(ControllerEvent):
    """Leader elections asked for by the ElectLeaders API (KIP-183, KIP-460).

    Attributes:
        partitions: the partitions, or None for every partition (preferred elections of
            all partitions whose leader is not the preferred replica).
        election_type: preferred or unclean.
        result: completed with partition -> (error code, message).
    """

    partitions: frozenset[TopicPartition] | None
    election_type: ElectionType
    result: Future[ElectionResults] = field(default_factory=Future, compare=False)

    def preempt(self, error: BaseException) -> None:
        """Fail the future with ``error``."""
        _fail(self.result, error)


@dataclass(frozen=True)
class AlterPartitionReassignments(ControllerEvent):
    """Start, change or cancel partition reassignments (AlterPartitionReassignments, KIP-455).

    Attributes:
        reassignments: partition -> target replicas (RAR), or None to cancel its
            running reassignment.
        result: completed with partition -> (error code, message).
    """

    reassignments: Mapping[TopicPartition, tuple[int, ...] | None]
    result: Future[ReassignmentResults] = field(default_factory=Future, compare=False)

    def preempt(self, error: BaseException) -> None:
        """Fail the future with ``error``."""
        _fail(self.result, error)


@dataclass(frozen=True)
class ListPartitionReassignments(ControllerEvent):
    """List the running reassignments (ListPartitionReassignments, KIP-455).

    Attributes:
        partitions: the partitions to look at, or None for every partition.
        result: completed with partition -> its assignment (AR, adding and removing
            replicas) for the partitions being reassigned.
    """

    partitions: frozenset[TopicPartition] | None
    result: Future[dict[TopicPartition, ReplicaAssignment]] = field(
        default_factory=Future, compare=False
    )

    def preempt(self, error: BaseException) -> None:
        """Fail the future with ``error``."""
        _fail(self.result, error)


@dataclass(frozen=True)
class ZkPartitionReassignment(ControllerEvent):
    """``/admin/reassign_partitions`` was created: start the reassignments it lists."""


@dataclass(frozen=True)
class PartitionReassignmentIsrChange(ControllerEvent):
    """The state znode of a partition being reassigned changed: maybe all of RAR is in the ISR.

    Attributes:
        topic_partition: the partition.
    """

    topic_partition: TopicPartition


@dataclass(frozen=True)
class TopicDeletionStopReplicaResponseReceived(ControllerEvent):
    """A broker answered a StopReplica(delete_partition=true) sent for a topic deletion.

    Attributes:
        replica_id: the broker that answered.
        request_error: the top-level error code, or -1 when no response arrived.
        partition_errors: partition -> its error code (0 = deleted).
    """

    replica_id: int
    request_error: int
    partition_errors: Mapping[TopicPartition, int]


@dataclass(frozen=True)
class LogDirEventNotification(ControllerEvent):
    """``/log_dir_event_notification`` children changed: a broker's log dir failed."""


@dataclass(frozen=True)
class LeaderAndIsrResponseReceived(ControllerEvent):
    """A broker answered a LeaderAndIsr request (Kafka's ``LeaderAndIsrResponseReceived``).

    Attributes:
        broker_id: the broker that answered.
        error_code: the top-level error code.
        partition_errors: partition -> its error code (KAFKA_STORAGE_ERROR: the replica
            is in an offline log dir; 0: it is online).
    """

    broker_id: int
    error_code: int
    partition_errors: Mapping[TopicPartition, int]


@dataclass(frozen=True)
class ShutdownEventThread(ControllerEvent):
    """Sentinel that stops the event thread; always the last event it takes."""


def _fail(future: Future[Any], error: BaseException) -> None:
    """Fail ``future`` unless it is already done or cancelled."""
    with contextlib.suppress(InvalidStateError):
        future.set_exception(error)
