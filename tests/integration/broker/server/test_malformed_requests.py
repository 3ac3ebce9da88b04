"""Malformed frames never crash a broker: each gets an error or a closed connection.

Malformed record batches behind a valid CRC are refused by the leader's validation and
leave the log end offset where it was.
"""

from __future__ import annotations

import asyncio
import random
import socket
import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka import codec as kafka_codec
from kafka.protocol.producer import ProduceRequest

from kpo_broker.protocol.api import APIS
from kpo_broker.protocol.client import BrokerClient
from kpo_broker.server.apis import versions
from kpo_devenv.kafka_cluster import KafkaCluster
from tests.integration.broker.conftest import ClusterFactory
from tests.integration.broker.server.helpers import consume_all, create_topic
from tests.unit.broker.log.batches import craft_batch, make_batch, record_bytes

pytestmark = pytest.mark.integration


def _exchange(port: int, payload: bytes) -> bytes:
    """Send raw bytes, return whatever comes back before the broker closes or 1 s passes."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.settimeout(1.0)
        try:
            sock.sendall(payload)
        except OSError:
            return b""
        chunks = []
        try:
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        except (TimeoutError, OSError):
            pass
    return b"".join(chunks)


def _frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def _header(api_key: int, version: int, correlation_id: int = 7) -> bytes:
    client = b"fuzz"
    return struct.pack(">hhih", api_key, version, correlation_id, len(client)) + client


def _assert_still_serving(cluster: KafkaCluster, count: int) -> None:
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all")
    producer.send("alive", value=f"after-{count}".encode(), partition=0).get(30)
    producer.close()


def test_malformed_frames_get_an_error_or_a_closed_connection(
    kafka_cluster_factory: ClusterFactory,
) -> None:
    cluster = kafka_cluster_factory(1)
    create_topic(cluster, "alive", partitions=1, rf=1)
    port = cluster.brokers[0].port
    fixed = [
        b"\xff\xff\xff\xff",  # negative size
        struct.pack(">i", 2**31 - 1),  # larger than socket.request.max.bytes
        _frame(b""),  # empty frame
        _frame(b"\x00"),  # truncated header
        _frame(_header(9999, 0)),  # unknown API key
        _frame(_header(3, 99)),  # unknown version of Metadata
        _frame(_header(0, 9) + b"\x01\x02"),  # truncated Produce body
        _frame(_header(1, 4) + b"\xff" * 40),  # garbage Fetch body
    ]
    for payload in fixed:
        _exchange(port, payload)
    # ApiVersions of an unknown (newer, so flexible: header v2 with an empty tagged-field
    # section) version is answered with UNSUPPORTED_VERSION (KIP-511).
    reply = _exchange(port, _frame(_header(18, 99, correlation_id=42) + b"\x00"))
    assert reply[4:8] == struct.pack(">i", 42)
    assert reply[8:10] == struct.pack(">h", 35)
    _assert_still_serving(cluster, 0)

    @settings(
        max_examples=60,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(
        api_key=st.sampled_from([0, 1, 2, 3, 18, 19, 23, 32, 37, 4, 5, 6, 7, 60, 1000]),
        version=st.integers(-1, 20),
        body=st.binary(max_size=300),
        size_delta=st.integers(-4, 4),
    )
    def fuzz(api_key: int, version: int, body: bytes, size_delta: int) -> None:
        payload = _header(api_key, version) + body
        size = max(len(payload) + size_delta, 0)
        _exchange(port, struct.pack(">i", size) + payload)

    fuzz()
    _assert_still_serving(cluster, 1)
    assert len(consume_all(cluster, "alive", 1, 2)[0]) == 2


_Topic = ProduceRequest.TopicProduceData
_Partition = _Topic.PartitionProduceData
_PRODUCE_VERSION = 9  # record_errors since v8 (KIP-467)


def _produce_raw(port: int, topic: str, records: bytes) -> Any:
    """Send one Produce request (acks=1) holding ``records`` for partition 0; return it."""

    async def send() -> Any:
        client = BrokerClient("127.0.0.1", port, "crafted", 30000)
        try:
            request = ProduceRequest(
                transactional_id=None,
                acks=1,
                timeout_ms=10000,
                topic_data=[_Topic(name=topic, partition_data=[_Partition(0, records)])],
            )
            response = await client.send(request, _PRODUCE_VERSION)
        finally:
            await client.close()
        return response.responses[0].partition_responses[0]

    return asyncio.run(send())


def _log_end_offset(cluster: KafkaCluster, topic: str) -> int:
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers)
    try:
        tp = TopicPartition(topic, 0)
        return int(consumer.end_offsets([tp])[tp])
    finally:
        consumer.close()


def test_malformed_record_batches_are_refused_and_append_nothing(
    kafka_cluster_factory: ClusterFactory,
) -> None:
    cluster = kafka_cluster_factory(1)
    create_topic(cluster, "crafted", partitions=1, rf=1)
    broker = cluster.brokers[0]
    first = _produce_raw(broker.port, "crafted", make_batch([b"first"]))
    assert (first.error_code, first.base_offset) == (0, 0)

    one_record = make_batch([b"only"])[61:]
    plain = make_batch([b"a", b"b"])[61:]
    corrupt, invalid, too_large = 2, 87, 10
    cases = {
        "count 10^9 over one record": (craft_batch(one_record, 10**9), corrupt),
        "garbage records": (craft_batch(bytes(range(200)), 3), corrupt),
        "gzip flag on garbage": (craft_batch(plain, 2, attributes=1), corrupt),
        "record length 2^31": (craft_batch(record_bytes(0, b"v", length=2**31), 1), corrupt),
        "trailing bytes": (craft_batch(plain + b"\x00\x00", 2), corrupt),
        "unknown codec": (craft_batch(plain, 2, attributes=6), corrupt),
        "64 MiB gzip bomb": (
            craft_batch(kafka_codec.gzip_encode(record_bytes(0, bytes(64 << 20))), 1, attributes=1),
            too_large,
        ),
        "offset deltas 0,2,2": (
            craft_batch(record_bytes(0, b"a") + record_bytes(2, b"b") + record_bytes(2, b"c"), 3),
            invalid,
        ),
        "count vs last offset delta": (craft_batch(plain, 2, last_offset_delta=9), invalid),
        "magic 1": (craft_batch(plain, 2, magic=1), invalid),
        "oversized batch": (make_batch([bytes(1_100_000)]), too_large),
    }
    for name, (records, expected) in cases.items():
        result = _produce_raw(broker.port, "crafted", records)
        assert (result.error_code, result.base_offset) == (expected, -1), name
        assert result.error_message, name
        assert _log_end_offset(cluster, "crafted") == 1, name
    deltas = _produce_raw(broker.port, "crafted", cases["offset deltas 0,2,2"][0])
    assert [e.batch_index for e in deltas.record_errors] == [1]

    after = _produce_raw(broker.port, "crafted", make_batch([b"second"]))
    assert (after.error_code, after.base_offset) == (0, 1)
    assert consume_all(cluster, "crafted", 1, 2)[0] == [b"first", b"second"]
    log = (broker.workdir / "broker.log").read_text()
    assert "Traceback" not in log


def test_log_append_time_topics_get_the_broker_timestamp(
    kafka_cluster_factory: ClusterFactory,
) -> None:
    cluster = kafka_cluster_factory(1)
    create_topic(
        cluster, "stamped", partitions=1, rf=1, configs={"message.timestamp.type": "LogAppendTime"}
    )
    result = _produce_raw(cluster.brokers[0].port, "stamped", make_batch([b"x"], timestamp_ms=5))
    assert result.error_code == 0 and result.log_append_time_ms > 5
    consumer = KafkaConsumer(
        bootstrap_servers=cluster.bootstrap_servers,
        auto_offset_reset="earliest",
        consumer_timeout_ms=10000,
    )
    consumer.assign([TopicPartition("stamped", 0)])
    record = next(iter(consumer))
    consumer.close()
    assert (record.timestamp, record.timestamp_type) == (result.log_append_time_ms, 1)


def _exchange_once(port: int, payload: bytes) -> bytes:
    """Send raw bytes; return one response frame, or what came before the broker closed."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.settimeout(2.0)
        received = b""
        try:
            sock.sendall(payload)
            while len(received) < 4 or len(received) < 4 + struct.unpack(">i", received[:4])[0]:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                received += chunk
        except (TimeoutError, OSError):
            pass
    return received


