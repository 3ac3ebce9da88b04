"""Produce, Fetch, ListOffsets and OffsetForLeaderEpoch: the data plane."""

from __future__ import annotations

from typing import Any

from kafka.protocol.consumer import (
    FetchResponse,
    ListOffsetsResponse,
    OffsetForLeaderEpochResponse,
)
from kafka.protocol.producer import ProduceResponse

from kpo_broker.security.acl import AclOperation, ResourceType
from kpo_broker.server import fetch as fetch_module
from kpo_broker.server import offsets, produce
from kpo_broker.server.components import BrokerComponents
from kpo_broker.server.fetch import FetchPartition
from kpo_broker.server.fetch_metadata import FetchMetadata
from kpo_broker.server.fetch_session import FetchContext, SessionlessFetchContext
from kpo_broker.server.request_context import RequestContext
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
_TOPIC_AUTHORIZATION_FAILED = 29
_TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
_TRANSACTIONAL_FLAG = 0x10
_ATTRIBUTES_OFFSET = 21  # baseOffset, batchLength, partitionLeaderEpoch, magic, crc


def _is_transactional(records: bytes) -> bool:
    """Whether the first v2 batch is transactional (``RequestUtils.hasTransactionalRecords``)."""
    if len(records) < _ATTRIBUTES_OFFSET + 2 or records[16] != 2:
        return False
    return bool(int.from_bytes(records[21:23], "big") & _TRANSACTIONAL_FLAG)


async def handle_produce(
    broker: BrokerComponents, ctx: RequestContext, request: Any
) -> ProduceResponse | None:
    """Append the records and answer once ``acks`` are satisfied; acks=0 gets no response.

    Authorization as Kafka's ``handleProduceRequest``: transactional records need Write on
    the request's TransactionalId (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every
    partition); each topic needs Write (else TOPIC_AUTHORIZATION_FAILED).
    """
    entries: dict[TopicPartition, bytes] = {}
    for topic in request.topic_data:
        for part in topic.partition_data:
            entries[TopicPartition(topic.name, part.index)] = bytes(part.records or b"")
    refused: dict[TopicPartition, int] = {}
    if any(_is_transactional(r) for r in entries.values()):
        txn_id = getattr(request, "transactional_id", None)
        if txn_id is None or not broker.auth.authorize(
            ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, txn_id
        ):
            refused = dict.fromkeys(entries, _TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not refused:
        allowed = broker.auth.filter_authorized(
            ctx, AclOperation.WRITE, ResourceType.TOPIC, (tp.topic for tp in entries)
        )
        refused = {tp: _TOPIC_AUTHORIZATION_FAILED for tp in entries if tp.topic not in allowed}
    results: dict[TopicPartition, Any] = {}
    if len(refused) < len(entries):
        results = await produce.append_records(
            broker.replica_manager,
            {tp: r for tp, r in entries.items() if tp not in refused},
            request.acks,
            request.timeout_ms,
            broker.topic_configs.min_insync_replicas,
        )
    if request.acks == 0:
        return None
    for tp, code in refused.items():
        results[tp] = produce.ProduceResult(code)
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
    """Serve consumer and replica fetches, in incremental fetch sessions (KIP-227).

    Kafka's ``handleFetchRequest``: the fetch manager turns the request into a context
    (sessionless, full, incremental or a session error; see
    :mod:`kpo_broker.server.fetch_session`); its partitions are read, and the context
    keeps only what the response must carry. Fetch v4-v6 has no session fields and is
    served sessionless. Record data is sent from the segment files with ``sendfile``
    (see :mod:`kpo_broker.server.zero_copy`).
    """
    fetch_data = {
        TopicPartition(topic.topic, part.partition): FetchPartition(
            TopicPartition(topic.topic, part.partition),
            part.fetch_offset,
            part.partition_max_bytes,
            part.current_leader_epoch if ctx.api_version >= 9 else -1,
            part.log_start_offset if ctx.api_version >= 5 else -1,
        )
        for topic in request.topics
        for part in topic.partitions
    }
    replica_id = request.replica_id if request.replica_id is not None else -1
    context = _fetch_context(broker, ctx, request, replica_id, fetch_data)
    partitions = context.partitions()
    # Kafka's handleFetchRequest: followers need ClusterAction on the cluster, consumers
    # Read on each topic; refused partitions answer TOPIC_AUTHORIZATION_FAILED.
    if replica_id >= 0:
        cluster_ok = broker.auth.authorize_cluster(ctx, AclOperation.CLUSTER_ACTION)
        allowed = {p.tp.topic for p in partitions} if cluster_ok else set()
    else:
        allowed = broker.auth.filter_authorized(
            ctx, AclOperation.READ, ResourceType.TOPIC, (p.tp.topic for p in partitions)
        )
    results: dict[TopicPartition, fetch_module.FetchPartitionResult] = {}
    wanted = [p for p in partitions if p.tp.topic in allowed]
    if wanted or not partitions:
        results = await fetch_module.fetch_messages(
            broker.replica_manager,
            replica_id,
            request.max_wait_ms,
            request.min_bytes,
            request.max_bytes if request.max_bytes is not None else 2**31 - 1,
            wanted,
            broker.replica_manager.maybe_expand_isr if replica_id >= 0 else None,
            leader_quota=broker.replication_quotas.leader if broker.replication_quotas else None,
        )
    for p in partitions:
        if p.tp.topic not in allowed:
            results[p.tp] = fetch_module.FetchPartitionResult(_TOPIC_AUTHORIZATION_FAILED)
    session = context.response(results)
    response = ZeroCopyResponse(None)
    by_topic: dict[str, list[Any]] = {}
    for (topic, index), result in session.partitions.items():
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
        error_code=session.error_code,
        session_id=session.session_id,
        responses=[_FetchTopic(topic=t, partitions=p) for t, p in by_topic.items()],
    )
    return response


