"""SASL listeners on real brokers: PLAIN, SCRAM over TLS, inter-broker SCRAM, refusals."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from kafka.net.sasl.scram import ScramClient
from kafka.protocol.admin.users import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from kazoo.client import KazooClient
from kazoo.security import OPEN_ACL_UNSAFE, make_digest_acl

from kpo_broker.security.scram import (
    MECHANISMS,
    credential_to_string,
    generate_credential,
    salted_password,
)
from kpo_broker.zk.data import (
    ConfigChange,
    encode_config_change_notification,
    encode_entity_config,
)
from kpo_devenv import ZooKeeperServer
from kpo_devenv.kafka_cluster import BrokerProcess, KafkaCluster
from kpo_devenv.kafka_security import add_scram_user, broker_ssl_properties
from kpo_devenv.net import LOOPBACK
from kpo_devenv.pki import KafkaPki, generate_kafka_pki
from kpo_devenv.process import ProcessStartError
from tests.integration.broker.conftest import ClusterFactory, wait_cluster_ready, wait_for
from tests.integration.broker.server.helpers import create_topic
from tests.integration.broker.server.security_helpers import (
    PLAIN_JAAS,
    SCRAM_JAAS,
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

SCRAM_FAILURE = (
    "Authentication failed during authentication due to invalid credentials with SASL "
    "mechanism SCRAM-SHA-512"
)


@pytest.fixture
def pki(tmp_path: Path) -> KafkaPki:
    return generate_kafka_pki(tmp_path / "pki")


def _scram_cluster(
    factory: ClusterFactory, zookeeper: ZooKeeperServer, pki: KafkaPki, size: int = 2
) -> KafkaCluster:
    """Brokers whose SASL_SSL listener (SCRAM-SHA-512) is also the inter-broker one.

    The inter-broker user ``admin`` is created in ZooKeeper before the brokers start, as
    with Kafka (``kafka-configs --zookeeper``); ``alice`` too.
    """
    chroot = f"kafka-{uuid.uuid4().hex[:8]}"
    connect = f"{zookeeper.connect_string}/{chroot}"
    add_scram_user(connect, "admin", "admin-secret")
    add_scram_user(connect, "alice", "alice-secret", ("SCRAM-SHA-256", "SCRAM-SHA-512"))
    return factory(
        size,
        {
            "inter.broker.listener.name": "SASL_SSL",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": SCRAM_JAAS.format(
                u="admin", p="admin-secret"
            ),
            "replica.lag.time.max.ms": "5000",
        },
        metrics=True,
        listeners={"PLAINTEXT": "PLAINTEXT", "SASL_SSL": "SASL_SSL"},
        broker_properties=lambda broker_id: broker_ssl_properties(pki, broker_id),
        chroot=chroot,
    )


def _scram(pki: KafkaPki, user: str, password: str) -> dict[str, Any]:
    return {
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": user,
        "sasl_plain_password": password,
        **kafka_python_tls(pki, None),
    }


def _confluent_scram(pki: KafkaPki, user: str, password: str) -> dict[str, Any]:
    return {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": user,
        "sasl.password": password,
        **confluent_tls(pki, None),
    }


def _handshake(raw: RawConnection, mechanism: str) -> Any:
    raw.send(SaslHandshakeRequest(mechanism=mechanism), 1)
    return raw.receive(SaslHandshakeResponse, 1)


def _authenticate(raw: RawConnection, token: bytes, version: int = 2) -> Any:
    raw.send(SaslAuthenticateRequest(auth_bytes=token), version)
    return raw.receive(SaslAuthenticateResponse, version)


def test_scram_sha_512_over_tls_with_inter_broker_scram_and_restart(
    kafka_cluster_factory: ClusterFactory, zookeeper: ZooKeeperServer, pki: KafkaPki
) -> None:
    cluster = _scram_cluster(kafka_cluster_factory, zookeeper, pki)
    create_topic(cluster, "scram", partitions=1, rf=2)
    wait_isr_full(cluster, "scram", 2)  # the follower authenticates as admin over SASL_SSL
    bootstrap = cluster.bootstrap_servers_for("SASL_SSL")
    produce_and_consume_kafka_python(bootstrap, "scram", 30, _scram(pki, "alice", "alice-secret"))
    produce_and_consume_confluent(
        bootstrap, "scram", 30, _confluent_scram(pki, "alice", "alice-secret")
    )
    # A broker restart keeps the users: they live in ZooKeeper.
    cluster.brokers[0].stop()
    cluster.brokers[0].start()
    wait_cluster_ready(cluster)
    wait_isr_full(cluster, "scram", 2)
    produce_and_consume_kafka_python(
        cluster.bootstrap_servers_for("SASL_SSL"),
        "scram",
        10,
        _scram(pki, "alice", "alice-secret"),
        prefix="after-restart",
    )


def test_wrong_password_and_unknown_user_are_refused_and_served_nothing(
    kafka_cluster_factory: ClusterFactory, zookeeper: ZooKeeperServer, pki: KafkaPki
) -> None:
    cluster = _scram_cluster(kafka_cluster_factory, zookeeper, pki, size=1)
    port = cluster.brokers[0].ports["SASL_SSL"]
    _, failed_before = authentication_counts(cluster, 0, "SASL_SSL")
    for user, password in (("alice", "wrong"), ("mallory", "anything")):
        raw = RawConnection(LOOPBACK, port, client_tls_context(pki))
        raw.send(ApiVersionsRequest(), 0)
        versions = raw.receive(ApiVersionsResponse, 0)
        assert {k.api_key for k in versions.api_keys} >= {17, 36, 50, 51}
        assert _handshake(raw, "SCRAM-SHA-512").error_code == 0
        client = ScramClient(user, password, "SCRAM-SHA-512")
        first = _authenticate(raw, client.first_message())
        if user == "alice":
            assert first.error_code == 0
            client.process_server_first_message(first.auth_bytes)
            final = _authenticate(raw, client.final_message())
        else:
            final = first
        assert final.error_code == 58  # SASL_AUTHENTICATION_FAILED
        assert final.error_message == SCRAM_FAILURE
        raw.send(MetadataRequest(topics=None), 1)  # nothing is served after that
        assert raw.read_frame() is None
        raw.close()
    errors = confluent_errors(
        cluster.bootstrap_servers_for("SASL_SSL"), _confluent_scram(pki, "alice", "nope")
    )
    assert any(SCRAM_FAILURE in e for e in errors), errors
    wait_for(
        lambda: authentication_counts(cluster, 0, "SASL_SSL")[1] >= failed_before + 3,
        10,
        "failed authentications counted",
    )
    log = (cluster.brokers[0].workdir / "broker.log").read_text()
    assert "failed authentication" in log
    assert "wrong" not in log and "anything" not in log and "nope" not in log


def test_requests_before_authentication_and_garbage_tokens_close_the_connection(
    kafka_cluster_factory: ClusterFactory, zookeeper: ZooKeeperServer, pki: KafkaPki
) -> None:
    cluster = _scram_cluster(kafka_cluster_factory, zookeeper, pki, size=1)
    port = cluster.brokers[0].ports["SASL_SSL"]
    context = client_tls_context(pki)
    # A Kafka request before SaslHandshake: disconnected (ILLEGAL_SASL_STATE), no answer.
    raw = RawConnection(LOOPBACK, port, context)
    raw.send(MetadataRequest(topics=None), 1)
    assert raw.read_frame() is None
    # After the handshake, anything but SaslAuthenticate: disconnected.
    raw = RawConnection(LOOPBACK, port, context)
    assert _handshake(raw, "SCRAM-SHA-512").error_code == 0
    raw.send(MetadataRequest(topics=None), 1)
    assert raw.read_frame() is None
    # A mechanism the listener does not enable: UNSUPPORTED_SASL_MECHANISM, then closed.
    raw = RawConnection(LOOPBACK, port, context)
    refused = _handshake(raw, "PLAIN")
    assert refused.error_code == 33 and refused.mechanisms == ["SCRAM-SHA-512"]
    assert raw.read_frame() is None
    # Garbage SCRAM tokens: SASL_AUTHENTICATION_FAILED, then closed.
    for tokens in ([b""], [b"\xff\x00garbage"], [b"n,,n=alice,r=abc", b"c=biws,r=x,p=AAAA"]):
        raw = RawConnection(LOOPBACK, port, context)
        assert _handshake(raw, "SCRAM-SHA-512").error_code == 0
        answers = [_authenticate(raw, token, version=0) for token in tokens]
        assert [a.error_code for a in answers] == [0] * (len(tokens) - 1) + [58]
        assert raw.read_frame() is None
    # Garbage frames: an oversized one, a truncated header.
    raw = RawConnection(LOOPBACK, port, context)
    raw.sock.sendall(b"\x7f\xff\xff\xff")
    assert raw.closed_by_broker()
    raw = RawConnection(LOOPBACK, port, context)
    raw.sock.sendall(b"\x00\x00\x00\x01\x00")
    assert raw.closed_by_broker()
    # The broker still serves authenticated clients.
    create_topic(cluster, "after-garbage", partitions=1, rf=1)
    produce_and_consume_kafka_python(
        cluster.bootstrap_servers_for("SASL_SSL"),
        "after-garbage",
        5,
        _scram(pki, "alice", "alice-secret"),
    )


def test_user_scram_credentials_api_alters_and_describes(
    kafka_cluster_factory: ClusterFactory, zookeeper: ZooKeeperServer, pki: KafkaPki
) -> None:
    cluster = _scram_cluster(kafka_cluster_factory, zookeeper, pki, size=2)
    controller = next(b for b in cluster.brokers.values() if _is_controller(cluster, b.broker_id))
    other = next(b for b in cluster.brokers.values() if b is not controller)
    salt = b"salt-of-bob"
    mechanism = MECHANISMS["SCRAM-SHA-512"]
    upsert = AlterUserScramCredentialsRequest.ScramCredentialUpsertion(
        name="bob",
        mechanism=2,
        iterations=8192,
        salt=salt,
        salted_password=salted_password(mechanism, "bob-secret", salt, 8192),
    )
    bad = [
        AlterUserScramCredentialsRequest.ScramCredentialUpsertion(
            name="few", mechanism=2, iterations=10, salt=b"s", salted_password=b"p"
        ),
        AlterUserScramCredentialsRequest.ScramCredentialUpsertion(
            name="odd", mechanism=9, iterations=4096, salt=b"s", salted_password=b"p"
        ),
    ]
    request = AlterUserScramCredentialsRequest(
        deletions=[
            AlterUserScramCredentialsRequest.ScramCredentialDeletion(name="ghost", mechanism=1)
        ],
        upsertions=[upsert, *bad],
    )
    # Not the controller: NOT_CONTROLLER, as in Kafka's ZooKeeper mode.
    raw = RawConnection(LOOPBACK, other.port)
    raw.send(request, 0)
    assert {r.error_code for r in raw.receive(AlterUserScramCredentialsResponse, 0).results} == {41}
    raw = RawConnection(LOOPBACK, controller.port)
    raw.send(request, 0)
    results = {
        r.user: (r.error_code, r.error_message)
        for r in raw.receive(AlterUserScramCredentialsResponse, 0).results
    }
    assert results == {
        "bob": (0, None),
        "few": (93, "Too few iterations"),
        "odd": (33, "Unknown SCRAM mechanism"),
        "ghost": (91, "Attempt to delete a user credential that does not exist"),
    }
    raw.send(DescribeUserScramCredentialsRequest(users=None), 0)
    described = raw.receive(DescribeUserScramCredentialsResponse, 0)
    by_user = {
        r.user: sorted((c.mechanism, c.iterations) for c in r.credential_infos)
        for r in described.results
    }
    assert by_user == {"admin": [(2, 4096)], "alice": [(1, 4096), (2, 4096)], "bob": [(2, 8192)]}
    raw.send(
        DescribeUserScramCredentialsRequest(
            users=[DescribeUserScramCredentialsRequest.UserName(name="nobody")]
        ),
        0,
    )
    missing = raw.receive(DescribeUserScramCredentialsResponse, 0).results[0]
    assert missing.error_code == 91
    # Every broker learns of bob through /config/changes and lets him in.
    for broker in cluster.brokers.values():
        wait_for(
            lambda b=broker: _authenticates(pki, b, "bob", "bob-secret"),  # type: ignore[misc]
            30,
            f"bob authenticated by broker {broker.broker_id}",
        )


def test_a_user_change_whose_read_failed_is_applied_once_zookeeper_answers(
    kafka_cluster_factory: ClusterFactory, zookeeper: ZooKeeperServer, pki: KafkaPki
) -> None:
    """A failed config-change pass is retried without waiting for another notification.

    ``carol``'s config znode is written, with its ``/config/changes`` notification (after a
    malformed one), under an ACL the broker may not read (NoAuth, standing in for any
    failed ZooKeeper read). Once the ACL opens, the broker must let carol in although
    nothing else changes.
    """
    cluster = _scram_cluster(kafka_cluster_factory, zookeeper, pki, size=1)
    (broker,) = cluster.brokers.values()
    credential = generate_credential(MECHANISMS["SCRAM-SHA-512"], "carol-secret", 4096)
    owner = KazooClient(
        hosts=cluster.zookeeper_connect, auth_data=[("digest", "intruder:pw")], timeout=10
    )
    owner.start(timeout=15)
    try:
        owner.create(
            "/config/users/carol",
            encode_entity_config({"SCRAM-SHA-512": credential_to_string(credential)}),
            acl=[make_digest_acl("intruder", "pw", all=True)],
        )
        # A malformed notification before carol's is skipped, not blocking hers.
        owner.create("/config/changes/config_change_", b"not json", sequence=True)
        owner.create(
            "/config/changes/config_change_",
            encode_config_change_notification(ConfigChange("users", "carol")),
            sequence=True,
        )
        wait_for(
            lambda: "change notifications: pass failed" in broker.process.log_tail(2000),
            30,
            "the broker failing to read carol's config",
        )
        assert not _authenticates(pki, broker, "carol", "carol-secret")
        owner.set_acls("/config/users/carol", OPEN_ACL_UNSAFE)
    finally:
        owner.stop()
        owner.close()
    wait_for(
        lambda: _authenticates(pki, broker, "carol", "carol-secret"),
        30,
        "carol authenticated once her config is readable",
    )


def _is_controller(cluster: KafkaCluster, broker_id: int) -> bool:
    from tests.integration.broker.conftest import admin_client

    admin = admin_client(cluster)
    try:
        return bool(admin.describe_cluster()["controller_id"] == broker_id)
    finally:
        admin.close()


def _authenticates(pki: KafkaPki, broker: BrokerProcess, user: str, password: str) -> bool:
    raw = RawConnection(LOOPBACK, broker.ports["SASL_SSL"], client_tls_context(pki))
    try:
        if _handshake(raw, "SCRAM-SHA-512").error_code:
            return False
        client = ScramClient(user, password, "SCRAM-SHA-512")
        first = _authenticate(raw, client.first_message())
        if first.error_code:
            return False
        client.process_server_first_message(first.auth_bytes)
        final = _authenticate(raw, client.final_message())
        if final.error_code:
            return False
        client.process_server_final_message(final.auth_bytes)
        return True
    finally:
        raw.close()


def test_plain_over_sasl_plaintext(kafka_cluster_factory: ClusterFactory) -> None:
    cluster = kafka_cluster_factory(
        1,
        {
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS.format(
                options='user_alice="alice-pw" user_bob="bob-pw"'
            ),
        },
        metrics=True,
        listeners={"PLAINTEXT": "PLAINTEXT", "SASL_PLAINTEXT": "SASL_PLAINTEXT"},
    )
    create_topic(cluster, "plain", partitions=1, rf=1)
    bootstrap = cluster.bootstrap_servers_for("SASL_PLAINTEXT")
    plain = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN"}
    produce_and_consume_kafka_python(
        bootstrap,
        "plain",
        20,
        {**plain, "sasl_plain_username": "alice", "sasl_plain_password": "alice-pw"},
    )
    produce_and_consume_confluent(
        bootstrap,
        "plain",
        20,
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "bob",
            "sasl.password": "bob-pw",
        },
    )
    errors = confluent_errors(
        bootstrap,
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "alice",
            "sasl.password": "wrong",
        },
    )
    assert any("Invalid username or password" in e for e in errors), errors
    # SaslHandshake v0: raw tokens without Kafka headers (kafka-python's legacy path).
    raw = RawConnection(LOOPBACK, cluster.brokers[0].ports["SASL_PLAINTEXT"])
    raw.send(SaslHandshakeRequest(mechanism="PLAIN"), 0)
    assert raw.receive(SaslHandshakeResponse, 0).error_code == 0
    token = b"\x00alice\x00alice-pw"
    raw.sock.sendall(len(token).to_bytes(4, "big") + token)
    assert raw.read_frame() == b""
    raw.send(ApiVersionsRequest(), 0)  # authenticated: served
    assert raw.receive(ApiVersionsResponse, 0).error_code == 0
    raw.send(SaslAuthenticateRequest(auth_bytes=b""), 1)  # after authentication: refused
    assert raw.receive(SaslAuthenticateResponse, 1).error_code == 34  # ILLEGAL_SASL_STATE
    raw.close()
    # On a PLAINTEXT listener Kafka answers SaslHandshake with ILLEGAL_SASL_STATE.
    raw = RawConnection(LOOPBACK, cluster.brokers[0].port)
    assert _handshake(raw, "PLAIN").error_code == 34
    raw.close()
    successes, failures = authentication_counts(cluster, 0, "SASL_PLAINTEXT")
    assert successes >= 3 and failures >= 1


@pytest.mark.parametrize(
    ("listeners", "properties", "named"),
    [
        (
            {"PLAINTEXT": "PLAINTEXT", "CLIENT": "SASL_PLAINTEXT"},
            {},
            "sasl.enabled.mechanisms",  # Kafka's default GSSAPI is not supported
        ),
        (
            {"PLAINTEXT": "PLAINTEXT", "CLIENT": "SASL_PLAINTEXT"},
            {"sasl.enabled.mechanisms": "OAUTHBEARER"},
            "sasl.enabled.mechanisms",
        ),
        (
            {"PLAINTEXT": "PLAINTEXT", "CLIENT": "SASL_PLAINTEXT"},
            {"sasl.enabled.mechanisms": "PLAIN"},
            "listener.name.client.plain.sasl.jaas.config",
        ),
        (
            {"PLAINTEXT": "PLAINTEXT", "TLS": "SSL"},
            {"ssl.keystore.location": "/nonexistent.jks"},
            "ssl.keystore.type",  # JKS (Kafka's default store type) is not supported
        ),
        (
            {"PLAINTEXT": "PLAINTEXT", "TLS": "SSL"},
            {},
            "ssl.keystore.location",  # no keystore at all
        ),
    ],
)
def test_listener_that_cannot_be_secured_refuses_to_start(
    zookeeper: ZooKeeperServer,
    tmp_path: Path,
    listeners: dict[str, str],
    properties: dict[str, str],
    named: str,
) -> None:
    broker = BrokerProcess(
        0,
        tmp_path / "broker",
        f"{zookeeper.connect_string}/refuse-{uuid.uuid4().hex[:8]}",
        properties,
        listeners=listeners,
    )
    with pytest.raises(ProcessStartError):
        broker.start(timeout_s=30)
    broker.stop()
    log = (tmp_path / "broker" / "broker.log").read_text()
    assert f"invalid configuration: {named}" in log, log[-2000:]
