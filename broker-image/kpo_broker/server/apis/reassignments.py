"""AlterPartitionReassignments and ListPartitionReassignments (KIP-455), run by the controller.

Both requests go to the active controller (clients find it in Metadata); any other
broker answers NOT_CONTROLLER (41) so that the client retries there. The work happens
on the controller's event thread (:mod:`kpo_broker.controller.reassignment`); the
handlers only translate between the wire shapes and the controller's futures.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import Any

from kafka import errors as kafka_errors
from kafka.protocol.admin import (
    AlterPartitionReassignmentsResponse,
    ListPartitionReassignmentsResponse,
)

from kpo_broker.security.acl import AclOperation
from kpo_broker.server.components import BrokerComponents
from kpo_broker.server.errors import error_code_of
from kpo_broker.server.request_context import RequestContext
from kpo_kafka.topic_partition import TopicPartition

_AlterTopic = AlterPartitionReassignmentsResponse.ReassignableTopicResponse
_AlterPartition = _AlterTopic.ReassignablePartitionResponse
_ListTopic = ListPartitionReassignmentsResponse.OngoingTopicReassignment
_ListPartition = _ListTopic.OngoingPartitionReassignment

_NOT_CONTROLLER = int(kafka_errors.NotControllerError.errno)
_CLUSTER_AUTHORIZATION_FAILED = 31
_CLUSTER_REFUSED = "Cluster authorization failed."


async def handle_alter_partition_reassignments(
    broker: BrokerComponents, ctx: RequestContext, request: Any
) -> AlterPartitionReassignmentsResponse:
    """Start, change or cancel reassignments (v0); per-partition errors, top-level NOT_CONTROLLER.

    A partition whose ``replicas`` is null cancels its running reassignment. The
    response answers once the reassignments are started (not completed), as Kafka does.
    """
    if not broker.auth.authorize_cluster(ctx, AclOperation.ALTER):  # Kafka: Alter on Cluster
        return _alter_error(_CLUSTER_AUTHORIZATION_FAILED, _CLUSTER_REFUSED)
    controller = broker.controller
    if controller is None or not controller.is_active:
        return _alter_error(_NOT_CONTROLLER, "This broker is not the controller.")
    wanted = {
        TopicPartition(topic.name, p.partition_index): (
            None if p.replicas is None else tuple(p.replicas)
        )
        for topic in request.topics
        for p in topic.partitions
    }
    try:
        results = await asyncio.wrap_future(controller.alter_partition_reassignments(wanted))
    except Exception as exc:
        return _alter_error(error_code_of(exc), str(exc))
    by_topic: dict[str, list[Any]] = defaultdict(list)
    for tp, (code, message) in sorted(results.items()):
        by_topic[tp.topic].append(
            _AlterPartition(partition_index=tp.partition, error_code=code, error_message=message)
        )
    return AlterPartitionReassignmentsResponse(
        throttle_time_ms=0,
        error_code=0,
        error_message=None,
        responses=[_AlterTopic(name=t, partitions=parts) for t, parts in by_topic.items()],
    )


async def handle_list_partition_reassignments(
    broker: BrokerComponents, ctx: RequestContext, request: Any
) -> ListPartitionReassignmentsResponse:
    """List running reassignments (v0): AR, adding and removing replicas per partition.

    A null ``topics`` lists every running reassignment; partitions not being
    reassigned (or unknown) are left out.
    """
    if not broker.auth.authorize_cluster(ctx, AclOperation.DESCRIBE):  # Kafka: Describe
        return _list_error(_CLUSTER_AUTHORIZATION_FAILED, _CLUSTER_REFUSED)
    controller = broker.controller
    if controller is None or not controller.is_active:
        return _list_error(_NOT_CONTROLLER, "This broker is not the controller.")
    partitions = (
        None
        if request.topics is None
        else {TopicPartition(t.name, p) for t in request.topics for p in t.partition_indexes}
    )
    try:
        listed = await asyncio.wrap_future(controller.list_partition_reassignments(partitions))
    except Exception as exc:
        return _list_error(error_code_of(exc), str(exc))
    by_topic: dict[str, list[Any]] = defaultdict(list)
    for tp, assignment in sorted(listed.items()):
        by_topic[tp.topic].append(
            _ListPartition(
                partition_index=tp.partition,
                replicas=list(assignment.replicas),
                adding_replicas=list(assignment.adding_replicas),
                removing_replicas=list(assignment.removing_replicas),
            )
        )
    return ListPartitionReassignmentsResponse(
        throttle_time_ms=0,
        error_code=0,
        error_message=None,
        topics=[_ListTopic(name=t, partitions=parts) for t, parts in by_topic.items()],
    )


def _alter_error(code: int, message: str) -> AlterPartitionReassignmentsResponse:
    return AlterPartitionReassignmentsResponse(
        throttle_time_ms=0, error_code=code, error_message=message, responses=[]
    )


def _list_error(code: int, message: str) -> ListPartitionReassignmentsResponse:
    return ListPartitionReassignmentsResponse(
        throttle_time_ms=0, error_code=code, error_message=message, topics=[]
    )
