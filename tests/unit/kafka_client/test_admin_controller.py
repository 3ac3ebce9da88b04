"""KafkaPythonAdmin over a stand-in for kafka-python's client: controller and fenced brokers."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from kafka import errors as kafka_errors

from kpo_kafka.admin import KafkaPythonAdmin
from kpo_kafka.admin_types import KafkaUnavailableError


class StandIn:
    """The calls KafkaPythonAdmin makes, with answers set by the test."""

    def __init__(self) -> None:
        self._controller_id: int | None = 0
        self.controllers_used: list[int | None] = []
        self.versions_asked: list[int] = []
        self.fail_while_controller_is: int | None = None

    def list_partition_reassignments(self, wanted: Any) -> dict[Any, Any]:
        if self._controller_id is None:
            self._controller_id = 1  # kafka-python asks Metadata for the current controller
        self.controllers_used.append(self._controller_id)
        if self._controller_id == self.fail_while_controller_is:
            raise kafka_errors.NodeNotReadyError(str(self._controller_id))
        return {}

    def describe_cluster(self) -> dict[str, Any]:
        return {
            "brokers": [
                {"broker_id": 0, "rack": None, "is_fenced": True},
                {"broker_id": 1, "rack": None, "is_fenced": False},
            ],
            "controller_id": 1,
            "cluster_id": "c",
        }

    def get_broker_version_data(self, broker: int) -> Any:
        self.versions_asked.append(broker)
        if broker == 0:
            raise kafka_errors.UnknownBrokerIdError("0")  # not in Metadata: fenced
        return SimpleNamespace(api_versions={})


def _admin(stand_in: StandIn) -> KafkaPythonAdmin:
    admin = KafkaPythonAdmin("localhost:9092")
    admin._admin = stand_in
    return admin


def test_a_controller_gone_is_found_again_and_the_request_retried() -> None:
    stand_in = StandIn()
    stand_in.fail_while_controller_is = 0
    assert _admin(stand_in).list_partition_reassignments() == {}
    assert stand_in.controllers_used == [0, 1]


def test_a_controller_that_stays_unavailable_fails_after_one_retry() -> None:
    stand_in = StandIn()
    stand_in.fail_while_controller_is = 1
    stand_in._controller_id = 1
    with pytest.raises(KafkaUnavailableError):
        _admin(stand_in).list_partition_reassignments()
    assert len(stand_in.controllers_used) == 2


def test_fenced_brokers_are_not_asked_for_api_versions() -> None:
    stand_in = StandIn()
    info = _admin(stand_in).describe_cluster()
    assert stand_in.versions_asked == [1]
    assert info.fenced_brokers == frozenset({0}) and set(info.brokers) == {1}
    assert info.controller_id == 1
