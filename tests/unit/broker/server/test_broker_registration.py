"""KafkaServer registers again after a new ZooKeeper session (Kafka's SessionExpireListener).

ZooKeeper is faked: ``register_broker`` answers from a script of outcomes.
"""

from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace
from typing import Any, cast

from kpo_broker.config import BrokerConfig
from kpo_broker.server import broker as broker_module
from kpo_broker.server.broker import KafkaServer
from kpo_broker.zk.errors import BrokerIdAlreadyRegisteredError, ZkConnectionLossError
from kpo_broker.zk.model import BrokerRegistration, EndPoint
from kpo_broker.zk.session import ZkSessionState

REGISTRATION = BrokerRegistration(
    id=3, endpoints=(EndPoint("PLAINTEXT", "127.0.0.1", 9092, "PLAINTEXT"),), rack=None
)


class ScriptedZk:
    """``register_broker`` returns (or raises) the next scripted outcome."""

    def __init__(self, outcomes: list[int | Exception]) -> None:
        self.outcomes = outcomes
        self.registered: list[BrokerRegistration] = []
        self.done = threading.Event()

    def register_broker(self, registration: BrokerRegistration) -> int:
        self.registered.append(registration)
        outcome = self.outcomes.pop(0)
        if not self.outcomes:
            self.done.set()
        if isinstance(outcome, Exception):
            raise outcome
        return outcome


def _server() -> KafkaServer:
    return KafkaServer(
        BrokerConfig.from_properties({"broker.id": "3", "zookeeper.connect": "127.0.0.1:2181"})
    )


def _run(server: KafkaServer, zk: ScriptedZk, states: list[ZkSessionState]) -> Any:
    """Run the registration task, deliver ``states`` from a kazoo-like thread, return the parts."""
    components = SimpleNamespace(broker_epoch=10)

    async def scenario() -> None:
        server._loop = asyncio.get_running_loop()
        task = asyncio.create_task(
            server._keep_registered(cast(Any, zk), cast(Any, components), REGISTRATION)
        )
        thread = threading.Thread(target=lambda: [server._on_session_state(s) for s in states])
        thread.start()
        thread.join()
        for _ in range(200):
            if zk.done.is_set() and components.broker_epoch != 10:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
        task.cancel()

    asyncio.run(scenario())
    return components


def test_a_new_session_registers_again_with_the_new_broker_epoch() -> None:
    zk = ScriptedZk([57])
    components = _run(_server(), zk, [ZkSessionState.EXPIRED, ZkSessionState.NEW_SESSION])
    assert zk.registered == [REGISTRATION]
    assert components.broker_epoch == 57


def test_reconnecting_to_the_same_session_does_not_register_again() -> None:
    zk = ScriptedZk([57])
    components = _run(_server(), zk, [ZkSessionState.SUSPENDED, ZkSessionState.CONNECTED])
    assert zk.registered == []
    assert components.broker_epoch == 10


def test_registration_is_retried_until_the_old_znode_is_gone_and_the_session_is_up(
    monkeypatch: Any,
) -> None:
    monkeypatch.setattr(broker_module, "REGISTRATION_RETRY_BACKOFF_S", 0.01)
    zk = ScriptedZk(
        [
            BrokerIdAlreadyRegisteredError("broker.id 3 is already registered"),
            ZkConnectionLossError("SessionExpiredError during a request"),
            71,
        ]
    )
    components = _run(_server(), zk, [ZkSessionState.NEW_SESSION])
    assert len(zk.registered) == 3
    assert components.broker_epoch == 71
