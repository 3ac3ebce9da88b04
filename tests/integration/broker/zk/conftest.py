"""Per-test ZooKeeper chroots on the session's real ZooKeeper server."""

import uuid
from collections.abc import Callable, Iterator

import pytest

from kpo_broker.zk.client import KafkaZkClient
from kpo_devenv import ZooKeeperServer

#: Within the test server's bounds (2..20 ticks of 500 ms).
SESSION_TIMEOUT_MS = 6000


@pytest.fixture
def zk_connect(zookeeper: ZooKeeperServer) -> str:
    """A ``zookeeper.connect`` string with a fresh chroot (created by the first client)."""
    return f"{zookeeper.connect_string}/test-{uuid.uuid4().hex}"


@pytest.fixture
def new_client(zk_connect: str) -> Iterator[Callable[..., KafkaZkClient]]:
    """Open more connected clients on the test's chroot; all are closed at the end."""
    clients: list[KafkaZkClient] = []

    def open_client(**kwargs: int) -> KafkaZkClient:
        kwargs.setdefault("session_timeout_ms", SESSION_TIMEOUT_MS)
        client = KafkaZkClient(zk_connect, **kwargs)
        client.connect()
        clients.append(client)
        return client

    yield open_client
    for client in clients:
        client.close()


@pytest.fixture
def zk_client(new_client: Callable[..., KafkaZkClient]) -> KafkaZkClient:
    """A connected client on a fresh chroot."""
    return new_client()
