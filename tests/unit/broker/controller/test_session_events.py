"""The controller's ZooKeeper session listener (Kafka's Expire and RegisterBrokerAndReelect).

On expiry the queued events belong to the lost session: Expire is queued alone (clear and
put); a new session queues SessionReestablished (resign if needed, run for election);
losing and regaining the connection within the same session queues nothing.
"""

from __future__ import annotations

from typing import Any, cast

import pytest

from kpo_broker.config import BrokerConfig
from kpo_broker.controller.controller import KafkaController
from kpo_broker.controller.events import ControllerEvent, Expire, SessionReestablished
from kpo_broker.zk.session import ZkSessionState


class Queued:
    """Records what the listener queues, and how."""

    def __init__(self, controller: KafkaController) -> None:
        self.events: list[tuple[str, ControllerEvent]] = []
        manager = cast(Any, controller.event_manager)
        manager.put = lambda event: self.events.append(("put", event))
        manager.clear_and_put = lambda event: self.events.append(("clear_and_put", event))


@pytest.fixture
def controller() -> KafkaController:
    config = BrokerConfig.from_properties({"broker.id": "1", "zookeeper.connect": "zk:2181"})
    return KafkaController(config, cast(Any, object()))


def test_expiry_queues_expire_alone_and_a_new_session_reelects(
    controller: KafkaController,
) -> None:
    queued = Queued(controller)
    for state in (ZkSessionState.SUSPENDED, ZkSessionState.EXPIRED, ZkSessionState.NEW_SESSION):
        controller._on_session_state(state)
    assert queued.events == [("clear_and_put", Expire()), ("put", SessionReestablished())]


def test_a_reconnection_to_the_same_session_queues_nothing(controller: KafkaController) -> None:
    queued = Queued(controller)
    for state in (ZkSessionState.SUSPENDED, ZkSessionState.CONNECTED):
        controller._on_session_state(state)
    assert queued.events == []
