"""The broker side of SASL on one connection (Kafka's ``SaslServerAuthenticator``).

Before a SASL connection may send any other request it must authenticate:

============================= ================================== ========================
state                         accepted                           next
============================= ================================== ========================
HANDSHAKE_OR_VERSIONS_REQUEST ApiVersions, SaslHandshake         HANDSHAKE_REQUEST,
                                                                 AUTHENTICATE
HANDSHAKE_REQUEST             SaslHandshake                      AUTHENTICATE
AUTHENTICATE                  SaslAuthenticate (handshake v1),   AUTHENTICATE, COMPLETE
                              or raw size-prefixed tokens (v0)
============================= ================================== ========================

Any other request closes the connection (Kafka's ``IllegalSaslStateException``), as
does a SaslHandshake naming a mechanism the listener does not enable (answered first
with UNSUPPORTED_SASL_MECHANISM and the enabled list). A failed exchange is answered
with SASL_AUTHENTICATION_FAILED (58) and Kafka's message (for a wrong password or
an unknown SCRAM user the generic "Authentication failed during authentication due to
invalid credentials with SASL mechanism <m>", so that a client cannot learn which users
exist), then closed. Frames before authentication are at most 524288 bytes (Kafka's
``sasl.server.max.receive.size``). Re-authentication (KIP-368) is not offered: the
session lifetime sent is 0.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Callable, Mapping
from enum import Enum
from typing import Any, Protocol

from kafka.protocol.sasl import SaslAuthenticateResponse, SaslHandshakeResponse

from kpo_broker.protocol import framing
from kpo_broker.protocol.api import api_versions_response
from kpo_broker.security.config import SaslSettings
from kpo_broker.security.errors import (
    AuthenticationError,
    IllegalSaslStateError,
    SaslAuthenticationError,
    SaslError,
    UnsupportedSaslMechanismError,
)
from kpo_broker.security.plain import PlainServer
from kpo_broker.security.principal import KafkaPrincipal
from kpo_broker.security.scram import MECHANISMS as SCRAM_MECHANISMS
from kpo_broker.security.scram import ScramCredential, ScramServer

__all__ = ["SASL_MAX_RECEIVE_SIZE", "SaslServerAuthenticator", "SaslState"]

log = logging.getLogger(__name__)

#: Kafka's default ``sasl.server.max.receive.size``: the largest frame before authentication.
SASL_MAX_RECEIVE_SIZE = 524288

API_KEY_SASL_HANDSHAKE = 17
API_KEY_API_VERSIONS = 18
API_KEY_SASL_AUTHENTICATE = 36
_API_KEY = struct.Struct(">h")


class SaslState(Enum):
    """Kafka's ``SaslServerAuthenticator.SaslState`` (the states used here)."""

    HANDSHAKE_OR_VERSIONS_REQUEST = "HANDSHAKE_OR_VERSIONS_REQUEST"
    HANDSHAKE_REQUEST = "HANDSHAKE_REQUEST"
    AUTHENTICATE = "AUTHENTICATE"
    COMPLETE = "COMPLETE"
    FAILED = "FAILED"


#: state -> the api keys a framed request may carry in it.
ALLOWED_REQUESTS: Mapping[SaslState, frozenset[int]] = {
    SaslState.HANDSHAKE_OR_VERSIONS_REQUEST: frozenset(
        {API_KEY_API_VERSIONS, API_KEY_SASL_HANDSHAKE}
    ),
    SaslState.HANDSHAKE_REQUEST: frozenset({API_KEY_SASL_HANDSHAKE}),
    SaslState.AUTHENTICATE: frozenset({API_KEY_SASL_AUTHENTICATE}),
}


class SaslServer(Protocol):
    """One mechanism's server exchange (:class:`PlainServer`, :class:`ScramServer`)."""

    @property
    def complete(self) -> bool:
        """Whether the exchange succeeded."""
        ...

    @property
    def authorization_id(self) -> str | None:
        """The authenticated user, once complete."""
        ...

    def evaluate(self, response: bytes) -> bytes:
        """Process a client token; return the server token."""
        ...


#: (mechanism, user) -> the user's SCRAM credential, or None.
ScramLookup = Callable[[str, str], ScramCredential | None]


