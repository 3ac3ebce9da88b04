"""The inter-broker APIs.

LeaderAndIsr, UpdateMetadata and StopReplica (controller -> broker), and
ControlledShutdown and AlterPartition (broker -> controller).

Every controller request is fenced by the controller epoch (STALE_CONTROLLER_EPOCH for
an older one) and, from the versions that carry it, by the broker epoch (KIP-380:
STALE_BROKER_EPOCH when the request was meant for an earlier incarnation of this
broker). A controller epoch newer than the one in ZooKeeper's ``/controller_epoch`` is
refused with STALE_CONTROLLER_EPOCH too: a controller records its epoch before sending
anything, so such a request comes from no controller, and applying it would make every
later request of the real controller look stale.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from kafka import errors as kafka_errors

from kpo_broker.controller.alter_partition import (
    LEADER_RECOVERED,
    UNKNOWN_TOPIC_ID,
    AlterPartitionResult,
    ProposedIsr,
)
from kpo_broker.coordinator.group.records import GROUP_METADATA_TOPIC_NAME
from kpo_broker.protocol.interbroker import (
    AlterPartitionResponse,
    ControlledShutdownResponse,
    LeaderAndIsrResponse,
    StopReplicaResponse,
    UpdateMetadataResponse,
)
from kpo_broker.security.acl import AclOperation
from kpo_broker.server.components import BrokerComponents
from kpo_broker.server.errors import StaleControllerEpochError, error_code_of
from kpo_broker.server.metadata_cache import BrokerInfo, PartitionMetadata
from kpo_broker.server.partition import LeaderAndIsrState
from kpo_broker.server.request_context import RequestContext
from kpo_broker.zk.data import topic_id_to_uuid, uuid_to_topic_id
from kpo_broker.zk.errors import KafkaZkError
from kpo_broker.zk.model import EndPoint
from kpo_kafka.topic_partition import TopicPartition

log = logging.getLogger(__name__)

#: UpdateMetadata's leader value for a partition being deleted (Kafka's LeaderDuringDelete).
LEADER_DURING_DELETE = -2
#: Broker epoch sent by controllers that do not know it (KIP-380).
UNKNOWN_BROKER_EPOCH = -1
_CLUSTER_AUTHORIZATION_FAILED = 31


def _cluster_action_denied(broker: BrokerComponents, ctx: RequestContext) -> bool:
    """Kafka's ``authorizeClusterOperation(request, CLUSTER_ACTION)`` of every inter-broker API."""
    return not broker.auth.authorize_cluster(ctx, AclOperation.CLUSTER_ACTION)


def _stale_broker_epoch(broker: BrokerComponents, request: Any) -> bool:
    epoch = getattr(request, "broker_epoch", None)
    return epoch is not None and epoch != UNKNOWN_BROKER_EPOCH and epoch < broker.broker_epoch


async def _unrecorded_controller_epoch(broker: BrokerComponents, controller_epoch: int) -> bool:
    """Whether ``controller_epoch`` is newer than ZooKeeper's ``/controller_epoch``.

    ZooKeeper is read only for an epoch newer than the last one this broker applied
    (that is, once per controller change). When it cannot be read the request is let
    through, as before the check existed.
    """
    if controller_epoch <= broker.metadata_cache.controller_epoch:
        return False
    try:
        recorded = await asyncio.to_thread(broker.zk.get_controller_epoch)
    except KafkaZkError as exc:
        log.warning("cannot check controller epoch %d in ZooKeeper: %s", controller_epoch, exc)
        return False
    if recorded is not None and controller_epoch <= recorded.epoch:
        return False
    log.info("refusing a request of controller epoch %d, unknown to ZooKeeper", controller_epoch)
    return True


def _leader_and_isr_states(request: Any, version: int) -> list[tuple[str, Any]]:
    if version < 2:
        return [(p.topic_name, p) for p in request.ungrouped_partition_states]
    return [(t.topic_name, p) for t in request.topic_states for p in t.partition_states]


