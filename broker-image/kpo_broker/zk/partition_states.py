"""Partition state znodes (LeaderAndIsr): the per-partition operations of batched writes.

``/brokers/topics/<t>/partitions/<p>/state`` holds the leader, leader epoch, ISR and the
controller epoch; its znode version is the partition epoch. The controller writes many
of them at once (topic creation, broker failure), one multi per partition, pipelined by
:meth:`~kpo_broker.zk.client.KafkaZkClient.create_partition_states` and
:meth:`~kpo_broker.zk.client.KafkaZkClient.update_leader_and_isr`; this module builds
those multis' operations and holds the batch's outcome (Kafka's
``UpdateLeaderAndIsrResult``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kpo_broker.zk import paths
from kpo_broker.zk.data import encode_partition_state
from kpo_broker.zk.model import LeaderAndIsr, LeaderIsrAndControllerEpoch
from kpo_broker.zk.ops import CreateOp, SetDataOp
from kpo_kafka.topic_partition import TopicPartition


@dataclass
class PartitionStateWriteResult:
    """Per-partition outcome of a batched partition state write.

    Attributes:
        written: partitions written -> their LeaderAndIsr with the new partition epoch.
        version_conflicts: partitions whose state znode version did not match (for a
            create: the state znode already exists); the caller re-reads and retries.
        missing: partitions whose znode (or topic) does not exist.
    """

    written: dict[TopicPartition, LeaderAndIsr] = field(default_factory=dict)
    version_conflicts: set[TopicPartition] = field(default_factory=set)
    missing: set[TopicPartition] = field(default_factory=set)


def state_path(tp: TopicPartition) -> str:
    """Return the partition's state znode, ``/brokers/topics/<t>/partitions/<p>/state``."""
    return paths.partition_state_path(tp.topic, tp.partition)


def create_partition_state_ops(
    tp: TopicPartition, state: LeaderIsrAndControllerEpoch, with_parent: bool
) -> list[CreateOp]:
    """Return the operations creating a new partition's state znode.

    Args:
        tp: the partition.
        state: its first leader, ISR and the controller epoch.
        with_parent: also create ``partitions/<p>`` first (False when it already exists).
    """
    state_op = CreateOp(state_path(tp), encode_partition_state(state))
    parent = CreateOp(paths.partition_path(tp.topic, tp.partition))
    return [parent, state_op] if with_parent else [state_op]


def update_partition_state_op(
    tp: TopicPartition, leader_and_isr: LeaderAndIsr, controller_epoch: int
) -> SetDataOp:
    """Return the compare-and-set writing a partition's new state.

    The expected version is ``leader_and_isr.partition_epoch`` (Kafka's
    ``LeaderAndIsr.zkVersion``).
    """
    data = encode_partition_state(LeaderIsrAndControllerEpoch(leader_and_isr, controller_epoch))
    return SetDataOp(state_path(tp), data, leader_and_isr.partition_epoch)
