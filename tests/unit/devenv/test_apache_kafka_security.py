"""The secured Apache Kafka's broker and client properties (Kafka's names), without Kafka."""

from __future__ import annotations

from pathlib import Path

from kpo_devenv.apache_kafka import (
    KafkaSecurity,
    client_properties,
    write_properties,
)
from kpo_devenv.pki import generate_kafka_pki
from kpo_kafka.client_config import client_security_from_env


def test_two_listeners_replicate_over_mutual_tls(tmp_path: Path) -> None:
    pki = generate_kafka_pki(tmp_path / "pki")
    security = KafkaSecurity(pki, ("SASL_SSL", "SSL"), True, {"admin": "pw"}, ("User:admin",))
    props = security.broker_properties(1, {"SASL_SSL": 9093, "SSL": 9094}, tmp_path / "ks.pem", 2)
    assert props["listeners"] == "SASL_SSL://127.0.0.1:9093,SSL://127.0.0.1:9094"
    assert props["inter.broker.listener.name"] == "SSL"
    assert props["listener.name.ssl.ssl.client.auth"] == "required"
    assert props["ssl.keystore.type"] == props["ssl.truststore.type"] == "PEM"
    assert props["authorizer.class.name"] == "kafka.security.authorizer.AclAuthorizer"
    assert props["super.users"].split(";") == [
        "User:CN=broker-0,O=kpo",
        "User:CN=broker-1,O=kpo",
        "User:broker",
        "User:admin",
    ]
    assert security.users() == {"admin": "pw"}  # brokers authenticate with certificates


def test_sasl_only_brokers_use_a_scram_user(tmp_path: Path) -> None:
    pki = generate_kafka_pki(tmp_path / "pki")
    security = KafkaSecurity(pki, ("SASL_SSL",), scram_users={"op": "op-pw"})
    props = security.broker_properties(0, {"SASL_SSL": 9093}, tmp_path / "ks.pem", 1)
    assert props["inter.broker.listener.name"] == "SASL_SSL"
    jaas = props["listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config"]
    assert 'username="broker"' in jaas and jaas.endswith(";")
    assert set(security.users()) == {"op", "broker"}


def test_client_properties_are_read_back_by_the_operator(tmp_path: Path) -> None:
    pki = generate_kafka_pki(tmp_path / "pki")
    security = KafkaSecurity(pki, ("SASL_SSL", "SSL"), scram_users={"op": 'p"w\\d'})
    scram = write_properties(
        tmp_path / "scram.properties", client_properties(security, "SASL_SSL", user="op")
    )
    read = client_security_from_env({}, scram)
    assert read.username == "op" and read.password is not None
    assert read.password.reveal() == 'p"w\\d'
    mtls = write_properties(
        tmp_path / "mtls.properties",
        client_properties(security, "SSL", certificate=pki.client("op")),
    )
    assert client_security_from_env({}, mtls).certificate_chain is not None


def test_a_plaintext_listener_without_authorizer_for_the_benchmark(tmp_path: Path) -> None:
    pki = generate_kafka_pki(tmp_path / "pki")
    security = KafkaSecurity(
        pki, ("PLAINTEXT", "SASL_SSL"), scram_users={"b": "pw"}, authorization=False
    )
    props = security.broker_properties(0, {"PLAINTEXT": 9092, "SASL_SSL": 9093}, tmp_path / "k", 3)
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:9092,SASL_SSL://127.0.0.1:9093"
    assert props["inter.broker.listener.name"] == "PLAINTEXT"
    assert "authorizer.class.name" not in props and "super.users" not in props
    assert "username" not in props["listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config"]
    assert security.users() == {"b": "pw"}