async def handle_leader_and_isr(
    broker: BrokerComponents, ctx: RequestContext, request: Any
) -> LeaderAndIsrResponse:
    """Become leader or follower of each partition; (re)start fetchers for followed ones.

    As Kafka's ``ReplicaManager.becomeLeaderOrFollower``: partitions led here (or left
    without a live leader) leave their fetchers, followed ones join the fetcher of their
    leader, and then fetchers left without partitions are shut down
    (``shutdownIdleFetcherThreads``).
    """
    states_in = _leader_and_isr_states(request, ctx.api_version)
    if _cluster_action_denied(broker, ctx):
        return _leader_and_isr_error(states_in, _CLUSTER_AUTHORIZATION_FAILED)
    if _stale_broker_epoch(broker, request):
        return _leader_and_isr_error(states_in, kafka_errors.StaleBrokerEpochError.errno)
    if await _unrecorded_controller_epoch(broker, request.controller_epoch):
        return _leader_and_isr_error(states_in, kafka_errors.StaleControllerEpochError.errno)
    states = {
        TopicPartition(topic, p.partition_index): LeaderAndIsrState(
            controller_epoch=p.controller_epoch,
            leader=p.leader,
            leader_epoch=p.leader_epoch,
            isr=tuple(p.isr),
            partition_epoch=p.zk_version,
            replicas=tuple(p.replicas),
            adding_replicas=tuple(p.adding_replicas or ()),
            removing_replicas=tuple(p.removing_replicas or ()),
            is_new=bool(p.is_new),
        )
        for topic, p in states_in
    }
    await _load_new_topic_configs(broker, {topic for topic, _ in states_in})
    try:
        results = await broker.replica_manager.become_leader_or_follower_async(
            request.controller_epoch, states
        )
    except StaleControllerEpochError as exc:
        log.info("ignoring LeaderAndIsr: %s", exc)
        return _leader_and_isr_error(states_in, kafka_errors.StaleControllerEpochError.errno)
    addresses = {
        leader.broker_id: (leader.host_name, leader.port) for leader in request.live_leaders
    }
    to_follow: dict[TopicPartition, tuple[int, int, tuple[str, int]]] = {}
    led: list[TopicPartition] = []
    for tp, result in results.items():
        if result.error_code != 0:
            continue
        state = states[tp]
        if state.leader == broker.broker_id:
            led.append(tp)
        elif result.became_follower and state.leader >= 0 and state.leader in addresses:
            to_follow[tp] = (state.leader, state.leader_epoch, addresses[state.leader])
        elif result.became_follower:
            led.append(tp)  # no live leader: stop fetching until one is elected
    broker.fetchers.remove_partitions(led)
    broker.fetchers.add_partitions(to_follow)
    await broker.fetchers.shutdown_idle_fetchers()
    _on_leadership_change(broker, states, results)
    return LeaderAndIsrResponse(
        error_code=0,
        partition_errors=[
            LeaderAndIsrResponse.LeaderAndIsrPartitionError(
                topic_name=tp[0], partition_index=tp[1], error_code=r.error_code
            )
            for tp, r in results.items()
        ],
    )


def _on_leadership_change(
    broker: BrokerComponents,
    states: dict[TopicPartition, LeaderAndIsrState],
    results: dict[TopicPartition, Any],
) -> None:
    """Load or unload groups of ``__consumer_offsets`` partitions (Kafka's ``onLeadershipChange``).

    The coordinator epoch is the partition's leader epoch, so a late change of an
    older epoch never undoes a newer one.
    """
    coordinator = broker.group_coordinator
    if coordinator is None:
        return
    for tp, result in results.items():
        if tp[0] != GROUP_METADATA_TOPIC_NAME or result.error_code != 0:
            continue
        state = states[tp]
        if state.leader == broker.broker_id:
            coordinator.on_election(tp[1], state.leader_epoch)
        else:
            coordinator.on_resignation(tp[1], state.leader_epoch)


