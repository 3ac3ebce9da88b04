"""AlterPartition (KIP-497) on a real controller, fake brokers and a real ZooKeeper.

As Kafka's ``KafkaController.processAlterPartition`` (ZooKeeper mode): the leader's ISR
change is checked, written with a compare-and-set, sent to every broker in
UpdateMetadata, and completes a reassignment whose targets all joined the ISR.
"""

from __future__ import annotations

from typing import Any

import pytest

from kpo_broker.controller.alter_partition import (
    FENCED_LEADER_EPOCH,
    INELIGIBLE_REPLICA,
    INVALID_UPDATE_VERSION,
    AlterPartitionResult,
    ProposedIsr,
)
from kpo_broker.controller.controller import KafkaController
from kpo_broker.controller.errors import StaleBrokerEpochError
from kpo_broker.zk.model import LeaderAndIsr, ReplicaAssignment
from kpo_kafka.topic_partition import TopicPartition

from .conftest import Cluster
from .fakes import FakeBroker, wait_for
from .test_reassignment import alter, assignment, deleted_partitions
from .test_topics import metadata_partitions

pytestmark = pytest.mark.integration

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def start(cluster: Cluster) -> tuple[KafkaController, dict[int, FakeBroker]]:
    b1, controller = cluster.node(1)
    brokers = {1: b1, **{i: cluster.broker(i) for i in (2, 3)}}
    wait_for(lambda: controller.is_active, what="controller")
    wait_for(lambda: len(controller.context.live_broker_ids) == 3, what="brokers")
    cluster.admin.create_topic("t", {0: [2, 3], 1: [2, 3]}, {})
    wait_for(lambda: len(cluster.admin.get_partition_states([T0, T1])) == 2, what="states")
    return controller, brokers


def state(cluster: Cluster, tp: TopicPartition = T0) -> LeaderAndIsr:
    return cluster.admin.get_partition_states([tp])[tp].leader_and_isr


def ask(
    controller: KafkaController,
    broker: FakeBroker,
    proposals: dict[TopicPartition, ProposedIsr],
    *,
    epoch: int | None = None,
    version: int = 1,
) -> AlterPartitionResult:
    """Send the leader's AlterPartition to the controller and wait for the answer."""
    future = controller.alter_partitions(
        broker.broker_id,
        broker.epoch if epoch is None else epoch,
        proposals,
        {},
        version,
    )
    return future.result(10)


def change(current: LeaderAndIsr, isr: tuple[int, ...]) -> ProposedIsr:
    return ProposedIsr(current.leader_epoch, isr, current.partition_epoch, {})


def test_an_isr_shrink_is_written_and_sent_to_every_broker(cluster: Cluster) -> None:
    controller, brokers = start(cluster)
    before = state(cluster)
    assert before.leader == 2 and before.isr == (2, 3)
    result = ask(controller, brokers[2], {T0: change(before, (2,))})

    after = LeaderAndIsr(2, before.leader_epoch, (2,), before.partition_epoch + 1)
    assert result.partitions == {T0: after}
    assert state(cluster) == after  # the leader epoch is not bumped (Kafka's ZK path)
    for broker_id, broker in brokers.items():

        def told(b: FakeBroker = broker) -> bool:
            sent: Any = metadata_partitions(b).get(T0)
            return sent is not None and sent.zk_version == after.partition_epoch

        wait_for(told, what=f"UpdateMetadata to broker {broker_id}")
        sent: Any = metadata_partitions(broker)[T0]
        assert (sent.leader, sent.leader_epoch, sent.isr) == (2, before.leader_epoch, [2])

    # The same change again (its answer was lost): the current state, nothing written.
    again = ask(controller, brokers[2], {T0: change(before, (2,))})
    assert again.partitions == {T0: after}
    assert state(cluster) == after


def test_stale_changes_and_a_stale_broker_epoch_are_refused(cluster: Cluster) -> None:
    controller, brokers = start(cluster)
    t0, t1 = state(cluster, T0), state(cluster, T1)
    ask(controller, brokers[2], {T0: change(t0, (2,))})  # version moves on

    result = ask(
        controller,
        brokers[2],
        {
            T0: change(t0, (2, 3)),  # computed on the old version
            T1: ProposedIsr(t1.leader_epoch - 1, (2,), t1.partition_epoch, {}),
        },
    )
    assert result.partitions == {T0: INVALID_UPDATE_VERSION, T1: FENCED_LEADER_EPOCH}
    assert state(cluster, T1) == t1

    with pytest.raises(StaleBrokerEpochError):
        ask(controller, brokers[2], {T1: change(t1, (2,))}, epoch=brokers[2].epoch - 1)
    assert state(cluster, T1) == t1


def test_a_dead_broker_cannot_join_the_isr(cluster: Cluster) -> None:
    controller, brokers = start(cluster)
    shrunk = ask(controller, brokers[2], {T0: change(state(cluster), (2,))}).partitions[T0]
    assert isinstance(shrunk, LeaderAndIsr)
    brokers[3].kill_session()
    wait_for(lambda: 3 not in controller.context.live_broker_ids, what="broker 3 gone")

    result = ask(controller, brokers[2], {T0: change(shrunk, (2, 3))}, version=2)

    assert result.partitions == {T0: INELIGIBLE_REPLICA}
    assert state(cluster).isr == (2,)


def test_topics_named_by_id_are_resolved_by_the_controller(cluster: Cluster) -> None:
    controller, brokers = start(cluster)
    topic_id = controller.context.topic_ids["t"]
    before = state(cluster)

    unknown = "AAAAAAAAAAAAAAAAAAAAAQ"  # no topic has this id
    proposals = {topic_id: {0: change(before, (2,))}, unknown: {3: change(before, (2,))}}

    future = controller.alter_partitions(2, brokers[2].epoch, {}, proposals, 2)
    result = future.result(10)

    assert result.partitions == {
        T0: LeaderAndIsr(2, before.leader_epoch, (2,), before.partition_epoch + 1)
    }
    assert result.topic_ids == {"t": topic_id}
    assert result.unknown_topic_ids == {unknown: [3]}


def test_a_reassignment_completes_when_its_target_joins_through_alter_partition(
    cluster: Cluster,
) -> None:
    controller, brokers = start(cluster)
    assert alter(controller, {T0: [2, 1]}) == {T0: (0, None)}
    assert assignment(cluster) == ReplicaAssignment((2, 1, 3), (1,), (3,))
    current = state(cluster)  # the reassignment's start bumped the leader epoch

    ask(controller, brokers[2], {T0: change(current, (2, 3, 1))})

    wait_for(lambda: assignment(cluster) == ReplicaAssignment((2, 1)), what="AR = RAR")
    assert sorted(state(cluster).isr) == [1, 2]
    wait_for(lambda: deleted_partitions(brokers[3]) == [T0], what="replica on 3 deleted")
