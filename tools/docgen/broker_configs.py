"""``docs/reference/broker-configs.md``: the broker's properties and topic configs, from code.

Static properties from :class:`kpo_broker.config.BrokerConfig` (its fields carry Kafka's
names, defaults, bounds and descriptions); the dynamic broker configs from
:data:`kpo_broker.server.dynamic_broker_config.DYNAMIC_BROKER_CONFIGS`; the topic configs
from :data:`kpo_broker.server.dynamic_config.TOPIC_CONFIGS`.
"""

from __future__ import annotations

import enum
import types
import typing
from typing import Any

from annotated_types import Ge, Le
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined
from tools.docgen.common import code, header, rst_to_markdown, table

from kpo_broker.config import BrokerConfig
from kpo_broker.security import config as security_config
from kpo_broker.server.dynamic_broker_config import DYNAMIC_BROKER_CONFIGS, format_value
from kpo_broker.server.dynamic_config import TOPIC_CONFIGS, TopicConfigDef
from kpo_broker.zk.tls import SYSTEM_PROPERTY_OF

PAGE = "docs/reference/broker-configs.md"
SOURCES = (
    "broker-image/kpo_broker/config.py",
    "broker-image/kpo_broker/server/dynamic_broker_config.py",
    "broker-image/kpo_broker/server/dynamic_config.py",
    "broker-image/kpo_broker/security/config.py",
    "broker-image/kpo_broker/zk/tls.py",
)

_INT_MAX = 2**31 - 1
_LONG_MAX = 2**63 - 1
#: The only property without a default, used to build the defaults the topic configs inherit.
_REQUIRED = {"zookeeper.connect": "zookeeper:2181"}
#: Kafka's ConfigDef type names of the definitions' kinds.
_KIND = {
    "int": "int",
    "long": "long",
    "double": "double",
    "bool": "boolean",
    "str": "string",
    "list": "list",
}


def _bounds(info: FieldInfo) -> tuple[int | None, int | None]:
    low = next((m.ge for m in info.metadata if isinstance(m, Ge)), None)
    high = next((m.le for m in info.metadata if isinstance(m, Le)), None)
    return low, high  # type: ignore[return-value]


def static_type(info: FieldInfo) -> str:
    """Return a property's Kafka type: ``int``, ``long``, ``boolean``, ``list``, ``map``..."""
    annotation: Any = info.annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        annotation = next(a for a in typing.get_args(annotation) if a is not type(None))
    if typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    origin = typing.get_origin(annotation)
    if origin is tuple:
        return "list"
    if origin is dict:
        return "map"
    if annotation is bool:
        return "boolean"
    if annotation is int:
        return "long" if _bounds(info)[1] == _LONG_MAX else "int"
    if annotation is float:
        return "double"
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return "string"
    return "string"


def _range(low: int | float | None, high: int | float | None, kind: str) -> str:
    top = {"int": _INT_MAX, "long": _LONG_MAX}.get(kind)
    out = []
    if low is not None:
        out.append(f">= {low}")
    if high is not None and high != top:
        out.append(f"<= {high}")
    return "; ".join(out)


def _static_default(info: FieldInfo) -> str:
    if info.default is PydanticUndefined or info.is_required():
        return "required"
    text = format_value(info.default)
    return "null" if text is None else code(text) if text else '`""`'


def static_rows() -> list[list[str]]:
    """Return a row per ``server.properties`` property, sorted by name."""
    rows = []
    for info in BrokerConfig.model_fields.values():
        if info.alias is None:
            continue
        kind = static_type(info)
        low, high = _bounds(info)
        rows.append(
            [
                code(info.alias),
                kind,
                _static_default(info),
                "yes" if info.alias in DYNAMIC_BROKER_CONFIGS else "",
                _range(low, high, kind),
                info.description or "",
            ]
        )
    return sorted(rows)


