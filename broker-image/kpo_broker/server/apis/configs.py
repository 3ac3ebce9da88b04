"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs for topics and brokers.

Reads and writes go to ZooKeeper (``/config/topics``, ``/config/brokers``), so an
answer reflects every write acknowledged before it, whichever broker took it.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kafka.protocol.admin import (
    AlterConfigsResponse,
    DescribeConfigsResponse,
    IncrementalAlterConfigsResponse,
)

from kpo_broker.security.acl import AclOperation, ResourceType
from kpo_broker.server import config_admin as ca
from kpo_broker.server.components import BrokerComponents
from kpo_broker.server.dynamic_broker_config import SOURCE_DEFAULT_CONFIG, DynamicBrokerConfig
from kpo_broker.server.dynamic_config import TOPIC_CONFIGS, TopicConfigs
from kpo_broker.server.request_context import RequestContext

_Result = DescribeConfigsResponse.DescribeConfigsResult
_Entry = _Result.DescribeConfigsResourceResult
_Synonym = _Entry.DescribeConfigsSynonym
_CAS_ATTEMPTS = 5
_LIST_CONFIGS = {n for n, d in TOPIC_CONFIGS.items() if d.kind == "list"}


_BROKER_LOGGER = 8
_REFUSED = {
    ResourceType.TOPIC: (29, "Topic authorization failed."),
    ResourceType.CLUSTER: (31, "Cluster authorization failed."),
}


def _refusal(
    broker: BrokerComponents,
    ctx: RequestContext,
    resource_type: int,
    name: str,
    operation: AclOperation,
) -> tuple[int, str] | None:
    """Kafka's config authorization (``ConfigHelper``, ``handleIncrementalAlterConfigsRequest``).

    Topic configs need ``operation`` on the Topic; broker and broker-logger configs on the
    Cluster. Returns (error code, Kafka's message) when refused, None when allowed or
    when the resource type is not one (left to the handler's INVALID_REQUEST).
    """
    if resource_type == ca.RESOURCE_TOPIC:
        target, resource = ResourceType.TOPIC, name
    elif resource_type in (ca.RESOURCE_BROKER, _BROKER_LOGGER):
        target, resource = ResourceType.CLUSTER, "kafka-cluster"
    else:
        return None
    if broker.auth.authorize(ctx, operation, target, resource):
        return None
    return _REFUSED[target]


def _entity(broker: BrokerComponents, resource_type: int, name: str) -> tuple[str, str]:
    """Map a config resource to a ZooKeeper config entity (type, name).

    Raises:
        ConfigAdminError: unknown topic (UNKNOWN_TOPIC_OR_PARTITION), a broker id other
            than this broker's or the default "" (INVALID_REQUEST, as Kafka's
            ``ZkAdminManager.getBrokerId``), or an unsupported resource type.
    """
    if resource_type == ca.RESOURCE_TOPIC:
        if name not in broker.metadata_cache.partitions:
            raise ca.ConfigAdminError(3, f"unknown topic {name}")
        return "topics", name
    if resource_type == ca.RESOURCE_BROKER:
        if name == "":
            return "brokers", ca.DEFAULT_BROKER_ENTITY
        if not name.lstrip("-").isdigit():
            raise ca.ConfigAdminError(42, f"Broker id must be an integer, but it is: {name}")
        if int(name) != broker.broker_id:
            raise ca.ConfigAdminError(
                42,
                f"Unexpected broker id, expected {broker.broker_id} or empty string, "
                f"but received {name}",
            )
        return "brokers", str(broker.broker_id)
    raise ca.ConfigAdminError(42, f"unsupported config resource type {resource_type}")


async def _read(broker: BrokerComponents, entity_type: str, name: str) -> Any:
    return await asyncio.to_thread(broker.zk.get_entity_config, entity_type, name)


async def _dynamic_view(broker: BrokerComponents) -> DynamicBrokerConfig:
    """Return this broker's configs with its dynamic configs as ZooKeeper has them now."""
    own = (await _read(broker, "brokers", str(broker.broker_id))).config
    default = (await _read(broker, "brokers", ca.DEFAULT_BROKER_ENTITY)).config
    return await asyncio.to_thread(DynamicBrokerConfig, broker.config, own, default)


