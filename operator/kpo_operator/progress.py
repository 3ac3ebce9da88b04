"""Progress of a reassignment: per-partition bytes, totals, rate, ETA and conditions.

Bytes are measured as Kafka users do with ``kafka-log-dirs`` (DescribeLogDirs): a
partition's adding replicas (RAR - OAR, KIP-455) must each copy the leader's log,
so ``bytesTotal`` is the leader's replica size times the number of adding replicas
and ``bytesDone`` the sum of the adding replicas' sizes, each capped at the leader's.
The rate is measured over a sliding window of samples taken with an injectable
clock; the ETA divides the remaining bytes by that rate. Conditions follow kstatus
(``Reconciling``, ``Stalled``, ``Ready``) plus ``Completed`` for ``kubectl wait``,
keeping ``lastTransitionTime`` while a condition's status does not change.
All dicts returned match the CRDs' status schemas (camelCase keys).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

from kpo_kafka.specs import PartitionTarget
from kpo_operator.model import ClusterView
from kpo_operator.states import MoveState

ReplicaSizes = Mapping[tuple[int, str, int], int]
"""(broker id, topic, partition) -> replica size in bytes, from DescribeLogDirs."""


class PartitionProgress(NamedTuple):
    """One partition's state in a reassignment (an entry of ``status.partitions``).

    Immutable, as a frozen dataclass would be, but a named tuple: a step measures each of
    up to 2,000 partitions, and a frozen dataclass's ``__init__`` (one
    ``object.__setattr__`` per field) cost four times as much as building the tuple.

    Attributes:
        topic: Topic name.
        partition: Partition index.
        state: What the cluster shows: ``PENDING`` (not in flight, not at the target),
            ``MOVING`` (in flight) or ``COMPLETED``.
        original_replicas: OAR.
        target_replicas: RAR.
        adding: Replicas still being added; empty once completed.
        removing: Replicas still to be removed; empty once completed.
        isr: The in-sync replicas.
        leader: The leader's broker id, -1 if none.
        bytes_done: Bytes copied to the adding replicas.
        bytes_total: Bytes the adding replicas must copy.
    """

    topic: str
    partition: int
    state: MoveState
    original_replicas: tuple[int, ...]
    target_replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    bytes_done: int
    bytes_total: int

    def to_status(self) -> dict[str, Any]:
        """Return the ``status.partitions[]`` entry."""
        return {
            "topic": self.topic,
            "partition": self.partition,
            "state": str(self.state),
            "originalReplicas": list(self.original_replicas),
            "targetReplicas": list(self.target_replicas),
            "addingReplicas": list(self.adding),
            "removingReplicas": list(self.removing),
            "isr": list(self.isr),
            "leader": self.leader,
            "bytesDone": self.bytes_done,
            "bytesTotal": self.bytes_total,
        }


def partition_progress(
    target: PartitionTarget,
    original: Sequence[int],
    view: ClusterView,
    sizes: ReplicaSizes,
) -> PartitionProgress:
    """Measure one partition of a reassignment.

    Args:
        target: The spec entry (RAR).
        original: OAR, recorded in status when the reassignment was submitted.
        view: The cluster now; the partition is in flight if it is in
            ``view.reassigning`` or has adding/removing replicas.
        sizes: Replica sizes in bytes; a missing entry counts as 0 bytes.

    Returns:
        ``Completed`` once Kafka's AR equals the target and nothing is in flight (then
        ``bytes_done == bytes_total``), ``Moving`` while in flight, else ``Pending``.
    """
    return measure_partition(
        target.topic, target.partition, tuple(target.replicas), tuple(original), view, sizes
    )


def measure_partition(
    topic: str,
    partition: int,
    target: tuple[int, ...],
    original: tuple[int, ...],
    view: ClusterView,
    sizes: ReplicaSizes,
) -> PartitionProgress:
    """Measure one partition of a reassignment towards ``target`` (RAR) from ``original`` (OAR).

    :func:`partition_progress` without a spec entry: a step measures each of up to 2,000
    accepted partitions from its status entry, and building a spec entry for each cost
    more than the measure itself. Same arguments and result.
    """
    tp = (topic, partition)
    state = view.topics.get(topic, {}).get(partition)
    replicas = state.replicas if state else ()
    leader = state.leader if state else -1
    in_flight = tp in view.reassigning or bool(state and (state.adding or state.removing))
    leader_size = sizes.get((leader, topic, partition), 0) if leader >= 0 else 0
    adding: tuple[int, ...]
    removing: tuple[int, ...]
    if not in_flight and tuple(replicas) == target:
        phase, adding, removing = MoveState.COMPLETED, (), ()
        done = total = leader_size * sum(b not in original for b in target)
    else:
        phase = MoveState.MOVING if in_flight else MoveState.PENDING
        if state is not None and in_flight:
            adding, removing = state.adding, state.removing
        else:
            adding = tuple(b for b in target if b not in original)
            removing = tuple(b for b in original if b not in target)
        total = leader_size * len(adding)
        done = 0
        for broker in adding:
            done += min(sizes.get((broker, topic, partition), 0), leader_size)
    return PartitionProgress(
        topic,
        partition,
        phase,
        original,
        target,
        tuple(adding),
        tuple(removing),
        state.isr if state else (),
        leader,
        done,
        total,
    )


@dataclass(frozen=True)
class Totals:
    """``status.totals``: sums over partitions and the progress string."""

    partitions: int
    partitions_done: int
    bytes_done: int
    bytes_total: int

    @property
    def progress(self) -> str:
        """Return ``bytes_done / bytes_total`` as a whole percentage, rounded down ("42%").

        With nothing to copy it is "100%" once every partition is done, else "0%".
        """
        if self.bytes_total <= 0:
            done = self.partitions_done == self.partitions
            return "100%" if done else "0%"
        return f"{min(100, self.bytes_done * 100 // self.bytes_total)}%"

    def to_status(self, rate: float | None = None) -> dict[str, Any]:
        """Return the ``status.totals`` object; ``rate`` in bytes/s is included if known."""
        out: dict[str, Any] = {
            "partitions": self.partitions,
            "partitionsDone": self.partitions_done,
            "bytesDone": self.bytes_done,
            "bytesTotal": self.bytes_total,
            "progress": self.progress,
        }
        if rate is not None:
            out["rate"] = int(rate)
        return out


def totals(parts: Iterable[PartitionProgress]) -> Totals:
    """Sum partitions, completed partitions and bytes."""
    items = list(parts)
    return Totals(
        len(items),
        sum(p.state == MoveState.COMPLETED for p in items),
        sum(p.bytes_done for p in items),
        sum(p.bytes_total for p in items),
    )


class RateEstimator:
    """Replication rate in bytes/s over a sliding time window of ``bytes_done`` samples.

    The rate is (newest - oldest bytes) / (newest - oldest time) over the samples no
    older than ``window_s`` seconds. A sample with fewer bytes than the previous one
    (a log truncated by retention, a restarted move) starts the window afresh.

    Args:
        window_s: Window length in seconds (> 0).
        clock: Monotonic seconds; :func:`time.monotonic` by default.
        keep_s: How long samples are kept for :meth:`history` (at least ``window_s``;
            the ETA of a throttled move replays Kafka's quota window over them).

    Raises:
        ValueError: ``window_s`` is not positive.
    """

    def __init__(
        self,
        window_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
        keep_s: float = 120.0,
    ):
        if window_s <= 0:
            raise ValueError(f"window_s must be > 0, got {window_s}")
        self._window = window_s
        self._keep = max(window_s, keep_s)
        self._clock = clock
        self._samples: deque[tuple[float, int]] = deque()

    def observe(self, bytes_done: int) -> None:
        """Record the total bytes copied so far, at the clock's current time."""
        now = self._clock()
        if self._samples and bytes_done < self._samples[-1][1]:
            self._samples.clear()
        self._samples.append((now, bytes_done))
        while len(self._samples) > 2 and now - self._samples[1][0] >= self._keep:
            self._samples.popleft()

    def history(self) -> tuple[tuple[float, int], ...]:
        """Return the samples in the window: ``(clock seconds, bytes done)``, oldest first."""
        return tuple(self._samples)

    def rate(self) -> float | None:
        """Return bytes/s over the window, or ``None`` with fewer than two samples."""
        if len(self._samples) < 2:
            return None
        first, last = 0, len(self._samples) - 1
        newest = self._samples[last][0]
        while last - first > 1 and newest - self._samples[first + 1][0] >= self._window:
            first += 1
        (t0, b0), (t1, b1) = self._samples[first], self._samples[last]
        if t1 <= t0:
            return None
        return (b1 - b0) / (t1 - t0)


def eta(bytes_remaining: int, rate: float | None, now: datetime) -> datetime | None:
    """Predict completion: ``now`` + remaining / rate; ``now`` when nothing remains.

    Returns ``None`` when the rate is unknown or not positive (no prediction possible).
    """
    if bytes_remaining <= 0:
        return now
    if rate is None or rate <= 0:
        return None
    return now + timedelta(seconds=bytes_remaining / rate)


def predicted_duration(bytes_total: int, rate: int | None) -> timedelta | None:
    """Time to copy ``bytes_total`` at a throttle of ``rate`` bytes/s (``None``: unthrottled)."""
    if rate is None or rate <= 0:
        return None
    return timedelta(seconds=max(0, bytes_total) / rate)


def format_time(moment: datetime) -> str:
    """RFC 3339 UTC with second precision, as Kubernetes writes times ("...T06:40:08Z")."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def throttled_duration(parts: Iterable[PartitionProgress], rate: int | None) -> timedelta | None:
    """Predict how long copying ``parts`` takes at a replication throttle of ``rate`` bytes/s.

    The throttle applies on each broker separately (Kafka's ``ReplicationQuotaManager``, one
    per side: a leader sends at most ``leader.replication.throttled.rate``, a follower
    fetches at most ``follower.replication.throttled.rate``), so the busiest broker sets the
    pace: the result is the largest of each leader's bytes to send and each adding replica's
    broker's bytes to receive, divided by ``rate``. ``None`` when unthrottled (the pace is
    then the hardware's, not predictable here).
    """
    if rate is None or rate <= 0:
        return None
    sent: dict[int, int] = {}
    received: dict[int, int] = {}
    for part in parts:
        remaining = max(0, part.bytes_total - part.bytes_done)
        if not part.adding or remaining == 0:
            continue
        sent[part.leader] = sent.get(part.leader, 0) + remaining
        for broker in part.adding:
            share = remaining // len(part.adding)
            received[broker] = received.get(broker, 0) + share
    busiest = max([*sent.values(), *received.values(), 0])
    return timedelta(seconds=busiest / rate)


def format_duration(span: timedelta) -> str:
    """Format a duration as Kubernetes prints ages: ``"45s"``, ``"3m20s"``, ``"2h5m"``."""
    seconds = max(0, round(span.total_seconds()))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m"
    if minutes:
        return f"{minutes}m{secs}s"
    return f"{secs}s"
