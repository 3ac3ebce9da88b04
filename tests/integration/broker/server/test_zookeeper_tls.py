"""Brokers talking to ZooKeeper over TLS only (KIP-515), with ZooKeeper's x509 authentication.

Debian's ZooKeeper serves one TLS client port (``secureClientPort`` on the Netty connection
factory, PEM stores, ``ssl.clientAuth=need``, the ``x509`` authentication provider) and no
plaintext port. Three brokers connect with Kafka's ``zookeeper.ssl.*`` properties (broker 2
through the ZooKeeper client's system properties in ``KAFKA_OPTS`` instead, as Kafka
accepts), presenting one client certificate shared by the brokers (Kafka's advice for
``zookeeper.set.acl`` with TLS: the certificate subject is the brokers' ZooKeeper identity)
and checking the server's host name. They register, elect a controller, create a topic,
replicate and serve clients; their znodes carry Kafka's ACLs for the ``x509`` identity. A
controller's crash elects another one over TLS. Apache Kafka 3.9's own broker, given the
same properties, registers over the same server and its znodes carry the same ACLs. A
broker trusting another CA, or presenting a certificate of another CA, does not start and
says why; a plaintext client, or a TLS client without a certificate, gets nothing from the
server.
"""

from __future__ import annotations

import json
import socket
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient
from kazoo.handlers.threading import KazooTimeoutError

from kpo_broker.zk.security import resolve_zk_client_security
from kpo_broker.zk.tls import NETTY_CLIENT_CNXN_SOCKET, SYSTEM_PROPERTY_OF
from kpo_devenv import ZooKeeperServer
from kpo_devenv.apache_kafka import ApacheBroker, KafkaNotInstalledError, kafka_classpath
from kpo_devenv.kafka_cluster import BrokerProcess, KafkaCluster
from kpo_devenv.kafka_security import pem_keystore
from kpo_devenv.pki import KafkaPki, generate_kafka_pki
from kpo_devenv.process import ProcessStartError
from kpo_devenv.tools import pinned_version
from kpo_devenv.zookeeper import ZooKeeperTls
from tests.integration.broker.conftest import wait_cluster_ready, wait_for
from tests.integration.broker.server.helpers import create_topic, describe
from tests.integration.broker.server.security_helpers import produce_and_consume_kafka_python

pytestmark = pytest.mark.integration

CHROOT = "/kafka"
#: The brokers' shared ZooKeeper client certificate subject: their ``x509`` identity.
BROKERS_DN = "CN=kafka-brokers"
OPEN = {(31, "x509", BROKERS_DN), (1, "world", "anyone")}
SENSITIVE = {(31, "x509", BROKERS_DN)}


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> KafkaPki:
    return generate_kafka_pki(tmp_path_factory.mktemp("zk-tls-pki"))


@pytest.fixture(scope="module")
def zk_properties(pki: KafkaPki) -> dict[str, str]:
    """Kafka's ZooKeeper TLS properties of the brokers (host name check on by default)."""
    return {
        "zookeeper.ssl.client.enable": "true",
        "zookeeper.clientCnxnSocket": NETTY_CLIENT_CNXN_SOCKET,
        "zookeeper.ssl.keystore.location": str(
            pem_keystore(pki.client("zk-brokers", "kafka-brokers"))
        ),
        "zookeeper.ssl.keystore.type": "PEM",
        "zookeeper.ssl.truststore.location": str(pki.ca.cert),
        "zookeeper.ssl.truststore.type": "PEM",
        "zookeeper.ssl.enabled.protocols": "TLSv1.2,TLSv1.3",
    }


@pytest.fixture(scope="module")
def tls_zookeeper(
    pki: KafkaPki, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ZooKeeperServer]:
    tls = ZooKeeperTls(pem_keystore(pki.zookeeper()), pki.ca.cert)
    with ZooKeeperServer(tmp_path_factory.mktemp("zk-tls"), tls=tls) as server:
        yield server


