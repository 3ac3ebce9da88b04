"""Per-IP connection limits (Kafka's ConnectionQuotas)."""

from __future__ import annotations

import pytest

from kpo_broker.server.connection_quotas import (
    ConnectionQuotas,
    TooManyConnectionsError,
    canonical_address,
)


def test_connections_beyond_the_limit_are_refused_until_one_closes() -> None:
    quotas = ConnectionQuotas(2, {})
    quotas.inc("10.0.0.1")
    quotas.inc("10.0.0.1")
    with pytest.raises(TooManyConnectionsError) as refused:
        quotas.inc("10.0.0.1")
    assert (refused.value.address, refused.value.limit) == ("10.0.0.1", 2)
    quotas.inc("10.0.0.2")  # another address has its own count
    quotas.dec("10.0.0.1")
    quotas.inc("10.0.0.1")
    assert quotas.count("10.0.0.1") == 2


def test_overrides_by_ip_and_by_host_name() -> None:
    quotas = ConnectionQuotas(0, {"10.0.0.9": 1, "localhost": 3})
    assert quotas.limit("10.0.0.9") == 1
    assert quotas.limit("127.0.0.1") == 3
    assert quotas.limit("10.0.0.1") == 0
    with pytest.raises(TooManyConnectionsError):
        quotas.inc("10.0.0.1")


def test_ipv4_mapped_addresses_count_as_ipv4() -> None:
    assert canonical_address("::ffff:127.0.0.1") == "127.0.0.1"
    quotas = ConnectionQuotas(1, {})
    quotas.inc("127.0.0.1")
    with pytest.raises(TooManyConnectionsError):
        quotas.inc("::ffff:127.0.0.1")
    quotas.dec("::ffff:127.0.0.1")
    assert quotas.count("127.0.0.1") == 0


def test_an_unresolvable_override_host_is_refused() -> None:
    with pytest.raises(ValueError, match="cannot resolve"):
        ConnectionQuotas(5, {"no-such-host.invalid": 1})
