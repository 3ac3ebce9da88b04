"""Kafka's windowed rate of a quota: ``SimpleRate`` over a summing ``SampledStat`` (pure logic).

The rate Kafka 3.9's ``ReplicationQuotaManager`` checks against
``leader.replication.throttled.rate`` / ``follower.replication.throttled.rate`` (KIP-73),
configured by ``replication.quota.window.num`` = N and
``replication.quota.window.size.seconds`` = W:

* ``record`` adds to the current sample; a sample covers W from its start, and a record
  arriving later starts the next one. N + 1 slots are reused round-robin (one more than N,
  so that a sample overlapping the start of the monitored window still counts; a reused
  slot is cleared first).
* ``measure`` opens the first sample if there is none (``SampledStat.oldest``), clears
  every sample whose *last record* is N*W or more in the past
  (``SampledStat.purgeObsoleteSamples``: bytes recorded late in a sample count for N*W,
  however early the sample began), then divides the sum of the samples by the time since
  the oldest sample began, counted as at least one window (``SimpleRate.windowSize``).

Times are in any one unit (seconds or milliseconds); the rate is per that unit.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class _Sample:
    """One sample (Kafka's ``SampledStat.Sample``)."""

    start: float
    last_event: float
    value: float = 0.0

    def reset(self, now: float) -> None:
        self.start = now
        self.last_event = now
        self.value = 0.0


class SampledRate:
    """A rate over ``samples`` windows of ``window`` each, as described in the module docstring.

    Args:
        samples: N (``replication.quota.window.num``), >= 1.
        window: W (``replication.quota.window.size.seconds``, in the caller's time unit), > 0.

    Raises:
        ValueError: ``samples`` < 1 or ``window`` <= 0.
    """

    def __init__(self, samples: int, window: float) -> None:
        if samples < 1 or window <= 0:
            raise ValueError(f"bad rate window: {samples} samples of {window}")
        self.samples = samples
        self.window = window
        self._slots: list[_Sample] = []
        self._current = 0

    def record(self, value: float, now: float) -> None:
        """Add ``value`` at time ``now``, starting a new sample once the current one is W old."""
        if not self._slots:
            self._slots.append(_Sample(now, now))
        sample = self._slots[self._current]
        if now - sample.start >= self.window:
            self._current = (self._current + 1) % (self.samples + 1)
            if self._current >= len(self._slots):
                self._slots.append(_Sample(now, now))
            else:
                self._slots[self._current].reset(now)
            sample = self._slots[self._current]
        sample.value += value
        sample.last_event = now

    def measure(self, now: float) -> float:
        """Return the rate at ``now`` per time unit (0 before any record).

        The first measurement before any record opens the first sample at ``now``, as
        Kafka's ``SampledStat.oldest`` does: a record within W of it falls into that sample.
        """
        if not self._slots:
            self._slots.append(_Sample(now, now))
            return 0.0
        expire = self.samples * self.window
        for sample in self._slots:
            if now - sample.last_event >= expire:
                sample.reset(now)
        total = sum(s.value for s in self._slots)
        return total / max(now - min(s.start for s in self._slots), self.window)
