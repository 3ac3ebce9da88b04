"""Broker events: brokers starting, failing, changing endpoints, shutting down cleanly.

- BrokerChange (``/brokers/ids`` children): new, dead and *bounced* brokers (same id,
  newer broker epoch: it restarted between two reads) are told apart by comparing the
  registrations with the context (KIP-380).
- Broker startup (seed 001 §E): the other brokers get UpdateMetadata with the new
  broker; the new broker gets UpdateMetadata with every partition, then LeaderAndIsr
  for every replica it hosts (OnlineReplica); offline and new partitions are elected
  (it may lead some now); reassignments with target replicas on it are resumed
  (KIP-455); halted topic deletions with replicas on it resume.
- Broker failure (seed 001 §A): partitions it led go OfflinePartition and are elected
  from the live ISR (or unclean, if allowed; else they stay offline with leader -1);
  its replicas go OfflineReplica, which removes it from the ISRs it was in; each write
  bumps the leader epoch; all writes are batched.
- ControlledShutdown: leadership of the broker's partitions moves to other ISR members
  (controlled-shutdown election), it leaves the ISRs of the partitions it follows, and
  the partitions it still leads are returned; the broker retries until none is left.
"""

from __future__ import annotations

import logging

from kpo_broker.controller.context import PartitionAndReplica
from kpo_broker.controller.election_strategies import (
    ControlledShutdownPartitionLeaderElection,
)
from kpo_broker.controller.errors import (
    BrokerNotAvailableError,
    NotControllerError,
    StaleBrokerEpochError,
)
from kpo_broker.controller.events import ControlledShutdown
from kpo_broker.controller.reassignment import ReassignmentMixin
from kpo_broker.controller.states import PartitionState, ReplicaState
from kpo_broker.zk.model import TopicPartition

_log = logging.getLogger("kpo_broker.controller")

#: ControlledShutdown broker epoch of requests older than v2 (KIP-380): not checked.
UNKNOWN_BROKER_EPOCH = -1


