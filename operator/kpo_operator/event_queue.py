"""Events recorded off the steps' path: an :class:`ObjectStore` whose ``event`` does not wait.

A step records a core/v1 Event at each phase change (``Accepted``, ``Submitted``,
``Completed``...): one POST to the API server, best effort, whose answer the step does not
use. Made in the step, it added a round trip to every acceptance and every submission;
200 objects applied at once waited for 400 of them. :class:`QueuedEvents` hands them to one
thread that posts them in order, and forwards everything else to the store it wraps.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Mapping
from typing import Any

from kpo_operator.resources import ResourceKind
from kpo_operator.store import Object, ObjectStore, object_key

logger = logging.getLogger(__name__)

MAX_QUEUED = 10_000
"""Events waiting to be posted at most; beyond, new ones are dropped (and logged)."""

_Event = tuple[Mapping[str, Any], str, str, str]


class QueuedEvents:
    """:class:`~kpo_operator.store.ObjectStore` posting Events from a thread of its own.

    Args:
        store: The store every call goes to (Events too, from the posting thread).
        max_queued: Events waiting at most (:data:`MAX_QUEUED`).

    Events are posted in the order recorded; the posting thread starts with the first
    one. :meth:`flush` waits until those recorded so far are posted.
    """

    def __init__(self, store: ObjectStore, max_queued: int = MAX_QUEUED) -> None:
        self._store = store
        self._queue: queue.Queue[_Event | threading.Event] = queue.Queue(max_queued)
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def get(
        self, kind: ResourceKind, namespace: str, name: str, known: Object | None = None
    ) -> Object | None:
        """See :meth:`ObjectStore.get`."""
        return self._store.get(kind, namespace, name, known)

    def list(self, kind: ResourceKind) -> list[Object]:
        """See :meth:`ObjectStore.list`."""
        return self._store.list(kind)

    def patch_status(
        self, kind: ResourceKind, namespace: str, name: str, status: Mapping[str, Any]
    ) -> Object | None:
        """See :meth:`ObjectStore.patch_status`."""
        return self._store.patch_status(kind, namespace, name, status)

    def create(self, kind: ResourceKind, namespace: str, body: Mapping[str, Any]) -> Object | None:
        """See :meth:`ObjectStore.create`."""
        return self._store.create(kind, namespace, body)

    def patch(
        self, kind: ResourceKind, namespace: str, name: str, patch: Mapping[str, Any]
    ) -> Object | None:
        """See :meth:`ObjectStore.patch`."""
        return self._store.patch(kind, namespace, name, patch)

    def event(self, obj: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        """Queue a core/v1 Event about ``obj``; it is posted by the posting thread."""
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._post, name="events", daemon=True)
                self._thread.start()
        # The object as it is now: the step goes on changing its own copy.
        about = {k: obj[k] for k in ("apiVersion", "kind", "metadata") if k in obj}
        try:
            self._queue.put_nowait((about, type_, reason, message))
        except queue.Full:
            waiting = self._queue.maxsize
            logger.warning("event %s on %s dropped: %d waiting", reason, object_key(obj), waiting)

    def flush(self, timeout_s: float = 10.0) -> bool:
        """Wait until the Events recorded so far are posted; ``False`` on timeout."""
        if self._thread is None:
            return True
        done = threading.Event()
        self._queue.put(done)
        return done.wait(timeout_s)

    def _post(self) -> None:
        while True:
            item = self._queue.get()
            if isinstance(item, threading.Event):
                item.set()  # a flush: everything before it is posted
                continue
            about, type_, reason, message = item
            try:
                self._store.event(about, type_, reason, message)
            except Exception:  # best effort, as the store's own
                logger.exception("could not record event %s on %s", reason, object_key(about))
