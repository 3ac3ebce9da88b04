"""Typed models of kpo's two custom resources' specs (PartitionReassignment, TopicReplicaQuota).

The models mirror the CRDs in ``crds/`` field for field (camelCase aliases, the
same bounds), so a handler turns the ``spec`` dict kopf hands it into a checked
object with ``from_object``, and a tool that writes manifests (the operator's CLI,
the placement job) checks them against the same rules. Rules that need the
cluster (topic exists, broker alive, ...) are not here but in the operator's
``validation`` module, so that each bad entry can be named; rules that the API
server already enforces through the CRD's CEL validations (logDirs length) are
checked there too, because objects may come from other sources (the CLI, tests).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal, Self, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from kpo_kafka.topic_partition import TopicPartition

ANY_LOG_DIR = "any"
"""The log-dir placeholder meaning "let the broker choose" (KIP-113, reassignment JSON)."""

_TOPIC_PATTERN = r"^[a-zA-Z0-9._-]+$"
_OBJECT_NAME_PATTERN = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"
_THROTTLED_REPLICAS_PATTERN = r"^(\*|[0-9]{1,10}:[0-9]{1,10}(,[0-9]{1,10}:[0-9]{1,10})*)$"

MAX_ID = 2**31 - 1
"""The largest partition index or broker id: Kafka's ids are Java ints."""

TopicName = Annotated[str, Field(min_length=1, max_length=249, pattern=_TOPIC_PATTERN)]
ClusterRef = Annotated[str, Field(min_length=1, max_length=253, pattern=_OBJECT_NAME_PATTERN)]
"""``spec.clusterRef``: the name of a KafkaCluster in the object's namespace."""
BrokerId = Annotated[int, Field(ge=0, le=MAX_ID)]
Rate = Annotated[int, Field(ge=1, le=2**63 - 1)]
"""A throttle rate in bytes/s."""


def check_throttled_replica_ids(text: str) -> str:
    """Check the ids of a ``*.replication.throttled.replicas`` value already in pattern form.

    Kafka's ``ThrottledReplicaListValidator`` accepts ``"*"`` or ``partition:broker``
    pairs of decimal ids; the broker then reads each id as a Java int, so an id
    above :data:`MAX_ID` cannot be applied.

    Returns:
        ``text`` unchanged.

    Raises:
        ValueError: A partition index or broker id is above :data:`MAX_ID`, naming the pair.
    """
    if text == "*":
        return text
    for pair in text.split(","):
        partition, _, broker = pair.partition(":")
        for what, value in (("partition", partition), ("broker id", broker)):
            if int(value) > MAX_ID:
                raise ValueError(f"{pair!r}: {what} {value} is above {MAX_ID} (a Java int)")
    return text


ThrottledReplicaList = Annotated[
    str,
    Field(max_length=65536, pattern=_THROTTLED_REPLICAS_PATTERN),
    AfterValidator(check_throttled_replica_ids),
]
"""A ``*.replication.throttled.replicas`` value: ``"*"`` or ``partition:broker,...`` (KIP-73)."""


class SpecError(ValueError):
    """A custom resource's ``spec`` does not match its CRD schema.

    Attributes:
        kind: The resource kind (``PartitionReassignment`` or ``TopicReplicaQuota``).
        errors: One human-readable line per problem, ``<path>: <message>``.
    """

    def __init__(self, kind: str, errors: list[str]) -> None:
        super().__init__(f"invalid {kind} spec: " + "; ".join(errors))
        self.kind = kind
        self.errors = errors


class _Spec(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="forbid", frozen=True, strict=True)


_SpecT = TypeVar("_SpecT", bound=BaseModel)


def parse_spec(cls: type[_SpecT], kind: str, obj: Mapping[str, Any]) -> _SpecT:
    """Parse ``obj`` (a whole object ``{"spec": {...}}`` or a bare spec) as ``cls``.

    Raises:
        SpecError: The spec does not match ``cls``; ``errors`` names each field as
            ``spec.<path>: <message>``.
    """
    spec = obj.get("spec", obj)
    if not isinstance(spec, Mapping):
        raise SpecError(kind, ["spec: must be an object"])
    try:
        return cls.model_validate(dict(spec))
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            path = ".".join(["spec", *(f"[{p}]" if isinstance(p, int) else p for p in err["loc"])])
            lines.append(f"{path.replace('.[', '[')}: {err['msg']}")
        raise SpecError(kind, lines) from exc


