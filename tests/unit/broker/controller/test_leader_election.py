"""Leader election algorithms, with the broker-failure examples of Kafka's replication design."""

from kpo_broker.controller.leader_election import (
    LeaderElectionResult,
    elect_leader_for_controlled_shutdown,
    elect_leader_for_offline_partition,
    elect_leader_for_reassignment,
    elect_preferred_leader,
)

# --- offline partition (offlinePartitionLeaderElection) -------------------------------------


def test_broker1_failure_moves_leadership_to_replica2() -> None:
    # Partition1: replicas 1,2,3, leader 1, ISR [1,2,3]; broker 1 dies.
    result = elect_leader_for_offline_partition([1, 2, 3], [1, 2, 3], {2, 3}, False)
    assert result == LeaderElectionResult(leader=2, isr=(2, 3), unclean=False)


def test_live_isr_member_leads_and_isr_keeps_live_members() -> None:
    # AR=[1,2,3,4,5], ISR=[1,2,3], live brokers [2,3,5]: leader 2, ISR [2,3].
    result = elect_leader_for_offline_partition([1, 2, 3, 4, 5], [1, 2, 3], {2, 3, 5}, True)
    assert result == LeaderElectionResult(2, (2, 3), unclean=False)


def test_no_live_isr_member_falls_back_to_live_replica_when_unclean_allowed() -> None:
    # AR=[1,2,3,4,5], ISR=[1,2,3], live brokers [4,6,7]: leader 4, ISR [4] (may lose data).
    result = elect_leader_for_offline_partition([1, 2, 3, 4, 5], [1, 2, 3], {4, 6, 7}, True)
    assert result == LeaderElectionResult(4, (4,), unclean=True)


def test_no_live_isr_member_and_unclean_disabled_elects_nobody() -> None:
    assert elect_leader_for_offline_partition([1, 2, 3, 4, 5], [1, 2, 3], {4, 6, 7}, False) is None


def test_no_live_replica_elects_nobody_even_when_unclean_allowed() -> None:
    assert elect_leader_for_offline_partition([1, 2], [1, 2], {3}, True) is None


def test_offline_election_follows_assignment_order_not_isr_order() -> None:
    result = elect_leader_for_offline_partition([3, 1, 2], [1, 2, 3], {1, 2, 3}, False)
    assert result is not None
    assert result.leader == 3
    assert result.isr == (1, 2, 3)


# --- reassignment ---------------------------------------------------------------------


def test_reassignment_elects_first_live_in_sync_target_replica() -> None:
    result = elect_leader_for_reassignment([4, 5, 6], [1, 4, 5, 6], {1, 5, 6})
    assert result == LeaderElectionResult(5, (1, 4, 5, 6))


def test_reassignment_with_no_target_in_isr_elects_nobody() -> None:
    assert elect_leader_for_reassignment([4, 5], [1, 2], {1, 2, 4, 5}) is None


# --- preferred replica --------------------------------------------------------------------


def test_preferred_replica_leads_when_live_and_in_sync() -> None:
    assert elect_preferred_leader([2, 1, 3], [1, 3, 2], {1, 2, 3}) == LeaderElectionResult(
        2, (1, 3, 2)
    )


def test_preferred_replica_out_of_sync_or_dead_cannot_lead() -> None:
    assert elect_preferred_leader([2, 1, 3], [1, 3], {1, 2, 3}) is None
    assert elect_preferred_leader([2, 1, 3], [1, 2, 3], {1, 3}) is None
    assert elect_preferred_leader([], [1], {1}) is None


# --- controlled shutdown ------------------------------------------------------------------


def test_controlled_shutdown_moves_leadership_and_shrinks_isr() -> None:
    result = elect_leader_for_controlled_shutdown([1, 2, 3], [1, 2, 3], {1, 2, 3}, {1})
    assert result == LeaderElectionResult(2, (2, 3))


def test_controlled_shutdown_skips_dead_and_out_of_sync_replicas() -> None:
    result = elect_leader_for_controlled_shutdown([1, 2, 3, 4], [1, 3, 4], {1, 3, 4}, {1, 3})
    assert result == LeaderElectionResult(4, (4,))


def test_controlled_shutdown_with_no_other_isr_member_elects_nobody() -> None:
    assert elect_leader_for_controlled_shutdown([1, 2], [1], {1, 2}, {1}) is None
