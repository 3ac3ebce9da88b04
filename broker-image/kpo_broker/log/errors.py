"""Named errors raised by the log layer, each mapped to a Kafka protocol error code.

The ``error_code`` class attribute is the numeric code the request handlers put in
responses (Kafka's ``Errors`` enum). Errors that Kafka keeps internal to the broker
map to ``UNKNOWN_SERVER_ERROR`` (-1) or ``KAFKA_STORAGE_ERROR`` (56).
"""

from __future__ import annotations

from typing import ClassVar, NamedTuple

UNKNOWN_SERVER_ERROR = -1
OFFSET_OUT_OF_RANGE = 1
CORRUPT_MESSAGE = 2
MESSAGE_TOO_LARGE = 10
RECORD_LIST_TOO_LARGE = 18
INVALID_CONFIG = 40
KAFKA_STORAGE_ERROR = 56
UNSUPPORTED_COMPRESSION_TYPE = 76
INVALID_RECORD = 87


class LogError(Exception):
    """Base class of every log-layer error; ``error_code`` is the Kafka error code."""

    error_code: ClassVar[int] = UNKNOWN_SERVER_ERROR


class CorruptRecordError(LogError):
    """A record batch is malformed: bad magic, impossible length or CRC32C mismatch.

    Maps to ``CORRUPT_MESSAGE`` (2), as Kafka's ``CorruptRecordException``.
    """

    error_code = CORRUPT_MESSAGE


class RecordError(NamedTuple):
    """One record that made the leader drop its batch (KIP-467's ``BatchIndexAndErrorMessage``).

    Attributes:
        batch_index: position of the record inside its batch, from 0.
        message: what is wrong with that record.
    """

    batch_index: int
    message: str


class InvalidRecordError(LogError):
    """A well-formed batch whose content breaks a rule (record count vs offset delta).

    Maps to ``INVALID_RECORD`` (87), as Kafka's ``InvalidRecordException``; when single
    records are at fault they are listed, as Kafka's ``RecordValidationException`` does
    for the Produce response's ``record_errors`` (KIP-467).

    Attributes:
        record_errors: the offending records; empty when the batch as a whole is wrong.
    """

    error_code = INVALID_RECORD

    def __init__(self, message: str, record_errors: tuple[RecordError, ...] = ()) -> None:
        super().__init__(message)
        self.record_errors = record_errors


class UnsupportedCompressionTypeError(LogError):
    """A batch uses a codec whose library is not installed, so its records cannot be read.

    Maps to ``UNSUPPORTED_COMPRESSION_TYPE`` (76).
    """

    error_code = UNSUPPORTED_COMPRESSION_TYPE


class RecordTooLargeError(LogError):
    """A single batch is larger than ``max.message.bytes``.

    Maps to ``MESSAGE_TOO_LARGE`` (10), as Kafka's ``RecordTooLargeException``.
    """

    error_code = MESSAGE_TOO_LARGE


class RecordBatchTooLargeError(LogError):
    """The batches of one append together exceed ``segment.bytes``.

    Maps to ``RECORD_LIST_TOO_LARGE`` (18), as Kafka's ``RecordBatchTooLargeException``.
    """

    error_code = RECORD_LIST_TOO_LARGE


class OffsetOutOfRangeError(LogError):
    """A requested offset lies outside ``[log_start_offset, log_end_offset]``.

    Maps to ``OFFSET_OUT_OF_RANGE`` (1), as Kafka's ``OffsetOutOfRangeException``.
    """

    error_code = OFFSET_OUT_OF_RANGE


class UnexpectedAppendOffsetError(LogError):
    """A follower append starts below the log end offset (LEO).

    Kafka's ``UnexpectedAppendOffsetException`` is handled inside the broker by the
    replica fetcher; on the wire it is ``UNKNOWN_SERVER_ERROR`` (-1).

    Attributes:
        first_offset: base offset of the first batch of the rejected append.
        last_offset: last offset of the last batch of the rejected append.
    """

    error_code = UNKNOWN_SERVER_ERROR

    def __init__(self, message: str, first_offset: int, last_offset: int) -> None:
        super().__init__(message)
        self.first_offset = first_offset
        self.last_offset = last_offset


class OffsetsOutOfOrderError(LogError):
    """The batches of a follower append do not have increasing offsets.

    Kafka's ``OffsetsOutOfOrderException``; on the wire ``UNKNOWN_SERVER_ERROR`` (-1).
    """

    error_code = UNKNOWN_SERVER_ERROR


class CorruptIndexError(LogError):
    """An offset or time index file fails its sanity check on load.

    The log layer handles it by rebuilding the index from the segment, as Kafka does
    with ``CorruptIndexException``; if it escapes, it is ``KAFKA_STORAGE_ERROR`` (56).
    """

    error_code = KAFKA_STORAGE_ERROR


class InvalidIndexOffsetError(LogError):
    """An index append would break the index's ordering (Kafka's ``InvalidOffsetException``).

    A programming error inside the broker: ``UNKNOWN_SERVER_ERROR`` (-1).
    """

    error_code = UNKNOWN_SERVER_ERROR


class CheckpointFormatError(LogError):
    """A checkpoint file (offsets or leader epochs) is malformed.

    Maps to ``KAFKA_STORAGE_ERROR`` (56), as Kafka's ``KafkaStorageException``.
    """

    error_code = KAFKA_STORAGE_ERROR


class LogDirectoryError(LogError):
    """A log directory is unusable: bad partition dir name, duplicate partition, locked.

    Maps to ``KAFKA_STORAGE_ERROR`` (56).
    """

    error_code = KAFKA_STORAGE_ERROR


class InvalidLogConfigError(LogError):
    """A topic or broker log config value is missing its type or out of range.

    Maps to ``INVALID_CONFIG`` (40), as Kafka's ``InvalidConfigurationException``.
    """

    error_code = INVALID_CONFIG


INVALID_TIMESTAMP = 32


class InvalidTimestampError(InvalidRecordError):
    """A CreateTime record outside ``message.timestamp.before.max.ms`` / ``after.max.ms``.

    Maps to ``INVALID_TIMESTAMP`` (32), as Kafka's ``LogValidator.validateTimestamp``
    (KIP-937); the offending records are listed in ``record_errors``.
    """

    error_code = INVALID_TIMESTAMP
