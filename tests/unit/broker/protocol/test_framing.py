"""Framing against kafka-python's own client encoder and response parser."""

from __future__ import annotations

import asyncio
import struct
from typing import Any

import pytest
from kafka.protocol.metadata import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    MetadataRequest,
    MetadataResponse,
)
from kafka.protocol.parser import KafkaProtocol
from kafka.protocol.producer import ProduceRequest, ProduceResponse

from kpo_broker.protocol.api import api_versions_response
from kpo_broker.protocol.framing import (
    DecodedRequest,
    FrameSizeError,
    InvalidRequestError,
    InvalidResponseError,
    ResponseTypeMismatchError,
    TruncatedFrameError,
    UnsupportedVersionError,
    decode_request,
    decode_response,
    encode_error_response,
    encode_response,
    encode_unsupported_version_response,
    read_frame,
)
from kpo_broker.protocol.interbroker import (
    LeaderAndIsrPartitionError,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
)

SUPPORTED = {0: (3, 9), 3: (0, 12), 4: (0, 4), 18: (0, 4)}


def client_frame(protocol: KafkaProtocol, request: Any) -> bytes:
    """Encode ``request`` as kafka-python's client does; return the frame without its size."""
    protocol.send_request(request)
    data = bytes(protocol.send_bytes())
    (size,) = struct.unpack_from(">i", data)
    assert size == len(data) - 4
    return data[4:]


@pytest.mark.parametrize("version", [0, 1, 4, 8, 9, 12])
def test_decodes_kafka_python_metadata_requests(version: int) -> None:
    protocol = KafkaProtocol(client_id="kp-client")
    topics = [MetadataRequest.MetadataRequestTopic(name=n) for n in ("a", "b")]
    request = MetadataRequest[version](topics=topics, allow_auto_topic_creation=False)
    decoded = decode_request(client_frame(protocol, request), SUPPORTED)
    assert isinstance(decoded, DecodedRequest)
    assert (decoded.api_key, decoded.api_version) == (3, version)
    assert (decoded.correlation_id, decoded.client_id) == (1, "kp-client")
    assert [t.name for t in decoded.body.topics] == ["a", "b"]
    if version >= 4:
        assert decoded.body.allow_auto_topic_creation is False
    assert decoded.expects_response


@pytest.mark.parametrize(("version", "acks"), [(3, 1), (7, -1), (9, 1), (9, 0)])
def test_decodes_kafka_python_produce_requests(version: int, acks: int) -> None:
    protocol = KafkaProtocol(client_id="producer-1")
    records = b"\x00" * 61 + b"batch"
    partition = ProduceRequest.TopicProduceData.PartitionProduceData(index=2, records=records)
    topic = ProduceRequest.TopicProduceData(name="events", partition_data=[partition])
    request = ProduceRequest[version](
        transactional_id=None, acks=acks, timeout_ms=1500, topic_data=[topic]
    )
    decoded = decode_request(client_frame(protocol, request), SUPPORTED)
    body = decoded.body
    assert (decoded.api_key, decoded.api_version, decoded.client_id) == (0, version, "producer-1")
    assert (body.acks, body.timeout_ms, body.transactional_id) == (acks, 1500, None)
    data = body.topic_data[0]
    assert data.name == "events"
    assert (data.partition_data[0].index, data.partition_data[0].records) == (2, records)
    assert decoded.expects_response is (acks != 0)


def test_null_client_id_reads_as_empty() -> None:
    frame = struct.pack(">hhih", 18, 0, 9, -1)
    decoded = decode_request(frame, SUPPORTED)
    assert (decoded.correlation_id, decoded.client_id) == (9, "")


@pytest.mark.parametrize("version", [0, 1, 5, 9, 12])
def test_metadata_responses_parse_in_kafka_python(version: int) -> None:
    protocol = KafkaProtocol(client_id="c")
    request = MetadataRequest[version](topics=[], allow_auto_topic_creation=True)
    decoded = decode_request(client_frame(protocol, request), SUPPORTED)
    broker = MetadataResponse.MetadataResponseBroker(node_id=1, host="h", port=9092, rack=None)
    response = MetadataResponse(
        throttle_time_ms=0, brokers=[broker], cluster_id="cid", controller_id=1, topics=[]
    )
    [(correlation_id, parsed)] = protocol.receive_bytes(encode_response(decoded, response))
    assert correlation_id == decoded.correlation_id
    assert parsed.version == version
    assert [(b.node_id, b.host, b.port) for b in parsed.brokers] == [(1, "h", 9092)]
    if version >= 2:
        assert parsed.cluster_id == "cid"
    if version >= 1:
        assert parsed.controller_id == 1


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_api_versions_responses_use_header_v0(version: int) -> None:
    protocol = KafkaProtocol(client_id="c")
    decoded = decode_request(client_frame(protocol, ApiVersionsRequest[version]()), SUPPORTED)
    frame = encode_response(decoded, api_versions_response(SUPPORTED))
    # Header v0: the body (error code 0) follows the correlation id directly.
    assert frame[4:8] == struct.pack(">i", decoded.correlation_id)
    assert frame[8:10] == b"\x00\x00"
    [(_, parsed)] = protocol.receive_bytes(frame)
    assert parsed.error_code == 0
    ranges = {k.api_key: (k.min_version, k.max_version) for k in parsed.api_keys}
    assert ranges == SUPPORTED


