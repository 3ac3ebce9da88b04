"""When a throttled move ends, given Kafka's sampled replication quota (pure logic).

Kafka throttles replication with a rate measured over ``replication.quota.window.num``
samples of ``replication.quota.window.size.seconds`` (default 11 x 1 s):
``ReplicationQuotaManager`` records the throttled bytes in a ``SimpleRate`` (a ``Rate`` over
a ``SampledStat``; KIP-73) and a follower fetches a throttled partition (the leader serves
it) only while that rate is not above ``follower.replication.throttled.rate``. A
``SimpleRate`` divides the bytes of its live samples by the time since the oldest sample
began, counted as at least one sample window: a move may copy one window's worth at once,
then goes at the throttle, in whole fetches (``replica.fetch.max.bytes``). The rate
measured in the first seconds is thus above the throttle, and the bytes seen early depend
on when the brokers started copying, so dividing the bytes left by it promises too early an
end; :func:`throttled_finish` replays the quota's samples from the bytes observed so far
and steps Kafka's rule forward to the last byte, at the speed the copy was seen to reach.

A replica grows by whole fetches: at a throttle of half a ``replica.fetch.max.bytes`` per
second (1 MiB by default) a fetch lands every 2 s or so, and several partitions fetched from
one leader land together. Between two polls a copy at its throttle may thus show one fetch
or none, and over any stretch of polls it can look slower than its throttle; a copy seen to
go faster than its throttle between two polls (the move's start included) is taken to be
held back by the quota, not by the brokers' speed.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from kpo_kafka.sampled_rate import SampledRate

#: Kafka's broker configs of the replication quota window and their defaults.
WINDOW_NUM = "replication.quota.window.num"
WINDOW_SIZE = "replication.quota.window.size.seconds"
DEFAULT_WINDOW_NUM = 11
DEFAULT_WINDOW_SIZE_S = 1.0

#: Steps of the forward replay before the rest is extrapolated at the throttle.
MAX_STEPS = 6000


@dataclass(frozen=True)
class QuotaWindow:
    """The replication quota's samples: ``samples`` windows of ``sample_s`` seconds each.

    Attributes:
        samples: ``replication.quota.window.num`` (>= 1).
        sample_s: ``replication.quota.window.size.seconds`` (> 0).

    Raises:
        ValueError: a value out of range.
    """

    samples: int = DEFAULT_WINDOW_NUM
    sample_s: float = DEFAULT_WINDOW_SIZE_S

    def __post_init__(self) -> None:
        if self.samples < 1 or self.sample_s <= 0:
            raise ValueError(f"bad quota window: {self.samples} samples of {self.sample_s} s")

    @classmethod
    def from_configs(cls, configs: dict[str, str]) -> QuotaWindow:
        """Read the two broker configs (missing or unparsable: Kafka's defaults)."""
        try:
            samples = int(configs.get(WINDOW_NUM, DEFAULT_WINDOW_NUM))
            size = float(configs.get(WINDOW_SIZE, DEFAULT_WINDOW_SIZE_S))
            return cls(samples, size)
        except ValueError:
            return cls()


def sampled_rate(window: QuotaWindow) -> SampledRate:
    """Return Kafka's quota rate over ``window``, times in s (:mod:`kpo_kafka.sampled_rate`)."""
    return SampledRate(window.samples, window.sample_s)


def throttled_finish(
    history: Sequence[tuple[float, int]],
    bytes_total: int,
    rate: float,
    window: QuotaWindow,
    *,
    baseline_expired: bool = False,
    started: float | None = None,
) -> float | None:
    """Return the seconds from the last observation until ``bytes_total`` bytes are copied.

    Args:
        history: ``(time s, bytes done)`` observations in time order (a monotonic clock),
            e.g. the operator's progress polls since the move started.
        bytes_total: Bytes the move copies in all.
        rate: The throttle in bytes/s as it applies to these bytes (> 0).
        window: The brokers' quota window.
        baseline_expired: The bytes of the first observation were copied longer than a
            window ago (the operator started after the move), so they no longer count in
            Kafka's rate.
        started: When the move started, on the observations' clock (s): the bytes of the
            first observation were copied since then, which tells the speed of the first
            fetches. ``None`` when not known; ignored with ``baseline_expired``.

    Returns:
        The predicted seconds, 0 when done, or ``None`` without observations or a rate.

    Fetches run at the fastest speed observed over two quota samples or more (``rate``
    before any byte moved), at least ``rate`` once the copy was seen faster than ``rate``
    between two observations (its fetches are then held back by the quota, whole fetches
    making slower stretches look slower than the copy can go; a move never seen faster
    than its throttle goes on at the speed seen), whenever the replayed rate is not above
    ``rate``. The bytes between two observations are placed where that rule puts them
    (from the earlier observation on, as soon as the quota allows; what it cannot place is
    recorded at the later one), so the replayed samples expire when Kafka's do. Beyond
    :data:`MAX_STEPS` steps the rest is extrapolated at the lower of ``rate`` and that
    speed (the quota's long-run pace).
    """
    if not history or rate <= 0:
        return None
    last_t, last_bytes = history[-1]
    remaining = bytes_total - last_bytes
    if remaining <= 0:
        return 0.0
    quota = sampled_rate(window)
    step = window.sample_s / 10
    first_t, first_bytes = history[0]
    seen = list(history)
    if started is not None and not baseline_expired and started < first_t and first_bytes > 0:
        seen.insert(0, (started, 0))
    speed = max(_interval_speeds(seen, 2 * window.sample_s), default=rate)
    if speed < rate and _fastest_interval(seen) > rate:
        speed = rate
    if not baseline_expired and first_bytes > 0:
        quota.record(first_bytes, first_t)
    for (t0, b0), (t1, b1) in itertools.pairwise(history):
        _replay(quota, b1 - b0, t0, t1, rate, speed, step)
    t, left, chunk = quota.fetch_under(
        last_t, step, rate, speed * step, float(remaining), max_steps=MAX_STEPS
    )
    if left <= 0:
        return t + chunk / speed - last_t
    return t - last_t + left / min(rate, speed)


def _interval_speeds(history: Sequence[tuple[float, int]], span_s: float) -> list[float]:
    """Bytes/s over the shortest stretch of at least ``span_s`` seconds from each observation.

    Only stretches in which bytes were copied count. Replica sizes grow by whole fetches,
    so shorter stretches would overstate the speed; the stretches overlap, so that one of
    them spans two fetches whenever the polls allow it.
    """
    speeds: list[float] = []
    end = 0
    for t0, b0 in history:
        while end < len(history) and history[end][0] - t0 < span_s:
            end += 1
        if end == len(history):
            break
        t1, b1 = history[end]
        if b1 > b0:
            speeds.append((b1 - b0) / (t1 - t0))
    return speeds


def _fastest_interval(history: Sequence[tuple[float, int]]) -> float:
    """Bytes/s between the two consecutive observations that saw the fastest copy (0: none)."""
    return max(
        ((b1 - b0) / (t1 - t0) for (t0, b0), (t1, b1) in itertools.pairwise(history) if t1 > t0),
        default=0.0,
    )


def _replay(
    quota: SampledRate,
    copied: int,
    start: float,
    end: float,
    rate: float,
    speed: float,
    step: float,
) -> None:
    """Record ``copied`` bytes observed between ``start`` and ``end`` as Kafka would copy them."""
    _, left, _ = quota.fetch_under(start, step, rate, speed * step, float(copied), end=end)
    if left > 0:
        quota.record(left, end)
