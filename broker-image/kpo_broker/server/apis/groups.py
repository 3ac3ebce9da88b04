"""The group APIs (FindCoordinator to OffsetDelete), decoded and encoded per version.

FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
OffsetFetch, ListGroups, DescribeGroups, DeleteGroups and OffsetDelete.

Decoding and encoding per version, as Kafka's ``KafkaApis`` does; the group logic is
the coordinator's (:mod:`kpo_broker.coordinator.group`). FindCoordinator has
``__consumer_offsets`` created on first use (:mod:`kpo_broker.server.offsets_topic`) and
answers COORDINATOR_NOT_AVAILABLE until the group's partition has a live leader.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any

from kafka.protocol.admin import (
    DeleteGroupsResponse,
    DescribeGroupsResponse,
    ListGroupsResponse,
)
from kafka.protocol.consumer.group import (
    HeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupResponse,
    OffsetCommitResponse,
    OffsetDeleteResponse,
    OffsetFetchResponse,
    SyncGroupResponse,
)
from kafka.protocol.metadata import FindCoordinatorResponse

from kpo_broker.coordinator.group.coordinator import GroupCoordinator, MemberIdentity
from kpo_broker.coordinator.group.errors import Errors
from kpo_broker.coordinator.group.member import JoinResult, SyncResult
from kpo_broker.coordinator.group.records import GROUP_METADATA_TOPIC_NAME, OffsetAndMetadata
from kpo_broker.security.acl import AclOperation, ResourceType
from kpo_broker.server.components import BrokerComponents
from kpo_broker.server.request_context import RequestContext
from kpo_kafka.topic_partition import TopicPartition

log = logging.getLogger(__name__)

#: FindCoordinator key types (Kafka's ``CoordinatorType``).
KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1
#: OffsetCommit v2-v4 ``retention_time_ms`` meaning "the broker's retention".
DEFAULT_RETENTION_TIME = -1
_TOPIC_AUTHORIZATION_FAILED = 29
_GROUP_AUTHORIZATION_FAILED = 30
_TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53


def _group_allowed(
    broker: BrokerComponents, ctx: RequestContext, operation: AclOperation, group_id: str
) -> bool:
    """``operation`` on the Group (Kafka's group APIs: Read to join, Describe to look, Delete)."""
    return broker.auth.authorize(ctx, operation, ResourceType.GROUP, group_id)


def _coordinator(broker: BrokerComponents) -> GroupCoordinator:
    coordinator = broker.group_coordinator
    if coordinator is None:
        raise RuntimeError("the group coordinator is not running")
    return coordinator


def _client_host(ctx: RequestContext) -> str:
    return f"/{ctx.peer[0]}" if ctx.peer else "/unknown"


# ---------------------------------------------------------------- FindCoordinator
async def _find_group_coordinator(
    broker: BrokerComponents, ctx: RequestContext, key: str
) -> tuple[int, int, str, int]:
    """Kafka's ``getCoordinator`` for a group: (error, node id, host, port)."""
    coordinator = _coordinator(broker)
    cache = broker.metadata_cache
    partitions = cache.partitions.get(GROUP_METADATA_TOPIC_NAME)
    if not partitions:
        if broker.offsets_topic_creator is not None:
            await broker.offsets_topic_creator.maybe_create()
        return Errors.COORDINATOR_NOT_AVAILABLE, -1, "", -1
    meta = partitions.get(coordinator.partition_for(key))
    if meta is None or meta.leader < 0:
        return Errors.COORDINATOR_NOT_AVAILABLE, -1, "", -1
    info = cache.brokers.get(meta.leader)
    endpoint = info.endpoint(ctx.listener) if info is not None else None
    if endpoint is None:
        return Errors.COORDINATOR_NOT_AVAILABLE, -1, "", -1
    return Errors.NONE, meta.leader, endpoint.host, endpoint.port


async def _find(
    broker: BrokerComponents, ctx: RequestContext, key_type: int, key: str
) -> tuple[int, str | None, int, str, int]:
    # Kafka's getCoordinator: Describe on the Group or TransactionalId named.
    if key_type == KEY_TYPE_GROUP and not _group_allowed(broker, ctx, AclOperation.DESCRIBE, key):
        return _GROUP_AUTHORIZATION_FAILED, "Group authorization failed.", -1, "", -1
    if key_type == KEY_TYPE_TRANSACTION and not broker.auth.authorize(
        ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key
    ):
        return (
            _TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            "Transactional Id authorization failed.",
            -1,
            "",
            -1,
        )
    if key_type == KEY_TYPE_GROUP:
        error, node, host, port = await _find_group_coordinator(broker, ctx, key)
        return error, None, node, host, port
    if key_type == KEY_TYPE_TRANSACTION:
        return (
            Errors.COORDINATOR_NOT_AVAILABLE,
            "this broker has no transaction coordinator",
            -1,
            "",
            -1,
        )
    return Errors.INVALID_REQUEST, f"unknown coordinator key type {key_type}", -1, "", -1


async def handle_find_coordinator(
    broker: BrokerComponents, ctx: RequestContext, request: Any
) -> FindCoordinatorResponse:
    """Answer FindCoordinator: one key (v0-v3) or a batch of keys (v4+, KIP-699)."""
    key_type = request.key_type if ctx.api_version >= 1 else KEY_TYPE_GROUP
    if ctx.api_version < 4:
        error, message, node, host, port = await _find(broker, ctx, key_type, request.key)
        return FindCoordinatorResponse(
            throttle_time_ms=0,
            error_code=error,
            error_message=message,
            node_id=node,
            host=host,
            port=port,
        )
    coordinators = []
    for key in request.coordinator_keys:
        error, message, node, host, port = await _find(broker, ctx, key_type, key)
        coordinators.append(
            FindCoordinatorResponse.Coordinator(
                key=key, node_id=node, host=host, port=port, error_code=error, error_message=message
            )
        )
    return FindCoordinatorResponse(throttle_time_ms=0, coordinators=coordinators)


# ---------------------------------------------------------------- membership
async def handle_join_group(
    broker: BrokerComponents, ctx: RequestContext, request: Any
) -> JoinGroupResponse:
    """Answer JoinGroup once the rebalance completes (the request is parked until then)."""
    v = ctx.api_version
    if not _group_allowed(broker, ctx, AclOperation.READ, request.group_id):
        return JoinGroupResponse(
            throttle_time_ms=0,
            error_code=_GROUP_AUTHORIZATION_FAILED,
            generation_id=-1,
            protocol_type=None,
            protocol_name=None if v >= 7 else "",
            leader="",
            skip_assignment=False,
            member_id="",
            members=[],
        )
    group_instance_id = request.group_instance_id if v >= 5 else None
    future: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()

    def answer(result: JoinResult) -> None:
        if not future.done():
            future.set_result(result)

    _coordinator(broker).handle_join_group(
        group_id=request.group_id,
        member_id=request.member_id or "",
        group_instance_id=group_instance_id,
        require_known_member_id=v >= 4 and group_instance_id is None,
        support_skipping_assignment=v >= 9,
        client_id=ctx.client_id or "",
        client_host=_client_host(ctx),
        rebalance_timeout_ms=request.rebalance_timeout_ms if v >= 1 else request.session_timeout_ms,
        session_timeout_ms=request.session_timeout_ms,
        protocol_type=request.protocol_type,
        protocols=[(p.name, bytes(p.metadata or b"")) for p in request.protocols],
        callback=answer,
        reason=request.reason if v >= 8 else None,
    )
    result = await future
    protocol_name = result.protocol_name
    if protocol_name is None and v < 7:
        protocol_name = ""
    return JoinGroupResponse(
        throttle_time_ms=0,
        error_code=result.error,
        generation_id=result.generation_id,
        protocol_type=result.protocol_type,
        protocol_name=protocol_name,
        leader=result.leader_id,
        skip_assignment=result.skip_assignment,
        member_id=result.member_id,
        members=[
            JoinGroupResponse.JoinGroupResponseMember(
                member_id=m.member_id, group_instance_id=m.group_instance_id, metadata=m.metadata
            )
            for m in result.members
        ],
    )


async def handle_sync_group(
    broker: BrokerComponents, ctx: RequestContext, request: Any
) -> SyncGroupResponse:
    """Answer SyncGroup once the leader's assignment is stored (parked until then)."""
    v = ctx.api_version
    if not _group_allowed(broker, ctx, AclOperation.READ, request.group_id):
        return SyncGroupResponse(
            throttle_time_ms=0,
            error_code=_GROUP_AUTHORIZATION_FAILED,
            protocol_type=None,
            protocol_name=None,
            assignment=b"",
        )
    future: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()

    def answer(result: SyncResult) -> None:
        if not future.done():
            future.set_result(result)

    _coordinator(broker).handle_sync_group(
        group_id=request.group_id,
        generation_id=request.generation_id,
        member_id=request.member_id,
        protocol_type=request.protocol_type if v >= 5 else None,
        protocol_name=request.protocol_name if v >= 5 else None,
        group_instance_id=request.group_instance_id if v >= 3 else None,
        assignment={a.member_id: bytes(a.assignment or b"") for a in request.assignments or ()},
        callback=answer,
    )
    result = await future
    return SyncGroupResponse(
        throttle_time_ms=0,
        error_code=result.error,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        assignment=result.assignment,
    )


async def handle_heartbeat(
    broker: BrokerComponents, ctx: RequestContext, request: Any
) -> HeartbeatResponse:
    """Answer Heartbeat (REBALANCE_IN_PROGRESS tells the member to rejoin)."""
    if not _group_allowed(broker, ctx, AclOperation.READ, request.group_id):
        return HeartbeatResponse(throttle_time_ms=0, error_code=_GROUP_AUTHORIZATION_FAILED)
    error = _coordinator(broker).handle_heartbeat(
        request.group_id,
        request.member_id,
        request.group_instance_id if ctx.api_version >= 3 else None,
        request.generation_id,
    )
    return HeartbeatResponse(throttle_time_ms=0, error_code=error)


async def handle_leave_group(
    broker: BrokerComponents, ctx: RequestContext, request: Any
) -> LeaveGroupResponse:
    """Answer LeaveGroup: one member (v0-v2) or a batch by member or instance id (v3+)."""
    v = ctx.api_version
    if not _group_allowed(broker, ctx, AclOperation.READ, request.group_id):
        return LeaveGroupResponse(
            throttle_time_ms=0, error_code=_GROUP_AUTHORIZATION_FAILED, members=[]
        )
    if v < 3:
        leaving = [MemberIdentity(request.member_id)]
    else:
        leaving = [
            MemberIdentity(m.member_id or "", m.group_instance_id, m.reason if v >= 5 else None)
            for m in request.members
        ]
    result = _coordinator(broker).handle_leave_group(request.group_id, leaving)
    if v < 3:
        error = result.error or (result.members[0][1] if result.members else 0)
        return LeaveGroupResponse(throttle_time_ms=0, error_code=error, members=[])
    return LeaveGroupResponse(
        throttle_time_ms=0,
        error_code=result.error,
        members=[
            LeaveGroupResponse.MemberResponse(
                member_id=m.member_id, group_instance_id=m.group_instance_id, error_code=code
            )
            for m, code in result.members
        ],
    )


# ---------------------------------------------------------------- offsets
async def handle_offset_commit(
    broker: BrokerComponents, ctx: RequestContext, request: Any
) -> OffsetCommitResponse:
    """Commit offsets; answered after the records are replicated (``offsets.commit.*``).

    Partitions of unknown topics get UNKNOWN_TOPIC_OR_PARTITION, as Kafka answers.
    """
    v = ctx.api_version
    now = int(time.time() * 1000)
    retention = request.retention_time_ms if 2 <= v <= 4 else DEFAULT_RETENTION_TIME
    cache = broker.metadata_cache
    errors: dict[TopicPartition, int] = {}
    offsets: dict[TopicPartition, OffsetAndMetadata] = {}
    # Kafka's handleOffsetCommitRequest: Read on the Group (else every partition is
    # refused), then Read on each topic.
    group_ok = _group_allowed(broker, ctx, AclOperation.READ, request.group_id)
    readable = (
        broker.auth.filter_authorized(
            ctx, AclOperation.READ, ResourceType.TOPIC, (t.name for t in request.topics)
        )
        if group_ok
        else set()
    )
    for topic in request.topics:
        known = cache.partitions.get(topic.name)
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition_index)
            if not group_ok:
                errors[tp] = _GROUP_AUTHORIZATION_FAILED
                continue
            if topic.name not in readable:
                errors[tp] = _TOPIC_AUTHORIZATION_FAILED
                continue
            if known is None or p.partition_index not in known:
                errors[tp] = Errors.UNKNOWN_TOPIC_OR_PARTITION
                continue
            epoch = p.committed_leader_epoch if v >= 6 else -1
            offsets[tp] = OffsetAndMetadata(
                offset=p.committed_offset,
                leader_epoch=None if epoch is None or epoch < 0 else epoch,
                metadata=p.committed_metadata or "",
                commit_timestamp=now,
                expire_timestamp=None if retention == DEFAULT_RETENTION_TIME else now + retention,
            )
    if offsets:
        errors.update(
            await _coordinator(broker).handle_commit_offsets(
                request.group_id,
                request.member_id or "",
                request.group_instance_id if v >= 7 else None,
                request.generation_id_or_member_epoch,
                offsets,
            )
        )
    by_topic: dict[str, list[Any]] = {}
    for topic in request.topics:
        for p in topic.partitions:
            code = errors.get(TopicPartition(topic.name, p.partition_index), 0)
            by_topic.setdefault(topic.name, []).append(
                OffsetCommitResponse.OffsetCommitResponseTopic.OffsetCommitResponsePartition(
                    partition_index=p.partition_index, error_code=code
                )
            )
    return OffsetCommitResponse(
        throttle_time_ms=0,
        topics=[
            OffsetCommitResponse.OffsetCommitResponseTopic(name=name, partitions=parts)
            for name, parts in by_topic.items()
        ],
    )


