"""An in-memory ObjectStore for reconciliation unit tests.

It keeps the custom resources as the API server would for what the reconcilers
rely on: ``apply`` creates or replaces the spec and maintains ``metadata``
(namespace, uid, ``generation`` bumped only when the spec changes); ``patch_status``
applies an RFC 7386 JSON merge patch to ``status`` (``None`` deletes a key, lists
are replaced) and answers the patched object; ``delete`` marks an object that has a
finalizer (``deletionTimestamp`` set, ``generation`` bumped, as the API server's
``markAsDeleting`` does) and ``remove`` drops it once the finalizer is gone. Every read
returns a deep copy, so a reconciler never shares state with the store. Events are
recorded in order; ``fail_next_patch`` makes chosen status patches fail as an
unavailable API server would.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kpo_operator.resources import ALL_KINDS, ResourceKind
from kpo_operator.store import Object, ObjectStore, ObjectStoreError
from kpo_operator.throttle_ledger import ThrottleLedger

Key = tuple[str, str, str]
"""(kind plural, namespace, name)."""

DELETION_TIMESTAMP = "2024-01-01T00:00:00Z"


@dataclass(frozen=True)
class RecordedEvent:
    """One core/v1 Event the reconcilers recorded."""

    kind: str
    name: str
    type: str
    reason: str
    message: str


def merge_patch(target: Any, patch: Any) -> Any:
    """Apply an RFC 7386 JSON merge patch; returns the new value (``target`` is not changed)."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    result: dict[str, Any] = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _plural_of(kind: str) -> str:
    for known in ALL_KINDS:
        if known.kind == kind:
            return known.plural
    raise ValueError(f"unknown kind {kind!r}")


