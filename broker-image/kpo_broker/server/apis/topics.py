"""CreateTopics, DeleteTopics and CreatePartitions.

Validated here, carried out through ZooKeeper.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import (
    CreatePartitionsResponse,
    CreateTopicsResponse,
    DeleteTopicsResponse,
)

from kpo_broker.security.acl import AclOperation, ResourceType
from kpo_broker.server.components import BrokerComponents, RequestContext
from kpo_broker.zk.data import topic_id_to_uuid

_Created = CreateTopicsResponse.CreatableTopicResult
_Deleted = DeleteTopicsResponse.DeletableTopicResult
_Partitions = CreatePartitionsResponse.CreatePartitionsTopicResult
_TOPIC_AUTHORIZATION_FAILED = 29


async def handle_create_topics(
    broker: BrokerComponents, ctx: RequestContext, request: Any
) -> CreateTopicsResponse:
    """Create each topic (or only validate it with ``validate_only``, v1+).

    v7+ answers each created topic's id (KIP-516), known once the controller's
    UpdateMetadata reached this broker (the request waits for that up to ``timeout_ms``).
    """
    # Kafka's handleCreateTopicsRequest: Create on the cluster, or else on each topic;
    # the topic's configs are only shown with DescribeConfigs on it.
    auth = broker.auth
    names = [t.name for t in request.topics]
    if auth.authorize_cluster(ctx, AclOperation.CREATE, log_if_denied=False):
        creatable = set(names)
    else:
        creatable = auth.filter_authorized(ctx, AclOperation.CREATE, ResourceType.TOPIC, names)
    describable = auth.filter_authorized(
        ctx, AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, names, log_if_denied=False
    )
    results = []
    for topic in request.topics:
        if topic.name not in creatable:
            results.append(
                _Created(
                    name=topic.name,
                    topic_id=topic_id_to_uuid(None),
                    error_code=_TOPIC_AUTHORIZATION_FAILED,
                    error_message="Authorization failed.",
                    topic_config_error_code=_TOPIC_AUTHORIZATION_FAILED,
                    num_partitions=-1,
                    replication_factor=-1,
                    configs=None,
                )
            )
            continue
        assignments = {a.partition_index: list(a.broker_ids) for a in topic.assignments or ()}
        configs = {c.name: c.value for c in topic.configs or () if c.value is not None}
        result = await broker.topic_admin.create_topic(
            topic.name,
            topic.num_partitions,
            topic.replication_factor,
            assignments or None,
            configs,
            validate_only=bool(request.validate_only),
            timeout_ms=request.timeout_ms,
        )
        results.append(
            _Created(
                name=topic.name,
                topic_id=topic_id_to_uuid(
                    broker.metadata_cache.topic_ids.get(topic.name)
                    if result.error_code == 0
                    else None
                ),
                error_code=result.error_code,
                error_message=result.message,
                topic_config_error_code=(
                    0 if topic.name in describable else _TOPIC_AUTHORIZATION_FAILED
                ),
                num_partitions=-1,
                replication_factor=-1,
                configs=None,
            )
        )
    return CreateTopicsResponse(throttle_time_ms=0, topics=results)


async def handle_delete_topics(
    broker: BrokerComponents, ctx: RequestContext, request: Any
) -> DeleteTopicsResponse:
    """Queue the topics for deletion and wait for the controller (``timeout_ms``)."""
    names = list(request.topic_names or [t.name for t in request.topics or ()])
    # Kafka's handleDeleteTopicsRequest: Delete on each topic.
    allowed = broker.auth.filter_authorized(ctx, AclOperation.DELETE, ResourceType.TOPIC, names)
    results = await broker.topic_admin.delete_topics(
        [n for n in names if n in allowed], request.timeout_ms
    )
    responses = [
        _Deleted(name=name, error_code=r.error_code, error_message=r.message)
        for name, r in results.items()
    ]
    responses.extend(
        _Deleted(name=name, error_code=_TOPIC_AUTHORIZATION_FAILED, error_message=None)
        for name in dict.fromkeys(names)
        if name not in allowed
    )
    return DeleteTopicsResponse(throttle_time_ms=0, responses=responses)


async def handle_create_partitions(
    broker: BrokerComponents, ctx: RequestContext, request: Any
) -> CreatePartitionsResponse:
    """Grow each topic to ``count`` partitions."""
    # Kafka's handleCreatePartitionsRequest: Alter on each topic.
    allowed = broker.auth.filter_authorized(
        ctx, AclOperation.ALTER, ResourceType.TOPIC, (t.name for t in request.topics)
    )
    results = []
    for topic in request.topics:
        if topic.name not in allowed:
            results.append(
                _Partitions(
                    name=topic.name,
                    error_code=_TOPIC_AUTHORIZATION_FAILED,
                    error_message="The topic authorization is failed.",
                )
            )
            continue
        assignments = [list(a.broker_ids) for a in topic.assignments] if topic.assignments else None
        result = await broker.topic_admin.create_partitions(
            topic.name, topic.count, assignments, bool(request.validate_only), request.timeout_ms
        )
        results.append(
            _Partitions(name=topic.name, error_code=result.error_code, error_message=result.message)
        )
    return CreatePartitionsResponse(throttle_time_ms=0, results=results)
