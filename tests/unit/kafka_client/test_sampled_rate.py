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
