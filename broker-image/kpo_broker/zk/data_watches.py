"""Data watches installed many at a time, delivered without a blocking read.

kazoo's ``DataWatch`` recipe reads its znode synchronously when it is installed and again
on kazoo's one callback thread before each delivery. For the few znodes a broker watches
that is fine; for the state znodes of thousands of partitions being reassigned (Kafka's
``PartitionReassignmentIsrChangeHandler``, one per partition) it costs one round trip per
partition to install (the controller's event thread waits for each) and, once they
change together, one round trip per partition on the callback thread before each event
is delivered, so the events of one burst of ISR changes trickle in one round trip apart
and the controller handles them in many small batches.

:class:`DataWatchSet` keeps such watches as raw ZooKeeper ``exists`` watches (set by
``exists``, triggered by the creation, deletion or data change of the znode, whether or
not it existed):

* :meth:`DataWatchSet.add` sends the ``exists`` requests of many znodes pipelined and
  returns once every watch is in place (a change after that is reported);
* a trigger sends the ``exists`` that re-arms the watch asynchronously and delivers the
  event when its answer arrives, so a reader that handles the event reads a state at
  least as new as the re-armed watch (no change falls between two watches);
* ZooKeeper drops a connection's watches with it and kazoo does not restore them on a
  reconnection, so after each (re)connection every watch is re-armed the same way, and
  a change made meanwhile (another ``mzxid``, or the znode created or deleted) is
  delivered as kazoo's recipe does.

Callbacks run on kazoo's threads, get a :class:`~kpo_broker.zk.watches.ZkWatchEvent`
and must not block.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

from kazoo.exceptions import ConnectionLoss, SessionExpiredError, SessionMovedError, ZookeeperError
from kazoo.protocol.states import EventType, WatchedEvent

from kpo_broker.zk.errors import ZkOperationError
from kpo_broker.zk.watches import WatchCallback, ZkWatch, ZkWatchEvent, ZkWatchEventType

_log = logging.getLogger(__name__)

#: kazoo's event types of a data watch -> ours.
_KINDS = {
    EventType.CREATED: ZkWatchEventType.CREATED,
    EventType.DELETED: ZkWatchEventType.DELETED,
    EventType.CHANGED: ZkWatchEventType.DATA_CHANGED,
}

#: Sends ``(path, send)`` requests pipelined and returns each one's result or error
#: (:meth:`~kpo_broker.zk.session.ZkSession.handle_requests`).
SendMany = Callable[[Sequence[tuple[str, Callable[[], Any]]]], list[Any]]


def _observed(stat: Any) -> tuple[bool, int]:
    """Return (exists, mzxid) of an ``exists`` answer (a ``ZnodeStat`` or None)."""
    return (False, 0) if stat is None else (True, int(stat.mzxid))


class _DataWatch:
    """One znode's watch: its handle, callback, kazoo watcher and the last state seen.

    ``seen`` is the answer of the newest ``exists`` answered (by sequence number:
    ZooKeeper answers one session's requests in the order they were sent).
    """

    def __init__(self, handle: ZkWatch, callback: WatchCallback) -> None:
        self.handle = handle
        self.callback = callback
        self.watcher: Callable[[WatchedEvent], None] = lambda _: None
        self.seen: tuple[bool, int] | None = None
        self.seen_seq = 0


class DataWatchSet:
    """The pipelined data watches of one ZooKeeper session (see module docstring).

    Args:
        client: the session's ``KazooClient`` (its ``exists_async``).
        send_many: sends the installing requests pipelined and waits for their answers.
    """

    def __init__(self, client: Any, send_many: SendMany) -> None:
        self._client = client
        self._send_many = send_many
        self._lock = threading.Lock()
        self._watches: dict[ZkWatch, _DataWatch] = {}
        self._seq = itertools.count(1)
        self._send_lock = threading.Lock()

    def add(self, watched: Sequence[tuple[str, WatchCallback]]) -> list[ZkWatch]:
        """Watch each ``(path, callback)``: creation, deletion and data change are delivered.

        The znodes need not exist. Installing reports nothing; every change after this
        returns is delivered once the watch is re-armed.

        Returns:
            per entry, in order, the handle that cancels its watch.

        Raises:
            ZkConnectionLossError: the connection failed while installing (no watch of
                this call is kept).
            ZkOperationError: ZooKeeper refused an ``exists`` (e.g. no access); no watch
                of this call is kept.
        """
        entries = [_DataWatch(ZkWatch(path), callback) for path, callback in watched]
        seqs: dict[ZkWatch, int] = {}

        def install(entry: _DataWatch) -> Callable[[], Any]:
            entry.watcher = self._watcher(entry)

            def send() -> Any:
                with self._send_lock:
                    seqs[entry.handle] = next(self._seq)
                    return self._client.exists_async(entry.handle.path, watch=entry.watcher)

            return send

        requests = [(entry.handle.path, install(entry)) for entry in entries]
        with self._lock:
            for entry in entries:
                self._watches[entry.handle] = entry
        try:
            answers = self._send_many(requests)
            for entry, answer in zip(entries, answers, strict=True):
                if isinstance(answer, ZookeeperError):
                    raise ZkOperationError(
                        entry.handle.path, f"cannot watch it: {type(answer).__name__}"
                    )
        except BaseException:
            for entry in entries:
                self.cancel(entry.handle)
            raise
        for entry, answer in zip(entries, answers, strict=True):
            self._record(entry, seqs[entry.handle], answer)
        return [entry.handle for entry in entries]

    def cancel(self, handle: ZkWatch) -> None:
        """Stop delivering ``handle``'s events and forget the watch now.

        ``handle.cancel()`` alone stops the deliveries too; the set then forgets the
        watch at its next trigger or re-arm. ZooKeeper drops the watch at its next trigger.
        """
        handle.cancel()
        with self._lock:
            self._watches.pop(handle, None)

    def rearm_all(self) -> None:
        """Re-arm every watch after a (re)connection; deliver what changed meanwhile.

        Non-blocking (sends asynchronous requests): callable from kazoo's connection
        thread, as a session listener.
        """
        with self._lock:
            for handle in [h for h in self._watches if not h.active]:
                del self._watches[handle]
            entries = list(self._watches.values())
        for entry in entries:
            self._rearm(entry, None)

    def __len__(self) -> int:
        """Return the number of watches in place."""
        with self._lock:
            return len(self._watches)

    # --- kazoo's threads ---------------------------------------------------------------

    def _watcher(self, entry: _DataWatch) -> Callable[[WatchedEvent], None]:
        """Return the kazoo watcher function of ``entry`` (one per entry, kept once by kazoo)."""

        def watcher(event: WatchedEvent) -> None:
            kind = _KINDS.get(event.type)
            if kind is not None:  # else a connection or session event: see rearm_all
                self._rearm(entry, kind)

        return watcher

    def _rearm(self, entry: _DataWatch, kind: ZkWatchEventType | None) -> None:
        """Send ``entry``'s ``exists`` again; on its answer deliver ``kind`` (or what changed)."""
        if not entry.handle.active:
            with self._lock:
                self._watches.pop(entry.handle, None)
            return
        try:
            with self._send_lock:  # sequence numbers in the order the requests are sent
                seq = next(self._seq)
                pending = self._client.exists_async(entry.handle.path, watch=entry.watcher)
        except Exception as exc:  # the client is closed: nothing left to watch
            _log.debug("cannot re-arm the watch of %s: %r", entry.handle.path, exc)
            return

        def answered(result: Any) -> None:
            try:
                stat = result.get_nowait()
            except (ConnectionLoss, SessionExpiredError, SessionMovedError):
                return  # re-armed by rearm_all once connected again
            except ZookeeperError as exc:
                _log.warning("cannot re-arm the watch of %s: %r", entry.handle.path, exc)
                return
            except Exception:
                return  # the connection dropped or the client closed
            self._deliver(entry, seq, stat, kind)

        pending.rawlink(answered)

    def _deliver(
        self, entry: _DataWatch, seq: int, stat: Any, kind: ZkWatchEventType | None
    ) -> None:
        """Record an answer; deliver ``kind``, or (after a reconnection) what changed."""
        before = entry.seen
        newest = self._record(entry, seq, stat)
        if not entry.handle.active:
            return
        if kind is None:
            now = _observed(stat)
            if not newest or before is None or now == before:
                return
            if now[0] != before[0]:
                kind = ZkWatchEventType.CREATED if now[0] else ZkWatchEventType.DELETED
            else:
                kind = ZkWatchEventType.DATA_CHANGED
        entry.callback(ZkWatchEvent(entry.handle.path, kind))

    def _record(self, entry: _DataWatch, seq: int, stat: Any) -> bool:
        """Keep ``stat`` as ``entry``'s state if its request is the newest; say if it was."""
        with self._lock:
            if seq <= entry.seen_seq:
                return False
            entry.seen, entry.seen_seq = _observed(stat), seq
            return True
