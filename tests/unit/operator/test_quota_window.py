"""The throttled-move finish model: Kafka's sampled replication quota replayed (pure logic)."""

from __future__ import annotations

import random

import pytest

from kpo_operator.quota_window import (
    MAX_STEPS,
    QuotaWindow,
    sampled_rate,
    throttled_finish,
)

MB = 1_000_000


def test_rate_counts_at_least_one_window_and_expires_samples_without_recent_bytes() -> None:
    quota = sampled_rate(QuotaWindow(11, 1.0))
    assert quota.measure(0.0) == 0.0
    quota.record(11 * MB, 0.0)
    assert quota.measure(0.5) == pytest.approx(11 * MB)  # one window at least
    assert quota.measure(5.0) == pytest.approx(11 * MB / 5.0)
    quota.record(MB, 3.2)  # a new sample
    assert quota.measure(10.7) == pytest.approx(12 * MB / 10.7)
    # The first sample's last bytes are 11 s old: reset; 1 MB since the second began.
    assert quota.measure(11.0) == pytest.approx(MB / 7.8)
    assert quota.measure(14.2) == 0.0


def kafka_move(total: float, rate: float, speed: float, window: QuotaWindow, poll_s: float):
    """A move as Kafka runs it (fine steps of the quota rule); polls and the finish time."""
    quota = sampled_rate(window)
    t, done, polls, dt = 0.0, 0.0, [(0.0, 0)], 0.005
    next_poll = poll_s
    while done < total:
        if quota.measure(t) <= rate:
            chunk = min(speed * dt, total - done)
            quota.record(chunk, t)
            done += chunk
        t += dt
        if t >= next_poll:
            polls.append((t, int(done)))
            next_poll += poll_s
    return polls, t


@pytest.mark.parametrize(("total_mb", "poll_s"), [(40, 2.0), (40, 1.0), (70, 2.0), (25, 1.5)])
def test_the_eta_ten_seconds_in_matches_the_quota(total_mb: int, poll_s: float) -> None:
    window, rate = QuotaWindow(), 1 * MB
    polls, finish = kafka_move(total_mb * MB, rate, 30 * MB, window, poll_s)
    seen = [p for p in polls if p[0] <= 10.0]
    predicted = seen[-1][0] + (throttled_finish(seen, total_mb * MB, rate, window) or 0)
    assert abs(predicted - finish) <= 0.05 * finish, (predicted, finish)


def test_two_samples_give_a_nearly_steady_rate() -> None:
    window, rate = QuotaWindow(2, 1.0), 4 * MB
    polls, finish = kafka_move(50 * MB, rate, 100 * MB, window, 2.0)
    seen = [p for p in polls if p[0] <= 4.0]
    predicted = seen[-1][0] + (throttled_finish(seen, 50 * MB, rate, window) or 0)
    assert abs(predicted - finish) <= 0.1 * finish
    assert finish == pytest.approx(50 / 4, rel=0.1)


def test_done_unknown_and_expired_baselines() -> None:
    window = QuotaWindow()
    assert throttled_finish([], MB, MB, window) is None
    assert throttled_finish([(0.0, 0)], MB, 0, window) is None
    assert throttled_finish([(0.0, 0), (2.0, MB)], MB, MB, window) == 0.0
    # 11 MB copied more than a window ago no longer hold the quota: a burst comes at once.
    fresh = throttled_finish([(100.0, 11 * MB)], 15 * MB, MB, window, baseline_expired=True)
    held = throttled_finish([(100.0, 11 * MB)], 15 * MB, MB, window)
    assert fresh is not None and held is not None
    assert fresh == pytest.approx(4.0, abs=0.2)  # at the throttle, the fastest speed known
    assert held > 10.0


def test_a_move_never_faster_than_its_throttle_goes_on_at_the_speed_seen() -> None:
    window, rate = QuotaWindow(), 1 * MB
    polls, finish = kafka_move(30 * MB, rate, 0.9 * MB, window, 1.0)
    seen = [p for p in polls if p[0] <= 10.0]
    predicted = seen[-1][0] + (throttled_finish(seen, 30 * MB, rate, window) or 0)
    assert finish == pytest.approx(30 / 0.9, rel=0.01)
    assert abs(predicted - finish) <= 0.05 * finish


def test_long_moves_are_extrapolated_at_the_throttle() -> None:
    window = QuotaWindow()
    found = throttled_finish([(0.0, 0)], 10_000 * MB, MB, window)
    assert found is not None
    assert found == pytest.approx(10_000 - 10, rel=0.01)
    assert MAX_STEPS * window.sample_s / 10 < found