class BrokerEventsMixin(ReassignmentMixin):
    """Handlers of BrokerChange, BrokerModifications and ControlledShutdown."""

    def process_broker_change(self) -> None:
        """Compare ``/brokers/ids`` with the context and handle new, bounced and dead brokers."""
        if not self.is_active:
            return
        current = self.zk.get_live_brokers()
        known = self.context.live_broker_epochs
        new_ids = sorted(set(current) - set(known))
        dead_ids = sorted(set(known) - set(current))
        bounced_ids = sorted(i for i in set(current) & set(known) if current[i].epoch > known[i])
        _log.info(
            "broker change: new %s, dead %s, bounced %s, live %s",
            new_ids,
            dead_ids,
            bounced_ids,
            sorted(current),
        )
        channel = self.channel_manager
        if channel is not None:
            for broker_id in new_ids:
                channel.add_broker(current[broker_id])
            for broker_id in bounced_ids:
                channel.remove_broker(broker_id)
                channel.add_broker(current[broker_id])
            for broker_id in dead_ids:
                channel.remove_broker(broker_id)
        if new_ids:
            self.context.add_live_brokers(current[i] for i in new_ids)
            self.on_broker_startup(new_ids)
        if bounced_ids:
            self.context.remove_live_brokers(bounced_ids)
            self.on_broker_failure(bounced_ids)
            self.context.add_live_brokers(current[i] for i in bounced_ids)
            self.on_broker_startup(bounced_ids)
        if dead_ids:
            self.context.remove_live_brokers(dead_ids)
            self.on_broker_failure(dead_ids)

    def on_broker_startup(self, broker_ids: list[int]) -> None:
        """Bring brokers that (re)started into the cluster (seed 001 §E)."""
        ctx = self.context
        existing = ctx.live_or_shutting_down_broker_ids - set(broker_ids)
        self.send_update_metadata_request(existing, [])
        with_leaders = {
            tp
            for tp in ctx.all_partitions()
            if ctx.partition_leadership(tp) is not None
            and not self.topic_deletion_manager.is_topic_queued_up_for_deletion(tp.topic)
        }
        self.send_update_metadata_request(broker_ids, with_leaders)
        replicas = ctx.replicas_on_brokers(set(broker_ids))
        self.replica_state_machine.handle_state_changes(replicas, ReplicaState.ONLINE_REPLICA)
        self.partition_state_machine.trigger_online_partition_state_change()
        started = set(broker_ids)
        self.maybe_resume_reassignments(
            lambda _, assignment: any(r in started for r in assignment.target_replicas)
        )
        to_resume = {
            r.topic
            for r in replicas
            if self.topic_deletion_manager.is_topic_queued_up_for_deletion(r.topic)
        }
        if to_resume:
            self.topic_deletion_manager.resume_deletion_for_topics(to_resume)
        self.watches.watch_brokers(broker_ids)

    def on_broker_failure(self, broker_ids: list[int]) -> None:
        """Handle dead brokers: elect new leaders, shrink ISRs (seed 001 §A)."""
        self.on_replicas_become_offline(self.context.replicas_on_brokers(set(broker_ids)))
        self.watches.unwatch_brokers(broker_ids)

    def on_replicas_become_offline(self, replicas: set[PartitionAndReplica]) -> None:
        """Move leaderless partitions offline and elect, then take the replicas offline."""
        ctx = self.context
        deleting = self.topic_deletion_manager.is_topic_queued_up_for_deletion
        for_deletion = {r for r in replicas if deleting(r.topic)}
        not_for_deletion = replicas - for_deletion
        offline_leader = {
            tp
            for tp in ctx.all_partitions()
            if not deleting(tp.topic)
            and (leader := ctx.partition_leader(tp)) is not None
            and not ctx.is_replica_online(leader, tp)
        }
        self.partition_state_machine.handle_state_changes(
            offline_leader, PartitionState.OFFLINE_PARTITION
        )
        self.partition_state_machine.trigger_online_partition_state_change()
        self.replica_state_machine.handle_state_changes(
            not_for_deletion, ReplicaState.OFFLINE_REPLICA
        )
        if for_deletion:
            self.topic_deletion_manager.fail_replica_deletion(for_deletion)
        if not offline_leader:
            self.send_update_metadata_request(ctx.live_or_shutting_down_broker_ids, [])

    def process_broker_modifications(self, broker_id: int) -> None:
        """Cache a changed broker registration and tell every broker about it."""
        if not self.is_active:
            return
        new = self.zk.get_broker(broker_id)
        old = self.context.live_broker(broker_id)
        if new is None or old is None or (new.endpoints, new.rack) == (old.endpoints, old.rack):
            return
        _log.info("broker %s changed its registration: %s", broker_id, new)
        self.context.add_live_brokers([new])
        if self.channel_manager is not None:
            self.channel_manager.remove_broker(broker_id)
            self.channel_manager.add_broker(new)
        self.send_update_metadata_request(self.context.live_or_shutting_down_broker_ids, [])

    def process_controlled_shutdown(self, event: ControlledShutdown) -> None:
        """Answer a ControlledShutdown event with the partitions the broker still leads."""
        remaining = self.do_controlled_shutdown(event.broker_id, event.broker_epoch)
        if not event.result.done():
            event.result.set_result(remaining)

    def do_controlled_shutdown(self, broker_id: int, broker_epoch: int) -> set[TopicPartition]:
        """Move leadership away from ``broker_id`` and take it out of the ISRs.

        Args:
            broker_id: the broker shutting down.
            broker_epoch: its epoch from the request; -1 is not checked (requests < v2).

        Returns:
            the partitions (with more than one replica) it still leads.

        Raises:
            NotControllerError: this broker is not the controller.
            StaleBrokerEpochError: the epoch is older than the registered one.
            BrokerNotAvailableError: the broker is not registered.
            ControllerMovedError: a ZooKeeper write was fenced.
        """
        if not self.is_active:
            raise NotControllerError("controller moved to another broker")
        ctx = self.context
        cached = ctx.broker_epoch(broker_id)
        if broker_epoch != UNKNOWN_BROKER_EPOCH and cached is not None and broker_epoch < cached:
            raise StaleBrokerEpochError(
                f"broker {broker_id} epoch {broker_epoch} is older than {cached}"
            )
        if broker_id not in ctx.live_or_shutting_down_broker_ids:
            raise BrokerNotAvailableError(f"broker {broker_id} is not registered")
        _log.info("controlled shutdown of broker %s", broker_id)
        ctx.shutting_down_broker_ids.add(broker_id)
        deleting = self.topic_deletion_manager.is_topic_queued_up_for_deletion
        to_act_on = {
            tp
            for tp in ctx.partitions_on_broker(broker_id)
            if len(ctx.partition_replica_assignment(tp)) > 1
            and ctx.partition_leadership(tp) is not None
            and not deleting(tp.topic)
        }
        led = {tp for tp in to_act_on if ctx.partition_leader(tp) == broker_id}
        followed = to_act_on - led
        self.partition_state_machine.handle_state_changes(
            led, PartitionState.ONLINE_PARTITION, ControlledShutdownPartitionLeaderElection()
        )
        self.replica_state_machine.handle_state_changes(
            {PartitionAndReplica(tp, broker_id) for tp in followed}, ReplicaState.OFFLINE_REPLICA
        )
        return {
            tp
            for tp in ctx.partitions_led_by(broker_id)
            if not deleting(tp.topic) and len(ctx.partition_replica_assignment(tp)) > 1
        }
