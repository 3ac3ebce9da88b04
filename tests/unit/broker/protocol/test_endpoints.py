"""Listener parsing and security protocols."""

from __future__ import annotations

import pytest

from kpo_broker.protocol.endpoints import (
    DEFAULT_PROTOCOL_MAP,
    Endpoint,
    SecurityProtocol,
    parse_listeners,
    parse_protocol_map,
)


def test_security_protocol_ids_match_kafka() -> None:
    assert [p.id for p in SecurityProtocol] == [0, 1, 2, 3]
    assert SecurityProtocol.SASL_SSL.id == 3


def test_parse_listeners() -> None:
    protocols = {"PLAINTEXT": SecurityProtocol.PLAINTEXT, "INTERNAL": SecurityProtocol.SSL}
    parsed = parse_listeners(" PLAINTEXT://:9092 , internal://[::1]:19092,", protocols)
    assert parsed == (
        Endpoint("PLAINTEXT", "", 9092, SecurityProtocol.PLAINTEXT),
        Endpoint("INTERNAL", "::1", 19092, SecurityProtocol.SSL),
    )
    assert parse_listeners("PLAINTEXT://0.0.0.0:0", DEFAULT_PROTOCOL_MAP)[0].port == 0


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("PLAINTEXT:9092", "NAME://host:port"),
        ("PLAINTEXT://h:70000", "outside"),
        ("PLAINTEXT://h:-1", "outside"),
        ("OTHER://h:1", "no security protocol"),
        ("PLAINTEXT://a:1,PLAINTEXT://b:2", "twice"),
    ],
)
def test_parse_listeners_errors(value: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_listeners(value, DEFAULT_PROTOCOL_MAP)


def test_parse_protocol_map() -> None:
    assert parse_protocol_map("internal:ssl, EXTERNAL:SASL_PLAINTEXT") == {
        "INTERNAL": SecurityProtocol.SSL,
        "EXTERNAL": SecurityProtocol.SASL_PLAINTEXT,
    }
    with pytest.raises(ValueError):
        parse_protocol_map("INTERNAL")
    with pytest.raises(ValueError):
        parse_protocol_map("INTERNAL:TLS")
