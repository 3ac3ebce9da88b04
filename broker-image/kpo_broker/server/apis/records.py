"""DeleteRecords (api key 21, KIP-107): ``kafka-delete-records`` and ``Admin.deleteRecords``."""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import DeleteRecordsResponse

from kpo_broker.security.acl import AclOperation, ResourceType
from kpo_broker.server import delete_records
from kpo_broker.server.components import BrokerComponents
from kpo_broker.server.request_context import RequestContext
from kpo_kafka.topic_partition import TopicPartition

_Topic = DeleteRecordsResponse.DeleteRecordsTopicResult
_Partition = _Topic.DeleteRecordsPartitionResult


def _deletion_allowed(broker: BrokerComponents, topic: str) -> bool:
    """Kafka refuses DeleteRecords on a topic compacted without ``delete`` in its policy."""
    policy = [
        p.strip().lower() for p in broker.topic_configs.value(topic, "cleanup.policy").split(",")
    ]
    return "delete" in policy or "compact" not in policy


async def handle_delete_records(
    broker: BrokerComponents, ctx: RequestContext, request: Any
) -> DeleteRecordsResponse:
    """Raise each partition's log start offset and answer its low watermark."""
    offsets = {
        TopicPartition(topic.name, part.partition_index): part.offset
        for topic in request.topics
        for part in topic.partitions
    }
    # Kafka's handleDeleteRecordsRequest: Delete on each topic.
    allowed = broker.auth.filter_authorized(
        ctx, AclOperation.DELETE, ResourceType.TOPIC, (tp.topic for tp in offsets)
    )
    refused = [tp for tp in offsets if tp.topic not in allowed]
    cache = broker.metadata_cache
    results = await delete_records.delete_records(
        broker.replica_manager,
        {tp: offset for tp, offset in offsets.items() if tp.topic in allowed},
        request.timeout_ms,
        cache.alive,
        lambda topic: _deletion_allowed(broker, topic),
        lambda tp: cache.partition(tp.topic, tp.partition) is not None,
    )
    for tp in refused:
        results[tp] = delete_records.DeleteRecordsResult(29)
    by_topic: dict[str, list[Any]] = {}
    for (topic, index), result in results.items():
        by_topic.setdefault(topic, []).append(
            _Partition(
                partition_index=index,
                low_watermark=result.low_watermark,
                error_code=result.error_code,
            )
        )
    return DeleteRecordsResponse(
        throttle_time_ms=0,
        topics=[_Topic(name=t, partitions=p) for t, p in by_topic.items()],
    )
