"""Kafka error codes and the exceptions raised by the protocol layer.

Error codes come from kafka-python's ``kafka.errors``: every
``BrokerResponseError`` subclass carries Kafka's numeric ``errno`` and its
``message`` (Kafka's error name, such as ``NOT_CONTROLLER``). Only the names
that kafka-python spells differently from current Apache Kafka are added here,
in :data:`KAFKA_NAME_ALIASES` (for example Kafka 2.7 renamed
``NOT_LEADER_FOR_PARTITION`` to ``NOT_LEADER_OR_FOLLOWER``, KAFKA-10223).

The exception classes below are the protocol layer's own failures (framing,
decoding, the broker-to-broker client); they are not Kafka error codes.
"""

from __future__ import annotations

import kafka.errors as kafka_errors

__all__ = [
    "KAFKA_NAME_ALIASES",
    "BrokerConnectionError",
    "FrameError",
    "FrameSizeError",
    "InvalidRequestError",
    "InvalidResponseError",
    "ProtocolError",
    "RequestTimeoutError",
    "ResponseTypeMismatchError",
    "TruncatedFrameError",
    "UnknownErrorCodeError",
    "UnsupportedVersionError",
    "error_code",
    "error_name",
]

KAFKA_NAME_ALIASES: dict[str, int] = {
    "NONE": 0,
    "UNKNOWN_SERVER_ERROR": -1,
    "NOT_LEADER_OR_FOLLOWER": 6,
}
"""Kafka error names absent from kafka-python's ``message`` attributes -> code."""

_CODES_BY_NAME: dict[str, int] = {
    cls.message: code
    for code, cls in kafka_errors.kafka_errors.items()
    if code is not None and isinstance(getattr(cls, "message", None), str)
}
_CODES_BY_NAME.update(KAFKA_NAME_ALIASES)
# Aliases are inserted last, so Kafka's current name wins for a code with two names.
_NAMES_BY_CODE: dict[int, str] = {code: name for name, code in _CODES_BY_NAME.items()}


class UnknownErrorCodeError(LookupError):
    """Raised by :func:`error_code` for a name or object that is no Kafka error."""


def error_code(error: str | int | BaseException | type[BaseException]) -> int:
    """Return Kafka's numeric error code for ``error``.

    Args:
        error: a Kafka error name (``"FENCED_LEADER_EPOCH"``, case-insensitive),
            a ``kafka.errors.BrokerResponseError`` subclass or instance (its
            ``errno``), or an int, returned unchanged when it is a known code.

    Returns:
        The int16 error code written in responses (0 = NONE).

    Raises:
        UnknownErrorCodeError: the name, class or number is not a Kafka error.
    """
    if isinstance(error, bool):
        raise UnknownErrorCodeError(f"not a Kafka error: {error!r}")
    if isinstance(error, int):
        if error in _NAMES_BY_CODE:
            return error
        raise UnknownErrorCodeError(f"unknown Kafka error code {error}")
    if isinstance(error, str):
        try:
            return _CODES_BY_NAME[error.strip().upper()]
        except KeyError:
            raise UnknownErrorCodeError(f"unknown Kafka error name {error!r}") from None
    errno = getattr(error, "errno", None)
    is_broker_error = isinstance(error, kafka_errors.BrokerResponseError) or (
        isinstance(error, type) and issubclass(error, kafka_errors.BrokerResponseError)
    )
    if is_broker_error and isinstance(errno, int):
        return errno
    raise UnknownErrorCodeError(f"not a Kafka broker error: {error!r}")


def error_name(code: int) -> str:
    """Return Apache Kafka's current name for error ``code`` (``6`` -> ``NOT_LEADER_OR_FOLLOWER``).

    Raises:
        UnknownErrorCodeError: ``code`` is not a Kafka error code.
    """
    try:
        return _NAMES_BY_CODE[code]
    except KeyError:
        raise UnknownErrorCodeError(f"unknown Kafka error code {code}") from None


class ProtocolError(Exception):
    """Base class of every exception raised by :mod:`kpo_broker.protocol`."""


class FrameError(ProtocolError):
    """A size-prefixed frame cannot be read; the connection must be closed."""


class FrameSizeError(FrameError):
    """A frame's int32 size prefix is negative or above the allowed maximum.

    Kafka closes the connection (``InvalidReceiveException``); the limit on the
    broker side is ``socket.request.max.bytes``.

    Attributes:
        size: the size read from the prefix, in bytes.
        max_bytes: the allowed maximum, in bytes.
    """

    def __init__(self, size: int, max_bytes: int) -> None:
        super().__init__(f"invalid frame size {size} (allowed 0..{max_bytes} bytes)")
        self.size = size
        self.max_bytes = max_bytes


class TruncatedFrameError(FrameError):
    """The stream ended inside a frame (after part of its size prefix or body)."""


class InvalidRequestError(ProtocolError):
    """A request frame cannot be decoded: truncated, garbage or trailing bytes.

    As Kafka does (``InvalidRequestException``), the server closes the
    connection without answering.

    Attributes:
        correlation_id: the correlation id when the header could be read, else None.
        api_key: the api key when it could be read, else None.
    """

    def __init__(
        self, message: str, *, correlation_id: int | None = None, api_key: int | None = None
    ) -> None:
        super().__init__(message)
        self.correlation_id = correlation_id
        self.api_key = api_key


class UnsupportedVersionError(ProtocolError):
    """The request's api key is unknown or its version is outside the advertised range.

    Kafka answers an ApiVersions request of an unsupported version with
    UNSUPPORTED_VERSION (35) in a v0 response (KIP-511); for any other api it
    closes the connection. The attributes let the server do either.

    Attributes:
        api_key: the request's api key.
        api_version: the requested version.
        correlation_id: the request's correlation id.
        client_id: the client id when the header could be parsed, else None.
    """

    def __init__(
        self, api_key: int, api_version: int, correlation_id: int, client_id: str | None
    ) -> None:
        super().__init__(f"unsupported api key {api_key} version {api_version}")
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id


class ResponseTypeMismatchError(ProtocolError):
    """A response message does not belong to the api of the request it answers."""


class BrokerConnectionError(ProtocolError):
    """The connection to a broker could not be opened, or was lost or closed."""


class RequestTimeoutError(ProtocolError):
    """No response arrived within the request timeout (``request.timeout.ms``)."""


class InvalidResponseError(ProtocolError):
    """A response frame could not be decoded, or answered no pending request."""
