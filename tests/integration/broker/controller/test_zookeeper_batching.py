"""No synchronous ZooKeeper round trip per partition, as Kafka's KafkaZkClient pipelines them.

Creating a topic and failing a broker touch hundreds of partition state znodes; the
controller must write them in batches, so the number of round trips does not grow with
the number of partitions. The writes are packed many partitions to a multi and the
elections start from the controller's cached states, so the number of requests does not
grow with it either.
"""

from __future__ import annotations

import pytest

from kpo_broker.controller.states import PartitionState
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
