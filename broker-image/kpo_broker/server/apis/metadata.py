"""ApiVersions, Metadata and DescribeCluster: answered from the metadata cache."""

from __future__ import annotations

from typing import Any

from kafka import errors as kafka_errors
from kafka.protocol.admin import DescribeClusterResponse
from kafka.protocol.metadata import MetadataResponse

from kpo_broker.coordinator.group.records import GROUP_METADATA_TOPIC_NAME, INTERNAL_TOPICS
from kpo_broker.protocol.api import api_versions_response
from kpo_broker.security.acl import AclOperation, ResourceType
from kpo_broker.server.components import BrokerComponents
from kpo_broker.server.request_context import RequestContext
from kpo_broker.zk.data import topic_id_to_uuid

_Topic = MetadataResponse.MetadataResponseTopic
_Partition = _Topic.MetadataResponsePartition
_TOPIC_AUTHORIZATION_FAILED = 29


async def handle_api_versions(broker: BrokerComponents, ctx: RequestContext, request: Any) -> Any:
    """Answer ApiVersions with every client and inter-broker API this broker implements."""
    return api_versions_response(broker.supported_apis)


def _brokers(broker: BrokerComponents, ctx: RequestContext) -> list[Any]:
    out = []
    for info in sorted(broker.metadata_cache.brokers.values(), key=lambda b: b.broker_id):
        endpoint = info.endpoint(ctx.listener)
        if endpoint is not None:
            out.append(
                MetadataResponse.MetadataResponseBroker(
                    node_id=info.broker_id, host=endpoint.host, port=endpoint.port, rack=info.rack
                )
            )
    return out


def _topic_metadata(broker: BrokerComponents, topic: str, version: int) -> Any:
    partitions = broker.metadata_cache.partitions.get(topic)
    if partitions is None:
        return _Topic(
            error_code=kafka_errors.UnknownTopicOrPartitionError.errno,
            name=topic,
            is_internal=False,
            partitions=[],
        )
    items = []
    for index in sorted(partitions):
        meta = partitions[index]
        error = 0
        if meta.leader < 0 or not broker.metadata_cache.alive(meta.leader):
            error = kafka_errors.LeaderNotAvailableError.errno
        elif meta.offline_replicas and version == 0:
            # Only v0 flags missing replicas with an error; later versions list them.
            error = kafka_errors.ReplicaNotAvailableError.errno
        items.append(
            _Partition(
                error_code=error,
                partition_index=index,
                leader_id=meta.leader,
                leader_epoch=meta.leader_epoch,
                replica_nodes=list(meta.replicas),
                isr_nodes=list(meta.isr),
                offline_replicas=list(meta.offline_replicas),
            )
        )
    return _Topic(
        error_code=0,
        name=topic,
        topic_id=topic_id_to_uuid(broker.metadata_cache.topic_ids.get(topic)),
        is_internal=topic in INTERNAL_TOPICS,
        partitions=items,
    )


