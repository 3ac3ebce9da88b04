"""ListOffsets and OffsetForLeaderEpoch on the leader.

ListOffsets (KIP-79): timestamp -2 (EARLIEST) gives the log start offset, -1 (LATEST)
the HW for consumers (the LEO for a replica or debug fetcher), -3 (MAX_TIMESTAMP,
KIP-734) the record with the largest timestamp, any other value the first record whose
timestamp is at or after it. OffsetForLeaderEpoch (KIP-101/KIP-279): the end offset of
the requested epoch, i.e. the start offset of the next epoch or the LEO for the
current one, and the largest epoch not above the requested one.
"""

from __future__ import annotations

from dataclasses import dataclass

from kpo_broker.server.errors import error_code_of
from kpo_broker.server.replica_manager import ReplicaManager
from kpo_kafka.topic_partition import TopicPartition

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3
UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


@dataclass(frozen=True)
class ListOffsetResult:
    """One partition's ListOffsets answer: error code, timestamp (ms), offset, leader epoch."""

    error_code: int
    timestamp: int = -1
    offset: int = -1
    leader_epoch: int = UNDEFINED_EPOCH


@dataclass(frozen=True)
class EpochEndOffset:
    """One partition's OffsetForLeaderEpoch answer: error code, leader epoch, end offset."""

    error_code: int
    leader_epoch: int = UNDEFINED_EPOCH
    end_offset: int = UNDEFINED_OFFSET


def list_offset(
    rm: ReplicaManager,
    tp: TopicPartition,
    timestamp: int,
    current_leader_epoch: int = -1,
    replica_id: int = -1,
) -> ListOffsetResult:
    """Answer one partition of a ListOffsets request (see module docstring)."""
    try:
        partition = rm.leader_partition(tp, current_leader_epoch)
    except Exception as exc:  # every failure becomes a per-partition error code
        return ListOffsetResult(error_code_of(exc))
    log = partition.log
    upper = log.log_end_offset if replica_id >= 0 else partition.high_watermark
    cache = log.leader_epoch_cache
    if timestamp == EARLIEST_TIMESTAMP:
        offset = log.log_start_offset
        return ListOffsetResult(0, -1, offset, cache.epoch_for_offset(offset))
    if timestamp == LATEST_TIMESTAMP:
        return ListOffsetResult(0, -1, upper, cache.epoch_for_offset(max(upper - 1, 0)))
    if timestamp == MAX_TIMESTAMP:
        found = log.max_timestamp_and_offset()
    else:
        found = log.fetch_offset_by_timestamp(timestamp)
    if found is None or found[0] >= upper:
        return ListOffsetResult(0, -1, -1, UNDEFINED_EPOCH)
    offset, ts = found
    return ListOffsetResult(0, ts, offset, cache.epoch_for_offset(offset))


def offset_for_leader_epoch(
    rm: ReplicaManager, tp: TopicPartition, current_leader_epoch: int, leader_epoch: int
) -> EpochEndOffset:
    """Answer one partition of an OffsetForLeaderEpoch request (see module docstring)."""
    try:
        partition = rm.leader_partition(tp, current_leader_epoch)
    except Exception as exc:  # every failure becomes a per-partition error code
        return EpochEndOffset(error_code_of(exc))
    log = partition.log
    epoch, end_offset = log.leader_epoch_cache.end_offset_for(leader_epoch, log.log_end_offset)
    return EpochEndOffset(0, epoch, end_offset)
