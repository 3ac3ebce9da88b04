"""Hypothesis fuzzing: malformed input raises only the protocol layer's named errors."""

from __future__ import annotations

import asyncio
import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
from kafka.protocol.producer import ProduceRequest

from kpo_broker.protocol.api import APIS
from kpo_broker.protocol.framing import (
    DecodedRequest,
    FrameSizeError,
    InvalidRequestError,
    TruncatedFrameError,
    UnsupportedVersionError,
    decode_request,
    read_frame,
)
from kpo_broker.protocol.interbroker import (
    LeaderAndIsrRequest,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from tests.unit.broker.protocol.schema_strategies import messages

SUPPORTED = {key: spec.codec_versions for key, spec in APIS.items()}
FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

SAMPLES = [
    (MetadataRequest, 1),
    (MetadataRequest, 12),
    (ProduceRequest, 3),
    (ProduceRequest, 9),
    (FetchRequest, 11),
    (CreateTopicsRequest, 5),
    (ApiVersionsRequest, 3),
    (LeaderAndIsrRequest, 2),
    (LeaderAndIsrRequest, 4),
    (UpdateMetadataRequest, 6),
    (StopReplicaRequest, 3),
]


@st.composite
def valid_frames(draw: st.DrawFn) -> bytes:
    cls, version = draw(st.sampled_from(SAMPLES))
    message = draw(messages(cls, version))
    message.with_header(correlation_id=draw(st.integers(0, 2**31 - 1)), client_id="fuzz")
    return bytes(message.encode(header=True, framed=True))[4:]


def _decode(frame: bytes) -> DecodedRequest | None:
    try:
        return decode_request(frame, SUPPORTED)
    except (InvalidRequestError, UnsupportedVersionError):
        return None


@FUZZ
@given(frame=st.binary(max_size=200))
def test_random_bytes(frame: bytes) -> None:
    _decode(frame)


@FUZZ
@given(header=st.tuples(st.sampled_from(sorted(APIS)), st.integers(-1, 20)), rest=st.binary())
def test_random_bodies_of_known_apis(header: tuple[int, int], rest: bytes) -> None:
    frame = struct.pack(">hhi", header[0], header[1], 1) + rest
    _decode(frame)


@FUZZ
@given(frame=valid_frames())
def test_valid_frames_decode(frame: bytes) -> None:
    decoded = decode_request(frame, SUPPORTED)
    assert decoded.client_id == "fuzz"


@FUZZ
@given(frame=valid_frames(), data=st.data())
def test_truncated_valid_requests_are_invalid(frame: bytes, data: st.DataObject) -> None:
    cut = data.draw(st.integers(0, len(frame) - 1))
    with pytest.raises(InvalidRequestError):
        decode_request(frame[:cut], SUPPORTED)


@FUZZ
@given(frame=valid_frames(), data=st.data())
def test_corrupted_valid_requests(frame: bytes, data: st.DataObject) -> None:
    position = data.draw(st.integers(0, len(frame) - 1))
    value = data.draw(st.integers(0, 255))
    assume(frame[position] != value)
    _decode(frame[:position] + bytes([value]) + frame[position + 1 :])


@FUZZ
@given(
    frame=valid_frames(),
    api_key=st.integers(-(2**15), 2**15 - 1),
    version=st.integers(-(2**15), 2**15 - 1),
)
def test_unknown_keys_and_versions(frame: bytes, api_key: int, version: int) -> None:
    spec = APIS.get(api_key)
    lo, hi = SUPPORTED.get(api_key, (0, -1))
    assume(spec is None or not lo <= version <= hi)
    forged = struct.pack(">hh", api_key, version) + frame[4:]
    correlation_id = struct.unpack_from(">i", frame, 4)[0]
    try:
        decode_request(forged, SUPPORTED)
    except UnsupportedVersionError as error:
        assert (error.api_key, error.api_version) == (api_key, version)
        assert error.correlation_id == correlation_id
    except InvalidRequestError:
        # A version whose header flexibility differs may leave the header unreadable.
        assert spec is not None


async def _read_all(data: bytes, max_bytes: int) -> list[Any]:
    reader = asyncio.StreamReader()
    reader.feed_data(data)
    reader.feed_eof()
    frames: list[Any] = []
    while True:
        try:
            frame = await read_frame(reader, max_bytes)
        except (FrameSizeError, TruncatedFrameError) as exc:
            frames.append(exc)
            return frames
        if frame is None:
            return frames
        frames.append(frame)


@FUZZ
@given(
    sizes=st.lists(st.integers(-(2**31), 2**31 - 1), max_size=4),
    payload=st.binary(max_size=64),
    max_bytes=st.integers(0, 64),
)
def test_read_frame_bad_sizes(sizes: list[int], payload: bytes, max_bytes: int) -> None:
    data = b"".join(struct.pack(">i", s) for s in sizes) + payload
    results = asyncio.run(_read_all(data, max_bytes))
    for result in results[:-1]:
        assert isinstance(result, bytes)
        assert len(result) <= max_bytes
    if results and isinstance(results[-1], FrameSizeError):
        assert not 0 <= results[-1].size <= max_bytes
