"""How a partition's leader is chosen: the strategies and their pure algorithms.

The controller elects a leader when a partition goes online, loses its leader, finishes
a reassignment, moves back to its preferred replica, or when its leader's broker shuts
down in a controlled way. A *strategy* (Kafka's ``PartitionLeaderElectionStrategy``)
names which rule the partition state machine applies; each rule is a pure function
(Kafka's ``PartitionLeaderElectionAlgorithms``) that gets the partition's assigned
replicas (AR, preferred leader first), its ISR and the live brokers, and returns the new
leader and ISR, or None when no replica qualifies (the partition then stays or becomes
OfflinePartition).

The offline rule (Kafka's ``offlinePartitionLeaderElection``, as in Kafka's replication
design for a broker failure): prefer a live ISR member; with no live ISR member, any
live replica of AR may lead, which can lose committed messages (an *unclean* election,
allowed only by ``unclean.leader.election.enable``).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class OfflinePartitionLeaderElection:
    """Elect from the live ISR, else (when allowed) any live replica of AR.

    Kafka's ``OfflinePartitionLeaderElectionStrategy``.

    Attributes:
        allow_unclean: force unclean elections (ElectLeaders with type UNCLEAN); when
            False the broker's or topic's ``unclean.leader.election.enable`` decides.
    """

    allow_unclean: bool = False


@dataclass(frozen=True)
class ReassignPartitionLeaderElection:
    """Elect among a completed reassignment's target replicas (KIP-455).

    Kafka's ``ReassignPartitionLeaderElectionStrategy``.
    """


@dataclass(frozen=True)
class PreferredReplicaPartitionLeaderElection:
    """Move leadership back to the preferred replica (first of AR).

    Kafka's ``PreferredReplicaPartitionLeaderElectionStrategy``.
    """


@dataclass(frozen=True)
class ControlledShutdownPartitionLeaderElection:
    """Move leadership off brokers in controlled shutdown.

    Kafka's ``ControlledShutdownPartitionLeaderElectionStrategy``.
    """


#: The elections the partition state machine runs when it moves partitions online.
LeaderElectionStrategy = (
    OfflinePartitionLeaderElection
    | ReassignPartitionLeaderElection
    | PreferredReplicaPartitionLeaderElection
    | ControlledShutdownPartitionLeaderElection
)


@dataclass(frozen=True)
class LeaderElectionResult:
    """A leader election's outcome.

    Attributes:
        leader: the elected broker id.
        isr: the ISR to write with the new leader (leader included).
        unclean: True when the leader was not in the ISR (possible data loss).
    """

    leader: int
    isr: tuple[int, ...]
    unclean: bool = False


def _first_live(
    candidates: Sequence[int], live_brokers: Collection[int], among: Collection[int] | None = None
) -> int | None:
    """Return the first candidate that is live (and in ``among`` when given)."""
    return next(
        (r for r in candidates if r in live_brokers and (among is None or r in among)), None
    )


def elect_leader_for_offline_partition(
    assignment: Sequence[int],
    isr: Sequence[int],
    live_brokers: Collection[int],
    unclean_leader_election_enable: bool,
) -> LeaderElectionResult | None:
    """Elect a leader for a NewPartition or OfflinePartition (``offlinePartitionLeaderElection``).

    The leader is the first replica of AR that is live and in the ISR; the new ISR is
    the live part of the ISR. When no ISR member is live and
    ``unclean.leader.election.enable`` is true, the first live replica of AR leads
    alone (ISR = [leader]) and the election is unclean.

    Args:
        assignment: AR, preferred leader first.
        isr: the current ISR.
        live_brokers: ids of the live brokers.
        unclean_leader_election_enable: the topic's ``unclean.leader.election.enable``.

    Returns:
        the result, or None when no replica may lead.
    """
    leader = _first_live(assignment, live_brokers, isr)
    if leader is not None:
        return LeaderElectionResult(leader, tuple(r for r in isr if r in live_brokers))
    if not unclean_leader_election_enable:
        return None
    leader = _first_live(assignment, live_brokers)
    if leader is None:
        return None
    return LeaderElectionResult(leader, (leader,), unclean=True)


def elect_leader_for_reassignment(
    target_replicas: Sequence[int],
    isr: Sequence[int],
    live_brokers: Collection[int],
) -> LeaderElectionResult | None:
    """Elect a leader among a completed reassignment's target replicas (RAR).

    Kafka's ``reassignPartitionLeaderElection``, used by ``onPartitionReassignment`` when
    the leader is not in RAR or not live.

    The leader is the first replica of RAR that is live and in the ISR; the ISR is kept
    (replicas being removed leave it when they go offline).

    Returns:
        the result, or None when no target replica is live and in the ISR.
    """
    leader = _first_live(target_replicas, live_brokers, isr)
    return None if leader is None else LeaderElectionResult(leader, tuple(isr))


def elect_preferred_leader(
    assignment: Sequence[int],
    isr: Sequence[int],
    live_brokers: Collection[int],
) -> LeaderElectionResult | None:
    """Elect the preferred replica (the first of AR) if it is live and in the ISR.

    Used by the preferred replica election (``auto.leader.rebalance.enable`` and the
    ElectLeaders API); the ISR is kept.

    Returns:
        the result, or None when the preferred replica cannot lead now.
    """
    if not assignment:
        return None
    preferred = assignment[0]
    if preferred in live_brokers and preferred in isr:
        return LeaderElectionResult(preferred, tuple(isr))
    return None


def elect_leader_for_controlled_shutdown(
    assignment: Sequence[int],
    isr: Sequence[int],
    live_brokers: Collection[int],
    shutting_down_brokers: Collection[int],
) -> LeaderElectionResult | None:
    """Move leadership off brokers in controlled shutdown (``controlled.shutdown.enable``).

    The leader is the first replica of AR that is live, in the ISR and not shutting
    down; the new ISR leaves out the shutting-down brokers.

    Args:
        assignment: AR, preferred leader first.
        isr: the current ISR.
        live_brokers: ids of the live brokers, shutting-down ones included.
        shutting_down_brokers: ids of the brokers in controlled shutdown.

    Returns:
        the result, or None when no other ISR member is live.
    """
    leader = next(
        (
            r
            for r in assignment
            if r in live_brokers and r in isr and r not in shutting_down_brokers
        ),
        None,
    )
    if leader is None:
        return None
    return LeaderElectionResult(leader, tuple(r for r in isr if r not in shutting_down_brokers))
