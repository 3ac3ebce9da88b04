"""Value types: LeaderAndIsr transitions and the KIP-455 replica assignment."""

import pytest

from kpo_broker.zk.model import LeaderAndIsr, ReplicaAssignment
from kpo_kafka.topic_partition import TopicPartition


def test_new_leader_bumps_leader_epoch_only() -> None:
    state = LeaderAndIsr(1, 4, (1, 2, 3), partition_epoch=10)
    elected = state.with_new_leader(2, [2, 3])
    assert elected == LeaderAndIsr(2, 5, (2, 3), partition_epoch=10)


def test_isr_change_keeps_leader_epoch() -> None:
    state = LeaderAndIsr(1, 4, (1, 2, 3), partition_epoch=10)
    assert state.with_isr([1, 2]) == LeaderAndIsr(1, 4, (1, 2), 10)
    assert state.with_partition_epoch(11).partition_epoch == 11


def test_reassignment_full_replica_set_is_rar_plus_oar() -> None:
    assignment = ReplicaAssignment.from_original_and_target(original=[1, 2, 3], target=[3, 4, 5])
    assert assignment.replicas == (3, 4, 5, 1, 2)
    assert assignment.adding_replicas == (4, 5)
    assert assignment.removing_replicas == (1, 2)
    assert assignment.is_being_reassigned
    assert assignment.target_replicas == (3, 4, 5)
    # OAR keeps AR's order, as Kafka's ReplicaAssignment does.
    assert assignment.original_replicas == (3, 1, 2)


def test_assignment_without_reassignment() -> None:
    assignment = ReplicaAssignment((2, 0, 1))
    assert not assignment.is_being_reassigned
    assert assignment.target_replicas == assignment.original_replicas == (2, 0, 1)


def test_same_replicas_in_a_new_order_is_not_a_move() -> None:
    assignment = ReplicaAssignment.from_original_and_target([1, 2], [2, 1])
    assert assignment == ReplicaAssignment((2, 1))
    assert not assignment.is_being_reassigned


def test_changed_reassignment_starts_from_the_original_replicas() -> None:
    running = ReplicaAssignment.from_original_and_target([1, 2, 3], [4, 5, 6])
    changed = running.reassign_to([1, 7, 8])
    assert set(changed.original_replicas) == {1, 2, 3}
    assert changed.target_replicas == (1, 7, 8)
    assert changed.removing_replicas == (2, 3)


@pytest.mark.parametrize("tp", [TopicPartition("a", 0), TopicPartition("a-b", 12)])
def test_topic_partition_is_hashable_and_ordered(tp: TopicPartition) -> None:
    assert {tp: 1}[TopicPartition(tp.topic, tp.partition)] == 1
    assert sorted([TopicPartition("b", 0), TopicPartition("a", 1), TopicPartition("a", 0)]) == [
        TopicPartition("a", 0),
        TopicPartition("a", 1),
        TopicPartition("b", 0),
    ]
    assert str(tp) == f"{tp.topic}-{tp.partition}"
