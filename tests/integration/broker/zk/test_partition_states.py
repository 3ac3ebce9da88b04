"""Batched partition state writes, per-partition CAS and the leader's ISR updates."""

import math
from collections.abc import Callable

import pytest

from kpo_broker.zk.client import IsrUpdate, KafkaZkClient
from kpo_broker.zk.model import ControllerEpoch, LeaderAndIsr, LeaderIsrAndControllerEpoch
from kpo_broker.zk.multi_read import MAX_MULTI_READ_OPS
from kpo_broker.zk.session import MAX_MULTI_OPS
from kpo_kafka.topic_partition import TopicPartition

pytestmark = pytest.mark.integration


def elected(client: KafkaZkClient) -> ControllerEpoch:
    epoch = client.try_elect_controller(1)
    assert epoch is not None
    return epoch


def initial_states(
    topic: str, partitions: int, controller_epoch: int
) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
    return {
        TopicPartition(topic, p): LeaderIsrAndControllerEpoch(
            LeaderAndIsr(p % 3, 0, (p % 3, (p + 1) % 3)), controller_epoch
        )
        for p in range(partitions)
    }


def test_2000_partition_states_are_created_and_read_in_a_few_round_trips(
    zk_client: KafkaZkClient,
) -> None:
    epoch = elected(zk_client)
    zk_client.create_topic("big", {p: [p % 3, (p + 1) % 3] for p in range(2000)}, {})
    states = initial_states("big", 2000, epoch.epoch)

    before = zk_client.stats
    result = zk_client.create_partition_states(states, controller_epoch_zk_version=epoch.zk_version)
    after = zk_client.stats
    assert len(result.written) == 2000
    assert not result.version_conflicts
    assert not result.missing
    # The topic's partitions znode, then the 2 x 2000 creations packed into multis of
    # MAX_MULTI_OPS operations, pipelined: 9 requests, and the caller waited 2 times, not
    # 2000 (Kafka's KafkaZkClient sends one multi per partition, pipelined).
    assert after.requests - before.requests == 1 + math.ceil(2 * 2000 / MAX_MULTI_OPS)
    assert after.round_trips - before.round_trips <= 3

    read = zk_client.get_partition_states(states)
    # 2000 reads in multiReads of MAX_MULTI_READ_OPS, pipelined 10 at a time.
    assert zk_client.stats.requests - after.requests == 2000 // MAX_MULTI_READ_OPS
    assert zk_client.stats.round_trips - after.round_trips <= 2
    assert read == {
        tp: LeaderIsrAndControllerEpoch(s.leader_and_isr.with_partition_epoch(0), epoch.epoch)
        for tp, s in states.items()
    }


def test_max_in_flight_requests_bounds_the_window(
    new_client: Callable[..., KafkaZkClient],
) -> None:
    client = new_client(max_in_flight_requests=10)
    epoch = elected(client)
    client.create_topic("small", {p: [0, 1] for p in range(100)}, {})
    before = client.stats
    states = initial_states("small", 100, epoch.epoch)
    result = client.create_partition_states(states, controller_epoch_zk_version=epoch.zk_version)
    assert len(result.written) == 100
    # The partitions znode, then one multi holding the 100 partitions' creations.
    assert client.stats.round_trips - before.round_trips == 1 + 1
    created = client.stats
    # 100 topics queued for deletion, one create each, at most 10 in flight: 10 round trips.
    client.mark_topics_for_deletion(f"gone-{i}" for i in range(100))
    assert client.stats.requests - created.requests == 100
    assert client.stats.round_trips - created.round_trips == 10
    assert len(client.get_topics_marked_for_deletion()) == 100


def test_a_leaders_isr_updates_share_multis(zk_client: KafkaZkClient) -> None:
    epoch = elected(zk_client)
    zk_client.create_topic("isr", {p: [0, 1] for p in range(100)}, {})
    states = initial_states("isr", 100, epoch.epoch)
    zk_client.create_partition_states(states, controller_epoch_zk_version=epoch.zk_version)
    before = zk_client.stats
    shrunk = {
        tp: LeaderAndIsr(s.leader_and_isr.leader, 0, (s.leader_and_isr.leader,))
        for tp, s in states.items()
    }
    versions = zk_client.update_isrs(
        [IsrUpdate(tp, lai, epoch.epoch, 0) for tp, lai in shrunk.items()]
    )
    assert versions == [1] * 100
    assert zk_client.stats.requests - before.requests == 1
    read = zk_client.get_partition_states(states)
    assert {tp: s.leader_and_isr for tp, s in read.items()} == {
        tp: lai.with_partition_epoch(1) for tp, lai in shrunk.items()
    }


def test_many_partition_states_are_read_with_multi_read_and_missing_ones_left_out(
    new_client: Callable[..., KafkaZkClient],
) -> None:
    client = new_client()
    epoch = elected(client)
    client.create_topic("multi", {p: [0, 1] for p in range(250)}, {})
    states = initial_states("multi", 250, epoch.epoch)
    client.create_partition_states(states, controller_epoch_zk_version=epoch.zk_version)
    before = client.stats
    wanted = [*states, TopicPartition("multi", 250), TopicPartition("nope", 0)]

    read = client.get_partition_states(wanted)

    assert client.stats.requests - before.requests == 3  # 252 znodes, 100 per multiRead
    assert read == {
        tp: LeaderIsrAndControllerEpoch(s.leader_and_isr.with_partition_epoch(0), epoch.epoch)
        for tp, s in states.items()
    }
    # The same answers as one getData per znode.
    one_by_one = {tp: client.get_partition_states([tp]) for tp in wanted}
    assert {tp: r[tp] for tp, r in one_by_one.items() if r} == read


