"""SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, RFC 7677): credentials and the server side.

Credentials are stored as Kafka's ``ScramCredentialUtils`` formats them,
``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>``, under the mechanism
name in ``/config/users/<name>``. The server exchange follows Kafka's
``ScramSaslServer``: client-first (``n,[a=authzid],n=<saslname>,r=<nonce>[,ext]``),
server-first (``r=<client nonce><server nonce>,s=<salt>,i=<iterations>``),
client-final (``c=<b64 gs2 header>,r=<nonce>,p=<proof>``), server-final
(``v=<signature>``). Kafka's mechanism limits apply: at least 4096 iterations
(``ScramMechanism.minIterations``) and, for AlterUserScramCredentials, at most 16384.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from kpo_broker.security.errors import SaslAuthenticationError, SaslError

__all__ = [
    "MAX_ITERATIONS",
    "MECHANISMS",
    "ScramCredential",
    "ScramMechanism",
    "ScramServer",
    "credential_from_string",
    "credential_to_string",
    "generate_credential",
    "salted_password",
    "sasl_name",
    "username_of",
]

#: The largest iteration count AlterUserScramCredentials accepts (Kafka's ZkAdminManager).
MAX_ITERATIONS = 16384


@dataclass(frozen=True)
class ScramMechanism:
    """One SCRAM mechanism.

    Attributes:
        name: ``SCRAM-SHA-256`` or ``SCRAM-SHA-512``.
        type_id: the byte AlterUserScramCredentials uses (Kafka's public ``ScramMechanism``).
        hash_name: hashlib's name of the hash function.
        min_iterations: the fewest iterations a credential may have (4096 for both).
    """

    name: str
    type_id: int
    hash_name: str
    min_iterations: int = 4096

    def hash(self, data: bytes) -> bytes:
        """H(data)."""
        return hashlib.new(self.hash_name, data).digest()

    def hmac(self, key: bytes, data: bytes) -> bytes:
        """HMAC(key, data)."""
        return hmac.new(key, data, self.hash_name).digest()


#: Mechanism name -> mechanism.
MECHANISMS: dict[str, ScramMechanism] = {
    m.name: m
    for m in (
        ScramMechanism("SCRAM-SHA-256", 1, "sha256"),
        ScramMechanism("SCRAM-SHA-512", 2, "sha512"),
    )
}


@dataclass(frozen=True)
class ScramCredential:
    """What the server keeps of a password (RFC 5802 section 3).

    Attributes:
        salt: the salt bytes.
        stored_key: H(ClientKey).
        server_key: HMAC(SaltedPassword, "Server Key").
        iterations: PBKDF2 iterations.
    """

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def salted_password(
    mechanism: ScramMechanism, password: str, salt: bytes, iterations: int
) -> bytes:
    """Hi(Normalize(password), salt, i): PBKDF2 with the mechanism's HMAC over UTF-8."""
    return hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode(), salt, iterations)


def credential_from_salted(
    mechanism: ScramMechanism, salt: bytes, salted: bytes, iterations: int
) -> ScramCredential:
    """Build a credential from a salted password (what AlterUserScramCredentials carries)."""
    client_key = mechanism.hmac(salted, b"Client Key")
    return ScramCredential(
        salt, mechanism.hash(client_key), mechanism.hmac(salted, b"Server Key"), iterations
    )


def generate_credential(
    mechanism: ScramMechanism, password: str, iterations: int = 4096, salt: bytes | None = None
) -> ScramCredential:
    """Derive a credential from a password (Kafka's ``ScramFormatter.generateCredential``).

    Args:
        mechanism: the SCRAM mechanism.
        password: the clear password.
        iterations: PBKDF2 iterations.
        salt: the salt; by default a random one, formatted as Kafka's (a base-36 random string).
    """
    if salt is None:
        salt = _random_string().encode()
    return credential_from_salted(
        mechanism, salt, salted_password(mechanism, password, salt, iterations), iterations
    )


def credential_to_string(credential: ScramCredential) -> str:
    """Format as ``ScramCredentialUtils.credentialToString``."""
    b64 = base64.b64encode
    return (
        f"salt={b64(credential.salt).decode()},stored_key={b64(credential.stored_key).decode()},"
        f"server_key={b64(credential.server_key).decode()},iterations={credential.iterations}"
    )


def credential_from_string(value: str) -> ScramCredential:
    """Parse ``ScramCredentialUtils.credentialToString``'s format.

    Raises:
        ValueError: not exactly the four fields, bad base64 or a bad iteration count.
    """
    props: dict[str, str] = {}
    for token in value.split(","):
        key, sep, item = token.partition("=")
        if not sep or not key:
            raise ValueError("Credentials not valid")
        props[key] = item
    if set(props) != {"salt", "stored_key", "server_key", "iterations"}:
        raise ValueError("Credentials not valid")
    try:
        return ScramCredential(
            base64.b64decode(props["salt"], validate=True),
            base64.b64decode(props["stored_key"], validate=True),
            base64.b64decode(props["server_key"], validate=True),
            int(props["iterations"]),
        )
    except (binascii.Error, ValueError):
        raise ValueError("Credentials not valid") from None


def sasl_name(username: str) -> str:
    """Escape a user name for SCRAM messages: ``=`` as ``=3D``, ``,`` as ``=2C``."""
    return username.replace("=", "=3D").replace(",", "=2C")


