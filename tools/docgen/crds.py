"""``docs/reference/crds.md``: every field of the custom resources, from their CRD schemas."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from tools.docgen.common import ROOT, code, header, schema_constraints, table

PAGE = "docs/reference/crds.md"

#: The CRDs, in the order of the page.
CRDS = (
    "crds/kpo.dev_partitionreassignments.yaml",
    "crds/kpo.dev_topicreplicaquotas.yaml",
    "crds/kpo.dev_kafkaclusters.yaml",
    "crds/kpo.dev_balancingpolicies.yaml",
)

_TOP_LEVEL = ("apiVersion", "kind", "metadata")


def _type(schema: dict[str, Any]) -> str:
    """Return a field's type: ``string``, ``integer (int64)``, ``array of string``..."""
    if schema.get("x-kubernetes-int-or-string"):
        return "integer or string"
    kind = str(schema.get("type", "any"))
    if schema.get("format"):
        kind += f" ({schema['format']})"
    if kind == "array" and "items" in schema:
        kind = "array of " + _type(schema["items"])
    if kind == "object" and "additionalProperties" in schema:
        values = schema["additionalProperties"]
        kind = "map of " + (_type(values) if isinstance(values, dict) else "any")
    return kind


def _constraints(schema: dict[str, Any]) -> list[str]:
    """Return a field's constraints in words: the JSON Schema ones, list types, CEL rules."""
    out = schema_constraints(schema)
    if schema.get("x-kubernetes-list-type"):
        keys = schema.get("x-kubernetes-list-map-keys")
        out.append(
            f"list type {schema['x-kubernetes-list-type']}"
            + (f" (keys {', '.join(keys)})" if keys else "")
        )
    for rule in schema.get("x-kubernetes-validations", []):
        out.append(f"rule {code(rule['rule'])}: {rule.get('message', '')}".rstrip(": "))
    return out


def fields(
    schema: dict[str, Any], path: str = "", required: bool = False
) -> Iterator[tuple[str, dict[str, Any], bool]]:
    """Yield (path, schema, required) of every field below ``schema``, depth first."""
    if path:
        yield path, schema, required
    needed = set(schema.get("required", []))
    for name, child in schema.get("properties", {}).items():
        if not path and name in _TOP_LEVEL:
            continue
        yield from fields(child, f"{path}.{name}" if path else name, name in needed)
    items = schema.get("items")
    if isinstance(items, dict) and ("properties" in items or "items" in items):
        yield from _below(items, f"{path}[]")


def _below(schema: dict[str, Any], path: str) -> Iterator[tuple[str, dict[str, Any], bool]]:
    """Yield the fields below an array's item schema (the item itself is its array's row)."""
    needed = set(schema.get("required", []))
    for name, child in schema.get("properties", {}).items():
        yield from fields(child, f"{path}.{name}", name in needed)
    items = schema.get("items")
    if isinstance(items, dict) and ("properties" in items or "items" in items):
        yield from _below(items, f"{path}[]")


def _default(schema: dict[str, Any]) -> str:
    if "default" not in schema:
        return ""
    return code(json.dumps(schema["default"]))


def _description(schema: dict[str, Any]) -> str:
    text = " ".join(str(schema.get("description", "")).split())
    items = schema.get("items")
    if isinstance(items, dict) and items.get("description") and "properties" not in items:
        text += " Each item: " + " ".join(str(items["description"]).split())
    return text


def crd_section(path: Path) -> str:
    """Return the section of one CRD: names, printer columns and a table of its fields."""
    crd = yaml.safe_load(path.read_text())
    spec = crd["spec"]
    names = spec["names"]
    out = [f"## {names['kind']}\n"]
    facts = [
        f"`{spec['group']}`, {spec['scope'].lower()}",
        f"plural `{names['plural']}`",
    ]
    if names.get("shortNames"):
        facts.append("short names " + ", ".join(f"`{n}`" for n in names["shortNames"]))
    out.append("; ".join(facts) + f" (`{path.relative_to(ROOT)}`).\n")
    for version in spec["versions"]:
        schema = version["schema"]["openAPIV3Schema"]
        out.append(f"### {names['kind']} {version['name']}\n")
        if schema.get("description"):
            out.append(" ".join(str(schema["description"]).split()) + "\n")
        columns = version.get("additionalPrinterColumns", [])
        if columns:
            out.append("Columns of `kubectl get`:\n")
            out.append(
                table(
                    ["column", "type", "JSON path", "description"],
                    (
                        [c["name"], c["type"], code(c["jsonPath"]), c.get("description", "")]
                        for c in columns
                    ),
                )
            )
        out.append("Fields:\n")
        out.append(
            table(
                ["field", "type", "required", "default", "constraints", "description"],
                (
                    [
                        code(field),
                        _type(child),
                        "yes" if needed else "",
                        _default(child),
                        "; ".join(_constraints(child)),
                        _description(child),
                    ]
                    for field, child, needed in fields(schema)
                ),
            )
        )
    return "\n".join(out)


def generate() -> str:
    """Return the page."""
    text = header(
        "Custom resources",
        CRDS,
        "Every field of the three custom resources of the `kpo.dev` API group, as their "
        "CustomResourceDefinitions declare it (the API server enforces the types and "
        "constraints). A field path ending in `[]` is an item of a list.",
    )
    return text + "\n".join(crd_section(ROOT / crd) for crd in CRDS)