class SaslServerAuthenticator:
    """Authenticates one SASL connection.

    Args:
        sasl: the listener's SASL settings.
        supported: api key -> versions, for the ApiVersions answer before authentication.
        scram_lookup: the SCRAM credential store.
        peer: the client's address (for logs).
    """

    def __init__(
        self,
        sasl: SaslSettings,
        supported: Mapping[int, tuple[int, int]],
        scram_lookup: ScramLookup,
        peer: object = None,
    ) -> None:
        self.sasl = sasl
        self.supported = supported
        self.scram_lookup = scram_lookup
        self.peer = peer
        self.state = SaslState.HANDSHAKE_OR_VERSIONS_REQUEST
        self.mechanism: str | None = None
        self._server: SaslServer | None = None
        self._headers = True
        self._failure: AuthenticationError | None = None

    async def authenticate(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> KafkaPrincipal:
        """Run the exchange until the client is authenticated.

        Returns:
            ``User:<authorization id>``.

        Raises:
            AuthenticationError: the client failed (answered first when Kafka answers).
            framing.FrameError: an oversized or truncated frame.
            ConnectionError: the client went away (also a clean close mid-exchange).
        """
        try:
            while self.state is not SaslState.COMPLETE:
                frame = await framing.read_frame(reader, SASL_MAX_RECEIVE_SIZE)
                if frame is None:
                    raise ConnectionResetError("client closed the connection during SASL")
                answer = self._step(frame)
                if answer is not None:
                    writer.write(answer)
                    await writer.drain()
                if self._failure is not None:
                    raise self._failure
        except AuthenticationError:
            self.state = SaslState.FAILED
            raise
        assert self._server is not None and self._server.authorization_id is not None
        return KafkaPrincipal("User", self._server.authorization_id)

    def _fail(self, error: AuthenticationError, answer: bytes) -> bytes:
        """Enter FAILED: ``answer`` is sent, then ``error`` ends the exchange."""
        self._failure = error
        self.state = SaslState.FAILED
        return answer

    def _step(self, frame: bytes) -> bytes | None:
        """Process one frame in the current state; return the bytes to answer."""
        if self.state is SaslState.AUTHENTICATE and not self._headers:
            return self._raw_token(frame)
        if len(frame) < _API_KEY.size:
            raise IllegalSaslStateError("Truncated request during SASL handshake.")
        (api_key,) = _API_KEY.unpack_from(frame)
        if api_key not in ALLOWED_REQUESTS.get(self.state, frozenset()):
            raise IllegalSaslStateError(
                f"Unexpected Kafka request of type {api_key} during SASL {self.state.value}."
            )
        allowed = {api_key: self.supported[api_key]}
        try:
            request = framing.decode_request(frame, allowed)
        except framing.UnsupportedVersionError as exc:
            answer = framing.encode_unsupported_version_response(exc, self.supported)
            if answer is None:
                raise IllegalSaslStateError(f"unsupported version of api {api_key}") from None
            return answer
        except framing.InvalidRequestError:
            raise IllegalSaslStateError("Malformed request during SASL authentication.") from None
        if api_key == API_KEY_API_VERSIONS:
            self.state = SaslState.HANDSHAKE_REQUEST
            return framing.encode_response(request, api_versions_response(self.supported))
        if api_key == API_KEY_SASL_HANDSHAKE:
            return self._handshake(request)
        return self._authenticate(request)

    def _handshake(self, request: framing.DecodedRequest) -> bytes:
        mechanism = str(request.body.mechanism)
        enabled = list(self.sasl.enabled_mechanisms)
        if mechanism not in enabled:
            answer = framing.encode_response(
                request,
                SaslHandshakeResponse(
                    error_code=UnsupportedSaslMechanismError.error_code, mechanisms=enabled
                ),
            )
            error = UnsupportedSaslMechanismError(f"Unsupported SASL mechanism {mechanism}")
            return self._fail(error, answer)
        self.mechanism = mechanism
        self._headers = request.api_version >= 1
        self._server = self._new_server(mechanism)
        self.state = SaslState.AUTHENTICATE
        return framing.encode_response(
            request, SaslHandshakeResponse(error_code=0, mechanisms=enabled)
        )

    def _new_server(self, mechanism: str) -> SaslServer:
        if mechanism == "PLAIN":
            return PlainServer(self.sasl.plain_users)
        scram = SCRAM_MECHANISMS[mechanism]
        return ScramServer(scram, lambda user: self.scram_lookup(mechanism, user))

    def _evaluate(self, token: bytes) -> bytes:
        """Run the mechanism; raise AuthenticationError with the message the client sees."""
        assert self._server is not None
        try:
            return self._server.evaluate(token)
        except SaslAuthenticationError:
            raise
        except (SaslError, ValueError) as exc:
            log.info("SASL %s failure from %s: %s", self.mechanism, self.peer, exc)
            raise SaslAuthenticationError(
                "Authentication failed during authentication due to invalid credentials "
                f"with SASL mechanism {self.mechanism}"
            ) from None

    def _authenticate(self, request: framing.DecodedRequest) -> bytes:
        version = request.api_version
        try:
            token = self._evaluate(bytes(request.body.auth_bytes or b""))
        except AuthenticationError as exc:
            answer = framing.encode_response(
                request,
                _authenticate_response(exc.error_code, exc.client_message, b"", version),
            )
            return self._fail(exc, answer)
        assert self._server is not None
        if self._server.complete:
            self.state = SaslState.COMPLETE
        return framing.encode_response(request, _authenticate_response(0, None, token, version))

    def _raw_token(self, frame: bytes) -> bytes:
        """Handshake v0: size-prefixed tokens without Kafka headers; a failure just closes."""
        token = self._evaluate(frame)
        assert self._server is not None
        if self._server.complete:
            self.state = SaslState.COMPLETE
        return struct.pack(">i", len(token)) + token


def _authenticate_response(code: int, message: str | None, token: bytes, version: int) -> Any:
    fields: dict[str, Any] = {"error_code": code, "error_message": message, "auth_bytes": token}
    if version >= 1:
        fields["session_lifetime_ms"] = 0
    return SaslAuthenticateResponse(**fields)