@dataclass(frozen=True)
class _Refused:
    """An OffsetFetch partition the principal may not describe (Kafka's UNAUTHORIZED_PARTITION)."""

    offset: int = -1
    leader_epoch: int = -1
    metadata: str = ""
    error: int = _TOPIC_AUTHORIZATION_FAILED


def _fetch_group(
    broker: BrokerComponents,
    ctx: RequestContext,
    group_id: str,
    topics: list[tuple[str, list[int]]] | None,
    require_stable: bool,
) -> tuple[int, dict[str, list[tuple[int, Any]]]]:
    """One group's committed offsets, authorized as Kafka's ``handleOffsetFetchRequest``.

    Describe on the Group (else GROUP_AUTHORIZATION_FAILED); topics the principal may not
    describe are refused by name, or left out of an all-topics answer.
    """
    if not _group_allowed(broker, ctx, AclOperation.DESCRIBE, group_id):
        return _GROUP_AUTHORIZATION_FAILED, {}
    auth = broker.auth
    refused: list[tuple[str, list[int]]] = []
    if topics is not None:
        describable = auth.filter_authorized(
            ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, (name for name, _ in topics)
        )
        refused = [(name, indexes) for name, indexes in topics if name not in describable]
        topics = [(name, indexes) for name, indexes in topics if name in describable]
    partitions = (
        None
        if topics is None
        else [TopicPartition(name, index) for name, indexes in topics for index in indexes]
    )
    error: int = 0
    fetched: dict[TopicPartition, Any] = {}
    if partitions is None or partitions:
        error, fetched = _coordinator(broker).handle_fetch_offsets(
            group_id, require_stable, partitions
        )
    by_topic: dict[str, list[tuple[int, Any]]] = {}
    if error:
        return error, by_topic
    describable_all = (
        auth.filter_authorized(
            ctx,
            AclOperation.DESCRIBE,
            ResourceType.TOPIC,
            {tp.topic for tp in fetched},
            log_if_denied=False,
        )
        if topics is None
        else None
    )
    for tp, value in fetched.items():
        if describable_all is None or tp.topic in describable_all:
            by_topic.setdefault(tp.topic, []).append((tp.partition, value))
    for name, indexes in refused:
        by_topic.setdefault(name, []).extend((i, _Refused()) for i in indexes)
    return 0, by_topic


