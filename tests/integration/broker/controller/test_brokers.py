"""Broker failure and restart, controlled shutdown, and leader elections asked by clients."""

from __future__ import annotations

import pytest

from kpo_broker.controller import errors
from kpo_broker.controller.controller import KafkaController
from kpo_broker.controller.events import ElectionType
from kpo_broker.zk.model import LeaderAndIsr
from kpo_kafka.topic_partition import TopicPartition

from .conftest import Cluster
from .fakes import LEADER_AND_ISR, FakeBroker, wait_for
from .test_topics import leader_and_isr_states

pytestmark = pytest.mark.integration

T0, T1, T2 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("t", 2)
TIMEOUT_S = 10


def start(
    cluster: Cluster, properties: dict[str, str] | None = None, rebalance_delay_s: float = 5.0
) -> tuple[KafkaController, FakeBroker, FakeBroker]:
    _, controller = cluster.node(1, properties, auto_rebalance_initial_delay_s=rebalance_delay_s)
    b2, b3 = cluster.broker(2), cluster.broker(3)
    wait_for(lambda: controller.is_active, what="controller")
    return controller, b2, b3


def create(cluster: Cluster, assignment: dict[int, list[int]]) -> list[TopicPartition]:
    cluster.admin.create_topic("t", assignment, {})
    partitions = [TopicPartition("t", p) for p in assignment]
    wait_for(
        lambda: len(cluster.admin.get_partition_states(partitions)) == len(partitions),
        what="partition states",
    )
    return partitions


def state(cluster: Cluster, tp: TopicPartition) -> LeaderAndIsr:
    return cluster.admin.get_partition_states([tp])[tp].leader_and_isr


def test_broker_failure_moves_leadership_to_a_live_isr_member(cluster: Cluster) -> None:
    _, b2, b3 = start(cluster)
    # t-0 led by 2; t-1 followed by 2; t-2 only on 2.
    create(cluster, {0: [2, 3, 1], 1: [3, 2], 2: [2]})
    b3.clear()

    b2.kill_session()

    wait_for(lambda: state(cluster, T0).leader == 3, what="new leader of t-0")
    assert state(cluster, T0) == LeaderAndIsr(3, 1, (3, 1), 1)
    wait_for(lambda: state(cluster, T1).isr == (3,), what="ISR shrink of t-1")
    assert state(cluster, T1) == LeaderAndIsr(3, 1, (3,), 1)
    # No live replica and unclean election disabled: offline, leader -1, last ISR kept.
    wait_for(lambda: state(cluster, T2).leader == -1, what="t-2 offline")
    assert state(cluster, T2) == LeaderAndIsr(-1, 1, (2,), 1)

    wait_for(lambda: T0 in leader_and_isr_states(b3), what="LeaderAndIsr to 3")
    sent = leader_and_isr_states(b3)[T0]
    assert (sent.leader, sent.leader_epoch, sent.isr, sent.zk_version) == (3, 1, [3, 1], 1)


def test_unclean_election_when_enabled(cluster: Cluster) -> None:
    _, b2, _ = start(cluster, {"unclean.leader.election.enable": "true"})
    create(cluster, {0: [2, 3]})
    # The ISR shrank to the leader alone (as a leader would write it), then it dies.
    current = cluster.admin.get_partition_states([T0])[T0]
    lai = current.leader_and_isr
    cluster.admin.update_isr(
        T0, LeaderAndIsr(2, lai.leader_epoch, (2,)), current.controller_epoch, lai.partition_epoch
    )

    b2.kill_session()

    wait_for(lambda: state(cluster, T0).leader == 3, what="unclean leader")
    assert state(cluster, T0).isr == (3,)


def test_restarted_broker_gets_leader_and_isr_for_all_its_replicas(cluster: Cluster) -> None:
    _, b2, _ = start(cluster)
    create(cluster, {0: [2, 3], 1: [3, 2], 2: [1, 3]})
    b2.kill_session()
    wait_for(lambda: state(cluster, T0).leader == 3, what="failover of t-0")
    b2.clear()

    b2.register()

    wait_for(lambda: set(leader_and_isr_states(b2)) == {T0, T1}, what="LeaderAndIsr to 2")
    assert all(not s.is_new for s in leader_and_isr_states(b2).values())
    assert leader_and_isr_states(b2)[T0].leader == 3


def test_controlled_shutdown_moves_leadership_and_returns_no_partitions(
    cluster: Cluster,
) -> None:
    controller, b2, b3 = start(cluster)
    create(cluster, {0: [2, 3], 1: [3, 2], 2: [2]})

    remaining = controller.controlled_shutdown(2, b2.epoch).result(TIMEOUT_S)

    assert remaining == set()  # t-2 has a single replica: nothing to move
    assert state(cluster, T0) == LeaderAndIsr(3, 1, (3,), 1)
    assert state(cluster, T1) == LeaderAndIsr(3, 1, (3,), 1)
    assert state(cluster, T2).leader == 2
    wait_for(lambda: leader_and_isr_states(b3)[T0].leader == 3, what="LeaderAndIsr to 3")