@dataclass
class FakeObjectStore:
    """Objects keyed by (plural, namespace, name); see the module docstring."""

    objects: dict[Key, Object] = field(default_factory=dict)
    events: list[RecordedEvent] = field(default_factory=list)
    status_patches: int = 0
    known_used: int = 0
    """How often :meth:`get` returned the caller's copy (it was the latest) instead of reading."""
    fail_next_patch: list[Exception | None] = field(default_factory=list)
    """Outcomes of the next ``patch_status`` calls: an exception to raise, or ``None``."""
    _uids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    # -- test controls ------------------------------------------------------------------

    def apply(self, obj: Mapping[str, Any]) -> Object:
        """Create the object or replace its spec (and labels); returns the stored copy."""
        meta = dict(obj.get("metadata") or {})
        namespace = str(meta.get("namespace") or "default")
        key = (_plural_of(str(obj["kind"])), namespace, str(meta["name"]))
        stored = self.objects.get(key)
        if stored is None:
            stored = copy.deepcopy(dict(obj))
            stored["metadata"] = {
                **copy.deepcopy(meta),
                "namespace": namespace,
                "uid": f"uid-{next(self._uids)}",
                "generation": 1,
                "resourceVersion": "1",
            }
            stored.pop("status", None)
            self.objects[key] = stored
        else:
            if stored["metadata"].get("deletionTimestamp"):
                raise ObjectStoreError(f"{key} is being deleted")
            if obj.get("spec") != stored.get("spec"):
                stored["spec"] = copy.deepcopy(obj.get("spec"))
                stored["metadata"]["generation"] += 1
            self._touch(stored)
        return copy.deepcopy(stored)

    def set_spec(self, kind: ResourceKind, namespace: str, name: str, **fields: Any) -> Object:
        """Change some spec fields of a stored object (``None`` removes one) and apply it."""
        stored = copy.deepcopy(self.objects[(kind.plural, namespace, name)])
        stored["spec"] = merge_patch(stored.get("spec") or {}, fields)
        return self.apply(stored)

    def delete(self, kind: ResourceKind, namespace: str, name: str) -> None:
        """Mark the object deleted; it stays until :meth:`remove` (its finalizer holds it)."""
        stored = self.objects[(kind.plural, namespace, name)]
        if not stored["metadata"].get("deletionTimestamp"):
            stored["metadata"]["deletionTimestamp"] = DELETION_TIMESTAMP
            stored["metadata"]["generation"] += 1
            self._touch(stored)

    def remove(self, kind: ResourceKind, namespace: str, name: str) -> None:
        """Drop the object (its finalizer was removed)."""
        del self.objects[(kind.plural, namespace, name)]

    def status_of(self, kind: ResourceKind, namespace: str, name: str) -> dict[str, Any]:
        """The stored status (a copy), ``{}`` if none."""
        return copy.deepcopy(self.objects[(kind.plural, namespace, name)].get("status") or {})

    def events_of(self, name: str, reason: str | None = None) -> list[RecordedEvent]:
        """Events about objects named ``name``, optionally only with ``reason``."""
        return [e for e in self.events if e.name == name and reason in (None, e.reason)]

    def _touch(self, stored: Object) -> None:
        meta = stored["metadata"]
        meta["resourceVersion"] = str(int(meta.get("resourceVersion") or 0) + 1)

    # -- ObjectStore ----------------------------------------------------------------------

    def get(
        self, kind: ResourceKind, namespace: str, name: str, known: Object | None = None
    ) -> Object | None:
        found = self.objects.get((kind.plural, namespace, name))
        if found is None:
            return None
        version = (known or {}).get("metadata", {}).get("resourceVersion")
        if known is not None and version == found["metadata"]["resourceVersion"]:
            self.known_used += 1
            return known
        return copy.deepcopy(found)

    def list(self, kind: ResourceKind) -> list[Object]:
        return [
            copy.deepcopy(obj)
            for (plural, _, _), obj in sorted(self.objects.items())
            if plural == kind.plural
        ]

    def patch_status(
        self, kind: ResourceKind, namespace: str, name: str, status: Mapping[str, Any]
    ) -> Object | None:
        failure = self.fail_next_patch.pop(0) if self.fail_next_patch else None
        if failure is not None:
            raise failure
        stored = self.objects.get((kind.plural, namespace, name))
        if stored is None:  # vanished, as KubeObjectStore ignores a 404
            return None
        self.status_patches += 1
        new = merge_patch(stored.get("status") or {}, dict(status))
        if new:
            stored["status"] = new
        else:
            stored.pop("status", None)
        self._touch(stored)
        return copy.deepcopy(stored)  # the API server answers the patched object

    def create(self, kind: ResourceKind, namespace: str, body: Mapping[str, Any]) -> Object | None:
        name = str((body.get("metadata") or {}).get("name"))
        if (kind.plural, namespace, name) in self.objects:
            return None
        obj = copy.deepcopy(dict(body))
        obj["kind"] = kind.kind
        obj.setdefault("metadata", {})["namespace"] = namespace
        return self.apply(obj)

    def patch(
        self, kind: ResourceKind, namespace: str, name: str, patch: Mapping[str, Any]
    ) -> Object | None:
        stored = self.objects.get((kind.plural, namespace, name))
        if stored is None:
            return None
        if "metadata" in patch:
            stored["metadata"] = merge_patch(stored["metadata"], dict(patch["metadata"]))
            self._touch(stored)
        if "spec" in patch:
            return self.set_spec(kind, namespace, name, **dict(patch["spec"]))
        return copy.deepcopy(stored)

    def event(self, obj: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        meta = obj.get("metadata") or {}
        self.events.append(
            RecordedEvent(str(obj.get("kind")), str(meta.get("name")), type_, reason, message)
        )


def _conforms(store: FakeObjectStore) -> ObjectStore:
    """Let mypy check that the fake implements the protocol."""
    return store


class MemoryLedgerStore:
    """A :class:`~kpo_operator.throttle_ledger.ThrottleLedgerStore` in memory.

    It keeps the JSON form (as the ConfigMap does), so a restarted writer reads back
    exactly what was saved; ``saves`` counts the writes and ``fail_next_save`` makes the
    next save fail as an unavailable API server would.
    """

    def __init__(self) -> None:
        self.text: str | None = None
        self.saves = 0
        self.fail_next_save = False

    def load(self) -> ThrottleLedger | None:
        return None if self.text is None else ThrottleLedger.from_json(self.text)

    def save(self, ledger: ThrottleLedger) -> None:
        if self.fail_next_save:
            self.fail_next_save = False
            raise ObjectStoreError("save ledger: 503 Service Unavailable")
        self.text = ledger.to_json()
        self.saves += 1

    def discard(self) -> None:
        self.text = None

    @property
    def ledger(self) -> ThrottleLedger:
        """The saved ledger (empty when none was saved)."""
        return self.load() or ThrottleLedger()
