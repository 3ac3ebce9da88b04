"""TLS listeners on real brokers: mutual TLS for clients and between brokers, bad handshakes."""

from __future__ import annotations

import contextlib
import socket
import ssl
import time
from pathlib import Path

import pytest

from kpo_devenv.kafka_cluster import KafkaCluster
from kpo_devenv.kafka_security import broker_ssl_properties
from kpo_devenv.net import LOOPBACK
from kpo_devenv.pki import KafkaPki, generate_kafka_pki
from tests.integration.broker.conftest import ClusterFactory, wait_for
from tests.integration.broker.server.helpers import create_topic, describe, leaders
from tests.integration.broker.server.security_helpers import (
    RawConnection,
    authentication_counts,
    client_tls_context,
    confluent_errors,
    confluent_tls,
    kafka_python_tls,
    produce_and_consume_confluent,
    produce_and_consume_kafka_python,
    wait_isr_full,
)


@pytest.fixture
def pki(tmp_path: Path) -> KafkaPki:
    return generate_kafka_pki(tmp_path / "pki")


def _mtls_cluster(factory: ClusterFactory, pki: KafkaPki, **properties: str) -> KafkaCluster:
    """3 brokers: PLAINTEXT (tests' admin) and SSL with required client certificates, the
    SSL listener being the inter-broker one (replication and the controller over mTLS)."""
    return factory(
        3,
        {
            "inter.broker.listener.name": "SSL",
            "ssl.client.auth": "required",
            "replica.lag.time.max.ms": "5000",
            **properties,
        },
        metrics=True,
        listeners={"PLAINTEXT": "PLAINTEXT", "SSL": "SSL"},
        broker_properties=lambda broker_id: broker_ssl_properties(pki, broker_id),
    )


def test_mutual_tls_clients_and_inter_broker_replication_with_failover(
    kafka_cluster_factory: ClusterFactory, pki: KafkaPki
) -> None:
    cluster = _mtls_cluster(kafka_cluster_factory, pki)
    create_topic(cluster, "secure", partitions=1, rf=3)
    wait_isr_full(cluster, "secure", 3)  # followers fetch over mutual TLS
    client = pki.client("alice")
    ssl_bootstrap = cluster.bootstrap_servers_for("SSL")
    produce_and_consume_kafka_python(
        ssl_bootstrap, "secure", 50, {"security_protocol": "SSL", **kafka_python_tls(pki, client)}
    )
    produce_and_consume_confluent(
        ssl_bootstrap, "secure", 50, {"security.protocol": "SSL", **confluent_tls(pki, client)}
    )
    # The leader dies: the controller elects another over mutual TLS, clients follow.
    leader = leaders(cluster, "secure")[0]
    cluster.brokers[leader].kill()
    wait_for(
        lambda: leaders(cluster, "secure").get(0, leader) != leader, 60, "a new leader of secure-0"
    )
    produce_and_consume_kafka_python(
        cluster.bootstrap_servers_for("SSL"),
        "secure",
        20,
        {"security_protocol": "SSL", **kafka_python_tls(pki, client)},
        prefix="after-failover",
    )
    cluster.brokers[leader].start()
    wait_isr_full(cluster, "secure", 3)
    successes, _ = authentication_counts(cluster, leaders(cluster, "secure")[0], "SSL")
    assert successes > 0


def test_required_client_auth_refuses_a_client_without_certificate(
    kafka_cluster_factory: ClusterFactory, pki: KafkaPki
) -> None:
    cluster = _mtls_cluster(kafka_cluster_factory, pki)
    broker = cluster.brokers[0]
    _, failed_before = authentication_counts(cluster, 0, "SSL")
    errors = confluent_errors(
        broker.bootstrap_for("SSL"), {"security.protocol": "SSL", **confluent_tls(pki, None)}, 8
    )
    assert errors, "a client without a certificate must be refused"
    # Python's TLS client: the broker aborts the handshake or the first read.
    raw = RawConnection(LOOPBACK, broker.ports["SSL"], client_tls_context(pki))
    assert raw.closed_by_broker()
    wait_for(
        lambda: authentication_counts(cluster, 0, "SSL")[1] > failed_before,
        10,
        "failed-authentication-total to grow",
    )


