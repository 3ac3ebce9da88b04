"""Per-IP connection limits, ``max.connections.per.ip`` and overrides (Kafka's ConnectionQuotas).

Kafka's SocketServer counts the open connections of each client address and closes a
new connection at accept when its address already has its maximum, logging
``TooManyConnectionsException``. The limit is ``max.connections.per.ip``, or the
address's entry in ``max.connections.per.ip.overrides`` (host names resolved once, at
start, as Kafka's ``InetAddress.getByName`` does).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Mapping

__all__ = ["ConnectionQuotas", "TooManyConnectionsError", "canonical_address"]


class TooManyConnectionsError(Exception):
    """A new connection from an address already at its maximum (TooManyConnectionsException).

    Attributes:
        address: the client IP address.
        limit: the maximum number of connections allowed from it.
    """

    def __init__(self, address: str, limit: int) -> None:
        super().__init__(f"too many connections from {address} (maximum {limit})")
        self.address = address
        self.limit = limit


def canonical_address(address: str) -> str:
    """Return ``address`` as compared by the quotas: IPv4-mapped IPv6 reads as IPv4.

    Args:
        address: an IPv4 or IPv6 address literal; anything else is returned unchanged.
    """
    try:
        parsed = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return address
    if isinstance(parsed, ipaddress.IPv6Address) and parsed.ipv4_mapped is not None:
        return str(parsed.ipv4_mapped)
    return str(parsed)


class ConnectionQuotas:
    """Counts open connections per client address and refuses those beyond the limit.

    Args:
        max_per_ip: ``max.connections.per.ip``, the default limit of every address.
        overrides: ``max.connections.per.ip.overrides``: host name or IP -> limit.

    Raises:
        ValueError: an override's host name cannot be resolved (Kafka fails to start too).
    """

    def __init__(self, max_per_ip: int, overrides: Mapping[str, int]) -> None:
        self.max_per_ip = max_per_ip
        self._overrides: dict[str, int] = {}
        for host, limit in overrides.items():
            for address in _resolve(host):
                self._overrides[address] = limit
        self._counts: dict[str, int] = {}

    def update(self, max_per_ip: int, overrides: Mapping[str, int]) -> None:
        """Take new limits (dynamic ``max.connections.per.ip`` and its overrides, KIP-226).

        Open connections above a lowered limit stay open, as in Kafka; new ones are
        refused until the count falls below it. An override whose host cannot be
        resolved is skipped with the others applied.
        """
        resolved: dict[str, int] = {}
        for host, limit in overrides.items():
            try:
                addresses = _resolve(host)
            except ValueError:
                continue
            for address in addresses:
                resolved[address] = limit
        self.max_per_ip = max_per_ip
        self._overrides = resolved

    def limit(self, address: str) -> int:
        """Return the maximum number of connections from ``address``."""
        return self._overrides.get(canonical_address(address), self.max_per_ip)

    def count(self, address: str) -> int:
        """Return the number of connections currently open from ``address``."""
        return self._counts.get(canonical_address(address), 0)

    def inc(self, address: str) -> None:
        """Count a new connection from ``address``.

        Raises:
            TooManyConnectionsError: ``address`` already has its maximum; nothing is counted.
        """
        key = canonical_address(address)
        limit = self.limit(key)
        current = self._counts.get(key, 0)
        if current >= limit:
            raise TooManyConnectionsError(key, limit)
        self._counts[key] = current + 1

    def dec(self, address: str) -> None:
        """Forget one connection from ``address`` counted by :meth:`inc`."""
        key = canonical_address(address)
        remaining = self._counts.get(key, 0) - 1
        if remaining > 0:
            self._counts[key] = remaining
        else:
            self._counts.pop(key, None)


def _resolve(host: str) -> set[str]:
    """Return the canonical addresses of a host name or IP literal."""
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except OSError as exc:
        raise ValueError(f"cannot resolve {host!r}: {exc}") from exc
    return {canonical_address(str(info[4][0])) for info in infos}
