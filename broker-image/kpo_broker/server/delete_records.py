"""DeleteRecords (KIP-107): raise partitions' log start offsets, wait for the low watermark.

Kafka's ``ReplicaManager.deleteRecords`` and ``DelayedDeleteRecords``: the leader raises
its log start offset to the requested offset (-1: the high watermark) at once; each
follower raises its own to the leader's when its next fetch answers it, and reports it
in the fetch after. The request completes per partition once the low watermark (the
smallest log start offset of the live replicas) reaches the requested offset, or with
REQUEST_TIMED_OUT after ``timeout_ms`` (answering the low watermark reached so far). The
segments below the new start offset are removed by the next retention pass.

Errors per partition, as Kafka: UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER,
OFFSET_OUT_OF_RANGE (negative, or above the high watermark), POLICY_VIOLATION (a topic
whose ``cleanup.policy`` is ``compact`` without ``delete``), REQUEST_TIMED_OUT.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kafka import errors as kafka_errors

from kpo_broker.server.errors import error_code_of
from kpo_broker.server.replica_manager import ReplicaManager
from kpo_kafka.topic_partition import TopicPartition


@dataclass
class DeleteRecordsResult:
    """One partition's outcome.

    Attributes:
        error_code: Kafka error code (0 on success).
        low_watermark: the partition's low watermark when answered (-1 on error).
        error_message: detail for logs (not on the wire).
    """

    error_code: int = 0
    low_watermark: int = -1
    error_message: str | None = None


async def delete_records(
    replica_manager: ReplicaManager,
    offsets: dict[TopicPartition, int],
    timeout_ms: int,
    alive: Callable[[int], bool],
    deletion_allowed: Callable[[str], bool],
    known: Callable[[TopicPartition], bool],
) -> dict[TopicPartition, DeleteRecordsResult]:
    """Delete records before ``offsets`` on the leaders; wait for every live replica.

    Args:
        replica_manager: the broker's replica manager.
        offsets: requested new log start offset per partition (-1: its high watermark).
        timeout_ms: how long to wait for the low watermarks, ms.
        alive: broker id -> whether it is alive (followers of dead brokers are not awaited).
        deletion_allowed: topic -> whether its ``cleanup.policy`` allows deletion.
        known: whether the metadata cache knows a partition (one not hosted here is then
            NOT_LEADER_OR_FOLLOWER rather than UNKNOWN_TOPIC_OR_PARTITION, as in Kafka).

    Returns:
        Result per partition, in the order of ``offsets``.
    """
    results: dict[TopicPartition, DeleteRecordsResult] = {}
    waiting: dict[TopicPartition, int] = {}
    for tp, offset in offsets.items():
        if replica_manager.get_partition(tp) is None:
            error = (
                kafka_errors.NotLeaderForPartitionError
                if known(tp)
                else kafka_errors.UnknownTopicOrPartitionError
            )
            results[tp] = DeleteRecordsResult(error.errno, error_message=str(tp))
            continue
        if not deletion_allowed(tp.topic):
            results[tp] = DeleteRecordsResult(
                kafka_errors.PolicyViolationError.errno,
                error_message=f"Records of partition {tp.topic}-{tp.partition} can not be "
                "deleted due to the configured policy",
            )
            continue
        try:
            partition = replica_manager.leader_partition(tp)
            requested = partition.delete_records_on_leader(offset)
            results[tp] = DeleteRecordsResult(low_watermark=partition.low_watermark(alive))
        except Exception as exc:  # every failure becomes a per-partition error code
            results[tp] = DeleteRecordsResult(error_code_of(exc), error_message=str(exc))
            continue
        replica_manager.watchers.notify(tp)
        waiting[tp] = requested
    if waiting:
        await _wait_for_low_watermarks(replica_manager, waiting, results, timeout_ms, alive)
    return results


def _low_watermark(
    replica_manager: ReplicaManager, tp: TopicPartition, alive: Callable[[int], bool]
) -> int | None:
    """Return the partition's low watermark; None once this broker no longer leads it."""
    partition = replica_manager.get_partition(tp)
    if partition is None or not partition.is_leader:
        return None
    return partition.low_watermark(alive)


async def _wait_for_low_watermarks(
    replica_manager: ReplicaManager,
    waiting: dict[TopicPartition, int],
    results: dict[TopicPartition, DeleteRecordsResult],
    timeout_ms: int,
    alive: Callable[[int], bool],
) -> None:
    """Kafka's ``DelayedDeleteRecords``: done when each low watermark passed its offset."""

    def settled(tp: TopicPartition, required: int) -> bool:
        low = _low_watermark(replica_manager, tp, alive)
        return low is None or low >= required

    await replica_manager.watchers.wait_until(
        waiting, lambda: all(settled(tp, r) for tp, r in waiting.items()), timeout_ms / 1000
    )
    for tp, required in waiting.items():
        low = _low_watermark(replica_manager, tp, alive)
        result = results[tp]
        if low is None:
            result.error_code = kafka_errors.NotLeaderForPartitionError.errno
            result.low_watermark = -1
        elif low < required:
            result.error_code = kafka_errors.RequestTimedOutError.errno
            result.low_watermark = low
        else:
            result.low_watermark = low
