"""Read the managed Kafka cluster into a :class:`~kpo_operator.model.ClusterView` (I/O edge).

One snapshot costs a DescribeCluster, a Metadata, a ListPartitionReassignments
(KIP-455) and, when asked, DescribeLogDirs requests (KIP-113) to the brokers
involved. The pure modules decide on the result; nothing here decides anything.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from kpo_kafka.admin import KafkaAdmin
from kpo_kafka.admin_types import (
    ClusterInfo,
    PartitionInfo,
    Reassignment,
    ReplicaDirInfo,
    ReplicaKey,
)
from kpo_kafka.topic_partition import TopicPartition
from kpo_operator.model import ClusterView


@dataclass
class ClusterSnapshot:
    """The cluster at one moment.

    Attributes:
        view: Topics, live brokers, log dirs and in-flight reassignments; the
            ``reassigning`` owners are filled by the caller (:func:`with_owners`).
        replicas: ``(broker, topic, partition)`` -> log dir, size (bytes) and lag of
            each replica asked for (empty unless ``replica_sizes`` was requested).
        racks: broker id -> ``broker.rack`` (``None`` without a rack).
        controller_id: The active controller, ``None`` while there is none.
        cluster_id: The Kafka cluster id, ``None`` if the cluster did not report one.
        authorized_operations: What the operator's principal may do on the Cluster
            resource (DescribeCluster, KIP-430), ``None`` when not reported.
    """

    view: ClusterView
    replicas: dict[ReplicaKey, ReplicaDirInfo] = field(default_factory=dict)
    racks: dict[int, str | None] = field(default_factory=dict)
    controller_id: int | None = None
    cluster_id: str | None = None
    authorized_operations: frozenset[str] | None = None

    _sizes: tuple[object, dict[ReplicaKey, int]] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    @property
    def sizes(self) -> Mapping[ReplicaKey, int]:
        """``(broker, topic, partition)`` -> replica size in bytes, from ``replicas``.

        Built once per snapshot (again only if ``replicas`` is replaced): measuring each
        of an object's partitions looks a few sizes up, and copying every replica's size
        for each of them made a step quadratic; a plain dict makes each look-up one C call.
        """
        cached = self._sizes
        if cached is None or cached[0] is not self.replicas:
            cached = (self.replicas, {k: v.size_bytes for k, v in self.replicas.items()})
            self._sizes = cached
        return cached[1]


def read_cluster(
    admin: KafkaAdmin,
    topics: Collection[str] | None = None,
    *,
    replica_sizes: bool = False,
    log_dirs_of: Collection[int] = (),
) -> ClusterSnapshot:
    """Take a snapshot of ``topics`` (every topic when ``None``).

    Args:
        admin: The Admin API client.
        topics: Topics to describe; topics that do not exist are left out of the view.
        replica_sizes: Also describe the log dirs of every broker hosting a replica
            of those topics (per-replica size and lag).
        log_dirs_of: Brokers whose log dir paths are wanted in ``view.log_dirs``.

    Raises:
        KafkaAdminError: A request failed (``KafkaUnavailableError``: retry later).
    """
    cluster = admin.describe_cluster()
    # The controller's list first: a partition completing between the two calls is then
    # still seen in flight (a stale view, fixed on the next read), never half-finished.
    in_flight = admin.list_partition_reassignments()
    described = admin.describe_topics(topics)
    replicas: dict[ReplicaKey, ReplicaDirInfo] = {}
    if replica_sizes:
        hosts = replica_hosts(described, in_flight) & set(cluster.brokers)
        if hosts and described:
            replicas = admin.describe_log_dirs(sorted(hosts), sorted(described))
    live_dirs = sorted({b for b in log_dirs_of if b in cluster.brokers})
    log_dirs = admin.log_dir_paths(live_dirs) if live_dirs else {}
    return compose_snapshot(cluster, in_flight, described, replicas, log_dirs)


def replica_hosts(
    described: Mapping[str, Mapping[int, PartitionInfo]],
    in_flight: Mapping[TopicPartition, Reassignment],
) -> set[int]:
    """Brokers hosting a replica of the described partitions (AR while reassigning)."""
    hosts: set[int] = set()
    for topic, partitions in described.items():
        for index, info in partitions.items():
            moving = in_flight.get(TopicPartition(topic, index))
            hosts.update(moving.replicas if moving else info.replicas)
    return hosts


def topic_states(
    topic: str,
    partitions: Mapping[int, PartitionInfo],
    in_flight: Mapping[TopicPartition, Reassignment],
) -> dict[int, PartitionInfo]:
    """One topic's partitions as a snapshot holds them (pure).

    Metadata's :class:`PartitionInfo` of each partition, with the replicas (AR), adding and
    removing replicas of ListPartitionReassignments for those in flight (KIP-455). A
    partition not in flight keeps Metadata's own object.
    """
    states: dict[int, PartitionInfo] = {}
    for index, info in partitions.items():
        moving = in_flight.get(TopicPartition(topic, index))
        if moving is None and not info.adding and not info.removing:
            states[index] = info
            continue
        states[index] = PartitionInfo(
            replicas=moving.replicas if moving else info.replicas,
            leader=info.leader,
            isr=info.isr,
            adding=moving.adding if moving else (),
            removing=moving.removing if moving else (),
        )
    return states


def compose_snapshot(
    cluster: ClusterInfo,
    in_flight: Mapping[TopicPartition, Reassignment],
    described: Mapping[str, Mapping[int, PartitionInfo]],
    replicas: Mapping[ReplicaKey, ReplicaDirInfo],
    log_dirs: Mapping[int, frozenset[str]],
    states: Mapping[str, dict[int, PartitionInfo]] | None = None,
) -> ClusterSnapshot:
    """Build a snapshot from the Admin API answers (pure; the result owns its containers).

    Args:
        cluster: DescribeCluster.
        in_flight: ListPartitionReassignments (only the described topics' are kept, in
            ``view.reassigning``; the caller may pass just those).
        described: Metadata of the topics of the snapshot.
        replicas: DescribeLogDirs of their replicas (only those topics' are kept; the
            caller may pass just those).
        log_dirs: Log dir paths of the brokers asked for.
        states: :func:`topic_states` of described topics, when the caller keeps them for
            several snapshots of one read; they go into ``view.topics`` as they are
            (shared: nothing changes a snapshot's partition states), the others are built.
    """
    view = ClusterView(
        live_brokers=frozenset(cluster.brokers), fenced_brokers=cluster.fenced_brokers
    )
    for topic, partitions in described.items():
        known = states.get(topic) if states is not None else None
        view.topics[topic] = (
            known if known is not None else topic_states(topic, partitions, in_flight)
        )
    view.reassigning = {tp: None for tp in in_flight if tp[0] in view.topics}
    if log_dirs:
        view.log_dirs = dict(log_dirs)
    snapshot = ClusterSnapshot(view, racks=dict(cluster.brokers))
    snapshot.controller_id = cluster.controller_id
    snapshot.cluster_id = cluster.cluster_id
    snapshot.authorized_operations = cluster.authorized_operations
    snapshot.replicas = {k: v for k, v in replicas.items() if k[1] in view.topics}
    return snapshot


def with_owners(view: ClusterView, owners: Mapping[TopicPartition, str]) -> ClusterView:
    """Name the owner of each in-flight partition that an object of ours submitted.

    Partitions in flight but not in ``owners`` keep ``None`` (started outside the
    operator); owners of partitions no longer in flight are ignored. Returns ``view``.
    """
    for tp in view.reassigning:
        view.reassigning[tp] = owners.get(tp)
    return view
