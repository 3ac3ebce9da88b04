"""DescribeConfigs / AlterConfigs / IncrementalAlterConfigs logic for topics and brokers.

Topic configs are overrides in ``/config/topics/<topic>``; dynamic broker configs are
per broker in ``/config/brokers/<id>`` or cluster-wide in ``/config/brokers/<default>``
(KIP-226). Only the broker configs listed in ``DYNAMIC_BROKER_CONFIGS``
(``dynamic_broker_config``) may be changed at run time. Every write
is a compare-and-set on the config znode plus a ``/config/changes`` notification, so
all brokers apply it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from kpo_broker.config import BrokerConfig
from kpo_broker.server.dynamic_broker_config import (
    DYNAMIC_BROKER_CONFIGS,
    SOURCE_DEFAULT_CONFIG,
    SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG,
    SOURCE_TOPIC_CONFIG,
    DynamicBrokerConfig,
    InvalidBrokerConfigError,
)
from kpo_broker.server.dynamic_config import (
    TOPIC_CONFIGS,
    InvalidTopicConfigError,
    TopicConfigs,
    validate_topic_config,
)

# Kafka's ConfigResource.Type ids.
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4

# DescribeConfigs config types (KIP-569).
TYPE_BOOLEAN = 1
TYPE_STRING = 2
TYPE_INT = 3
TYPE_LONG = 5
TYPE_DOUBLE = 6
TYPE_LIST = 7
TYPE_UNKNOWN = 0

# IncrementalAlterConfigs operations (KIP-339).
OP_SET = 0
OP_DELETE = 1
OP_APPEND = 2
OP_SUBTRACT = 3


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
        synonyms: (name, value, source) of every setting the value may come from, highest
            precedence first, as Kafka's ``ConfigHelper`` lists them.
    """

    name: str
    value: str | None
    source: int
    read_only: bool
    config_type: int
    documentation: str | None = None
    synonyms: tuple[tuple[str, str | None, int], ...] = ()


_TYPE_OF_KIND = {
    "int": TYPE_INT,
    "long": TYPE_LONG,
    "bool": TYPE_BOOLEAN,
    "str": TYPE_STRING,
    "list": TYPE_LIST,
    "double": TYPE_DOUBLE,
}


def validate_broker_dynamic(
    broker: DynamicBrokerConfig, config: Mapping[str, str], per_broker: bool
) -> dict[str, str]:
    """Check a broker entity's new dynamic configs (Kafka's ``DynamicBrokerConfig.validate``).

    Args:
        broker: the receiving broker's current dynamic config view.
        config: the entity's configs after the change.
        per_broker: True for ``/config/brokers/<id>``, False for the cluster default.

    Returns:
        The configs with values in Kafka's form, ready to store.

    Raises:
        ConfigAdminError: INVALID_CONFIG: a static, unsupported or unknown config, or a
            value Kafka would refuse.
    """
    try:
        return broker.validate(config, per_broker)
    except InvalidBrokerConfigError as exc:
        raise ConfigAdminError(40, str(exc)) from exc


def validate_topic(config: Mapping[str, str]) -> None:
    """Check topic config overrides (``validate_topic_config``) and the KIP-73 replica lists.

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
                raise ConfigAdminError(
                    40,
                    f"Config value {'append' if op == OP_APPEND else 'subtract'} is not "
                    f"allowed for config key: {name}",
                )
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


def describe_topic(
    topics: TopicConfigs,
    broker: DynamicBrokerConfig,
    topic: str,
    keys: list[str] | None,
) -> list[ConfigEntry]:
    """Describe a topic's configs as Kafka's ``ConfigHelper.createTopicConfigEntry``.

    Each value is the topic's override (TOPIC_CONFIG) or the broker default it inherits,
    whose source is that of its highest-precedence broker synonym (dynamic per broker,
    dynamic default, static, Kafka default); configs without a broker synonym and no
    override are DEFAULT_CONFIG.
    """
    overrides = topics.overrides.get(topic, {})
    entries = []
    for name, definition in sorted(TOPIC_CONFIGS.items()):
        if keys and name not in keys:
            continue
        value = topics.value(topic, name)
        synonyms = list(broker.topic_synonyms(name))
        if name in overrides:
            synonyms.insert(0, (name, value, SOURCE_TOPIC_CONFIG))
        entries.append(
            ConfigEntry(
                name,
                value,
                synonyms[0][2] if synonyms else SOURCE_DEFAULT_CONFIG,
                False,
                _TYPE_OF_KIND.get(definition.kind, TYPE_UNKNOWN),
                definition.doc,
                tuple(synonyms),
            )
        )
    return entries


def _broker_type(name: str) -> int:
    definition = DYNAMIC_BROKER_CONFIGS.get(name)
    if definition is not None:
        return _TYPE_OF_KIND.get(definition.kind, TYPE_UNKNOWN)
    field = BrokerConfig.model_fields.get(_FIELD_OF.get(name, ""))
    if field is None:
        return TYPE_STRING
    kind = field.annotation
    text = str(kind)
    if kind is bool or "bool" in text:
        return TYPE_BOOLEAN
    if "int" in text:
        maxima = [getattr(m, "le", None) for m in field.metadata]
        return TYPE_LONG if any(m is not None and m > 2**31 - 1 for m in maxima) else TYPE_INT
    return TYPE_STRING


def _broker_doc(name: str) -> str | None:
    definition = DYNAMIC_BROKER_CONFIGS.get(name)
    field = BrokerConfig.model_fields.get(_FIELD_OF.get(name, ""))
    if field is not None and field.description:
        return field.description
    return definition.doc if definition is not None else None


def describe_broker(
    broker: DynamicBrokerConfig, per_broker: bool, keys: list[str] | None
) -> list[ConfigEntry]:
    """Describe a broker's configs as Kafka's ``ConfigHelper.createBrokerConfigEntry``.

    For a broker id every config is listed with its own value and source (KIP-226
    precedence: per-broker dynamic, cluster-default dynamic, ``server.properties``,
    Kafka's default); for the cluster default (empty name) only the configs set there.
    Values are in Kafka's form (``PLAINTEXT://host:9092``, ``NAME:PROTOCOL,...``).
    """
    names = broker.names() if per_broker else sorted(broker.cluster_default)
    entries = []
    for name in names:
        if keys and name not in keys:
            continue
        synonyms = broker.synonyms(name, per_broker)
        if per_broker:
            value, source = broker.value(name)
        else:
            value, source = broker.cluster_default[name], SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG
        entries.append(
            ConfigEntry(
                name,
                value,
                source,
                name not in DYNAMIC_BROKER_CONFIGS,
                _broker_type(name),
                _broker_doc(name),
                tuple(synonyms),
            )
        )
    return entries


_FIELD_OF = {f.alias: n for n, f in BrokerConfig.model_fields.items() if f.alias is not None}
