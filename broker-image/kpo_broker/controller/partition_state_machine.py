"""The partition state machine: NewPartition, OnlinePartition, OfflinePartition, NonExistent.

As Kafka's ``ZkPartitionStateMachine``: a state change is applied to many partitions at
once; legal transitions come from :mod:`kpo_broker.controller.states`, leaders from the
pure algorithms of :mod:`kpo_broker.controller.leader_election`. Every ZooKeeper access
is batched (one pipelined round of reads, one of fenced writes per attempt, as Kafka
does with ZooKeeper multi-ops: never one synchronous write per partition), and the
LeaderAndIsr / UpdateMetadata requests of the change are collected in the
:class:`ControllerBrokerRequestBatch` and sent at its end.

Entering OnlinePartition:

- from NewPartition: leader = first live replica of AR, ISR = live replicas of AR,
  leader epoch 0; the state znodes are created (topic creation, Kafka's
  ``initializeLeaderAndIsrForPartitions``);
- from Offline/Online: a leader is elected by the given strategy from the state cached
  in the context, the leader epoch is bumped and the state written with a
  compare-and-set on the partition epoch; conflicting partitions (and those the cache
  finds no leader for) are read in ZooKeeper and retried (Kafka's
  ``electLeaderForPartitions``, which reads every state first, e.g. after a broker
  failure).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Protocol

from kpo_broker.controller import leader_election
from kpo_broker.controller.context import ControllerContext
from kpo_broker.controller.errors import StateChangeFailedError
from kpo_broker.controller.leader_election import (
    LeaderElectionResult,
    LeaderElectionStrategy,
    OfflinePartitionLeaderElection,
    PreferredReplicaPartitionLeaderElection,
    ReassignPartitionLeaderElection,
)
from kpo_broker.controller.request_batch import ControllerBrokerRequestBatch
from kpo_broker.controller.states import PartitionState, is_valid_transition
from kpo_broker.zk.configs import EntityConfig
from kpo_broker.zk.errors import ControllerMovedError
from kpo_broker.zk.model import INITIAL_LEADER_EPOCH, LeaderAndIsr, LeaderIsrAndControllerEpoch
from kpo_broker.zk.partition_states import PartitionStateWriteResult
from kpo_kafka.topic_partition import TopicPartition

__all__ = ["PartitionStateMachine", "PartitionStateStore", "StateChangeResults"]

_log = logging.getLogger(__name__)
_state_change_log = logging.getLogger("kpo_broker.state.change")

#: Topic config overriding ``unclean.leader.election.enable``.
UNCLEAN_LEADER_ELECTION_CONFIG = "unclean.leader.election.enable"

#: Outcome per partition: its new LeaderAndIsr, or why the change failed.
StateChangeResults = dict[TopicPartition, LeaderAndIsr | Exception]


class PartitionStateStore(Protocol):
    """The ZooKeeper operations the partition state machine needs (``KafkaZkClient``)."""

    def create_partition_states(
        self,
        states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch],
        *,
        controller_epoch_zk_version: int,
    ) -> PartitionStateWriteResult:
        """Create state znodes, fenced."""
        ...

    def update_leader_and_isr(
        self,
        leader_and_isrs: Mapping[TopicPartition, LeaderAndIsr],
        controller_epoch: int,
        *,
        controller_epoch_zk_version: int,
    ) -> PartitionStateWriteResult:
        """Compare-and-set state znodes, fenced."""
        ...

    def get_partition_states(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
        """Read state znodes."""
        ...

    def get_entity_configs(self, entity_type: str, names: Iterable[str]) -> dict[str, EntityConfig]:
        """Read config overrides (``/config/topics/<topic>``)."""
        ...


class PartitionStateMachine:
    """Applies partition state changes (see module docstring).

    Args:
        context: the controller's context (holds the partition states).
        zk: ZooKeeper access.
        batch: collects the requests of each change.
        unclean_leader_election_enable: the broker's ``unclean.leader.election.enable``
            default, overridden per topic by its config.
    """

    def __init__(
        self,
        context: ControllerContext,
        zk: PartitionStateStore,
        batch: ControllerBrokerRequestBatch,
        *,
        unclean_leader_election_enable: bool = False,
    ) -> None:
        self._context = context
        self._zk = zk
        self._batch = batch
        self._unclean_default = unclean_leader_election_enable

    def set_unclean_default(self, enabled: bool) -> None:
        """Take a new broker default ``unclean.leader.election.enable`` (dynamic, KIP-226)."""
        self._unclean_default = enabled

    def startup(self) -> None:
        """Initialise every partition's state from the context, then elect where needed.

        A partition with a state znode is OnlinePartition when its leader is live, else
        OfflinePartition; one without is NewPartition. Offline and new partitions are
        then moved online (Kafka's ``onControllerFailover``).
        """
        for tp in self._context.all_partitions():
            leader = self._context.partition_leader(tp)
            if leader is None:
                state = PartitionState.NEW_PARTITION
            elif self._context.is_replica_online(leader, tp):
                state = PartitionState.ONLINE_PARTITION
            else:
                state = PartitionState.OFFLINE_PARTITION
            self._context.partition_states[tp] = state
        self.trigger_online_partition_state_change()

    def shutdown(self) -> None:
        """Forget the partition states (resignation)."""
        self._context.partition_states.clear()

    def trigger_online_partition_state_change(self, topic: str | None = None) -> StateChangeResults:
        """Move every NewPartition and OfflinePartition (of ``topic``, or all) online.

        Topics queued for deletion are left alone; elections are clean unless the topic
        allows unclean ones.
        """
        partitions = {
            tp
            for tp in self._context.partitions_in_states(
                {PartitionState.NEW_PARTITION, PartitionState.OFFLINE_PARTITION}, topic
            )
            if not self._context.is_topic_queued_up_for_deletion(tp.topic)
        }
        return self.handle_state_changes(
            partitions, PartitionState.ONLINE_PARTITION, OfflinePartitionLeaderElection()
        )

    def handle_state_changes(
        self,
        partitions: Iterable[TopicPartition],
        target: PartitionState,
        strategy: LeaderElectionStrategy | None = None,
    ) -> StateChangeResults:
        """Move ``partitions`` to ``target`` and send the resulting requests.

        Args:
            partitions: the partitions.
            target: the state to enter; illegal transitions are logged and reported.
            strategy: the leader election for OnlinePartition from Offline/Online
                (default: clean offline election).

        Returns:
            per partition moved to OnlinePartition (or failing to): its new
            LeaderAndIsr or the error; empty for other targets.

        Raises:
            ControllerMovedError: a ZooKeeper write was fenced; this controller is stale.
        """
        ordered = sorted(set(partitions))
        if not ordered:
            return {}
        self._batch.new_batch()
        try:
            results = self._do_handle_state_changes(ordered, target, strategy)
            self._batch.send_requests_to_brokers(self._context.epoch)
            # One line per change, not per partition (each partition's is at DEBUG).
            failed = sum(1 for outcome in results.values() if isinstance(outcome, Exception))
            _state_change_log.info(
                "%d partition(s) of %d topic(s) -> %s%s, %d failed",
                len(ordered) - failed,
                len({tp.topic for tp in ordered}),
                target.value,
                "" if strategy is None else f" ({type(strategy).__name__})",
                failed,
            )
        except ControllerMovedError:
            self._batch.clear()
            raise
        except Exception as exc:
            _log.exception("error moving partitions to %s", target.value)
            self._batch.clear()
            return {tp: exc for tp in ordered}
        return results

    def _do_handle_state_changes(
        self,
        partitions: list[TopicPartition],
        target: PartitionState,
        strategy: LeaderElectionStrategy | None,
    ) -> StateChangeResults:
        states = self._context.partition_states
        results: StateChangeResults = {}
        valid: list[TopicPartition] = []
        for tp in partitions:
            current = states.setdefault(tp, PartitionState.NON_EXISTENT_PARTITION)
            if is_valid_transition(current, target):
                valid.append(tp)
            else:
                _state_change_log.error(
                    "illegal state transition of partition %s from %s to %s",
                    tp,
                    current.value,
                    target.value,
                )
                results[tp] = StateChangeFailedError(
                    f"partition {tp}: illegal transition from {current.value} to {target.value}"
                )
        if target is not PartitionState.ONLINE_PARTITION:
            for tp in valid:
                _state_change_log.debug("partition %s -> %s", tp, target.value)
                states[tp] = target
            return results
        new = [tp for tp in valid if states[tp] is PartitionState.NEW_PARTITION]
        to_elect = [tp for tp in valid if states[tp] is not PartitionState.NEW_PARTITION]
        if new:
            results.update(self._initialize_leader_and_isr(new))
        if to_elect:
            results.update(
                self._elect_leaders(to_elect, strategy or OfflinePartitionLeaderElection())
            )
        for tp, outcome in results.items():
            if isinstance(outcome, LeaderAndIsr):
                states[tp] = PartitionState.ONLINE_PARTITION
                _state_change_log.debug("partition %s -> OnlinePartition (%s)", tp, outcome)
            elif tp in valid:
                _state_change_log.error("partition %s stays %s: %s", tp, states[tp].value, outcome)
        return results

    def _initialize_leader_and_isr(self, partitions: list[TopicPartition]) -> StateChangeResults:
        """Create the state znodes of new partitions, in one batch, and tell their replicas."""
        results: StateChangeResults = {}
        to_create: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        live: dict[TopicPartition, list[int]] = {}
        for tp in partitions:
            replicas = [
                r
                for r in self._context.partition_replica_assignment(tp)
                if self._context.is_replica_online(r, tp)
            ]
            if not replicas:
                results[tp] = StateChangeFailedError(
                    f"no live replica of new partition {tp} (AR "
                    f"{list(self._context.partition_replica_assignment(tp))})"
                )
                continue
            live[tp] = replicas
            lai = LeaderAndIsr(replicas[0], INITIAL_LEADER_EPOCH, tuple(replicas))
            to_create[tp] = LeaderIsrAndControllerEpoch(lai, self._context.epoch)
        if not to_create:
            return results
        written = self._zk.create_partition_states(
            to_create, controller_epoch_zk_version=self._context.epoch_zk_version
        )
        for tp, lai in written.written.items():
            leadership = LeaderIsrAndControllerEpoch(lai, self._context.epoch)
            self._context.put_partition_leadership(tp, leadership)
            self._add_leader_and_isr(live[tp], tp, leadership, is_new=True)
            results[tp] = lai
        for tp in written.version_conflicts:
            results[tp] = StateChangeFailedError(
                f"state znode of new partition {tp} already exists"
            )
        for tp in written.missing:
            results[tp] = StateChangeFailedError(f"topic of new partition {tp} does not exist")
        return results

    def _add_leader_and_isr(
        self,
        recipients: Iterable[int],
        tp: TopicPartition,
        leadership: LeaderIsrAndControllerEpoch,
        *,
        is_new: bool,
    ) -> None:
        assignment = self._context.partition_full_replica_assignment(tp)
        if assignment is not None:
            self._batch.add_leader_and_isr_request_for_brokers(
                recipients, tp, leadership, assignment, is_new
            )

    def _elect_leaders(
        self, partitions: list[TopicPartition], strategy: LeaderElectionStrategy
    ) -> StateChangeResults:
        """Elect leaders, retrying the partitions whose state changed under the write.

        The first attempt starts from the states cached in the context (as this controller
        last wrote or read them, with their znode versions): each write is a
        compare-and-set on that version, so a state changed behind the cache (an ISR
        change by its leader) conflicts and is read from ZooKeeper and retried, as is a
        partition the cached state finds no leader for. Kafka reads every state first;
        this saves those reads, one ZooKeeper request per partition, when the cache is
        current (a controlled shutdown, a broker failure).
        """
        results: StateChangeResults = {}
        finished, remaining = self._try_elect_leaders(partitions, strategy, from_cache=True)
        results.update(finished)
        while remaining:
            finished, remaining = self._try_elect_leaders(remaining, strategy)
            results.update(finished)
        return results

    def _try_elect_leaders(
        self,
        partitions: list[TopicPartition],
        strategy: LeaderElectionStrategy,
        *,
        from_cache: bool = False,
    ) -> tuple[StateChangeResults, list[TopicPartition]]:
        """One attempt: read states, elect, write; returns (finished, partitions to retry).

        With ``from_cache`` the states come from the context; partitions without one, and
        those it elects no leader for, are returned to retry from ZooKeeper.
        """
        results: StateChangeResults = {}
        retry: list[TopicPartition] = []
        if from_cache:
            current = {
                tp: leadership
                for tp in partitions
                if (leadership := self._context.partition_leadership(tp)) is not None
            }
            retry = [tp for tp in partitions if tp not in current]
        else:
            current = self._zk.get_partition_states(partitions)
        readable: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        for tp in partitions:
            state = current.get(tp)
            if state is None and from_cache:
                continue
            if state is None:
                results[tp] = StateChangeFailedError(f"partition {tp} has no state znode")
            elif state.controller_epoch > self._context.epoch:
                results[tp] = StateChangeFailedError(
                    f"state of {tp} was written by controller epoch {state.controller_epoch}, "
                    f"newer than ours ({self._context.epoch}): this controller is stale"
                )
            else:
                readable[tp] = state
        unclean = self._unclean_allowed(readable, strategy)
        new_states: dict[TopicPartition, LeaderAndIsr] = {}
        recipients: dict[TopicPartition, list[int]] = {}
        for tp, state in readable.items():
            elected, to = _elect_with_strategy(
                self._context, tp, state.leader_and_isr, strategy, tp.topic in unclean
            )
            if elected is None and from_cache:
                retry.append(tp)  # confirm with the state in ZooKeeper
                continue
            if elected is None:
                results[tp] = StateChangeFailedError(
                    f"no eligible leader for {tp} ({type(strategy).__name__}, "
                    f"AR {list(self._context.partition_replica_assignment(tp))}, "
                    f"ISR {list(state.leader_and_isr.isr)})"
                )
                continue
            if elected.unclean:
                _state_change_log.warning(
                    "unclean leader election for %s: %s leads outside the ISR %s",
                    tp,
                    elected.leader,
                    list(state.leader_and_isr.isr),
                )
            new_states[tp] = state.leader_and_isr.with_new_leader(elected.leader, elected.isr)
            recipients[tp] = to
        if not new_states:
            return results, sorted(retry)
        written = self._zk.update_leader_and_isr(
            new_states,
            self._context.epoch,
            controller_epoch_zk_version=self._context.epoch_zk_version,
        )
        for tp, lai in written.written.items():
            leadership = LeaderIsrAndControllerEpoch(lai, self._context.epoch)
            self._context.put_partition_leadership(tp, leadership)
            self._add_leader_and_isr(recipients[tp], tp, leadership, is_new=False)
            results[tp] = lai
        for tp in written.missing:
            results[tp] = StateChangeFailedError(f"state znode of {tp} vanished")
        return results, sorted(written.version_conflicts | set(retry))

    def _unclean_allowed(
        self,
        states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch],
        strategy: LeaderElectionStrategy,
    ) -> set[str]:
        """Return the topics whose partitions may have unclean elections now.

        Only offline elections of partitions with no live ISR member need it; the topic
        configs are then read from ZooKeeper in one batch.
        """
        if not isinstance(strategy, OfflinePartitionLeaderElection):
            return set()
        topics = _topics_without_live_isr(self._context, states)
        if strategy.allow_unclean or not topics:
            return topics
        configs = self._zk.get_entity_configs("topics", topics)
        return _unclean_allowed_topics(topics, configs, self._unclean_default)


def _elect_with_strategy(
    context: ControllerContext,
    tp: TopicPartition,
    current: LeaderAndIsr,
    strategy: LeaderElectionStrategy,
    unclean: bool,
) -> tuple[LeaderElectionResult | None, list[int]]:
    """Elect a leader for ``tp`` with ``strategy`` (Kafka's ``doElectLeaderForPartitions``).

    Feeds the strategy's algorithm the partition's AR, its ISR read from ZooKeeper and
    the live brokers from the context. Brokers in controlled shutdown cannot lead; they
    still get the LeaderAndIsr of a controlled-shutdown election (to become followers).

    Args:
        context: AR and live brokers.
        tp: the partition.
        current: its LeaderAndIsr as read from ZooKeeper.
        strategy: the election.
        unclean: whether an offline election may pick a replica outside the ISR.

    Returns:
        (the election result or None when nobody may lead, the LeaderAndIsr recipients).
    """
    assignment = context.partition_full_replica_assignment(tp)
    replicas = () if assignment is None else assignment.replicas
    live = {b for b in context.live_broker_ids if context.is_replica_online(b, tp)}
    recipients = [r for r in replicas if r in live]
    result: LeaderElectionResult | None
    if isinstance(strategy, OfflinePartitionLeaderElection):
        result = leader_election.elect_leader_for_offline_partition(
            replicas, current.isr, live, unclean
        )
    elif isinstance(strategy, ReassignPartitionLeaderElection):
        target = () if assignment is None else assignment.target_replicas
        result = leader_election.elect_leader_for_reassignment(target, current.isr, live)
    elif isinstance(strategy, PreferredReplicaPartitionLeaderElection):
        result = leader_election.elect_preferred_leader(replicas, current.isr, live)
    else:
        all_live = {
            b
            for b in context.live_or_shutting_down_broker_ids
            if context.is_replica_online(b, tp, include_shutting_down=True)
        }
        result = leader_election.elect_leader_for_controlled_shutdown(
            replicas, current.isr, all_live, context.shutting_down_broker_ids
        )
        recipients = [r for r in replicas if r in all_live]
    return result, recipients


def _topics_without_live_isr(
    context: ControllerContext, states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch]
) -> set[str]:
    """Return the topics of the partitions whose ISR has no online member."""
    return {
        tp.topic
        for tp, state in states.items()
        if not any(context.is_replica_online(r, tp) for r in state.leader_and_isr.isr)
    }


def _unclean_allowed_topics(
    topics: set[str], topic_configs: Mapping[str, EntityConfig], broker_default: bool
) -> set[str]:
    """Return the ``topics`` whose ``unclean.leader.election.enable`` is true.

    Args:
        topics: candidate topics.
        topic_configs: topic -> its config overrides (``/config/topics/<topic>``).
        broker_default: the broker's ``unclean.leader.election.enable``.
    """
    allowed = set()
    for topic in topics:
        config = topic_configs.get(topic)
        override = None if config is None else config.config.get(UNCLEAN_LEADER_ELECTION_CONFIG)
        enabled = broker_default if override is None else override.strip().lower() == "true"
        if enabled:
            allowed.add(topic)
    return allowed