async def handle_offset_fetch(
    broker: BrokerComponents, ctx: RequestContext, request: Any
) -> OffsetFetchResponse:
    """Answer OffsetFetch for one group (v1-v7) or several (v8+); null topics: all."""
    v = ctx.api_version
    require_stable = bool(request.require_stable) if v >= 7 else False
    if v < 8:
        topics = (
            None
            if request.topics is None
            else [(t.name, list(t.partition_indexes)) for t in request.topics]
        )
        error, by_topic = _fetch_group(broker, ctx, request.group_id, topics, require_stable)
        topic_cls = OffsetFetchResponse.OffsetFetchResponseTopic
        partition_cls = topic_cls.OffsetFetchResponsePartition
        if error and v < 2:
            # v1 has no top-level error: every requested partition carries it.
            return OffsetFetchResponse(
                throttle_time_ms=0,
                topics=[
                    topic_cls(
                        name=name,
                        partitions=[
                            partition_cls(
                                partition_index=i,
                                committed_offset=-1,
                                committed_leader_epoch=-1,
                                metadata="",
                                error_code=error,
                            )
                            for i in indexes
                        ],
                    )
                    for name, indexes in topics or ()
                ],
                error_code=error,
            )
        return OffsetFetchResponse(
            throttle_time_ms=0,
            topics=[
                topic_cls(
                    name=name,
                    partitions=[
                        partition_cls(
                            partition_index=i,
                            committed_offset=f.offset,
                            committed_leader_epoch=f.leader_epoch,
                            metadata=f.metadata,
                            error_code=f.error,
                        )
                        for i, f in parts
                    ],
                )
                for name, parts in by_topic.items()
            ],
            error_code=error,
        )
    group_cls = OffsetFetchResponse.OffsetFetchResponseGroup
    group_topic_cls = group_cls.OffsetFetchResponseTopics
    group_partition_cls = group_topic_cls.OffsetFetchResponsePartitions
    groups = []
    for group in request.groups:
        topics = (
            None
            if group.topics is None
            else [(t.name, list(t.partition_indexes)) for t in group.topics]
        )
        error, by_topic = _fetch_group(broker, ctx, group.group_id, topics, require_stable)
        groups.append(
            group_cls(
                group_id=group.group_id,
                topics=[
                    group_topic_cls(
                        name=name,
                        partitions=[
                            group_partition_cls(
                                partition_index=i,
                                committed_offset=f.offset,
                                committed_leader_epoch=f.leader_epoch,
                                metadata=f.metadata,
                                error_code=f.error,
                            )
                            for i, f in parts
                        ],
                    )
                    for name, parts in by_topic.items()
                ],
                error_code=error,
            )
        )
    return OffsetFetchResponse(throttle_time_ms=0, groups=groups)


