"""SCRAM credentials of every user, as the broker knows them (Kafka's ``CredentialCache``).

Kept in ZooKeeper where Kafka keeps them: ``/config/users/<sanitized name>`` holds
``{"version":1,"config":{"SCRAM-SHA-512":"salt=...,stored_key=...,server_key=...,iterations=4096"}}``
and every change is announced by a ``/config/changes`` notification of entity type
``users``, which each broker applies to its cache (Kafka's ``UserConfigHandler``).
User names are sanitized as Kafka's ``Sanitizer`` does (URL encoding, ``*`` as ``%2A``,
space as ``%20``, ``~`` kept).
"""

from __future__ import annotations

import logging
import threading
import urllib.parse
from collections.abc import Mapping

from kpo_broker.security.scram import MECHANISMS, ScramCredential, credential_from_string

__all__ = ["CredentialCache", "desanitize", "sanitize", "scram_credentials_of"]

log = logging.getLogger(__name__)


def sanitize(name: str) -> str:
    """Kafka's ``Sanitizer.sanitize``: a user name as a ZooKeeper path segment."""
    return urllib.parse.quote(name, safe="-_.~").replace("*", "%2A")


def desanitize(name: str) -> str:
    """Kafka's ``Sanitizer.desanitize``."""
    return urllib.parse.unquote(name)


def scram_credentials_of(config: Mapping[str, str]) -> dict[str, ScramCredential]:
    """Return the SCRAM credentials in one user's entity config, by mechanism name.

    A malformed credential is skipped with a warning (its value is not logged).
    """
    out: dict[str, ScramCredential] = {}
    for mechanism in MECHANISMS:
        value = config.get(mechanism)
        if value is None:
            continue
        try:
            out[mechanism] = credential_from_string(value)
        except ValueError:
            log.warning("ignoring a malformed %s credential", mechanism)
    return out


class CredentialCache:
    """Mechanism -> user -> credential; updated from ZooKeeper, read by authenticators.

    Thread-safe: updates may come from ZooKeeper's threads.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users: dict[str, dict[str, ScramCredential]] = {}

    def update_user(self, user: str, config: Mapping[str, str]) -> None:
        """Replace ``user``'s credentials with those in its entity config (none = removed)."""
        credentials = scram_credentials_of(config)
        with self._lock:
            if credentials:
                self._users[user] = credentials
            else:
                self._users.pop(user, None)

    def get(self, mechanism: str, user: str) -> ScramCredential | None:
        """Return the credential of ``user`` for ``mechanism``, or None."""
        with self._lock:
            return self._users.get(user, {}).get(mechanism)

    def users(self) -> list[str]:
        """Names of the users with at least one credential."""
        with self._lock:
            return sorted(self._users)
