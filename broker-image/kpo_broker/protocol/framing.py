"""Kafka request/response framing: size prefix, request and response headers, bodies.

Wire layout (Kafka protocol guide): every message is an int32 size followed by
that many bytes. A request is a header then its body; the header is v1
(``api_key`` int16, ``api_version`` int16, ``correlation_id`` int32,
``client_id`` nullable int16-length string) for non-flexible versions and v2
(v1 + tagged fields) for flexible ones (KIP-482). A response is a header then
its body; the header is v0 (``correlation_id``) or v1 (+ tagged fields) for
flexible versions, except ApiVersions responses, which always use v0 so that
a client of any version can read them. Bodies are encoded and decoded by
kafka-python's schema codecs.
"""

from __future__ import annotations

import asyncio
import io
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from kafka.protocol.api_header import RequestHeader, ResponseHeader

from kpo_broker.protocol.api import API_VERSIONS_KEY, APIS, api_versions_response
from kpo_broker.protocol.errors import (
    FrameError,
    FrameSizeError,
    InvalidRequestError,
    InvalidResponseError,
    ResponseTypeMismatchError,
    TruncatedFrameError,
    UnsupportedVersionError,
)

__all__ = [
    "DEFAULT_MAX_FRAME_BYTES",
    "DecodedRequest",
    "FrameError",
    "FrameSizeError",
    "InvalidRequestError",
    "InvalidResponseError",
    "ResponseAddress",
    "ResponseTypeMismatchError",
    "TruncatedFrameError",
    "UnsupportedVersionError",
    "decode_request",
    "decode_response",
    "encode_error_response",
    "encode_response",
    "encode_unsupported_version_response",
    "read_frame",
    "read_frame_body",
    "read_frame_size",
]

DEFAULT_MAX_FRAME_BYTES = 104857600
"""Kafka's default ``socket.request.max.bytes`` (100 MiB)."""

_FIXED_HEADER = struct.Struct(">hhi")
_SIZE = struct.Struct(">i")
_UNSUPPORTED_VERSION = 35
_LENGTH_PREFIXED = frozenset({"string", "bytes", "records"})


@dataclass(frozen=True)
class DecodedRequest:
    """A request frame decoded into its header fields and body.

    Attributes:
        api_key: Kafka api key (int16).
        api_version: requested version (int16).
        correlation_id: echoed in the response header (int32).
        client_id: the client id; a null client id reads as ``""`` as in Kafka.
        body: the kafka-python request message, its ``API_VERSION`` set.
    """

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str
    body: Any

    @property
    def expects_response(self) -> bool:
        """False only for requests answered with nothing (Produce with ``acks=0``)."""
        return bool(self.body.expect_response())


class ResponseAddress(Protocol):
    """What :func:`encode_response` needs from a request: its api, version and correlation id."""

    @property
    def api_key(self) -> int:
        """Kafka api key of the request."""
        ...

    @property
    def api_version(self) -> int:
        """Version of the request, used for the response too."""
        ...

    @property
    def correlation_id(self) -> int:
        """Correlation id to echo."""
        ...


