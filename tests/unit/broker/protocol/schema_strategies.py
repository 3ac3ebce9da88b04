"""Hypothesis strategies that build random kafka-python messages from their JSON schema.

Walks the schema fields present at a version (``cls.fields``), draws a value
for each by type and builds the message; :func:`plain` turns a message back
into nested dicts/lists of the same fields, to compare a decoded message with
the one encoded.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

_INTS = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
}


def _simple(type_str: str, nullable: bool) -> st.SearchStrategy[Any]:
    if type_str in _INTS:
        lo, hi = _INTS[type_str]
        return st.integers(lo, hi)
    if type_str == "bool":
        return st.booleans()
    if type_str == "string":
        text = st.text(max_size=12)
        return st.none() | text if nullable else text
    if type_str == "uuid":
        return st.uuids()
    if type_str in ("bytes", "records"):
        raw = st.binary(max_size=16)
        return st.none() | raw if nullable else raw
    if type_str == "uint16":
        return st.integers(0, 2**16 - 1)
    if type_str == "float64":
        return st.floats(allow_nan=False)
    raise AssertionError(f"no strategy for schema type {type_str}")


def _fields(fields: dict[str, Any], version: int) -> st.SearchStrategy[dict[str, Any]]:
    drawn: dict[str, st.SearchStrategy[Any]] = {}
    for name, field in fields.items():
        if not field.for_version_q(version):
            continue
        if field.is_struct_array():
            drawn[name] = st.lists(_struct(field, version), max_size=3)
        elif field.is_array():
            drawn[name] = st.lists(_simple(field.array_of.type_str, False), max_size=4)
        else:
            drawn[name] = _simple(field.type_str, field.nullable_for_version_q(version))
    return st.fixed_dictionaries(drawn)


def _struct(field: Any, version: int) -> st.SearchStrategy[Any]:
    return _fields(field.fields, version).map(lambda values: field.data_class(**values))


def messages(message_class: Any, version: int) -> st.SearchStrategy[Any]:
    """Random instances of ``message_class`` with every field of ``version`` set."""
    return _fields(message_class.fields, version).map(
        lambda values: message_class(version=version, **values)
    )


def plain(message: Any, fields: dict[str, Any], version: int) -> dict[str, Any]:
    """The values of ``fields`` present at ``version``, nested structs as dicts."""
    out: dict[str, Any] = {}
    for name, field in fields.items():
        if not field.for_version_q(version):
            continue
        value = getattr(message, name)
        if field.is_struct_array():
            out[name] = [plain(item, field.fields, version) for item in value]
        else:
            out[name] = value
    return out