def test_window_from_broker_configs() -> None:
    assert QuotaWindow.from_configs({}) == QuotaWindow(11, 1.0)
    configs = {"replication.quota.window.num": "2", "replication.quota.window.size.seconds": "3"}
    assert QuotaWindow.from_configs(configs) == QuotaWindow(2, 3.0)
    assert QuotaWindow.from_configs({"replication.quota.window.num": "x"}) == QuotaWindow()
    with pytest.raises(ValueError):
        QuotaWindow(0, 1.0)


# Replica sizes (bytes) of moves recorded on Apache Kafka 4.4 (KRaft, 11 x 1 s quota window,
# leader and follower throttles of 512 KiB/s, replica.fetch.max.bytes 1 MiB), seconds after
# the reassignment was submitted; each size holds until the next entry, the last one is
# the end. One partition (one fetch of two 496 KiB batches every 2 s):
ONE_PARTITION = [
    (0.23, 0), (0.67, 1016612), (3.04, 2033224), (5.04, 3049836), (7.13, 4066448),
    (9.25, 5083060), (11.34, 6099672), (13.38, 7116284), (15.34, 8132896), (17.38, 9149508),
    (19.4, 10166120), (21.44, 11182732), (23.33, 12199344), (25.47, 13215956),
    (27.48, 14232568), (29.36, 15249180), (31.56, 16265792), (32.6, 17282404),
    (34.56, 18299016), (36.61, 19315628), (38.64, 19938760),
]  # fmt: skip
# Four partitions from one leader into one broker (their fetches land together):
FOUR_PARTITIONS = [
    (0.04, 0), (0.16, 1016612), (0.32, 3049836), (6.39, 7116284), (14.53, 11182732),
    (22.54, 15249180), (27.59, 19315628), (33.6, 20824273), (38.74, 20988284),
]  # fmt: skip
KIB = 1024


def polled(timeline: list[tuple[float, int]], seed: int, until_s: float) -> list[tuple[float, int]]:
    """Poll ``timeline`` 1-3 s apart (a busy operator's polls), until ``until_s`` at least."""
    rng = random.Random(seed)
    t, polls = rng.uniform(0.2, 1.5), []
    while True:
        polls.append((t, max(b for at, b in timeline if at <= t) if t >= timeline[0][0] else 0))
        if t >= until_s:
            return polls
        t += rng.uniform(1.0, 3.0)


@pytest.mark.parametrize("timeline", [ONE_PARTITION, FOUR_PARTITIONS], ids=["one", "four"])
def test_the_eta_ten_seconds_into_moves_recorded_on_kafka(
    timeline: list[tuple[float, int]],
) -> None:
    """Whole fetches seen between irregular polls: every ETA 10 s in within 15% of the end.

    With the polls 1-3 s apart, a copy at its throttle in fetches of 2 s worth can show one
    fetch in every stretch of two samples or more and so never look faster than its
    throttle: the copy seen faster than the throttle between two polls, the move's start
    included, tells that the quota holds it back.
    """
    window, rate, total, finish = QuotaWindow(), 512 * KIB, timeline[-1][1], timeline[-1][0]
    for seed in range(60):
        seen = polled(timeline, seed, 10.0)
        found = throttled_finish(seen, total, rate, window, started=-0.5)  # status: whole s
        assert found is not None
        error = (seen[-1][0] + found - finish) / finish
        assert abs(error) <= 0.15, (seed, error, seen)


def test_a_copy_in_whole_fetches_at_its_throttle_is_not_taken_for_a_slower_one() -> None:
    """Polls 2.4 s apart see one fetch each: 0.4 MiB/s, but the first fetch came at once."""
    window, rate, total, finish = QuotaWindow(), 512 * KIB, ONE_PARTITION[-1][1], 38.64
    seen = [(1.2 + 2.4 * i, 1016612 * (i + 1)) for i in range(5)]
    assert seen == polled_at(ONE_PARTITION, [t for t, _ in seen])
    unknown_start = throttled_finish(seen, total, rate, window)
    started = throttled_finish(seen, total, rate, window, started=-0.5)
    assert unknown_start is not None and started is not None
    assert seen[-1][0] + unknown_start > 1.15 * finish  # goes on at the speed seen
    assert abs(seen[-1][0] + started - finish) <= 0.05 * finish


def polled_at(timeline: list[tuple[float, int]], times: list[float]) -> list[tuple[float, int]]:
    return [(t, max(b for at, b in timeline if at <= t)) for t in times]
