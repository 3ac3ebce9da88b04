"""SCRAM credentials and the server exchange (RFC 5802/7677), against kafka-python's client."""

from __future__ import annotations

import base64

import pytest
from kafka.net.sasl.scram import ScramClient

from kpo_broker.security.errors import SaslAuthenticationError, SaslError
from kpo_broker.security.scram import (
    MECHANISMS,
    ScramServer,
    credential_from_string,
    credential_to_string,
    generate_credential,
    sasl_name,
    username_of,
)

SHA512 = MECHANISMS["SCRAM-SHA-512"]


def _exchange(mechanism: str, user: str, password: str, stored_password: str) -> ScramServer:
    m = MECHANISMS[mechanism]
    credential = generate_credential(m, stored_password, 4096)
    server = ScramServer(m, lambda name: credential if name == user else None)
    client = ScramClient(user, password, mechanism)
    server_first = server.evaluate(client.first_message())
    client.process_server_first_message(server_first)
    server_final = server.evaluate(client.final_message())
    client.process_server_final_message(server_final)
    return server


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_kafka_python_client_authenticates(mechanism: str) -> None:
    server = _exchange(mechanism, "alice", "alice-secret", "alice-secret")
    assert server.complete
    assert server.authorization_id == "alice"


def test_wrong_password_fails_with_a_sasl_error() -> None:
    with pytest.raises(SaslError, match="Invalid client credentials"):
        _exchange("SCRAM-SHA-512", "alice", "wrong", "alice-secret")


def test_unknown_user_fails_like_a_wrong_password() -> None:
    server = ScramServer(SHA512, lambda name: None)
    with pytest.raises(SaslError, match="Invalid user credentials"):
        server.evaluate(ScramClient("mallory", "x", "SCRAM-SHA-512").first_message())
    assert not server.complete


@pytest.mark.parametrize(
    "token",
    [b"", b"garbage", b"\xff\xfe", b"n,,n=alice", b"y,,n=alice,r=abc", b"n,,n=al=ice,r=abc"],
)
def test_garbage_client_first_is_refused(token: bytes) -> None:
    credential = generate_credential(SHA512, "pw")
    server = ScramServer(SHA512, lambda name: credential)
    with pytest.raises(SaslError):
        server.evaluate(token)


def test_garbage_client_final_and_replays_are_refused() -> None:
    credential = generate_credential(SHA512, "pw")
    server = ScramServer(SHA512, lambda name: credential)
    server.evaluate(b"n,,n=alice,r=abc")
    with pytest.raises(SaslError):
        server.evaluate(b"c=biws,r=other,p=AAAA")
    with pytest.raises(SaslError):  # a failed exchange stays failed
        server.evaluate(b"n,,n=alice,r=abc")


def test_authorization_id_other_than_the_user_is_refused_with_kafka_message() -> None:
    credential = generate_credential(SHA512, "pw")
    server = ScramServer(SHA512, lambda name: credential)
    with pytest.raises(SaslAuthenticationError, match="authorization id that is different"):
        server.evaluate(b"n,a=bob,n=alice,r=abc")


def test_too_few_iterations_are_refused() -> None:
    credential = generate_credential(SHA512, "pw", iterations=1000)
    server = ScramServer(SHA512, lambda name: credential)
    with pytest.raises(SaslError, match="less than the minimum 4096"):
        server.evaluate(b"n,,n=alice,r=abc")


def test_credential_string_round_trips_in_kafka_format() -> None:
    credential = generate_credential(SHA512, "pw", 4096, salt=b"salt")
    text = credential_to_string(credential)
    assert text.startswith("salt=c2FsdA==,stored_key=")
    assert text.endswith(",iterations=4096")
    assert [p.split("=", 1)[0] for p in text.split(",")] == [
        "salt",
        "stored_key",
        "server_key",
        "iterations",
    ]
    assert credential_from_string(text) == credential


def test_credential_matches_rfc_derivation() -> None:
    # RFC 7677's SCRAM-SHA-256 example: user "user", password "pencil".
    m = MECHANISMS["SCRAM-SHA-256"]
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    credential = generate_credential(m, "pencil", 4096, salt=salt)
    server = ScramServer(m, lambda name: credential)
    first = server.evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    nonce = first.decode().split(",")[0][2:]
    assert nonce.startswith("rOprNGfwEbeRWgbNEkqO")
    client = ScramClient("user", "pencil", "SCRAM-SHA-256")
    client.nonce = b"rOprNGfwEbeRWgbNEkqO"
    client.auth_message = b"n=user,r=rOprNGfwEbeRWgbNEkqO"
    client.process_server_first_message(first)
    final = server.evaluate(client.final_message())
    assert final.startswith(b"v=")
    assert server.complete


@pytest.mark.parametrize(
    "bad", ["", "salt=AA==", "salt=AA==,stored_key=AA==,server_key=AA==,iterations=x"]
)
def test_malformed_credentials_are_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="Credentials not valid"):
        credential_from_string(bad)


def test_sasl_names_escape_equals_and_comma() -> None:
    assert sasl_name("a=b,c") == "a=3Db=2Cc"
    assert username_of("a=3Db=2Cc") == "a=b,c"
    with pytest.raises(ValueError):
        username_of("a=b")
