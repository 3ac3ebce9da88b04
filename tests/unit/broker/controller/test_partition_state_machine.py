import pytest

from kpo_broker.controller.context import ControllerContext
from kpo_broker.controller.errors import StateChangeFailedError
from kpo_broker.controller.leader_election import (
    ControlledShutdownPartitionLeaderElection,
    LeaderElectionStrategy,
    OfflinePartitionLeaderElection,
    PreferredReplicaPartitionLeaderElection,
)
from kpo_broker.controller.partition_state_machine import PartitionStateMachine
from kpo_broker.controller.states import PartitionState
from kpo_broker.zk.errors import ControllerMovedError
from kpo_broker.zk.model import LeaderAndIsr
from kpo_kafka.topic_partition import TopicPartition

from .fakes import FakePartitionStates, FakeSender, context_with, new_batch

P = PartitionState
TP = TopicPartition("t", 0)


def machine(
    ctx: ControllerContext, zk: FakePartitionStates, *, unclean: bool = False
) -> tuple[PartitionStateMachine, FakeSender]:
    sender = FakeSender()
    return PartitionStateMachine(
        ctx, zk, new_batch(ctx, sender), unclean_leader_election_enable=unclean
    ), sender


@pytest.mark.parametrize(
    ("current", "target", "allowed"),
    [
        (P.NON_EXISTENT_PARTITION, P.NEW_PARTITION, True),
        (P.NON_EXISTENT_PARTITION, P.ONLINE_PARTITION, False),
        (P.NON_EXISTENT_PARTITION, P.OFFLINE_PARTITION, False),
        (P.NEW_PARTITION, P.OFFLINE_PARTITION, True),
        (P.NEW_PARTITION, P.NON_EXISTENT_PARTITION, False),
        (P.ONLINE_PARTITION, P.OFFLINE_PARTITION, True),
        (P.ONLINE_PARTITION, P.NEW_PARTITION, False),
        (P.ONLINE_PARTITION, P.NON_EXISTENT_PARTITION, False),
        (P.OFFLINE_PARTITION, P.NON_EXISTENT_PARTITION, True),
        (P.OFFLINE_PARTITION, P.NEW_PARTITION, False),
    ],
)
def test_transitions_without_election_follow_the_table(
    current: PartitionState, target: PartitionState, allowed: bool
) -> None:
    ctx = context_with([1], {TP: (1,)})
    ctx.partition_states[TP] = current
    psm, sender = machine(ctx, FakePartitionStates())
    results = psm.handle_state_changes([TP], target)
    assert ctx.partition_states[TP] == (target if allowed else current)
    assert (TP in results) is not allowed
    assert sender.sent == []


def test_new_partitions_go_online_with_first_live_replica_in_one_batch() -> None:
    partitions = [TopicPartition("t", p) for p in range(50)]
    ctx = context_with([1, 2], {tp: (3, 2, 1) for tp in partitions})
    zk = FakePartitionStates()
    psm, sender = machine(ctx, zk)
    psm.handle_state_changes(partitions, P.NEW_PARTITION)
    results = psm.handle_state_changes(partitions, P.ONLINE_PARTITION)

    assert zk.calls == ["create"]  # one batched create for all 50 partitions
    assert all(results[tp] == LeaderAndIsr(2, 0, (2, 1), 0) for tp in partitions)
    assert all(ctx.partition_states[tp] is P.ONLINE_PARTITION for tp in partitions)
    assert zk.states[partitions[0]].controller_epoch == 1
    # LeaderAndIsr (is_new) to the live replicas only, one request per broker.
    assert [s.broker_id for s in sender.of("LeaderAndIsr")] == [1, 2]
    assert all(s.is_new for s in sender.partition_states("LeaderAndIsr", 2).values())


def test_new_partition_without_live_replica_fails_and_stays_new() -> None:
    ctx = context_with([1], {TP: (2, 3)})
    ctx.partition_states[TP] = P.NEW_PARTITION
    psm, sender = machine(ctx, FakePartitionStates())
    results = psm.handle_state_changes([TP], P.ONLINE_PARTITION)
    assert isinstance(results[TP], StateChangeFailedError)
    assert ctx.partition_states[TP] is P.NEW_PARTITION
    assert sender.sent == []


@pytest.mark.parametrize(
    ("strategy", "live", "shutting_down", "isr", "unclean", "expected"),
    [
        # Offline: first replica of AR that is live and in the ISR; ISR = live ISR.
        (OfflinePartitionLeaderElection(), [2, 3], [], (1, 2, 3), False, (2, (2, 3))),
        # Kafka's offlinePartitionLeaderElection: no live ISR member, clean only -> no leader.
        (OfflinePartitionLeaderElection(), [3], [], (1, 2), False, None),
        # ... unclean allowed by the broker config -> first live replica alone.
        (OfflinePartitionLeaderElection(), [3], [], (1, 2), True, (3, (3,))),
        # ... or forced by an unclean ElectLeaders.
        (OfflinePartitionLeaderElection(allow_unclean=True), [3], [], (1, 2), False, (3, (3,))),
        (PreferredReplicaPartitionLeaderElection(), [1, 2, 3], [], (2, 1), False, (1, (2, 1))),
        (PreferredReplicaPartitionLeaderElection(), [2, 3], [], (2, 3), False, None),
        (
            ControlledShutdownPartitionLeaderElection(),
            [1, 2, 3],
            [1],
            (1, 2, 3),
            False,
            (2, (2, 3)),
        ),
        (ControlledShutdownPartitionLeaderElection(), [1, 2], [1], (1,), False, None),
    ],
)
def test_elections_bump_the_leader_epoch_and_write_with_compare_and_set(
    strategy: LeaderElectionStrategy,
    live: list[int],
    shutting_down: list[int],
    isr: tuple[int, ...],
    unclean: bool,
    expected: tuple[int, tuple[int, ...]] | None,
) -> None:
    ctx = context_with(live, {TP: (1, 2, 3)})
    ctx.shutting_down_broker_ids |= set(shutting_down)
    ctx.partition_states[TP] = P.OFFLINE_PARTITION
    zk = FakePartitionStates()
    zk.set(TP, leader=1, isr=isr, leader_epoch=4)
    psm, sender = machine(ctx, zk, unclean=unclean)
    results = psm.handle_state_changes([TP], P.ONLINE_PARTITION, strategy)

    if expected is None:
        assert isinstance(results[TP], StateChangeFailedError)
        assert ctx.partition_states[TP] is P.OFFLINE_PARTITION
        assert zk.states[TP].leader_and_isr.leader_epoch == 4
        return
    leader, new_isr = expected
    assert results[TP] == LeaderAndIsr(leader, 5, new_isr, 1)
    assert zk.states[TP].leader_and_isr == LeaderAndIsr(leader, 5, new_isr, 1)
    assert ctx.partition_leader(TP) == leader
    assert ctx.partition_states[TP] is P.ONLINE_PARTITION
    recipients = {s.broker_id for s in sender.of("LeaderAndIsr")}
    assert recipients == set(live)  # shutting-down replicas still hear they are followers


