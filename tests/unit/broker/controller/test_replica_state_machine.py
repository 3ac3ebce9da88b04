import pytest

from kpo_broker.controller.context import ControllerContext, PartitionAndReplica
from kpo_broker.controller.replica_state_machine import ReplicaStateMachine
from kpo_broker.controller.states import REPLICA_VALID_PREVIOUS_STATES, ReplicaState
from kpo_broker.zk.model import LeaderAndIsr, LeaderIsrAndControllerEpoch, ReplicaAssignment
from kpo_kafka.topic_partition import TopicPartition

from .fakes import FakePartitionStates, FakeSender, context_with, new_batch

R = ReplicaState
TP = TopicPartition("t", 0)


def machine(
    ctx: ControllerContext, zk: FakePartitionStates
) -> tuple[ReplicaStateMachine, FakeSender]:
    sender = FakeSender()
    return ReplicaStateMachine(ctx, zk, new_batch(ctx, sender)), sender


def with_leader(
    live: list[int], replicas: tuple[int, ...], leader: int, isr: tuple[int, ...]
) -> tuple[ControllerContext, FakePartitionStates]:
    ctx = context_with(live, {TP: replicas})
    zk = FakePartitionStates()
    zk.set(TP, leader, isr)
    ctx.put_partition_leadership(TP, zk.states[TP])
    return ctx, zk


@pytest.mark.parametrize("current", list(R))
@pytest.mark.parametrize(
    "target", [R.REPLICA_DELETION_SUCCESSFUL, R.REPLICA_DELETION_INELIGIBLE, R.NEW_REPLICA]
)
def test_only_transitions_of_the_table_are_applied(
    current: ReplicaState, target: ReplicaState
) -> None:
    ctx, zk = with_leader([1, 2], (1, 2), leader=1, isr=(1, 2))
    replica = PartitionAndReplica(TP, 2)
    ctx.replica_states[replica] = current
    rsm, _ = machine(ctx, zk)
    rsm.handle_state_changes([replica], target)
    allowed = current in REPLICA_VALID_PREVIOUS_STATES[target]
    assert ctx.replica_states[replica] == (target if allowed else current)


def test_new_replica_gets_leader_and_isr_marked_new() -> None:
    ctx, zk = with_leader([1, 2], (1, 2), leader=1, isr=(1, 2))
    rsm, sender = machine(ctx, zk)
    rsm.handle_state_changes([PartitionAndReplica(TP, 2)], R.NEW_REPLICA)
    state = sender.partition_states("LeaderAndIsr", 2)[TP]
    assert (state.leader, state.is_new) == (1, True)
    # The leader itself cannot become a NewReplica.
    rsm.handle_state_changes([PartitionAndReplica(TP, 1)], R.NEW_REPLICA)
    assert PartitionAndReplica(TP, 1) not in ctx.replica_states or (
        ctx.replica_states[PartitionAndReplica(TP, 1)] is R.NON_EXISTENT_REPLICA
    )


def test_online_from_offline_sends_leader_and_isr_and_from_new_joins_ar() -> None:
    ctx, zk = with_leader([1, 2, 3], (1, 2), leader=1, isr=(1, 2))
    ctx.replica_states[PartitionAndReplica(TP, 2)] = R.OFFLINE_REPLICA
    ctx.replica_states[PartitionAndReplica(TP, 3)] = R.NEW_REPLICA
    rsm, sender = machine(ctx, zk)
    rsm.handle_state_changes(
        [PartitionAndReplica(TP, 2), PartitionAndReplica(TP, 3)], R.ONLINE_REPLICA
    )
    assert sender.partition_states("LeaderAndIsr", 2)[TP].is_new is False
    assert sender.of("LeaderAndIsr", 3) == []
    assert ctx.partition_replica_assignment(TP) == (1, 2, 3)
    assert {ctx.replica_states[PartitionAndReplica(TP, r)] for r in (2, 3)} == {R.ONLINE_REPLICA}


