"""The one door to Kafka's Admin API: a small interface and its kafka-python client.

:class:`KafkaAdmin` lists the Admin API calls the operator's reconciliation logic
uses (KIP-455 reassignments, KIP-339 incremental configs for the KIP-73 throttles,
KIP-113 log dirs, KIP-460 leader election), typed with the plain values of
:mod:`kpo_kafka.admin_types`. :class:`KafkaPythonAdmin` implements it with
kafka-python's ``KafkaAdminClient``, so it works with the project's brokers and
with any Apache Kafka >= 2.4; the placement job, the bench and the demo use it
too (they also create topics, :meth:`KafkaPythonAdmin.create_topic`); unit tests
use an in-memory fake instead.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import time
from collections import defaultdict
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

import kafka.errors as kafka_errors
from kafka import KafkaAdminClient
from kafka import TopicPartition as KafkaTopicPartition
from kafka.admin import AlterConfigOp, ConfigResourceType
from kafka.admin import ConfigResource as KafkaConfigResource
from kafka.protocol.metadata import MetadataRequest
from kafka.structs import TopicPartitionReplica

from kpo_kafka.acls import decode_operations
from kpo_kafka.admin_errors import (
    api_error,
    authorization_error,
    error_of_class,
    parse_alter_result,
    tls_refused,
    translated,
)
from kpo_kafka.admin_types import (
    ERROR_ELECTION_NOT_NEEDED,
    NO_LEADER,
    ApiError,
    ClusterInfo,
    ConfigResource,
    ConfigResourceKind,
    KafkaAdminError,
    KafkaAuthenticationError,
    KafkaRequestError,
    KafkaUnavailableError,
    LogDirState,
    PartitionInfo,
    Reassignment,
    ReplicaDirInfo,
    ReplicaKey,
)
from kpo_kafka.client_config import ClientSecurity
from kpo_kafka.topic_partition import TopicPartition

__all__ = ["KafkaAdmin", "KafkaPythonAdmin"]

T = TypeVar("T")


@runtime_checkable
class KafkaAdmin(Protocol):
    """The Admin API calls the operator makes; every call may raise a ``KafkaAdminError``.

    ``KafkaUnavailableError`` means "retry later" (connection, timeout, no
    controller); per-item failures are returned as :class:`ApiError` values.
    """

    def describe_cluster(self) -> ClusterInfo:
        """Return the live brokers with their racks and the active controller (DescribeCluster).

        The active controller is the KRaft metadata quorum's leader (DescribeQuorum) on
        KRaft, DescribeCluster's controller on ZooKeeper-mode clusters. Fenced brokers
        (KIP-1073, DescribeCluster v2 on KRaft) are not live: they are given apart, in
        ``fenced_brokers``.
        """
        ...

    def describe_topics(
        self, topics: Collection[str] | None = None
    ) -> dict[str, dict[int, PartitionInfo]]:
        """Topic -> partition -> replicas, ISR and leader (Metadata).

        ``None`` describes every topic; topics that do not exist are left out.
        """
        ...

    def list_partition_reassignments(
        self, partitions: Collection[TopicPartition] | None = None
    ) -> dict[TopicPartition, Reassignment]:
        """List the reassignments in flight (ListPartitionReassignments, KIP-455); ``None``: all."""
        ...

    def alter_partition_reassignments(
        self, targets: Mapping[TopicPartition, Sequence[int] | None]
    ) -> dict[TopicPartition, ApiError | None]:
        """Submit target replica lists, or ``None`` to cancel (AlterPartitionReassignments).

        Returns per partition ``None`` when accepted, else the error (e.g.
        INVALID_REPLICA_ASSIGNMENT, NO_REASSIGNMENT_IN_PROGRESS). Raises
        ``ValueError`` for an empty replica list.
        """
        ...

    def describe_configs(
        self,
        brokers: Collection[int] = (),
        topics: Collection[str] = (),
        keys: Collection[str] | None = None,
    ) -> dict[ConfigResource, dict[str, str]]:
        """Dynamic configs set on each broker (per-broker) and topic (DescribeConfigs).

        Only values set on the resource itself are returned (not defaults,
        static ``server.properties`` values or cluster-wide broker defaults);
        ``keys`` limits the answer to those names.
        """
        ...

    def broker_config_values(self, broker: int, keys: Collection[str]) -> dict[str, str]:
        """Return the values broker ``broker`` runs with for ``keys``, whatever their source.

        DescribeConfigs of the broker resource: static ``server.properties`` entries and
        Kafka's defaults included (e.g. ``replication.quota.window.num``); a key the
        broker does not know is left out.
        """
        ...

    def incremental_alter_configs(
        self, changes: Mapping[ConfigResource, Mapping[str, str | None]]
    ) -> dict[ConfigResource, ApiError | None]:
        """Set (value) or delete (``None``) dynamic configs (IncrementalAlterConfigs, KIP-339)."""
        ...

    def describe_log_dirs(
        self, brokers: Collection[int] | None = None, topics: Collection[str] | None = None
    ) -> dict[ReplicaKey, ReplicaDirInfo]:
        """Log dir, size in bytes and lag of each replica on ``brokers`` (DescribeLogDirs).

        ``None`` asks every broker / every topic. A future replica (intra-broker
        move) is given in the current replica's ``future`` field.
        """
        ...

    def log_dir_paths(self, brokers: Collection[int]) -> dict[int, frozenset[str]]:
        """Absolute paths of the online log dirs of each broker (DescribeLogDirs, KIP-113)."""
        ...

    def log_dir_states(self, brokers: Collection[int]) -> dict[int, tuple[LogDirState, ...]]:
        """Every log dir of each of ``brokers``, online or not, with its volume totals.

        From DescribeLogDirs (v4+ reports ``TotalBytes``/``UsableBytes``, KIP-827); a
        broker that does not answer is left out.
        """
        ...

    def elect_preferred_leaders(
        self, partitions: Collection[TopicPartition]
    ) -> dict[TopicPartition, ApiError | None]:
        """Make the first replica the leader (ElectLeaders, PREFERRED, KIP-460).

        A partition already led by its preferred replica (ELECTION_NOT_NEEDED)
        counts as success (``None``).
        """
        ...

    def alter_replica_log_dirs(
        self, moves: Mapping[ReplicaKey, str]
    ) -> dict[ReplicaKey, ApiError | None]:
        """Move replicas to another log dir of their broker (AlterReplicaLogDirs, KIP-113)."""
        ...

    def max_api_version(self, broker: int, api_key: int) -> int | None:
        """Return the newest version of request ``api_key`` broker ``broker`` supports.

        From the broker's ApiVersions answer; ``None`` when it does not support the
        request at all. Raises ``KafkaUnavailableError`` when the broker cannot be reached.
        """
        ...

    def kafka_version(self, brokers: Collection[int]) -> str | None:
        """Return the Kafka release ``brokers`` speak, inferred from their ApiVersions answers.

        Kafka has no API that names its version; the newest Apache Kafka release
        whose request versions every one of ``brokers`` supports (``"3.9"``) is a
        lower bound of it. ``None`` when no broker answered or none is given.
        """
        ...

    def close(self) -> None:
        """Release the connections; the object must not be used afterwards."""
        ...


_DESCRIBE_QUORUM = 55
"""DescribeQuorum's API key (KIP-595); only KRaft brokers and controllers support it."""
_TOPIC_AUTHORIZATION = 29
"""TOPIC_AUTHORIZATION_FAILED: Metadata answers it per topic the client may not Describe."""
_DYNAMIC_SOURCES = {"DYNAMIC_TOPIC_CONFIG", "DYNAMIC_BROKER_CONFIG"}
_KINDS = {
    ConfigResourceKind.TOPIC: ConfigResourceType.TOPIC,
    ConfigResourceKind.BROKER: ConfigResourceType.BROKER,
}


