import threading
from typing import Any

import pytest

from kpo_broker.controller.channel_manager import ControllerChannelManager
from kpo_broker.protocol.errors import BrokerConnectionError, RequestTimeoutError

from .fakes import broker

TIMEOUT_S = 10


class FakeConnection:
    """Answers ``("response", request)``; fails the first ``failures`` sends (or all: -1)."""

    def __init__(self, failures: int = 0) -> None:
        self.failures = failures
        self.sent: list[tuple[Any, int]] = []
        self.attempts = 0
        self.closes = 0
        self.threads: set[str] = set()

    async def send(self, request: Any, api_version: int) -> Any:
        self.attempts += 1
        self.threads.add(threading.current_thread().name)
        if self.failures != 0:
            self.failures -= 1
            raise (RequestTimeoutError if self.attempts % 2 else BrokerConnectionError)("down")
        self.sent.append((request, api_version))
        return ("response", request)

    async def close(self) -> None:
        self.closes += 1


class Connections:
    def __init__(self, failures: dict[int, int] | None = None) -> None:
        self.by_port: dict[int, FakeConnection] = {}
        self.failures = failures or {}
        self.client_ids: list[str] = []

    def __call__(self, host: str, port: int, client_id: str, timeout_ms: int) -> FakeConnection:
        self.client_ids.append(client_id)
        connection = FakeConnection(self.failures.get(port - 9000, 0))
        self.by_port[port] = connection
        return connection


@pytest.fixture
def connections() -> Connections:
    return Connections({2: 3, 3: -1})


@pytest.fixture
def manager(connections: Connections) -> Any:
    channel = ControllerChannelManager(
        1, "PLAINTEXT", 1000, connection_factory=connections, retry_backoff_ms=1
    )
    channel.startup([broker(1), broker(2), broker(3)])
    yield channel
    channel.shutdown()


def test_requests_to_a_broker_are_sent_in_order_and_answered(
    manager: ControllerChannelManager, connections: Connections
) -> None:
    responses: list[Any] = []
    done = threading.Event()

    def callback(response: Any) -> None:
        responses.append(response)
        if len(responses) == 3:
            done.set()

    for i in range(3):
        manager.send_request(1, f"request-{i}", 4, callback)
    assert done.wait(TIMEOUT_S)
    assert responses == [("response", f"request-{i}") for i in range(3)]
    assert connections.by_port[9001].sent == [(f"request-{i}", 4) for i in range(3)]
    assert connections.client_ids[0] == "controller-1-to-broker-1"
    assert connections.by_port[9001].threads == {"controller-1-channel"}


def test_failed_sends_are_retried_until_answered(
    manager: ControllerChannelManager, connections: Connections
) -> None:
    answered = threading.Event()
    manager.send_request(2, "request", 6, lambda response: answered.set())
    assert answered.wait(TIMEOUT_S)
    connection = connections.by_port[9002]
    assert connection.attempts == 4
    assert connection.closes == 3
    assert connection.sent == [("request", 6)]


def test_removed_broker_stops_retrying_and_drops_requests(
    manager: ControllerChannelManager, connections: Connections
) -> None:
    manager.send_request(3, "never answered", 5)
    connection = connections.by_port[9003]
    deadline = threading.Event()
    for _ in range(1000):
        if connection.attempts >= 3:
            break
        deadline.wait(0.01)
    assert connection.attempts >= 3
    manager.remove_broker(3)
    assert manager.broker_ids == {1, 2}
    deadline.wait(0.1)
    attempts = connection.attempts
    deadline.wait(0.1)
    assert connection.attempts == attempts
    manager.send_request(3, "dropped", 5)  # no sender: dropped
    assert connection.sent == []


def test_added_broker_gets_a_sender_once(
    manager: ControllerChannelManager, connections: Connections
) -> None:
    manager.add_broker(broker(1))
    manager.add_broker(broker(4))
    assert manager.broker_ids == {1, 2, 3, 4}
    assert len(connections.client_ids) == 4
