"""SASL/PLAIN, the server side (RFC 4616; Kafka's ``PlainSaslServer``).

The client sends ``[authzid] NUL authcid NUL passwd`` once; the password is checked
against the ``user_<name>="<password>"`` options of the listener's
``PlainLoginModule`` JAAS configuration (Kafka's ``PlainServerCallbackHandler``).
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from kpo_broker.security.errors import SaslAuthenticationError

__all__ = ["PlainServer"]


class PlainServer:
    """One PLAIN exchange.

    Args:
        users: user name -> password, from the JAAS ``user_<name>`` options.
    """

    mechanism_name = "PLAIN"

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self.complete = False
        self.authorization_id: str | None = None

    def evaluate(self, response: bytes) -> bytes:
        """Check the client's single message; return the empty server response.

        Raises:
            SaslAuthenticationError: with Kafka's messages (wrong token count, empty user
                or password, "Invalid username or password", another authorization id).
        """
        text = response.decode("utf-8", errors="replace")
        tokens = text.split("\x00", 3)
        if len(tokens) != 3:
            raise SaslAuthenticationError(
                f"Invalid SASL/PLAIN response: expected 3 tokens, got {min(len(tokens), 4)}"
            )
        authzid, username, password = tokens
        if not username:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified")
        expected = self._users.get(username)
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            raise SaslAuthenticationError("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different "
                "from username"
            )
        self.authorization_id = username
        self.complete = True
        return b""
