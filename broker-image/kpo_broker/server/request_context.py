"""One request's envelope: its API, client, listener and principal (Kafka's ``RequestContext``)."""

from __future__ import annotations

from dataclasses import dataclass

from kpo_broker.security.principal import ANONYMOUS, KafkaPrincipal

__all__ = ["RequestContext"]


@dataclass(frozen=True)
class RequestContext:
    """One request's envelope.

    Attributes:
        api_key: the request's API key.
        api_version: the request's version.
        correlation_id: echoed in the response.
        client_id: the client's ``client.id`` (may be None).
        listener: name of the listener the request arrived on (e.g. ``PLAINTEXT``).
        peer: the client's (host, port).
        principal: who the connection authenticated as (``User:ANONYMOUS`` on PLAINTEXT
            listeners; Kafka's ``RequestContext.principal``), for authorization.
    """

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    listener: str
    peer: tuple[str, int] | None = None
    principal: KafkaPrincipal = ANONYMOUS