def test_principal_mapping_rules_and_requested_client_auth(
    kafka_cluster_factory: ClusterFactory, pki: KafkaPki
) -> None:
    # "requested": clients with and without certificates are served.
    cluster = kafka_cluster_factory(
        1,
        {
            "ssl.client.auth": "requested",
            "ssl.principal.mapping.rules": "RULE:^CN=([a-z]+).*$/$1/U,DEFAULT",
            "ssl.enabled.protocols": "TLSv1.3",
        },
        metrics=True,
        listeners={"PLAINTEXT": "PLAINTEXT", "SSL": "SSL"},
        broker_properties=lambda broker_id: broker_ssl_properties(pki, broker_id),
    )
    create_topic(cluster, "requested", partitions=1, rf=1)
    bootstrap = cluster.bootstrap_servers_for("SSL")
    produce_and_consume_kafka_python(
        bootstrap, "requested", 5, {"security_protocol": "SSL", **kafka_python_tls(pki, None)}
    )
    produce_and_consume_kafka_python(
        bootstrap,
        "requested",
        5,
        {"security_protocol": "SSL", **kafka_python_tls(pki, pki.client("bob"))},
        prefix="with-cert",
    )
    # ssl.enabled.protocols=TLSv1.3: a TLS 1.2-only client is refused.
    context = client_tls_context(pki)
    context.maximum_version = ssl.TLSVersion.TLSv1_2
    with pytest.raises((ssl.SSLError, ConnectionError)):
        RawConnection(LOOPBACK, cluster.brokers[0].ports["SSL"], context)
    log = cluster.brokers[0].workdir / "broker.log"
    # the broker logs the failure after the client has seen it
    wait_for(lambda: "TLS handshake failed" in log.read_text(), 10, "the handshake failure logged")


def test_handshake_flood_garbage_and_half_open_connections_do_not_stall_the_broker(
    kafka_cluster_factory: ClusterFactory, pki: KafkaPki
) -> None:
    cluster = _mtls_cluster(kafka_cluster_factory, pki, **{"connections.max.idle.ms": "3000"})
    broker = cluster.brokers[0]
    port = broker.ports["SSL"]
    create_topic(cluster, "flood", partitions=1, rf=3)
    _, failed_before = authentication_counts(cluster, 0, "SSL")
    # Half-open: TCP connected, no ClientHello ever sent.
    half_open = [socket.create_connection((LOOPBACK, port), timeout=10) for _ in range(20)]
    # Garbage instead of a ClientHello, and a flood of aborted handshakes.
    for _ in range(50):
        with socket.create_connection((LOOPBACK, port), timeout=10) as sock:
            sock.sendall(b"\x16\x03\x01\x00\x05garbage-not-tls" * 3)
    for _ in range(30):
        with socket.create_connection((LOOPBACK, port), timeout=10) as sock:
            sock.sendall(b"\x16\x03\x01")  # a truncated record, then gone
    started = time.monotonic()
    produce_and_consume_kafka_python(
        cluster.bootstrap_servers_for("SSL"),
        "flood",
        10,
        {"security_protocol": "SSL", **kafka_python_tls(pki, pki.client("carol"))},
    )
    assert time.monotonic() - started < 30
    for sock in half_open:  # closed by the broker after connections.max.idle.ms
        sock.settimeout(15)
        with contextlib.suppress(ConnectionError):
            assert sock.recv(1) == b""
        sock.close()
    wait_for(
        lambda: authentication_counts(cluster, 0, "SSL")[1] >= failed_before + 100,
        30,
        "every bad connection counted as a failed authentication",
    )
    assert broker.is_running()
    assert len(describe(cluster, "flood")[0]["isr_nodes"]) == 3