class KafkaPythonAdmin:
    """:class:`KafkaAdmin` over kafka-python's ``KafkaAdminClient`` (connects on first use).

    A failed connection is not kept: the next call connects again.

    Args:
        bootstrap_servers: comma-separated ``host:port`` list.
        client_id: the client id the brokers see (quotas, logs), e.g. ``kpo-operator``,
            ``kpo-bench``, ``kpo-demo``.
        request_timeout_ms: timeout of each request and of the first bootstrap, in ms.
        security: TLS and SASL settings (:mod:`kpo_kafka.client_config`); default PLAINTEXT.
    """

    def __init__(
        self,
        bootstrap_servers: str,
        client_id: str = "kpo-operator",
        request_timeout_ms: int = 30000,
        security: ClientSecurity | None = None,
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        self.security = security or ClientSecurity()
        self._admin: Any = None

    def _client(self) -> Any:
        if self._admin is None:
            try:
                with translated("connect"):
                    self._admin = KafkaAdminClient(
                        bootstrap_servers=self.bootstrap_servers,
                        client_id=self.client_id,
                        request_timeout_ms=self.request_timeout_ms,
                        bootstrap_timeout_ms=self.request_timeout_ms,
                        **self.security.kafka_python_kwargs(),
                    )
            except KafkaUnavailableError as exc:
                # kafka-python logs why each bootstrap attempt failed but raises only a
                # timeout: a refused TLS handshake (no client certificate, an untrusted
                # broker) is found by trying one, so that it is reported as such.
                context = self.security.ssl_context()
                problem = tls_refusal(self.bootstrap_servers, context) if context else None
                if problem is not None:
                    raise KafkaAuthenticationError(
                        f"connect: TLS handshake failed: {problem}"
                    ) from exc
                raise
        return self._admin

    def describe_cluster(self) -> ClusterInfo:
        """See :meth:`KafkaAdmin.describe_cluster`.

        The controller: on ZooKeeper-mode clusters DescribeCluster's (Metadata's before
        Kafka 2.8) controller id. On KRaft a broker answers DescribeCluster with a random
        live broker as the controller (Kafka's ``KRaftMetadataCache.getControllerId``:
        clients send controller requests to any broker, which forwards them), so the
        active controller is taken from DescribeQuorum (API key 55, KIP-595): the leader
        of the ``__cluster_metadata`` quorum, a controller node's ``node.id``. Brokers
        that support DescribeQuorum are KRaft brokers; it needs Describe on the Cluster
        resource. Without that ACL, or when DescribeQuorum fails (the broker forwards it to
        the controller quorum, e.g. during an election), the controller is not known
        (``None``) and the brokers are still reported. Only unfenced brokers are asked for
        their ApiVersions: a fenced one is not in Metadata, so the client has no address
        for it (kafka-python raises UnknownBrokerIdError).
        """
        with translated("DescribeCluster"):
            info = self._client().describe_cluster()
        unfenced = sorted(int(b["broker_id"]) for b in info["brokers"] if not b.get("is_fenced"))
        if self._supported(unfenced, _DESCRIBE_QUORUM):
            quorum_leader = self._quorum_leader()
            return self._cluster_info(info, quorum_leader if quorum_leader >= 0 else None)
        controller = info.get("controller_id", -1)
        return self._cluster_info(
            info, controller if controller is not None and controller >= 0 else None
        )

    def _to_controller(self, call: str, send: Callable[[Any], T]) -> T:
        """Send a controller request; when the controller is gone, find it again and retry once.

        kafka-python keeps the controller id it found first and looks again only on
        NOT_CONTROLLER; a controller that died (or left the cluster's Metadata) made every
        later request fail (UnknownBrokerIdError, connection errors) until the client was
        recreated. An unavailable controller clears the id, so the retry asks Metadata for
        the current one, as Kafka's admin client does for every controller request.

        Raises:
            KafkaAdminError: The request failed (also after the retry).
        """
        for attempt in (1, 2):
            client = self._client()
            try:
                with translated(call):
                    return send(client)
            except KafkaUnavailableError:
                client._controller_id = None
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def _supported(self, brokers: Sequence[int], api_key: int) -> bool:
        """Tell whether the first of ``brokers`` that answers lists ``api_key`` (ApiVersions)."""
        for broker in brokers:
            try:
                return self.max_api_version(broker, api_key) is not None
            except KafkaUnavailableError:
                continue
        return False

    def _quorum_leader(self) -> int:
        """Return the KRaft metadata quorum's leader (DescribeQuorum); -1: none, or not allowed."""
        try:
            with translated("DescribeQuorum"):
                quorum = self._client().describe_metadata_quorum()
        except KafkaAdminError:  # no ACL, or an election under way: the brokers still answer
            return NO_LEADER
        for topic in quorum.get("topics", []):
            for partition in topic.get("partitions", []):
                if partition.get("error") is None:
                    return int(partition.get("leader_id", NO_LEADER))
        return NO_LEADER

    @staticmethod
    def _cluster_info(info: Mapping[str, Any], controller_id: int | None) -> ClusterInfo:
        # kafka-python asks for fenced brokers (IncludeFencedBrokers, KIP-1073); before
        # DescribeCluster v2 (and on ZooKeeper-mode clusters) none is listed or flagged.
        fenced = frozenset(int(b["broker_id"]) for b in info["brokers"] if b.get("is_fenced"))
        return ClusterInfo(
            brokers={
                int(b["broker_id"]): b.get("rack")
                for b in info["brokers"]
                if int(b["broker_id"]) not in fenced
            },
            controller_id=controller_id,
            cluster_id=info.get("cluster_id"),
            authorized_operations=decode_operations(info.get("authorized_operations")),
            fenced_brokers=fenced,
        )

    def create_topic(
        self,
        topic: str,
        *,
        partitions: int = -1,
        replication_factor: int = -1,
        assignment: Mapping[int, Sequence[int]] | None = None,
        configs: Mapping[str, str] | None = None,
        timeout_ms: int | None = None,
        wait_for_metadata: bool = False,
    ) -> None:
        """Create ``topic`` (CreateTopics); outside :class:`KafkaAdmin`, the operator creates none.

        Args:
            topic: the topic name.
            partitions: the partition count; -1 takes the broker's ``num.partitions``
                (KIP-464), and must be -1 with an ``assignment``.
            replication_factor: replicas per partition; -1 takes the broker's
                ``default.replication.factor`` (KIP-464), and must be -1 with an ``assignment``.
            assignment: partition -> replicas, preferred leader first, instead of the
                controller's placement.
            configs: topic configs, e.g. ``{"min.insync.replicas": "2"}``.
            timeout_ms: how long the controller may wait for the topic to be created, ms
                (default: the request timeout); with ``wait_for_metadata`` also how long
                the brokers then have to learn it.
            wait_for_metadata: also wait until every live broker's Metadata lists the
                topic with all its partitions, each with a leader (:meth:`wait_for_topics`),
                so that the next request, whichever broker answers it, finds the topic.

        Raises:
            KafkaRequestError: the controller refused the topic (e.g. TOPIC_ALREADY_EXISTS,
                INVALID_REPLICA_ASSIGNMENT).
            KafkaUnavailableError: the cluster could not be reached, or (with
                ``wait_for_metadata``) a broker still did not list the topic ready after
                ``timeout_ms``; retry later.
        """
        options: dict[str, Any] = {
            "num_partitions": partitions,
            "replication_factor": replication_factor,
        }
        if assignment is not None:
            options["assignments"] = {p: list(r) for p, r in assignment.items()}
        if configs:
            options["configs"] = dict(configs)
        with translated("CreateTopics"):
            self._client().create_topics({topic: options}, timeout_ms=timeout_ms)
        if wait_for_metadata:
            count = len(assignment) if assignment is not None else partitions
            self.wait_for_topics({topic: count if count > 0 else None}, timeout_ms)

    def wait_for_topics(
        self,
        topics: Mapping[str, int | None],
        timeout_ms: int | None = None,
        brokers: Collection[int] | None = None,
    ) -> None:
        """Wait until every live broker's Metadata lists ``topics``, each partition led.

        Creating a topic (CreateTopics) returns once the controller has it; each broker
        learns it later (UpdateMetadata on ZooKeeper-mode clusters, the metadata log on
        KRaft), and a Metadata request answered by a broker that has not yet learnt it says
        UNKNOWN_TOPIC_OR_PARTITION. This asks each live broker (DescribeCluster) in turn,
        with a Metadata request sent to that broker, until every one lists every topic
        with its partitions, each with a leader and no error; the live brokers are read
        again each round, so one that joins meanwhile is asked too.

        Args:
            topics: topic -> its partition count, or ``None`` when not known (then at
                least one partition).
            timeout_ms: how long to wait, in ms (default: the request timeout).
            brokers: ask only those of these brokers that are live (default: every live
                broker), e.g. to leave out one known to be going away.

        Raises:
            KafkaUnavailableError: some broker still did not list a topic ready after
                ``timeout_ms``; the message names each such broker and what it lacked.
            KafkaAuthorizationError: the client may not Describe a topic.
        """
        if not topics:
            return
        timeout_s = (timeout_ms or self.request_timeout_ms) / 1000
        deadline = time.monotonic() + timeout_s
        brokers_asked = None if brokers is None else frozenset(brokers)
        ready: set[int] = set()
        lacking: dict[int, str] = {}
        while True:
            try:
                live = sorted(
                    b
                    for b in self.describe_cluster().brokers
                    if brokers_asked is None or b in brokers_asked
                )
            except KafkaUnavailableError as exc:
                lacking = {-1: str(exc)}
            else:
                for broker in live:
                    if broker not in ready:
                        reason = self._topics_not_ready_on(broker, topics)
                        if reason is None:
                            ready.add(broker)
                        else:
                            lacking[broker] = reason
                lacking = {b: lacking[b] for b in live if b in lacking and b not in ready}
                if not lacking:
                    return
            if time.monotonic() >= deadline:
                details = "; ".join(
                    f"broker {b}: {r}" if b >= 0 else r for b, r in sorted(lacking.items())
                )
                raise KafkaUnavailableError(
                    f"Metadata: {', '.join(sorted(topics))} not known to every live broker "
                    f"with a leader for each partition after {timeout_s:g} s ({details})"
                )
            time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))

    def metadata_on(self, broker: int, topics: Collection[str]) -> list[dict[str, Any]]:
        """Ask ``broker`` alone for ``topics``' Metadata: what that broker's cache holds.

        Every broker answers Metadata from its own metadata cache, which follows the
        controller's (UpdateMetadata on ZooKeeper-mode clusters, the metadata log on KRaft)
        a moment later; two brokers asked at the same time may differ for that moment.

        Returns:
            The Metadata response's topics as kafka-python decodes them: dicts with
            ``name``, ``error_code`` and ``partitions`` (each with ``partition_index``,
            ``leader_id``, ``leader_epoch``, ``replica_nodes``, ``isr_nodes``, ...).

        Raises:
            KafkaUnavailableError: ``broker`` is not in this client's Metadata yet (the
                client's Metadata is refreshed for the next call) or did not answer.
        """
        client = self._client()
        request = MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name=t) for t in sorted(topics)],
            allow_auto_topic_creation=False,
        )

        async def ask() -> Any:
            return await client._manager.send(request, node_id=broker)

        with translated("Metadata"):
            try:
                answer = client._manager.run(ask).to_dict()
            except kafka_errors.UnknownBrokerIdError as exc:  # joined after this client's Metadata
                client._manager.cluster.request_update()
                raise KafkaUnavailableError(
                    f"Metadata: broker {broker} not yet in this client's Metadata"
                ) from exc
        return list(answer["topics"])

    def _topics_not_ready_on(self, broker: int, topics: Mapping[str, int | None]) -> str | None:
        """Ask ``broker`` alone for ``topics``' Metadata; say what it lacks (``None``: nothing)."""
        try:
            described = self.metadata_on(broker, topics)
        except KafkaUnavailableError as exc:
            return str(exc)
        return topics_not_ready(described, topics)

    def describe_topics(
        self, topics: Collection[str] | None = None
    ) -> dict[str, dict[int, PartitionInfo]]:
        """See :meth:`KafkaAdmin.describe_topics`."""
        if topics is not None and not topics:
            return {}
        with translated("Metadata"):
            described = self._client().describe_topics(None if topics is None else list(topics))
        result: dict[str, dict[int, PartitionInfo]] = {}
        refused = sorted(t["name"] for t in described if t["error_code"] == _TOPIC_AUTHORIZATION)
        if refused:
            error = api_error(_TOPIC_AUTHORIZATION)
            assert error is not None
            raise authorization_error("Metadata", error, tuple(refused))
        for topic in described:
            if topic["error_code"] == kafka_errors.UnknownTopicOrPartitionError.errno:
                continue
            result[topic["name"]] = {
                p["partition_index"]: PartitionInfo(
                    replicas=tuple(p["replica_nodes"]),
                    isr=tuple(p["isr_nodes"]),
                    leader=p["leader_id"] if p["leader_id"] >= 0 else NO_LEADER,
                )
                for p in topic["partitions"]
            }
        return result

    def list_partition_reassignments(
        self, partitions: Collection[TopicPartition] | None = None
    ) -> dict[TopicPartition, Reassignment]:
        """See :meth:`KafkaAdmin.list_partition_reassignments`."""
        if partitions is not None and not partitions:
            return {}
        wanted = None if partitions is None else [KafkaTopicPartition(t, p) for t, p in partitions]
        listed = self._to_controller(
            "ListPartitionReassignments", lambda client: client.list_partition_reassignments(wanted)
        )
        return {
            TopicPartition(tp.topic, tp.partition): Reassignment(
                replicas=tuple(info["replicas"]),
                adding=tuple(info["adding_replicas"]),
                removing=tuple(info["removing_replicas"]),
            )
            for tp, info in listed.items()
        }

    def alter_partition_reassignments(
        self, targets: Mapping[TopicPartition, Sequence[int] | None]
    ) -> dict[TopicPartition, ApiError | None]:
        """See :meth:`KafkaAdmin.alter_partition_reassignments`."""
        if not targets:
            return {}
        for tp, replicas in targets.items():
            if replicas is not None and not replicas:
                raise ValueError(f"empty replica list for {tp}; use None to cancel")
        request = {
            KafkaTopicPartition(t, p): None if replicas is None else list(replicas)
            for (t, p), replicas in targets.items()
        }
        answer = self._to_controller(
            "AlterPartitionReassignments",
            lambda client: client.alter_partition_reassignments(request),
        )
        return {
            TopicPartition(tp.topic, tp.partition): None if err is None else error_of_class(err)
            for tp, err in answer.items()
        }

    def describe_configs(
        self,
        brokers: Collection[int] = (),
        topics: Collection[str] = (),
        keys: Collection[str] | None = None,
    ) -> dict[ConfigResource, dict[str, str]]:
        """See :meth:`KafkaAdmin.describe_configs`."""
        wanted = [ConfigResource.broker(b) for b in brokers] + [
            ConfigResource.topic(t) for t in topics
        ]
        if not wanted:
            return {}
        names = None if keys is None else list(keys)
        request = [KafkaConfigResource(_KINDS[r.kind], r.name, names) for r in wanted]
        with translated("DescribeConfigs"):
            answer = self._client().describe_configs(request, config_filter="all")
        result: dict[ConfigResource, dict[str, str]] = {}
        for resource in wanted:
            entries = answer.get(resource.kind.value, {}).get(resource.name, {})
            result[resource] = {
                name: entry["value"]
                for name, entry in entries.items()
                if entry.get("config_source") in _DYNAMIC_SOURCES and entry.get("value") is not None
            }
        return result

    def broker_config_values(self, broker: int, keys: Collection[str]) -> dict[str, str]:
        """See :meth:`KafkaAdmin.broker_config_values`."""
        request = [KafkaConfigResource(ConfigResourceType.BROKER, str(broker), list(keys))]
        with translated("DescribeConfigs"):
            answer = self._client().describe_configs(request, config_filter="all")
        entries = answer.get(ConfigResourceKind.BROKER.value, {}).get(str(broker), {})
        return {
            name: entry["value"]
            for name, entry in entries.items()
            if name in keys and entry.get("value") is not None
        }

    def incremental_alter_configs(
        self, changes: Mapping[ConfigResource, Mapping[str, str | None]]
    ) -> dict[ConfigResource, ApiError | None]:
        """See :meth:`KafkaAdmin.incremental_alter_configs`."""
        request = [
            KafkaConfigResource(
                _KINDS[resource.kind],
                resource.name,
                {k: (AlterConfigOp.DELETE, None) if v is None else v for k, v in entries.items()},
            )
            for resource, entries in changes.items()
            if entries
        ]
        if not request:
            return {}
        with translated("IncrementalAlterConfigs"):
            answer = self._client().alter_configs(request, raise_on_unknown=False, incremental=True)
        result: dict[ConfigResource, ApiError | None] = {}
        for resource, entries in changes.items():
            if entries:
                text = answer.get(resource.kind.value, {}).get(resource.name)
                result[resource] = (
                    ApiError(code=-1, name="UNKNOWN_SERVER_ERROR", message="no answer")
                    if text is None
                    else parse_alter_result(text)
                )
        return result

    def describe_log_dirs(
        self, brokers: Collection[int] | None = None, topics: Collection[str] | None = None
    ) -> dict[ReplicaKey, ReplicaDirInfo]:
        """See :meth:`KafkaAdmin.describe_log_dirs`."""
        if (brokers is not None and not brokers) or (topics is not None and not topics):
            return {}
        with translated("DescribeLogDirs"):
            answers = self._client().describe_log_dirs(
                topic_partitions=None if topics is None else list(topics),
                brokers=None if brokers is None else list(brokers),
            )
        current: dict[ReplicaKey, ReplicaDirInfo] = {}
        futures: dict[ReplicaKey, ReplicaDirInfo] = {}
        for answer in answers:
            broker_id = int(answer["broker"])
            for log_dir in answer["log_dirs"]:
                if log_dir["error_code"] != 0:  # an offline log dir hosts nothing readable
                    continue
                for topic in log_dir["topics"]:
                    for part in topic["partitions"]:
                        info = ReplicaDirInfo(
                            log_dir=log_dir["log_dir"],
                            size_bytes=part["partition_size"],
                            offset_lag=part["offset_lag"],
                            is_future=part["is_future_key"],
                        )
                        key = (broker_id, topic["name"], part["partition_index"])
                        (futures if info.is_future else current)[key] = info
        return {
            key: ReplicaDirInfo(
                info.log_dir, info.size_bytes, info.offset_lag, False, futures.get(key)
            )
            for key, info in current.items()
        }

    def log_dir_paths(self, brokers: Collection[int]) -> dict[int, frozenset[str]]:
        """See :meth:`KafkaAdmin.log_dir_paths`."""
        if not brokers:
            return {}
        with translated("DescribeLogDirs"):
            answers = self._client().describe_log_dirs(brokers=list(brokers))
        paths: dict[int, set[str]] = {int(b): set() for b in brokers}
        for answer in answers:
            paths.setdefault(int(answer["broker"]), set()).update(
                d["log_dir"] for d in answer["log_dirs"] if d["error_code"] == 0
            )
        return {b: frozenset(p) for b, p in paths.items()}

    def log_dir_states(self, brokers: Collection[int]) -> dict[int, tuple[LogDirState, ...]]:
        """See :meth:`KafkaAdmin.log_dir_states`."""
        if not brokers:
            return {}
        with translated("DescribeLogDirs"):
            answers = self._client().describe_log_dirs(brokers=list(brokers))
        states: dict[int, tuple[LogDirState, ...]] = {}
        for answer in answers:
            states[int(answer["broker"])] = tuple(
                LogDirState(
                    path=d["log_dir"],
                    online=d["error_code"] == 0,
                    total_bytes=int(d.get("total_bytes", -1)),
                    usable_bytes=int(d.get("usable_bytes", -1)),
                )
                for d in answer["log_dirs"]
            )
        return states

    def elect_preferred_leaders(
        self, partitions: Collection[TopicPartition]
    ) -> dict[TopicPartition, ApiError | None]:
        """See :meth:`KafkaAdmin.elect_preferred_leaders`."""
        by_topic: dict[str, list[int]] = defaultdict(list)
        for topic, partition in partitions:
            by_topic[topic].append(partition)
        if not by_topic:
            return {}
        response = self._to_controller(
            "ElectLeaders",
            lambda client: client.elect_leaders(0, dict(by_topic), raise_errors=False),
        )
        top = getattr(response, "error_code", 0) or 0
        if top != 0:
            error = api_error(top)
            kind = KafkaUnavailableError if error and error.retriable else KafkaRequestError
            raise kind(f"ElectLeaders: {error}", error)
        result: dict[TopicPartition, ApiError | None] = {}
        for topic in response.replica_election_results:
            for part in topic.partition_result:
                code = 0 if part.error_code == ERROR_ELECTION_NOT_NEEDED else part.error_code
                result[TopicPartition(topic.topic, part.partition_id)] = api_error(
                    code, part.error_message
                )
        return result

    def alter_replica_log_dirs(
        self, moves: Mapping[ReplicaKey, str]
    ) -> dict[ReplicaKey, ApiError | None]:
        """See :meth:`KafkaAdmin.alter_replica_log_dirs`."""
        if not moves:
            return {}
        request = {TopicPartitionReplica(t, p, b): d for (b, t, p), d in moves.items()}
        with translated("AlterReplicaLogDirs"):
            answer = self._client().alter_replica_log_dirs(request)
        return {
            (tpr.broker_id, tpr.topic, tpr.partition): error_of_class(err)
            for tpr, err in answer.items()
        }

    def max_api_version(self, broker: int, api_key: int) -> int | None:
        """See :meth:`KafkaAdmin.max_api_version` (the ApiVersions answer kafka-python keeps)."""
        with translated("ApiVersions"):
            data = self._client().get_broker_version_data(broker)
        versions = getattr(data, "api_versions", None) or {}
        found = versions.get(api_key)
        return None if found is None else int(found[1])

    def kafka_version(self, brokers: Collection[int]) -> str | None:
        """See :meth:`KafkaAdmin.kafka_version` (kafka-python's inference from ApiVersions).

        A broker that cannot be reached is skipped.
        """
        found: list[tuple[int, ...]] = []
        for broker in sorted(set(brokers)):
            try:
                with translated("ApiVersions"):
                    data = self._client().get_broker_version_data(broker)
            except KafkaUnavailableError:
                continue
            version = getattr(data, "broker_version", None)
            if isinstance(version, tuple) and version:
                found.append(tuple(int(v) for v in version))
        return ".".join(str(v) for v in min(found)) if found else None

    def close(self) -> None:
        """See :meth:`KafkaAdmin.close`."""
        if self._admin is not None:
            admin, self._admin = self._admin, None
            admin.close()