# ---------------------------------------------------------------- admin
async def handle_list_groups(
    broker: BrokerComponents, ctx: RequestContext, request: Any
) -> ListGroupsResponse:
    """List the groups this broker coordinates (v4+: by state, v5+: by type)."""
    v = ctx.api_version
    states = set(request.states_filter or ()) if v >= 4 else set()
    types = set(request.types_filter or ()) if v >= 5 else set()
    error, groups = _coordinator(broker).handle_list_groups(states, types)
    # Kafka's handleListGroupsRequest: every group with Describe on the cluster, else only
    # the groups the principal may describe.
    auth = broker.auth
    if not auth.authorize_cluster(ctx, AclOperation.DESCRIBE, log_if_denied=False):
        groups = [
            g
            for g in groups
            if auth.authorize(
                ctx, AclOperation.DESCRIBE, ResourceType.GROUP, g.group_id, log_if_denied=False
            )
        ]
    return ListGroupsResponse(
        throttle_time_ms=0,
        error_code=error,
        groups=[
            ListGroupsResponse.ListedGroup(
                group_id=g.group_id,
                protocol_type=g.protocol_type,
                group_state=g.state,
                group_type=g.group_type,
            )
            for g in groups
        ],
    )


async def handle_describe_groups(
    broker: BrokerComponents, ctx: RequestContext, request: Any
) -> DescribeGroupsResponse:
    """Describe each group: state, protocol and members with metadata and assignment."""
    coordinator = _coordinator(broker)
    described = []
    include_operations = ctx.api_version >= 3 and bool(request.include_authorized_operations)
    for group_id in request.groups:
        if not _group_allowed(broker, ctx, AclOperation.DESCRIBE, group_id):
            described.append(
                DescribeGroupsResponse.DescribedGroup(
                    error_code=_GROUP_AUTHORIZATION_FAILED,
                    group_id=group_id,
                    group_state="",
                    protocol_type="",
                    protocol_data="",
                    members=[],
                    authorized_operations=None,
                )
            )
            continue
        error, summary = coordinator.handle_describe_group(group_id)
        described.append(
            DescribeGroupsResponse.DescribedGroup(
                error_code=error,
                group_id=group_id,
                group_state=summary.state,
                protocol_type=summary.protocol_type,
                protocol_data=summary.protocol,
                members=[
                    DescribeGroupsResponse.DescribedGroup.DescribedGroupMember(
                        member_id=m.member_id,
                        group_instance_id=m.group_instance_id,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        member_metadata=m.metadata,
                        member_assignment=m.assignment,
                    )
                    for m in summary.members
                ],
                authorized_operations=(
                    broker.auth.authorized_operations(ctx, ResourceType.GROUP, group_id)
                    if include_operations
                    else None
                ),
            )
        )
    return DescribeGroupsResponse(throttle_time_ms=0, groups=described)


