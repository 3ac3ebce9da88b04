"""The sliding window of pipelined ZooKeeper requests, with a fake of kazoo's async results."""

from __future__ import annotations

import pytest

from kpo_broker.zk.pipeline import DEFAULT_MAX_IN_FLIGHT_REQUESTS, pipeline, round_trips


class FakeServer:
    """Answers requests in the order they were sent, like one ZooKeeper session.

    Records how many requests await their answer at each send, and the order of events.
    """

    def __init__(self) -> None:
        self.in_flight: list[int] = []
        self.events: list[str] = []
        self.max_in_flight = 0

    def send(self, request: int) -> FakeAsyncResult:
        self.in_flight.append(request)
        self.max_in_flight = max(self.max_in_flight, len(self.in_flight))
        self.events.append(f"send {request}")
        return FakeAsyncResult(self, request)


class FakeAsyncResult:
    """kazoo's ``IAsyncResult``: ``get`` returns the answer (here the request squared)."""

    def __init__(self, server: FakeServer, request: int) -> None:
        self._server, self._request = server, request

    def get(self) -> int:
        # ZooKeeper answers in order: the oldest request in flight is this one.
        assert self._server.in_flight[0] == self._request
        self._server.in_flight.pop(0)
        self._server.events.append(f"wait {self._request}")
        if self._request < 0:
            raise ConnectionError(f"lost during {self._request}")
        return self._request * self._request


def run(requests: list[int], window: int) -> tuple[list[int], FakeServer]:
    server = FakeServer()
    results = pipeline(requests, window, server.send, lambda _, pending: pending.get())
    return results, server


def test_results_come_back_in_request_order() -> None:
    results, server = run(list(range(25)), 4)
    assert results == [i * i for i in range(25)]
    assert server.in_flight == []


@pytest.mark.parametrize(("count", "window"), [(25, 1), (25, 4), (25, 10), (3, 10), (10, 10)])
def test_never_more_than_the_window_in_flight(count: int, window: int) -> None:
    _, server = run(list(range(count)), window)
    assert server.max_in_flight == min(count, window)


def test_each_answer_lets_the_next_request_go() -> None:
    _, server = run(list(range(5)), 2)
    assert server.events == [
        "send 0",
        "send 1",
        "wait 0",
        "send 2",
        "wait 1",
        "send 3",
        "wait 2",
        "send 4",
        "wait 3",
        "wait 4",
    ]


def test_a_window_of_one_is_one_request_at_a_time() -> None:
    _, server = run([1, 2, 3], 1)
    assert server.events == ["send 1", "wait 1", "send 2", "wait 2", "send 3", "wait 3"]


def test_no_requests_send_nothing() -> None:
    results, server = run([], 10)
    assert results == []
    assert server.events == []


def test_a_failed_wait_stops_the_batch() -> None:
    server = FakeServer()
    with pytest.raises(ConnectionError):
        pipeline([1, -2, 3, 4, 5], 2, server.send, lambda _, pending: pending.get())
    # Sent up to the window past the failed one; nothing after it.
    assert server.events == ["send 1", "send -2", "wait 1", "send 3", "wait -2"]


def test_the_window_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        run([1], 0)


def test_round_trips_are_the_requests_over_the_window_rounded_up() -> None:
    assert round_trips(0, 10) == 0
    assert round_trips(1, 10) == 1
    assert round_trips(10, 10) == 1
    assert round_trips(11, 10) == 2
    assert round_trips(2000, DEFAULT_MAX_IN_FLIGHT_REQUESTS) == 200
    with pytest.raises(ValueError):
        round_trips(1, 0)


def test_the_default_window_is_kafkas() -> None:
    assert DEFAULT_MAX_IN_FLIGHT_REQUESTS == 10
