"""Every PartitionReassignment of the operator stepped by one tracker: a queue, a few threads.

A kopf timer per object, each step in one of kopf's few handler threads, made the pace of
every object's status the pace of that pool: with 200 moving objects at a 2 s poll
interval, 100 steps a second were asked of 8 threads whose steps each waited for a status
PATCH, a throttle sync or a cluster read, so steps queued, an object's status went
unchanged for tens of seconds and a new object waited behind all the polls.

:class:`ReassignmentTracker` steps the objects itself:

- kopf's handlers only hand objects over (:meth:`ReassignmentTracker.track`): a created,
  changed or resumed object is *urgent* and is stepped at once, ahead of the polls; the
  timer hands over kopf's live body of an active object (kept current by kopf's watch:
  the step reads the object from it without a GET when the operator has seen no newer
  version, :meth:`~kpo_operator.store.ObjectStore.get`);
- every ``interval_s`` (a *tick*, on a fixed grid: a late tick does not shift the next
  ones) every tracked object not in a final phase is queued for a poll step; one stepped
  less than half an interval before the tick (an urgent step) waits for the next tick;
- ``workers`` threads take the steps from the queue (urgent first, then in the order
  queued); one object is never stepped by two threads at once, and an object handed over
  again while it is being stepped is stepped once more afterwards;
- before queueing a tick's polls, ``prepare`` runs once (the reconcilers' work shared by
  all the tick's steps, e.g. one throttle sync confirming every object waiting to submit),
  waited for at most half an interval;
- a step that raises an exception with a ``delay_s`` attribute (``RetryLater``) is not
  stepped again before that many seconds; another exception, before the next tick.

The steps of one tick run concurrently, so their cluster reads share one read
(:class:`~kpo_operator.cluster_reader.SharedClusterReader`), their throttle syncs one sync
(:class:`~kpo_operator.throttle_writer.ThrottleWriter`'s group commit) and their
submissions one AlterPartitionReassignments request
(:class:`~kpo_operator.reassignment_batch.SubmissionBatcher`). What a step does is the
caller's (:meth:`~kpo_operator.runtime.OperatorRuntime.run_on` of
:meth:`~kpo_operator.reassignment.ReassignmentReconciler.reconcile`, under the object's
lock): the tracker only decides when.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kpo_kafka.states import FINAL_PHASES

logger = logging.getLogger(__name__)

URGENT = 0
"""Queue priority of a created, changed or resumed object (stepped before the polls)."""
POLL = 1
"""Queue priority of a poll step."""

Key = tuple[str, str]
"""``(namespace, name)`` of an object."""

Step = Callable[[str, str, "str | None", "Mapping[str, Any] | None"], "str | None"]
"""Takes one step of ``(namespace, name, spec.clusterRef, kopf's body)``; returns the phase
afterwards (``None``: the object is gone)."""


@dataclass
class _Tracked:
    """One object as the tracker holds it.

    Attributes:
        cluster_ref: Its ``spec.clusterRef`` (``None``: the default connection).
        body: kopf's body of it (the timer's is live: kopf replaces its content).
        fresh: The body a change handler handed over, for the next step only (it is the
            event's: not replaced by later ones).
        phase: Its phase after its last step (``None``: not stepped yet, or no phase).
        not_before: No step before this time (the tracker's clock, seconds): a retry delay.
        started_at: When its last step began (the tracker's clock, seconds).
        queued: A step of it is queued or running.
        again: Handed over while queued or running: step it once more afterwards.
        urgent: That step is urgent.
    """

    cluster_ref: str | None
    body: Mapping[str, Any] | None
    fresh: Mapping[str, Any] | None = None
    phase: str | None = None
    not_before: float = 0.0
    started_at: float | None = None
    queued: bool = False
    again: bool = False
    urgent: bool = False


class ReassignmentTracker:
    """Steps every tracked PartitionReassignment once per ``interval_s``, and new ones at once.

    Args:
        step: Takes one step of an object (see :data:`Step`); an exception with a
            ``delay_s`` attribute delays the object's next step by that many seconds.
        interval_s: The poll interval, seconds.
        workers: Threads taking steps (each mostly waits for Kafka or the API server).
        prepare: Called once per tick, before its polls are queued (errors are logged).
        clock: Monotonic seconds.

    Threads start with the first :meth:`track`; :meth:`close` stops them.
    """

    def __init__(
        self,
        step: Step,
        interval_s: float,
        workers: int,
        prepare: Callable[[], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self._step = step
        self.interval_s = interval_s
        self.workers = workers
        self._prepare = prepare
        self.clock = clock
        self._lock = threading.Condition()
        self._tracked: dict[Key, _Tracked] = {}
        self._queue: list[tuple[int, int, Key]] = []  # (priority, order, key): a heap
        self._order = itertools.count()
        self._threads: list[threading.Thread] = []
        self._closed = False
        self._ticker = threading.Event()  # set: stop ticking
        self._preparing = threading.Event()  # set: a prepare runs

    # -- what kopf's handlers call --------------------------------------------------------

    def track(
        self,
        namespace: str,
        name: str,
        cluster_ref: str | None,
        body: Mapping[str, Any] | None,
        urgent: bool = False,
    ) -> None:
        """Hand an object over: keep it polled; ``urgent``: step it now, ahead of the polls.

        Never blocks on a step (kopf's handlers call it, an async one among them).
        """
        key = (namespace, name)
        with self._lock:
            if self._closed:
                return
            self._start()
            tracked = self._tracked.get(key)
            if tracked is None:
                tracked = self._tracked[key] = _Tracked(cluster_ref, body)
                urgent = True  # new to this process: its first step now
            tracked.cluster_ref = cluster_ref
            if urgent and body is not None:
                tracked.fresh = body  # the change to step now (a handler's body is not live)
                tracked.body = tracked.body or body
            elif body is not None:
                tracked.body = body
            if urgent:
                tracked.not_before = 0.0
                self._enqueue(key, tracked, URGENT)

    def forget(self, namespace: str, name: str) -> None:
        """Stop tracking a deleted object (a step in progress finishes)."""
        with self._lock:
            self._tracked.pop((namespace, name), None)

    def tracked(self) -> list[Key]:
        """Return the objects tracked now."""
        with self._lock:
            return list(self._tracked)

    def cluster_refs(self) -> set[tuple[str, str | None]]:
        """``(namespace, spec.clusterRef)`` of the tracked objects (the clusters they act on)."""
        with self._lock:
            return {(key[0], t.cluster_ref) for key, t in self._tracked.items()}

    def close(self) -> None:
        """Stop the threads (steps in progress finish; queued ones are dropped)."""
        with self._lock:
            self._closed = True
            self._queue.clear()
            self._lock.notify_all()
        self._ticker.set()
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(timeout=5)

    # -- scheduling -------------------------------------------------------------------------

    def _start(self) -> None:
        """Start the ticker and the workers (the caller holds the lock)."""
        if self._threads:
            return
        ticker = threading.Thread(target=self._tick_forever, name="pr-tracker-tick", daemon=True)
        self._threads.append(ticker)
        for i in range(self.workers):
            worker = threading.Thread(target=self._work, name=f"pr-tracker-{i}", daemon=True)
            self._threads.append(worker)
        for thread in self._threads:
            thread.start()

    def _enqueue(self, key: Key, tracked: _Tracked, priority: int) -> None:
        """Queue a step of ``key`` unless one is queued or running (the caller holds the lock)."""
        if tracked.queued:
            tracked.again = True
            tracked.urgent = tracked.urgent or priority == URGENT
            return
        tracked.queued = True
        heapq.heappush(self._queue, (priority, next(self._order), key))
        self._lock.notify()

    def _tick_forever(self) -> None:
        """Queue a poll of every active object at each multiple of ``interval_s``."""
        due = self.clock() + self.interval_s
        while not self._ticker.wait(max(0.0, due - self.clock())):
            self.tick()
            now = self.clock()
            due += self.interval_s
            if due <= now:  # a late tick: the next multiple, not a burst of catch-ups
                due += self.interval_s * ((now - due) // self.interval_s + 1)

    def tick(self) -> int:
        """Run ``prepare`` and queue a poll step of every active object; return how many.

        ``prepare`` runs in a thread of its own and is waited for at most half an
        interval (a throttle sync waits for the one in progress, and a broker slow to
        answer holds it up to the request timeout): the polls are queued then, and a
        step that needed what it prepares does it itself. No second ``prepare`` starts
        while one runs.
        """
        run = self._prepare
        if run is not None and not self._preparing.is_set():
            self._preparing.set()
            done = threading.Event()

            def prepare() -> None:
                try:
                    run()
                except Exception:  # the steps report what fails; the tick goes on
                    logger.exception("preparing the reassignments' poll failed")
                finally:
                    self._preparing.clear()
                    done.set()

            threading.Thread(target=prepare, name="pr-tracker-prepare", daemon=True).start()
            done.wait(self.interval_s / 2)
        now = self.clock()
        queued = 0
        with self._lock:
            for key, tracked in self._tracked.items():
                if tracked.phase in FINAL_PHASES or tracked.not_before > now:
                    continue
                if _deleting(tracked.body):
                    continue  # its delete handler takes its steps
                if tracked.started_at is not None and now - tracked.started_at < (
                    self.interval_s / 2
                ):
                    continue  # stepped just now (urgent): polled at the next tick
                self._enqueue(key, tracked, POLL)
                queued += 1
        return queued

    def _work(self) -> None:
        while True:
            with self._lock:
                while not self._queue and not self._closed:
                    self._lock.wait()
                if self._closed:
                    return
                _, _, key = heapq.heappop(self._queue)
                tracked = self._tracked.get(key)
                if tracked is None:
                    continue  # forgotten while queued
                tracked.again = False
                tracked.urgent = False
                tracked.started_at = self.clock()
                ref, body = tracked.cluster_ref, tracked.fresh or tracked.body
                tracked.fresh = None
            phase, delay = self._run(key, ref, body)
            with self._lock:
                tracked.queued = False
                if self._tracked.get(key) is not tracked:
                    continue
                if delay is not None:
                    tracked.not_before = self.clock() + delay
                elif phase is None:
                    self._tracked.pop(key, None)  # gone
                    continue
                else:
                    tracked.phase = phase
                if tracked.again and not self._closed:
                    self._enqueue(key, tracked, URGENT if tracked.urgent else POLL)

    def _run(
        self, key: Key, ref: str | None, body: Mapping[str, Any] | None
    ) -> tuple[str | None, float | None]:
        """Take one step; return ``(phase, None)`` or ``(None, delay)`` when it failed."""
        try:
            return self._step(key[0], key[1], ref, body), None
        except Exception as exc:
            delay = getattr(exc, "delay_s", None)
            if delay is None:
                logger.exception("step of PartitionReassignment %s/%s failed", *key)
                return None, self.interval_s
            logger.info("PartitionReassignment %s/%s: %s (retry in %gs)", *key, exc, delay)
            return None, float(delay)


def _deleting(body: Mapping[str, Any] | None) -> bool:
    return bool(body is not None and (body.get("metadata") or {}).get("deletionTimestamp"))