async def handle_metadata(
    broker: BrokerComponents, ctx: RequestContext, request: Any
) -> MetadataResponse:
    """Answer Metadata (all topics when ``topics`` is null, or v0's empty list).

    Unknown topics are created when the request allows it (v4+: ``allow_auto_topic_creation``)
    and ``auto.create.topics.enable`` is set, and reported as LEADER_NOT_AVAILABLE
    until the controller has elected their leaders, as Kafka does.
    """
    cache = broker.metadata_cache
    auth = broker.auth
    all_topics = request.topics is None or (ctx.api_version == 0 and not request.topics)
    if all_topics:
        names = cache.topics()
    else:
        names = list(dict.fromkeys(t.name for t in request.topics if t.name is not None))
    allow_create = ctx.api_version < 4 or bool(request.allow_auto_topic_creation)
    # Kafka's handleTopicMetadataRequest: Describe on each topic; topics not describable
    # are left out of an all-topics answer and refused by name otherwise, so that
    # their existence is not disclosed. Auto-creation needs Create (cluster or topic).
    describable = auth.filter_authorized(
        ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names, log_if_denied=not all_topics
    )
    creatable: set[str] | None = None
    missing = [n for n in names if n in describable and n not in cache.partitions]
    if (
        missing
        and allow_create
        and broker.config.auto_create_topics_enable
        and not auth.authorize_cluster(ctx, AclOperation.CREATE, log_if_denied=False)
    ):
        creatable = auth.filter_authorized(ctx, AclOperation.CREATE, ResourceType.TOPIC, missing)
    topics = []
    refused = []
    for name in names:
        if name not in describable:
            if not all_topics:
                refused.append(
                    _Topic(
                        error_code=_TOPIC_AUTHORIZATION_FAILED,
                        name=name,
                        is_internal=False,
                        partitions=[],
                    )
                )
        elif (
            name not in cache.partitions
            and allow_create
            and broker.config.auto_create_topics_enable
        ):
            if creatable is not None and name not in creatable:
                refused.append(
                    _Topic(
                        error_code=_TOPIC_AUTHORIZATION_FAILED,
                        name=name,
                        is_internal=name in INTERNAL_TOPICS,
                        partitions=[],
                    )
                )
                continue
            creator = broker.offsets_topic_creator
            if name == GROUP_METADATA_TOPIC_NAME and creator is not None:
                # An internal topic gets its own settings, as Kafka's AutoTopicCreationManager.
                error = await creator.maybe_create()
            else:
                error = await broker.topic_admin.auto_create(name)
            topics.append(_Topic(error_code=error, name=name, is_internal=False, partitions=[]))
        else:
            topics.append(_topic_metadata(broker, name, ctx.api_version))
    cluster_operations: set[int] | None = None  # None: not provided (INT32 min)
    if ctx.api_version >= 8:
        if ctx.api_version <= 10 and request.include_cluster_authorized_operations:
            cluster_operations = set()
            if auth.authorize_cluster(ctx, AclOperation.DESCRIBE):
                cluster_operations = auth.authorized_operations(
                    ctx, ResourceType.CLUSTER, "kafka-cluster"
                )
        if request.include_topic_authorized_operations:
            for topic in topics:
                topic.authorized_operations = auth.authorized_operations(
                    ctx, ResourceType.TOPIC, topic.name
                )
    fields: dict[str, Any] = {}
    if 8 <= ctx.api_version <= 10:
        fields["authorized_operations"] = cluster_operations
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=_brokers(broker, ctx),
        cluster_id=cache.cluster_id,
        controller_id=cache.controller_id if cache.controller_id is not None else -1,
        topics=topics + refused,
        **fields,
    )


async def handle_describe_cluster(
    broker: BrokerComponents, ctx: RequestContext, request: Any
) -> DescribeClusterResponse:
    """Answer DescribeCluster (KIP-700) from the metadata cache."""
    cache = broker.metadata_cache
    brokers = []
    for info in sorted(cache.brokers.values(), key=lambda b: b.broker_id):
        endpoint = info.endpoint(ctx.listener)
        if endpoint is not None:
            brokers.append(
                DescribeClusterResponse.DescribeClusterBroker(
                    broker_id=info.broker_id, host=endpoint.host, port=endpoint.port, rack=info.rack
                )
            )
    # KIP-430: the operations allowed on the cluster, when asked (0 without Describe).
    operations: set[int] | None = None  # None: not provided (INT32 min)
    if request.include_cluster_authorized_operations:
        operations = set()
        if broker.auth.authorize_cluster(ctx, AclOperation.DESCRIBE):
            operations = broker.auth.authorized_operations(
                ctx, ResourceType.CLUSTER, "kafka-cluster"
            )
    return DescribeClusterResponse(
        throttle_time_ms=0,
        error_code=0,
        error_message=None,
        cluster_id=cache.cluster_id or "",
        controller_id=cache.controller_id if cache.controller_id is not None else -1,
        brokers=brokers,
        authorized_operations=operations,
    )