def test_controlled_shutdown_errors(cluster: Cluster) -> None:
    controller, b2, _ = start(cluster)
    with pytest.raises(errors.StaleBrokerEpochError):
        controller.controlled_shutdown(2, b2.epoch - 1).result(TIMEOUT_S)
    with pytest.raises(errors.BrokerNotAvailableError):
        controller.controlled_shutdown(7, -1).result(TIMEOUT_S)
    standby = cluster.node(4)[1]
    wait_for(lambda: standby.active_controller_id == 1, what="standby sees the controller")
    with pytest.raises(errors.NotControllerError) as raised:
        standby.controlled_shutdown(4, -1).result(TIMEOUT_S)
    assert raised.value.error_code == 41


def restart_broker_2(cluster: Cluster, b2: FakeBroker) -> None:
    """Broker 2 dies (3 takes over t-0, ISR [3]) and restarts."""
    b2.kill_session()
    wait_for(lambda: state(cluster, T0).leader == 3, what="failover")
    b2.register()
    wait_for(lambda: T0 in leader_and_isr_states(b2), what="restarted broker informed")


def rejoin_isr_of_t0(cluster: Cluster) -> None:
    """Broker 2 caught up: the leader (3) expands the ISR and notifies the controller."""
    current = cluster.admin.get_partition_states([T0])[T0]
    lai = current.leader_and_isr
    expanded = LeaderAndIsr(3, lai.leader_epoch, (3, 2))
    cluster.admin.update_isr(T0, expanded, current.controller_epoch, lai.partition_epoch)
    cluster.admin.propagate_isr_change([T0])
    wait_for(lambda: not cluster.admin.get_isr_change_notifications(), what="ISR notification")


def test_preferred_leader_election_after_the_preferred_replica_is_back_in_the_isr(
    cluster: Cluster,
) -> None:
    controller, b2, b3 = start(cluster)
    create(cluster, {0: [2, 3], 1: [3, 2]})
    restart_broker_2(cluster, b2)

    not_yet = controller.elect_leaders([T0], ElectionType.PREFERRED).result(TIMEOUT_S)
    assert not_yet[T0][0] == errors.PREFERRED_LEADER_NOT_AVAILABLE

    rejoin_isr_of_t0(cluster)

    results = controller.elect_leaders([T0, T1, TopicPartition("x", 0)], ElectionType.PREFERRED)
    assert results.result(TIMEOUT_S) == {
        T0: (errors.NONE, None),
        T1: (errors.ELECTION_NOT_NEEDED, "Leader is the preferred replica."),
        TopicPartition("x", 0): (
            errors.UNKNOWN_TOPIC_OR_PARTITION,
            "The partition does not exist.",
        ),
    }
    assert state(cluster, T0).leader == 2
    wait_for(lambda: leader_and_isr_states(b3)[T0].leader == 2, what="LeaderAndIsr to 3")
    assert any(r.body.controller_epoch == 1 for r in b3.received(LEADER_AND_ISR))


def test_auto_leader_rebalance_moves_leadership_back_to_the_preferred_replica(
    cluster: Cluster,
) -> None:
    properties = {
        "auto.leader.rebalance.enable": "true",
        "leader.imbalance.check.interval.seconds": "1",
        "leader.imbalance.per.broker.percentage": "10",
    }
    _, b2, _ = start(cluster, properties, rebalance_delay_s=0.1)
    create(cluster, {0: [2, 3], 1: [3, 2]})

    restart_broker_2(cluster, b2)
    rejoin_isr_of_t0(cluster)

    # 1 of broker 2's 1 preferred partitions is led elsewhere: 100% > 10%.
    wait_for(lambda: state(cluster, T0).leader == 2, 60, what="auto rebalance")
    assert state(cluster, T0).leader_epoch == 2
    assert state(cluster, T1).leader == 3


def test_preferred_replica_election_znode_is_applied_and_deleted(cluster: Cluster) -> None:
    _, b2, _ = start(cluster)
    create(cluster, {0: [2, 3], 1: [3, 2]})
    restart_broker_2(cluster, b2)
    rejoin_isr_of_t0(cluster)

    cluster.admin.create_preferred_replica_election([T0, T1])

    wait_for(lambda: state(cluster, T0).leader == 2, what="preferred leader of t-0")
    wait_for(lambda: not cluster.admin.get_preferred_replica_election(), what="znode deleted")
    assert state(cluster, T1) == LeaderAndIsr(3, 1, (3,), 1)  # already preferred: untouched
