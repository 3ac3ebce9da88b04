"""The throttled-move finish model: Kafka's sampled replication quota replayed (pure logic)."""

from __future__ import annotations

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