class PartitionTarget(_Spec):
    """One entry of ``spec.partitions``: a partition and its target replicas (RAR).

    Attributes:
        topic: Topic name.
        partition: Partition index (>= 0).
        replicas: Target broker ids, preferred leader first (reassignment JSON ``replicas``).
        log_dirs: Optional target log dir per replica (``logDirs``), an absolute path
            or ``"any"``; same length as ``replicas`` when valid (checked by validation).
    """

    topic: TopicName
    partition: Annotated[int, Field(ge=0, le=MAX_ID)]
    replicas: Annotated[list[BrokerId], Field(min_length=1, max_length=32)]
    log_dirs: (
        Annotated[
            list[Annotated[str, Field(max_length=4096, pattern=r"^(any|/.*)$")]],
            Field(min_length=1, max_length=32),
        ]
        | None
    ) = Field(default=None, alias="logDirs")

    @property
    def key(self) -> TopicPartition:
        """The ``(topic, partition)`` key of this entry."""
        return TopicPartition(self.topic, self.partition)


class ReassignmentThrottle(_Spec):
    """``spec.throttle`` of a PartitionReassignment; rates in bytes/s.

    Attributes:
        replication_rate: Set as ``leader.replication.throttled.rate`` and
            ``follower.replication.throttled.rate`` (``kafka-reassign-partitions --throttle``).
        log_dir_move_rate: Set as ``replica.alter.log.dirs.io.max.bytes.per.second``
            (``--replica-alter-log-dirs-throttle``).
    """

    replication_rate: Rate | None = Field(default=None, alias="replicationRate")
    log_dir_move_rate: Rate | None = Field(default=None, alias="logDirMoveRate")

    @model_validator(mode="after")
    def _one_rate(self) -> Self:
        if self.replication_rate is None and self.log_dir_move_rate is None:
            raise ValueError("throttle must set replicationRate, logDirMoveRate or both")
        return self


class PartitionReassignmentSpec(_Spec):
    """``spec`` of a PartitionReassignment (``crds/kpo.dev_partitionreassignments.yaml``).

    Attributes:
        partitions: 1..2000 partition targets.
        throttle: Optional replication throttles, removed when the reassignment ends.
        preferred_leader_election: Run ElectLeaders (PREFERRED) on completion.
        cancel: Revert the in-flight partitions (KIP-455 cancellation).
        suspend: Plan only; submit nothing while true.
        cluster_ref: Name of the KafkaCluster (same namespace) to act on; ``None``:
            the operator's default connection.
        concurrent_partition_movements_per_broker: At most this many partition movements
            into or out of each live broker at once, counting every in-flight reassignment
            of the cluster (Cruise Control's ``num.concurrent.partition.movements.per.broker``,
            Strimzi's ``concurrentPartitionMovementsPerBroker``); ``None``: no limit.
        concurrent_leader_movements: At most this many of the object's in-flight
            partitions whose leader is not in their target replicas (Cruise Control's
            ``num.concurrent.leader.movements``, Strimzi's ``concurrentLeaderMovements``);
            ``None``: no limit.
    """

    partitions: Annotated[list[PartitionTarget], Field(min_length=1, max_length=2000)]
    throttle: ReassignmentThrottle | None = None
    preferred_leader_election: bool = Field(default=False, alias="preferredLeaderElection")
    cancel: bool = False
    suspend: bool = False
    cluster_ref: ClusterRef | None = Field(default=None, alias="clusterRef")
    concurrent_partition_movements_per_broker: int | None = Field(
        default=None, ge=1, le=MAX_ID, alias="concurrentPartitionMovementsPerBroker"
    )
    concurrent_leader_movements: int | None = Field(
        default=None, ge=1, le=MAX_ID, alias="concurrentLeaderMovements"
    )

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> PartitionReassignmentSpec:
        """Parse a whole object (``{"spec": {...}, ...}``) or a bare spec dict.

        Raises:
            SpecError: The spec does not match the CRD schema; ``errors`` names each field.
        """
        return parse_spec(cls, "PartitionReassignment", obj)


