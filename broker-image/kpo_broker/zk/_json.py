"""JSON helpers shared by the znode codecs: compact encoding and typed field access.

Kafka writes compact UTF-8 JSON; readers reject wrong types with
:class:`MalformedZNodeDataError`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from kpo_broker.zk.errors import MalformedZNodeDataError


def dump(document: Mapping[str, Any]) -> bytes:
    """Encode ``document`` as compact UTF-8 JSON, as Kafka (Jackson) writes it."""
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def load_object(data: bytes, what: str) -> dict[str, Any]:
    """Decode znode bytes holding a JSON object; ``what`` names the format in errors."""
    try:
        document = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise MalformedZNodeDataError(what, f"not JSON ({exc})") from exc
    if not isinstance(document, dict):
        raise MalformedZNodeDataError(what, "not a JSON object")
    return document


def as_int(value: object, what: str, field: str) -> int:
    """Return ``value`` if it is a JSON integer (not a boolean)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise MalformedZNodeDataError(what, f"{field} must be an integer, got {value!r}")
    return value


def as_str(value: object, what: str, field: str) -> str:
    """Return ``value`` if it is a JSON string."""
    if not isinstance(value, str):
        raise MalformedZNodeDataError(what, f"{field} must be a string, got {value!r}")
    return value


def as_int_list(value: object, what: str, field: str) -> tuple[int, ...]:
    """Return ``value`` as a tuple if it is a JSON list of integers."""
    if not isinstance(value, list):
        raise MalformedZNodeDataError(what, f"{field} must be a list, got {value!r}")
    return tuple(as_int(item, what, field) for item in value)


def required(document: Mapping[str, Any], key: str, what: str) -> Any:
    """Return ``document[key]``, raising when the key is missing."""
    if key not in document:
        raise MalformedZNodeDataError(what, f"missing {key!r}")
    return document[key]
