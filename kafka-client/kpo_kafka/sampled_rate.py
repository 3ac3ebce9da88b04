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


class SampledRate:
    """A rate over ``samples`` windows of ``window`` each, as described in the module docstring.

    The samples are kept as three parallel lists (start, last record, value) so that
    :meth:`measure` is a few C-level ``min``/``sum`` calls: the operator replays the
    quota at a tenth of a window per step, thousands of steps per reconcile step
    (:func:`kpo_operator.quota_window.throttled_finish`).

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
        self._starts: list[float] = []  # when each sample began
        self._lasts: list[float] = []  # when each sample was last recorded into
        self._values: list[float] = []  # what each sample holds
        self._current = 0

    def _open(self, now: float) -> None:
        self._starts.append(now)
        self._lasts.append(now)
        self._values.append(0.0)

    def record(self, value: float, now: float) -> None:
        """Add ``value`` at time ``now``, starting a new sample once the current one is W old."""
        if not self._starts:
            self._open(now)
        current = self._current
        if now - self._starts[current] >= self.window:
            current = self._current = (current + 1) % (self.samples + 1)
            if current >= len(self._starts):
                self._open(now)
            else:
                self._starts[current] = self._lasts[current] = now
                self._values[current] = 0.0
        self._values[current] += value
        self._lasts[current] = now

    def measure(self, now: float) -> float:
        """Return the rate at ``now`` per time unit (0 before any record).

        The first measurement before any record opens the first sample at ``now``, as
        Kafka's ``SampledStat.oldest`` does: a record within W of it falls into that sample.
        """
        if not self._starts:
            self._open(now)
            return 0.0
        expire = self.samples * self.window
        lasts = self._lasts
        if now - min(lasts) >= expire:
            for i, last in enumerate(lasts):
                if now - last >= expire:
                    self._starts[i] = lasts[i] = now
                    self._values[i] = 0.0
        return sum(self._values) / max(now - min(self._starts), self.window)

    def above_until(self, limit: float) -> float:
        """Return a time before which :meth:`measure` stays above ``limit`` if nothing is recorded.

        Until then no sample expires (the earliest last record plus N*W) and the samples'
        sum over the time since the oldest began stays above ``limit``; ``-inf`` when the
        rate is not above ``limit`` however soon it is measured. A caller stepping time
        forward may skip measuring before that time (minus a margin for rounding): the
        answer would be "above" and nothing would change.
        """
        if not self._starts or limit <= 0:
            return float("-inf")
        total = sum(self._values)
        if total <= limit * self.window:
            return float("-inf")
        expiry = min(self._lasts) + self.samples * self.window
        return min(expiry, min(self._starts) + total / limit)

    def fetch_under(
        self,
        now: float,
        step: float,
        limit: float,
        chunk: float,
        left: float,
        end: float = float("inf"),
        max_steps: int = -1,
    ) -> tuple[float, float, float]:
        """Step time forward, recording ``chunk`` at each step the rate is not above ``limit``.

        Kafka's rule for a throttled fetcher (``ReplicationQuotaManager.isQuotaExceeded``
        checked before each fetch): from ``now``, every ``step``, if :meth:`measure` is at
        most ``limit``, ``min(chunk, left)`` is recorded and taken from ``left``. The
        same as calling :meth:`measure` and :meth:`record` in a loop (results identical
        to the last bit), without the calls: a step is a few list operations, and the
        steps where the rate is above ``limit`` until :meth:`above_until` are skipped.

        Args:
            now: Time of the first step.
            step: Time between steps (> 0).
            limit: The quota (per time unit).
            chunk: What one fetch records.
            left: What remains to be recorded.
            end: Stop before a step at or after this time.
            max_steps: Stop after this many steps (``-1``: no limit).

        Returns:
            ``(t, left, last)``: when ``left`` reached 0, the time of the last record, 0
            and what it recorded; else the time of the step after the last one taken,
            what is left and 0.
        """
        starts, lasts, values = self._starts, self._lasts, self._values
        window, slots = self.window, self.samples + 1
        expire = self.samples * window
        margin = step * 1e-3
        quiet = float("-inf")
        current, taken, t = self._current, 0, now
        while left > 0 and t < end and taken != max_steps:
            taken += 1
            if t < quiet:
                t += step
                continue
            if not starts:
                self._open(t)
                rate = 0.0
            else:
                if t - min(lasts) >= expire:
                    for i, last in enumerate(lasts):
                        if t - last >= expire:
                            starts[i] = lasts[i] = t
                            values[i] = 0.0
                rate = sum(values) / max(t - min(starts), window)
            if rate > limit:
                self._current = current
                quiet = self.above_until(limit) - margin
                t += step
                continue
            fetched = min(chunk, left)
            if t - starts[current] >= window:  # record(): the next sample
                current = (current + 1) % slots
                if current >= len(starts):
                    self._open(t)
                else:
                    starts[current] = lasts[current] = t
                    values[current] = 0.0
            values[current] += fetched
            lasts[current] = t
            left -= fetched
            if left <= 0:
                self._current = current
                return t, left, fetched
            t += step
        self._current = current
        return t, left, 0.0
