"""Partition reassignment (KIP-455) with fake brokers and a real ZooKeeper.

As Kafka's KafkaController.onPartitionReassignment.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from kpo_broker.controller.controller import KafkaController
from kpo_broker.zk.model import ReplicaAssignment
from kpo_kafka.topic_partition import TopicPartition

from .conftest import Cluster
from .fakes import LEADER_AND_ISR, STOP_REPLICA, FakeBroker, wait_for

pytestmark = pytest.mark.integration

T0 = TopicPartition("t", 0)


def assignment(cluster: Cluster, tp: TopicPartition = T0) -> ReplicaAssignment:
    return cluster.admin.get_replica_assignments([tp.topic])[tp.topic].partitions[tp.partition]


def leader_and_isr(cluster: Cluster, tp: TopicPartition = T0) -> tuple[int, tuple[int, ...]]:
    lai = cluster.admin.get_partition_states([tp])[tp].leader_and_isr
    return lai.leader, lai.isr


def deleted_partitions(broker: FakeBroker) -> list[TopicPartition]:
    return [
        TopicPartition(topic.topic_name, p.partition_index)
        for r in broker.received(STOP_REPLICA)
        for topic in r.body.topic_states
        for p in topic.partition_states
        if p.delete_partition
    ]


def last_leader_and_isr(broker: FakeBroker, tp: TopicPartition = T0) -> object | None:
    found = None
    for r in broker.received(LEADER_AND_ISR):
        for topic in r.body.topic_states:
            for p in topic.partition_states:
                if TopicPartition(topic.topic_name, p.partition_index) == tp:
                    found = p
    return found


def join_isr(cluster: Cluster, isr: Sequence[int], tp: TopicPartition = T0) -> None:
    """Write ``isr`` as the partition leader would (compare-and-set; retried on conflicts)."""

    def attempt() -> bool:
        state = cluster.admin.get_partition_states([tp])[tp]
        lai = state.leader_and_isr
        return (
            cluster.admin.update_isr(
                tp, lai.with_isr(tuple(isr)), state.controller_epoch, lai.partition_epoch
            )
            is not None
        )

    wait_for(attempt, what=f"ISR {list(isr)} written")


def start(cluster: Cluster) -> tuple[KafkaController, dict[int, FakeBroker]]:
    b1, controller = cluster.node(1)
    brokers = {1: b1, **{i: cluster.broker(i) for i in (2, 3, 4)}}
    wait_for(lambda: controller.is_active, what="controller")
    wait_for(lambda: len(controller.context.live_broker_ids) == 4, what="brokers")
    cluster.admin.create_topic("t", {0: [1, 2]}, {})
    wait_for(lambda: bool(cluster.admin.get_partition_states([T0])), what="t-0")
    return controller, brokers


def alter(
    controller: KafkaController, reassignments: dict[TopicPartition, list[int] | None]
) -> dict[TopicPartition, tuple[int, str | None]]:
    return controller.alter_partition_reassignments(reassignments).result(10)


def test_reassignment_adds_targets_then_completes_when_they_join_the_isr(cluster: Cluster) -> None:
    controller, brokers = start(cluster)
    epoch_before = cluster.admin.get_partition_states([T0])[T0].leader_and_isr.leader_epoch

    assert alter(controller, {T0: [3, 4]}) == {T0: (0, None)}

    assert assignment(cluster) == ReplicaAssignment((3, 4, 1, 2), (3, 4), (1, 2))
    assert controller.list_partition_reassignments(None).result(10) == {
        T0: ReplicaAssignment((3, 4, 1, 2), (3, 4), (1, 2))
    }
    for broker_id in (3, 4):
        wait_for(lambda b=brokers[broker_id]: last_leader_and_isr(b) is not None, what="LAI")
        state = last_leader_and_isr(brokers[broker_id])
        assert state.is_new
        assert (state.replicas, state.adding_replicas, state.removing_replicas) == (
            [3, 4, 1, 2],
            [3, 4],
            [1, 2],
        )
        assert state.leader == 1 and state.leader_epoch == epoch_before + 1
    assert last_leader_and_isr(brokers[2]).leader_epoch == epoch_before + 1
    assert not deleted_partitions(brokers[1])

    join_isr(cluster, [1, 2, 3])  # not all of RAR yet: nothing completes
    assert assignment(cluster).is_being_reassigned
    join_isr(cluster, [1, 2, 3, 4])

    wait_for(lambda: assignment(cluster) == ReplicaAssignment((3, 4)), what="AR = RAR")
    leader, isr = leader_and_isr(cluster)
    assert leader in (3, 4)
    assert sorted(isr) == [3, 4]
    for broker_id in (1, 2):
        wait_for(lambda b=brokers[broker_id]: deleted_partitions(b) == [T0], what="deleted")
    assert not deleted_partitions(brokers[3])
    assert controller.list_partition_reassignments(None).result(10) == {}
    assert controller.list_partition_reassignments([T0]).result(10) == {}


def test_cancellation_reverts_to_the_original_replicas(cluster: Cluster) -> None:
    controller, brokers = start(cluster)
    assert alter(controller, {T0: [2, 3]}) == {T0: (0, None)}
    assert assignment(cluster) == ReplicaAssignment((2, 3, 1), (3,), (1,))

    assert alter(controller, {T0: None}) == {T0: (0, None)}

    # OAR is AR minus the adding replicas, in AR's order (as in Kafka): the target's
    # replicas come first in AR, so the original order is not recoverable from ZooKeeper.
    assert assignment(cluster) == ReplicaAssignment((2, 1))
    leader, isr = leader_and_isr(cluster)
    assert leader == 1
    assert sorted(isr) == [1, 2]
    wait_for(lambda: deleted_partitions(brokers[3]) == [T0], what="added replica deleted")
    assert not deleted_partitions(brokers[1]) and not deleted_partitions(brokers[2])
    assert controller.list_partition_reassignments(None).result(10) == {}


def test_second_submission_changes_the_target_from_the_original_replicas(
    cluster: Cluster,
) -> None:
    controller, brokers = start(cluster)
    assert alter(controller, {T0: [3, 4]}) == {T0: (0, None)}

    assert alter(controller, {T0: [1, 3]}) == {T0: (0, None)}

    assert assignment(cluster) == ReplicaAssignment((1, 3, 2), (3,), (2,))
    wait_for(lambda: deleted_partitions(brokers[4]) == [T0], what="replica 4 deleted")
    assert not deleted_partitions(brokers[3])
    join_isr(cluster, [1, 2, 3])
    wait_for(lambda: assignment(cluster) == ReplicaAssignment((1, 3)), what="AR = RAR")
    assert leader_and_isr(cluster) == (1, (1, 3))


def test_invalid_requests_get_per_partition_errors_and_change_nothing(cluster: Cluster) -> None:
    controller, _ = start(cluster)
    results = alter(
        controller,
        {
            TopicPartition("t", 7): [1, 2],
            TopicPartition("missing", 0): [1, 2],
            T0: [],
        },
    )
    assert results[TopicPartition("t", 7)][0] == 3
    assert results[TopicPartition("missing", 0)][0] == 3
    assert results[T0][0] == 39
    assert alter(controller, {T0: [3, 3]})[T0][0] == 39
    assert alter(controller, {T0: [1, 9]})[T0][0] == 39
    assert alter(controller, {T0: None})[T0][0] == 85
    assert assignment(cluster) == ReplicaAssignment((1, 2))
    assert controller.list_partition_reassignments(None).result(10) == {}


def test_new_controller_resumes_a_reassignment_from_zookeeper(cluster: Cluster) -> None:
    b1, first = cluster.node(1)
    _, second = cluster.node(5)
    brokers = {i: cluster.broker(i) for i in (2, 3, 4)}
    wait_for(lambda: first.is_active, what="controller 1")
    wait_for(lambda: len(first.context.live_broker_ids) == 5, what="brokers")
    cluster.admin.create_topic("t", {0: [2, 3]}, {})
    wait_for(lambda: bool(cluster.admin.get_partition_states([T0])), what="t-0")
    assert alter(first, {T0: [3, 4]}) == {T0: (0, None)}

    first.shutdown()
    b1.kill_session()
    wait_for(lambda: second.is_active, what="controller 5")
    assert second.list_partition_reassignments(None).result(10) == {
        T0: ReplicaAssignment((3, 4, 2), (4,), (2,))
    }
    wait_for(
        lambda: any(
            r.body.controller_id == 5
            for r in brokers[4].received(LEADER_AND_ISR)
            if r.body.topic_states
        ),
        what="LeaderAndIsr from the new controller",
    )

    join_isr(cluster, [2, 3, 4])

    wait_for(lambda: assignment(cluster) == ReplicaAssignment((3, 4)), what="AR = RAR")
    assert leader_and_isr(cluster)[0] in (3, 4)
    wait_for(lambda: deleted_partitions(brokers[2]) == [T0], what="replica 2 deleted")


def test_legacy_znode_reassignment_completes_and_the_znode_is_deleted(cluster: Cluster) -> None:
    controller, brokers = start(cluster)
    cluster.admin.create_partition_reassignment({T0: [2, 3]})

    wait_for(lambda: assignment(cluster).is_being_reassigned, what="reassignment started")
    assert assignment(cluster) == ReplicaAssignment((2, 3, 1), (3,), (1,))
    assert cluster.admin.get_partition_reassignment() == {T0: (2, 3)}

    join_isr(cluster, [1, 2, 3])

    wait_for(lambda: not cluster.admin.get_partition_reassignment(), what="znode deleted")
    assert assignment(cluster) == ReplicaAssignment((2, 3))
    assert leader_and_isr(cluster)[0] == 2
    wait_for(lambda: deleted_partitions(brokers[1]) == [T0], what="replica 1 deleted")
    assert controller.list_partition_reassignments(None).result(10) == {}


def test_api_request_takes_over_a_partition_listed_in_the_znode(cluster: Cluster) -> None:
    controller, _ = start(cluster)
    cluster.admin.create_topic("u", {0: [1, 2]}, {})
    u0 = TopicPartition("u", 0)
    wait_for(lambda: bool(cluster.admin.get_partition_states([u0])), what="u-0")
    cluster.admin.create_partition_reassignment({T0: [2, 3], u0: [2, 4]})
    wait_for(lambda: assignment(cluster, u0).is_being_reassigned, what="znode reassignments")

    assert alter(controller, {T0: [1, 4]}) == {T0: (0, None)}

    assert cluster.admin.get_partition_reassignment() == {u0: (2, 4)}
    assert assignment(cluster) == ReplicaAssignment((1, 4, 2), (4,), (2,))
