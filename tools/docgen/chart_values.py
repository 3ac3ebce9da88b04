"""``docs/reference/chart-values.md``: the chart's values, from its JSON schema and values.yaml.

Types and constraints come from ``values.schema.json`` (Helm checks the values against it);
defaults from ``values.yaml``, and each value's meaning from its comment there (the
comment lines right above a key; ``# --``, the helm-docs mark, starts a new comment).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import yaml
from tools.docgen.common import ROOT, code, header, schema_constraints, table

PAGE = "docs/reference/chart-values.md"
SCHEMA = "charts/kpo/values.schema.json"
VALUES = "charts/kpo/values.yaml"

_KEY = re.compile(r"^(\s*)([A-Za-z0-9_.-]+):(\s|$)")
_COMMENT = re.compile(r"^(\s*)#\s?(.*)$")


def comments(text: str) -> dict[str, str]:
    """Return value path -> its ``# --`` comment, from the lines of a values.yaml."""
    out: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    pending: list[str] = []
    for line in text.splitlines():
        comment = _COMMENT.match(line)
        if comment:
            body = comment.group(2).strip()
            if body.startswith("--"):
                pending = [body[2:].strip()]
            else:
                pending.append(body)
            continue
        key = _KEY.match(line)
        if not key:
            pending = []
            continue
        indent = len(key.group(1))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, key.group(2)))
        if pending:
            out[".".join(name for _, name in stack)] = " ".join(p for p in pending if p)
        pending = []
    return out


def _type(schema: dict[str, Any]) -> str:
    if "enum" in schema and "type" not in schema:
        return "enum"
    kind = schema.get("type", "any")
    if isinstance(kind, list):
        kind = " or ".join(kind)
    if kind == "array" and isinstance(schema.get("items"), dict):
        kind = "array of " + _type(schema["items"])
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        kind = "map of " + _type(schema["additionalProperties"])
    return str(kind)


def _default(values: Any, path: list[str]) -> str:
    node = values
    for name in path:
        if not isinstance(node, dict) or name not in node:
            return ""
        node = node[name]
    if isinstance(node, dict) and node:
        return ""
    return code(json.dumps(node))


def rows(
    schema: dict[str, Any], values: Any, notes: dict[str, str], path: list[str]
) -> Iterator[list[str]]:
    """Yield a table row per value of ``schema`` below ``path``, depth first."""
    needed = set(schema.get("required", []))
    for name, child in schema.get("properties", {}).items():
        here = [*path, name]
        dotted = ".".join(here)
        yield [
            code(dotted),
            _type(child),
            _default(values, here),
            ("required; " if name in needed else "") + "; ".join(schema_constraints(child)),
            notes.get(dotted, ""),
        ]
        yield from rows(child, values, notes, here)
        items = child.get("items")
        if isinstance(items, dict) and "properties" in items:
            yield from rows(items, None, notes, [*here[:-1], here[-1] + "[]"])


def generate() -> str:
    """Return the page."""
    schema = json.loads((ROOT / SCHEMA).read_text())
    text_values = (ROOT / VALUES).read_text()
    values = yaml.safe_load(text_values)
    notes = comments(text_values)
    page = header(
        "Chart values",
        (SCHEMA, VALUES),
        "Every value of the `kpo` Helm chart. Helm checks the values against the chart's "
        "schema: a value of the wrong type, out of range, or a key the schema does not "
        "name, fails `helm install` and `helm upgrade`. A path ending in `[]` is an item of "
        "a list; a map's default is shown on its own keys.",
    )
    return page + table(
        ["value", "type", "default", "constraints", "meaning"],
        rows(schema, values, notes, []),
    )
