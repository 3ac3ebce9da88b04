"""Principals reach request handlers: an in-process socket server, our inter-broker connector.

The server side (:class:`ListenerAuthenticator` in :class:`SocketServer`) and the client side
(:class:`SecureConnector` in :class:`BrokerClient`, what replica fetchers and the controller
use) meet over loopback: PLAIN and SCRAM over SASL_PLAINTEXT, mutual TLS over SSL.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from kpo_broker.protocol.client import BrokerClient
from kpo_broker.protocol.errors import BrokerConnectionError
from kpo_broker.security.channel import ListenerAuthenticator
from kpo_broker.security.client import SecureConnector
from kpo_broker.security.config import ClientSecurity, ListenerSecurity, SaslSettings, SslSettings
from kpo_broker.security.credentials import CredentialCache
from kpo_broker.security.principal import SslPrincipalMapper
from kpo_broker.security.scram import MECHANISMS, credential_to_string, generate_credential
from kpo_broker.server.request_context import RequestContext
from kpo_broker.server.socket_server import Listener, SocketServer
from kpo_devenv.kafka_security import pem_keystore
from kpo_devenv.pki import generate_kafka_pki
from kpo_kafka.security import SecurityProtocol, parse_jaas_config

SUPPORTED = {3: (0, 12), 17: (0, 1), 18: (0, 3), 36: (0, 2)}
PLAIN = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-pw";'
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule required;"


async def _principal_seen(
    listener: ListenerSecurity, client: ClientSecurity, cache: CredentialCache
) -> str:
    seen: list[str] = []

    async def handler(ctx: RequestContext, request: Any) -> Any:
        seen.append(str(ctx.principal))
        return MetadataResponse(
            throttle_time_ms=0, brokers=[], cluster_id="c", controller_id=0, topics=[]
        )

    authenticator = ListenerAuthenticator(listener, SUPPORTED, cache.get, timeout_s=5)
    server = SocketServer(
        [Listener(listener.name, "127.0.0.1", 0, authenticator)], handler, SUPPORTED
    )
    ports = await server.start()
    connection = BrokerClient(
        "localhost" if client.ssl else "127.0.0.1",
        ports[listener.name],
        "test",
        5000,
        connector=SecureConnector(client),
    )
    try:
        await connection.send(MetadataRequest(topics=[], allow_auto_topic_creation=False), 1)
    finally:
        await connection.close()
        await server.stop()
    stats = server.authentication_stats.counts()
    assert stats == {(listener.name, True): 1}
    return seen[0]


def _sasl_listener(mechanism: str, jaas: str) -> ListenerSecurity:
    entry = parse_jaas_config(jaas)[0]
    return ListenerSecurity(
        "CLIENT",
        SecurityProtocol.SASL_PLAINTEXT,
        sasl=SaslSettings((mechanism,), {mechanism: entry}),
    )


def test_plain_principal() -> None:
    client = ClientSecurity(SecurityProtocol.SASL_PLAINTEXT, None, "PLAIN", "alice", "alice-pw")
    principal = asyncio.run(
        _principal_seen(_sasl_listener("PLAIN", PLAIN), client, CredentialCache())
    )
    assert principal == "User:alice"


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_principal(mechanism: str) -> None:
    cache = CredentialCache()
    credential = generate_credential(MECHANISMS[mechanism], "bob-pw")
    cache.update_user("bob", {mechanism: credential_to_string(credential)})
    client = ClientSecurity(SecurityProtocol.SASL_PLAINTEXT, None, mechanism, "bob", "bob-pw")
    assert (
        asyncio.run(_principal_seen(_sasl_listener(mechanism, SCRAM), client, cache)) == "User:bob"
    )


def test_wrong_scram_password_fails_the_connector() -> None:
    cache = CredentialCache()
    credential = generate_credential(MECHANISMS["SCRAM-SHA-512"], "bob-pw")
    cache.update_user("bob", {"SCRAM-SHA-512": credential_to_string(credential)})
    client = ClientSecurity(SecurityProtocol.SASL_PLAINTEXT, None, "SCRAM-SHA-512", "bob", "nope")
    with pytest.raises(BrokerConnectionError, match="invalid credentials"):
        asyncio.run(_principal_seen(_sasl_listener("SCRAM-SHA-512", SCRAM), client, cache))


def test_mutual_tls_principal_follows_the_mapping_rules(tmp_path: Path) -> None:
    pki = generate_kafka_pki(tmp_path / "pki")
    trust = str(pki.ca.cert)
    server_ssl = SslSettings(
        keystore_location=str(pem_keystore(pki.broker(0))),
        truststore_location=trust,
        client_auth="required",
    )
    client_ssl = SslSettings(
        keystore_location=str(pem_keystore(pki.broker(1))), truststore_location=trust
    )
    client = ClientSecurity(SecurityProtocol.SSL, client_ssl)
    default = ListenerSecurity("SSL", SecurityProtocol.SSL, ssl=server_ssl)
    assert (
        asyncio.run(_principal_seen(default, client, CredentialCache())) == "User:CN=broker-1,O=kpo"
    )
    mapped = ListenerSecurity(
        "SSL",
        SecurityProtocol.SSL,
        ssl=server_ssl,
        principal_mapper=SslPrincipalMapper("RULE:^CN=([^,]+),.*$/$1/"),
    )
    assert asyncio.run(_principal_seen(mapped, client, CredentialCache())) == "User:broker-1"


def test_sasl_ssl_principal_is_the_sasl_one(tmp_path: Path) -> None:
    pki = generate_kafka_pki(tmp_path / "pki")
    trust = str(pki.ca.cert)
    entry = parse_jaas_config(PLAIN)[0]
    listener = ListenerSecurity(
        "SASL_SSL",
        SecurityProtocol.SASL_SSL,
        ssl=SslSettings(
            keystore_location=str(pem_keystore(pki.broker(0))),
            truststore_location=trust,
            client_auth="required",
        ),
        sasl=SaslSettings(("PLAIN",), {"PLAIN": entry}),
    )
    client = ClientSecurity(
        SecurityProtocol.SASL_SSL,
        SslSettings(keystore_location=str(pem_keystore(pki.broker(1))), truststore_location=trust),
        "PLAIN",
        "alice",
        "alice-pw",
    )
    assert asyncio.run(_principal_seen(listener, client, CredentialCache())) == "User:alice"