def decode_request(frame: bytes, supported: Mapping[int, tuple[int, int]]) -> DecodedRequest:
    """Decode one request frame (without its 4-byte size prefix).

    Args:
        frame: the bytes after the size prefix.
        supported: api key -> (min, max) versions the broker advertises; keys
            must be in :data:`kpo_broker.protocol.api.APIS`.

    Returns:
        The header fields and decoded body.

    Raises:
        UnsupportedVersionError: unknown or unadvertised api key, or version out
            of range. ApiVersions requests of any version are recognised (their
            header is parsed, their body is not), as in KIP-511.
        InvalidRequestError: the frame is shorter than a header, or the header
            or body is malformed, or bytes follow the body.
    """
    if len(frame) < _FIXED_HEADER.size:
        raise InvalidRequestError(f"request of {len(frame)} bytes is shorter than a header")
    api_key, api_version, correlation_id = _FIXED_HEADER.unpack_from(frame, 0)
    spec = APIS.get(api_key)
    if spec is None:
        raise UnsupportedVersionError(api_key, api_version, correlation_id, None)
    header, body_start = _decode_header(frame, spec.request_is_flexible(api_version), api_key)
    client_id = "" if header.client_id is None else str(header.client_id)
    lo, hi = supported.get(api_key, (0, -1))
    codec_lo, codec_hi = spec.codec_versions
    if not (max(lo, codec_lo) <= api_version <= min(hi, codec_hi)):
        raise UnsupportedVersionError(api_key, api_version, correlation_id, client_id)
    body = _decode_body(spec.request, api_version, frame, body_start, correlation_id)
    body._header = header  # as ApiMessage.decode(header=True) leaves it
    return DecodedRequest(api_key, api_version, correlation_id, client_id, body)


def _decode_header(frame: bytes, flexible: bool, api_key: int) -> tuple[Any, int]:
    """Return (kafka-python RequestHeader, offset of the body) of a request header v1 or v2."""
    correlation_id = _FIXED_HEADER.unpack_from(frame, 0)[2]
    buffer = io.BytesIO(frame)
    try:
        header = RequestHeader.decode(buffer, flexible=flexible)
    except Exception as exc:  # kafka-python raises assorted errors on garbage
        raise InvalidRequestError(
            f"malformed request header: {exc!r}", correlation_id=correlation_id, api_key=api_key
        ) from exc
    return header, buffer.tell()


def _decode_body(
    message_class: Any, version: int, frame: bytes, start: int, correlation_id: int
) -> Any:
    """Decode a request body at ``frame[start:]``; require its non-nullable fields to be set."""
    try:
        body = _strict_decode(message_class, version, frame, start, allow_trailing=True)
        _require_non_null(message_class._struct, body, version)
    except _MalformedError as exc:
        raise InvalidRequestError(
            f"malformed request body: {exc}",
            correlation_id=correlation_id,
            api_key=int(message_class.API_KEY),
        ) from exc
    return body


class _MalformedError(Exception):
    """Internal: a body that does not decode to the rest of the frame, or nulls a field."""


def _strict_decode(
    message_class: Any, version: int, frame: bytes, start: int, allow_trailing: bool = False
) -> Any:
    """Decode ``frame[start:]`` as ``message_class`` at ``version``.

    With ``allow_trailing``, bytes left after the body are ignored, as Apache Kafka's
    request parser does (librdkafka sends some requests with extra trailing bytes).

    Raises:
        _MalformedError: decoding failed, ran past the end of the frame, or (without
            ``allow_trailing``) left bytes after the body.
    """
    flexible = bool(message_class.flexible_version_q(version))
    # The same compiled decoder ApiMessage.decode uses, called directly because
    # it also returns the end position: a slice past the end of a memoryview is
    # silently short, so only the position reveals a truncated last field.
    decoder = message_class._struct.compiled_decode_from(
        version, compact=flexible, tagged=flexible, data_class=message_class[None]
    )
    try:
        body, end = decoder(memoryview(frame), start)
    except Exception as exc:  # struct.error, IndexError, UnicodeDecodeError...
        raise _MalformedError(repr(exc)) from exc
    if end > len(frame):
        raise _MalformedError("truncated")
    if end < len(frame) and not allow_trailing:
        raise _MalformedError(f"{len(frame) - end} trailing bytes")
    return body


