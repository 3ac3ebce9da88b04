from kpo_broker.controller.context import ControllerContext, PartitionAndReplica
from kpo_broker.controller.states import PartitionState, ReplicaState
from kpo_broker.zk.model import LeaderAndIsr, LeaderIsrAndControllerEpoch, ReplicaAssignment
from kpo_kafka.topic_partition import TopicPartition

from .fakes import broker, context_with

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def leadership(leader: int, isr: tuple[int, ...]) -> LeaderIsrAndControllerEpoch:
    return LeaderIsrAndControllerEpoch(LeaderAndIsr(leader, 0, isr), 1)


def test_live_and_shutting_down_brokers() -> None:
    ctx = context_with([1, 2, 3], {})
    ctx.shutting_down_broker_ids.add(2)
    assert ctx.live_broker_ids == {1, 3}
    assert ctx.live_or_shutting_down_broker_ids == {1, 2, 3}
    assert ctx.is_replica_online(1, A0)
    assert not ctx.is_replica_online(2, A0)
    assert ctx.is_replica_online(2, A0, include_shutting_down=True)
    assert [b.id for b in ctx.live_or_shutting_down_brokers] == [1, 2, 3]

    ctx.remove_live_brokers([2])
    assert ctx.shutting_down_broker_ids == set()
    assert ctx.broker_epoch(2) is None
    ctx.add_live_brokers([broker(2, epoch=300)])
    assert ctx.live_broker_epochs == {1: 100, 2: 300, 3: 100}


def test_assignment_queries() -> None:
    ctx = context_with([1, 2], {A0: (1, 2), A1: (2, 3), B0: (3,)})
    assert ctx.all_partitions() == {A0, A1, B0}
    assert ctx.partitions_for_topic("a") == {A0, A1}
    assert ctx.partitions_on_broker(2) == {A0, A1}
    assert ctx.partition_replica_assignment(TopicPartition("zz", 0)) == ()
    assert ctx.replicas_on_brokers({3}) == {PartitionAndReplica(A1, 3), PartitionAndReplica(B0, 3)}
    assert ctx.replicas_for_topic("b") == {PartitionAndReplica(B0, 3)}
    online, offline = ctx.online_and_offline_replicas()
    assert offline == {PartitionAndReplica(A1, 3), PartitionAndReplica(B0, 3)}
    assert len(online) == 3


def test_reassignment_ready_assignment_is_kept_whole() -> None:
    ctx = ControllerContext()
    moving = ReplicaAssignment.from_original_and_target([1, 2], [2, 3])
    ctx.update_partition_full_replica_assignment(A0, moving)
    assert ctx.partition_full_replica_assignment(A0) == moving
    assert ctx.partition_replica_assignment(A0) == (2, 3, 1)


def test_leadership_and_states() -> None:
    ctx = context_with([1, 2], {A0: (1, 2), A1: (2, 1)})
    ctx.put_partition_leadership(A0, leadership(1, (1, 2)))
    ctx.put_partition_leadership(A1, leadership(1, (1,)))
    assert ctx.partition_leader(A0) == 1
    assert ctx.partition_leader(B0) is None
    assert ctx.partitions_led_by(1) == {A0, A1}

    ctx.partition_states.update(
        {A0: PartitionState.ONLINE_PARTITION, A1: PartitionState.OFFLINE_PARTITION}
    )
    assert ctx.partitions_in_states({PartitionState.OFFLINE_PARTITION}) == {A1}
    assert ctx.partitions_in_states({PartitionState.ONLINE_PARTITION}, topic="b") == set()

    r1, r2 = PartitionAndReplica(A0, 1), PartitionAndReplica(A0, 2)
    ctx.replica_states.update(
        {r1: ReplicaState.REPLICA_DELETION_STARTED, r2: ReplicaState.REPLICA_DELETION_SUCCESSFUL}
    )
    assert ctx.replicas_in_state("a", ReplicaState.REPLICA_DELETION_STARTED) == {r1}
    assert ctx.is_any_replica_in_state("a", ReplicaState.REPLICA_DELETION_SUCCESSFUL)
    assert not ctx.are_all_replicas_in_state("a", ReplicaState.REPLICA_DELETION_SUCCESSFUL)


def test_topic_deletion_marks_and_removal() -> None:
    ctx = context_with([1], {A0: (1,), B0: (1,)})
    ctx.put_partition_leadership(A0, leadership(1, (1,)))
    ctx.partition_states[A0] = PartitionState.ONLINE_PARTITION
    ctx.replica_states[PartitionAndReplica(A0, 1)] = ReplicaState.ONLINE_REPLICA
    ctx.queue_topic_deletion(["a"])
    ctx.begin_topic_deletion(["a"])
    assert ctx.is_topic_queued_up_for_deletion("a")
    assert ctx.is_topic_deletion_in_progress("a")
    assert ctx.is_topic_eligible_for_deletion("a")
    ctx.topics_ineligible_for_deletion.add("a")
    assert not ctx.is_topic_eligible_for_deletion("a")

    ctx.remove_topic("a")
    assert ctx.all_topics == {"b"}
    assert ctx.all_partitions() == {B0}
    assert ctx.partition_leadership(A0) is None
    assert ctx.partition_states == {}
    assert ctx.replica_states == {}
    assert not ctx.is_topic_queued_up_for_deletion("a")
    assert ctx.topics_ineligible_for_deletion == set()


def test_reset_keeps_only_the_epoch() -> None:
    ctx = context_with([1], {A0: (1,)}, epoch=7)
    ctx.epoch_zk_version = 9
    ctx.reset()
    assert (ctx.epoch, ctx.epoch_zk_version) == (7, 9)
    assert ctx.all_partitions() == set()
    assert ctx.live_or_shutting_down_broker_ids == set()
