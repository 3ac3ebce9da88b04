"""Which object submitted which in-flight partition, shared by a cluster's reconcile steps.

Every step of a PartitionReassignment attributes the partitions in flight to the objects
that accepted them (:func:`~kpo_operator.reassignment_actions.owners_of_in_flight`, over a
list of every PartitionReassignment). Listed per step, the API server answers every object's
status (up to 2,000 partition entries each) to every object every poll interval: requests
grow with the objects and the bytes with their square. :class:`InFlightOwners` lists at
most once per ``max_age_s`` for all steps, and each status the operator writes replaces its
object's entry at once (write-through), so an object's own acceptance is never missed by
the next step of another object on this operator (the operator is the only writer of these
statuses), and each step records its own object as read (:meth:`InFlightOwners.seen`), so the
list itself is needed only for objects no step of this process has seen yet (after a restart)
and can be rare. Objects deleted meanwhile leave the index at the next list. While one step lists,
the others use the index as it is (up to ``serve_stale_s`` old) instead of waiting for the
list: the steps' pace is then not bound by how fast the API server answers a large list.
The index is kept both ways (object -> partitions, partition -> object), so a step looks up
the owners of its own topics' in-flight partitions (:meth:`InFlightOwners.owners_of`) at a
cost that grows with its partitions, not with every object's.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kpo_kafka.topic_partition import TopicPartition
from kpo_operator.reassignment_actions import owners_of_in_flight
from kpo_operator.reassignment_status import accepted_partitions
from kpo_operator.resources import PARTITION_REASSIGNMENT
from kpo_operator.states import ACTIVE_STATES, THROTTLING_PHASES
from kpo_operator.store import ObjectStore, object_key


def active_partitions(status: Mapping[str, Any]) -> frozenset[TopicPartition]:
    """Return the partitions an object with ``status`` holds in flight (active entries)."""
    if status.get("phase") not in THROTTLING_PHASES:
        return frozenset()
    return frozenset(
        tp
        for tp, accepted in accepted_partitions(status).items()
        if accepted.state in ACTIVE_STATES
    )


class InFlightOwners:
    """``namespace/name`` of the object owning each in-flight partition, listed once per interval.

    Args:
        store: The cluster's (scoped) object store.
        max_age_s: How old the list may be, seconds; ``<= 0`` lists on every call.
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
        self._held: dict[str, frozenset[TopicPartition]] = {}
        self._owner: dict[TopicPartition, str] = {}  # the inverse of _held
        self._written: dict[str, float] = {}  # key -> when its status was written here

    def owners(self, exclude: str) -> dict[TopicPartition, str]:
        """Partitions other objects hold in flight -> their ``namespace/name``."""
        if self.max_age_s <= 0:
            return owners_of_in_flight(self.store, exclude)
        self._refresh()
        with self._lock:
            return {tp: key for key, held in self._held.items() if key != exclude for tp in held}

    def owners_of(
        self, partitions: Iterable[TopicPartition], exclude: str
    ) -> dict[TopicPartition, str]:
        """Those of ``partitions`` other objects hold in flight -> their ``namespace/name``.

        As :meth:`owners` restricted to ``partitions`` (a step's in-flight partitions), at a
        cost that grows with them rather than with every object's partitions.
        """
        if self.max_age_s <= 0:
            every = owners_of_in_flight(self.store, exclude)
            return {tp: every[tp] for tp in partitions if tp in every}
        self._refresh()
        with self._lock:
            found = {tp: self._owner.get(tp) for tp in partitions}
        return {tp: key for tp, key in found.items() if key is not None and key != exclude}

    def _refresh(self) -> None:
        """List the objects again when the index is older than ``max_age_s`` (see the class)."""
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

    def seen(self, key: str, held: frozenset[TopicPartition]) -> None:
        """Record what object ``key`` holds in flight, as a step just read it (latest version).

        Every moving object steps once per poll interval, so the steps themselves keep
        the index current between lists. ``held``: :func:`active_partitions` of its status.
        """
        with self._lock:
            self._hold(key, held)
            self._written[key] = self.clock()

    def written(
        self, obj: Mapping[str, Any], held: frozenset[TopicPartition] | None = None
    ) -> None:
        """Record the status just written for ``obj`` (write-through).

        ``held``: :func:`active_partitions` of that status when the caller has it parsed
        already (parsing up to 2,000 entries again costs more than the rest of this).
        """
        key = object_key(obj)
        if held is None:
            held = active_partitions(obj.get("status") or {})
        with self._lock:
            self._hold(key, held)
            self._written[key] = self.clock()

    def forget(self, key: str) -> None:
        """Drop a deleted object."""
        with self._lock:
            self._hold(key, frozenset())
            self._held.pop(key, None)
            self._written.pop(key, None)

    def _hold(self, key: str, held: frozenset[TopicPartition]) -> None:
        """Set what ``key`` holds, in both directions (the caller holds the lock)."""
        before = self._held.get(key)
        if before == held:
            return
        for tp in (before or frozenset()) - held:
            if self._owner.get(tp) == key:
                del self._owner[tp]
        for tp in held - before if before is not None else held:
            self._owner[tp] = key
        self._held[key] = held

    def _relist(self) -> None:
        started = self.clock()
        objects = self.store.list(PARTITION_REASSIGNMENT)
        listed = {object_key(o): active_partitions(o.get("status") or {}) for o in objects}
        with self._lock:
            # A status written here after the list began is newer than the list's copy.
            for key, at in self._written.items():
                if at >= started and key in self._held:
                    listed[key] = self._held[key]
            self._held = listed
            self._owner = {tp: key for key, held in listed.items() for tp in held}
            self._written = {k: at for k, at in self._written.items() if at >= started}
            self._listed_at = started
