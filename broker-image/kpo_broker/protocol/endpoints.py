"""Listener endpoints and security protocols, as configured and as sent on the wire.

A listener is ``NAME://host:port`` (Kafka's ``EndPoint``); its security
protocol comes from ``listener.security.protocol.map``. The same four fields
travel in UpdateMetadata's live broker endpoints, where the protocol is an
int16 id (:attr:`SecurityProtocol.id`), and in ``/brokers/ids/<id>``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from kpo_kafka.security import SecurityProtocol

__all__ = [
    "DEFAULT_PROTOCOL_MAP",
    "Endpoint",
    "parse_listeners",
    "parse_protocol_map",
]

# Kafka's listener syntax: NAME://host:port, the host optionally in brackets (IPv6).
_LISTENER = re.compile(r"^(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)$")


DEFAULT_PROTOCOL_MAP: Mapping[str, SecurityProtocol] = {p.value: p for p in SecurityProtocol}
"""Kafka's default ``listener.security.protocol.map``: each protocol name maps to itself."""


@dataclass(frozen=True)
class Endpoint:
    """One listener: ``NAME://host:port``.

    Attributes:
        name: listener name, upper-cased (``PLAINTEXT``, ``INTERNAL``...).
        host: host to bind or advertise; ``""`` means all interfaces.
        port: TCP port; 0 in ``listeners`` binds an ephemeral port.
        security_protocol: from ``listener.security.protocol.map``.
    """

    name: str
    host: str
    port: int
    security_protocol: SecurityProtocol


def parse_protocol_map(value: str) -> dict[str, SecurityProtocol]:
    """Parse ``listener.security.protocol.map`` (``NAME:PROTOCOL,...``), names upper-cased.

    Raises:
        ValueError: an entry is not ``NAME:PROTOCOL`` or names an unknown protocol.
    """
    mapping: dict[str, SecurityProtocol] = {}
    for entry in (part.strip() for part in value.split(",")):
        if not entry:
            continue
        name, sep, protocol = entry.partition(":")
        if not sep or not name.strip():
            raise ValueError(f"{entry!r} is not of the form NAME:PROTOCOL")
        try:
            mapping[name.strip().upper()] = SecurityProtocol(protocol.strip().upper())
        except ValueError:
            raise ValueError(f"unknown security protocol in {entry!r}") from None
    return mapping


def parse_listeners(
    value: str, protocol_map: Mapping[str, SecurityProtocol]
) -> tuple[Endpoint, ...]:
    """Parse a ``listeners``-style list (``NAME://host:port,...``; IPv6 hosts in brackets).

    Raises:
        ValueError: malformed entry, port outside 0-65535, listener name missing
            from ``protocol_map``, or a name used twice.
    """
    endpoints: list[Endpoint] = []
    for entry in (part.strip() for part in value.split(",")):
        if not entry:
            continue
        match = _LISTENER.match(entry)
        if match is None:
            raise ValueError(f"{entry!r} is not of the form NAME://host:port")
        name, host, port = match.group(1).upper(), match.group(2), int(match.group(3))
        if not 0 <= port <= 65535:
            raise ValueError(f"port {port} of {entry!r} is outside 0-65535")
        if name not in protocol_map:
            raise ValueError(f"no security protocol for listener {name} in {entry!r}")
        if any(e.name == name for e in endpoints):
            raise ValueError(f"listener name {name} is used twice")
        endpoints.append(Endpoint(name, host, port, protocol_map[name]))
    return tuple(endpoints)