def test_version_conflicts_are_reported_per_partition(zk_client: KafkaZkClient) -> None:
    epoch = elected(zk_client)
    zk_client.create_topic("cas", {p: [0, 1, 2] for p in range(4)}, {})
    states = initial_states("cas", 4, epoch.epoch)
    zk_client.create_partition_states(states, controller_epoch_zk_version=epoch.zk_version)

    # Partition 1 moves on behind the controller's back (its leader shrinks the ISR).
    moved = TopicPartition("cas", 1)
    current = states[moved].leader_and_isr
    assert zk_client.update_isr(moved, current.with_isr([current.leader]), epoch.epoch, 0) == 1

    updates = {tp: s.leader_and_isr.with_new_leader(2, [2]) for tp, s in states.items()}
    updates[TopicPartition("cas", 9)] = LeaderAndIsr(2, 1, (2,), 0)  # no such partition
    result = zk_client.update_leader_and_isr(
        updates, epoch.epoch, controller_epoch_zk_version=epoch.zk_version
    )
    assert result.version_conflicts == {moved}
    assert result.missing == {TopicPartition("cas", 9)}
    assert set(result.written) == {TopicPartition("cas", p) for p in (0, 2, 3)}
    assert all(lai == LeaderAndIsr(2, 1, (2,), 1) for lai in result.written.values())

    read = zk_client.get_partition_states(updates)
    assert read[moved].leader_and_isr == LeaderAndIsr(current.leader, 0, (current.leader,), 1)
    assert TopicPartition("cas", 9) not in read

    again = zk_client.create_partition_states(
        {moved: states[moved]}, controller_epoch_zk_version=epoch.zk_version
    )
    assert again.version_conflicts == {moved}


def test_states_of_a_missing_topic_are_reported_missing(zk_client: KafkaZkClient) -> None:
    epoch = elected(zk_client)
    result = zk_client.create_partition_states(
        initial_states("ghost", 2, epoch.epoch), controller_epoch_zk_version=epoch.zk_version
    )
    assert result.missing == {TopicPartition("ghost", 0), TopicPartition("ghost", 1)}
    assert not result.written


def test_leader_isr_update_is_a_compare_and_set(new_client: Callable[..., KafkaZkClient]) -> None:
    controller, leader = new_client(), new_client()
    epoch = elected(controller)
    controller.create_topic("isr", {0: [1, 2, 3]}, {})
    tp = TopicPartition("isr", 0)
    controller.create_partition_states(
        {tp: LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 0, (1, 2, 3)), epoch.epoch)},
        controller_epoch_zk_version=epoch.zk_version,
    )
    shrunk = LeaderAndIsr(1, 0, (1, 2))
    assert leader.update_isr(tp, shrunk, epoch.epoch, expected_partition_epoch=0) == 1
    # Re-sending the same update (response lost) is recognised as already applied.
    assert leader.update_isr(tp, shrunk, epoch.epoch, expected_partition_epoch=0) == 1

    # The controller elects broker 2; the old leader's next ISR change is rejected.
    controller.update_leader_and_isr(
        {tp: LeaderAndIsr(2, 1, (2,), 1)}, epoch.epoch, controller_epoch_zk_version=epoch.zk_version
    )
    assert leader.update_isr(tp, LeaderAndIsr(1, 0, (1,)), epoch.epoch, 1) is None
    assert leader.get_partition_states([tp])[tp].leader_and_isr == LeaderAndIsr(2, 1, (2,), 2)
    assert leader.update_isr(TopicPartition("isr", 5), shrunk, epoch.epoch, 0) is None


def test_a_leaders_isr_updates_are_written_in_one_batch(
    new_client: Callable[..., KafkaZkClient],
) -> None:
    controller, leader = new_client(), new_client()
    epoch = elected(controller)
    controller.create_topic("many", {p: [1, 2, 3] for p in range(4)}, {})
    states = {
        TopicPartition("many", p): LeaderIsrAndControllerEpoch(
            LeaderAndIsr(1, 0, (1, 2, 3)), epoch.epoch
        )
        for p in range(4)
    }
    controller.create_partition_states(states, controller_epoch_zk_version=epoch.zk_version)
    shrunk = LeaderAndIsr(1, 0, (1, 2))
    tp0, tp1, tp2, tp3 = sorted(states)
    # Partition 2's shrink was already applied (a lost response); partition 1 moved on.
    assert leader.update_isr(tp2, shrunk, epoch.epoch, 0) == 1
    controller.update_leader_and_isr(
        {tp1: LeaderAndIsr(2, 1, (2, 3), 0)},
        epoch.epoch,
        controller_epoch_zk_version=epoch.zk_version,
    )
    before = leader.stats
    versions = leader.update_isrs(
        [
            IsrUpdate(tp0, shrunk, epoch.epoch, 0),
            IsrUpdate(tp1, shrunk, epoch.epoch, 0),
            IsrUpdate(tp2, shrunk, epoch.epoch, 0),
            IsrUpdate(TopicPartition("many", 9), shrunk, epoch.epoch, 0),
            IsrUpdate(tp3, shrunk, epoch.epoch, 0),
        ]
    )
    assert versions == [1, None, 1, None, 1]
    # One multi of the five writes (aborted by the conflicts), the five again one per
    # multi, pipelined, then one multiRead of the two conflicting states.
    assert leader.stats.requests - before.requests == 1 + 5 + 1
    assert leader.stats.round_trips - before.round_trips == 3
    read = leader.get_partition_states(states)
    assert read[tp1].leader_and_isr == LeaderAndIsr(2, 1, (2, 3), 1)
    assert all(read[tp].leader_and_isr == shrunk.with_partition_epoch(1) for tp in (tp0, tp2, tp3))
