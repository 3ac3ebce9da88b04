"""Replica leader elections asked for by clients, admins and the rebalance timer.

The :class:`ReplicaElectionManager` runs Kafka's ``onReplicaElection`` for the
controller; the leader of each partition is chosen by the partition state machine with
a strategy of :mod:`kpo_broker.controller.leader_election`.

- ElectLeaders API (KIP-183, KIP-460): preferred elections move leadership back to the
  first replica of AR when it is live and in the ISR; unclean elections elect a leader
  for partitions without a live leader, outside the ISR if needed.
- ``/admin/preferred_replica_election``: the preferred elections it lists; the znode is
  deleted afterwards.
- Auto rebalance (``auto.leader.rebalance.enable``): every
  ``leader.imbalance.check.interval.seconds``, for each broker, the share of the
  partitions it is preferred for but does not lead is compared with
  ``leader.imbalance.per.broker.percentage``; above it, preferred elections are run for
  those partitions whose preferred replica is live and in the ISR (when no reassignment
  runs).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterable

from kpo_broker.controller import errors
from kpo_broker.controller.context import ControllerContext
from kpo_broker.controller.events import ElectionResults, ElectionTrigger, ElectionType
from kpo_broker.controller.leader_election import (
    LeaderElectionStrategy,
    OfflinePartitionLeaderElection,
    PreferredReplicaPartitionLeaderElection,
)
from kpo_broker.controller.partition_state_machine import (
    PartitionStateMachine,
    StateChangeResults,
)
from kpo_broker.controller.states import PartitionState
from kpo_broker.controller.topic_deletion import TopicDeletionManager
from kpo_broker.zk.client import KafkaZkClient
from kpo_broker.zk.model import NO_LEADER, LeaderAndIsr
from kpo_kafka.topic_partition import TopicPartition

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
        candidates |= {tp for tp in not_led if _can_preferred_replica_lead(context, tp, preferred)}
    return candidates


def _can_preferred_replica_lead(
    context: ControllerContext, tp: TopicPartition, preferred: int
) -> bool:
    """Whether ``preferred`` is online and in the ISR (Kafka's ``canPreferredReplicaBeLeader``).

    A preferred replica still catching up (out of the ISR) is not a candidate, so the
    rebalance does not try, and fail, to elect it every interval.
    """
    if not context.is_replica_online(preferred, tp):
        return False
    leadership = context.partition_leadership(tp)
    return leadership is not None and preferred in leadership.leader_and_isr.isr


def _led_by_preferred_replica(context: ControllerContext, tp: TopicPartition) -> bool:
    """Whether ``tp``'s leader is its preferred replica (first of AR)."""
    replicas = context.partition_replica_assignment(tp)
    return bool(replicas) and context.partition_leader(tp) == replicas[0]


class ReplicaElectionManager:
    """Runs the active controller's replica leader elections (see module docstring).

    Called on the controller's event thread only, while the controller is active (the
    controller checks that before delegating).

    Args:
        context: the controller's context.
        zk: deletes ``/admin/preferred_replica_election`` after its elections (fenced).
        partition_state_machine: moves the partitions online with the election.
        topic_deletion_manager: partitions of topics being deleted are not elected.
        leader_imbalance_per_broker_percentage: the broker's
            ``leader.imbalance.per.broker.percentage`` (0-100), for the auto rebalance.
    """

    def __init__(
        self,
        context: ControllerContext,
        zk: KafkaZkClient,
        partition_state_machine: PartitionStateMachine,
        topic_deletion_manager: TopicDeletionManager,
        *,
        leader_imbalance_per_broker_percentage: int,
    ) -> None:
        self._context = context
        self._zk = zk
        self._partition_state_machine = partition_state_machine
        self._topic_deletion_manager = topic_deletion_manager
        self._imbalance_percentage = leader_imbalance_per_broker_percentage

    def on_replica_election(
        self,
        partitions: Iterable[TopicPartition],
        election_type: ElectionType,
        trigger: ElectionTrigger,
    ) -> StateChangeResults:
        """Run elections of ``election_type`` for ``partitions`` (moving them online).

        Kafka's ``onReplicaElection``. Unclean elections are forced only when an admin
        asked for them. A ZooKeeper triggered election deletes
        ``/admin/preferred_replica_election`` afterwards.

        Raises:
            ControllerMovedError: a ZooKeeper write was fenced.
        """
        strategy: LeaderElectionStrategy
        if election_type is ElectionType.PREFERRED:
            strategy = PreferredReplicaPartitionLeaderElection()
        else:
            strategy = OfflinePartitionLeaderElection(
                allow_unclean=trigger is ElectionTrigger.ADMIN_CLIENT
            )
        try:
            results = self._partition_state_machine.handle_state_changes(
                partitions, PartitionState.ONLINE_PARTITION, strategy
            )
            if trigger is not ElectionTrigger.ADMIN_CLIENT:
                for tp, outcome in results.items():
                    if not isinstance(outcome, LeaderAndIsr):
                        _log.warning("%s election of %s failed: %s", trigger.value, tp, outcome)
            return results
        finally:
            if trigger is ElectionTrigger.ZK_TRIGGERED:
                self._zk.delete_preferred_replica_election(
                    controller_epoch_zk_version=self._context.epoch_zk_version
                )

    def elect_leaders(
        self, partitions: Iterable[TopicPartition] | None, election_type: ElectionType
    ) -> ElectionResults:
        """Validate and run an admin election (ElectLeaders API, KIP-183, KIP-460).

        Args:
            partitions: the partitions, or None for all partitions.
            election_type: preferred or unclean.

        Returns:
            partition -> (error code, message): 0, UNKNOWN_TOPIC_OR_PARTITION,
            INVALID_TOPIC_EXCEPTION (topic being deleted), ELECTION_NOT_NEEDED,
            PREFERRED_LEADER_NOT_AVAILABLE or ELIGIBLE_LEADERS_NOT_AVAILABLE.
        """
        ctx = self._context
        known_all = ctx.all_partitions()
        wanted = known_all if partitions is None else set(partitions)
        results: ElectionResults = {}
        valid: set[TopicPartition] = set()
        for tp in sorted(wanted):
            leader = ctx.partition_leader(tp)
            if tp not in known_all:
                results[tp] = (errors.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
            elif self._topic_deletion_manager.is_topic_queued_up_for_deletion(tp.topic):
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

    def elect_preferred_replicas_from_znode(self, requested: set[TopicPartition]) -> None:
        """Elect the preferred leaders of ``requested`` (read from the znode), then delete it.

        Unknown partitions, topics being deleted and partitions already led by their
        preferred replica are skipped.
        """
        ctx = self._context
        deleting = self._topic_deletion_manager.is_topic_queued_up_for_deletion
        valid = {
            tp
            for tp in requested & ctx.all_partitions()
            if not deleting(tp.topic) and not _led_by_preferred_replica(ctx, tp)
        }
        _log.info("preferred replica election for %s", sorted(str(tp) for tp in valid))
        self.on_replica_election(valid, ElectionType.PREFERRED, ElectionTrigger.ZK_TRIGGERED)

    def check_and_trigger_auto_leader_rebalance(self) -> None:
        """Rebalance leaders if a broker's imbalance exceeds the configured percentage.

        Kafka's ``checkAndTriggerAutoLeaderRebalance``; see :func:`partitions_to_rebalance`.
        """
        candidates = partitions_to_rebalance(
            self._context,
            self._imbalance_percentage,
            self._topic_deletion_manager.is_topic_queued_up_for_deletion,
        )
        if candidates:
            _log.info("auto leader rebalance of %d partition(s)", len(candidates))
            _log.debug("auto leader rebalance of %s", sorted(str(tp) for tp in candidates))
            self.on_replica_election(
                candidates, ElectionType.PREFERRED, ElectionTrigger.AUTO_TRIGGERED
            )