def _require_non_null(struct: Any, value: Any, version: int) -> None:
    """Check that no field of ``value`` the schema calls non-nullable at ``version`` is null.

    Kafka's generated readers refuse such a request ("non-nullable field ... was
    serialized as null") and its SocketServer closes the connection; kafka-python
    reads a length of -1 as None whatever the schema says, so the check is made here,
    through nested structs, struct arrays and the elements of other arrays.

    Raises:
        _MalformedError: naming the first null non-nullable field found.
    """
    for field in struct.untagged_fields(version):
        item = getattr(value, field.name, None)
        if item is None:
            if _null_is_length(field) and not field.nullable_for_version_q(version):
                raise _MalformedError(f"non-nullable field {field.name} was serialized as null")
        elif field.is_struct_array():
            for element in item:
                _require_non_null(field.array_of, element, version)
        elif field.is_struct():
            _require_non_null(field, item, version)
        elif field.is_array() and _null_is_length(field.array_of) and None in item:
            raise _MalformedError(f"null element in array field {field.name}")


def _null_is_length(field: Any) -> bool:
    """Whether kafka-python's None for ``field`` comes from a length of -1.

    True for strings, bytes, arrays and structs; False for the scalars kafka-python
    also reads as None (the zero uuid, a full bit field), which are values.
    """
    return bool(field.is_array() or field.is_struct() or field.type_str in _LENGTH_PREFIXED)


def decode_response(frame: bytes, response_class: Any, api_version: int) -> tuple[int, Any]:
    """Decode one response frame (without its size prefix) to a request of ``api_version``.

    Applies the response header rules of :func:`encode_response`; an
    ApiVersions response whose error code is not 0 is decoded as v0, as
    Kafka sends it (KIP-511).

    Args:
        frame: the bytes after the size prefix.
        response_class: the kafka-python response class of the request's api.
        api_version: the version of the request.

    Returns:
        (correlation id, decoded response message).

    Raises:
        InvalidResponseError: the header or body is malformed, or bytes follow the body.
    """
    api_key = int(response_class.API_KEY)
    flexible_header = (
        bool(response_class.flexible_version_q(api_version)) and api_key != API_VERSIONS_KEY
    )
    buffer = io.BytesIO(frame)
    try:
        header = ResponseHeader.decode(buffer, flexible=flexible_header)
        correlation_id = int(header.correlation_id)
    except Exception as exc:  # kafka-python raises assorted errors on garbage
        raise InvalidResponseError(f"malformed response header: {exc!r}") from exc
    start = buffer.tell()
    version = api_version
    if api_key == API_VERSIONS_KEY and frame[start : start + 2] not in (b"", b"\x00\x00"):
        version = 0
    try:
        response = _strict_decode(response_class, version, frame, start)
    except _MalformedError as exc:
        raise InvalidResponseError(
            f"malformed response body (correlation id {correlation_id}): {exc}"
        ) from exc
    # No header object is kept on a response: kafka-python cannot re-encode a
    # response that carries one. The attribute must exist all the same.
    response._header = None
    return correlation_id, response


def encode_response(request_header: ResponseAddress, response_message: Any) -> bytes:
    """Encode a response to a request: 4-byte size, response header, body.

    The body is encoded at the request's version; the header is v1 when that
    version is flexible and v0 otherwise, and always v0 for ApiVersions.

    Args:
        request_header: the request answered (a :class:`DecodedRequest` will do).
        response_message: a kafka-python response message of the same api.

    Returns:
        The framed bytes to write to the socket.

    Raises:
        ResponseTypeMismatchError: the response belongs to another api, or is a request.
    """
    if response_message.is_request() or request_header.api_key != response_message.API_KEY:
        raise ResponseTypeMismatchError(
            f"{type(response_message).__name__} cannot answer api key {request_header.api_key}"
        )
    version = request_header.api_version
    # The header is built here rather than with ApiMessage.with_header: kafka-python's
    # version setter fails on a response that already carries a header.
    body = bytes(response_message.encode(version=version))
    flexible_header = (
        bool(response_message.flexible_version_q(version))
        and request_header.api_key != API_VERSIONS_KEY
    )
    header = bytes(
        ResponseHeader(correlation_id=request_header.correlation_id).encode(
            flexible=flexible_header
        )
    )
    return _SIZE.pack(len(header) + len(body)) + header + body


