import pytest

from kpo_broker.controller.context import ControllerContext
from kpo_broker.controller.replica_election import partitions_to_rebalance
from kpo_broker.zk.model import LeaderAndIsr, LeaderIsrAndControllerEpoch
from kpo_kafka.topic_partition import TopicPartition

from .fakes import context_with


def partitions(count: int) -> list[TopicPartition]:
    return [TopicPartition("t", p) for p in range(count)]


def lead(ctx: ControllerContext, tp: TopicPartition, leader: int) -> None:
    ctx.put_partition_leadership(
        tp, LeaderIsrAndControllerEpoch(LeaderAndIsr(leader, 0, (1, 2)), 1)
    )


@pytest.mark.parametrize(
    ("not_led", "percentage", "expected_count"),
    [
        (1, 10, 0),  # 1/10 = 10%: not above the threshold
        (2, 10, 2),  # 20% > 10%: rebalance the two partitions
        (2, 20, 0),
        (10, 0, 10),
    ],
)
def test_imbalance_above_the_percentage_triggers_preferred_elections(
    not_led: int, percentage: int, expected_count: int
) -> None:
    tps = partitions(10)
    ctx = context_with([1, 2], {tp: (1, 2) for tp in tps})
    for i, tp in enumerate(tps):
        lead(ctx, tp, 2 if i < not_led else 1)
    chosen = partitions_to_rebalance(ctx, percentage, lambda topic: False)
    assert len(chosen) == expected_count
    assert chosen <= set(tps[:not_led])


def test_no_rebalance_to_a_dead_broker_during_reassignment_or_deletion() -> None:
    tps = partitions(4)
    ctx = context_with([2], {tp: (1, 2) for tp in tps})
    for tp in tps:
        lead(ctx, tp, 2)
    assert partitions_to_rebalance(ctx, 10, lambda topic: False) == set()  # 1 is dead

    ctx = context_with([1, 2], {tp: (1, 2) for tp in tps})
    for tp in tps:
        lead(ctx, tp, 2)
    assert partitions_to_rebalance(ctx, 10, lambda topic: True) == set()
    ctx.partitions_being_reassigned.add(tps[0])
    assert partitions_to_rebalance(ctx, 10, lambda topic: False) == set()


def test_a_preferred_replica_out_of_the_isr_is_not_a_candidate() -> None:
    # Kafka's canPreferredReplicaBeLeader: broker 3, live but still catching up (not in
    # the ISR), is not elected; broker 1, in the ISR, is.
    tps = partitions(4)
    ctx = context_with([1, 2, 3], {tp: (1 if tp.partition < 2 else 3, 2) for tp in tps})
    for tp in tps:
        lead(ctx, tp, 2)  # ISR (1, 2)
    assert partitions_to_rebalance(ctx, 10, lambda topic: False) == set(tps[:2])
