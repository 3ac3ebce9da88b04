from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kpo_broker.log.config import LogConfig
from kpo_broker.log.log import Log

NOW_MS = 1_700_000_000_000

OpenLog = Callable[..., Log]


@pytest.fixture
def open_log(tmp_path: Path) -> Iterator[OpenLog]:
    """Open ``<tmp>/my.topic-name-3`` with a small config; every log is closed afterwards."""
    opened: list[Log] = []

    def _open(
        config: LogConfig | None = None,
        recovery_point: int = 0,
        name: str = "my.topic-name-3",
        **kwargs: int,
    ) -> Log:
        cfg = config or LogConfig(file_delete_delay_ms=0, **kwargs)
        log = Log.open(tmp_path / name, cfg, recovery_point=recovery_point, now_ms=NOW_MS)
        opened.append(log)
        return log

    yield _open
    for log in opened:
        log.close()
