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
from kpo_broker.server.components import BrokerComponents
from kpo_broker.server.request_context import RequestContext
from kpo_broker.zk.data import topic_id_to_uuid, uuid_to_topic_id

_Created = CreateTopicsResponse.CreatableTopicResult
_Deleted = DeleteTopicsResponse.DeletableTopicResult
_Partitions = CreatePartitionsResponse.CreatePartitionsTopicResult
_TOPIC_AUTHORIZATION_FAILED = 29

INVALID_REQUEST = 42
UNKNOWN_TOPIC_ID = 100


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
    """Queue the topics for deletion and wait for the controller (``timeout_ms``).

    v6 (KIP-516) names each topic by name or by topic id, as Kafka's
    ``KafkaApis.handleDeleteTopicsRequest``: an id is resolved through the metadata (an
    unknown one is UNKNOWN_TOPIC_ID, answered without a name); a topic given both ways makes
    the whole request INVALID_REQUEST; each answer carries the id as the request gave it.
    """
    wanted: list[tuple[str | None, str | None]]
    if ctx.api_version < 6:
        wanted = [(name, None) for name in request.topic_names or ()]
    else:
        wanted = [(t.name, uuid_to_topic_id(t.topic_id)) for t in request.topics or ()]
    if any(name is not None and topic_id is not None for name, topic_id in wanted):
        message = "Topic name and topic ID can not both be specified."
        return DeleteTopicsResponse(
            throttle_time_ms=0,
            responses=[
                _Deleted(
                    name=name,
                    topic_id=topic_id_to_uuid(topic_id),
                    error_code=INVALID_REQUEST,
                    error_message=message,
                )
                for name, topic_id in wanted
            ],
        )
    by_id = {i: n for n, i in broker.metadata_cache.topic_ids.items()}
    resolved = [
        (name if topic_id is None else by_id.get(topic_id), topic_id) for name, topic_id in wanted
    ]
    named = [name for name, _ in resolved if name is not None]
    # Kafka's handleDeleteTopicsRequest: Delete on each topic.
    allowed = broker.auth.filter_authorized(ctx, AclOperation.DELETE, ResourceType.TOPIC, named)
    names = [name for name in named if name in allowed]
    results = await broker.topic_admin.delete_topics(names, request.timeout_ms) if names else {}
    responses = []
    for name, topic_id in resolved:
        text: str | None
        if name is None:
            code, text = UNKNOWN_TOPIC_ID, None  # as Kafka: the code alone
        elif name not in allowed:
            code, text = _TOPIC_AUTHORIZATION_FAILED, None
        else:
            code, text = results[name].error_code, results[name].message
        responses.append(
            _Deleted(
                name=name,
                topic_id=topic_id_to_uuid(topic_id),
                error_code=code,
                error_message=text,
            )
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