def test_flexible_response_uses_header_v1() -> None:
    address = DecodedRequest(3, 9, 77, "c", None)
    frame = encode_response(address, MetadataResponse(brokers=[], topics=[], controller_id=1))
    assert frame[4:8] == struct.pack(">i", 77)
    assert frame[8] == 0  # empty tagged fields of response header v1
    address = DecodedRequest(3, 8, 77, "c", None)
    frame_v8 = encode_response(address, MetadataResponse(brokers=[], topics=[], controller_id=1))
    assert frame_v8[8:12] == struct.pack(">i", 0)  # v8 body starts with throttle_time_ms


@pytest.mark.parametrize("version", [0, 3, 4])
def test_inter_broker_responses_parse_in_kafka_python(version: int) -> None:
    protocol = KafkaProtocol(client_id="controller-0")
    request = LeaderAndIsrRequest[version](
        controller_id=0, controller_epoch=1, broker_epoch=2, live_leaders=[]
    )
    decoded = decode_request(client_frame(protocol, request), SUPPORTED)
    error = LeaderAndIsrPartitionError(topic_name="t", partition_index=0, error_code=74)
    response = LeaderAndIsrResponse(error_code=0, partition_errors=[error])
    [(_, parsed)] = protocol.receive_bytes(encode_response(decoded, response))
    assert [(e.topic_name, e.error_code) for e in parsed.partition_errors] == [("t", 74)]


def test_unsupported_api_versions_answer_is_v0_with_error_35() -> None:
    protocol = KafkaProtocol(client_id="new-client")
    frame = client_frame(protocol, ApiVersionsRequest[4]())
    supported = {18: (0, 2), 3: (0, 9)}
    with pytest.raises(UnsupportedVersionError) as caught:
        decode_request(frame, supported)
    error = caught.value
    assert (error.api_key, error.api_version, error.correlation_id) == (18, 4, 1)
    assert error.client_id == "new-client"
    answer = encode_unsupported_version_response(error, supported)
    assert answer is not None
    [(correlation_id, parsed)] = protocol.receive_bytes(answer)
    assert (correlation_id, parsed.version, parsed.error_code) == (1, 0, 35)
    assert [(k.api_key, k.min_version, k.max_version) for k in parsed.api_keys] == [(18, 0, 2)]


def test_unsupported_version_of_other_apis_closes() -> None:
    protocol = KafkaProtocol(client_id="c")
    frame = client_frame(protocol, MetadataRequest[13](topics=None))
    with pytest.raises(UnsupportedVersionError) as caught:
        decode_request(frame, SUPPORTED)
    assert (caught.value.api_key, caught.value.api_version) == (3, 13)
    assert encode_unsupported_version_response(caught.value, SUPPORTED) is None


@pytest.mark.parametrize(
    ("api_key", "version"),
    [(99, 0), (1, 12), (-1, 0), (0, 2), (7, 1)],
    ids=["unknown-key", "not-advertised", "negative-key", "below-min", "not-advertised-7"],
)
def test_unknown_or_unadvertised_apis(api_key: int, version: int) -> None:
    frame = struct.pack(">hhih", api_key, version, 5, 1) + b"c" + b"\x00" * 8
    with pytest.raises(UnsupportedVersionError) as caught:
        decode_request(frame, SUPPORTED)
    assert (caught.value.api_key, caught.value.correlation_id) == (api_key, 5)


def test_encode_error_response_uses_version_0() -> None:
    error = UnsupportedVersionError(18, 9, 3, "c")
    frame = encode_error_response(error, ApiVersionsResponse(error_code=35, api_keys=[]))
    assert frame == struct.pack(">iih", 10, 3, 35) + struct.pack(">i", 0)