def test_topic_config_overrides_the_unclean_default() -> None:
    ctx = context_with([3], {TP: (1, 3)})
    ctx.partition_states[TP] = P.OFFLINE_PARTITION
    zk = FakePartitionStates(topic_configs={"t": {"unclean.leader.election.enable": "true"}})
    zk.set(TP, leader=1, isr=(1,))
    psm, _ = machine(ctx, zk, unclean=False)
    assert psm.handle_state_changes([TP], P.ONLINE_PARTITION) == {TP: LeaderAndIsr(3, 1, (3,), 1)}


def test_conflicting_write_is_reread_and_retried() -> None:
    ctx = context_with([2], {TP: (1, 2)})
    ctx.partition_states[TP] = P.ONLINE_PARTITION
    zk = FakePartitionStates(conflict_once={TP})
    zk.set(TP, leader=1, isr=(1, 2))
    psm, _ = machine(ctx, zk)
    results = psm.handle_state_changes([TP], P.ONLINE_PARTITION)
    assert results[TP] == LeaderAndIsr(2, 1, (2,), 2)
    assert zk.calls == ["get", "update", "get", "update"]


def test_state_written_by_a_newer_controller_is_not_touched() -> None:
    ctx = context_with([2], {TP: (1, 2)}, epoch=1)
    ctx.partition_states[TP] = P.OFFLINE_PARTITION
    zk = FakePartitionStates()
    zk.set(TP, leader=1, isr=(1, 2))
    zk.states[TP] = type(zk.states[TP])(zk.states[TP].leader_and_isr, controller_epoch=2)
    psm, _ = machine(ctx, zk)
    assert isinstance(
        psm.handle_state_changes([TP], P.ONLINE_PARTITION)[TP], StateChangeFailedError
    )
    assert "update" not in zk.calls


def test_fenced_write_raises_and_leaves_the_batch_empty() -> None:
    ctx = context_with([1], {TP: (1,)})
    ctx.partition_states[TP] = P.NEW_PARTITION
    zk = FakePartitionStates(epoch_zk_version=2)  # another controller was elected
    psm, sender = machine(ctx, zk)
    with pytest.raises(ControllerMovedError):
        psm.handle_state_changes([TP], P.ONLINE_PARTITION)
    assert ctx.partition_states[TP] is P.NEW_PARTITION
    assert sender.sent == []
    psm.handle_state_changes([TP], P.OFFLINE_PARTITION)  # a new batch can start


def test_startup_initialises_states_and_elects_offline_partitions() -> None:
    online, offline, new = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("t", 2)
    ctx = context_with([1, 2], {online: (1,), offline: (3, 2), new: (2,)})
    zk = FakePartitionStates()
    for tp, leader, isr in ((online, 1, (1,)), (offline, 3, (3, 2))):
        zk.set(tp, leader, isr)
        ctx.put_partition_leadership(tp, zk.states[tp])
    psm, _ = machine(ctx, zk)
    psm.startup()
    assert all(ctx.partition_states[tp] is P.ONLINE_PARTITION for tp in (online, offline, new))
    assert zk.states[offline].leader_and_isr == LeaderAndIsr(2, 1, (2,), 1)
    assert zk.states[new].leader_and_isr.leader == 2
    assert zk.states[online].leader_and_isr.leader_epoch == 0  # untouched


def test_a_replica_in_an_offline_log_dir_is_not_elected_and_leaves_the_isr() -> None:
    """Kafka's ``isReplicaOnline``: a live broker's replica in an offline dir is offline."""
    ctx = context_with([1, 2, 3], {TP: (1, 2, 3)})
    ctx.replicas_on_offline_dirs[1] = {TP}
    assert not ctx.is_replica_online(1, TP)
    assert ctx.is_replica_online(1, TopicPartition("t", 1))
    assert ctx.online_replicas(TP) == (2, 3)
    ctx.partition_states[TP] = P.OFFLINE_PARTITION
    zk = FakePartitionStates()
    zk.set(TP, leader=1, isr=(1, 2, 3), leader_epoch=4)
    psm, sender = machine(ctx, zk)
    results = psm.handle_state_changes([TP], P.ONLINE_PARTITION, OfflinePartitionLeaderElection())
    assert results[TP] == LeaderAndIsr(2, 5, (2, 3), 1)
    assert {s.broker_id for s in sender.of("LeaderAndIsr")} == {2, 3}