class TopicSelector(_Spec):
    """``spec.topics`` of a TopicReplicaQuota: exactly one of ``all: true`` or ``names``."""

    all: bool | None = None
    names: Annotated[list[TopicName], Field(min_length=1, max_length=1000)] | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> Self:
        if bool(self.all) == (self.names is not None):
            raise ValueError("set exactly one of topics.all (true) or topics.names")
        return self


class TopicReplicaQuotaSpec(_Spec):
    """``spec`` of a TopicReplicaQuota (``crds/kpo.dev_topicreplicaquotas.yaml``), KIP-73.

    Attributes:
        topics: The topics whose throttled-replica lists are set.
        brokers: Broker ids whose rates are set; ``None`` means every live broker.
        leader_replication_throttled_rate: ``leader.replication.throttled.rate``, bytes/s.
        follower_replication_throttled_rate: ``follower.replication.throttled.rate``, bytes/s.
        leader_replication_throttled_replicas: ``leader.replication.throttled.replicas``,
            ``"*"`` or ``"partition:broker,..."``.
        follower_replication_throttled_replicas: ``follower.replication.throttled.replicas``.
        cluster_ref: Name of the KafkaCluster (same namespace) to act on; ``None``:
            the operator's default connection.
    """

    topics: TopicSelector
    brokers: Annotated[list[BrokerId], Field(min_length=1, max_length=10000)] | None = None
    leader_replication_throttled_rate: Rate | None = Field(
        default=None, alias="leaderReplicationThrottledRate"
    )
    follower_replication_throttled_rate: Rate | None = Field(
        default=None, alias="followerReplicationThrottledRate"
    )
    leader_replication_throttled_replicas: ThrottledReplicaList | None = Field(
        default=None, alias="leaderReplicationThrottledReplicas"
    )
    follower_replication_throttled_replicas: ThrottledReplicaList | None = Field(
        default=None, alias="followerReplicationThrottledReplicas"
    )
    cluster_ref: ClusterRef | None = Field(default=None, alias="clusterRef")

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        lists = (
            self.leader_replication_throttled_replicas,
            self.follower_replication_throttled_replicas,
        )
        rates = (self.leader_replication_throttled_rate, self.follower_replication_throttled_rate)
        if all(v is None for v in (*lists, *rates)):
            raise ValueError("set at least one throttled rate or throttled replica list")
        if self.topics.all and any(v not in (None, "*") for v in lists):
            raise ValueError('with topics.all, the throttled replica lists can only be "*"')
        return self

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> TopicReplicaQuotaSpec:
        """Parse a whole object (``{"spec": {...}, ...}``) or a bare spec dict.

        Raises:
            SpecError: The spec does not match the CRD schema; ``errors`` names each field.
        """
        return parse_spec(cls, "TopicReplicaQuota", obj)


_HOST_PORT_PATTERN = r"^[^\s,:]+:[0-9]{1,5}$|^\[[0-9a-fA-F:.]+\]:[0-9]{1,5}$"


def _check_port(server: str) -> str:
    port = int(server.rpartition(":")[2])
    if not 0 < port < 65536:
        raise ValueError(f"{server!r}: port {port} is not in 1..65535")
    return server


BootstrapServer = Annotated[
    str,
    Field(min_length=3, max_length=1024, pattern=_HOST_PORT_PATTERN),
    AfterValidator(_check_port),
]
"""One ``host:port`` of ``bootstrap.servers``."""


