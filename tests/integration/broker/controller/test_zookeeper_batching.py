"""No synchronous ZooKeeper round trip per partition, as Kafka's KafkaZkClient pipelines them.

Creating a topic and failing a broker touch hundreds of partition state znodes; the
controller must write them in batches, so the number of round trips does not grow with
the number of partitions. The writes are packed many partitions to a multi and the
elections start from the controller's cached states, so the number of requests does not
grow with it either. The same holds for one reassignment request of hundreds of
partitions, from its start to the completion of every partition.
"""

from __future__ import annotations

import pytest

from kpo_broker.controller.states import PartitionState
from kpo_broker.zk.client import IsrUpdate
from kpo_broker.zk.model import ReplicaAssignment
from kpo_kafka.topic_partition import TopicPartition

from .conftest import Cluster
from .fakes import wait_for

pytestmark = pytest.mark.integration

PARTITIONS = 600
#: Generous bound, far below one round trip per partition.
MAX_ROUND_TRIPS = 40
#: Generous bound, far below one request per partition (multis of up to 500 operations).
MAX_REQUESTS = PARTITIONS // 10


def test_topic_creation_and_broker_failure_write_partition_states_in_batches(
    cluster: Cluster,
) -> None:
    _, controller = cluster.node(1)
    cluster.broker(2)
    b3 = cluster.broker(3)
    wait_for(lambda: controller.is_active, what="controller")
    partitions = [TopicPartition("big", p) for p in range(PARTITIONS)]

    before = controller.zk.stats
    cluster.admin.create_topic(
        "big", {p: [1 + p % 3, 1 + (p + 1) % 3] for p in range(PARTITIONS)}, {}
    )
    wait_for(
        lambda: all(
            controller.context.partition_state(tp) is PartitionState.ONLINE_PARTITION
            for tp in partitions
        ),
        what="all partitions online",
    )
    created = controller.zk.stats
    assert created.requests - before.requests <= MAX_REQUESTS
    assert created.round_trips - before.round_trips <= MAX_ROUND_TRIPS

    b3.kill_session()
    wait_for(
        lambda: (
            all(controller.context.partition_leader(tp) not in (3, None) for tp in partitions)
            and 3 not in controller.context.live_or_shutting_down_broker_ids
        ),
        what="leaders moved off broker 3",
    )
    failed = controller.zk.stats
    assert failed.requests - created.requests <= MAX_REQUESTS
    assert failed.round_trips - created.round_trips <= MAX_ROUND_TRIPS
    led_by_3 = [tp for tp in partitions if tp.partition % 3 == 2]
    states = cluster.admin.get_partition_states(led_by_3)
    assert all(s.leader_and_isr.leader_epoch == 1 for s in states.values())


def test_a_large_reassignment_starts_and_completes_in_batches(cluster: Cluster) -> None:
    _, controller = cluster.node(1)
    for broker_id in (2, 3):
        cluster.broker(broker_id)
    wait_for(lambda: controller.is_active, what="controller")
    wait_for(lambda: len(controller.context.live_broker_ids) == 3, what="brokers")
    partitions = [TopicPartition("big", p) for p in range(PARTITIONS)]
    original = {p: (1 + p % 2, 2 - p % 2) for p in range(PARTITIONS)}
    cluster.admin.create_topic("big", original, {})
    wait_for(
        lambda: all(
            controller.context.partition_state(tp) is PartitionState.ONLINE_PARTITION
            for tp in partitions
        ),
        what="all partitions online",
    )
    # Each partition keeps its leader and moves its follower to broker 3.
    targets = {tp: [original[tp.partition][0], 3] for tp in partitions}

    before = controller.zk.stats
    results = controller.alter_partition_reassignments(targets).result(120)
    assert results == {tp: (0, None) for tp in partitions}
    started = controller.zk.stats
    # One ``exists`` per partition installs its ISR watch (pipelined); nothing else is
    # sent per partition.
    assert started.requests - before.requests <= PARTITIONS + MAX_REQUESTS
    assert started.round_trips - before.round_trips <= PARTITIONS // 10 + MAX_ROUND_TRIPS

    # The leaders add broker 3 to their ISRs, as after its catch-up.
    states = cluster.admin.get_partition_states(partitions)
    versions = cluster.admin.update_isrs(
        [
            IsrUpdate(
                tp,
                lai.with_isr((*lai.isr, 3)),
                states[tp].controller_epoch,
                lai.partition_epoch,
            )
            for tp in partitions
            if (lai := states[tp].leader_and_isr) is not None
        ]
    )
    assert None not in versions

    def completed() -> bool:
        if controller.context.partitions_being_reassigned:
            return False
        assignments = cluster.admin.get_replica_assignments(["big"])["big"].partitions
        return all(
            assignments[tp.partition] == ReplicaAssignment(tuple(targets[tp])) for tp in partitions
        )

    wait_for(completed, what="every reassignment completed")
    done = controller.zk.stats
    assert done.requests - started.requests <= MAX_REQUESTS
    assert done.round_trips - started.round_trips <= MAX_ROUND_TRIPS
    final = cluster.admin.get_partition_states(partitions)
    for tp in partitions:
        lai = final[tp].leader_and_isr
        assert lai.leader == original[tp.partition][0]
        assert sorted(lai.isr) == sorted(targets[tp])
