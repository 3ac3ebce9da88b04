"""TopicDeletionManager: deletes the topics queued in ``/admin/delete_topics``.

As Kafka's ``TopicDeletionManager`` (``delete.topic.enable``). For each queued topic:

1. its partitions go OfflinePartition then NonExistentPartition, and every broker gets
   an UpdateMetadata with leader -2 (``LeaderDuringDelete``) so it stops serving them;
2. replicas on dead brokers go ReplicaDeletionIneligible: the deletion *waits* for
   those brokers (the topic is ineligible until one of them restarts); replicas on live
   brokers go OfflineReplica then ReplicaDeletionStarted, i.e. StopReplica with
   ``delete_partition``;
3. each StopReplica response moves the replicas to ReplicaDeletionSuccessful (or, on
   error, ReplicaDeletionIneligible to be retried);
4. once every replica is ReplicaDeletionSuccessful, they become NonExistentReplica and
   the topic's znodes (assignment, partition states, config, deletion marker) are
   removed from ZooKeeper.

A topic is also ineligible while a reassignment of its partitions runs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Protocol

from kpo_broker.controller.context import ControllerContext, PartitionAndReplica
from kpo_broker.controller.partition_state_machine import PartitionStateMachine
from kpo_broker.controller.replica_state_machine import ReplicaStateMachine
from kpo_broker.controller.states import PartitionState, ReplicaState
from kpo_kafka.topic_partition import TopicPartition

_log = logging.getLogger(__name__)


class TopicDeletionStore(Protocol):
    """The ZooKeeper operations topic deletion needs (``KafkaZkClient``)."""

    def remove_topic_deletion_markers(
        self, topics: Iterable[str], *, controller_epoch_zk_version: int
    ) -> None:
        """Delete ``/admin/delete_topics/<topic>``, fenced."""
        ...

    def delete_topic_znodes(
        self, topics: Iterable[str], *, controller_epoch_zk_version: int
    ) -> None:
        """Delete ``/brokers/topics/<topic>`` recursively and the topic config, fenced."""
        ...


class TopicDeletionManager:
    """Drives topic deletions through the two state machines (see module docstring).

    Args:
        context: the controller's context (deletion queue, replica states).
        zk: ZooKeeper access.
        partition_state_machine: moves the topics' partitions offline and away.
        replica_state_machine: stops and deletes the replicas.
        send_update_metadata: ``(broker ids, partitions)`` -> sends UpdateMetadata.
        on_topic_deleted: called with a topic once it is gone (e.g. to drop its watch).
        delete_topic_enable: ``delete.topic.enable``; when false, queued deletions are
            discarded.
    """

    def __init__(
        self,
        context: ControllerContext,
        zk: TopicDeletionStore,
        partition_state_machine: PartitionStateMachine,
        replica_state_machine: ReplicaStateMachine,
        *,
        send_update_metadata: Callable[[Iterable[int], Iterable[TopicPartition]], None],
        on_topic_deleted: Callable[[str], None],
        delete_topic_enable: bool = True,
    ) -> None:
        self._context = context
        self._zk = zk
        self._partitions = partition_state_machine
        self._replicas = replica_state_machine
        self._send_update_metadata = send_update_metadata
        self._on_topic_deleted = on_topic_deleted
        self.delete_topic_enable = delete_topic_enable

    def init(self, topics_to_be_deleted: Iterable[str], ineligible: Iterable[str]) -> None:
        """Load the deletions queued at failover (without starting them).

        Args:
            topics_to_be_deleted: topics in ``/admin/delete_topics`` that exist.
            ineligible: topics that cannot be deleted now (offline replicas, reassignment).
        """
        topics = set(topics_to_be_deleted)
        if self.delete_topic_enable:
            self._context.queue_topic_deletion(topics)
            self._context.topics_ineligible_for_deletion |= set(ineligible) & topics
        elif topics:
            self._zk.remove_topic_deletion_markers(
                topics, controller_epoch_zk_version=self._context.epoch_zk_version
            )

    def enqueue_topics_for_deletion(self, topics: Iterable[str]) -> None:
        """Queue topics (``/admin/delete_topics`` children) and try to delete them."""
        if self.delete_topic_enable:
            self._context.queue_topic_deletion(topics)
            self.resume_deletions()

    def is_topic_queued_up_for_deletion(self, topic: str) -> bool:
        """Whether ``topic`` waits for deletion (always False when deletion is disabled)."""
        return self.delete_topic_enable and self._context.is_topic_queued_up_for_deletion(topic)

    def mark_topic_ineligible_for_deletion(self, topics: Iterable[str], reason: str) -> None:
        """Halt the deletion of queued ``topics`` until :meth:`resume_deletion_for_topics`."""
        if not self.delete_topic_enable:
            return
        halted = set(topics) & self._context.topics_to_be_deleted
        if halted:
            _log.info("halting deletion of topics %s: %s", sorted(halted), reason)
            self._context.topics_ineligible_for_deletion |= halted

    def resume_deletion_for_topics(self, topics: Iterable[str]) -> None:
        """Make queued ``topics`` eligible again (e.g. a broker holding replicas restarted)."""
        resumed = set(topics) & self._context.topics_to_be_deleted
        if resumed:
            self._context.topics_ineligible_for_deletion -= resumed
            self.resume_deletions()

    def fail_replica_deletion(self, replicas: Iterable[PartitionAndReplica]) -> None:
        """Replicas could not be deleted (broker died, StopReplica error): retry later."""
        failed = [r for r in replicas if self.is_topic_queued_up_for_deletion(r.topic)]
        if failed:
            topics = {r.topic for r in failed}
            _log.info("deletion of replicas %s failed", [str(r) for r in failed])
            self._replicas.handle_state_changes(failed, ReplicaState.REPLICA_DELETION_INELIGIBLE)
            self.mark_topic_ineligible_for_deletion(topics, "replica deletion failure")
            self.resume_deletions()

    def complete_replica_deletion(self, replicas: Iterable[PartitionAndReplica]) -> None:
        """Brokers confirmed the deletion of ``replicas``."""
        deleted = [r for r in replicas if self.is_topic_queued_up_for_deletion(r.topic)]
        self._replicas.handle_state_changes(deleted, ReplicaState.REPLICA_DELETION_SUCCESSFUL)
        self.resume_deletions()

    def is_topic_deletion_in_progress(self, topic: str) -> bool:
        """Whether some replica of ``topic`` was asked to delete itself and has not answered."""
        return self.delete_topic_enable and self._context.is_any_replica_in_state(
            topic, ReplicaState.REPLICA_DELETION_STARTED
        )

    def _is_eligible(self, topic: str) -> bool:
        return (
            self._context.is_topic_queued_up_for_deletion(topic)
            and not self.is_topic_deletion_in_progress(topic)
            and topic not in self._context.topics_ineligible_for_deletion
        )

    def resume_deletions(self) -> None:
        """Advance every queued deletion: complete, retry failed replicas, or (re)start."""
        retry: set[str] = set()
        eligible: set[str] = set()
        for topic in sorted(self._context.topics_to_be_deleted):
            if self._context.are_all_replicas_in_state(
                topic, ReplicaState.REPLICA_DELETION_SUCCESSFUL
            ):
                self._complete_delete_topic(topic)
                _log.info("deletion of topic %s completed", topic)
                continue
            if not self._context.is_any_replica_in_state(
                topic, ReplicaState.REPLICA_DELETION_STARTED
            ) and self._context.is_any_replica_in_state(
                topic, ReplicaState.REPLICA_DELETION_INELIGIBLE
            ):
                retry.add(topic)
            if self._is_eligible(topic):
                _log.info("deletion of topic %s (re)started", topic)
                eligible.add(topic)
        for topic in sorted(retry):
            failed = self._context.replicas_in_state(
                topic, ReplicaState.REPLICA_DELETION_INELIGIBLE
            )
            self._replicas.handle_state_changes(failed, ReplicaState.OFFLINE_REPLICA)
        if eligible:
            self._on_topic_deletion(eligible)

    def _on_topic_deletion(self, topics: set[str]) -> None:
        ctx = self._context
        unseen = topics - ctx.topics_with_deletion_started
        if unseen:
            partitions = {tp for t in unseen for tp in ctx.partitions_for_topic(t)}
            self._partitions.handle_state_changes(partitions, PartitionState.OFFLINE_PARTITION)
            self._partitions.handle_state_changes(partitions, PartitionState.NON_EXISTENT_PARTITION)
            ctx.begin_topic_deletion(unseen)
        all_partitions = {tp for t in topics for tp in ctx.partitions_for_topic(t)}
        self._send_update_metadata(ctx.live_or_shutting_down_broker_ids, all_partitions)
        self._on_partition_deletion(topics)

    def _on_partition_deletion(self, topics: set[str]) -> None:
        ctx = self._context
        dead: list[PartitionAndReplica] = []
        to_delete: list[PartitionAndReplica] = []
        waiting: set[str] = set()
        for topic in sorted(topics):
            deleted = ctx.replicas_in_state(topic, ReplicaState.REPLICA_DELETION_SUCCESSFUL)
            for replica in sorted(ctx.replicas_for_topic(topic)):
                if not ctx.is_replica_online(replica.replica, replica.topic_partition):
                    dead.append(replica)
                    waiting.add(topic)
                elif replica not in deleted:
                    to_delete.append(replica)
        self._replicas.handle_state_changes(dead, ReplicaState.REPLICA_DELETION_INELIGIBLE)
        self._replicas.handle_state_changes(to_delete, ReplicaState.OFFLINE_REPLICA)
        self._replicas.handle_state_changes(to_delete, ReplicaState.REPLICA_DELETION_STARTED)
        if waiting:
            self.mark_topic_ineligible_for_deletion(waiting, "replicas on offline brokers")

    def _complete_delete_topic(self, topic: str) -> None:
        ctx = self._context
        self._on_topic_deleted(topic)
        deleted = ctx.replicas_in_state(topic, ReplicaState.REPLICA_DELETION_SUCCESSFUL)
        self._replicas.handle_state_changes(deleted, ReplicaState.NON_EXISTENT_REPLICA)
        self._zk.delete_topic_znodes([topic], controller_epoch_zk_version=ctx.epoch_zk_version)
        self._zk.remove_topic_deletion_markers(
            [topic], controller_epoch_zk_version=ctx.epoch_zk_version
        )
        ctx.remove_topic(topic)
