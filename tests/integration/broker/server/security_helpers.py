"""Helpers for the listener security tests: PKI, clients' settings, metrics, raw connections."""

from __future__ import annotations

import socket
import ssl
import struct
import urllib.request
from typing import Any

from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import Producer as ConfluentProducer
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from kpo_broker.protocol.framing import decode_response
from kpo_devenv.kafka_cluster import KafkaCluster
from kpo_devenv.pki import CertKeyPair, KafkaPki
from tests.integration.broker.conftest import wait_for

SCRAM_JAAS = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    'username="{u}" password="{p}";'
)
PLAIN_JAAS = "org.apache.kafka.common.security.plain.PlainLoginModule required {options};"


def kafka_python_tls(pki: KafkaPki, client: CertKeyPair | None) -> dict[str, Any]:
    """kafka-python's TLS settings: trust the CA, present ``client``'s certificate if given."""
    settings: dict[str, Any] = {"ssl_cafile": str(pki.ca.cert), "ssl_check_hostname": True}
    if client is not None:
        settings |= {"ssl_certfile": str(client.cert), "ssl_keyfile": str(client.key)}
    return settings


def confluent_tls(pki: KafkaPki, client: CertKeyPair | None) -> dict[str, Any]:
    """librdkafka's TLS settings."""
    settings: dict[str, Any] = {"ssl.ca.location": str(pki.ca.cert)}
    if client is not None:
        settings |= {
            "ssl.certificate.location": str(client.cert),
            "ssl.key.location": str(client.key),
        }
    return settings


def produce_and_consume_kafka_python(
    bootstrap: str, topic: str, count: int, settings: dict[str, Any], prefix: str = "kp"
) -> None:
    """Produce ``count`` records with acks=all to partition 0 and read them all back."""
    producer = KafkaProducer(
        bootstrap_servers=bootstrap, acks="all", linger_ms=5, request_timeout_ms=20000, **settings
    )
    try:
        for i in range(count):
            producer.send(topic, f"{prefix}-{i}".encode(), partition=0).get(timeout=30)
    finally:
        producer.close(timeout=10)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, consumer_timeout_ms=1000, **settings)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        values: list[bytes] = []

        def got_all() -> bool:
            for records in consumer.poll(timeout_ms=500).values():
                values.extend(r.value for r in records)
            return sum(v.startswith(prefix.encode()) for v in values) >= count

        wait_for(got_all, 60, f"{count} records over kafka-python")
    finally:
        consumer.close()
    mine = [v for v in values if v.startswith(f"{prefix}-".encode())]
    assert mine == [f"{prefix}-{i}".encode() for i in range(count)]


def produce_and_consume_confluent(
    bootstrap: str, topic: str, count: int, settings: dict[str, Any], prefix: str = "ck"
) -> None:
    """Produce with librdkafka (acks=all) to partition 0 and read the records back."""
    errors: list[str] = []
    producer = ConfluentProducer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 5,
            "error_cb": lambda e: errors.append(str(e)),
            **settings,
        }
    )
    delivered: list[int] = []

    def on_delivery(err: Any, msg: Any) -> None:
        assert err is None, err
        delivered.append(msg.offset())

    for i in range(count):
        producer.produce(
            topic, value=f"{prefix}-{i}".encode(), partition=0, on_delivery=on_delivery
        )
    assert producer.flush(60) == 0, errors
    assert len(delivered) == count
    consumer = ConfluentConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "security-tests",
            "enable.auto.commit": False,
            **settings,
        }
    )
    try:
        consumer.assign([ConfluentTopicPartition(topic, 0, 0)])
        values: list[bytes] = []

        def got_all() -> bool:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value())
            return sum(v.startswith(prefix.encode()) for v in values) >= count

        wait_for(got_all, 60, f"{count} records over librdkafka")
    finally:
        consumer.close()
    mine = [v for v in values if v.startswith(f"{prefix}-".encode())]
    assert mine == [f"{prefix}-{i}".encode() for i in range(count)]


def confluent_errors(bootstrap: str, settings: dict[str, Any], wait_s: float = 10) -> list[str]:
    """Connect with librdkafka and return the errors it reports within ``wait_s``."""
    import time

    errors: list[str] = []
    producer = ConfluentProducer(
        {"bootstrap.servers": bootstrap, "error_cb": lambda e: errors.append(str(e)), **settings}
    )
    deadline = time.monotonic() + wait_s
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    producer.flush(1)
    return errors


def authentication_counts(cluster: KafkaCluster, broker_id: int, listener: str) -> tuple[int, int]:
    """(successful, failed) authentications of ``listener`` from the broker's metrics."""
    url = cluster.brokers[broker_id].metrics_url
    assert url is not None
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    found = {"successful": 0.0, "failed": 0.0}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            for kind in found:
                name = f"kafka_server_socket_server_metrics_{kind}_authentication_total"
                if sample.name == name and sample.labels.get("listener") == listener:
                    found[kind] = sample.value
    return int(found["successful"]), int(found["failed"])


class RawConnection:
    """A raw (optionally TLS) connection speaking Kafka frames, for protocol-level checks."""

    def __init__(self, host: str, port: int, context: ssl.SSLContext | None = None) -> None:
        sock = socket.create_connection((host, port), timeout=10)
        self.sock: socket.socket = (
            context.wrap_socket(sock, server_hostname=host) if context is not None else sock
        )
        self._correlation = 0

    def send(self, request: Any, version: int) -> None:
        """Send a kafka-python request message."""
        request.with_header(correlation_id=self._correlation, client_id="raw")
        self._correlation += 1
        self.sock.sendall(bytes(request.encode(version=version, header=True, framed=True)))

    def receive(self, response_class: Any, version: int) -> Any:
        """Read one response frame and decode it."""
        frame = self.read_frame()
        assert frame is not None, "connection closed"
        return decode_response(frame, response_class, version)[1]

    def read_frame(self) -> bytes | None:
        """Read one size-prefixed frame; None when the broker closed the connection."""
        size_bytes = self._read(4)
        if size_bytes is None:
            return None
        (size,) = struct.unpack(">i", size_bytes)
        return self._read(size)

    def _read(self, n: int) -> bytes | None:
        out = b""
        while len(out) < n:
            try:
                chunk = self.sock.recv(n - len(out))
            except (ConnectionError, ssl.SSLError):
                return None
            if not chunk:
                return None
            out += chunk
        return out

    def closed_by_broker(self, timeout_s: float = 10) -> bool:
        """Whether the broker closes the connection within ``timeout_s`` (no more data)."""
        self.sock.settimeout(timeout_s)
        try:
            return self.sock.recv(1) == b""
        except (ConnectionError, ssl.SSLError):
            return True
        except TimeoutError:
            return False

    def close(self) -> None:
        """Close the socket."""
        self.sock.close()


def client_tls_context(pki: KafkaPki, client: CertKeyPair | None = None) -> ssl.SSLContext:
    """A Python TLS client context trusting the CA (with a client certificate if given)."""
    context = ssl.create_default_context(cafile=str(pki.ca.cert))
    if client is not None:
        context.load_cert_chain(str(client.cert), str(client.key))
    return context


def wait_isr_full(cluster: KafkaCluster, topic: str, rf: int, timeout_s: float = 60) -> None:
    """Wait until every partition of ``topic`` has ``rf`` replicas in its ISR."""
    from tests.integration.broker.server.helpers import describe

    wait_for(
        lambda: all(len(p["isr_nodes"]) == rf for p in describe(cluster, topic)),
        timeout_s,
        f"full ISR of {topic}",
    )