async def handle_describe_configs(
    broker: BrokerComponents, ctx: RequestContext, request: Any
) -> DescribeConfigsResponse:
    """Describe topic or broker configs with their sources and synonyms (KIP-226)."""
    results = []
    include_synonyms = bool(getattr(request, "include_synonyms", False))
    for resource in request.resources:
        keys = list(resource.configuration_keys) if resource.configuration_keys else None
        refused = _refusal(
            broker,
            ctx,
            resource.resource_type,
            resource.resource_name,
            AclOperation.DESCRIBE_CONFIGS,
        )
        if refused is not None:
            results.append(
                _Result(
                    error_code=refused[0],
                    error_message=refused[1],
                    resource_type=resource.resource_type,
                    resource_name=resource.resource_name,
                    configs=[],
                )
            )
            continue
        try:
            entity_type, name = _entity(broker, resource.resource_type, resource.resource_name)
            dynamic = await _dynamic_view(broker)
            if entity_type == "topics":
                view = TopicConfigs(dynamic.effective)
                view.set_overrides(name, (await _read(broker, "topics", name)).config)
                entries = ca.describe_topic(view, dynamic, name, keys)
            else:
                entries = ca.describe_broker(dynamic, name != ca.DEFAULT_BROKER_ENTITY, keys)
        except ca.ConfigAdminError as exc:
            results.append(
                _Result(
                    error_code=exc.error_code,
                    error_message=str(exc),
                    resource_type=resource.resource_type,
                    resource_name=resource.resource_name,
                    configs=[],
                )
            )
            continue
        results.append(
            _Result(
                error_code=0,
                error_message=None,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
                configs=[
                    _Entry(
                        name=e.name,
                        value=e.value,
                        read_only=e.read_only,
                        config_source=e.source,
                        is_default=e.source == SOURCE_DEFAULT_CONFIG,
                        is_sensitive=False,
                        synonyms=[_Synonym(name=n, value=v, source=src) for n, v, src in e.synonyms]
                        if include_synonyms
                        else [],
                        config_type=e.config_type,
                        documentation=e.documentation if request.include_documentation else None,
                    )
                    for e in entries
                ],
            )
        )
    return DescribeConfigsResponse(throttle_time_ms=0, results=results)


async def _alter(
    broker: BrokerComponents,
    resource_type: int,
    resource_name: str,
    ops: list[tuple[str, int, str | None]] | None,
    replacement: dict[str, str] | None,
    validate_only: bool,
) -> tuple[int, str | None]:
    """Apply ``ops`` or a full ``replacement`` with CAS retries; return (error code, message)."""
    try:
        entity_type, name = _entity(broker, resource_type, resource_name)
        for _ in range(_CAS_ATTEMPTS):
            current = await _read(broker, entity_type, name)
            if replacement is not None:
                new = dict(replacement)
            else:
                assert ops is not None
                new = ca.apply_incremental(current.config, ops, _LIST_CONFIGS)
            if entity_type == "topics":
                ca.validate_topic(new)
            else:
                view = await _dynamic_view(broker)
                new = ca.validate_broker_dynamic(view, new, name != ca.DEFAULT_BROKER_ENTITY)
            if validate_only:
                return 0, None
            written = await asyncio.to_thread(
                broker.zk.set_entity_config, entity_type, name, new, current.zk_version
            )
            if written is not None:
                return 0, None
        return 42, "the config changed concurrently; retry"
    except ca.ConfigAdminError as exc:
        return exc.error_code, str(exc)


async def _alter_authorized(
    broker: BrokerComponents,
    ctx: RequestContext,
    resource: Any,
    ops: list[tuple[str, int, str | None]] | None,
    replacement: dict[str, str] | None,
    validate_only: bool,
) -> tuple[int, str | None]:
    """Authorize ALTER_CONFIGS on ``resource``, then :func:`_alter` it; (error code, message).

    A refused resource gets Kafka's authorization error without a message, as Kafka's
    ``handleIncrementalAlterConfigsRequest`` and ``handleAlterConfigsRequest`` answer.
    """
    refused = _refusal(
        broker, ctx, resource.resource_type, resource.resource_name, AclOperation.ALTER_CONFIGS
    )
    if refused is not None:
        return refused[0], None
    return await _alter(
        broker, resource.resource_type, resource.resource_name, ops, replacement, validate_only
    )


async def handle_incremental_alter_configs(
    broker: BrokerComponents, ctx: RequestContext, request: Any
) -> IncrementalAlterConfigsResponse:
    """Apply SET/DELETE/APPEND/SUBTRACT operations (KIP-339) to topic or broker configs."""
    responses = []
    for resource in request.resources:
        ops = [(c.name, c.config_operation, c.value) for c in resource.configs]
        code, message = await _alter_authorized(
            broker, ctx, resource, ops, None, bool(request.validate_only)
        )
        responses.append(
            IncrementalAlterConfigsResponse.AlterConfigsResourceResponse(
                error_code=code,
                error_message=message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
            )
        )
    return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=responses)


async def handle_alter_configs(
    broker: BrokerComponents, ctx: RequestContext, request: Any
) -> AlterConfigsResponse:
    """Replace the whole config of each resource (the legacy AlterConfigs semantics)."""
    responses = []
    for resource in request.resources:
        replacement = {c.name: c.value for c in resource.configs if c.value is not None}
        code, message = await _alter_authorized(
            broker, ctx, resource, None, replacement, bool(request.validate_only)
        )
        responses.append(
            AlterConfigsResponse.AlterConfigsResourceResponse(
                error_code=code,
                error_message=message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
            )
        )
    return AlterConfigsResponse(throttle_time_ms=0, responses=responses)
