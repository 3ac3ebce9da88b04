"""A small cluster of fake brokers and real controllers on a fresh ZooKeeper chroot per test."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping

import pytest

from kpo_broker.config import BrokerConfig
from kpo_broker.controller.controller import KafkaController
from kpo_broker.zk.client import KafkaZkClient
from kpo_devenv import ZooKeeperServer

from .fakes import SESSION_TIMEOUT_MS, FakeBroker, _Loop


class Cluster:
    """Fake brokers (each with its own ZooKeeper session) and the controllers of some.

    Attributes:
        admin: a ZooKeeper client for the test itself (topic creation, assertions).
    """

    def __init__(self, zk_connect: str) -> None:
        self.zk_connect = zk_connect
        self._loop = _Loop()
        self.brokers: dict[int, FakeBroker] = {}
        self.controllers: dict[int, KafkaController] = {}
        self.admin = self.new_zk()

    def new_zk(self) -> KafkaZkClient:
        """Open a ZooKeeper session on the test's chroot."""
        client = KafkaZkClient(self.zk_connect, session_timeout_ms=SESSION_TIMEOUT_MS)
        client.connect()
        return client

    def broker(self, broker_id: int) -> FakeBroker:
        """Start and register a fake broker without a controller."""
        broker = FakeBroker(broker_id, self._loop, self.zk_connect)
        broker.register()
        self.brokers[broker_id] = broker
        return broker

    def node(
        self,
        broker_id: int,
        properties: Mapping[str, str] | None = None,
        *,
        start: bool = True,
        auto_rebalance_initial_delay_s: float = 5.0,
    ) -> tuple[FakeBroker, KafkaController]:
        """Start a fake broker whose ZooKeeper session also runs a real controller."""
        broker = FakeBroker(broker_id, self._loop, self.zk_connect)
        zk = self.new_zk()
        broker.register(zk)
        config = BrokerConfig.from_properties(
            {
                "broker.id": str(broker_id),
                "zookeeper.connect": self.zk_connect,
                "listeners": f"PLAINTEXT://127.0.0.1:{broker.port}",
                "auto.leader.rebalance.enable": "false",
                **(properties or {}),
            }
        )
        controller = KafkaController(
            config,
            zk,
            channel_retry_backoff_ms=20,
            auto_rebalance_initial_delay_s=auto_rebalance_initial_delay_s,
        )
        self.brokers[broker_id] = broker
        self.controllers[broker_id] = controller
        if start:
            controller.startup()
        return broker, controller

    def close(self) -> None:
        for controller in self.controllers.values():
            controller.shutdown()
        for broker in self.brokers.values():
            broker.close()
        self.admin.close()
        self._loop.close()


@pytest.fixture
def cluster(zookeeper: ZooKeeperServer) -> Iterator[Cluster]:
    """A :class:`Cluster` on a fresh chroot, closed after the test."""
    chroot = f"{zookeeper.connect_string}/controller-{uuid.uuid4().hex}"
    bootstrap = KafkaZkClient(chroot)
    bootstrap.connect()  # creates the chroot and Kafka's persistent paths
    bootstrap.close()
    cluster = Cluster(chroot)
    try:
        yield cluster
    finally:
        cluster.close()
