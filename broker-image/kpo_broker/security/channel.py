"""Authenticating a new connection on a listener (Kafka's ``ChannelBuilders``).

PLAINTEXT: ``User:ANONYMOUS``. SSL: the TLS handshake (``start_tls`` on the accepted
socket, so that a failed handshake is logged and counted here), then the principal of
the client certificate's DN under ``ssl.principal.mapping.rules`` (``User:ANONYMOUS``
without a certificate). SASL_PLAINTEXT: the SASL exchange. SASL_SSL: the TLS handshake,
then SASL; the SASL principal wins (Kafka's ``DefaultKafkaPrincipalBuilder``).

The whole of it must finish within ``timeout_s`` (30 s, or ``connections.max.idle.ms``
when shorter), so that a half-open connection or a handshake flood holds a connection
slot for a bounded time only.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from dataclasses import dataclass

from kpo_broker.protocol.endpoints import SecurityProtocol
from kpo_broker.security.authenticator import SaslServerAuthenticator, ScramLookup
from kpo_broker.security.config import ListenerSecurity
from kpo_broker.security.principal import (
    ANONYMOUS,
    KafkaPrincipal,
    NoMatchingRuleError,
    distinguished_name,
)
from kpo_broker.security.tls import server_context

__all__ = ["AUTHENTICATION_TIMEOUT_S", "AuthenticationFailedError", "ListenerAuthenticator"]

log = logging.getLogger(__name__)

#: How long TLS and SASL together may take on a new connection, s (bounds half-open ones).
AUTHENTICATION_TIMEOUT_S = 30.0


class AuthenticationFailedError(Exception):
    """A connection failed to authenticate; the connection must be closed.

    The message never holds a secret (no password, no token).
    """


@dataclass
class ListenerAuthenticator:
    """Authenticates the connections of one listener.

    Args:
        security: the listener's security.
        supported: api key -> versions (for ApiVersions before SASL authentication).
        scram_lookup: the SCRAM credential store.
        timeout_s: the bound on the whole authentication.

    Raises:
        TlsConfigError: (at construction) the listener's TLS settings cannot be loaded.
    """

    security: ListenerSecurity
    supported: dict[int, tuple[int, int]]
    scram_lookup: ScramLookup
    timeout_s: float = AUTHENTICATION_TIMEOUT_S

    def __post_init__(self) -> None:
        self.ssl_context: ssl.SSLContext | None = (
            server_context(self.security.ssl) if self.security.ssl is not None else None
        )

    @property
    def authenticates(self) -> bool:
        """Whether connections need more than accepting (not PLAINTEXT)."""
        return self.security.protocol is not SecurityProtocol.PLAINTEXT

    async def authenticate(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, peer: object
    ) -> KafkaPrincipal:
        """Run TLS and/or SASL on a freshly accepted connection.

        Returns:
            The connection's principal.

        Raises:
            AuthenticationFailedError: handshake failure, timeout, failed SASL exchange, or a
                client DN that no mapping rule matches.
        """
        try:
            async with asyncio.timeout(self.timeout_s):
                return await self._authenticate(reader, writer, peer)
        except TimeoutError:
            raise AuthenticationFailedError(
                f"authentication did not complete within {self.timeout_s} s"
            ) from None

    async def _authenticate(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, peer: object
    ) -> KafkaPrincipal:
        principal = ANONYMOUS
        if self.ssl_context is not None:
            try:
                await writer.start_tls(self.ssl_context)
            except (ssl.SSLError, OSError, EOFError) as exc:
                raise AuthenticationFailedError(
                    f"TLS handshake failed: {_tls_reason(exc)}"
                ) from None
            principal = self._certificate_principal(writer)
        sasl = self.security.sasl
        if sasl is not None:
            authenticator = SaslServerAuthenticator(sasl, self.supported, self.scram_lookup, peer)
            try:
                principal = await authenticator.authenticate(reader, writer)
            except Exception as exc:  # AuthenticationError, FrameError, OSError...
                mechanism = authenticator.mechanism or "none"
                raise AuthenticationFailedError(
                    f"SASL authentication ({mechanism}) failed: {type(exc).__name__}: "
                    f"{getattr(exc, 'client_message', None) or _short(exc)}"
                ) from None
        return principal

    def _certificate_principal(self, writer: asyncio.StreamWriter) -> KafkaPrincipal:
        ssl_object = writer.get_extra_info("ssl_object")
        der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
        if not der:
            return ANONYMOUS
        dn = distinguished_name(der)
        try:
            return KafkaPrincipal("User", self.security.principal_mapper.name(dn))
        except NoMatchingRuleError as exc:
            raise AuthenticationFailedError(str(exc)) from None


def _tls_reason(exc: BaseException) -> str:
    reason = getattr(exc, "reason", None)
    return str(reason) if reason else type(exc).__name__


def _short(exc: BaseException) -> str:
    text = str(exc)
    return text if len(text) <= 200 else text[:200] + "..."
