"""The cluster's PartitionReassignments as this operator last saw them, shared by all its parts.

Two parts of the operator need every PartitionReassignment of a cluster: each reconcile
step attributes the partitions in flight to the objects that accepted them (the active
entries of Moving or Cancelling objects, :func:`active_partitions`), and each throttle sync
merges the contributions of every Moving or Cancelling object
(:class:`~kpo_operator.throttle_writer.ThrottleWriter`). Listed per step or per sync, the
API server answers every object's status (up to 2,000 partition entries each) several
times per poll interval: requests grow with the objects and the bytes with objects x
partitions (200 objects of 2,000 partitions answer about 114 MB per list).

:class:`ReassignmentIndex` holds each object as this operator last saw it, and both are
derived from it. It lists at most once per ``max_age_s`` for the whole cluster; every
status the operator writes replaces its object's entry at once (write-through,
:meth:`ReassignmentIndex.written`, with the ``resourceVersion`` the API server answered
the patch with), so a step or a sync right after a write sees that write (the operator
is the only writer of these statuses); each step records its object as read
(:meth:`ReassignmentIndex.seen`), so the list is needed only for objects no step of this
process has seen (created meanwhile, or before a restart) and can be rare; a deleted
object leaves at once (:meth:`ReassignmentIndex.forget`), and one deleted behind the
operator's back at the next list. Each entry carries the time its content was known
current (the list's start, the write, the start of the step's read): an older copy never
replaces a newer one, so neither a list begun before a write nor a step's read older
than a write brings an old status back. While one caller lists, the others use the index
as it is (up to ``serve_stale_s`` old) instead of waiting: the steps' and syncs' pace is
then not bound by how fast the API server answers a large list. The in-flight partitions
are kept both ways (object -> partitions, partition -> object), so a step looks up the
owners of its own topics' partitions (:meth:`ReassignmentIndex.owners_of`) at a cost that
grows with its partitions, not with every object's.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kpo_kafka.states import ACTIVE_STATES, THROTTLING_PHASES
from kpo_kafka.topic_partition import TopicPartition
from kpo_operator.reassignment_status import accepted_partitions
from kpo_operator.resources import PARTITION_REASSIGNMENT
from kpo_operator.store import Object, ObjectStore, object_key


def active_partitions(status: Mapping[str, Any]) -> frozenset[TopicPartition]:
    """Return the partitions an object with ``status`` holds in flight (active entries)."""
    if status.get("phase") not in THROTTLING_PHASES:
        return frozenset()
    return frozenset(
        tp
        for tp, accepted in accepted_partitions(status).items()
        if accepted.state in ACTIVE_STATES
    )


@dataclass(frozen=True)
class _Entry:
    """One object as the index holds it.

    Attributes:
        at: When its content was known current (the index's clock, seconds).
        obj: The object (``None``: deleted, kept until the next list that began later).
        held: :func:`active_partitions` of its status.
    """

    at: float
    obj: Object | None
    held: frozenset[TopicPartition]


class ReassignmentIndex:
    """Every PartitionReassignment of one cluster as last seen, listed at most once per interval.

    Args:
        store: The cluster's (scoped) object store.
        max_age_s: How old the list may be, seconds; ``<= 0`` lists on every call (each
            answer then replaces the index whole: nothing written or seen is kept).
        clock: Monotonic seconds.
        serve_stale_s: How old the index may be while another caller lists, seconds
            (default ``4 * max_age_s``); older, callers wait for that list.

    Errors: ``ObjectStoreError`` of the list propagates.
    """

    def __init__(
        self,
        store: ObjectStore,
        max_age_s: float,
        clock: Callable[[], float] = time.monotonic,
        serve_stale_s: float | None = None,
    ) -> None:
        self.store = store
        self.max_age_s = max_age_s
        self.serve_stale_s = 4 * max_age_s if serve_stale_s is None else serve_stale_s
        self.clock = clock
        self._lock = threading.Lock()
        self._listing = threading.Lock()
        self._listed_at: float | None = None
        self._entries: dict[str, _Entry] = {}
        self._owner: dict[TopicPartition, str] = {}  # partition -> the key holding it

    def objects(self) -> list[Object]:
        """Every object as last seen (listed again when the index is ``max_age_s`` old).

        The objects are shared, not copied: the caller must not change them.
        """
        self._refresh()
        with self._lock:
            return [e.obj for e in self._entries.values() if e.obj is not None]

    def owners(self, exclude: str) -> dict[TopicPartition, str]:
        """Partitions other objects hold in flight -> their ``namespace/name``."""
        self._refresh()
        with self._lock:
            return {tp: key for key, e in self._entries.items() if key != exclude for tp in e.held}

    def owners_of(
        self, partitions: Iterable[TopicPartition], exclude: str
    ) -> dict[TopicPartition, str]:
        """Those of ``partitions`` other objects hold in flight -> their ``namespace/name``.

        As :meth:`owners` restricted to ``partitions`` (a step's in-flight partitions), at a
        cost that grows with them rather than with every object's partitions.
        """
        self._refresh()
        with self._lock:
            found = {tp: self._owner.get(tp) for tp in partitions}
        return {tp: key for tp, key in found.items() if key is not None and key != exclude}

    def seen(
        self, obj: Mapping[str, Any], held: frozenset[TopicPartition], at: float | None = None
    ) -> None:
        """Record ``obj`` as a step just read it.

        Every moving object steps once per poll interval, so the steps themselves keep
        the index current between lists. ``held``: :func:`active_partitions` of its
        status; ``at``: when the read began (this index's :attr:`clock`; default now). A
        read older than what the index holds (a status written here since) is ignored.
        """
        self._put(object_key(obj), _copy(obj), held, self.clock() if at is None else at)

    def written(
        self, obj: Mapping[str, Any], held: frozenset[TopicPartition] | None = None
    ) -> None:
        """Record the status just written for ``obj`` (write-through).

        ``obj`` carries the written status and the ``metadata.resourceVersion`` the API
        server answered the patch with (none when unknown: a cache keyed by it then
        compares contents). ``held``: :func:`active_partitions` of that status when the
        caller has it parsed already (parsing up to 2,000 entries again costs more than
        the rest of this).
        """
        if held is None:
            held = active_partitions(obj.get("status") or {})
        self._put(object_key(obj), _copy(obj), held, self.clock())

    def forget(self, key: str) -> None:
        """Drop a deleted object (a list begun before this does not bring it back)."""
        self._put(key, None, frozenset(), self.clock())

    def _put(
        self, key: str, obj: Object | None, held: frozenset[TopicPartition], at: float
    ) -> None:
        """Set ``key``'s entry unless the index holds a newer one (``at``: as of when)."""
        with self._lock:
            before = self._entries.get(key)
            if before is not None and before.at > at:
                return  # the index holds a newer copy
            self._hold(key, before.held if before is not None else frozenset(), held)
            self._entries[key] = _Entry(at, obj, held)

    def _hold(
        self, key: str, before: frozenset[TopicPartition], held: frozenset[TopicPartition]
    ) -> None:
        """Move ``key``'s partitions in the inverse map (the caller holds the lock)."""
        if before == held:
            return
        for tp in before - held:
            if self._owner.get(tp) == key:
                del self._owner[tp]
        for tp in held - before:
            self._owner[tp] = key

    def _refresh(self) -> None:
        """List the objects again when the index is older than ``max_age_s`` (see the class)."""
        if self.max_age_s <= 0:
            with self._listing:
                self._relist()
            return
        with self._lock:
            listed_at = self._listed_at
        age = None if listed_at is None else self.clock() - listed_at
        if age is None or age >= self.max_age_s:
            servable = age is not None and age < self.serve_stale_s
            if self._listing.acquire(blocking=not servable):  # else: someone lists already
                try:
                    with self._lock:
                        listed = self._listed_at
                    if listed is None or self.clock() - listed >= self.max_age_s:
                        self._relist()
                finally:
                    self._listing.release()

    def _relist(self) -> None:
        """List every object; keep what was written or read here since the list began."""
        started = self.clock()
        objects = self.store.list(PARTITION_REASSIGNMENT)
        listed = {object_key(o): o for o in objects}
        with self._lock:
            entries: dict[str, _Entry] = {}
            if self.max_age_s > 0:
                # What was written or read here after the list began is newer than its copy.
                entries = {k: e for k, e in self._entries.items() if e.at >= started}
            for key, obj in listed.items():
                if key in entries:
                    continue
                known = self._entries.get(key)
                ours = known.obj if known is not None else None
                if known is not None and ours is not None and _version(ours) == _version(obj) != "":
                    # Unchanged since: keep the copy held (shared with the steps, parsed).
                    entries[key] = _Entry(started, ours, known.held)
                else:
                    entries[key] = _Entry(started, obj, active_partitions(obj.get("status") or {}))
            self._entries = entries
            self._owner = {tp: key for key, e in entries.items() for tp in e.held}
            self._listed_at = started


def _version(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def _copy(obj: Mapping[str, Any]) -> Object:
    """Copy the top level of ``obj`` (its values are shared: nobody edits them in place).

    A step goes on replacing its object's ``status`` and ``metadata`` after recording
    it; the index keeps the object as it was then.
    """
    return dict(obj)