class KafkaClientConfig(_Spec):
    """``spec.config`` of a KafkaCluster: the non-secret client properties, Kafka's names.

    Attributes:
        security_protocol: ``security.protocol`` (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL).
        sasl_mechanism: ``sasl.mechanism`` (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512).
        ssl_endpoint_identification_algorithm: ``ssl.endpoint.identification.algorithm``:
            ``https`` (default) or empty to skip the host-name check.
    """

    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] | None = Field(
        default=None, alias="security.protocol"
    )
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = Field(
        default=None, alias="sasl.mechanism"
    )
    ssl_endpoint_identification_algorithm: Literal["https", ""] | None = Field(
        default=None, alias="ssl.endpoint.identification.algorithm"
    )

    def properties(self) -> dict[str, str]:
        """Return the set properties by their Kafka names."""
        return {
            name: value
            for name, value in self.model_dump(by_alias=True).items()
            if value is not None
        }


class SecretKeyRef(_Spec):
    """A key of a core/v1 Secret in the KafkaCluster's namespace (never the value itself).

    Attributes:
        name: The Secret's name.
        key: The key in its ``data``.
    """

    name: Annotated[str, Field(min_length=1, max_length=253, pattern=_OBJECT_NAME_PATTERN)]
    key: Annotated[str, Field(min_length=1, max_length=253, pattern=r"^[-._a-zA-Z0-9]+$")]


class KafkaClusterSecretRefs(_Spec):
    """``spec.secretRefs`` of a KafkaCluster: client property name -> Secret key holding it.

    Attributes:
        ssl_truststore_certificates: ``ssl.truststore.certificates``: PEM CA certificates.
        ssl_keystore_certificate_chain: ``ssl.keystore.certificate.chain`` (mutual TLS).
        ssl_keystore_key: ``ssl.keystore.key``: the client's PEM private key.
        ssl_key_password: ``ssl.key.password``: the key's password (encrypted keys).
        sasl_jaas_config: ``sasl.jaas.config`` (PlainLoginModule / ScramLoginModule).
        sasl_username: the SASL user name, instead of ``sasl.jaas.config``.
        sasl_password: the SASL password, instead of ``sasl.jaas.config``.
    """

    ssl_truststore_certificates: SecretKeyRef | None = Field(
        default=None, alias="ssl.truststore.certificates"
    )
    ssl_keystore_certificate_chain: SecretKeyRef | None = Field(
        default=None, alias="ssl.keystore.certificate.chain"
    )
    ssl_keystore_key: SecretKeyRef | None = Field(default=None, alias="ssl.keystore.key")
    ssl_key_password: SecretKeyRef | None = Field(default=None, alias="ssl.key.password")
    sasl_jaas_config: SecretKeyRef | None = Field(default=None, alias="sasl.jaas.config")
    sasl_username: SecretKeyRef | None = Field(default=None, alias="sasl.username")
    sasl_password: SecretKeyRef | None = Field(default=None, alias="sasl.password")

    def refs(self) -> dict[str, SecretKeyRef]:
        """Return the set references by their property names."""
        return {
            field.alias or attr: value
            for attr, field in type(self).model_fields.items()
            if (value := getattr(self, attr)) is not None
        }


class KafkaClusterSpec(_Spec):
    """``spec`` of a KafkaCluster (``crds/kpo.dev_kafkaclusters.yaml``): how to reach one cluster.

    Attributes:
        bootstrap_servers: ``bootstrap.servers``, 1..100 ``host:port`` entries.
        config: Non-secret client properties (Kafka's names).
        secret_refs: Secret-held client properties, by Secret key reference.
        request_timeout_ms: ``request.timeout.ms`` of the Admin API client (default:
            the operator's setting).
    """

    bootstrap_servers: Annotated[list[BootstrapServer], Field(min_length=1, max_length=100)] = (
        Field(alias="bootstrapServers")
    )
    config: KafkaClientConfig = Field(default_factory=KafkaClientConfig)
    secret_refs: KafkaClusterSecretRefs = Field(
        default_factory=KafkaClusterSecretRefs, alias="secretRefs"
    )
    request_timeout_ms: Annotated[int, Field(ge=1000, le=600000)] | None = Field(
        default=None, alias="requestTimeoutMs"
    )

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> KafkaClusterSpec:
        """Parse a whole object (``{"spec": {...}, ...}``) or a bare spec dict.

        Raises:
            SpecError: The spec does not match the CRD schema; ``errors`` names each field.
        """
        return parse_spec(cls, "KafkaCluster", obj)
