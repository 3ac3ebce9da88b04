"""Controller election, failover after the controller's session dies, fencing of a stale one."""

from __future__ import annotations

import pytest

from kpo_broker.controller.events import Startup, TopicChange
from kpo_kafka.topic_partition import TopicPartition

from .conftest import Cluster
from .fakes import UPDATE_METADATA, wait_for

pytestmark = pytest.mark.integration


def test_two_controllers_race_and_one_wins_with_epoch_1(cluster: Cluster) -> None:
    (b1, c1), (b2, c2) = cluster.node(1, start=False), cluster.node(2, start=False)
    c1.startup()
    c2.startup()

    wait_for(lambda: c1.active_controller_id in (1, 2) and c2.active_controller_id in (1, 2))
    assert c1.active_controller_id == c2.active_controller_id
    winner = c1 if c1.is_active else c2
    assert [c1.is_active, c2.is_active].count(True) == 1
    assert winner.controller_epoch == 1
    epoch = cluster.admin.get_controller_epoch()
    assert epoch is not None and epoch.epoch == 1
    assert cluster.admin.get_controller_id() == winner.broker_id

    # The winner tells every live broker about the cluster (KafkaController.onControllerFailover).
    for broker in (b1, b2):
        wait_for(lambda b=broker: bool(b.received(UPDATE_METADATA)), what="UpdateMetadata")
        body = broker.received(UPDATE_METADATA)[0].body
        assert body.controller_id == winner.broker_id
        assert body.controller_epoch == 1
        assert body.broker_epoch == broker.epoch
        assert sorted(b.id for b in body.live_brokers) == [1, 2]


def test_controller_session_loss_moves_control_to_the_other_broker_with_epoch_2(
    cluster: Cluster,
) -> None:
    (b1, c1), (b2, c2) = cluster.node(1), cluster.node(2)
    wait_for(lambda: c1.is_active or c2.is_active, what="a controller")
    (winner_broker, winner), (other_broker, other) = (
        ((b1, c1), (b2, c2)) if c1.is_active else ((b2, c2), (b1, c1))
    )
    wait_for(lambda: other.active_controller_id == winner.broker_id)
    other_broker.clear()

    winner_broker.kill_session()

    wait_for(lambda: other.is_active, what="failover")
    assert other.controller_epoch == 2
    wait_for(lambda: not winner.is_active, what="old controller resigns")
    wait_for(
        lambda: any(r.body.controller_epoch == 2 for r in other_broker.received(UPDATE_METADATA)),
        what="UpdateMetadata of epoch 2",
    )
    request = next(
        r.body for r in other_broker.received(UPDATE_METADATA) if r.body.controller_epoch == 2
    )
    assert request.controller_id == other.broker_id
    assert [b.id for b in request.live_brokers] == [other.broker_id]


def test_writes_of_a_deposed_controller_are_rejected(cluster: Cluster) -> None:
    # The stale controller's events are processed by the test itself, one at a time,
    # so that it writes after having lost the election without noticing yet.
    cluster.broker(2)
    _, stale = cluster.node(1, start=False)
    stale.process(Startup())
    assert stale.is_active and stale.controller_epoch == 1

    # Another controller takes over while the stale one has not processed the watch yet:
    # /controller is deleted (as when a session expires) and broker 99 wins epoch 2.
    assert cluster.admin.resign_controller(stale.context.epoch_zk_version)
    usurper = cluster.new_zk()
    elected = usurper.try_elect_controller(99)
    assert elected is not None and elected.epoch == 2

    cluster.admin.create_topic("t", {0: [1, 2]}, {})
    stale.process(TopicChange())

    # The partition state write was fenced: nothing written, and the stale one resigned.
    assert cluster.admin.get_partition_states([TopicPartition("t", 0)]) == {}
    assert not stale.is_active
    assert stale.active_controller_id == 99
    usurper.close()
