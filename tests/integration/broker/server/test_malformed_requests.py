"""Malformed frames never crash a broker: each gets an error or a closed connection."""

from __future__ import annotations

import socket
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka import KafkaProducer

from kpo_devenv.kafka_cluster import KafkaCluster
from tests.integration.broker.conftest import ClusterFactory
from tests.integration.broker.server.helpers import consume_all, create_topic

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
