"""Fixtures of the reconciler unit tests: a fresh fake operator, and one with a move running."""

from __future__ import annotations

import pytest

from tests.unit.operator.reassignment_env import Env, start_moving


@pytest.fixture
def env() -> Env:
    """One operator process over an in-memory Kafka cluster and object store."""
    return Env()


@pytest.fixture
def moving(env: Env) -> Env:
    """``env`` with a throttled reassignment submitted and moving."""
    return start_moving(env)
