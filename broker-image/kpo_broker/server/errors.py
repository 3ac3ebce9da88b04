"""The broker's named errors, and their Kafka error codes for responses."""

from __future__ import annotations

from kafka import errors as kafka_errors


class NotLeaderOrFollowerError(Exception):
    """The partition is not led here (Kafka NOT_LEADER_OR_FOLLOWER, 6)."""


class FencedLeaderEpochError(Exception):
    """The request's leader epoch is older than ours (Kafka FENCED_LEADER_EPOCH, 74; KIP-320)."""


class UnknownLeaderEpochError(Exception):
    """The request's leader epoch is newer than ours (Kafka UNKNOWN_LEADER_EPOCH, 75; KIP-320)."""


class NotEnoughReplicasError(Exception):
    """acks=all with an ISR below ``min.insync.replicas`` (Kafka NOT_ENOUGH_REPLICAS, 19)."""


class StaleControllerEpochError(Exception):
    """A request from an older controller than seen (Kafka STALE_CONTROLLER_EPOCH, 11)."""


_CODES: dict[type[BaseException], int] = {
    NotLeaderOrFollowerError: int(kafka_errors.NotLeaderForPartitionError.errno),
    FencedLeaderEpochError: int(kafka_errors.FencedLeaderEpochError.errno),
    UnknownLeaderEpochError: int(kafka_errors.UnknownLeaderEpochError.errno),
    NotEnoughReplicasError: int(kafka_errors.NotEnoughReplicasError.errno),
    StaleControllerEpochError: int(kafka_errors.StaleControllerEpochError.errno),
}


def error_code_of(exc: BaseException) -> int:
    """Return the Kafka error code for ``exc``; UNKNOWN_SERVER_ERROR (-1) when unmapped.

    kafka-python errors carry ``errno``; the log package's errors carry ``error_code``;
    the broker's own errors are mapped above.
    """
    if isinstance(exc, kafka_errors.KafkaError) and isinstance(exc.errno, int):
        return exc.errno
    carried = getattr(exc, "error_code", None)
    if isinstance(carried, int):
        return carried
    for cls in type(exc).__mro__:
        if cls in _CODES:
            return _CODES[cls]
    return int(kafka_errors.UnknownError.errno)
