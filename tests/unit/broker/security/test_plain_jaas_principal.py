"""PLAIN, JAAS parsing and SSL principal mapping: pure logic, Kafka's messages and rules."""

from __future__ import annotations

import pytest

from kpo_broker.security.errors import SaslAuthenticationError
from kpo_broker.security.jaas import JaasError, parse_jaas_config
from kpo_broker.security.plain import PlainServer
from kpo_broker.security.principal import NoMatchingRuleError, SslPrincipalMapper


def test_plain_accepts_a_configured_user() -> None:
    server = PlainServer({"alice": "pw"})
    assert server.evaluate(b"\x00alice\x00pw") == b""
    assert server.complete and server.authorization_id == "alice"


@pytest.mark.parametrize(
    ("token", "message"),
    [
        (b"\x00alice\x00wrong", "Invalid username or password"),
        (b"\x00bob\x00pw", "Invalid username or password"),
        (b"alice\x00pw", "expected 3 tokens, got 2"),
        (b"a\x00b\x00c\x00d", "expected 3 tokens, got 4"),
        (b"\x00\x00pw", "username not specified"),
        (b"\x00alice\x00", "password not specified"),
        (b"bob\x00alice\x00pw", "authorization id that is different"),
    ],
)
def test_plain_refuses_with_kafka_messages(token: bytes, message: str) -> None:
    server = PlainServer({"alice": "pw"})
    with pytest.raises(SaslAuthenticationError, match=message):
        server.evaluate(token)
    assert not server.complete


def test_jaas_config_with_quoted_and_escaped_values() -> None:
    entries = parse_jaas_config(
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="admin" password="a\\"b;c" user_admin="x" user_alice=plain;'
    )
    assert len(entries) == 1
    assert entries[0].flag == "required"
    assert entries[0].options == {
        "username": "admin",
        "password": 'a"b;c',
        "user_admin": "x",
        "user_alice": "plain",
    }


@pytest.mark.parametrize(
    "value",
    [
        "",
        'org.Module required username="a"',
        "org.Module sometimes;",
        "org.Module required username=;",
        'org.Module required username="unterminated;',
    ],
)
def test_malformed_jaas_config_is_refused_without_quoting_secrets(value: str) -> None:
    with pytest.raises(JaasError) as info:
        parse_jaas_config(value)
    assert "unterminated" not in str(info.value) or "quoted" in str(info.value)


def test_default_rule_keeps_the_dn() -> None:
    assert SslPrincipalMapper("DEFAULT").name("CN=alice,O=kpo") == "CN=alice,O=kpo"


def test_kafka_documented_rules() -> None:
    # The examples of Kafka's documentation (ssl.principal.mapping.rules).
    mapper = SslPrincipalMapper(
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,"
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,"
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,"
        "DEFAULT"
    )
    assert mapper.name("CN=kafka-server1,OU=ServiceUsers,O=org") == "kafka-server1"
    assert mapper.name("CN=Duke,OU=JavaSoft,O=Sun Microsystems,L=x,ST=y,C=US") == "duke@javasoft"
    assert mapper.name("cn=Broker.0,O=kpo") == "broker.0"
    assert mapper.name("O=nocn") == "O=nocn"


def test_upper_case_flag_and_missing_back_reference_kept_literally() -> None:
    assert SslPrincipalMapper("RULE:^CN=(.*)$/$1/U").name("CN=alice") == "ALICE"
    assert SslPrincipalMapper("RULE:^CN=(.*)$/$1-$2/").name("CN=a") == "a-$2"


def test_no_matching_rule_is_an_error() -> None:
    with pytest.raises(NoMatchingRuleError):
        SslPrincipalMapper("RULE:^CN=(.*)$/$1/").name("O=kpo")


@pytest.mark.parametrize("rules", ["RULE:^CN=(.*)$/$1/X", "RULE:([/$1/"])
def test_invalid_rules_are_refused(rules: str) -> None:
    with pytest.raises(ValueError):
        SslPrincipalMapper(rules)
