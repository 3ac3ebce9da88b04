"""ControllerContext: everything the active controller caches about the cluster.

As Kafka's ``ControllerContext``: the live brokers and their epochs, the brokers shutting
down, every topic with its replica assignment (AR, with the KIP-455 adding/removing
replicas of a running reassignment), each partition's leadership
(LeaderAndIsr plus the controller epoch that wrote it), the partition and replica
states of the two state machines, the topic deletion queue, and the controller epoch
with the version of ``/controller_epoch`` that fences its writes.

Pure data and queries: only the controller's event thread reads and writes it, and it is
rebuilt from ZooKeeper at each failover (Kafka's ``initializeControllerContext``).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from kpo_broker.controller.states import PartitionState, ReplicaState
from kpo_broker.zk.model import BrokerRegistration, LeaderIsrAndControllerEpoch, ReplicaAssignment
from kpo_kafka.topic_partition import TopicPartition

#: Controller epoch before any election, as in ``/controller_epoch`` at creation.
INITIAL_CONTROLLER_EPOCH = 0
#: ``/controller_epoch`` znode version before any election (Kafka's initial epoch zk version).
INITIAL_CONTROLLER_EPOCH_ZK_VERSION = 0


@dataclass(frozen=True, order=True)
class PartitionAndReplica:
    """One replica: a partition and the broker id that hosts the replica.

    Attributes:
        topic_partition: the partition.
        replica: the broker id.
    """

    topic_partition: TopicPartition
    replica: int

    @property
    def topic(self) -> str:
        """The replica's topic."""
        return self.topic_partition.topic

    def __str__(self) -> str:
        return f"[{self.topic_partition},{self.replica}]"


