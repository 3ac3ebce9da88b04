"""Produce, Fetch, ListOffsets and OffsetForLeaderEpoch: the data plane."""

from __future__ import annotations

from typing import Any

from kafka.protocol.consumer import (
    FetchResponse,
    ListOffsetsResponse,
    OffsetForLeaderEpochResponse,
)
from kafka.protocol.producer import ProduceResponse

from kpo_broker.server import fetch as fetch_module
from kpo_broker.server import offsets, produce
from kpo_broker.server.components import BrokerComponents, RequestContext
from kpo_broker.server.fetch import FetchPartition
from kpo_broker.server.zero_copy import ZeroCopyResponse
from kpo_kafka.topic_partition import TopicPartition

_ProduceTopic = ProduceResponse.TopicProduceResponse
_ProducePartition = _ProduceTopic.PartitionProduceResponse
_RecordError = _ProducePartition.BatchIndexAndErrorMessage
_FetchTopic = FetchResponse.FetchableTopicResponse
_FetchPartition = _FetchTopic.PartitionData
_ListTopic = ListOffsetsResponse.ListOffsetsTopicResponse
_ListPartition = _ListTopic.ListOffsetsPartitionResponse
_EpochTopic = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
_EpochPartition = _EpochTopic.EpochEndOffset


async def handle_produce(
    broker: BrokerComponents, ctx: RequestContext, request: Any
) -> ProduceResponse | None:
    """Append the records and answer once ``acks`` are satisfied; acks=0 gets no response."""
    entries: dict[TopicPartition, bytes] = {}
    for topic in request.topic_data:
        for part in topic.partition_data:
            entries[TopicPartition(topic.name, part.index)] = bytes(part.records or b"")
    results = await produce.append_records(
        broker.replica_manager,
        entries,
        request.acks,
        request.timeout_ms,
        broker.topic_configs.min_insync_replicas,
    )
    if request.acks == 0:
        return None
    by_topic: dict[str, list[Any]] = {}
    for (topic, index), result in results.items():
        by_topic.setdefault(topic, []).append(
            _ProducePartition(
                index=index,
                error_code=result.error_code,
                base_offset=result.base_offset,
                log_append_time_ms=result.log_append_time_ms,
                log_start_offset=result.log_start_offset,
                record_errors=[
                    _RecordError(batch_index=e.batch_index, batch_index_error_message=e.message)
                    for e in result.record_errors
                ],
                error_message=result.error_message,
            )
        )
    return ProduceResponse(
        responses=[_ProduceTopic(name=t, partition_responses=p) for t, p in by_topic.items()],
        throttle_time_ms=0,
    )


async def handle_fetch(
    broker: BrokerComponents, ctx: RequestContext, request: Any
) -> ZeroCopyResponse:
    """Serve consumer and replica fetches (sessionless: session id 0, KIP-227).

    Record data is sent from the segment files with ``sendfile`` (see
    :mod:`kpo_broker.server.zero_copy`).
    """
    partitions = [
        FetchPartition(
            TopicPartition(topic.topic, part.partition),
            part.fetch_offset,
            part.partition_max_bytes,
            part.current_leader_epoch if ctx.api_version >= 9 else -1,
            part.log_start_offset if ctx.api_version >= 5 else -1,
        )
        for topic in request.topics
        for part in topic.partitions
    ]
    replica_id = request.replica_id if request.replica_id is not None else -1
    results = await fetch_module.fetch_messages(
        broker.replica_manager,
        replica_id,
        request.max_wait_ms,
        request.min_bytes,
        request.max_bytes if request.max_bytes is not None else 2**31 - 1,
        partitions,
        broker.replica_manager.maybe_expand_isr if replica_id >= 0 else None,
        leader_quota=broker.replication_quotas.leader if broker.replication_quotas else None,
    )
    response = ZeroCopyResponse(None)
    by_topic: dict[str, list[Any]] = {}
    for (topic, index), result in results.items():
        data = result.records
        records = response.placeholder(data.slices) if data and data.slices else b""
        by_topic.setdefault(topic, []).append(
            _FetchPartition(
                partition_index=index,
                error_code=result.error_code,
                high_watermark=result.high_watermark,
                last_stable_offset=result.high_watermark,
                log_start_offset=result.log_start_offset,
                aborted_transactions=None,
                preferred_read_replica=-1,
                records=records,
            )
        )
    response.message = FetchResponse(
        throttle_time_ms=0,
        error_code=0,
        session_id=0,
        responses=[_FetchTopic(topic=t, partitions=p) for t, p in by_topic.items()],
    )
    return response


async def handle_list_offsets(
    broker: BrokerComponents, ctx: RequestContext, request: Any
) -> ListOffsetsResponse:
    """Answer ListOffsets per partition (earliest, latest, max timestamp or by timestamp)."""
    topics = []
    for topic in request.topics:
        parts = []
        for part in topic.partitions:
            epoch = part.current_leader_epoch if ctx.api_version >= 4 else -1
            result = offsets.list_offset(
                broker.replica_manager,
                TopicPartition(topic.name, part.partition_index),
                part.timestamp,
                epoch,
                request.replica_id,
            )
            parts.append(
                _ListPartition(
                    partition_index=part.partition_index,
                    error_code=result.error_code,
                    timestamp=result.timestamp,
                    offset=result.offset,
                    leader_epoch=result.leader_epoch,
                )
            )
        topics.append(_ListTopic(name=topic.name, partitions=parts))
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics)


async def handle_offset_for_leader_epoch(
    broker: BrokerComponents, ctx: RequestContext, request: Any
) -> OffsetForLeaderEpochResponse:
    """Answer OffsetForLeaderEpoch per partition (KIP-101, KIP-279)."""
    topics = []
    for topic in request.topics:
        parts = []
        for part in topic.partitions:
            epoch = part.current_leader_epoch if ctx.api_version >= 2 else -1
            result = offsets.offset_for_leader_epoch(
                broker.replica_manager,
                TopicPartition(topic.topic, part.partition),
                epoch,
                part.leader_epoch,
            )
            parts.append(
                _EpochPartition(
                    error_code=result.error_code,
                    partition=part.partition,
                    leader_epoch=result.leader_epoch,
                    end_offset=result.end_offset,
                )
            )
        topics.append(_EpochTopic(topic=topic.topic, partitions=parts))
    return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics)
