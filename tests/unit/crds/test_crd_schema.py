"""Static checks of the CRD manifests: structural schemas, a description on every field."""

from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from kpo_operator.resources import ALL_KINDS, GROUP, VERSION
from tests.conftest import CRDS_DIR, EXAMPLES_DIR

CRD_FILES = sorted(CRDS_DIR.glob("*.yaml"))


def _load(path: Any) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(path.read_text())
    return doc


def _walk(schema: dict[str, Any], path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    yield path, schema
    for name, sub in schema.get("properties", {}).items():
        yield from _walk(sub, f"{path}.{name}")
    if "items" in schema:
        yield from _walk(schema["items"], f"{path}[]")


def test_one_crd_per_kind_in_the_project_group() -> None:
    names = {_load(p)["metadata"]["name"] for p in CRD_FILES}
    assert names == {kind.crd_name for kind in ALL_KINDS}
    for path in CRD_FILES:
        spec = _load(path)["spec"]
        assert spec["group"] == GROUP
        assert spec["scope"] == "Namespaced"
        assert [v["name"] for v in spec["versions"]] == [VERSION]
        kind = next(k for k in ALL_KINDS if k.kind == spec["names"]["kind"])
        assert tuple(spec["names"]["shortNames"]) == kind.short_names


@pytest.mark.parametrize("path", CRD_FILES, ids=lambda p: p.name)
def test_every_field_is_typed_and_described(path: Any) -> None:
    version = _load(path)["spec"]["versions"][0]
    schema = version["schema"]["openAPIV3Schema"]
    missing_type = [p for p, s in _walk(schema, "") if "type" not in s]
    # metadata may carry nothing but its type (the apiserver forbids more).
    missing_description = [
        p for p, s in _walk(schema, "") if not s.get("description") and p != ".metadata"
    ]
    assert missing_type == []
    assert missing_description == []
    assert version["subresources"] == {"status": {}}
    assert {c["name"] for c in version["additionalPrinterColumns"]} >= {"Age"}


ACTION_CRD_FILES = [p for p in CRD_FILES if "kafkaclusters" not in p.name]
"""The CRDs of what to do (not the KafkaCluster connection, which holds the addresses)."""


@pytest.mark.parametrize("path", ACTION_CRD_FILES, ids=lambda p: p.name)
def test_no_field_names_a_network_address(path: Any) -> None:
    schema = _load(path)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    words = ("bootstrap", "server", "host", "url", "endpoint", "address")
    fields = [p.lower() for p, _ in _walk(schema, "")]
    assert [f for f in fields if any(w in f for w in words)] == []


def test_examples_use_the_served_kinds() -> None:
    examples = sorted(EXAMPLES_DIR.glob("*.yaml"))
    assert len(examples) >= 4
    kinds = {k.kind for k in ALL_KINDS}
    for path in examples:
        doc = _load(path)
        assert doc["apiVersion"] == f"{GROUP}/{VERSION}"
        assert doc["kind"] in kinds
    assert {_load(p)["kind"] for p in examples} == kinds
