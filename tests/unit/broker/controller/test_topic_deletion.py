from collections.abc import Iterable
from dataclasses import dataclass, field

from kpo_broker.controller.context import ControllerContext, PartitionAndReplica
from kpo_broker.controller.partition_state_machine import PartitionStateMachine
from kpo_broker.controller.replica_state_machine import ReplicaStateMachine
from kpo_broker.controller.states import PartitionState, ReplicaState
from kpo_broker.controller.topic_deletion import TopicDeletionManager
from kpo_kafka.topic_partition import TopicPartition

from .fakes import FakePartitionStates, FakeSender, context_with, new_batch

T0 = TopicPartition("t", 0)


@dataclass
class FakeDeletionZk(FakePartitionStates):
    deleted_topics: list[str] = field(default_factory=list)
    removed_markers: list[str] = field(default_factory=list)

    def remove_topic_deletion_markers(
        self, topics: Iterable[str], *, controller_epoch_zk_version: int
    ) -> None:
        self._fence(controller_epoch_zk_version)
        self.removed_markers += sorted(topics)

    def delete_topic_znodes(
        self, topics: Iterable[str], *, controller_epoch_zk_version: int
    ) -> None:
        self._fence(controller_epoch_zk_version)
        self.deleted_topics += sorted(topics)


def setup(
    live: list[int],
) -> tuple[ControllerContext, FakeDeletionZk, FakeSender, TopicDeletionManager, list[str]]:
    ctx = context_with(live, {T0: (1, 2)})
    zk = FakeDeletionZk()
    zk.set(T0, 1, (1, 2))
    ctx.put_partition_leadership(T0, zk.states[T0])
    ctx.partition_states[T0] = PartitionState.ONLINE_PARTITION
    for r in (1, 2):  # replicas of dead brokers went offline when their broker died
        online = r in live
        state = ReplicaState.ONLINE_REPLICA if online else ReplicaState.OFFLINE_REPLICA
        ctx.replica_states[PartitionAndReplica(T0, r)] = state
    sender = FakeSender()
    batch = new_batch(ctx, sender)
    deleted: list[str] = []
    manager = TopicDeletionManager(
        ctx,
        zk,
        PartitionStateMachine(ctx, zk, batch),
        ReplicaStateMachine(ctx, zk, batch),
        send_update_metadata=lambda brokers, parts: None,
        on_topic_deleted=deleted.append,
    )
    return ctx, zk, sender, manager, deleted


def deleting(sender: FakeSender, broker_id: int) -> bool:
    states = sender.partition_states("StopReplica", broker_id)
    return T0 in states and states[T0].delete_partition


def test_deletion_stops_replicas_then_removes_the_topic_once_all_confirmed() -> None:
    ctx, zk, sender, manager, deleted = setup([1, 2])
    manager.enqueue_topics_for_deletion(["t"])

    assert ctx.partition_states[T0] is PartitionState.NON_EXISTENT_PARTITION
    assert deleting(sender, 1) and deleting(sender, 2)
    assert ctx.replica_state(PartitionAndReplica(T0, 1)) is ReplicaState.REPLICA_DELETION_STARTED
    assert manager.is_topic_deletion_in_progress("t")

    manager.complete_replica_deletion([PartitionAndReplica(T0, 1)])
    assert zk.deleted_topics == []
    manager.complete_replica_deletion([PartitionAndReplica(T0, 2)])
    assert zk.deleted_topics == ["t"] and zk.removed_markers == ["t"]
    assert deleted == ["t"]
    assert "t" not in ctx.all_topics and ctx.replica_states == {}


def test_deletion_waits_for_a_dead_broker_and_resumes_when_it_returns() -> None:
    ctx, zk, sender, manager, _ = setup([1])
    manager.enqueue_topics_for_deletion(["t"])
    assert deleting(sender, 1)
    assert ctx.replica_state(PartitionAndReplica(T0, 2)) is ReplicaState.REPLICA_DELETION_INELIGIBLE
    assert "t" in ctx.topics_ineligible_for_deletion
    manager.complete_replica_deletion([PartitionAndReplica(T0, 1)])
    assert zk.deleted_topics == []

    ctx.add_live_brokers(context_with([2], {}).live_or_shutting_down_brokers)
    sender.sent.clear()
    manager.resume_deletion_for_topics(["t"])
    assert deleting(sender, 2)
    manager.complete_replica_deletion([PartitionAndReplica(T0, 2)])
    assert zk.deleted_topics == ["t"]


def test_failed_replica_deletion_is_retried_once_the_topic_is_resumed() -> None:
    ctx, zk, sender, manager, _ = setup([1, 2])
    manager.enqueue_topics_for_deletion(["t"])
    manager.fail_replica_deletion([PartitionAndReplica(T0, 2)])
    assert ctx.replica_state(PartitionAndReplica(T0, 2)) is ReplicaState.REPLICA_DELETION_INELIGIBLE
    manager.complete_replica_deletion([PartitionAndReplica(T0, 1)])
    # The failed replica is reset to OfflineReplica; the topic waits to be resumed.
    assert ctx.replica_state(PartitionAndReplica(T0, 2)) is ReplicaState.OFFLINE_REPLICA
    assert "t" in ctx.topics_ineligible_for_deletion

    sender.sent.clear()
    manager.resume_deletion_for_topics(["t"])
    assert deleting(sender, 2) and not deleting(sender, 1)
    manager.complete_replica_deletion([PartitionAndReplica(T0, 2)])
    assert zk.deleted_topics == ["t"]


def test_disabled_deletion_discards_the_markers() -> None:
    ctx, zk, sender, manager, _ = setup([1, 2])
    manager.delete_topic_enable = False
    manager.init(["t"], [])
    manager.enqueue_topics_for_deletion(["t"])
    assert zk.removed_markers == ["t"]
    assert not ctx.is_topic_queued_up_for_deletion("t")
    assert sender.sent == []
