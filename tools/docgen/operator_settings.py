"""``docs/reference/operator-settings.md``: the operator's environment, from its settings model."""

from __future__ import annotations

import types
import typing
from typing import Any

from annotated_types import Ge, Gt, Le, Lt, MaxLen, MinLen
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined
from tools.docgen.common import code, docstring_section, header, rst_to_markdown, table

from kpo_kafka import client_config
from kpo_operator import settings
from kpo_operator.settings import ENV_PREFIX, OperatorSettings

PAGE = "docs/reference/operator-settings.md"
SOURCES = ("operator/kpo_operator/settings.py", "kafka-client/kpo_kafka/client_config.py")

#: Settings read from something else than ``KPO_<FIELD NAME>``: the Kafka client's security.
_NOT_ONE_VARIABLE = "kafka_security"

_BOUNDS = ((Gt, "gt", "> {}"), (Ge, "ge", ">= {}"), (Lt, "lt", "< {}"), (Le, "le", "<= {}"))


def type_name(annotation: Any) -> str:
    """Return a settings field's type in words: ``float``, ``list of str``, ``int or unset``."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is tuple and args and args[-1] is Ellipsis:
        return f"comma-separated list of {type_name(args[0])}"
    if origin in (typing.Union, types.UnionType):
        named = [type_name(a) for a in args if a is not type(None)]
        return " or ".join(named) + (" or unset" if type(None) in args else "")
    return getattr(annotation, "__name__", str(annotation))


def constraints(info: FieldInfo) -> str:
    """Return a field's constraints (bounds, lengths, pattern) in words."""
    out = []
    for item in info.metadata:
        for kind, attribute, words in _BOUNDS:
            if isinstance(item, kind):
                out.append(words.format(getattr(item, attribute)))
        if isinstance(item, MinLen):
            out.append(f"length >= {item.min_length}")
        if isinstance(item, MaxLen):
            out.append(f"length <= {item.max_length}")
        pattern = getattr(item, "pattern", None)
        if pattern:
            out.append("pattern " + code(pattern))
    return "; ".join(out)


def default(info: FieldInfo) -> str:
    """Return a field's default as the environment would spell it (``required``)."""
    if info.is_required():
        return "required"
    if info.default is PydanticUndefined:
        return "see meaning"
    value = info.default
    if value is None:
        return "unset"
    if isinstance(value, tuple):
        return code(",".join(value)) if value else "empty"
    return code(value)


def _variables_rows() -> list[list[str]]:
    meanings = docstring_section(OperatorSettings, "Attributes")
    rows = []
    for name, info in OperatorSettings.model_fields.items():
        if name == _NOT_ONE_VARIABLE:
            continue
        rows.append(
            [
                code(ENV_PREFIX + name.upper()),
                code(name),
                type_name(info.annotation),
                default(info),
                constraints(info),
                meanings.get(name, ""),
            ]
        )
    return rows


def _client_rows() -> list[list[str]]:
    prefix = client_config.ENV_PREFIX
    rows = [
        [
            code(prefix + "CLIENT_CONFIG"),
            "a Kafka client properties file (Kafka's `--command-config` format); the "
            "variables below win over it, property by property",
        ]
    ]
    for prop in client_config.SUPPORTED_PROPERTIES:
        variable = prop.upper().replace(".", "_").replace("-", "_")
        secret = " (a secret)" if prop in client_config.SECRET_PROPERTIES else ""
        rows.append([code(prefix + variable), f"Kafka's `{prop}`{secret}"])
    for who in ("USERNAME", "PASSWORD"):
        rows.append(
            [code(prefix + "SASL_" + who), f"the SASL {who.lower()}, instead of `sasl.jaas.config`"]
        )
    return rows


def generate() -> str:
    """Return the page."""
    text = header(
        "Operator settings",
        SOURCES,
        "The operator reads its settings from environment variables when it starts (the "
        "chart sets them from its values). A missing required variable or a value out of "
        "range stops the operator with the variable named. The variable of a setting is "
        f"`{ENV_PREFIX}` and the setting's name in capitals.",
    )
    text += "## Settings\n\n"
    text += table(
        ["variable", "setting", "type", "default", "constraints", "meaning"], _variables_rows()
    )
    text += "\n## Kafka client security\n\n"
    text += (
        f"The `{_NOT_ONE_VARIABLE}` setting (TLS and SASL of the operator's Kafka client) "
        f"comes from `{client_config.ENV_PREFIX}*` variables; without any, the client uses "
        "PLAINTEXT. Each property variable also has a `_FILE` form whose value is read from "
        "that file (a mounted Secret). An unknown or unsupported property stops the operator "
        "at start with the property named.\n\n"
    )
    text += table(["variable", "meaning"], _client_rows())
    last = (settings.__doc__ or "").strip().split("\n\n")[-1]
    text += "\n" + rst_to_markdown(" ".join(last.split())) + "\n"
    return text
