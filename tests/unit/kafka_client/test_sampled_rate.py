"""Kafka's quota rate (``SimpleRate`` over a summing ``SampledStat``), pure logic."""

import pytest

from kpo_kafka.sampled_rate import SampledRate


def test_a_check_before_any_record_opens_the_first_sample() -> None:
    # Kafka's SampledStat.oldest(now) creates the sample the next records fall into.
    rate = SampledRate(2, 1.0)
    assert rate.measure(10.0) == 0.0
    rate.record(100, 10.9)  # same sample (opened at 10.0)
    assert rate.measure(11.5) == pytest.approx(100 / 1.5)


def test_bad_windows_are_refused() -> None:
    with pytest.raises(ValueError):
        SampledRate(0, 1.0)
    with pytest.raises(ValueError):
        SampledRate(1, 0.0)


def _loop(
    rate: SampledRate, now: float, step: float, limit: float, chunk: float, left: float, steps: int
) -> tuple[float, float, float]:
    """What ``fetch_under`` stands for: measure and record at every step."""
    t = now
    for _ in range(steps):
        if rate.measure(t) <= limit:
            fetched = min(chunk, left)
            rate.record(fetched, t)
            left -= fetched
            if left <= 0:
                return t, left, fetched
        t += step
    return t, left, 0.0


@pytest.mark.parametrize(
    ("samples", "window", "limit", "chunk", "left", "primed"),
    [
        (11, 1.0, 1e6, 1e5, 5e7, 0.0),  # fetches as fast as the throttle: nearly every step
        (11, 1.0, 1e6, 3e6, 5e7, 0.0),  # fetches 30x the throttle: mostly waiting
        (11, 1.0, 1e6, 1e5, 3e5, 2e7),  # a burst recorded before: waits for it to expire
        (2, 1.0, 4e6, 1e7, 9e7, 0.0),
        (5, 2.0, 2.5e5, 2.5e4, 1e9, 1e6),  # runs out of steps first
    ],
)
def test_fetch_under_steps_exactly_as_measure_and_record(
    samples: int, window: float, limit: float, chunk: float, left: float, primed: float
) -> None:
    # The operator's ETA replays the quota with it: the same answer, to the last bit.
    fast, slow = SampledRate(samples, window), SampledRate(samples, window)
    if primed:
        fast.record(primed, 999.5)
        slow.record(primed, 999.5)
    expected = _loop(slow, 1000.0, window / 10, limit, chunk, left, 3000)
    assert fast.fetch_under(1000.0, window / 10, limit, chunk, left, max_steps=3000) == expected
    assert fast.measure(expected[0] + 0.05) == slow.measure(expected[0] + 0.05)


def test_fetch_under_stops_at_the_end_and_above_until_bounds_the_wait() -> None:
    rate = SampledRate(11, 1.0)
    rate.record(11e6, 0.0)  # 11 MB at once: above 1 MB/s until 11 s
    until = rate.above_until(1e6)
    assert until == pytest.approx(11.0)
    assert all(rate.measure(t / 10) > 1e6 for t in range(1, 105))
    t, left, last = rate.fetch_under(1.0, 0.1, 1e6, 1e5, 5e5, end=5.0)
    assert (left, last) == (5e5, 0.0) and 5.0 <= t < 5.1 + 1e-9  # first step at or after end
    assert SampledRate(11, 1.0).above_until(1e6) == float("-inf")
