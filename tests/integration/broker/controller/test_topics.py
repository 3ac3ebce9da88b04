"""Topic creation, partition additions, topic deletion and ISR change notifications."""

from __future__ import annotations

import pytest

from kpo_broker.zk.model import LeaderAndIsr, ReplicaAssignment
from kpo_kafka.topic_partition import TopicPartition

from .conftest import Cluster
from .fakes import LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA, FakeBroker, wait_for

pytestmark = pytest.mark.integration

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def leader_and_isr_states(broker: FakeBroker) -> dict[TopicPartition, object]:
    """Partition -> last LeaderAndIsr partition state received by ``broker``."""
    states: dict[TopicPartition, object] = {}
    for request in broker.received(LEADER_AND_ISR):
        for topic in request.body.topic_states:
            for p in topic.partition_states:
                states[TopicPartition(topic.topic_name, p.partition_index)] = p
    return states


def metadata_partitions(broker: FakeBroker) -> dict[TopicPartition, object]:
    """Partition -> last UpdateMetadata partition state received by ``broker``."""
    states: dict[TopicPartition, object] = {}
    for request in broker.received(UPDATE_METADATA):
        for topic in request.body.topic_states:
            for p in topic.partition_states:
                states[TopicPartition(topic.topic_name, p.partition_index)] = p
    return states


def start(cluster: Cluster) -> tuple[FakeBroker, FakeBroker, FakeBroker]:
    b1, controller = cluster.node(1)
    b2, b3 = cluster.broker(2), cluster.broker(3)
    wait_for(lambda: controller.is_active, what="controller")
    return b1, b2, b3


def test_new_topic_gets_partition_states_and_leader_and_isr_to_its_replicas(
    cluster: Cluster,
) -> None:
    b1, b2, b3 = start(cluster)
    cluster.admin.create_topic("t", {0: [1, 2], 1: [2, 3]}, {})

    wait_for(lambda: len(cluster.admin.get_partition_states([T0, T1])) == 2, what="states")
    states = cluster.admin.get_partition_states([T0, T1])
    assert states[T0].leader_and_isr == LeaderAndIsr(1, 0, (1, 2), 0)
    assert states[T1].leader_and_isr == LeaderAndIsr(2, 0, (2, 3), 0)
    assert states[T0].controller_epoch == states[T1].controller_epoch == 1

    wait_for(lambda: set(leader_and_isr_states(b2)) == {T0, T1}, what="LeaderAndIsr to 2")
    wait_for(lambda: set(leader_and_isr_states(b1)) == {T0}, what="LeaderAndIsr to 1")
    wait_for(lambda: set(leader_and_isr_states(b3)) == {T1}, what="LeaderAndIsr to 3")
    state = leader_and_isr_states(b3)[T1]
    assert (state.leader, state.leader_epoch, state.isr, state.replicas, state.is_new) == (
        2,
        0,
        [2, 3],
        [2, 3],
        True,
    )
    request = b3.received(LEADER_AND_ISR)[0].body
    assert (request.controller_id, request.controller_epoch, request.broker_epoch) == (
        1,
        1,
        b3.epoch,
    )
    for broker in (b1, b2, b3):
        wait_for(lambda b=broker: {T0, T1} <= set(metadata_partitions(b)), what="metadata")


def test_partitions_added_to_a_topic_are_created(cluster: Cluster) -> None:
    _, b2, _ = start(cluster)
    cluster.admin.create_topic("t", {0: [1, 2]}, {})
    wait_for(lambda: bool(cluster.admin.get_partition_states([T0])), what="t-0")

    current = cluster.admin.get_replica_assignments(["t"])["t"]
    assignment = {**current.partitions, 1: ReplicaAssignment((2, 3))}
    assert (
        cluster.admin.set_replica_assignment(
            "t", assignment, current.zk_version, topic_id=current.topic_id
        )
        is not None
    )

    wait_for(lambda: bool(cluster.admin.get_partition_states([T1])), what="t-1")
    assert cluster.admin.get_partition_states([T1])[T1].leader_and_isr.leader == 2
    wait_for(lambda: T1 in leader_and_isr_states(b2), what="LeaderAndIsr of t-1")


def test_topic_deletion_stops_and_deletes_replicas_then_removes_the_znodes(
    cluster: Cluster,
) -> None:
    b1, b2, _ = start(cluster)
    cluster.admin.create_topic("t", {0: [1, 2]}, {})
    wait_for(lambda: bool(cluster.admin.get_partition_states([T0])), what="t-0")

    cluster.admin.mark_topics_for_deletion(["t"])

    wait_for(lambda: "t" not in cluster.admin.get_all_topics(), what="topic znode removed")
    wait_for(lambda: not cluster.admin.get_topics_marked_for_deletion(), what="marker removed")
    assert cluster.admin.get_entity_config("topics", "t").zk_version is None
    for broker in (b1, b2):
        deletes = [
            (topic.topic_name, p.partition_index, p.leader_epoch)
            for r in broker.received(STOP_REPLICA)
            for topic in r.body.topic_states
            for p in topic.partition_states
            if p.delete_partition
        ]
        assert deletes == [("t", 0, -2)]
    # Brokers were told the partition is being deleted (leader -2) before the StopReplica.
    assert metadata_partitions(b2)[T0].leader == -2


def test_deletion_waits_for_replicas_on_dead_brokers(cluster: Cluster) -> None:
    _, b2, b3 = start(cluster)
    cluster.admin.create_topic("t", {0: [2, 3]}, {})
    wait_for(lambda: bool(cluster.admin.get_partition_states([T0])), what="t-0")
    b3.kill_session()
    wait_for(
        lambda: cluster.admin.get_partition_states([T0])[T0].leader_and_isr.isr == (2,),
        what="ISR shrink",
    )

    cluster.admin.mark_topics_for_deletion(["t"])
    wait_for(lambda: any(r for r in b2.received(STOP_REPLICA)), what="StopReplica to 2")
    assert "t" in cluster.admin.get_all_topics()  # waits for broker 3

    b3.register()
    wait_for(lambda: "t" not in cluster.admin.get_all_topics(), what="deletion completes")


def test_isr_change_notification_is_propagated_and_deleted(cluster: Cluster) -> None:
    _, _, b3 = start(cluster)
    cluster.admin.create_topic("t", {0: [2, 3]}, {})
    wait_for(lambda: bool(cluster.admin.get_partition_states([T0])), what="t-0")
    state = cluster.admin.get_partition_states([T0])[T0]
    lai = state.leader_and_isr

    # The leader (broker 2) shrinks the ISR and announces it, as a real leader does.
    shrunk = LeaderAndIsr(lai.leader, lai.leader_epoch, (2,))
    assert cluster.admin.update_isr(T0, shrunk, state.controller_epoch, lai.partition_epoch)
    cluster.admin.propagate_isr_change([T0])

    wait_for(lambda: metadata_partitions(b3)[T0].isr == [2], what="UpdateMetadata with new ISR")
    wait_for(lambda: not cluster.admin.get_isr_change_notifications(), what="notification gone")