async def _load_new_topic_configs(broker: BrokerComponents, topics: set[str]) -> None:
    """Read the configs of topics this broker has not seen yet from ``/config/topics``.

    A topic's configs given at creation carry no ``/config/changes`` notification, so
    (as Kafka's LogManager does when it creates a log) they are fetched from ZooKeeper
    before the topic's first replica is created here.
    """
    unknown = sorted(t for t in topics if not broker.topic_configs.knows(t))
    if not unknown:
        return
    configs = await asyncio.to_thread(broker.zk.get_entity_configs, "topics", unknown)
    for topic in unknown:
        entity = configs.get(topic)
        broker.topic_configs.set_overrides(topic, entity.config if entity is not None else {})


def _leader_and_isr_error(states: list[tuple[str, Any]], code: int) -> LeaderAndIsrResponse:
    return LeaderAndIsrResponse(
        error_code=code,
        partition_errors=[
            LeaderAndIsrResponse.LeaderAndIsrPartitionError(
                topic_name=topic, partition_index=p.partition_index, error_code=code
            )
            for topic, p in states
        ],
    )


async def handle_update_metadata(
    broker: BrokerComponents, ctx: RequestContext, request: Any
) -> UpdateMetadataResponse:
    """Replace the live brokers and upsert partition states in the metadata cache."""
    cache = broker.metadata_cache
    if _cluster_action_denied(broker, ctx):
        return UpdateMetadataResponse(error_code=_CLUSTER_AUTHORIZATION_FAILED)
    if _stale_broker_epoch(broker, request):
        return UpdateMetadataResponse(error_code=kafka_errors.StaleBrokerEpochError.errno)
    if cache.is_stale(request.controller_epoch) or await _unrecorded_controller_epoch(
        broker, request.controller_epoch
    ):
        return UpdateMetadataResponse(error_code=kafka_errors.StaleControllerEpochError.errno)
    brokers = [
        BrokerInfo(
            b.id,
            tuple(EndPoint(e.listener or "PLAINTEXT", e.host, e.port) for e in (b.endpoints or ())),
            b.rack,
        )
        for b in request.live_brokers
    ]
    if ctx.api_version < 5:
        raw = [(p.topic_name, p) for p in request.ungrouped_partition_states]
    else:
        raw = [(t.topic_name, p) for t in request.topic_states for p in t.partition_states]
    partitions: dict[tuple[str, int], PartitionMetadata] = {}
    deleted: set[tuple[str, int]] = set()
    for topic, p in raw:
        if p.leader == LEADER_DURING_DELETE:
            deleted.add((topic, p.partition_index))
            continue
        partitions[(topic, p.partition_index)] = PartitionMetadata(
            leader=p.leader,
            leader_epoch=p.leader_epoch,
            isr=tuple(p.isr),
            replicas=tuple(p.replicas),
            offline_replicas=tuple(p.offline_replicas or ()),
            partition_epoch=p.zk_version,
        )
    cache.update(request.controller_id, request.controller_epoch, brokers, partitions, deleted)
    if ctx.api_version >= 7:
        for topic_state in request.topic_states:
            topic_id = uuid_to_topic_id(topic_state.topic_id)
            if topic_id is not None and topic_state.topic_name in cache.partitions:
                cache.topic_ids[topic_state.topic_name] = topic_id
    coordinator = broker.group_coordinator
    if deleted and coordinator is not None:
        # Kafka's onPartitionsDeleted: committed offsets of deleted partitions go too.
        coordinator.handle_deleted_partitions([TopicPartition(t, i) for t, i in sorted(deleted)])
    for topic in {t for t, _ in deleted}:
        if topic not in cache.partitions:
            broker.topic_configs.remove(topic)
    return UpdateMetadataResponse(error_code=0)


