"""Fixtures for the operator's tests on real brokers (shared with the broker tests)."""

from tests.integration.broker.conftest import kafka_cluster_factory  # noqa: F401
