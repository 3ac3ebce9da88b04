"""The controller's event queue and the one thread that processes it.

As Kafka's ``ControllerEventManager`` / ``ControllerEventThread``: ZooKeeper watch
callbacks (kazoo's threads), broker request handlers (the broker's asyncio loop),
scheduled tasks and broker responses only :meth:`ControllerEventManager.put` events;
a single dedicated thread takes them in FIFO order and hands each to the
:class:`ControllerEventProcessor`, so the controller's state is only ever touched by
that thread and needs no locks (Kafka's single-threaded controller).
"""

from __future__ import annotations

import collections
import logging
import threading
from typing import Protocol, TypeVar

from kpo_broker.controller.events import ControllerEvent, ShutdownEventThread

_log = logging.getLogger(__name__)

E = TypeVar("E", bound=ControllerEvent)

#: Name of the event thread, as in Kafka.
EVENT_THREAD_NAME = "controller-event-thread"


class ControllerEventProcessor(Protocol):
    """What the event thread calls: the controller."""

    def process(self, event: ControllerEvent) -> None:
        """Apply ``event``; called on the event thread only, one event at a time."""
        ...

    def preempt(self, event: ControllerEvent) -> None:
        """Answer ``event`` without applying it (queue cleared or closed); any thread."""
        ...


class ControllerEventManager:
    """A FIFO of controller events drained by one dedicated thread.

    Args:
        processor: applies the events (the controller).
        thread_name: name of the event thread.

    Exceptions raised by :meth:`ControllerEventProcessor.process` are logged and the
    thread goes on with the next event (Kafka logs them too); the processor handles
    the ones it knows (e.g. a fenced ZooKeeper write makes it resign).
    """

    def __init__(
        self, processor: ControllerEventProcessor, *, thread_name: str = EVENT_THREAD_NAME
    ) -> None:
        self._processor = processor
        self._queue: collections.deque[ControllerEvent] = collections.deque()
        self._cond = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=thread_name, daemon=True)

    @property
    def queue_size(self) -> int:
        """Number of events waiting (the event being processed is not counted)."""
        with self._cond:
            return len(self._queue)

    def is_event_thread(self) -> bool:
        """Whether the caller runs on the event thread."""
        return threading.current_thread() is self._thread

    def start(self) -> None:
        """Start the event thread (once).

        Raises:
            RuntimeError: already started.
        """
        self._thread.start()

    def put(self, event: ControllerEvent) -> None:
        """Append ``event`` to the queue; safe from any thread, never blocks on processing.

        After :meth:`close` the event is preempted at once instead.
        """
        with self._cond:
            if not self._closed:
                self._queue.append(event)
                self._cond.notify()
                return
        self._processor.preempt(event)

    def take_queued(self, kind: type[E]) -> list[E]:
        """Remove and return the queued events of type ``kind``, in queue order.

        Called on the event thread to handle many events of one kind as one batch (the
        controller does so with the state znode changes of partitions being
        reassigned: thousands arrive together when a large reassignment catches up).
        Only for events whose handling re-reads what it acts on, so that handling one
        earlier than its place in the queue changes nothing.
        """
        with self._cond:
            taken = [event for event in self._queue if isinstance(event, kind)]
            if taken:
                kept = [event for event in self._queue if not isinstance(event, kind)]
                self._queue.clear()
                self._queue.extend(kept)
            return taken

    def clear_and_put(self, event: ControllerEvent) -> None:
        """Preempt every queued event, then queue ``event`` alone (Kafka's ``clearAndPut``).

        Used for ZooKeeper session expiry: the events queued before it would act on a
        controller state that is about to be discarded.
        """
        with self._cond:
            dropped = list(self._queue)
            self._queue.clear()
            if not self._closed:
                self._queue.append(event)
                self._cond.notify()
            else:
                dropped.append(event)
        for queued in dropped:
            self._processor.preempt(queued)

    def close(self, timeout_s: float | None = None) -> None:
        """Preempt the queued events, stop the thread after its current event, and join it.

        Idempotent. Must not be called from the event thread itself (it would wait for
        itself); there, the thread is only told to stop.

        Args:
            timeout_s: how long to wait for the thread, in seconds; None waits forever.
        """
        with self._cond:
            already_closed = self._closed
            self._closed = True
            dropped = list(self._queue)
            self._queue.clear()
            if not already_closed:
                self._queue.append(ShutdownEventThread())
                self._cond.notify()
        for queued in dropped:
            if not isinstance(queued, ShutdownEventThread):
                self._processor.preempt(queued)
        if self._thread.is_alive() and not self.is_event_thread():
            self._thread.join(timeout_s)

    def _take(self) -> ControllerEvent:
        with self._cond:
            while not self._queue:
                self._cond.wait()
            return self._queue.popleft()

    def _run(self) -> None:
        while True:
            event = self._take()
            if isinstance(event, ShutdownEventThread):
                return
            try:
                self._processor.process(event)
            except Exception:
                _log.exception("error while processing controller event %s", event.name)
