"""SubmissionBatcher: concurrent submissions go out in one AlterPartitionReassignments."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import pytest

from kpo_kafka.admin_errors import api_error
from kpo_kafka.admin_types import KafkaUnavailableError
from kpo_kafka.topic_partition import TopicPartition
from kpo_operator.reassignment_batch import Answers, SubmissionBatcher, Targets

WAIT_S = 10.0
A0: TopicPartition = ("a", 0)
A1: TopicPartition = ("a", 1)
B0: TopicPartition = ("b", 0)


class Controller:
    """Answers each request after ``gate`` is set (the first one at once); records them."""

    def __init__(self) -> None:
        self.requests: list[dict[TopicPartition, Sequence[int] | None]] = []
        self.first = threading.Event()
        self.gate = threading.Event()
        self.refuse: set[TopicPartition] = set()
        self.error: Exception | None = None

    def send(self, targets: Targets) -> Answers:
        self.requests.append(dict(targets))
        if len(self.requests) == 1:
            self.first.set()
            assert self.gate.wait(WAIT_S)
        if self.error is not None:
            raise self.error
        return {tp: api_error(39, "refused") if tp in self.refuse else None for tp in targets}


def _submit_in_thread(
    batcher: SubmissionBatcher, targets: Targets, out: dict[str, object], key: str
) -> threading.Thread:
    def run() -> None:
        try:
            out[key] = batcher.submit(targets)
        except Exception as exc:
            out[key] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _wait_joined(batcher: SubmissionBatcher, partitions: int) -> None:
    """Wait until the open batch holds ``partitions`` partitions."""
    deadline = threading.Event()
    for _ in range(int(WAIT_S / 0.01)):
        with batcher._lock:
            if batcher._open is not None and len(batcher._open.targets) >= partitions:
                return
        deadline.wait(0.01)
    raise AssertionError("the callers did not join the open batch")


def test_callers_arriving_during_a_request_share_the_next() -> None:
    controller, sent = Controller(), []
    controller.refuse = {B0}
    batcher = SubmissionBatcher(controller.send, lambda: sent.append(True))
    out: dict[str, object] = {}
    first = _submit_in_thread(batcher, {A0: [2, 1]}, out, "first")
    assert controller.first.wait(WAIT_S)
    others = [
        _submit_in_thread(batcher, {A1: [2, 1]}, out, "second"),
        _submit_in_thread(batcher, {B0: [0, 3]}, out, "third"),
    ]
    _wait_joined(batcher, 2)
    controller.gate.set()
    for thread in [first, *others]:
        thread.join(WAIT_S)
    assert controller.requests == [{A0: [2, 1]}, {A1: [2, 1], B0: [0, 3]}]
    assert out["first"] == {A0: None} and out["second"] == {A1: None}
    third = out["third"]
    assert isinstance(third, dict) and third[B0] is not None and set(third) == {B0}
    assert len(sent) == 2 and batcher.requests == 2


def test_a_partition_already_in_the_next_batch_waits_for_its_own() -> None:
    controller = Controller()
    batcher = SubmissionBatcher(controller.send)
    out: dict[str, object] = {}
    first = _submit_in_thread(batcher, {A0: [2, 1]}, out, "first")
    assert controller.first.wait(WAIT_S)
    second = _submit_in_thread(batcher, {A1: [2, 1]}, out, "second")
    _wait_joined(batcher, 1)
    cancel = _submit_in_thread(batcher, {A1: None}, out, "cancel")
    controller.gate.set()
    for thread in (first, second, cancel):
        thread.join(WAIT_S)
    assert controller.requests == [{A0: [2, 1]}, {A1: [2, 1]}, {A1: None}]
    assert out["cancel"] == {A1: None}


def test_a_failed_request_fails_each_of_its_callers() -> None:
    controller = Controller()
    batcher = SubmissionBatcher(controller.send)
    out: dict[str, object] = {}
    first = _submit_in_thread(batcher, {A0: [2, 1]}, out, "first")
    assert controller.first.wait(WAIT_S)
    controller.error = KafkaUnavailableError("controller gone")
    others = [
        _submit_in_thread(batcher, {A1: [2, 1]}, out, "second"),
        _submit_in_thread(batcher, {B0: [0, 3]}, out, "third"),
    ]
    _wait_joined(batcher, 2)
    controller.gate.set()
    for thread in [first, *others]:
        thread.join(WAIT_S)
    assert all(isinstance(out[k], KafkaUnavailableError) for k in ("first", "second", "third"))
    assert len(controller.requests) == 2
    controller.error = None
    assert batcher.submit({A0: [0, 1]}) == {A0: None}  # the next request goes out


def test_nothing_to_submit_sends_nothing() -> None:
    controller = Controller()
    assert SubmissionBatcher(controller.send).submit({}) == {}
    assert controller.requests == []


@pytest.mark.parametrize("n", [1, 3])
def test_a_lone_caller_is_sent_at_once(n: int) -> None:
    controller = Controller()
    controller.gate.set()
    batcher = SubmissionBatcher(controller.send)
    targets = {("t", p): [1, 2] for p in range(n)}
    assert batcher.submit(targets) == dict.fromkeys(targets)
    assert controller.requests == [targets]
