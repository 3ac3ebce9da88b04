"""Security errors: Kafka's authentication exceptions, by the error code a client sees."""

from __future__ import annotations


class AuthenticationError(Exception):
    """A client failed to authenticate; the connection is closed after the answer.

    Attributes:
        error_code: Kafka's error code sent to the client (58 SASL_AUTHENTICATION_FAILED,
            34 ILLEGAL_SASL_STATE, 33 UNSUPPORTED_SASL_MECHANISM).
        client_message: the message the client may see (never secrets).
    """

    error_code = 58

    def __init__(self, client_message: str) -> None:
        super().__init__(client_message)
        self.client_message = client_message


class SaslAuthenticationError(AuthenticationError):
    """Kafka's ``SaslAuthenticationException``: its message goes to the client as is."""


class SaslError(Exception):
    """Kafka's ``javax.security.sasl.SaslException``: a failure whose detail stays on the broker.

    The client is answered with the generic "invalid credentials" message
    (``SaslServerAuthenticator``), so that it cannot learn whether a user exists.
    """


class IllegalSaslStateError(AuthenticationError):
    """Kafka's ``IllegalSaslStateException``: a request that is not allowed at this point."""

    error_code = 34


class UnsupportedSaslMechanismError(AuthenticationError):
    """Kafka's ``UnsupportedSaslMechanismException``: the client asked for a disabled mechanism."""

    error_code = 33
