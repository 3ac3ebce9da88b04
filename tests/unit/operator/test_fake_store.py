"""The in-memory object store behaves like the API server for what the reconcilers use."""

from __future__ import annotations

from kpo_operator.resources import PARTITION_REASSIGNMENT
from tests.unit.operator.fake_store import FakeObjectStore, merge_patch
from tests.unit.operator.reassignment_env import NS, reassignment


def test_fake_store_generation_and_merge_patch() -> None:
    store = FakeObjectStore()
    created = store.apply(reassignment("a", [("t", 0, [1])]))
    assert created["metadata"]["generation"] == 1 and created["metadata"]["uid"]
    store.patch_status(PARTITION_REASSIGNMENT, NS, "a", {"phase": "Moving", "eta": "x"})
    store.apply(reassignment("a", [("t", 0, [1])]))  # same spec: no new generation
    assert store.objects[("partitionreassignments", NS, "a")]["metadata"]["generation"] == 1
    store.set_spec(PARTITION_REASSIGNMENT, NS, "a", cancel=True)
    assert store.objects[("partitionreassignments", NS, "a")]["metadata"]["generation"] == 2
    store.patch_status(PARTITION_REASSIGNMENT, NS, "a", {"eta": None, "partitions": [{"x": 1}]})
    assert store.status_of(PARTITION_REASSIGNMENT, NS, "a") == {
        "phase": "Moving",
        "partitions": [{"x": 1}],
    }
    assert store.status_patches == 2
    assert merge_patch({"a": {"b": 1, "c": 2}}, {"a": {"b": None, "d": [3]}}) == {
        "a": {"c": 2, "d": [3]}
    }
    store.delete(PARTITION_REASSIGNMENT, NS, "a")
    meta = store.objects[("partitionreassignments", NS, "a")]["metadata"]
    assert meta["deletionTimestamp"] and meta["generation"] == 3


def test_set_spec_none_removes_a_field() -> None:
    store = FakeObjectStore()
    store.apply(reassignment("a", [("t", 0, [1])], throttle={"replicationRate": 5}))
    store.set_spec(PARTITION_REASSIGNMENT, NS, "a", throttle=None)
    stored = store.objects[("partitionreassignments", NS, "a")]
    assert "throttle" not in stored["spec"] and stored["metadata"]["generation"] == 2