def encode_error_response(error: UnsupportedVersionError, response_message: Any) -> bytes:
    """Encode ``response_message`` at version 0 as the answer to an unsupported request.

    Version 0 is the one every client can read; this is how Kafka answers an
    ApiVersions request of an unknown version (KIP-511).

    Args:
        error: the error raised by :func:`decode_request`, giving the api key
            and correlation id.
        response_message: a response of the same api, valid at version 0.

    Returns:
        The framed response bytes.

    Raises:
        ResponseTypeMismatchError: the response belongs to another api.
    """
    return encode_response(_Address(error.api_key, 0, error.correlation_id), response_message)


def encode_unsupported_version_response(
    error: UnsupportedVersionError, supported: Mapping[int, tuple[int, int]]
) -> bytes | None:
    """Return Kafka's answer to an unsupported request version, or None to close.

    For ApiVersions, Kafka answers with a v0 response carrying
    UNSUPPORTED_VERSION (35) and the ApiVersions range it supports (KIP-511).
    For any other api Kafka closes the connection, signalled here by None.

    Args:
        error: the error raised by :func:`decode_request`.
        supported: api key -> (min, max) versions the broker advertises.

    Returns:
        The framed response bytes, or None.
    """
    if error.api_key != API_VERSIONS_KEY:
        return None
    response = api_versions_response(supported, error_code=_UNSUPPORTED_VERSION)
    return encode_error_response(error, response)


@dataclass(frozen=True)
class _Address:
    api_key: int
    api_version: int
    correlation_id: int


async def read_frame_size(
    reader: asyncio.StreamReader, max_bytes: int = DEFAULT_MAX_FRAME_BYTES
) -> int | None:
    """Read the int32 size prefix of the next frame and check it, reading no body bytes.

    Kafka's ``NetworkReceive`` does the same: a size above the limit raises
    ``InvalidReceiveException`` before any of the body is read or buffered.

    Args:
        reader: the connection's stream.
        max_bytes: the largest accepted frame body, in bytes
            (``socket.request.max.bytes`` on a broker).

    Returns:
        The frame size in bytes, or None when the stream ended cleanly before a new frame.

    Raises:
        FrameSizeError: the size is negative or above ``max_bytes``.
        TruncatedFrameError: the stream ended inside the size prefix.
        OSError: the connection failed (for example reset by the peer).
    """
    try:
        prefix = await reader.readexactly(_SIZE.size)
    except asyncio.IncompleteReadError as exc:
        if not exc.partial:
            return None
        raise TruncatedFrameError("stream ended inside a frame size prefix") from exc
    (size,) = _SIZE.unpack(prefix)
    if size < 0 or size > max_bytes:
        raise FrameSizeError(size, max_bytes)
    return int(size)


async def read_frame_body(reader: asyncio.StreamReader, size: int) -> bytes:
    """Read the ``size`` body bytes of a frame whose prefix :func:`read_frame_size` read.

    Raises:
        TruncatedFrameError: the stream ended inside the body.
        OSError: the connection failed.
    """
    try:
        return await reader.readexactly(size)
    except asyncio.IncompleteReadError as exc:
        raise TruncatedFrameError(
            f"stream ended after {len(exc.partial)} of {size} frame bytes"
        ) from exc


async def read_frame(
    reader: asyncio.StreamReader, max_bytes: int = DEFAULT_MAX_FRAME_BYTES
) -> bytes | None:
    """Read one size-prefixed frame from ``reader``.

    Args:
        reader: the connection's stream.
        max_bytes: the largest accepted frame body, in bytes
            (``socket.request.max.bytes`` on a broker).

    Returns:
        The frame body without its size prefix, or None when the stream ended
        cleanly before a new frame.

    Raises:
        FrameSizeError: the size is negative or above ``max_bytes``.
        TruncatedFrameError: the stream ended inside a frame.
        OSError: the connection failed (for example reset by the peer).
    """
    size = await read_frame_size(reader, max_bytes)
    if size is None:
        return None
    return await read_frame_body(reader, size)