def _malformed_bodies(flexible: bool, rng: random.Random) -> list[bytes]:
    """Bodies with null arrays and strings at every depth, truncations and noise."""
    one = b"\x02" if flexible else struct.pack(">i", 1)  # an array of one element
    bodies = [
        b"",  # truncated before the body
        b"\xff" * 64,  # null (-1) lengths where arrays and strings are expected
        b"\x00" * 64,  # compact null (0) lengths, or empty arrays and zero values
        one + b"\xff" * 64,  # one element whose arrays and strings are null
        one + b"\x00" * 64,
        one + b"\x00\x01t" + b"\xff" * 32,  # a named element with null fields after it
        bytes(rng.randrange(256) for _ in range(48)),
        bytes(rng.randrange(256) for _ in range(200)),
    ]
    if flexible:  # header v2: an empty tagged-field section after the client id
        return [b"\x00" + body for body in bodies]
    return bodies


def test_every_served_api_survives_malformed_bodies_without_a_traceback(
    kafka_cluster_factory: ClusterFactory,
) -> None:
    """Null arrays, truncated and garbage bodies for each served API and version.

    Each is answered with Kafka's error or closes its connection; the broker logs no
    traceback and a fresh kafka-python client can still bootstrap, produce and consume.
    """
    cluster = kafka_cluster_factory(1)
    create_topic(cluster, "alive", partitions=1, rf=1)
    broker = cluster.brokers[0]
    rng = random.Random(16)
    served = {**versions.CLIENT_APIS, **versions.INTER_BROKER_APIS}
    for api_key, (low, high) in sorted(served.items()):
        spec = APIS[api_key]
        for version in range(low, high + 1):
            for body in _malformed_bodies(spec.request_is_flexible(version), rng):
                _exchange_once(broker.port, _frame(_header(api_key, version) + body))
    _assert_still_serving(cluster, 0)
    assert consume_all(cluster, "alive", 1, 1)[0] == [b"after-0"]
    log = (broker.workdir / "broker.log").read_text()
    assert "Traceback" not in log
