"""ElectLeaders (KIP-183, KIP-460): preferred or unclean leader elections, run by the controller."""

from __future__ import annotations

import asyncio
from typing import Any

from kafka import errors as kafka_errors
from kafka.protocol.admin import ElectLeadersResponse

from kpo_broker.controller.events import ElectionType
from kpo_broker.security.acl import AclOperation
from kpo_broker.server.components import BrokerComponents
from kpo_broker.server.errors import error_code_of
from kpo_broker.server.request_context import RequestContext
from kpo_kafka.topic_partition import TopicPartition

_Result = ElectLeadersResponse.ReplicaElectionResult
_PartitionResult = _Result.PartitionResult


async def handle_elect_leaders(
    broker: BrokerComponents, ctx: RequestContext, request: Any
) -> ElectLeadersResponse:
    """Forward the election to the active controller; NOT_CONTROLLER (41) elsewhere.

    A null ``topic_partitions`` means every partition. v0 is always a preferred election.
    An unknown election type is answered with INVALID_REQUEST (42).
    """
    if not broker.auth.authorize_cluster(ctx, AclOperation.ALTER):
        # Kafka's handleElectLeaders: Alter on the cluster; each named partition refused too.
        code = int(kafka_errors.ClusterAuthorizationFailedError.errno)
        return ElectLeadersResponse(
            throttle_time_ms=0,
            error_code=code,
            replica_election_results=[
                _Result(
                    topic=t.topic,
                    partition_result=[
                        _PartitionResult(partition_id=p, error_code=code, error_message=None)
                        for p in t.partitions
                    ],
                )
                for t in request.topic_partitions or ()
            ],
        )
    controller = broker.controller
    if controller is None or not controller.is_active:
        return ElectLeadersResponse(
            throttle_time_ms=0,
            error_code=int(kafka_errors.NotControllerError.errno),
            replica_election_results=[],
        )
    partitions = (
        None
        if request.topic_partitions is None
        else {TopicPartition(t.topic, p) for t in request.topic_partitions for p in t.partitions}
    )
    try:
        election_type = (
            ElectionType(request.election_type) if ctx.api_version >= 1 else ElectionType.PREFERRED
        )
    except ValueError:  # Kafka's ElectionType.valueOf refuses it too
        return ElectLeadersResponse(
            throttle_time_ms=0,
            error_code=int(kafka_errors.InvalidRequestError.errno),
            replica_election_results=[],
        )
    try:
        results = await asyncio.wrap_future(controller.elect_leaders(partitions, election_type))
    except Exception as exc:
        return ElectLeadersResponse(
            throttle_time_ms=0, error_code=error_code_of(exc), replica_election_results=[]
        )
    by_topic: dict[str, list[Any]] = {}
    for tp, (code, message) in sorted(results.items()):
        by_topic.setdefault(tp.topic, []).append(
            _PartitionResult(partition_id=tp.partition, error_code=code, error_message=message)
        )
    return ElectLeadersResponse(
        throttle_time_ms=0,
        error_code=0,
        replica_election_results=[
            _Result(topic=topic, partition_result=parts) for topic, parts in by_topic.items()
        ],
    )
