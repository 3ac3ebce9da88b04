"""A crash at every step of the cleaner's swap loses nothing (Kafka's ``.cleaned`` / ``.swap``).

The swap renames files: the cleaned segment's three files ``.cleaned`` -> ``.swap``, each
old segment's three files to ``.deleted`` (removed at once here), the new files
``.swap`` -> final names. The crash is simulated by an exception from the n-th rename
that bypasses all clean-up, for every n; the directory is then reopened as after a
restart, and must hold either the old or the cleaned segments, with the same latest
value per key and the same log end offset, and no ``.cleaned`` / ``.swap`` file left.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from kpo_broker.log.cleaner import Cleaner, LogToClean, Throttler
from kpo_broker.log.config import LogConfig
from kpo_broker.log.log import Log
from kpo_broker.log.offset_map import OffsetMap
from tests.unit.broker.log.batches import decode_records, make_batch
from tests.unit.broker.log.conftest import NOW_MS

CONFIG = LogConfig(segment_bytes=600, file_delete_delay_ms=0, cleanup_policy=("compact",))
OLD_SEGMENTS = 3
RENAMES = 3 + 3 * OLD_SEGMENTS + 3


class _Crash(BaseException):
    """The process died here: no clean-up code runs."""


def _latest(log: Log) -> dict[bytes | None, tuple[int, bytes | None]]:
    return {
        r.key: (r.offset, r.value)
        for r in decode_records(log.read(log.log_start_offset, 10**9).to_bytes())
    }


def _build(directory: Path) -> Log:
    log = Log.open(directory, CONFIG, now_ms=NOW_MS)
    for r in range(12):
        pairs = [(b"k%d" % k, b"v%d-%d" % (k, r)) for k in range(3)]
        batch = make_batch([v for _k, v in pairs], keys=[k for k, _v in pairs])
        log.append_as_leader(batch, 0, now_ms=NOW_MS)
    log.roll(NOW_MS)
    return log


@pytest.mark.parametrize("crash_at", range(RENAMES + 1))
def test_crash_during_swap_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, crash_at: int
) -> None:
    directory = tmp_path / "keyed-0"
    log = _build(directory)
    before, leo = _latest(log), log.log_end_offset
    # one group of the first OLD_SEGMENTS segments: the cleaning round ends at the 4th
    upper = log.segments[OLD_SEGMENTS].base_offset
    log.update_config(dataclasses.replace(CONFIG, segment_bytes=10**6))
    real_replace = os.replace
    renames = [0]

    def replace(src: object, dst: object) -> None:
        if renames[0] == crash_at:
            raise _Crash
        renames[0] += 1
        real_replace(src, dst)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "replace", replace)
    cleaner = Cleaner(0, OffsetMap(24 * 100), 4096, 0.9, Throttler(float("inf")), lambda _c: None)
    cleanable = LogToClean(
        log.topic_partition, log, 0, upper, 0, log.size_in_bytes, False, log.cleaner_fence
    )
    crashed = False
    try:
        cleaner.clean(cleanable, now_ms=NOW_MS)
    except _Crash:
        crashed = True
    monkeypatch.setattr(os, "replace", real_replace)
    assert crashed == (crash_at < RENAMES)
    if not crashed:
        assert renames[0] == RENAMES
        log.close()
    reopened = Log.open(directory, CONFIG, now_ms=NOW_MS)
    try:
        assert _latest(reopened) == before
        assert reopened.log_end_offset == leo
        names = [path.name for path in directory.iterdir()]
        assert not [n for n in names if n.endswith((".cleaned", ".swap", ".deleted"))], names
        offsets = [r.offset for r in decode_records(reopened.read(0, 10**9).to_bytes())]
        assert offsets == sorted(set(offsets))
        cleaned_away = len(offsets) < leo
        # the swap took effect once every new file had its .swap name
        assert cleaned_away == (crash_at >= 3)
    finally:
        reopened.close()