def _fetch_context(
    broker: BrokerComponents,
    ctx: RequestContext,
    request: Any,
    replica_id: int,
    fetch_data: dict[TopicPartition, FetchPartition],
) -> FetchContext:
    """Build the request's fetch context; sessionless before Fetch v7 or without a fetch manager."""
    if ctx.api_version < 7 or broker.fetch_manager is None:
        return SessionlessFetchContext(fetch_data)
    to_forget = [
        TopicPartition(topic.topic, index)
        for topic in request.forgotten_topics_data or ()
        for index in topic.partitions
    ]
    metadata = FetchMetadata(request.session_id, request.session_epoch)
    return broker.fetch_manager.new_context(metadata, replica_id >= 0, fetch_data, to_forget)


async def handle_list_offsets(
    broker: BrokerComponents, ctx: RequestContext, request: Any
) -> ListOffsetsResponse:
    """Answer ListOffsets per partition (earliest, latest, max timestamp or by timestamp)."""
    allowed = broker.auth.filter_authorized(
        ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, (t.name for t in request.topics)
    )
    topics = []
    for topic in request.topics:
        parts = []
        if topic.name not in allowed:
            # Kafka's handleListOffsetRequest: Describe on the topic.
            topics.append(
                _ListTopic(
                    name=topic.name,
                    partitions=[
                        _ListPartition(
                            partition_index=part.partition_index,
                            error_code=_TOPIC_AUTHORIZATION_FAILED,
                            timestamp=-1,
                            offset=-1,
                            leader_epoch=-1,
                        )
                        for part in topic.partitions
                    ],
                )
            )
            continue
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
    # ClusterAction (brokers) or Describe on each topic (consumers, KIP-320).
    if broker.auth.authorize_cluster(ctx, AclOperation.CLUSTER_ACTION, log_if_denied=False):
        allowed = {t.topic for t in request.topics}
    else:
        allowed = broker.auth.filter_authorized(
            ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, (t.topic for t in request.topics)
        )
    topics = []
    for topic in request.topics:
        parts = []
        if topic.topic not in allowed:
            refused = [
                _EpochPartition(
                    error_code=_TOPIC_AUTHORIZATION_FAILED,
                    partition=part.partition,
                    leader_epoch=-1,
                    end_offset=-1,
                )
                for part in topic.partitions
            ]
            topics.append(_EpochTopic(topic=topic.topic, partitions=refused))
            continue
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
