"""Plain values and errors exchanged with a Kafka cluster through the Admin API.

These types are what :class:`kpo_kafka.admin.KafkaAdmin` takes and returns, so
the operator, the placement job, the bench and the demo never see a Kafka
client's own classes.
Broker ids, partition numbers and sizes are plain ``int`` (sizes in bytes,
lags in messages); replica lists keep Kafka's order, whose first entry is the
preferred leader.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

ReplicaKey = tuple[int, str, int]
"""One replica of a partition on one broker, as ``(broker id, topic, partition)``."""

ERROR_NONE = 0
ERROR_UNKNOWN_TOPIC_OR_PARTITION = 3
ERROR_REPLICA_NOT_AVAILABLE = 9
ERROR_INVALID_REPLICA_ASSIGNMENT = 39
ERROR_INVALID_REQUEST = 42
ERROR_LOG_DIR_NOT_FOUND = 57
ERROR_PREFERRED_LEADER_NOT_AVAILABLE = 80
ERROR_ELECTION_NOT_NEEDED = 84
ERROR_NO_REASSIGNMENT_IN_PROGRESS = 85
ERROR_INVALID_CONFIG = 40

API_KEY_DESCRIBE_LOG_DIRS = 35
"""DescribeLogDirs' API key; its version 5 (KIP-1066, Kafka 4.3) reports ``IsCordoned``."""


@dataclass(frozen=True)
class ClusterInfo:
    """The live brokers and the controller, from DescribeCluster or Metadata.

    Attributes:
        brokers: broker id -> ``broker.rack`` (``None`` when the broker has no rack) of
            each live broker: registered and, on KRaft, not fenced.
        controller_id: node id of the active controller, ``None`` while there is none or
            when it cannot be known: on KRaft the metadata quorum's leader (DescribeQuorum,
            KIP-595; needs Describe on the Cluster), on ZooKeeper-mode clusters the
            controller broker (DescribeCluster).
        cluster_id: the cluster id, ``None`` if the cluster did not report one.
        authorized_operations: the operations this client may perform on the Cluster
            resource, by ``kafka-acls`` name (``Alter``, ``AlterConfigs``, ...), as
            DescribeCluster reports them (KIP-430); ``None`` when not reported.
        fenced_brokers: brokers registered with the KRaft controller but fenced (not in
            ``brokers``), as DescribeCluster v2 reports them with ``IncludeFencedBrokers``
            (KIP-1073, Kafka 4.0); always empty on older and ZooKeeper-mode clusters,
            whose DescribeCluster and Metadata list only live brokers.
    """

    brokers: dict[int, str | None]
    controller_id: int | None
    cluster_id: str | None = None
    authorized_operations: frozenset[str] | None = None
    fenced_brokers: frozenset[int] = frozenset()


NO_LEADER = -1
"""The leader id of a partition without a leader (Metadata's ``leader_id``, Kafka's
``LeaderAndIsr.NoLeader``)."""


@dataclass(frozen=True)
class PartitionInfo:
    """One partition as Metadata (and ListPartitionReassignments) report it (Kafka's PartitionInfo).

    Attributes:
        replicas: AR, the replica set in assignment order, preferred leader first.
            While a reassignment (KIP-455) is in flight this is the full set: the
            target replicas (RAR) followed by the ones being removed.
        isr: The in-sync replicas.
        leader: The leader's broker id, :data:`NO_LEADER` (-1) when there is none.
        adding: Replicas being added (RAR - OAR), empty unless reassigning (KIP-455).
        removing: Replicas to be removed (OAR - RAR), empty unless reassigning.
    """

    replicas: tuple[int, ...]
    isr: tuple[int, ...] = ()
    leader: int = NO_LEADER
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @property
    def original_replicas(self) -> tuple[int, ...]:
        """OAR: the replicas before the in-flight reassignment (AR minus adding)."""
        return tuple(b for b in self.replicas if b not in self.adding)


@dataclass(frozen=True)
class Reassignment:
    """A partition reassignment in flight, as ListPartitionReassignments reports it (KIP-455).

    Attributes:
        replicas: the current full replica set (target replicas plus the ones
            still being removed).
        adding: replicas being added (the target minus the original replicas).
        removing: replicas being removed (the original minus the target replicas).
    """

    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]

    @property
    def target(self) -> tuple[int, ...]:
        """The replica set the partition will have when the reassignment completes."""
        return tuple(b for b in self.replicas if b not in self.removing)