def username_of(name: str) -> str:
    """Undo :func:`sasl_name` (Kafka's ``ScramFormatter.username``).

    Raises:
        ValueError: an ``=`` not followed by ``2C`` or ``3D``.
    """
    unescaped = name.replace("=2C", ",")
    if "=" in unescaped.replace("=3D", ""):
        raise ValueError("Invalid username")
    return unescaped.replace("=3D", "=")


def _random_string() -> str:
    """Kafka's ``ScramFormatter.secureRandomString``: a 130-bit random number in base 36."""
    value = secrets.randbits(130)
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        value, digit = divmod(value, 36)
        out = digits[digit] + out
        if not value:
            return out


# Kafka's ScramMessages patterns, in Python's regex syntax.
_VALUE = r"[\x01-\x2b\x2d-\x7f]+"
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_B64 = r"(?:[a-zA-Z0-9/+]{4})*(?:[a-zA-Z0-9/+]{3}=|[a-zA-Z0-9/+]{2}==)?"
_EXTENSIONS = rf"(?:,[A-Za-z]+={_VALUE})*"
_CLIENT_FIRST = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,(?:m={_VALUE},)?"
    rf"(?P<bare>n=(?P<saslname>{_SASLNAME}),r=(?P<nonce>{_PRINTABLE})(?P<ext>{_EXTENSIONS}))"
)
_CLIENT_FINAL = re.compile(
    rf"(?P<without_proof>c=(?P<channel>{_B64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS}),p=(?P<proof>{_B64})"
)


class _State(Enum):
    RECEIVE_CLIENT_FIRST = "receive client first message"
    RECEIVE_CLIENT_FINAL = "receive client final message"
    COMPLETE = "complete"
    FAILED = "failed"


#: Looks up a user's credential for the mechanism; None when the user has none.
CredentialLookup = Callable[[str], ScramCredential | None]


class ScramServer:
    """The server side of one SCRAM exchange (Kafka's ``ScramSaslServer``).

    States: receive client-first -> receive client-final -> complete; any failure -> failed.

    Args:
        mechanism: the negotiated SCRAM mechanism.
        lookup: user name -> credential for this mechanism.
    """

    def __init__(self, mechanism: ScramMechanism, lookup: CredentialLookup) -> None:
        self.mechanism = mechanism
        self._lookup = lookup
        self._state = _State.RECEIVE_CLIENT_FIRST
        self._credential: ScramCredential | None = None
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self.authorization_id: str | None = None

    @property
    def complete(self) -> bool:
        """Whether the exchange succeeded."""
        return self._state is _State.COMPLETE

    def evaluate(self, response: bytes) -> bytes:
        """Process the client's next message and return the server's.

        Raises:
            SaslError: malformed message, unknown user, too few iterations, wrong proof
                (the client sees only the generic failure message).
            SaslAuthenticationError: an authorization id other than the user name.
        """
        try:
            if self._state is _State.RECEIVE_CLIENT_FIRST:
                return self._client_first(response)
            if self._state is _State.RECEIVE_CLIENT_FINAL:
                return self._client_final(response)
            raise SaslError(f"Unexpected challenge in Sasl server state {self._state.value}")
        except (SaslError, SaslAuthenticationError):
            self._state = _State.FAILED
            self._credential = None
            raise

    def _client_first(self, response: bytes) -> bytes:
        match = _CLIENT_FIRST.fullmatch(_text(response))
        if match is None:
            raise SaslError("Invalid SCRAM client first message format")
        try:
            username = username_of(match["saslname"])
        except ValueError:
            raise SaslError("Invalid username") from None
        credential = self._lookup(username)
        if credential is None:
            raise SaslError("Authentication failed: Invalid user credentials")
        if match["authzid"] and match["authzid"] != match["saslname"]:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different "
                "from username"
            )
        if credential.iterations < self.mechanism.min_iterations:
            raise SaslError(
                f"Iterations {credential.iterations} is less than the minimum "
                f"{self.mechanism.min_iterations} for {self.mechanism.name}"
            )
        self._credential = credential
        self.authorization_id = username
        self._client_first_bare = match["bare"]
        self._nonce = match["nonce"] + _random_string()
        salt = base64.b64encode(credential.salt).decode()
        self._server_first = f"r={self._nonce},s={salt},i={credential.iterations}"
        self._state = _State.RECEIVE_CLIENT_FINAL
        return self._server_first.encode()

    def _client_final(self, response: bytes) -> bytes:
        match = _CLIENT_FINAL.fullmatch(_text(response))
        if match is None:
            raise SaslError("Invalid SCRAM client final message format")
        if match["nonce"] != self._nonce:
            raise SaslError("Invalid client nonce in the final client message.")
        credential = self._credential
        assert credential is not None
        auth_message = ",".join(
            (self._client_first_bare, self._server_first, match["without_proof"])
        ).encode()
        proof = base64.b64decode(match["proof"])
        signature = self.mechanism.hmac(credential.stored_key, auth_message)
        if len(proof) != len(signature):
            raise SaslError("Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(self.mechanism.hash(client_key), credential.stored_key):
            raise SaslError("Invalid client credentials")
        server_signature = self.mechanism.hmac(credential.server_key, auth_message)
        self._credential = None
        self._state = _State.COMPLETE
        return b"v=" + base64.b64encode(server_signature)


def _text(response: bytes) -> str:
    try:
        return response.decode()
    except UnicodeDecodeError:
        raise SaslError("SCRAM message is not UTF-8") from None
