"""Topic events: creation, partition additions, deletion requests, ISR change notifications.

- TopicChange (``/brokers/topics`` children, seed 001 §B): new topics' assignments are
  read and their partitions created: NewPartition / NewReplica, then OnlinePartition
  (leader = first live replica of AR, ISR = live replicas of AR, state znodes created in
  one batch) and OnlineReplica; the replicas get LeaderAndIsr, every broker UpdateMetadata.
- PartitionModifications (``/brokers/topics/<topic>``): partitions added to a topic are
  created the same way.
- TopicDeletion (``/admin/delete_topics`` children): topics are queued in the
  :class:`~kpo_broker.controller.topic_deletion.TopicDeletionManager`, or the markers
  removed when ``delete.topic.enable`` is false.
- StopReplica responses of deletions advance the deletion.
- IsrChangeNotification: leaders changed ISRs; the states are re-read and sent to every
  broker in UpdateMetadata, then the notifications are deleted.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from kpo_broker.controller.base import ControllerBase
from kpo_broker.controller.context import PartitionAndReplica
from kpo_broker.controller.election_strategies import OfflinePartitionLeaderElection
from kpo_broker.controller.events import TopicDeletionStopReplicaResponseReceived
from kpo_broker.controller.states import PartitionState, ReplicaState
from kpo_broker.zk.model import TopicPartition

_log = logging.getLogger("kpo_broker.controller")

#: StopReplica response error code when the request itself failed (no partition errors).
_NONE = 0


class TopicEventsMixin(ControllerBase):
    """Handlers of topic, deletion and ISR change events."""

    def process_topic_change(self) -> None:
        """Create the partitions of new topics; forget topics that vanished."""
        if not self.is_active:
            return
        ctx = self.context
        topics = self.zk.get_all_topics()
        new_topics = topics - ctx.all_topics
        deleted_topics = ctx.all_topics - topics
        ctx.set_all_topics(topics)
        self.watches.watch_topics(sorted(new_topics))
        assignments = self.zk.get_replica_assignments(new_topics)
        for topic in deleted_topics:
            self.watches.unwatch_topic(topic)
            ctx.remove_topic(topic)
        added: set[TopicPartition] = set()
        for topic, assignment in assignments.items():
            ctx.set_topic_assignment(topic, assignment.partitions)
            added |= ctx.partitions_for_topic(topic)
        _log.info("topic change: new %s, deleted %s", sorted(new_topics), sorted(deleted_topics))
        if added:
            self.on_new_partition_creation(added)

    def process_partition_modifications(self, topic: str) -> None:
        """Create partitions added to ``topic``'s assignment."""
        if not self.is_active:
            return
        ctx = self.context
        assignment = self.zk.get_replica_assignments([topic]).get(topic)
        if assignment is None:
            return
        to_add = {
            TopicPartition(topic, p): a
            for p, a in assignment.partitions.items()
            if not ctx.partition_replica_assignment(TopicPartition(topic, p))
        }
        if not to_add:
            return
        if self.topic_deletion_manager.is_topic_queued_up_for_deletion(topic):
            _log.warning(
                "not adding partitions %s of %s: it is being deleted", sorted(to_add), topic
            )
            return
        _log.info("new partitions %s", sorted(str(tp) for tp in to_add))
        for tp, replicas in to_add.items():
            ctx.update_partition_full_replica_assignment(tp, replicas)
        self.on_new_partition_creation(set(to_add))

    def on_new_partition_creation(self, partitions: set[TopicPartition]) -> None:
        """Move new partitions and their replicas through New to Online (seed 001 §B)."""
        replicas = self.context.replicas_for_partitions(partitions)
        self.partition_state_machine.handle_state_changes(partitions, PartitionState.NEW_PARTITION)
        self.replica_state_machine.handle_state_changes(replicas, ReplicaState.NEW_REPLICA)
        self.partition_state_machine.handle_state_changes(
            partitions, PartitionState.ONLINE_PARTITION, OfflinePartitionLeaderElection()
        )
        self.replica_state_machine.handle_state_changes(replicas, ReplicaState.ONLINE_REPLICA)

    def process_topic_deletion(self) -> None:
        """Queue the topics of ``/admin/delete_topics`` for deletion."""
        if not self.is_active:
            return
        ctx = self.context
        fence = ctx.epoch_zk_version
        requested = self.zk.get_topics_marked_for_deletion()
        unknown = requested - ctx.all_topics
        if unknown:
            _log.warning("ignoring deletion of unknown topics %s", sorted(unknown))
            self.zk.remove_topic_deletion_markers(unknown, controller_epoch_zk_version=fence)
        to_delete = requested - unknown
        if not to_delete:
            return
        if not self.topic_deletion_manager.delete_topic_enable:
            _log.info(
                "removing deletion markers of %s: delete.topic.enable is false", sorted(to_delete)
            )
            self.zk.remove_topic_deletion_markers(to_delete, controller_epoch_zk_version=fence)
            return
        _log.info("starting deletion of topics %s", sorted(to_delete))
        reassigning = {tp.topic for tp in ctx.partitions_being_reassigned} & to_delete
        self.topic_deletion_manager.mark_topic_ineligible_for_deletion(
            reassigning, "reassignment in progress"
        )
        self.topic_deletion_manager.enqueue_topics_for_deletion(to_delete)

    def on_stop_replica_response(
        self, broker_id: int, response: Any, deleted: frozenset[TopicPartition]
    ) -> None:
        """Turn a StopReplica response of a deletion into an event (channel thread).

        Only the partitions the request asked to delete are reported.
        """
        errors: dict[TopicPartition, int] = {}
        for entry in response.partition_errors:
            tp = TopicPartition(entry.topic_name, entry.partition_index)
            if tp in deleted:
                errors[tp] = entry.error_code
        if response.error_code != _NONE:
            errors = dict.fromkeys(deleted, response.error_code)
        self.event_manager.put(
            TopicDeletionStopReplicaResponseReceived(broker_id, response.error_code, errors)
        )

    def process_topic_deletion_stop_replica_response(
        self, event: TopicDeletionStopReplicaResponseReceived
    ) -> None:
        """Mark the replicas deleted, or failed (to be retried)."""
        if not self.is_active:
            return
        if event.request_error != _NONE:
            in_error = set(event.partition_errors)
        else:
            in_error = {tp for tp, code in event.partition_errors.items() if code != _NONE}
        manager = self.topic_deletion_manager
        manager.fail_replica_deletion(_replicas(in_error, event.replica_id))
        deleted = set(event.partition_errors) - in_error
        if deleted:
            manager.complete_replica_deletion(_replicas(deleted, event.replica_id))

    def process_isr_change_notification(self) -> None:
        """Re-read the states of partitions whose ISR changed and send them to every broker."""
        if not self.is_active:
            return
        ctx = self.context
        names = self.zk.get_isr_change_notifications()
        if not names:
            return
        try:
            notified = self.zk.get_isr_change_notification_partitions(names)
            known = notified & ctx.all_partitions()
            if known:
                for tp, state in self.zk.get_partition_states(known).items():
                    ctx.put_partition_leadership(tp, state)
                self.send_update_metadata_request(ctx.live_or_shutting_down_broker_ids, known)
        finally:
            self.zk.delete_isr_change_notifications(
                names, controller_epoch_zk_version=ctx.epoch_zk_version
            )


def _replicas(partitions: Iterable[TopicPartition], replica_id: int) -> set[PartitionAndReplica]:
    return {PartitionAndReplica(tp, replica_id) for tp in partitions}
