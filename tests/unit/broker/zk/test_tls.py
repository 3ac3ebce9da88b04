"""TLS to ZooKeeper (KIP-515): Kafka's zookeeper.ssl.* properties, their system-property
fallbacks, what is refused, and the context they build."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization

from kpo_broker.config import ConfigError
from kpo_broker.zk.security import resolve_zk_client_security
from kpo_broker.zk.tls import NETTY_CLIENT_CNXN_SOCKET, resolve_zk_client_tls
from kpo_devenv.kafka_security import pem_keystore
from kpo_devenv.pki import KafkaPki, generate_kafka_pki

_ON = {
    "zookeeper.ssl.client.enable": "true",
    "zookeeper.clientCnxnSocket": NETTY_CLIENT_CNXN_SOCKET,
}


@pytest.fixture
def pki(tmp_path: Path) -> KafkaPki:
    return generate_kafka_pki(tmp_path / "pki")


def _stores(pki: KafkaPki) -> dict[str, str]:
    return _ON | {
        "zookeeper.ssl.keystore.location": str(pem_keystore(pki.broker(0))),
        "zookeeper.ssl.truststore.location": str(pki.ca.cert),
        "zookeeper.ssl.truststore.type": "PEM",
    }


def test_off_by_default_and_then_every_other_setting_is_ignored_as_in_kafka() -> None:
    assert resolve_zk_client_tls({}, {}) is None
    ignored = {"zookeeper.ssl.keystore.location": "/x.jks", "zookeeper.ssl.crl.enable": "true"}
    assert resolve_zk_client_tls(ignored | {"zookeeper.ssl.client.enable": "false"}, {}) is None


def test_kafka_defaults_tls12_and_the_host_name_check() -> None:
    tls = resolve_zk_client_tls(_ON, {})
    assert tls is not None
    assert tls.settings.enabled_protocols == ("TLSv1.2",)
    assert tls.settings.endpoint_identification == "https"
    assert not tls.client_auth
    context = tls.context()
    assert context.check_hostname and context.verify_mode == ssl.CERT_REQUIRED
    assert context.maximum_version == ssl.TLSVersion.TLSv1_2


@pytest.mark.parametrize(
    ("extra", "protocols"),
    [
        ({"zookeeper.ssl.protocol": "TLSv1.3"}, ("TLSv1.3",)),
        ({"zookeeper.ssl.protocol": "TLS"}, ("TLSv1.2", "TLSv1.3")),
        ({"zookeeper.ssl.enabled.protocols": "TLSv1.3, TLSv1.2"}, ("TLSv1.3", "TLSv1.2")),
    ],
)
def test_enabled_protocols_default_to_the_protocol(
    extra: dict[str, str], protocols: tuple[str, ...]
) -> None:
    tls = resolve_zk_client_tls(_ON | extra, {})
    assert tls is not None and tls.settings.enabled_protocols == protocols


def test_system_properties_are_the_fallback_and_broker_properties_win(pki: KafkaPki) -> None:
    system = {
        "zookeeper.client.secure": "true",
        "zookeeper.clientCnxnSocket": NETTY_CLIENT_CNXN_SOCKET,
        "zookeeper.ssl.trustStore.location": str(pki.ca.cert),
        "zookeeper.ssl.trustStore.type": "PEM",
        "zookeeper.ssl.enabledProtocols": "TLSv1.3",
        "zookeeper.ssl.hostnameVerification": "false",
    }
    tls = resolve_zk_client_tls({}, system)
    assert tls is not None
    assert tls.settings.truststore_location == str(pki.ca.cert)
    assert tls.settings.enabled_protocols == ("TLSv1.3",)
    assert tls.settings.endpoint_identification == ""
    assert resolve_zk_client_tls({"zookeeper.ssl.client.enable": "false"}, system) is None
    tls = resolve_zk_client_tls(
        {"zookeeper.ssl.endpoint.identification.algorithm": "HTTPS"}, system
    )
    assert tls is not None and tls.settings.endpoint_identification == "https"


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ({"zookeeper.clientCnxnSocket": ""}, "zookeeper.clientCnxnSocket"),
        (
            {"zookeeper.clientCnxnSocket": "org.apache.zookeeper.ClientCnxnSocketNIO"},
            "zookeeper.clientCnxnSocket",
        ),
        ({"zookeeper.ssl.keystore.location": "/etc/kafka/zk.jks"}, "zookeeper.ssl.keystore.type"),
        (
            {"zookeeper.ssl.keystore.location": "/k.pem", "zookeeper.ssl.keystore.type": "PKCS12"},
            "zookeeper.ssl.keystore.type",
        ),
        ({"zookeeper.ssl.truststore.location": "/ca.crt"}, "zookeeper.ssl.truststore.type"),
        ({"zookeeper.ssl.truststore.location": "/t.p12"}, "zookeeper.ssl.truststore.type"),
        ({"zookeeper.ssl.protocol": "SSLv3"}, "zookeeper.ssl.protocol"),
        ({"zookeeper.ssl.enabled.protocols": "TLSv1.1"}, "zookeeper.ssl.enabled.protocols"),
        (
            {"zookeeper.ssl.endpoint.identification.algorithm": "ldaps"},
            "zookeeper.ssl.endpoint.identification.algorithm",
        ),
        ({"zookeeper.ssl.crl.enable": "true"}, "zookeeper.ssl.crl.enable"),
        ({"zookeeper.ssl.ocsp.enable": "true"}, "zookeeper.ssl.ocsp.enable"),
        ({"zookeeper.ssl.client.enable": "yes"}, "zookeeper.ssl.client.enable"),
    ],
)
def test_what_cannot_be_applied_refuses_start_up(extra: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError) as info:
        resolve_zk_client_tls(_ON | extra, {})
    assert info.value.property_name == named


def test_context_trusts_only_the_truststore_and_presents_the_keystore(pki: KafkaPki) -> None:
    tls = resolve_zk_client_tls(_stores(pki), {})
    assert tls is not None and tls.client_auth
    context = tls.context()
    assert context.cert_store_stats()["x509_ca"] == 1


def test_unreadable_stores_and_a_wrong_password_name_the_zookeeper_property(
    pki: KafkaPki, tmp_path: Path
) -> None:
    pair = pki.broker(1)
    key = serialization.load_pem_private_key(pair.key.read_bytes(), password=None)
    encrypted = tmp_path / "encrypted.pem"
    encrypted.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"store-secret"),
        )
        + pair.cert.read_bytes()
    )
    good = _stores(pki) | {"zookeeper.ssl.keystore.location": str(encrypted)}
    tls = resolve_zk_client_tls(good | {"zookeeper.ssl.keystore.password": "store-secret"}, {})
    assert tls is not None and tls.context() is not None
    cases = [
        (good | {"zookeeper.ssl.keystore.password": "wrong"}, "zookeeper.ssl.keystore.location"),
        (
            good | {"zookeeper.ssl.truststore.location": str(tmp_path / "missing.pem")},
            "zookeeper.ssl.truststore.location",
        ),
    ]
    for properties, named in cases:
        with pytest.raises(ConfigError) as info:
            resolve_zk_client_security(properties, {})
        assert info.value.property_name == named
        assert "store-secret" not in str(info.value)


def test_set_acl_needs_sasl_or_a_tls_client_certificate(pki: KafkaPki) -> None:
    with pytest.raises(ConfigError) as info:
        resolve_zk_client_security(_ON | {"zookeeper.set.acl": "true"}, {})
    assert info.value.property_name == "zookeeper.set.acl"
    assert "zookeeper.ssl.keystore.location" in str(info.value)
    security = resolve_zk_client_security(_stores(pki) | {"zookeeper.set.acl": "true"}, {})
    assert security.set_acl and security.username is None
    assert security.tls is not None and security.tls.client_auth
    assert security.kazoo_handler() is not None
