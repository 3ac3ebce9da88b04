"""DescribeConfigs / AlterConfigs / IncrementalAlterConfigs logic for topics and brokers.

Topic configs are overrides in ``/config/topics/<topic>``; dynamic broker configs are
per broker in ``/config/brokers/<id>`` or cluster-wide in ``/config/brokers/<default>``
(KIP-226). Only the broker configs listed in :data:`DYNAMIC_BROKER_CONFIGS` may be
changed at run time, among them the replication throttle rates of KIP-73. Every write
is a compare-and-set on the config znode plus a ``/config/changes`` notification, so
all brokers apply it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from kpo_broker.config import BrokerConfig
from kpo_broker.server.dynamic_config import (
    TOPIC_CONFIGS,
    InvalidTopicConfigError,
    TopicConfigs,
    validate_topic_config,
)

# Kafka's ConfigResource.Type ids.
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4

# DescribeConfigs config sources (Kafka's ConfigSource ids).
SOURCE_TOPIC_CONFIG = 1
SOURCE_DYNAMIC_BROKER_CONFIG = 2
SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG = 3
SOURCE_STATIC_BROKER_CONFIG = 4
SOURCE_DEFAULT_CONFIG = 5

# DescribeConfigs config types (KIP-569).
TYPE_BOOLEAN = 1
TYPE_STRING = 2
TYPE_INT = 3
TYPE_LONG = 5
TYPE_DOUBLE = 6
TYPE_LIST = 7

# IncrementalAlterConfigs operations (KIP-339).
OP_SET = 0
OP_DELETE = 1
OP_APPEND = 2
OP_SUBTRACT = 3

#: Broker configs that can be changed without a restart, with their value types.
DYNAMIC_BROKER_CONFIGS: dict[str, str] = {
    "leader.replication.throttled.rate": "long",
    "follower.replication.throttled.rate": "long",
    "replica.alter.log.dirs.io.max.bytes.per.second": "long",
}

#: The entity name of cluster-wide dynamic broker defaults.
DEFAULT_BROKER_ENTITY = "<default>"

_THROTTLED_REPLICAS = re.compile(r"^(\*|\d+:\d+(,\d+:\d+)*)?$")


class ConfigAdminError(ValueError):
    """A rejected config change; ``error_code``: INVALID_CONFIG (40) or INVALID_REQUEST (42)."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


@dataclass(frozen=True)
class ConfigEntry:
    """One described config.

    Attributes:
        name: Kafka config name.
        value: current value as a string (None when unset).
        source: Kafka ConfigSource id.
        read_only: cannot be changed with AlterConfigs.
        config_type: Kafka ConfigType id.
        documentation: what it means.
    """

    name: str
    value: str | None
    source: int
    read_only: bool
    config_type: int
    documentation: str | None = None


_TYPE_OF_KIND = {
    "int": TYPE_LONG,
    "bool": TYPE_BOOLEAN,
    "str": TYPE_STRING,
    "list": TYPE_LIST,
    "double": TYPE_DOUBLE,
}


def validate_broker_dynamic(config: Mapping[str, str]) -> None:
    """Check names and values of dynamic broker configs.

    Raises:
        ConfigAdminError: a config is not dynamically updatable, or not a non-negative long.
    """
    for name, value in config.items():
        if name not in DYNAMIC_BROKER_CONFIGS:
            raise ConfigAdminError(42, f"cannot update broker config {name} dynamically")
        try:
            if int(value) < 0:
                raise ValueError
        except ValueError:
            raise ConfigAdminError(40, f"{name} must be a non-negative long (bytes/s)") from None


def validate_topic(config: Mapping[str, str]) -> None:
    """Check topic config overrides, including the KIP-73 throttled replica lists.

    Raises:
        ConfigAdminError: INVALID_CONFIG naming the offending config.
    """
    try:
        validate_topic_config(config)
    except InvalidTopicConfigError as exc:
        raise ConfigAdminError(40, str(exc)) from exc
    for name in (
        "leader.replication.throttled.replicas",
        "follower.replication.throttled.replicas",
    ):
        value = config.get(name)
        if value is not None and not _THROTTLED_REPLICAS.match(value.replace(" ", "")):
            raise ConfigAdminError(
                40, f"{name} must be '*' or partition:broker pairs, got {value!r}"
            )


