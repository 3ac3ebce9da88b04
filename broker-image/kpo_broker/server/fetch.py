"""Fetch: consumer reads up to the HW, replica fetches up to the LEO, with long polling.

As Kafka's ``fetchMessages`` + DelayedFetch: a fetch returns at once when it has
``min_bytes`` of data or an error, else waits up to ``max_wait_ms`` for appends (replica
fetch) or HW moves (consumer fetch) on its partitions. A replica fetch (``replica_id``
>= 0) also tells the leader the follower's LEO (its fetch offset), which may move the
HW and bring the follower back into the ISR (Kafka's ``Partition.updateFollowerFetchState``).
The response holds at most ``max_bytes`` except that the first partition with data returns
at least one whole batch (KIP-74).

Replication quotas (KIP-73, Kafka's ``ReplicaManager.shouldLeaderThrottle``): for a replica
fetch, a partition throttled on this leader's side (``leader.replication.throttled.replicas``
names it on this broker, or is ``*``) returns no records while the fetching follower is
outside the ISR and the leader quota is exceeded; it counts as having no data, so a fetch
left with only throttled data waits out ``max_wait_ms`` and returns empty. The bytes
returned for throttled partitions are recorded in the leader quota once, when the response
is final.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from kpo_broker.log.info import FetchDataInfo
from kpo_broker.server.errors import NotLeaderOrFollowerError, error_code_of
from kpo_broker.server.partition import Partition
from kpo_broker.server.replica_manager import ReplicaManager, now_ms
from kpo_broker.server.replication_quota import ReplicationQuotaManager
from kpo_kafka.topic_partition import TopicPartition

#: Replica id of an ordinary consumer (Kafka's CONSUMER_REPLICA_ID).
CONSUMER_REPLICA_ID = -1


@dataclass(frozen=True)
class FetchPartition:
    """One partition of a fetch request.

    Attributes:
        tp: topic-partition.
        fetch_offset: the first offset wanted (the follower's LEO for replica fetches).
        partition_max_bytes: at most this many bytes for the partition (bytes).
        current_leader_epoch: the fetcher's view of the leader epoch (-1 unknown; KIP-320).
        log_start_offset: a follower's log start offset (Fetch v5+; -1 unknown), which the
            leader's DeleteRecords low watermark waits for (KIP-107).
    """

    tp: TopicPartition
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1
    log_start_offset: int = -1


@dataclass
class FetchPartitionResult:
    """One partition of a fetch response.

    Attributes:
        error_code: Kafka error code.
        high_watermark: the leader's HW (-1 on error).
        log_start_offset: the leader's log start offset (-1 on error).
        records: whole v2 record batches as file slices (sent with ``sendfile``), or None.
    """

    error_code: int = 0
    high_watermark: int = -1
    log_start_offset: int = -1
    records: FetchDataInfo | None = None


def _leader_throttled(
    quota: ReplicationQuotaManager | None, partition: Partition, replica_id: int
) -> bool:
    """Kafka's ``shouldLeaderThrottle``: out-of-ISR follower, throttled, over quota."""
    if quota is None or replica_id < 0:
        return False
    return quota.should_throttle(
        partition.topic,
        partition.partition,
        partition.local_broker_id,
        in_sync=replica_id in partition.isr,
    )


def _record_throttled_bytes(
    quota: ReplicationQuotaManager | None,
    rm: ReplicaManager,
    replica_id: int,
    results: dict[TopicPartition, FetchPartitionResult],
) -> None:
    """Add the bytes sent for leader-side throttled partitions to the leader quota."""
    if quota is None or replica_id < 0:
        return
    sent = 0
    for tp, result in results.items():
        if result.records is None or not result.records.slices:
            continue
        partition = rm.get_partition(tp)
        if partition is None:
            continue
        if quota.is_throttled(tp[0], tp[1], partition.local_broker_id):
            sent += result.records.size_in_bytes
    if sent:
        quota.record(sent)


def _read_once(
    rm: ReplicaManager,
    replica_id: int,
    partitions: list[FetchPartition],
    max_bytes: int,
    quota: ReplicationQuotaManager | None = None,
) -> tuple[dict[TopicPartition, FetchPartitionResult], int]:
    results: dict[TopicPartition, FetchPartitionResult] = {}
    total = 0
    for request in partitions:
        try:
            partition = rm.leader_partition(request.tp, request.current_leader_epoch)
            if _leader_throttled(quota, partition, replica_id):
                results[request.tp] = FetchPartitionResult(
                    0, partition.high_watermark, partition.log.log_start_offset, None
                )
                continue
            plog = partition.log
            if request.fetch_offset == plog.log_end_offset or (
                replica_id < 0
                and request.fetch_offset == partition.high_watermark
                and plog.log_start_offset <= request.fetch_offset
            ):
                # Nothing to read (the common case of an idle partition): what
                # ``Log.read`` answers, without its I/O guard.
                results[request.tp] = FetchPartitionResult(
                    0,
                    partition.high_watermark,
                    plog.log_start_offset,
                    FetchDataInfo(request.fetch_offset),
                )
                continue
            limit = min(request.partition_max_bytes, max(max_bytes - total, 0))
            with rm.guard(partition, "error while reading"):
                data = partition.log.read(
                    request.fetch_offset,
                    limit,
                    max_offset=None if replica_id >= 0 else partition.high_watermark,
                    min_one_message=total == 0,
                )
        except Exception as exc:  # every failure becomes a per-partition error code
            results[request.tp] = FetchPartitionResult(error_code_of(exc))
            continue
        total += data.size_in_bytes
        results[request.tp] = FetchPartitionResult(
            0, partition.high_watermark, partition.log.log_start_offset, data
        )
    return results, total


async def fetch_messages(
    rm: ReplicaManager,
    replica_id: int,
    max_wait_ms: int,
    min_bytes: int,
    max_bytes: int,
    partitions: list[FetchPartition],
    on_follower_caught_up: Callable[[TopicPartition, Partition, int], Awaitable[None]]
    | None = None,
    leader_quota: ReplicationQuotaManager | None = None,
) -> dict[TopicPartition, FetchPartitionResult]:
    """Serve a fetch request, waiting up to ``max_wait_ms`` for ``min_bytes``.

    Args:
        rm: the replica manager.
        replica_id: the fetching broker's id, or -1 for a consumer.
        max_wait_ms: longest wait for ``min_bytes``, ms.
        min_bytes: answer as soon as this many bytes are available.
        max_bytes: response size limit in bytes (soft for the first batch, KIP-74).
        partitions: the partitions in request order.
        on_follower_caught_up: called for each partition whose ISR lacks the follower
            after a replica fetch updated the follower's state (the replica manager's
            ISR expansion hook; an ISR member needs no expansion).
        leader_quota: the leader-side replication quota (KIP-73); None never throttles.

    Returns:
        Result per partition, in request order.
    """
    results = await _fetch(
        rm,
        replica_id,
        max_wait_ms,
        min_bytes,
        max_bytes,
        partitions,
        on_follower_caught_up,
        leader_quota,
    )
    _record_throttled_bytes(leader_quota, rm, replica_id, results)
    for (topic, _), result in results.items():  # BytesOut / ReplicationBytesOut
        if result.records is not None and result.records.slices:
            rm.topic_stats.record_fetch(topic, result.records.size_in_bytes, replica_id >= 0)
    return results


async def _fetch(
    rm: ReplicaManager,
    replica_id: int,
    max_wait_ms: int,
    min_bytes: int,
    max_bytes: int,
    partitions: list[FetchPartition],
    on_follower_caught_up: Callable[[TopicPartition, Partition, int], Awaitable[None]] | None,
    quota: ReplicationQuotaManager | None,
) -> dict[TopicPartition, FetchPartitionResult]:
    if replica_id >= 0:
        await _record_follower_fetch(rm, replica_id, partitions, on_follower_caught_up)
    results, total = _read_once(rm, replica_id, partitions, max_bytes, quota)
    if max_wait_ms <= 0 or total >= min_bytes or any(r.error_code for r in results.values()):
        return results
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max_wait_ms / 1000
    keys = [p.tp for p in partitions]
    while True:
        remaining = deadline - loop.time()
        if remaining <= 0 or not await rm.watchers.wait(keys, remaining):
            break
        results, total = _read_once(rm, replica_id, partitions, max_bytes, quota)
        if total >= min_bytes or any(r.error_code for r in results.values()):
            return results
    results, _ = _read_once(rm, replica_id, partitions, max_bytes, quota)
    return results


async def _record_follower_fetch(
    rm: ReplicaManager,
    replica_id: int,
    partitions: list[FetchPartition],
    on_follower_caught_up: Callable[[TopicPartition, Partition, int], Awaitable[None]] | None,
) -> None:
    now = now_ms()
    caught_up = []
    for request in partitions:
        partition = rm.get_partition(request.tp)
        if partition is None or not partition.is_leader:
            continue
        try:
            if partition.update_follower_fetch_state(
                replica_id, request.fetch_offset, now, request.log_start_offset
            ):
                rm.watchers.notify(request.tp)
        except NotLeaderOrFollowerError:  # not (or no longer) a replica: nothing to record
            continue
        if on_follower_caught_up is not None and replica_id not in partition.isr:
            caught_up.append(on_follower_caught_up(request.tp, partition, replica_id))
    # The partitions' ISR expansions run together (one AlterPartition request carries
    # them all): a follower back on thousands of partitions rejoins at once. The fetch
    # does not wait for the controller's answer; each expansion proposes its change now
    # (the HW counts the follower from then on) and completes in the background.
    if caught_up:
        rm.run_in_background(asyncio.gather(*caught_up))
        await asyncio.sleep(0)
