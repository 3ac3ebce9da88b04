"""Controller failover and resignation (seed 001 §D).

On winning the election the controller registers its watches *before* reading
ZooKeeper, deletes stale ISR change notifications, loads brokers, topics, assignments
and partition states into its :class:`ControllerContext`, connects to every live broker,
queues the pending topic deletions, sends UpdateMetadata to all live brokers (before
any LeaderAndIsr, so brokers know the live brokers first), starts the replica then the
partition state machine, resumes reassignments (the ``/admin/reassign_partitions``
znode's, then those with adding/removing replicas in ZooKeeper, KIP-455), deletions and
pending preferred elections, and
schedules the auto leader rebalance. Resigning undoes all of it.
"""

from __future__ import annotations

import logging
from typing import Any

from kpo_broker.controller.channel_manager import ConnectionFactory, ControllerChannelManager
from kpo_broker.controller.elections import ElectionsMixin
from kpo_broker.controller.events import (
    AutoPreferredReplicaLeaderElection,
)
from kpo_broker.controller.reassignment import ReassignmentMixin
from kpo_broker.controller.scheduler import RepeatingTask

_log = logging.getLogger("kpo_broker.controller")


class FailoverMixin(ElectionsMixin, ReassignmentMixin):
    """Becoming the active controller and ceasing to be it."""

    _connection_factory: ConnectionFactory | None
    _channel_retry_backoff_ms: int
    _auto_rebalance_initial_delay_s: float
    _rebalance_task: RepeatingTask | None

    def _on_controller_failover(self) -> None:
        """Take over as the active controller (the epoch is already in the context)."""
        ctx = self.context
        self.watches.register_failover_watches()
        notifications = self.zk.get_isr_change_notifications()
        if notifications:
            self.zk.delete_isr_change_notifications(
                notifications, controller_epoch_zk_version=ctx.epoch_zk_version
            )
        self._initialize_controller_context()
        to_delete, ineligible = self._fetch_topic_deletions_in_progress()
        self.topic_deletion_manager.init(to_delete, ineligible)
        self.send_update_metadata_request(ctx.live_or_shutting_down_broker_ids, [])
        self.replica_state_machine.startup()
        self.partition_state_machine.startup()
        self.initialize_partition_reassignments()
        _log.info("ready to serve as the controller with epoch %s", ctx.epoch)
        self.topic_deletion_manager.resume_deletions()
        pending = self.zk.get_preferred_replica_election()
        if pending:
            self.elect_preferred_replicas_from_znode(pending)
        if self.config.auto_leader_rebalance_enable:
            self._rebalance_task = RepeatingTask(
                f"controller-{self.broker_id}-auto-leader-rebalance",
                self._auto_rebalance_initial_delay_s,
                float(self.config.leader_imbalance_check_interval_seconds),
                lambda: self.event_manager.put(AutoPreferredReplicaLeaderElection()),
            )
            self._rebalance_task.start()

    def _initialize_controller_context(self) -> None:
        """Load brokers, topics, assignments and partition states (seed 001 §D step 2)."""
        ctx = self.context
        ctx.set_live_brokers(self.zk.get_live_brokers().values())
        topics = self.zk.get_all_topics()
        ctx.set_all_topics(topics)
        self.watches.watch_topics(sorted(topics))
        for topic, assignment in self.zk.get_replica_assignments(topics).items():
            ctx.set_topic_assignment(topic, assignment.partitions)
        ctx.partitions_being_reassigned = {
            tp
            for tp in ctx.all_partitions()
            if (a := ctx.partition_full_replica_assignment(tp)) is not None
            and a.is_being_reassigned
        }
        ctx.shutting_down_broker_ids.clear()
        self.watches.watch_brokers(sorted(ctx.live_or_shutting_down_broker_ids))
        for tp, state in self.zk.get_partition_states(ctx.all_partitions()).items():
            ctx.put_partition_leadership(tp, state)
        self.channel_manager = self._new_channel_manager()
        self.channel_manager.startup(ctx.live_or_shutting_down_brokers)

    def _new_channel_manager(self) -> ControllerChannelManager:
        kwargs: dict[str, Any] = {"retry_backoff_ms": self._channel_retry_backoff_ms}
        if self._connection_factory is not None:
            kwargs["connection_factory"] = self._connection_factory
        return ControllerChannelManager(
            self.broker_id,
            self.config.inter_broker_listener,
            self.config.controller_socket_timeout_ms,
            **kwargs,
        )

    def _fetch_topic_deletions_in_progress(self) -> tuple[set[str], set[str]]:
        """Return (topics queued for deletion, topics that cannot be deleted now)."""
        ctx = self.context
        queued = self.zk.get_topics_marked_for_deletion()
        with_offline_replicas = {
            topic
            for topic in ctx.all_topics
            if any(
                not ctx.is_replica_online(r.replica, r.topic_partition)
                for r in ctx.replicas_for_topic(topic)
            )
        }
        reassigning = {tp.topic for tp in ctx.partitions_being_reassigned}
        return queued, with_offline_replicas | reassigning

    def _on_controller_resignation(self) -> None:
        """Drop everything of the active role (Kafka's ``onControllerResignation``)."""
        self.watches.cancel_all()
        if self._rebalance_task is not None:
            self._rebalance_task.cancel()
            self._rebalance_task = None
        self.partition_state_machine.shutdown()
        self.replica_state_machine.shutdown()
        if self.channel_manager is not None:
            self.channel_manager.shutdown()
            self.channel_manager = None
        self.batch.clear()
        self.context.reset()
        _log.info("broker %s is not the controller", self.broker_id)
