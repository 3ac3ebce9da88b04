"""One broker's Metadata answer judged for ``create_topic(wait_for_metadata=True)``."""

from __future__ import annotations

from typing import Any

import pytest

from kpo_kafka.admin import topics_not_ready
from kpo_kafka.admin_types import KafkaAuthorizationError


def topic(name: str, leaders: list[int], error: int = 0, partition_error: int = 0) -> Any:
    return {
        "name": name,
        "error_code": error,
        "partitions": [
            {
                "partition_index": i,
                "error_code": partition_error if leader < 0 else 0,
                "leader_id": leader,
            }
            for i, leader in enumerate(leaders)
        ],
    }


def test_every_partition_led_is_ready() -> None:
    assert topics_not_ready([topic("a", [1, 0]), topic("b", [2])], {"a": 2, "b": None}) is None


def test_a_topic_the_broker_does_not_know_yet_is_not_ready() -> None:
    answer = [topic("a", [], error=3)]
    assert topics_not_ready(answer, {"a": 2}) == "a: UNKNOWN_TOPIC_OR_PARTITION (3)"
    assert topics_not_ready([], {"a": 2}) == "a: not listed"


def test_a_partition_without_a_leader_or_missing_is_not_ready() -> None:
    assert topics_not_ready([topic("a", [1, -1], partition_error=5)], {"a": 2}) == (
        "a: no leader for partitions [1]"
    )
    assert topics_not_ready([topic("a", [1])], {"a": 2}) == "a: 1 of 2 partitions"
    assert topics_not_ready([topic("a", [])], {"a": None}) == "a: 0 of any partitions"


def test_a_topic_the_client_may_not_describe_raises_at_once() -> None:
    with pytest.raises(KafkaAuthorizationError, match="Describe"):
        topics_not_ready([topic("a", [], error=29)], {"a": 1})