@dataclass(frozen=True)
class ReplicaDirInfo:
    """Where one replica lives on a broker and how big it is, from DescribeLogDirs (KIP-113).

    Attributes:
        log_dir: absolute path of the log directory holding the replica.
        size_bytes: size of the replica's log segments in bytes.
        offset_lag: messages the replica is behind: for a current replica the
            lag behind its partition's high watermark, for a future replica the
            lag behind the current replica's log end offset.
        is_future: whether this is a future replica being filled by an
            intra-broker move (AlterReplicaLogDirs).
        future: the future replica of the same partition on the same broker,
            when an intra-broker move is in flight.
    """

    log_dir: str
    size_bytes: int
    offset_lag: int
    is_future: bool = False
    future: ReplicaDirInfo | None = None


@dataclass(frozen=True)
class LogDirState:
    """One log dir of a broker as DescribeLogDirs reports it (KIP-113, KIP-827).

    Attributes:
        path: absolute path of the log dir (``log.dirs`` entry).
        online: ``False`` when the broker answers KAFKA_STORAGE_ERROR (the dir failed:
            Kafka's ``LogDirFailureChannel`` took it offline).
        total_bytes: size of the file system holding it, bytes (DescribeLogDirs v4+,
            ``TotalBytes``); -1 when offline or not reported.
        usable_bytes: free bytes of that file system the broker may use (``UsableBytes``);
            -1 when offline or not reported.
    """

    path: str
    online: bool
    total_bytes: int = -1
    usable_bytes: int = -1


class ConfigResourceKind(StrEnum):
    """The kinds of config resources the operator writes (Kafka's ConfigResource.Type)."""

    TOPIC = "topic"
    BROKER = "broker"


@dataclass(frozen=True)
class ConfigResource:
    """A broker or a topic whose dynamic configs are read or written.

    Attributes:
        kind: topic or broker.
        name: the topic name, or the broker id as a decimal string.
    """

    kind: ConfigResourceKind
    name: str

    @classmethod
    def broker(cls, broker_id: int) -> ConfigResource:
        """Return the per-broker dynamic config resource of ``broker_id``."""
        return cls(ConfigResourceKind.BROKER, str(broker_id))

    @classmethod
    def topic(cls, name: str) -> ConfigResource:
        """Return the config resource of topic ``name``."""
        return cls(ConfigResourceKind.TOPIC, name)


@dataclass(frozen=True)
class ApiError:
    """A Kafka error code returned for one item of a request (a partition, a resource...).

    Attributes:
        code: Kafka's numeric error code (never 0: success is reported as ``None``).
        name: Kafka's name of the error, e.g. ``NO_REASSIGNMENT_IN_PROGRESS``.
        message: the broker's error message, or Kafka's description of the code.
        retriable: whether Kafka classes the error as retriable.
    """

    code: int
    name: str
    message: str = ""
    retriable: bool = False

    def __str__(self) -> str:
        text = f"{self.name} ({self.code})"
        return f"{text}: {self.message}" if self.message else text


class KafkaAdminError(Exception):
    """A Kafka Admin API call failed as a whole.

    Attributes:
        error: the Kafka error the cluster answered with, when there was one.
    """

    def __init__(self, message: str, error: ApiError | None = None) -> None:
        super().__init__(message)
        self.error = error


class KafkaUnavailableError(KafkaAdminError):
    """The cluster could not be reached or answered with a retriable error; retry later.

    Raised for connection failures, timeouts, a missing controller and Kafka's
    retriable error codes (e.g. NOT_CONTROLLER, REQUEST_TIMED_OUT).
    """


class KafkaUnsupportedError(KafkaAdminError):
    """The cluster does not support a request the operator needs (Apache Kafka < 2.4).

    AlterPartitionReassignments and ListPartitionReassignments (KIP-455) need
    Kafka 2.4; IncrementalAlterConfigs (KIP-339) needs 2.3.
    """


class KafkaRequestError(KafkaAdminError):
    """The cluster rejected a whole request with a non-retriable error (e.g. authorization)."""


class KafkaAuthorizationError(KafkaRequestError):
    """Kafka refused a request for lack of an ACL (TOPIC/GROUP/CLUSTER_AUTHORIZATION_FAILED).

    The message names the API, the operation and the resource refused, e.g.
    ``AlterPartitionReassignments needs Alter on Cluster:kafka-cluster``
    (:func:`kpo_kafka.acls.refusal`).

    Attributes:
        api: The Admin API refused, e.g. ``AlterPartitionReassignments``.
    """

    def __init__(self, message: str, error: ApiError | None = None, api: str = "") -> None:
        super().__init__(message, error)
        self.api = api


class KafkaAuthenticationError(KafkaRequestError):
    """The client could not authenticate: SASL credentials refused or TLS handshake failed.

    Retrying does not help until the credentials, certificates or trust are fixed.
    """
