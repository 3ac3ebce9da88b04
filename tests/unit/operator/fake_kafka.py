"""An in-memory Kafka cluster behind the KafkaAdmin interface, for reconciliation unit tests.

It follows Kafka's rules closely enough for the operator's logic (KIP-455):
a submitted reassignment sets the full replica set to target + (original - target)
and lists adding/removing replicas; it completes only when the test says the
adding replicas caught up (``catch_up`` / ``complete``); a new target while in
flight keeps the original replicas; cancelling reverts to them. Configs are
stored per resource; log dir sizes are set by the test.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from kpo_kafka.admin_errors import api_error
from kpo_kafka.admin_types import (
    ERROR_INVALID_REPLICA_ASSIGNMENT,
    ERROR_LOG_DIR_NOT_FOUND,
    ERROR_NO_REASSIGNMENT_IN_PROGRESS,
    ERROR_PREFERRED_LEADER_NOT_AVAILABLE,
    ERROR_REPLICA_NOT_AVAILABLE,
    ERROR_UNKNOWN_TOPIC_OR_PARTITION,
    NO_LEADER,
    ApiError,
    ClusterInfo,
    ConfigResource,
    ConfigResourceKind,
    KafkaAdminError,
    LogDirState,
    PartitionInfo,
    Reassignment,
    ReplicaDirInfo,
    ReplicaKey,
)
from kpo_kafka.topic_partition import TopicPartition


def error(code: int) -> ApiError:
    found = api_error(code)
    assert found is not None
    return found


@dataclass
class FakePartition:
    replicas: list[int]
    isr: list[int]
    leader: int | None
    original: list[int] | None = None  # OAR while a reassignment is in flight
    target: list[int] | None = None


@dataclass
class FakeKafkaAdmin:
    """A fake cluster; tests advance it with catch_up, complete and finish_log_dir_moves."""

    brokers: dict[int, str | None] = field(default_factory=lambda: {0: None, 1: None, 2: None})
    controller_id: int | None = 0
    authorized_operations: frozenset[str] | None = None  # on the Cluster (KIP-430)
    partitions: dict[TopicPartition, FakePartition] = field(default_factory=dict)
    configs: dict[ConfigResource, dict[str, str]] = field(default_factory=dict)
    sizes: dict[ReplicaKey, int] = field(default_factory=dict)
    lags: dict[ReplicaKey, int] = field(default_factory=dict)
    dirs: dict[ReplicaKey, str] = field(default_factory=dict)
    future_dirs: dict[ReplicaKey, str] = field(default_factory=dict)
    fail_next: list[KafkaAdminError] = field(default_factory=list)
    calls: list[tuple[str, object]] = field(default_factory=list)
    closed: bool = False
    cluster_id: str = "fake-cluster"
    version: str | None = "3.9"
    fenced: frozenset[int] = frozenset()  # registered but fenced (KIP-1073)
    describe_log_dirs_version: int = 4  # 5 on Kafka 4.3+ (KIP-1066: cordoned.log.dirs)
    dir_states: dict[tuple[int, str], LogDirState] = field(default_factory=dict)  # offline, totals

    # -- test controls --------------------------------------------------------------

    def create_topic(self, name: str, assignment: Mapping[int, Sequence[int]]) -> None:
        for partition, replicas in assignment.items():
            self.partitions[(name, partition)] = FakePartition(
                list(replicas), list(replicas), replicas[0]
            )
            for broker in replicas:
                self._host((broker, name, partition))

    def log_dirs_of(self, broker: int) -> list[str]:
        return [f"/data/broker-{broker}/d0", f"/data/broker-{broker}/d1"]

    def set_size(self, broker: int, topic: str, partition: int, size_bytes: int) -> None:
        self.sizes[(broker, topic, partition)] = size_bytes

    def catch_up(self, tp: TopicPartition, broker: int) -> None:
        """An adding replica joins the ISR; completes the reassignment when all did."""
        part = self.partitions[tp]
        if broker not in part.isr:
            part.isr.append(broker)
        if part.target is not None and all(b in part.isr for b in part.target):
            self._finish(tp)

    def complete(self, tp: TopicPartition | None = None) -> None:
        """Let every adding replica of ``tp`` (or of all partitions) catch up."""
        for key in [tp] if tp else list(self.partitions):
            target = self.partitions[key].target
            for broker in target or ():
                self.catch_up(key, broker)

    def finish_log_dir_moves(self) -> None:
        for key, log_dir in list(self.future_dirs.items()):
            self.dirs[key] = log_dir
            del self.future_dirs[key]

    def _host(self, key: ReplicaKey) -> None:
        self.dirs.setdefault(key, self.log_dirs_of(key[0])[0])
        self.sizes.setdefault(key, 0)

    def _finish(self, tp: TopicPartition) -> None:
        part = self.partitions[tp]
        assert part.target is not None and part.original is not None
        for broker in set(part.replicas) - set(part.target):
            self._drop((broker, tp[0], tp[1]))
        part.replicas, part.original, part.target = part.target, None, None
        part.isr = [b for b in part.isr if b in part.replicas]
        if part.leader not in part.replicas:
            part.leader = next((b for b in part.replicas if b in part.isr), None)

    def _drop(self, key: ReplicaKey) -> None:
        for table in (self.dirs, self.sizes, self.lags, self.future_dirs):
            table.pop(key, None)

    def _enter(self, call: str, argument: object = None) -> None:
        assert not self.closed, "used after close()"
        self.calls.append((call, argument))
        if self.fail_next:
            raise self.fail_next.pop(0)

    # -- KafkaAdmin -------------------------------------------------------------------

    def describe_cluster(self) -> ClusterInfo:
        self._enter("describe_cluster")
        return ClusterInfo(
            dict(self.brokers),
            self.controller_id,
            self.cluster_id,
            self.authorized_operations,
            self.fenced,
        )

    def describe_topics(
        self, topics: Collection[str] | None = None
    ) -> dict[str, dict[int, PartitionInfo]]:
        self._enter("describe_topics", topics)
        result: dict[str, dict[int, PartitionInfo]] = {}
        for (topic, partition), part in sorted(self.partitions.items()):
            if topics is None or topic in topics:
                result.setdefault(topic, {})[partition] = PartitionInfo(
                    tuple(part.replicas),
                    tuple(part.isr),
                    NO_LEADER if part.leader is None else part.leader,
                )
        return result

    def list_partition_reassignments(
        self, partitions: Collection[TopicPartition] | None = None
    ) -> dict[TopicPartition, Reassignment]:
        self._enter("list_partition_reassignments", partitions)
        result: dict[TopicPartition, Reassignment] = {}
        for tp, part in self.partitions.items():
            if part.target is None or part.original is None:
                continue
            if partitions is None or tp in partitions:
                adding = tuple(b for b in part.target if b not in part.original)
                removing = tuple(b for b in part.original if b not in part.target)
                result[tp] = Reassignment(tuple(part.replicas), adding, removing)
        return result

    def alter_partition_reassignments(
        self, targets: Mapping[TopicPartition, Sequence[int] | None]
    ) -> dict[TopicPartition, ApiError | None]:
        self._enter("alter_partition_reassignments", dict(targets))
        result: dict[TopicPartition, ApiError | None] = {}
        for tp, target in targets.items():
            if target is not None and not target:
                raise ValueError(f"empty replica list for {tp}; use None to cancel")
            part = self.partitions.get(tp)
            if part is None:
                result[tp] = error(ERROR_UNKNOWN_TOPIC_OR_PARTITION)
            elif target is None:
                result[tp] = self._cancel(tp, part)
            elif len(set(target)) != len(target) or not set(target) <= set(self.brokers):
                result[tp] = error(ERROR_INVALID_REPLICA_ASSIGNMENT)
            else:
                self._reassign(tp, part, list(target))
                result[tp] = None
        return result

    def _reassign(self, tp: TopicPartition, part: FakePartition, target: list[int]) -> None:
        original = part.original if part.original is not None else list(part.replicas)
        for broker in set(part.replicas) - set(target) - set(original):  # dropped adding replicas
            self._drop((broker, tp[0], tp[1]))
            part.isr = [b for b in part.isr if b != broker]
        part.original, part.target = original, target
        part.replicas = target + [b for b in original if b not in target]
        for broker in target:
            self._host((broker, tp[0], tp[1]))
        if all(b in part.isr for b in target):
            self._finish(tp)

    def _cancel(self, tp: TopicPartition, part: FakePartition) -> ApiError | None:
        if part.original is None:
            return error(ERROR_NO_REASSIGNMENT_IN_PROGRESS)
        part.target = list(part.original)
        self._finish(tp)
        return None

    def describe_configs(
        self,
        brokers: Collection[int] = (),
        topics: Collection[str] = (),
        keys: Collection[str] | None = None,
    ) -> dict[ConfigResource, dict[str, str]]:
        self._enter("describe_configs", (brokers, topics, keys))
        wanted = [ConfigResource.broker(b) for b in brokers] + [
            ConfigResource.topic(t) for t in topics
        ]
        return {
            r: {k: v for k, v in self.configs.get(r, {}).items() if keys is None or k in keys}
            for r in wanted
        }

    def broker_config_values(self, broker: int, keys: Collection[str]) -> dict[str, str]:
        self._enter("broker_config_values", (broker, tuple(keys)))
        found = self.configs.get(ConfigResource.broker(broker), {})
        return {k: v for k, v in found.items() if k in keys}

    def incremental_alter_configs(
        self, changes: Mapping[ConfigResource, Mapping[str, str | None]]
    ) -> dict[ConfigResource, ApiError | None]:
        self._enter("incremental_alter_configs", {r: dict(c) for r, c in changes.items()})
        result: dict[ConfigResource, ApiError | None] = {}
        for resource, entries in changes.items():
            if not entries:
                continue
            if resource.kind is ConfigResourceKind.TOPIC and not any(
                t == resource.name for t, _ in self.partitions
            ):
                result[resource] = error(ERROR_UNKNOWN_TOPIC_OR_PARTITION)
                continue
            stored = self.configs.setdefault(resource, {})
            for key, value in entries.items():
                if value is None:
                    stored.pop(key, None)
                else:
                    stored[key] = value
            if not stored:
                del self.configs[resource]
            result[resource] = None
        return result

    def describe_log_dirs(
        self, brokers: Collection[int] | None = None, topics: Collection[str] | None = None
    ) -> dict[ReplicaKey, ReplicaDirInfo]:
        self._enter("describe_log_dirs", (brokers, topics))
        result: dict[ReplicaKey, ReplicaDirInfo] = {}
        for key, log_dir in self.dirs.items():
            broker, topic, _ = key
            if (brokers is None or broker in brokers) and (topics is None or topic in topics):
                future = None
                if key in self.future_dirs:
                    future = ReplicaDirInfo(self.future_dirs[key], 0, self.sizes[key], True)
                size, lag = self.sizes.get(key, 0), self.lags.get(key, 0)
                result[key] = ReplicaDirInfo(log_dir, size, lag, False, future)
        return result

    def log_dir_paths(self, brokers: Collection[int]) -> dict[int, frozenset[str]]:
        self._enter("log_dir_paths", list(brokers))
        return {b: frozenset(self.log_dirs_of(b)) for b in brokers if b in self.brokers}

    def log_dir_states(self, brokers: Collection[int]) -> dict[int, tuple[LogDirState, ...]]:
        self._enter("log_dir_states", list(brokers))
        return {
            b: tuple(
                self.dir_states.get((b, path), LogDirState(path, True))
                for path in sorted(self.log_dirs_of(b))
            )
            for b in brokers
            if b in self.brokers
        }

    def elect_preferred_leaders(
        self, partitions: Collection[TopicPartition]
    ) -> dict[TopicPartition, ApiError | None]:
        self._enter("elect_preferred_leaders", list(partitions))
        result: dict[TopicPartition, ApiError | None] = {}
        for tp in partitions:
            part = self.partitions.get(tp)
            if part is None:
                result[tp] = error(ERROR_UNKNOWN_TOPIC_OR_PARTITION)
            elif part.replicas[0] in part.isr and part.replicas[0] in self.brokers:
                part.leader = part.replicas[0]
                result[tp] = None
            else:
                result[tp] = error(ERROR_PREFERRED_LEADER_NOT_AVAILABLE)
        return result

    def alter_replica_log_dirs(
        self, moves: Mapping[ReplicaKey, str]
    ) -> dict[ReplicaKey, ApiError | None]:
        self._enter("alter_replica_log_dirs", dict(moves))
        result: dict[ReplicaKey, ApiError | None] = {}
        for key, log_dir in moves.items():
            if log_dir not in self.log_dirs_of(key[0]):
                result[key] = error(ERROR_LOG_DIR_NOT_FOUND)
            elif key not in self.dirs:
                result[key] = error(ERROR_REPLICA_NOT_AVAILABLE)
            else:
                if log_dir != self.dirs[key]:
                    self.future_dirs[key] = log_dir
                result[key] = None
        return result

    def max_api_version(self, broker: int, api_key: int) -> int | None:
        self._enter("max_api_version", (broker, api_key))
        return self.describe_log_dirs_version if api_key == 35 else 0

    def kafka_version(self, brokers: Collection[int]) -> str | None:
        self._enter("kafka_version", sorted(brokers))
        return self.version if any(b in self.brokers for b in brokers) else None

    def close(self) -> None:
        self.closed = True