def tls_refusal(
    bootstrap_servers: str, context: ssl.SSLContext, timeout_s: float = 5.0
) -> str | None:
    """Try a TLS handshake with each bootstrap server; say why TLS was refused.

    With TLS 1.3 a broker requiring a client certificate (``ssl.client.auth=required``)
    refuses it after the handshake, with an alert (``certificate_required``) that the client
    reads next; hence the handshake is followed by a short read (a broker that accepted
    sends nothing until asked).

    Returns:
        ``"host:port: <TLS error>"`` for the first server that refused TLS, ``None`` when
        every reachable server accepted it (or none was reachable).
    """
    for server in bootstrap_servers.split(","):
        host, _, port = server.strip().rpartition(":")
        try:
            with (
                socket.create_connection((host, int(port)), timeout_s) as raw,
                context.wrap_socket(raw, server_hostname=host) as tls,
            ):
                tls.settimeout(min(timeout_s, 2.0))
                with contextlib.suppress(TimeoutError):
                    tls.recv(4)
            return None
        except ssl.SSLError as exc:
            if tls_refused(exc):
                return f"{server.strip()}: {exc}"
        except (OSError, ValueError):
            continue
    return None


def topics_not_ready(
    described: Sequence[Mapping[str, Any]], expected: Mapping[str, int | None]
) -> str | None:
    """Say why one broker's Metadata answer does not yet list ``expected`` ready to use.

    Args:
        described: the ``topics`` of a Metadata response, as dicts (``name``,
            ``error_code``, ``partitions`` with ``partition_index``, ``error_code`` and
            ``leader_id``).
        expected: topic -> its partition count, ``None`` when not known (at least one).

    Returns:
        ``None`` when every topic is listed without error, with the expected partitions,
        each with a leader (``leader_id`` >= 0) and no error (e.g. LEADER_NOT_AVAILABLE);
        else what is missing, e.g. ``"t: UNKNOWN_TOPIC_OR_PARTITION (3)"``.

    Raises:
        KafkaAuthorizationError: a topic was refused (TOPIC_AUTHORIZATION_FAILED): waiting
            would not help.
    """
    by_name = {t["name"]: t for t in described}
    refused = sorted(
        name for name in expected if by_name.get(name, {}).get("error_code") == _TOPIC_AUTHORIZATION
    )
    if refused:
        error = api_error(_TOPIC_AUTHORIZATION)
        assert error is not None
        raise authorization_error("Metadata", error, tuple(refused))
    reasons: list[str] = []
    for name in sorted(expected):
        topic = by_name.get(name)
        if topic is None:
            reasons.append(f"{name}: not listed")
            continue
        error = api_error(int(topic["error_code"]))
        if error is not None:
            reasons.append(f"{name}: {error.name} ({error.code})")
            continue
        partitions = topic["partitions"]
        count = expected[name]
        if not partitions or (count is not None and len(partitions) != count):
            reasons.append(f"{name}: {len(partitions)} of {count or 'any'} partitions")
            continue
        unled = sorted(
            p["partition_index"] for p in partitions if p["error_code"] != 0 or p["leader_id"] < 0
        )
        if unled:
            reasons.append(f"{name}: no leader for partitions {unled}")
    return "; ".join(reasons) or None


def _conforms(admin: KafkaPythonAdmin) -> KafkaAdmin:
    """Let mypy check that :class:`KafkaPythonAdmin` implements :class:`KafkaAdmin`."""
    return admin