@pytest.mark.parametrize(
    ("leader", "isr", "offline", "expected"),
    [
        (1, (1, 2, 3), 2, LeaderAndIsr(1, 1, (1, 3), 1)),  # a follower leaves the ISR
        (2, (1, 2), 2, LeaderAndIsr(-1, 1, (1,), 1)),  # the leader leaves: no leader
        (2, (2,), 2, LeaderAndIsr(-1, 1, (2,), 1)),  # last ISR member is kept
        (1, (1, 3), 2, LeaderAndIsr(1, 0, (1, 3), 0)),  # not in the ISR: nothing written
    ],
)
def test_offline_replica_leaves_the_isr(
    leader: int, isr: tuple[int, ...], offline: int, expected: LeaderAndIsr
) -> None:
    ctx, zk = with_leader([1, 3], (1, 2, 3), leader=leader, isr=isr)
    replica = PartitionAndReplica(TP, offline)
    ctx.replica_states[replica] = R.ONLINE_REPLICA
    rsm, sender = machine(ctx, zk)
    rsm.handle_state_changes([replica], R.OFFLINE_REPLICA)

    assert ctx.replica_states[replica] is R.OFFLINE_REPLICA
    assert zk.states[TP].leader_and_isr == expected
    assert ctx.partition_leadership(TP) == zk.states[TP]
    stop = sender.partition_states("StopReplica", offline)[TP]
    assert stop.delete_partition is False
    # The other live replicas learn the new ISR.
    assert {s.broker_id for s in sender.of("LeaderAndIsr")} == {1, 3}


def test_offline_replicas_of_many_partitions_are_removed_in_one_batch() -> None:
    partitions = [TopicPartition("t", p) for p in range(20)]
    ctx = context_with([1], {tp: (1, 2) for tp in partitions})
    zk = FakePartitionStates()
    for tp in partitions:
        zk.set(tp, 1, (1, 2))
        ctx.put_partition_leadership(tp, zk.states[tp])
        ctx.replica_states[PartitionAndReplica(tp, 2)] = R.ONLINE_REPLICA
    rsm, _ = machine(ctx, zk)
    rsm.handle_state_changes([PartitionAndReplica(tp, 2) for tp in partitions], R.OFFLINE_REPLICA)
    # The cached states are current: one batched compare-and-set, no read.
    assert zk.calls == ["update"]
    assert all(zk.states[tp].leader_and_isr.isr == (1,) for tp in partitions)


def test_a_state_changed_behind_the_cache_is_read_and_retried() -> None:
    partitions = [TopicPartition("t", p) for p in range(3)]
    ctx = context_with([1, 3], {tp: (1, 2, 3) for tp in partitions})
    zk = FakePartitionStates()
    for tp in partitions:
        zk.set(tp, 1, (1, 2, 3))
        ctx.put_partition_leadership(tp, zk.states[tp])
        ctx.replica_states[PartitionAndReplica(tp, 2)] = R.ONLINE_REPLICA
    # The leader of partition 0 shrank its ISR to (1, 2) behind the controller's cache.
    stale = partitions[0]
    zk.states[stale] = LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 0, (1, 2), 1), 1)
    # The cache says 2 is not in the ISR of partition 1, but ZooKeeper says it is.
    ctx.put_partition_leadership(
        partitions[1], LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 0, (1, 3)), 1)
    )
    rsm, _ = machine(ctx, zk)
    rsm.handle_state_changes([PartitionAndReplica(tp, 2) for tp in partitions], R.OFFLINE_REPLICA)
    assert zk.calls == ["update", "get", "update"]
    assert zk.states[stale].leader_and_isr.isr == (1,)
    assert zk.states[partitions[1]].leader_and_isr.isr == (1, 3)
    assert zk.states[partitions[2]].leader_and_isr.isr == (1, 3)
    assert all(ctx.partition_leadership(tp) == zk.states[tp] for tp in partitions)


def test_deletion_states() -> None:
    ctx, zk = with_leader([1, 2], (1, 2), leader=1, isr=(1, 2))
    replica = PartitionAndReplica(TP, 2)
    ctx.replica_states[replica] = R.OFFLINE_REPLICA
    rsm, sender = machine(ctx, zk)

    rsm.handle_state_changes([replica], R.REPLICA_DELETION_STARTED)
    assert sender.partition_states("StopReplica", 2)[TP].delete_partition is True
    rsm.handle_state_changes([replica], R.REPLICA_DELETION_SUCCESSFUL)
    rsm.handle_state_changes([replica], R.NON_EXISTENT_REPLICA)
    assert replica not in ctx.replica_states
    assert ctx.partition_full_replica_assignment(TP) == ReplicaAssignment((1,))


def test_startup_brings_live_replicas_online_and_dead_ones_offline() -> None:
    ctx, zk = with_leader([1], (1, 2), leader=1, isr=(1, 2))
    rsm, sender = machine(ctx, zk)
    rsm.startup()
    assert ctx.replica_states[PartitionAndReplica(TP, 1)] is R.ONLINE_REPLICA
    assert ctx.replica_states[PartitionAndReplica(TP, 2)] is R.OFFLINE_REPLICA
    assert zk.states[TP].leader_and_isr.isr == (1,)
    assert TP in sender.partition_states("LeaderAndIsr", 1)
