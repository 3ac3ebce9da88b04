"""Kafka error codes come from kafka-python; only renamed codes are added."""

from __future__ import annotations

import kafka.errors
import pytest

from kpo_broker.protocol.errors import (
    KAFKA_NAME_ALIASES,
    FrameError,
    FrameSizeError,
    ProtocolError,
    UnknownErrorCodeError,
    error_code,
    error_name,
)


@pytest.mark.parametrize(
    ("name", "code"),
    [
        ("NONE", 0),
        ("UNKNOWN_SERVER_ERROR", -1),
        ("NOT_LEADER_OR_FOLLOWER", 6),
        ("NOT_LEADER_FOR_PARTITION", 6),
        ("STALE_CONTROLLER_EPOCH", 11),
        ("UNSUPPORTED_VERSION", 35),
        ("NOT_CONTROLLER", 41),
        ("FENCED_LEADER_EPOCH", 74),
        ("STALE_BROKER_EPOCH", 77),
        ("not_controller", 41),
    ],
)
def test_error_code_by_name(name: str, code: int) -> None:
    assert error_code(name) == code


def test_error_code_of_kafka_python_errors() -> None:
    assert error_code(kafka.errors.NotLeaderForPartitionError) == 6
    assert error_code(kafka.errors.FencedLeaderEpochError()) == 74
    assert error_code(kafka.errors.StaleBrokerEpochError) == 77
    assert error_code(41) == 41


@pytest.mark.parametrize("bad", ["NO_SUCH_ERROR", 4242, ValueError, ValueError("x"), True])
def test_unknown_errors(bad: object) -> None:
    with pytest.raises(UnknownErrorCodeError):
        error_code(bad)  # type: ignore[arg-type]


def test_error_names_use_current_kafka_names() -> None:
    assert error_name(6) == "NOT_LEADER_OR_FOLLOWER"
    assert error_name(0) == "NONE"
    assert error_name(77) == "STALE_BROKER_EPOCH"
    with pytest.raises(UnknownErrorCodeError):
        error_name(30000)


def test_aliases_only_add_names_kafka_python_lacks() -> None:
    messages = {cls.message for cls in kafka.errors.kafka_errors.values()}
    assert not set(KAFKA_NAME_ALIASES) & messages


def test_exception_hierarchy() -> None:
    error = FrameSizeError(-5, 10)
    assert isinstance(error, FrameError) and isinstance(error, ProtocolError)
    assert (error.size, error.max_bytes) == (-5, 10)