def test_response_of_another_api_is_refused() -> None:
    address = DecodedRequest(3, 1, 1, "c", None)
    with pytest.raises(ResponseTypeMismatchError):
        encode_response(address, ProduceResponse(responses=[]))
    with pytest.raises(ResponseTypeMismatchError):
        encode_response(address, MetadataRequest(topics=[]))


@pytest.mark.parametrize(
    "frame",
    [b"", b"\x00\x03\x00", struct.pack(">hhi", 3, 1, 1) + b"\x00\x05ab"],
    ids=["empty", "short-header", "truncated-client-id"],
)
def test_malformed_headers(frame: bytes) -> None:
    with pytest.raises(InvalidRequestError):
        decode_request(frame, SUPPORTED)


def test_truncated_bodies_are_invalid_and_trailing_bytes_ignored() -> None:
    protocol = KafkaProtocol(client_id="c")
    topics = [MetadataRequest.MetadataRequestTopic(name="abc")]
    frame = client_frame(protocol, MetadataRequest[1](topics=topics))
    with pytest.raises(InvalidRequestError) as caught:
        decode_request(frame[:-1], SUPPORTED)  # the topic name's last byte is missing
    assert (caught.value.correlation_id, caught.value.api_key) == (1, 3)
    # Apache Kafka ignores bytes after a request body (librdkafka sends some).
    decoded = decode_request(frame + b"\x00\x00\x00", SUPPORTED)
    assert [t.name for t in decoded.body.topics] == ["abc"]


def _raw_request(api_key: int, version: int, body: bytes) -> bytes:
    return struct.pack(">hhih", api_key, version, 1, 1) + b"c" + body


@pytest.mark.parametrize(
    ("version", "body", "message"),
    [
        (0, struct.pack(">i", -1), "non-nullable field topics"),  # topics nullable from v1
        (1, struct.pack(">ih", 1, -1), "non-nullable field name"),  # a topic's name
    ],
    ids=["null-array", "null-string-in-struct-array"],
)
def test_nulls_where_the_schema_forbids_them_are_invalid(
    version: int, body: bytes, message: str
) -> None:
    """Kafka's readers refuse them ("non-nullable field ... was serialized as null")."""
    with pytest.raises(InvalidRequestError, match=message) as caught:
        decode_request(_raw_request(3, version, body), SUPPORTED)
    assert (caught.value.correlation_id, caught.value.api_key) == (1, 3)


def test_nulls_the_schema_allows_are_kept() -> None:
    decoded = decode_request(_raw_request(3, 1, struct.pack(">i", -1)), SUPPORTED)
    assert decoded.body.topics is None  # v1+: null topics = all topics
    produce = _raw_request(0, 3, struct.pack(">hhii", -1, 1, 1000, 1) + b"\x00\x01t")
    produce += struct.pack(">iii", 1, 0, -1)  # partition 0 with null records (nullable)
    assert decode_request(produce, SUPPORTED).body.topic_data[0].partition_data[0].records is None


def test_decode_response_strictness() -> None:
    body = MetadataResponse(brokers=[], topics=[], controller_id=1).encode(version=1)
    frame = struct.pack(">i", 8) + bytes(body)
    correlation_id, parsed = decode_response(frame, MetadataResponse, 1)
    assert (correlation_id, parsed.controller_id) == (8, 1)
    with pytest.raises(InvalidResponseError):
        decode_response(frame[:-1], MetadataResponse, 1)
    with pytest.raises(InvalidResponseError):
        decode_response(frame + b"\x01", MetadataResponse, 1)
    with pytest.raises(InvalidResponseError):
        decode_response(b"\x00", MetadataResponse, 1)


def _read(data: bytes, max_bytes: int = 100) -> bytes | None:
    async def run() -> bytes | None:
        reader = asyncio.StreamReader()
        reader.feed_data(data)
        reader.feed_eof()
        return await read_frame(reader, max_bytes)

    return asyncio.run(run())


def test_read_frame() -> None:
    assert _read(struct.pack(">i", 3) + b"abc" + b"rest") == b"abc"
    assert _read(struct.pack(">i", 0)) == b""
    assert _read(b"") is None
    with pytest.raises(FrameSizeError) as caught:
        _read(struct.pack(">i", -1))
    assert (caught.value.size, caught.value.max_bytes) == (-1, 100)
    with pytest.raises(FrameSizeError):
        _read(struct.pack(">i", 101) + b"x" * 101)
    with pytest.raises(TruncatedFrameError):
        _read(b"\x00\x00")
    with pytest.raises(TruncatedFrameError):
        _read(struct.pack(">i", 5) + b"ab")
