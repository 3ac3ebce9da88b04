"""Produce: append records on the leaders, then wait for acks.

Kafka's ``appendRecords`` and DelayedProduce.

acks=0 and acks=1 complete after the local append; acks=all (-1) waits until the HW
passes the appended offsets, i.e. every ISR member has the records, or until the
request's ``timeout_ms`` (REQUEST_TIMED_OUT). A partition whose ISR shrank below
``min.insync.replicas`` after the append completes with NOT_ENOUGH_REPLICAS_AFTER_APPEND.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from kafka import errors as kafka_errors

from kpo_broker.coordinator.group.records import INTERNAL_TOPICS
from kpo_broker.log.dir_failure import KafkaStorageError
from kpo_broker.log.errors import InvalidRecordError, RecordError, RecordTooLargeError
from kpo_broker.server.errors import error_code_of
from kpo_broker.server.partition import Partition
from kpo_broker.server.replica_manager import ReplicaManager, now_ms
from kpo_kafka.topic_partition import TopicPartition


@dataclass
class ProduceResult:
    """One partition's produce outcome.

    Attributes:
        error_code: Kafka error code (0 on success).
        base_offset: offset of the first appended record, -1 on error.
        log_start_offset: the log start offset after the append, -1 on error.
        error_message: detail for errors.
        log_append_time_ms: the leader's timestamp of the batches when the topic uses
            LogAppendTime, else -1.
        record_errors: the records that made the batch invalid (KIP-467), if any.
    """

    error_code: int = 0
    base_offset: int = -1
    log_start_offset: int = -1
    error_message: str | None = None
    log_append_time_ms: int = -1
    record_errors: tuple[RecordError, ...] = field(default_factory=tuple)


async def append_records(
    replica_manager: ReplicaManager,
    entries: dict[TopicPartition, bytes],
    required_acks: int,
    timeout_ms: int,
    min_insync_replicas: Callable[[str], int],
    internal_topics_allowed: bool = False,
) -> dict[TopicPartition, ProduceResult]:
    """Append each partition's records and wait for ``required_acks``.

    Args:
        replica_manager: the broker's replica manager.
        entries: records (v2 batches) per topic-partition.
        required_acks: 0, 1 or -1.
        timeout_ms: how long acks=all may wait, ms.
        min_insync_replicas: topic name -> its ``min.insync.replicas``.
        internal_topics_allowed: whether ``__consumer_offsets`` may be written (its
            coordinator only); a client's Produce to it gets INVALID_TOPIC_EXCEPTION,
            as Kafka's ``ReplicaManager.appendToLocalLog`` answers.

    Returns:
        Result per topic-partition, in the order of ``entries``.
    """
    if required_acks not in (-1, 0, 1):
        return {tp: ProduceResult(kafka_errors.InvalidRequiredAcksError.errno) for tp in entries}
    await replica_manager.wait_for_epoch_checkpoints(entries)
    results: dict[TopicPartition, ProduceResult] = {}
    waiting: dict[TopicPartition, int] = {}
    now = now_ms()
    for tp, records in entries.items():
        if tp[0] in INTERNAL_TOPICS and not internal_topics_allowed:
            results[tp] = ProduceResult(
                kafka_errors.InvalidTopicError.errno,
                error_message=f"Cannot append to internal topic {tp[0]}",
            )
            continue
        try:
            partition = replica_manager.leader_partition(tp)
            with replica_manager.guard(partition, "error while appending to"):
                info = partition.append_records_to_leader(
                    records, required_acks, min_insync_replicas(tp[0]), now
                )
        except Exception as exc:  # every failure becomes a per-partition error code
            if isinstance(exc, RecordTooLargeError):  # Kafka's BytesRejectedPerSec
                replica_manager.topic_stats.record_rejected(tp[0], len(records))
            record_errors = exc.record_errors if isinstance(exc, InvalidRecordError) else ()
            results[tp] = ProduceResult(
                error_code_of(exc), error_message=str(exc) or None, record_errors=record_errors
            )
            continue
        replica_manager.topic_stats.record_produce(tp[0], len(records), info.records_count)
        results[tp] = ProduceResult(
            base_offset=info.first_offset,
            log_start_offset=partition.log.log_start_offset,
            log_append_time_ms=info.log_append_time,
        )
        replica_manager.watchers.notify(tp)
        if required_acks == -1:
            waiting[tp] = info.last_offset + 1
    if waiting:
        await _wait_for_acks(replica_manager, waiting, results, timeout_ms, min_insync_replicas)
    return results


async def _wait_for_acks(
    replica_manager: ReplicaManager,
    waiting: dict[TopicPartition, int],
    results: dict[TopicPartition, ProduceResult],
    timeout_ms: int,
    min_insync_replicas: Callable[[str], int],
) -> None:
    # A request waits while this broker stays leader of the partition it appended to, across
    # leader epoch bumps (the controller bumps the epoch when it removes a dead follower from
    # the ISR), as Kafka's DelayedProduce (Partition.checkEnoughReplicasReachOffset checks
    # only that the leader log is local). Losing the leadership, even for a moment (a
    # follower's truncation may have replaced the records), answers NOT_LEADER_OR_FOLLOWER.
    appended_under = {
        tp: (p, p.leadership)
        for tp in waiting
        if (p := replica_manager.get_partition(tp)) is not None
    }

    def still_leader(tp: TopicPartition) -> Partition | None:
        partition = replica_manager.get_partition(tp)
        if partition is None or not partition.is_leader:
            return None
        appended = appended_under.get(tp)
        if appended is None or appended[0] is not partition:
            return None
        return partition if partition.leadership == appended[1] else None

    def settled(tp: TopicPartition, required_offset: int) -> bool:
        partition = still_leader(tp)
        return partition is None or partition.high_watermark >= required_offset

    def all_settled() -> bool:
        return all(settled(tp, offset) for tp, offset in waiting.items())

    await replica_manager.watchers.wait_until(waiting, all_settled, timeout_ms / 1000)
    for tp, required_offset in waiting.items():
        partition = still_leader(tp)
        result = results[tp]
        if partition is None and tp in replica_manager.offline_partitions:
            # Its log dir failed meanwhile: Kafka's DelayedProduce answers the partition's
            # error, KAFKA_STORAGE_ERROR (ReplicaManager.getPartitionOrError).
            result.error_code = KafkaStorageError.error_code
            result.base_offset = -1
        elif partition is None:
            result.error_code = kafka_errors.NotLeaderForPartitionError.errno
            result.base_offset = -1
        elif partition.high_watermark < required_offset:
            result.error_code = kafka_errors.RequestTimedOutError.errno
            result.base_offset = -1
        elif len(partition.isr) < min_insync_replicas(tp[0]):
            result.error_code = kafka_errors.NotEnoughReplicasAfterAppendError.errno
