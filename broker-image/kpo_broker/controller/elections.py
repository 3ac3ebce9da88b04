"""Replica leader elections asked for by clients, admins and the rebalance timer.

- ElectLeaders API (KIP-183, KIP-460): preferred elections move leadership back to the
  first replica of AR when it is live and in the ISR; unclean elections elect a leader
  for partitions without a live leader, outside the ISR if needed.
- ``/admin/preferred_replica_election``: the preferred elections it lists; the znode is
  deleted afterwards.
- Auto rebalance (``auto.leader.rebalance.enable``): every
  ``leader.imbalance.check.interval.seconds``, for each broker, the share of the
  partitions it is preferred for but does not lead is compared with
  ``leader.imbalance.per.broker.percentage``; above it, preferred elections are run for
  those partitions (when the broker is live and no reassignment runs).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterable

from kpo_broker.controller import errors
from kpo_broker.controller.base import ControllerBase
from kpo_broker.controller.context import ControllerContext
from kpo_broker.controller.election_strategies import (
    LeaderElectionStrategy,
    OfflinePartitionLeaderElection,
    PreferredReplicaPartitionLeaderElection,
)
from kpo_broker.controller.events import (
    ElectionResults,
    ElectionTrigger,
    ElectionType,
    ElectLeaders,
)
from kpo_broker.controller.partition_state_machine import StateChangeResults
from kpo_broker.controller.states import PartitionState
from kpo_broker.zk.model import NO_LEADER, LeaderAndIsr, TopicPartition

_log = logging.getLogger("kpo_broker.controller")

#: ``INVALID_TOPIC_EXCEPTION``: ElectLeaders on a topic being deleted.
INVALID_TOPIC_EXCEPTION = 17


def partitions_to_rebalance(
    context: ControllerContext,
    imbalance_percentage: int,
    is_queued_for_deletion: Callable[[str], bool],
) -> set[TopicPartition]:
    """Return the partitions an auto rebalance elects (pure; Kafka's auto leader rebalance).

    For each preferred replica (first of AR), the ratio of its partitions with another
    leader is compared with ``leader.imbalance.per.broker.percentage``; above it, its
    partitions not led by it are candidates if it is live and no reassignment runs.

    Args:
        context: the controller's context.
        imbalance_percentage: ``leader.imbalance.per.broker.percentage`` (0-100).
        is_queued_for_deletion: whether a topic is being deleted (its partitions skipped).
    """
    by_preferred: dict[int, list[TopicPartition]] = defaultdict(list)
    for tp in context.all_partitions():
        replicas = context.partition_replica_assignment(tp)
        if replicas and not is_queued_for_deletion(tp.topic):
            by_preferred[replicas[0]].append(tp)
    candidates: set[TopicPartition] = set()
    for preferred, partitions in by_preferred.items():
        not_led = [tp for tp in partitions if context.partition_leader(tp) not in (None, preferred)]
        if len(not_led) / len(partitions) <= imbalance_percentage / 100:
            continue
        if context.partitions_being_reassigned:
            continue
        candidates |= {tp for tp in not_led if context.is_replica_online(preferred, tp)}
    return candidates


def _led_by_preferred_replica(context: ControllerContext, tp: TopicPartition) -> bool:
    """Whether ``tp``'s leader is its preferred replica (first of AR)."""
    replicas = context.partition_replica_assignment(tp)
    return bool(replicas) and context.partition_leader(tp) == replicas[0]


class ElectionsMixin(ControllerBase):
    """Handlers of ElectLeaders, preferred replica election znodes and auto rebalance."""

    def on_replica_election(
        self,
        partitions: Iterable[TopicPartition],
        election_type: ElectionType,
        trigger: ElectionTrigger,
    ) -> StateChangeResults:
        """Run elections of ``election_type`` for ``partitions`` (moving them online).

        Unclean elections are forced only when an admin asked for them. A ZooKeeper
        triggered election deletes ``/admin/preferred_replica_election`` afterwards.
        """
        strategy: LeaderElectionStrategy
        if election_type is ElectionType.PREFERRED:
            strategy = PreferredReplicaPartitionLeaderElection()
        else:
            strategy = OfflinePartitionLeaderElection(
                allow_unclean=trigger is ElectionTrigger.ADMIN_CLIENT
            )
        try:
            results = self.partition_state_machine.handle_state_changes(
                partitions, PartitionState.ONLINE_PARTITION, strategy
            )
            if trigger is not ElectionTrigger.ADMIN_CLIENT:
                for tp, outcome in results.items():
                    if not isinstance(outcome, LeaderAndIsr):
                        _log.warning("%s election of %s failed: %s", trigger.value, tp, outcome)
            return results
        finally:
            if trigger is ElectionTrigger.ZK_TRIGGERED:
                self.zk.delete_preferred_replica_election(
                    controller_epoch_zk_version=self.context.epoch_zk_version
                )

    def process_elect_leaders(self, event: ElectLeaders) -> None:
        """Answer an ElectLeaders event: partition -> (error code, message).

        Raises:
            NotControllerError: this broker is not the controller (the future fails too).
        """
        if not self.is_active:
            raise errors.NotControllerError("controller moved to another broker")
        results = self.elect_leaders_now(event.partitions, event.election_type)
        if not event.result.done():
            event.result.set_result(results)

    def elect_leaders_now(
        self, partitions: Iterable[TopicPartition] | None, election_type: ElectionType
    ) -> ElectionResults:
        """Validate and run an admin election (see :meth:`process_elect_leaders`)."""
        ctx = self.context
        known_all = ctx.all_partitions()
        wanted = known_all if partitions is None else set(partitions)
        results: ElectionResults = {}
        valid: set[TopicPartition] = set()
        for tp in sorted(wanted):
            leader = ctx.partition_leader(tp)
            if tp not in known_all:
                results[tp] = (errors.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
            elif self.topic_deletion_manager.is_topic_queued_up_for_deletion(tp.topic):
                results[tp] = (INVALID_TOPIC_EXCEPTION, "The topic is being deleted.")
            elif election_type is ElectionType.PREFERRED and _led_by_preferred_replica(ctx, tp):
                results[tp] = (errors.ELECTION_NOT_NEEDED, "Leader is the preferred replica.")
            elif election_type is ElectionType.UNCLEAN and (
                leader is not None and leader != NO_LEADER and ctx.is_replica_online(leader, tp)
            ):
                results[tp] = (errors.ELECTION_NOT_NEEDED, "Partition has a live leader.")
            else:
                valid.add(tp)
        failure = (
            errors.PREFERRED_LEADER_NOT_AVAILABLE
            if election_type is ElectionType.PREFERRED
            else errors.ELIGIBLE_LEADERS_NOT_AVAILABLE
        )
        elected = self.on_replica_election(valid, election_type, ElectionTrigger.ADMIN_CLIENT)
        for tp in valid:
            outcome = elected.get(tp)
            if isinstance(outcome, LeaderAndIsr):
                results[tp] = (errors.NONE, None)
            else:
                results[tp] = (failure, str(outcome) if outcome is not None else None)
        return results

    def process_preferred_replica_election_znode(self) -> None:
        """Run the preferred elections listed in ``/admin/preferred_replica_election``."""
        if self.is_active:
            self.elect_preferred_replicas_from_znode(self.zk.get_preferred_replica_election())

    def elect_preferred_replicas_from_znode(self, requested: set[TopicPartition]) -> None:
        """Elect the preferred leaders of ``requested`` (read from the znode), then delete it.

        Unknown partitions, topics being deleted and partitions already led by their
        preferred replica are skipped.
        """
        ctx = self.context
        deleting = self.topic_deletion_manager.is_topic_queued_up_for_deletion
        valid = {
            tp
            for tp in requested & ctx.all_partitions()
            if not deleting(tp.topic) and not _led_by_preferred_replica(ctx, tp)
        }
        _log.info("preferred replica election for %s", sorted(str(tp) for tp in valid))
        self.on_replica_election(valid, ElectionType.PREFERRED, ElectionTrigger.ZK_TRIGGERED)

    def process_auto_preferred_replica_leader_election(self) -> None:
        """Rebalance leaders if a broker's imbalance exceeds the configured percentage."""
        if not self.is_active:
            return
        candidates = partitions_to_rebalance(
            self.context,
            self.config.leader_imbalance_per_broker_percentage,
            self.topic_deletion_manager.is_topic_queued_up_for_deletion,
        )
        if candidates:
            _log.info("auto leader rebalance of %s", sorted(str(tp) for tp in candidates))
            self.on_replica_election(
                candidates, ElectionType.PREFERRED, ElectionTrigger.AUTO_TRIGGERED
            )
