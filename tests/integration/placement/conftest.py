"""Fixtures for the placement job's tests on real parts (shared with the operator tests)."""

from tests.integration.operator.conftest import kafka_cluster_factory, stack_factory

__all__ = ["kafka_cluster_factory", "stack_factory"]
