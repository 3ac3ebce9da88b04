"""Leader election strategies of the partition state machine, applied to the context.

Each strategy names one of the pure elections of :mod:`kpo_broker.controller.election`
(Kafka's ``PartitionLeaderElectionStrategy``); :func:`elect_with_strategy` feeds it the
partition's AR, its ISR read from ZooKeeper and the live brokers from the context, and
says which replicas must get the resulting LeaderAndIsr. :func:`unclean_allowed_topics`
decides where an offline election may go outside the ISR
(``unclean.leader.election.enable``, broker default overridden per topic).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kpo_broker.controller import election
from kpo_broker.controller.context import ControllerContext
from kpo_broker.zk.configs import EntityConfig
from kpo_broker.zk.model import LeaderAndIsr, LeaderIsrAndControllerEpoch, TopicPartition

#: Topic config overriding ``unclean.leader.election.enable``.
UNCLEAN_LEADER_ELECTION_CONFIG = "unclean.leader.election.enable"


@dataclass(frozen=True)
class OfflinePartitionLeaderElection:
    """Elect from the live ISR, else (when allowed) any live replica (seed 001 §A).

    Attributes:
        allow_unclean: force unclean elections (ElectLeaders with type UNCLEAN); when
            False the broker's or topic's ``unclean.leader.election.enable`` decides.
    """

    allow_unclean: bool = False


@dataclass(frozen=True)
class ReassignPartitionLeaderElection:
    """Elect among a completed reassignment's target replicas (seed 000 §4.2 step 7)."""


@dataclass(frozen=True)
class PreferredReplicaPartitionLeaderElection:
    """Move leadership back to the preferred replica (first of AR)."""


@dataclass(frozen=True)
class ControlledShutdownPartitionLeaderElection:
    """Move leadership off brokers in controlled shutdown."""


LeaderElectionStrategy = (
    OfflinePartitionLeaderElection
    | ReassignPartitionLeaderElection
    | PreferredReplicaPartitionLeaderElection
    | ControlledShutdownPartitionLeaderElection
)


def elect_with_strategy(
    context: ControllerContext,
    tp: TopicPartition,
    current: LeaderAndIsr,
    strategy: LeaderElectionStrategy,
    unclean: bool,
) -> tuple[election.LeaderElectionResult | None, list[int]]:
    """Elect a leader for ``tp`` with ``strategy``.

    Brokers in controlled shutdown cannot lead; they still get the LeaderAndIsr of a
    controlled-shutdown election (to become followers).

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
    live = context.live_broker_ids
    recipients = [r for r in replicas if r in live]
    if isinstance(strategy, OfflinePartitionLeaderElection):
        result = election.elect_leader_for_offline_partition(replicas, current.isr, live, unclean)
    elif isinstance(strategy, ReassignPartitionLeaderElection):
        target = () if assignment is None else assignment.target_replicas
        result = election.elect_leader_for_reassignment(target, current.isr, live)
    elif isinstance(strategy, PreferredReplicaPartitionLeaderElection):
        result = election.elect_preferred_leader(replicas, current.isr, live)
    else:
        all_live = context.live_or_shutting_down_broker_ids
        result = election.elect_leader_for_controlled_shutdown(
            replicas, current.isr, all_live, context.shutting_down_broker_ids
        )
        recipients = [r for r in replicas if r in all_live]
    return result, recipients


def topics_without_live_isr(
    context: ControllerContext, states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch]
) -> set[str]:
    """Return the topics of the partitions whose ISR has no live member."""
    live = context.live_broker_ids
    return {
        tp.topic
        for tp, state in states.items()
        if not any(r in live for r in state.leader_and_isr.isr)
    }


def unclean_allowed_topics(
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
