r"""The client side of listener security, for the broker's own connections to other brokers.

Replica fetchers, the controller's channel and controlled shutdown connect to the
inter-broker listener (``inter.broker.listener.name`` / ``security.inter.broker.protocol``)
with its security, as Kafka's inter-broker ``NetworkClient``\\ s do: TLS with the broker's
keystore as client certificate (mutual TLS) and its truststore, then, for SASL
listeners, SaslHandshake v1 and SaslAuthenticate v1 with
``sasl.mechanism.inter.broker.protocol`` and the JAAS ``username``/``password``. The
mechanisms' client side is kafka-python's (``kafka.net.sasl``).
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any, Protocol

from kafka.net.sasl import get_sasl_mechanism
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from kpo_broker.protocol.endpoints import SecurityProtocol
from kpo_broker.protocol.errors import BrokerConnectionError
from kpo_broker.protocol.framing import decode_response, read_frame
from kpo_broker.security.config import ClientSecurity
from kpo_broker.security.tls import client_context

__all__ = ["Connector", "PlaintextConnector", "SecureConnector", "connector_for"]

_SASL_HANDSHAKE_VERSION = 1
_SASL_AUTHENTICATE_VERSION = 1


class Connector(Protocol):
    """Opens an authenticated connection to a broker."""

    async def open(
        self, host: str, port: int, client_id: str
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """Connect, then run TLS and SASL as the protocol needs.

        Raises:
            OSError: the TCP connection or the TLS handshake failed.
            BrokerConnectionError: SASL authentication failed.
        """
        ...


class PlaintextConnector:
    """PLAINTEXT: a TCP connection."""

    async def open(
        self, host: str, port: int, client_id: str
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """Open a TCP connection (see :class:`Connector`)."""
        return await asyncio.open_connection(host, port)


class SecureConnector:
    """SSL, SASL_PLAINTEXT or SASL_SSL connections with one :class:`ClientSecurity`.

    Args:
        security: the inter-broker client settings.

    Raises:
        TlsConfigError: the TLS settings cannot be loaded.
    """

    def __init__(self, security: ClientSecurity) -> None:
        self.security = security
        self._ssl = client_context(security.ssl) if security.ssl is not None else None

    async def open(
        self, host: str, port: int, client_id: str
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """Connect with TLS and/or SASL (see :class:`Connector`)."""
        if self._ssl is not None:
            reader, writer = await asyncio.open_connection(
                host, port, ssl=self._ssl, server_hostname=host
            )
        else:
            reader, writer = await asyncio.open_connection(host, port)
        if self.security.sasl_mechanism is not None:
            try:
                await self._sasl(reader, writer, client_id)
            except BaseException:
                writer.close()
                raise
        return reader, writer

    async def _sasl(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client_id: str
    ) -> None:
        security = self.security
        mechanism_name = security.sasl_mechanism
        assert mechanism_name is not None
        correlation = itertools.count()

        async def call(request: Any, response_class: Any, version: int) -> Any:
            request.with_header(correlation_id=next(correlation), client_id=client_id)
            writer.write(bytes(request.encode(version=version, header=True, framed=True)))
            await writer.drain()
            frame = await read_frame(reader)
            if frame is None:
                raise BrokerConnectionError("connection closed during SASL authentication")
            return decode_response(frame, response_class, version)[1]

        handshake = await call(
            SaslHandshakeRequest(mechanism=mechanism_name),
            SaslHandshakeResponse,
            _SASL_HANDSHAKE_VERSION,
        )
        if handshake.error_code:
            raise BrokerConnectionError(
                f"SASL handshake for {mechanism_name} refused (error {handshake.error_code}); "
                f"enabled: {handshake.mechanisms}"
            )
        mechanism = get_sasl_mechanism(mechanism_name)(
            sasl_mechanism=mechanism_name,
            sasl_plain_username=security.username,
            sasl_plain_password=security.password,
            security_protocol=str(security.protocol),
        )
        while not mechanism.is_done():
            response = await call(
                SaslAuthenticateRequest(auth_bytes=mechanism.auth_bytes()),
                SaslAuthenticateResponse,
                _SASL_AUTHENTICATE_VERSION,
            )
            if response.error_code:
                raise BrokerConnectionError(
                    f"SASL authentication as {security.username} failed: {response.error_message}"
                )
            try:
                mechanism.receive(bytes(response.auth_bytes or b""))
            except (ValueError, KeyError) as exc:
                raise BrokerConnectionError(f"SASL server response refused: {exc}") from None
        if not mechanism.is_authenticated():
            raise BrokerConnectionError(f"SASL authentication as {security.username} failed")


def connector_for(security: ClientSecurity | None) -> Connector:
    """Return the connector of ``security`` (PLAINTEXT when None).

    Raises:
        TlsConfigError: the TLS settings cannot be loaded.
    """
    if security is None or security.protocol is SecurityProtocol.PLAINTEXT:
        return PlaintextConnector()
    return SecureConnector(security)