async def handle_stop_replica(
    broker: BrokerComponents, ctx: RequestContext, request: Any
) -> StopReplicaResponse:
    """Stop fetching and serving the partitions, deleting their logs when asked."""
    if ctx.api_version == 0:
        items = [
            (TopicPartition(p.topic_name, p.partition_index), bool(request.delete_partitions))
            for p in request.ungrouped_partitions
        ]
    elif ctx.api_version <= 2:
        items = [
            (TopicPartition(t.name, i), bool(request.delete_partitions))
            for t in request.topics
            for i in t.partition_indexes
        ]
    else:
        items = [
            (TopicPartition(t.topic_name, p.partition_index), bool(p.delete_partition))
            for t in request.topic_states
            for p in t.partition_states
        ]
    if _cluster_action_denied(broker, ctx):
        code = _CLUSTER_AUTHORIZATION_FAILED
        return _stop_replica_response(code, {tp: code for tp, _ in items})
    if _stale_broker_epoch(broker, request):
        code = kafka_errors.StaleBrokerEpochError.errno
        return _stop_replica_response(code, {tp: code for tp, _ in items})
    if await _unrecorded_controller_epoch(broker, request.controller_epoch):
        code = kafka_errors.StaleControllerEpochError.errno
        return _stop_replica_response(code, {tp: code for tp, _ in items})
    broker.fetchers.remove_partitions([tp for tp, _ in items])
    try:
        results = broker.replica_manager.stop_replicas(request.controller_epoch, items)
    except StaleControllerEpochError:
        code = kafka_errors.StaleControllerEpochError.errno
        return _stop_replica_response(code, {tp: code for tp, _ in items})
    coordinator = broker.group_coordinator
    if coordinator is not None:
        epochs = _stop_replica_epochs(request, ctx.api_version)
        for tp, _ in items:
            if tp[0] == GROUP_METADATA_TOPIC_NAME:
                coordinator.on_resignation(tp[1], epochs.get(tp))
    return _stop_replica_response(0, results)


def _stop_replica_epochs(request: Any, version: int) -> dict[TopicPartition, int | None]:
    """Leader epochs of a v3+ StopReplica (-1 or -2, "none" / "deleted", count as unknown)."""
    if version < 3:
        return {}
    return {
        TopicPartition(t.topic_name, p.partition_index): (
            p.leader_epoch if p.leader_epoch >= 0 else None
        )
        for t in request.topic_states
        for p in t.partition_states
    }


def _stop_replica_response(code: int, results: dict[TopicPartition, int]) -> StopReplicaResponse:
    return StopReplicaResponse(
        error_code=code,
        partition_errors=[
            StopReplicaResponse.StopReplicaPartitionError(
                topic_name=tp[0], partition_index=tp[1], error_code=c
            )
            for tp, c in results.items()
        ],
    )


async def handle_controlled_shutdown(
    broker: BrokerComponents, ctx: RequestContext, request: Any
) -> ControlledShutdownResponse:
    """On the active controller: move leadership off the broker, return what it still leads."""
    if _cluster_action_denied(broker, ctx):
        return ControlledShutdownResponse(
            error_code=_CLUSTER_AUTHORIZATION_FAILED, remaining_partitions=[]
        )
    controller = broker.controller
    if controller is None or not controller.is_active:
        return ControlledShutdownResponse(
            error_code=kafka_errors.NotControllerError.errno, remaining_partitions=[]
        )
    broker_epoch = getattr(request, "broker_epoch", UNKNOWN_BROKER_EPOCH)
    future = controller.controlled_shutdown(request.broker_id, broker_epoch)
    try:
        remaining = await asyncio.wrap_future(future)
    except Exception as exc:
        log.info("controlled shutdown of broker %d failed: %s", request.broker_id, exc)
        return ControlledShutdownResponse(error_code=error_code_of(exc), remaining_partitions=[])
    return ControlledShutdownResponse(
        error_code=0,
        remaining_partitions=[
            ControlledShutdownResponse.RemainingPartition(
                topic_name=tp.topic, partition_index=tp.partition
            )
            for tp in sorted(remaining, key=lambda t: (t.topic, t.partition))
        ],
    )


