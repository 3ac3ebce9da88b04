"""Controller election, controller epochs and fencing of stale controllers on real ZooKeeper."""

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest

from kpo_broker.zk.client import KafkaZkClient
from kpo_broker.zk.errors import ControllerMovedError
from kpo_broker.zk.model import ControllerEpoch, LeaderAndIsr, LeaderIsrAndControllerEpoch
from kpo_kafka.topic_partition import TopicPartition

pytestmark = pytest.mark.integration


def race(clients: list[KafkaZkClient], broker_ids: list[int]) -> list[ControllerEpoch | None]:
    barrier = threading.Barrier(len(clients))

    def elect(index: int) -> ControllerEpoch | None:
        barrier.wait()
        return clients[index].try_elect_controller(broker_ids[index])

    with ThreadPoolExecutor(len(clients)) as pool:
        return list(pool.map(elect, range(len(clients))))


def test_first_election_creates_epoch_1(zk_client: KafkaZkClient) -> None:
    assert zk_client.get_controller_epoch() is None
    assert zk_client.get_controller_id() is None
    assert zk_client.try_elect_controller(5) == ControllerEpoch(epoch=1, zk_version=1)
    assert zk_client.get_controller_id() == 5
    assert zk_client.get_controller_epoch() == ControllerEpoch(1, 1)


def test_election_race_has_one_winner_per_round_and_epochs_increase(
    new_client: Callable[..., KafkaZkClient],
) -> None:
    observer = new_client()
    for round_number in range(1, 5):
        clients = [new_client() for _ in range(3)]
        outcomes = race(clients, [10, 11, 12])
        winners = [i for i, outcome in enumerate(outcomes) if outcome is not None]
        assert len(winners) == 1
        winner = winners[0]
        assert outcomes[winner] == ControllerEpoch(round_number, round_number)
        assert observer.get_controller_id() == 10 + winner
        assert observer.get_controller_epoch() == ControllerEpoch(round_number, round_number)
        # A loser trying again while the controller lives still loses.
        assert clients[(winner + 1) % 3].try_elect_controller(99) is None
        # The controller's session ends: /controller goes, the next round elects anew.
        clients[winner].close()
        assert observer.get_controller_id() is None


def test_resigning_controller_deletes_controller_znode_only_while_current(
    new_client: Callable[..., KafkaZkClient],
) -> None:
    first, second = new_client(), new_client()
    elected = first.try_elect_controller(1)
    assert elected is not None
    assert first.resign_controller(elected.zk_version) is True
    assert second.try_elect_controller(2) == ControllerEpoch(2, 2)
    assert first.resign_controller(elected.zk_version) is False
    assert second.get_controller_id() == 2


def test_stale_controller_writes_are_fenced(new_client: Callable[..., KafkaZkClient]) -> None:
    old, new = new_client(), new_client()
    old.create_topic("fenced", {0: [1, 2]}, {})
    old_epoch = old.try_elect_controller(1)
    assert old_epoch is not None
    tp = TopicPartition("fenced", 0)
    created = old.create_partition_states(
        {tp: LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 0, (1, 2)), old_epoch.epoch)},
        controller_epoch_zk_version=old_epoch.zk_version,
    )
    assert created.written == {tp: LeaderAndIsr(1, 0, (1, 2), 0)}

    # The old controller stalls (e.g. a long GC); its session ends and another broker wins.
    assert old.get_controller_id() == 1
    old.resign_controller(old_epoch.zk_version)
    new_epoch = new.try_elect_controller(2)
    assert new_epoch == ControllerEpoch(2, 2)

    with pytest.raises(ControllerMovedError):
        old.update_leader_and_isr(
            {tp: LeaderAndIsr(2, 1, (2,), 0)},
            old_epoch.epoch,
            controller_epoch_zk_version=old_epoch.zk_version,
        )
    with pytest.raises(ControllerMovedError):
        old.create_partition_states(
            {TopicPartition("fenced", 1): LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 0, (1,)), 1)},
            controller_epoch_zk_version=old_epoch.zk_version,
        )
    with pytest.raises(ControllerMovedError):
        old.delete_topic_znodes(["fenced"], controller_epoch_zk_version=old_epoch.zk_version)

    # Nothing the stale controller tried was applied; the new controller's writes are.
    state = new.get_partition_states([tp])[tp]
    assert state == LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 0, (1, 2), 0), 1)
    updated = new.update_leader_and_isr(
        {tp: state.leader_and_isr.with_new_leader(2, [2])},
        new_epoch.epoch,
        controller_epoch_zk_version=new_epoch.zk_version,
    )
    assert updated.written == {tp: LeaderAndIsr(2, 1, (2,), 1)}
    assert new.get_partition_states([tp])[tp].controller_epoch == 2
