import threading
from dataclasses import dataclass

import pytest

from kpo_broker.controller.errors import NotControllerError
from kpo_broker.controller.event_manager import EVENT_THREAD_NAME, ControllerEventManager
from kpo_broker.controller.events import ControlledShutdown, ControllerEvent, TopicChange

TIMEOUT_S = 10


@dataclass(frozen=True)
class Numbered(ControllerEvent):
    number: int


class Recorder:
    """Records processed events and the threads that processed them."""

    def __init__(self, block: threading.Event | None = None) -> None:
        self.processed: list[ControllerEvent] = []
        self.threads: set[str] = set()
        self.preempted: list[ControllerEvent] = []
        self.started = threading.Event()
        self.block = block
        self.done = threading.Semaphore(0)

    def process(self, event: ControllerEvent) -> None:
        self.threads.add(threading.current_thread().name)
        self.started.set()
        if self.block is not None:
            self.block.wait(TIMEOUT_S)
        if isinstance(event, Numbered) and event.number < 0:
            raise RuntimeError("boom")
        self.processed.append(event)
        self.done.release()

    def preempt(self, event: ControllerEvent) -> None:
        self.preempted.append(event)
        event.preempt(NotControllerError("preempted"))

    def wait(self, count: int) -> None:
        for _ in range(count):
            assert self.done.acquire(timeout=TIMEOUT_S)


def test_events_put_from_many_threads_are_processed_in_order_on_one_thread() -> None:
    recorder = Recorder()
    manager = ControllerEventManager(recorder)
    manager.start()
    per_thread = 50

    def producer(base: int) -> None:
        for i in range(per_thread):
            manager.put(Numbered(base + i))

    threads = [threading.Thread(target=producer, args=(k * 1000,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    recorder.wait(4 * per_thread)
    manager.close()

    assert recorder.threads == {EVENT_THREAD_NAME}
    numbers = [e.number for e in recorder.processed if isinstance(e, Numbered)]
    assert len(numbers) == 4 * per_thread
    for k in range(4):  # each producer's events keep their order
        mine = [n for n in numbers if k * 1000 <= n < (k + 1) * 1000]
        assert mine == sorted(mine)


def test_processing_error_does_not_stop_the_thread() -> None:
    recorder = Recorder()
    manager = ControllerEventManager(recorder)
    manager.start()
    manager.put(Numbered(-1))
    manager.put(Numbered(1))
    recorder.wait(1)
    manager.close()
    assert recorder.processed == [Numbered(1)]


def test_clear_and_put_preempts_queued_events_and_keeps_the_new_one() -> None:
    release = threading.Event()
    recorder = Recorder(block=release)
    manager = ControllerEventManager(recorder)
    manager.start()
    manager.put(Numbered(1))
    assert recorder.started.wait(TIMEOUT_S)  # the thread is busy with event 1
    shutdown = ControlledShutdown(2, 5)
    manager.put(shutdown)
    manager.put(Numbered(2))
    assert manager.queue_size == 2

    manager.clear_and_put(TopicChange())
    release.set()
    recorder.wait(2)
    manager.close()

    assert recorder.processed == [Numbered(1), TopicChange()]
    assert recorder.preempted == [shutdown, Numbered(2)]
    with pytest.raises(NotControllerError):
        shutdown.result.result(TIMEOUT_S)


def test_close_preempts_queued_events_and_later_puts() -> None:
    release = threading.Event()
    recorder = Recorder(block=release)
    manager = ControllerEventManager(recorder)
    manager.start()
    manager.put(Numbered(1))
    assert recorder.started.wait(TIMEOUT_S)
    queued = ControlledShutdown(1, 1)
    manager.put(queued)

    closer = threading.Thread(target=manager.close)
    closer.start()
    release.set()
    closer.join(TIMEOUT_S)
    assert not closer.is_alive()

    late = ControlledShutdown(2, 2)
    manager.put(late)
    manager.close()  # idempotent
    assert recorder.processed == [Numbered(1)]
    assert recorder.preempted == [queued, late]
    assert isinstance(late.result.exception(TIMEOUT_S), NotControllerError)


def test_is_event_thread() -> None:
    seen: list[bool] = []
    processed = threading.Event()

    class Processor:
        def process(self, event: ControllerEvent) -> None:
            seen.append(manager.is_event_thread())
            processed.set()

        def preempt(self, event: ControllerEvent) -> None:
            pass

    manager = ControllerEventManager(Processor())
    manager.start()
    manager.put(TopicChange())
    assert processed.wait(TIMEOUT_S)
    manager.close()
    assert seen == [True]
    assert not manager.is_event_thread()


def test_take_queued_removes_the_events_of_one_kind_and_keeps_the_others_in_order() -> None:
    block = threading.Event()
    recorder = Recorder(block)
    manager = ControllerEventManager(recorder)
    manager.start()
    try:
        manager.put(TopicChange())  # the thread takes it and blocks in process()
        assert recorder.started.wait(TIMEOUT_S)
        for event in (Numbered(1), TopicChange(), Numbered(2), TopicChange(), Numbered(3)):
            manager.put(event)

        taken = manager.take_queued(Numbered)

        assert taken == [Numbered(1), Numbered(2), Numbered(3)]
        assert manager.queue_size == 2
        assert manager.take_queued(Numbered) == []
        block.set()
        recorder.wait(3)
        assert recorder.processed == [TopicChange(), TopicChange(), TopicChange()]
    finally:
        block.set()
        manager.close(TIMEOUT_S)