@pytest.fixture(scope="module")
def fleet(
    tls_zookeeper: ZooKeeperServer,
    zk_properties: dict[str, str],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[KafkaCluster]:
    # Broker 2 takes the same settings as the ZooKeeper client's JVM system properties.
    opts = " ".join(f"-D{SYSTEM_PROPERTY_OF[k]}={v}" for k, v in zk_properties.items())
    cluster = KafkaCluster(
        tmp_path_factory.mktemp("zk-tls-fleet"),
        f"{tls_zookeeper.connect_string}{CHROOT}",
        3,
        {"zookeeper.set.acl": "true"},
        broker_properties=lambda i: zk_properties if i != 2 else {},
        broker_env=lambda i: {"KAFKA_OPTS": opts} if i == 2 else {},
    )
    cluster.start()
    try:
        wait_cluster_ready(cluster, timeout_s=90)
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def brokers_zk(tls_zookeeper: ZooKeeperServer, zk_properties: dict[str, str]) -> Iterator[Any]:
    """A kazoo client with the brokers' certificate, through the brokers' own TLS handler."""
    security = resolve_zk_client_security(zk_properties, {})
    client = KazooClient(
        hosts=tls_zookeeper.connect_string, timeout=10, handler=security.kazoo_handler()
    )
    client.start(timeout=30)
    yield client
    client.stop()
    client.close()


def _acls(client: Any, path: str) -> set[tuple[int, str, str]]:
    acls, _ = client.get_acls(path)
    return {(acl.perms, acl.id.scheme, acl.id.id) for acl in acls}


def test_fleet_registers_elects_replicates_and_serves_over_zookeeper_tls(
    fleet: KafkaCluster, brokers_zk: Any
) -> None:
    for broker in fleet.brokers.values():
        log = (broker.workdir / "broker.log").read_text()
        assert "ZooKeeper client: TLS (TLSv1.2, TLSv1.3), client certificate, znode ACLs" in log
    assert sorted(brokers_zk.get_children(f"{CHROOT}/brokers/ids")) == ["0", "1", "2"]
    assert brokers_zk.exists(f"{CHROOT}/controller") is not None
    create_topic(fleet, "over-tls", partitions=2, rf=3)
    produce_and_consume_kafka_python(fleet.bootstrap_servers, "over-tls", 50, {})
    for path in ("", "/brokers/ids/0", "/brokers/topics/over-tls", "/controller"):
        assert _acls(brokers_zk, CHROOT + path) == OPEN, path
    assert _acls(brokers_zk, f"{CHROOT}/config/users") == SENSITIVE

    def controller_id() -> int:
        return int(json.loads(brokers_zk.get(f"{CHROOT}/controller")[0])["brokerid"])

    # The controller's crash: another broker wins the election through its TLS session.
    controller = controller_id()
    fleet.brokers[controller].kill()
    wait_for(lambda: controller_id() != controller, 60, "a new controller")
    wait_for(
        lambda: all(p["leader_id"] not in (controller, -1) for p in describe(fleet, "over-tls")),
        60,
        "leaders away from the crashed controller",
    )
    produce_and_consume_kafka_python(fleet.bootstrap_servers, "over-tls", 20, {}, prefix="after")


def test_broker_trusting_another_ca_does_not_start_and_says_why(
    tls_zookeeper: ZooKeeperServer, zk_properties: dict[str, str], tmp_path: Path
) -> None:
    other = generate_kafka_pki(tmp_path / "other-ca")
    properties = zk_properties | {"zookeeper.ssl.truststore.location": str(other.ca.cert)}
    broker = BrokerProcess(
        7, tmp_path / "wrong-ca", f"{tls_zookeeper.connect_string}{CHROOT}", properties
    )
    with pytest.raises(ProcessStartError, match="CERTIFICATE_VERIFY_FAILED"):
        broker.start(timeout_s=60)
    log = (tmp_path / "wrong-ca" / "broker.log").read_text()
    assert "no ZooKeeper session within" in log
    # A client certificate ZooKeeper does not trust: the server's alert, over TLS 1.2
    # (Kafka's default zookeeper.ssl.protocol) during the handshake.
    del properties["zookeeper.ssl.enabled.protocols"]
    properties |= {
        "zookeeper.ssl.truststore.location": zk_properties["zookeeper.ssl.truststore.location"],
        "zookeeper.ssl.keystore.location": str(pem_keystore(other.client("stranger"))),
    }
    broker = BrokerProcess(
        9, tmp_path / "stranger", f"{tls_zookeeper.connect_string}{CHROOT}", properties
    )
    with pytest.raises(
        ProcessStartError, match=r"the last TLS handshake failed: .*ALERT_CERTIFICATE_UNKNOWN"
    ):
        broker.start(timeout_s=60)


def test_apache_kafka_given_the_same_properties_gets_the_same_acls(
    tls_zookeeper: ZooKeeperServer,
    zk_properties: dict[str, str],
    brokers_zk: Any,
    tmp_path: Path,
) -> None:
    try:
        classpath = kafka_classpath(pinned_version("KAFKA_VERSION"))
    except KafkaNotInstalledError as exc:
        pytest.fail(str(exc))
    single = {"offsets.topic.replication.factor": "1", "zookeeper.set.acl": "true"}
    broker = ApacheBroker(
        0,
        tmp_path / "apache",
        f"{tls_zookeeper.connect_string}/apache",
        classpath,
        zk_properties | single,
    )
    broker.start(timeout_s=180)
    try:
        wait_for(lambda: brokers_zk.exists("/apache/controller") is not None, 90, "a controller")
        for path in ("", "/brokers/ids/0", "/controller", "/cluster/id"):
            assert _acls(brokers_zk, "/apache" + path) == OPEN, path
        assert _acls(brokers_zk, "/apache/config/users") == SENSITIVE
    finally:
        broker.stop()


def test_a_keystore_of_another_type_refuses_start_up(
    tls_zookeeper: ZooKeeperServer, zk_properties: dict[str, str], tmp_path: Path
) -> None:
    properties = zk_properties | {"zookeeper.ssl.keystore.type": "JKS"}
    broker = BrokerProcess(
        8, tmp_path / "jks", f"{tls_zookeeper.connect_string}{CHROOT}", properties
    )
    with pytest.raises(ProcessStartError, match=r"zookeeper\.ssl\.keystore\.type.*JKS"):
        broker.start(timeout_s=60)


def test_plaintext_and_certificate_less_clients_get_nothing(
    tls_zookeeper: ZooKeeperServer, pki: KafkaPki
) -> None:
    plain = KazooClient(hosts=tls_zookeeper.connect_string, timeout=4)
    with pytest.raises(KazooTimeoutError):
        plain.start(timeout=8)
    plain.stop()
    plain.close()
    # A four-letter word in the clear is no TLS record: no answer.
    with socket.create_connection(("127.0.0.1", tls_zookeeper.port), timeout=10) as sock:
        sock.sendall(b"ruok")
        try:
            reply = sock.recv(4096)
        except (ConnectionResetError, TimeoutError):
            reply = b""
    assert b"imok" not in reply
    # TLS without a client certificate while the server needs one: the handshake fails.
    context = ssl.create_default_context(cafile=str(pki.ca.cert))
    with (
        socket.create_connection(("127.0.0.1", tls_zookeeper.port), timeout=10) as raw,
        pytest.raises((ssl.SSLError, ConnectionResetError, BrokenPipeError)),
        context.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        tls.sendall(b"ruok")
        if not tls.recv(4096):
            raise ConnectionResetError("closed without an answer")
