from datetime import UTC, datetime, timedelta

import pytest

from kpo_kafka.admin_types import PartitionInfo
from kpo_kafka.specs import PartitionTarget
from kpo_kafka.states import MoveState
from kpo_operator.model import ClusterView
from kpo_operator.progress import (
    PartitionProgress,
    RateEstimator,
    Totals,
    eta,
    format_time,
    partition_progress,
    predicted_duration,
    totals,
)

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
TARGET = PartitionTarget(topic="t", partition=0, replicas=[2, 3, 1])
ORIGINAL = (0, 1, 2)  # adding 3, removing 0
SIZES = {(0, "t", 0): 1000, (3, "t", 0): 250, (2, "t", 0): 990}


@pytest.mark.parametrize(
    ("state", "reassigning", "expected"),
    [
        (  # not yet submitted
            PartitionInfo((0, 1, 2), (0, 1, 2), 0),
            {},
            ("Pending", (3,), (0,), 250, 1000),
        ),
        (  # in flight: AR = RAR + OAR
            PartitionInfo((2, 3, 1, 0), (0, 1, 2), 0, adding=(3,), removing=(0,)),
            {("t", 0): "ns/me"},
            ("Moving", (3,), (0,), 250, 1000),
        ),
        (  # adding replica bigger than leader (leader truncated): capped
            PartitionInfo((2, 3, 1, 0), (2, 1), 2, adding=(3,), removing=(0,)),
            {("t", 0): "ns/me"},
            ("Moving", (3,), (0,), 200, 200),
        ),
        (  # done: AR == RAR, no longer listed
            PartitionInfo((2, 3, 1), (2, 3, 1), 2),
            {},
            ("Completed", (), (), 990, 990),
        ),
    ],
)
def test_partition_progress(
    state: PartitionInfo,
    reassigning: dict[tuple[str, int], str],
    expected: tuple[str, tuple[int, ...], tuple[int, ...], int, int],
) -> None:
    view = ClusterView(topics={"t": {0: state}}, reassigning=reassigning)
    sizes = dict(SIZES)
    if state.leader == 2 and reassigning:
        sizes[(2, "t", 0)] = 200
    p = partition_progress(TARGET, ORIGINAL, view, sizes)
    assert (p.state, p.adding, p.removing, p.bytes_done, p.bytes_total) == expected
    assert (p.original_replicas, p.target_replicas, p.leader) == (ORIGINAL, (2, 3, 1), state.leader)


def test_partition_progress_status_dict_and_missing_partition() -> None:
    p = partition_progress(TARGET, ORIGINAL, ClusterView(), {})
    assert p.to_status() == {
        "topic": "t",
        "partition": 0,
        "state": "Pending",
        "originalReplicas": [0, 1, 2],
        "targetReplicas": [2, 3, 1],
        "addingReplicas": [3],
        "removingReplicas": [0],
        "isr": [],
        "leader": -1,
        "bytesDone": 0,
        "bytesTotal": 0,
    }


def _pp(state: str, done: int, total: int) -> PartitionProgress:
    return PartitionProgress("t", 0, MoveState(state), (), (), (), (), (), 0, done, total)


@pytest.mark.parametrize(
    ("parts", "progress"),
    [
        ([_pp("Moving", 42, 100)], "42%"),
        ([_pp("Moving", 999, 1000)], "99%"),
        ([_pp("Completed", 100, 100), _pp("Moving", 0, 100)], "50%"),
        ([_pp("Completed", 0, 0)], "100%"),
        ([_pp("Moving", 0, 0)], "0%"),
        ([], "100%"),
    ],
)
def test_totals_progress(parts: list[PartitionProgress], progress: str) -> None:
    assert totals(parts).progress == progress


def test_totals_status_dict() -> None:
    t = totals([_pp("Completed", 100, 100), _pp("Moving", 20, 300)])
    assert t == Totals(2, 1, 120, 400)
    assert t.to_status(rate=12.7) == {
        "partitions": 2,
        "partitionsDone": 1,
        "bytesDone": 120,
        "bytesTotal": 400,
        "progress": "30%",
        "rate": 12,
    }
    assert "rate" not in t.to_status()


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_rate_estimator_sliding_window() -> None:
    clock = FakeClock()
    est = RateEstimator(window_s=10, clock=clock)
    assert est.rate() is None
    est.observe(0)
    assert est.rate() is None
    for _ in range(5):  # 100 bytes/s for 5 s
        clock.now += 1
        est.observe(est_bytes := int((clock.now - 100) * 100))
    assert est.rate() == pytest.approx(100)
    for _ in range(20):  # then 1000 bytes/s: after the window only the new rate counts
        clock.now += 1
        est_bytes += 1000
        est.observe(est_bytes)
    assert est.rate() == pytest.approx(1000)
    est.observe(10)  # fewer bytes than before: restart
    assert est.rate() is None


def test_rate_estimator_rejects_bad_window() -> None:
    with pytest.raises(ValueError, match="window_s"):
        RateEstimator(window_s=0)


@pytest.mark.parametrize(
    ("remaining", "rate", "expected"),
    [
        (1000, 100.0, NOW + timedelta(seconds=10)),
        (0, None, NOW),
        (10, None, None),
        (10, 0.0, None),
        (10, -5.0, None),
    ],
)
def test_eta(remaining: int, rate: float | None, expected: datetime | None) -> None:
    assert eta(remaining, rate, NOW) == expected


def test_predicted_duration_and_format_time() -> None:
    assert predicted_duration(50 * 2**20, 10 * 2**20) == timedelta(seconds=5)
    assert predicted_duration(10, None) is None
    assert format_time(NOW) == "2026-01-02T03:04:05Z"
