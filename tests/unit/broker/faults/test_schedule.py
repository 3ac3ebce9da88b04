from __future__ import annotations

from collections import Counter

import pytest

from tests.integration.broker.faults.schedule import FaultKind, build_schedule


def test_the_same_seed_gives_the_same_schedule() -> None:
    assert build_schedule(7, 20, 6) == build_schedule(7, 20, 6)
    assert build_schedule(7, 20, 6) != build_schedule(8, 20, 6)


def test_every_round_has_every_kind_once() -> None:
    kinds = len(FaultKind)
    schedule = build_schedule(3, 4 * kinds + 2, 6)
    assert [f.index for f in schedule] == list(range(4 * kinds + 2))
    for start in range(0, 4 * kinds, kinds):
        assert {f.kind for f in schedule[start : start + kinds]} == set(FaultKind)
    counts = Counter(f.kind for f in schedule)
    assert min(counts.values()) >= 4
    assert all(0 <= f.partition < 6 and 0.5 <= f.pause_s <= 2.0 for f in schedule)


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError):
        build_schedule(1, -1, 3)
    with pytest.raises(ValueError):
        build_schedule(1, 3, 0)
    with pytest.raises(ValueError):
        build_schedule(1, 3, 3, frozenset())