async def handle_alter_partition(
    broker: BrokerComponents, ctx: RequestContext, request: Any
) -> AlterPartitionResponse:
    """On the active controller: apply a leader's ISR changes (KIP-497).

    Top-level errors: CLUSTER_AUTHORIZATION_FAILED, NOT_CONTROLLER, STALE_BROKER_EPOCH;
    otherwise each partition gets its error or its state after the change (see
    :mod:`kpo_broker.controller.alter_partition`).
    """
    if _cluster_action_denied(broker, ctx):
        return AlterPartitionResponse(error_code=_CLUSTER_AUTHORIZATION_FAILED, topics=[])
    controller = broker.controller
    if controller is None or not controller.is_active:
        return AlterPartitionResponse(error_code=kafka_errors.NotControllerError.errno, topics=[])
    version = ctx.api_version
    by_name: dict[TopicPartition, ProposedIsr] = {}
    by_id: dict[str, dict[int, ProposedIsr]] = {}
    for topic in request.topics:
        if version >= 2:
            topic_id = uuid_to_topic_id(topic.topic_id) or ""
            target = by_id.setdefault(topic_id, {})
            for p in topic.partitions:
                target[p.partition_index] = _proposed_isr(p, version)
        else:
            for p in topic.partitions:
                by_name[TopicPartition(topic.topic_name, p.partition_index)] = _proposed_isr(
                    p, version
                )
    future = controller.alter_partitions(
        request.broker_id, request.broker_epoch, by_name, by_id, version
    )
    try:
        result = await asyncio.wrap_future(future)
    except Exception as exc:
        log.info("AlterPartition of broker %d failed: %s", request.broker_id, exc)
        return AlterPartitionResponse(error_code=error_code_of(exc), topics=[])
    return _alter_partition_response(result, version)


def _proposed_isr(partition: Any, version: int) -> ProposedIsr:
    if version >= 3:
        members = partition.new_isr_with_epochs
        isr = tuple(m.broker_id for m in members)
        epochs = {m.broker_id: m.broker_epoch for m in members}
    else:
        isr, epochs = tuple(partition.new_isr), {}
    return ProposedIsr(
        partition.leader_epoch,
        isr,
        partition.partition_epoch,
        epochs,
        getattr(partition, "leader_recovery_state", LEADER_RECOVERED),
    )


def _alter_partition_response(result: AlterPartitionResult, version: int) -> AlterPartitionResponse:
    topic_data = AlterPartitionResponse.TopicData
    partition_data = topic_data.PartitionData
    by_topic: dict[str, list[Any]] = {}
    for tp, outcome in sorted(result.partitions.items()):
        if isinstance(outcome, int):
            entry = partition_data(
                partition_index=tp.partition,
                error_code=outcome,
                leader_id=-1,
                leader_epoch=-1,
                isr=[],
                partition_epoch=-1,
            )
        else:
            entry = partition_data(
                partition_index=tp.partition,
                error_code=0,
                leader_id=outcome.leader,
                leader_epoch=outcome.leader_epoch,
                isr=list(outcome.isr),
                leader_recovery_state=LEADER_RECOVERED,
                partition_epoch=outcome.partition_epoch,
            )
        by_topic.setdefault(tp.topic, []).append(entry)
    topics = []
    for topic, entries in by_topic.items():
        if version >= 2:
            wire_id = topic_id_to_uuid(result.topic_ids.get(topic))
            topics.append(topic_data(topic_id=wire_id, partitions=entries))
        else:
            topics.append(topic_data(topic_name=topic, partitions=entries))
    for unknown_id, indexes in result.unknown_topic_ids.items():
        entries = [
            partition_data(
                partition_index=i,
                error_code=UNKNOWN_TOPIC_ID,
                leader_id=-1,
                leader_epoch=-1,
                isr=[],
                partition_epoch=-1,
            )
            for i in indexes
        ]
        topics.append(topic_data(topic_id=topic_id_to_uuid(unknown_id), partitions=entries))
    return AlterPartitionResponse(throttle_time_ms=0, error_code=0, topics=topics)