def apply_incremental(
    current: Mapping[str, str], ops: list[tuple[str, int, str | None]], list_configs: set[str]
) -> dict[str, str]:
    """Apply IncrementalAlterConfigs operations (KIP-339) to a config and return the result.

    Args:
        current: the entity's current overrides.
        ops: (name, operation, value) in request order.
        list_configs: configs that are lists (APPEND/SUBTRACT apply only to them).

    Raises:
        ConfigAdminError: an unknown operation, APPEND/SUBTRACT on a non-list, SET without a value.
    """
    result = dict(current)
    for name, op, value in ops:
        if op == OP_SET:
            if value is None:
                raise ConfigAdminError(42, f"SET of {name} needs a value")
            result[name] = value
        elif op == OP_DELETE:
            result.pop(name, None)
        elif op in (OP_APPEND, OP_SUBTRACT):
            if name not in list_configs:
                raise ConfigAdminError(42, f"{name} is not a list config")
            items = [i for i in result.get(name, "").split(",") if i]
            given = [i for i in (value or "").split(",") if i]
            if op == OP_APPEND:
                items += [i for i in given if i not in items]
            else:
                items = [i for i in items if i not in given]
            if items:
                result[name] = ",".join(items)
            else:
                result.pop(name, None)
        else:
            raise ConfigAdminError(42, f"unknown config operation {op}")
    return result


def describe_topic(topics: TopicConfigs, topic: str, keys: list[str] | None) -> list[ConfigEntry]:
    """Describe a topic's configs: overrides as TOPIC_CONFIG, the rest as DEFAULT_CONFIG."""
    overrides = topics.overrides.get(topic, {})
    entries = []
    for name, definition in sorted(TOPIC_CONFIGS.items()):
        if keys and name not in keys:
            continue
        source = SOURCE_TOPIC_CONFIG if name in overrides else SOURCE_DEFAULT_CONFIG
        entries.append(
            ConfigEntry(
                name,
                topics.value(topic, name),
                source,
                False,
                _TYPE_OF_KIND[definition.kind],
                definition.doc,
            )
        )
    return entries


def describe_broker(
    config: BrokerConfig,
    dynamic: Mapping[str, str],
    dynamic_default: Mapping[str, str],
    keys: list[str] | None,
) -> list[ConfigEntry]:
    """Describe a broker's configs with their sources (KIP-226 precedence).

    Precedence: per-broker dynamic, then cluster-wide dynamic default, then
    ``server.properties``, then Kafka's default.
    """
    entries = []
    explicit = config.model_fields_set
    for field_name, field in sorted(
        BrokerConfig.model_fields.items(), key=lambda kv: kv[1].alias or ""
    ):
        name = field.alias
        if name is None or (keys and name not in keys):
            continue
        value = getattr(config, field_name)
        if isinstance(value, bool):
            text: str | None = "true" if value else "false"
        elif isinstance(value, (list, tuple)):
            text = ",".join(str(v) for v in value)
        elif value is None:
            text = None
        else:
            text = str(value)
        source = SOURCE_STATIC_BROKER_CONFIG if field_name in explicit else SOURCE_DEFAULT_CONFIG
        if name in dynamic:
            text, source = dynamic[name], SOURCE_DYNAMIC_BROKER_CONFIG
        elif name in dynamic_default:
            text, source = dynamic_default[name], SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG
        entries.append(
            ConfigEntry(
                name,
                text,
                source,
                name not in DYNAMIC_BROKER_CONFIGS,
                TYPE_LONG if DYNAMIC_BROKER_CONFIGS.get(name) == "long" else TYPE_STRING,
                field.description,
            )
        )
    for name in keys or ():
        if name in DYNAMIC_BROKER_CONFIGS and not any(e.name == name for e in entries):
            value = dynamic.get(name, dynamic_default.get(name))
            entries.append(ConfigEntry(name, value, SOURCE_DYNAMIC_BROKER_CONFIG, False, TYPE_LONG))
    return entries