class ControllerContext:
    """The active controller's cached cluster metadata (see module docstring).

    Attributes:
        epoch: the controller epoch of this controller.
        epoch_zk_version: version of ``/controller_epoch`` at election; every controller
            write checks it (Kafka 2.2+ fencing).
        shutting_down_broker_ids: brokers in controlled shutdown (still registered).
        all_topics: every topic in ``/brokers/topics``.
        partition_states: partition state machine state of each partition.
        replica_states: replica state machine state of each replica.
        topics_to_be_deleted: topics queued in ``/admin/delete_topics``.
        topics_with_deletion_started: queued topics whose replicas were asked to stop.
        topics_ineligible_for_deletion: queued topics that must wait (replica on a dead
            broker, failed StopReplica, reassignment running).
        partitions_being_reassigned: partitions with a running reassignment.
        replicas_on_offline_dirs: broker id -> its replicas in offline log dirs, as its
            LeaderAndIsr answers (KAFKA_STORAGE_ERROR) reported; forgotten when the
            broker restarts or dies (Kafka's ``replicasOnOfflineDirs``).
    """

    def __init__(self) -> None:
        self.epoch = INITIAL_CONTROLLER_EPOCH
        self.epoch_zk_version = INITIAL_CONTROLLER_EPOCH_ZK_VERSION
        self.reset()

    def reset(self) -> None:
        """Forget everything but the epoch (resignation; Kafka's ``resetContext``)."""
        self._live_brokers: dict[int, BrokerRegistration] = {}
        self.shutting_down_broker_ids: set[int] = set()
        self.all_topics: set[str] = set()
        self._assignments: dict[str, dict[int, ReplicaAssignment]] = {}
        #: topic -> its id (KIP-516), as stored in ``/brokers/topics/<topic>``.
        self.topic_ids: dict[str, str] = {}
        self._leadership: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        self.partition_states: dict[TopicPartition, PartitionState] = {}
        self.replica_states: dict[PartitionAndReplica, ReplicaState] = {}
        self.topics_to_be_deleted: set[str] = set()
        self.topics_with_deletion_started: set[str] = set()
        self.topics_ineligible_for_deletion: set[str] = set()
        self.partitions_being_reassigned: set[TopicPartition] = set()
        self.replicas_on_offline_dirs: dict[int, set[TopicPartition]] = {}

    # --- brokers -------------------------------------------------------------------------

    def set_live_brokers(self, brokers: Iterable[BrokerRegistration]) -> None:
        """Replace the live brokers (failover) with ``brokers``."""
        self._live_brokers = {b.id: b for b in brokers}

    def add_live_brokers(self, brokers: Iterable[BrokerRegistration]) -> None:
        """Add (or replace) live brokers, e.g. brokers that started or re-registered."""
        for broker in brokers:
            self._live_brokers[broker.id] = broker

    def remove_live_brokers(self, broker_ids: Iterable[int]) -> None:
        """Forget failed brokers (also from the shutting-down set)."""
        for broker_id in broker_ids:
            self._live_brokers.pop(broker_id, None)
            self.shutting_down_broker_ids.discard(broker_id)

    @property
    def live_or_shutting_down_brokers(self) -> list[BrokerRegistration]:
        """Every registered broker, by id (the ``live_brokers`` of UpdateMetadata)."""
        return [self._live_brokers[i] for i in sorted(self._live_brokers)]

    @property
    def live_or_shutting_down_broker_ids(self) -> set[int]:
        """Ids of every registered broker, shutting down or not."""
        return set(self._live_brokers)

    @property
    def live_broker_ids(self) -> set[int]:
        """Ids of the registered brokers that are not in controlled shutdown."""
        return set(self._live_brokers) - self.shutting_down_broker_ids

    def live_broker(self, broker_id: int) -> BrokerRegistration | None:
        """Return a registered broker's registration, or None."""
        return self._live_brokers.get(broker_id)

    def broker_epoch(self, broker_id: int) -> int | None:
        """Return a registered broker's epoch (KIP-380 czxid), or None when not registered."""
        broker = self._live_brokers.get(broker_id)
        return None if broker is None else broker.epoch

    @property
    def live_broker_epochs(self) -> dict[int, int]:
        """Broker id -> broker epoch of every registered broker."""
        return {i: b.epoch for i, b in self._live_brokers.items()}

    def is_replica_online(
        self, broker_id: int, tp: TopicPartition, *, include_shutting_down: bool = False
    ) -> bool:
        """Whether the replica of ``tp`` on ``broker_id`` is online (Kafka's ``isReplicaOnline``).

        Online: its broker is live and the replica is not in one of its offline log dirs.

        Args:
            broker_id: the replica.
            tp: the partition.
            include_shutting_down: count brokers in controlled shutdown as live.
        """
        live = (
            self.live_or_shutting_down_broker_ids if include_shutting_down else self.live_broker_ids
        )
        return broker_id in live and tp not in self.replicas_on_offline_dirs.get(broker_id, ())

    def online_replicas(
        self, tp: TopicPartition, *, include_shutting_down: bool = False
    ) -> tuple[int, ...]:
        """Return the online replicas of ``tp``'s AR, in AR order."""
        return tuple(
            r
            for r in self.partition_replica_assignment(tp)
            if self.is_replica_online(r, tp, include_shutting_down=include_shutting_down)
        )

    # --- topics and assignments -------------------------------------------------------------

    def set_all_topics(self, topics: Iterable[str]) -> None:
        """Replace the topic set (assignments of topics that vanished are kept until removed)."""
        self.all_topics = set(topics)

    def set_topic_assignment(self, topic: str, assignment: Mapping[int, ReplicaAssignment]) -> None:
        """Replace a topic's whole assignment: partition index -> ReplicaAssignment."""
        self._assignments[topic] = dict(assignment)

    def update_partition_full_replica_assignment(
        self, tp: TopicPartition, assignment: ReplicaAssignment
    ) -> None:
        """Set one partition's assignment (AR, adding and removing replicas)."""
        self._assignments.setdefault(tp.topic, {})[tp.partition] = assignment

    def partition_full_replica_assignment(self, tp: TopicPartition) -> ReplicaAssignment | None:
        """Return one partition's assignment, or None for an unknown partition."""
        return self._assignments.get(tp.topic, {}).get(tp.partition)

    def partition_replica_assignment(self, tp: TopicPartition) -> tuple[int, ...]:
        """Return AR of ``tp`` (preferred replica first); empty for an unknown partition."""
        assignment = self.partition_full_replica_assignment(tp)
        return () if assignment is None else assignment.replicas

    def partitions_for_topic(self, topic: str) -> set[TopicPartition]:
        """Return the known partitions of ``topic``."""
        return {TopicPartition(topic, p) for p in self._assignments.get(topic, {})}

    def all_partitions(self) -> set[TopicPartition]:
        """Return every known partition of every topic."""
        return {TopicPartition(t, p) for t, parts in self._assignments.items() for p in parts}

    def partitions_on_broker(self, broker_id: int) -> set[TopicPartition]:
        """Return the partitions with a replica on ``broker_id`` (in AR)."""
        return {
            TopicPartition(t, p)
            for t, parts in self._assignments.items()
            for p, a in parts.items()
            if broker_id in a.replicas
        }

    def replicas_on_brokers(self, broker_ids: Collection[int]) -> set[PartitionAndReplica]:
        """Return the replicas hosted on any of ``broker_ids``."""
        return {
            PartitionAndReplica(TopicPartition(t, p), r)
            for t, parts in self._assignments.items()
            for p, a in parts.items()
            for r in a.replicas
            if r in broker_ids
        }

    def replicas_for_partitions(
        self, partitions: Iterable[TopicPartition]
    ) -> set[PartitionAndReplica]:
        """Return every replica (AR) of ``partitions``."""
        return {
            PartitionAndReplica(tp, r)
            for tp in partitions
            for r in self.partition_replica_assignment(tp)
        }

    def replicas_for_topic(self, topic: str) -> set[PartitionAndReplica]:
        """Return every replica of every partition of ``topic``."""
        return self.replicas_for_partitions(self.partitions_for_topic(topic))

    def online_and_offline_replicas(
        self,
    ) -> tuple[set[PartitionAndReplica], set[PartitionAndReplica]]:
        """Split all replicas into (on live or shutting-down brokers, on dead brokers)."""
        online: set[PartitionAndReplica] = set()
        offline: set[PartitionAndReplica] = set()
        for tp in self.all_partitions():
            for replica in self.partition_replica_assignment(tp):
                target = (
                    online
                    if self.is_replica_online(replica, tp, include_shutting_down=True)
                    else offline
                )
                target.add(PartitionAndReplica(tp, replica))
        return online, offline

    def remove_topic(self, topic: str) -> None:
        """Forget a deleted topic: its assignment, leadership, states and deletion marks."""
        for tp in self.partitions_for_topic(topic):
            self._leadership.pop(tp, None)
            self.partition_states.pop(tp, None)
            self.partitions_being_reassigned.discard(tp)
        self.replica_states = {r: s for r, s in self.replica_states.items() if r.topic != topic}
        self._assignments.pop(topic, None)
        self.topic_ids.pop(topic, None)
        self.all_topics.discard(topic)
        self.topics_to_be_deleted.discard(topic)
        self.topics_with_deletion_started.discard(topic)
        self.topics_ineligible_for_deletion.discard(topic)

    # --- leadership -----------------------------------------------------------------------

    def put_partition_leadership(
        self, tp: TopicPartition, leadership: LeaderIsrAndControllerEpoch
    ) -> None:
        """Cache a partition's leader, ISR, epochs (as last written or read in ZooKeeper)."""
        self._leadership[tp] = leadership

    def partition_leadership(self, tp: TopicPartition) -> LeaderIsrAndControllerEpoch | None:
        """Return a partition's cached leadership, or None when it has no state znode yet."""
        return self._leadership.get(tp)

    def partition_leader(self, tp: TopicPartition) -> int | None:
        """Return the cached leader of ``tp`` (-1 for none), or None without leadership."""
        leadership = self._leadership.get(tp)
        return None if leadership is None else leadership.leader_and_isr.leader

    def partitions_led_by(self, broker_id: int) -> set[TopicPartition]:
        """Return the partitions whose cached leader is ``broker_id``."""
        return {tp for tp, li in self._leadership.items() if li.leader_and_isr.leader == broker_id}

    # --- states ----------------------------------------------------------------------------

    def partition_state(self, tp: TopicPartition) -> PartitionState | None:
        """Return a partition's state machine state, or None when it has none yet."""
        return self.partition_states.get(tp)

    def partitions_in_states(
        self, states: Collection[PartitionState], topic: str | None = None
    ) -> set[TopicPartition]:
        """Return the partitions (of ``topic``, or of all topics) in any of ``states``."""
        return {
            tp
            for tp, state in self.partition_states.items()
            if state in states and (topic is None or tp.topic == topic)
        }

    def replica_state(self, replica: PartitionAndReplica) -> ReplicaState | None:
        """Return a replica's state machine state, or None when it has none yet."""
        return self.replica_states.get(replica)

    def replicas_in_state(self, topic: str, state: ReplicaState) -> set[PartitionAndReplica]:
        """Return the replicas of ``topic`` in ``state``."""
        return {r for r, s in self.replica_states.items() if r.topic == topic and s == state}

    def are_all_replicas_in_state(self, topic: str, state: ReplicaState) -> bool:
        """Whether every known replica of ``topic`` is in ``state``."""
        return all(s == state for r, s in self.replica_states.items() if r.topic == topic)

    def is_any_replica_in_state(self, topic: str, state: ReplicaState) -> bool:
        """Whether some replica of ``topic`` is in ``state``."""
        return any(s == state for r, s in self.replica_states.items() if r.topic == topic)

    # --- topic deletion --------------------------------------------------------------------

    def queue_topic_deletion(self, topics: Iterable[str]) -> None:
        """Mark topics as queued for deletion (``/admin/delete_topics``)."""
        self.topics_to_be_deleted |= set(topics)

    def begin_topic_deletion(self, topics: Iterable[str]) -> None:
        """Mark topics whose replicas were asked to stop and delete their logs."""
        self.topics_with_deletion_started |= set(topics)

    def is_topic_queued_up_for_deletion(self, topic: str) -> bool:
        """Whether ``topic`` is queued for deletion."""
        return topic in self.topics_to_be_deleted

    def is_topic_deletion_in_progress(self, topic: str) -> bool:
        """Whether the deletion of ``topic`` started (StopReplica sent)."""
        return topic in self.topics_with_deletion_started

    def is_topic_eligible_for_deletion(self, topic: str) -> bool:
        """Whether a queued topic may be deleted now (not ineligible)."""
        return (
            topic in self.topics_to_be_deleted and topic not in self.topics_ineligible_for_deletion
        )
