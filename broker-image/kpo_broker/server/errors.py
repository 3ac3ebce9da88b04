"""The broker's named errors, and their Kafka error codes for responses."""

from __future__ import annotations

from kafka import errors as kafka_errors

from kpo_broker.log import errors as log_errors


class NotLeaderOrFollowerError(Exception):
    """This broker does not lead the partition (Kafka NOT_LEADER_OR_FOLLOWER, 6)."""


class FencedLeaderEpochError(Exception):
    """The request's leader epoch is older than ours (Kafka FENCED_LEADER_EPOCH, 74; KIP-320)."""


class UnknownLeaderEpochError(Exception):
    """The request's leader epoch is newer than ours (Kafka UNKNOWN_LEADER_EPOCH, 75; KIP-320)."""


class NotEnoughReplicasError(Exception):
    """acks=all with fewer ISR members than ``min.insync.replicas`` (Kafka NOT_ENOUGH_REPLICAS, 19)."""


class StaleControllerEpochError(Exception):
    """A request from a controller older than the last one seen (Kafka STALE_CONTROLLER_EPOCH, 11)."""



_CODES: dict[type[BaseException], int] = {
    NotLeaderOrFollowerError: kafka_errors.NotLeaderForPartitionError.errno,
    FencedLeaderEpochError: kafka_errors.FencedLeaderEpochError.errno,
    UnknownLeaderEpochError: kafka_errors.UnknownLeaderEpochError.errno,
    NotEnoughReplicasError: kafka_errors.NotEnoughReplicasError.errno,
    StaleControllerEpochError: kafka_errors.StaleControllerEpochError.errno,
    log_errors.CorruptRecordError: kafka_errors.CorruptRecordError.errno,
    log_errors.RecordTooLargeError: kafka_errors.MessageSizeTooLargeError.errno,
    log_errors.OffsetOutOfRangeError: kafka_errors.OffsetOutOfRangeError.errno,
}


def error_code_of(exc: BaseException) -> int:
    """Return the Kafka error code for ``exc``; UNKNOWN_SERVER_ERROR (-1) when unmapped."""
    if isinstance(exc, kafka_errors.KafkaError) and getattr(exc, "errno", None) is not None:
        return int(exc.errno)
    for cls in type(exc).__mro__:
        code = _CODES.get(cls)
        if code is not None:
            return code
    return kafka_errors.UnknownError.errno