async def handle_delete_groups(
    broker: BrokerComponents, ctx: RequestContext, request: Any
) -> DeleteGroupsResponse:
    """Delete empty groups with their offsets."""
    names = list(dict.fromkeys(request.groups_names))
    allowed = broker.auth.filter_authorized(ctx, AclOperation.DELETE, ResourceType.GROUP, names)
    results = _coordinator(broker).handle_delete_groups([g for g in names if g in allowed])
    results.update({g: _GROUP_AUTHORIZATION_FAILED for g in names if g not in allowed})
    return DeleteGroupsResponse(
        throttle_time_ms=0,
        results=[
            DeleteGroupsResponse.DeletableGroupResult(group_id=g, error_code=code)
            for g, code in results.items()
        ],
    )


async def handle_offset_delete(
    broker: BrokerComponents, ctx: RequestContext, request: Any
) -> OffsetDeleteResponse:
    """Delete a group's committed offsets of partitions it does not consume (KIP-496)."""
    if not _group_allowed(broker, ctx, AclOperation.DELETE, request.group_id):
        return OffsetDeleteResponse(
            error_code=_GROUP_AUTHORIZATION_FAILED, throttle_time_ms=0, topics=[]
        )
    readable = broker.auth.filter_authorized(
        ctx, AclOperation.READ, ResourceType.TOPIC, (t.name for t in request.topics)
    )
    cache = broker.metadata_cache
    unknown: dict[TopicPartition, int] = {}
    partitions = []
    for topic in request.topics:
        known = cache.partitions.get(topic.name)
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition_index)
            if topic.name not in readable:
                unknown[tp] = _TOPIC_AUTHORIZATION_FAILED
            elif known is None or p.partition_index not in known:
                unknown[tp] = Errors.UNKNOWN_TOPIC_OR_PARTITION
            else:
                partitions.append(tp)
    error, results = _coordinator(broker).handle_delete_offsets(request.group_id, partitions)
    topic_cls = OffsetDeleteResponse.OffsetDeleteResponseTopic
    partition_cls = topic_cls.OffsetDeleteResponsePartition
    if error:
        return OffsetDeleteResponse(error_code=error, throttle_time_ms=0, topics=[])
    results.update(unknown)
    by_topic: dict[str, list[Any]] = {}
    for tp, code in results.items():
        by_topic.setdefault(tp.topic, []).append(
            partition_cls(partition_index=tp.partition, error_code=code)
        )
    return OffsetDeleteResponse(
        error_code=0,
        throttle_time_ms=0,
        topics=[topic_cls(name=name, partitions=parts) for name, parts in by_topic.items()],
    )
