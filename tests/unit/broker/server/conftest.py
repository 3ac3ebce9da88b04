"""Fixtures of the server unit tests: replica managers over real log dirs, in-process leaders."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kpo_broker.log.config import LogConfig
from kpo_broker.log.manager import LogManager
from kpo_broker.server import fetcher
from kpo_broker.server.replica_manager import ReplicaManager
from tests.unit.broker.server.replicas import (
    CONFIG,
    NOW_MS,
    InMemoryIsrWriter,
    InProcessLeaders,
    OpenBroker,
)


@pytest.fixture
def open_broker(tmp_path: Path) -> Iterator[OpenBroker]:
    """Open replica managers over real log dirs; every log manager is shut down afterwards."""
    managers: list[LogManager] = []

    def _open(
        broker_id: int,
        isr_writer: InMemoryIsrWriter | None = None,
        replica_lag_time_max_ms: int = 30000,
        config: LogConfig = CONFIG,
    ) -> ReplicaManager:
        manager = LogManager([tmp_path / f"broker-{broker_id}"], config)
        manager.startup(NOW_MS)
        managers.append(manager)
        return ReplicaManager(
            broker_id,
            manager,
            isr_writer if isr_writer is not None else InMemoryIsrWriter(),
            replica_lag_time_max_ms=replica_lag_time_max_ms,
        )

    yield _open
    for manager in managers:
        manager.shutdown()


@pytest.fixture
def network(monkeypatch: pytest.MonkeyPatch) -> InProcessLeaders:
    """Leaders served in-process to the replica fetchers, in place of their connections."""
    leaders = InProcessLeaders()
    monkeypatch.setattr(fetcher, "BrokerClient", leaders.connect_to)
    return leaders
