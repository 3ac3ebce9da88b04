"""kopf's diff base kept as a digest of the spec (:mod:`kpo_operator.diffbase`)."""

from __future__ import annotations

import json
from typing import Any

import kopf
from kopf._cogs.structs import diffs, patches

from kpo_operator.diffbase import SPEC_DIGEST, SpecDigestDiffBaseStorage, spec_digest

SPEC = {
    "partitions": [
        {"topic": f"t{p // 100}", "partition": p % 100, "replicas": [2, 1]} for p in range(2000)
    ]
}


def _body(spec: dict[str, Any], **annotations: str) -> kopf.Body:
    return kopf.Body(
        {
            "apiVersion": "kpo.dev/v1alpha1",
            "kind": "PartitionReassignment",
            "metadata": {"name": "pr", "namespace": "ns", "annotations": annotations},
            "spec": spec,
            "status": {"phase": "Moving", "partitions": [{"topic": "t0", "partition": 0}]},
        }
    )


def _stored(storage: SpecDigestDiffBaseStorage, body: kopf.Body) -> str:
    patch = patches.Patch()
    storage.store(body=body, patch=patch, essence=storage.build(body=body))
    return str(patch["metadata"]["annotations"]["kpo.dev/last-handled-configuration"])


def test_the_stored_essence_holds_the_specs_digest_not_the_spec() -> None:
    storage = SpecDigestDiffBaseStorage(prefix="kpo.dev")
    body = _body(SPEC, team="payments")
    stored = _stored(storage, body)
    assert json.loads(stored) == {
        "spec": {SPEC_DIGEST: spec_digest(SPEC)},
        "metadata": {"annotations": {"team": "payments"}},
    }
    assert len(stored) < 200  # against about 100 KiB for the spec of 2,000 entries itself
    assert len(json.dumps(SPEC)) > 90_000


def test_a_changed_spec_is_a_change_on_spec_and_an_unchanged_one_is_none() -> None:
    storage = SpecDigestDiffBaseStorage(prefix="kpo.dev")
    handled = _body(SPEC)
    annotated = _body(SPEC, **{"kpo.dev/last-handled-configuration": _stored(storage, handled)})
    old = storage.fetch(body=annotated)
    assert old is not None
    # Unchanged spec, new status: nothing for kopf's on.update(field="spec").
    assert not diffs.reduce(diffs.diff(old, storage.build(body=annotated)), ("spec",))
    edited = json.loads(json.dumps(SPEC))
    edited["partitions"][1999]["replicas"] = [1, 2]
    changed = diffs.reduce(diffs.diff(old, storage.build(body=_body(edited))), ("spec",))
    assert changed  # the digest differs: the handlers are called


def test_the_digest_does_not_depend_on_key_order() -> None:
    assert spec_digest({"a": 1, "b": [1, 2]}) == spec_digest({"b": [1, 2], "a": 1})
    assert spec_digest({"a": 1, "b": [1, 2]}) != spec_digest({"a": 1, "b": [2, 1]})