def dynamic_rows() -> list[list[str]]:
    """Return a row per dynamic broker config that is not a ``server.properties`` property."""
    static = {info.alias for info in BrokerConfig.model_fields.values()}
    rows = []
    for name, definition in sorted(DYNAMIC_BROKER_CONFIGS.items()):
        if name in static:
            continue
        rows.append(
            [
                code(name),
                _KIND.get(definition.kind, definition.kind),
                "null" if definition.default is None else code(definition.default),
                "" if definition.applied else "accepted, no effect",
                definition.doc,
            ]
        )
    return rows


def _topic_default(definition: TopicConfigDef, broker: BrokerConfig) -> str:
    value = code(definition.default(broker))
    if definition.synonyms:
        return f"{value} (broker: `{definition.synonyms[0]}`)"
    return value


def topic_rows() -> list[list[str]]:
    """Return a row per topic config, sorted by name."""
    broker = BrokerConfig.from_properties(_REQUIRED)
    rows = []
    for name, definition in sorted(TOPIC_CONFIGS.items()):
        legal = _range(definition.minimum, definition.maximum, definition.kind)
        if definition.choices:
            legal = "one of " + ", ".join(code(c) for c in definition.choices)
        rows.append(
            [
                code(name),
                _KIND.get(definition.kind, definition.kind),
                _topic_default(definition, broker),
                legal,
                "" if definition.applied else "accepted, no effect",
                definition.doc,
            ]
        )
    return rows


def security_text() -> str:
    """Return the listeners' TLS, SASL and authorizer properties, as their module describes them.

    These properties are read per listener (with or without the ``listener.name.<name>.``
    prefix), so they are not fields of :class:`BrokerConfig`; the paragraphs come from
    :mod:`kpo_broker.security.config`'s docstring.
    """
    paragraphs = (security_config.__doc__ or "").strip().split("\n\n")
    return "\n\n".join(rst_to_markdown(" ".join(p.split())) for p in paragraphs) + "\n"


def zookeeper_tls_rows() -> list[list[str]]:
    """Return a row per ZooKeeper TLS property and the system property it stands for."""
    return [[code(name), code(system)] for name, system in sorted(SYSTEM_PROPERTY_OF.items())]


def generate() -> str:
    """Return the page."""
    text = header(
        "Broker configs",
        SOURCES,
        "The properties of a kpo broker's `server.properties`, its dynamic broker configs "
        "and its topic configs, with Kafka's names. A property can also be given as "
        "`KAFKA_<NAME>` in the environment (dots as underscores, in capitals), which wins "
        "over the file. An unknown property is kept and ignored, as Kafka does.",
    )
    text += "## Static properties (`server.properties`)\n\n"
    text += (
        "`dynamic`: the property can also be changed while the broker runs, per broker or "
        "as the cluster-wide default (`kafka-configs --alter --entity-type brokers`).\n\n"
    )
    text += table(["property", "type", "default", "dynamic", "range", "description"], static_rows())
    text += "\n## Dynamic broker configs\n\n"
    text += (
        "Configs that only exist as dynamic broker configs (ZooKeeper "
        "`/config/brokers/<id>` and `/config/brokers/<default>`), besides the static "
        "properties marked dynamic above. The broker defaults of the topic configs are "
        "dynamic too.\n\n"
    )
    text += table(["config", "type", "default", "note", "description"], dynamic_rows())
    text += "\n## Topic configs\n\n"
    text += (
        "Per-topic overrides (`kafka-configs --alter --entity-type topics`, or the configs "
        "of CreateTopics). Without one, a topic takes the broker config named with its "
        "default.\n\n"
    )
    text += table(["config", "type", "default", "range", "note", "description"], topic_rows())
    text += "\n## Listener security (TLS, SASL, ACLs)\n\n" + security_text()
    text += "\n## TLS to ZooKeeper\n\n"
    text += (
        "Each property falls back to the ZooKeeper client's JVM system property (from "
        "`KAFKA_OPTS`) when it is not set, as in Kafka (KIP-515).\n\n"
    )
    text += table(["property", "system property"], zookeeper_tls_rows())
    return text
