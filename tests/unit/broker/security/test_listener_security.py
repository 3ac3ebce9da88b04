"""Listener security resolution: Kafka's prefixes, defaults and refusals (pure config logic)."""

from __future__ import annotations

import pytest

from kpo_broker.config import BrokerConfig, ConfigError
from kpo_broker.security.config import inter_broker_client_security, resolve_listener_security
from kpo_kafka.security import SecurityProtocol

SCRAM = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    'username="admin" password="admin-secret";'
)
PLAIN = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="pw" user_admin="pw" user_alice="alice-pw";'
)


def _config(**properties: str) -> BrokerConfig:
    base = {"zookeeper.connect": "localhost:2181", "broker.id": "0"}
    return BrokerConfig.from_properties(base | properties)


def test_plaintext_needs_nothing() -> None:
    security = resolve_listener_security(_config())
    assert security["PLAINTEXT"].protocol is SecurityProtocol.PLAINTEXT
    assert inter_broker_client_security(_config(), security).protocol is SecurityProtocol.PLAINTEXT


def test_listener_prefix_overrides_the_plain_property() -> None:
    config = _config(
        **{
            "listeners": "PLAINTEXT://:9092,INTERNAL://:9093,EXTERNAL://:9094",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SSL,EXTERNAL:SASL_SSL",
            "inter.broker.listener.name": "INTERNAL",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": "/keys/broker.pem",
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": "/keys/ca.pem",
            "ssl.client.auth": "required",
            "listener.name.external.ssl.keystore.location": "/keys/external.pem",
            "listener.name.external.sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN",
            "listener.name.external.scram-sha-512.sasl.jaas.config": SCRAM,
            "listener.name.external.plain.sasl.jaas.config": PLAIN,
        }
    )
    security = resolve_listener_security(config)
    internal, external = security["INTERNAL"], security["EXTERNAL"]
    assert internal.ssl is not None and external.ssl is not None
    assert internal.ssl.keystore_location == "/keys/broker.pem"
    assert external.ssl.keystore_location == "/keys/external.pem"
    assert internal.ssl.client_auth == "required"
    assert external.ssl.client_auth == "none"  # SASL_SSL: only a listener-prefixed value (KIP-684)
    assert external.sasl is not None
    assert external.sasl.enabled_mechanisms == ("SCRAM-SHA-512", "PLAIN")
    assert external.sasl.plain_users == {"admin": "pw", "alice": "alice-pw"}
    client = inter_broker_client_security(config, security)
    assert client.protocol is SecurityProtocol.SSL and client.sasl_mechanism is None
    assert "admin-secret" not in repr(client)


def test_inter_broker_sasl_takes_the_jaas_credentials() -> None:
    config = _config(
        **{
            "listeners": "SASL_SSL://:9093",
            "security.inter.broker.protocol": "SASL_SSL",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": "/keys/broker.pem",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": SCRAM,
        }
    )
    client = inter_broker_client_security(config, resolve_listener_security(config))
    assert (client.sasl_mechanism, client.username, client.password) == (
        "SCRAM-SHA-512",
        "admin",
        "admin-secret",
    )


_SASL = {"listeners": "PLAINTEXT://:9092,SASL_PLAINTEXT://:9093"}
_PLAIN_ON = _SASL | {"sasl.enabled.mechanisms": "PLAIN"}
_JAAS = "listener.name.sasl_plaintext.plain.sasl.jaas.config"
_TLS = {"listeners": "PLAINTEXT://:9092,SSL://:9093"}
_PEM = _TLS | {"ssl.keystore.type": "PEM", "ssl.keystore.location": "/k"}
_ONLY_SASL = {"listeners": "SASL_PLAINTEXT://:9092"}


@pytest.mark.parametrize(
    ("properties", "named"),
    [
        (
            _ONLY_SASL | {"security.inter.broker.protocol": "SASL_PLAINTEXT"},
            "sasl.enabled.mechanisms",
        ),
        (_SASL | {"sasl.enabled.mechanisms": "GSSAPI"}, "sasl.enabled.mechanisms"),
        (_PLAIN_ON, _JAAS),
        (_PLAIN_ON | {_JAAS: SCRAM}, _JAAS),
        (_PLAIN_ON | {_JAAS: "not jaas"}, _JAAS),
        (_TLS, "ssl.keystore.location"),
        (_TLS | {"ssl.keystore.location": "/k.jks"}, "ssl.keystore.type"),
        (_PEM | {"ssl.enabled.protocols": "TLSv1.1"}, "ssl.enabled.protocols"),
        (_PEM | {"listener.name.ssl.ssl.client.auth": "x"}, "listener.name.ssl.ssl.client.auth"),
        (_PEM | {"ssl.principal.mapping.rules": "RULE:(/x/"}, "ssl.principal.mapping.rules"),
        (
            {"inter.broker.listener.name": "PLAINTEXT", "security.inter.broker.protocol": "SSL"},
            "inter.broker.listener.name",
        ),
        ({"ssl.engine.factory.class": "com.example.Factory"}, "ssl.engine.factory.class"),
        ({"connections.max.reauth.ms": "3600000"}, "connections.max.reauth.ms"),
    ],
)
def test_what_cannot_be_applied_is_refused_naming_the_property(
    properties: dict[str, str], named: str
) -> None:
    with pytest.raises(ConfigError) as info:
        config = _config(**properties)
        inter_broker_client_security(config, resolve_listener_security(config))
    assert info.value.property_name == named
    assert "admin-secret" not in str(info.value)


def test_inter_broker_mechanism_must_be_enabled_and_have_credentials() -> None:
    base = {
        "listeners": "SASL_PLAINTEXT://:9092",
        "security.inter.broker.protocol": "SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN,
    }
    config = _config(**base)
    with pytest.raises(ConfigError) as info:  # default GSSAPI is not enabled
        inter_broker_client_security(config, resolve_listener_security(config))
    assert info.value.property_name == "sasl.mechanism.inter.broker.protocol"
    no_credentials = _config(
        **{
            **base,
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": (
                'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="b";'
            ),
        },
    )
    with pytest.raises(ConfigError, match="username and password"):
        inter_broker_client_security(no_credentials, resolve_listener_security(no_credentials))
