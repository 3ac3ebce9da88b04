"""Progress of a reassignment: per-partition entries and bytes, totals, rate and ETA.

Bytes are measured as Kafka users do with ``kafka-log-dirs`` (DescribeLogDirs): a
partition's adding replicas (RAR - OAR, KIP-455) must each copy the leader's log,
so ``bytesTotal`` is the leader's replica size times the number of adding replicas
and ``bytesDone`` the sum of the adding replicas' sizes, each capped at the leader's.
:func:`measure_partition` gives a :class:`PartitionProgress` (what the cluster shows);
the operator's ``status.partitions[]`` entry is a :class:`PartitionStatus`, the one
type that reads and writes such entries. It records the target the operator accepted
(RAR), the replicas the partition had before (OAR) and a :class:`~kpo_kafka.states.MoveState`:

========== ==============================================================
state      meaning
========== ==============================================================
Pending    accepted, not yet submitted (written *before* the submission,
           so an operator that dies in between submits it on restart)
Moving     submitted with AlterPartitionReassignments, in flight
Completed  AR = RAR, nothing in flight (and the wanted log dirs reached)
Failed     Kafka refused it, or it ended without reaching its target
Cancelled  reverted to OAR by a cancellation
========== ==============================================================

The rate is measured over a sliding window of samples taken with an injectable
clock; the ETA divides the remaining bytes by that rate. The throttled duration
(Kafka's per-broker replication quota) is :func:`kpo_kafka.copy_time.throttled_duration`.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

from kpo_kafka.specs import PartitionTarget
from kpo_kafka.states import MoveState
from kpo_kafka.topic_partition import TopicPartition
from kpo_operator.model import ClusterView
from kpo_operator.status_models import TotalsStatus

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
        """Return the ``status.partitions[]`` entry of this measurement (its state as measured).

        The entry is :class:`PartitionStatus`'s, the one writer of such entries.
        """
        return PartitionStatus.from_progress(self, self.state).to_status()


_MOVE_STATES: dict[str, MoveState] = {s.value: s for s in MoveState}
"""``state`` text -> MoveState (a dict lookup: calling the enum is slow for 2,000 entries)."""


class PartitionStatus(NamedTuple):
    """One ``status.partitions[]`` entry (the CRD's schema, typed).

    Immutable, as a frozen dataclass would be, but a named tuple: a step builds one per
    accepted partition (up to 2,000), and a frozen dataclass's ``__init__`` cost four
    times as much. Change one with ``_replace``.

    Attributes:
        topic: Topic name.
        partition: Partition index.
        state: The operator's state of this partition (module table).
        original_replicas: OAR, the replicas before the reassignment.
        target_replicas: RAR, the accepted target replicas.
        adding: Replicas still being added (KIP-455 ``addingReplicas``).
        removing: Replicas still to be removed (``removingReplicas``).
        isr: The in-sync replicas when measured.
        leader: The leader's broker id, -1 if none.
        bytes_done: Bytes copied to the adding replicas; ``None``: not written.
        bytes_total: Bytes the adding replicas must copy; ``None``: not written.
        message: Error or detail, empty if none (then not written).
        target_log_dirs: The accepted target log dirs (``targetLogDirs``), if any.
    """

    topic: str
    partition: int
    state: MoveState
    original_replicas: tuple[int, ...]
    target_replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    leader: int = -1
    bytes_done: int | None = None
    bytes_total: int | None = None
    message: str = ""
    target_log_dirs: tuple[str, ...] | None = None

    @property
    def key(self) -> TopicPartition:
        """The ``(topic, partition)`` key of this entry."""
        return TopicPartition(self.topic, self.partition)

    def as_target(self) -> PartitionTarget:
        """Return the entry as a spec entry (RAR and log dirs).

        Not validated again (``model_construct``): the target was validated when it was
        accepted, and a step turns each of up to 2,000 entries into one.
        """
        return PartitionTarget.model_construct(
            topic=self.topic,
            partition=self.partition,
            replicas=list(self.target_replicas),
            log_dirs=list(self.target_log_dirs) if self.target_log_dirs else None,
        )

    @classmethod
    def from_progress(
        cls,
        progress: PartitionProgress,
        state: MoveState,
        message: str = "",
        log_dirs: Sequence[str] | None = None,
    ) -> PartitionStatus:
        """Build an entry from measured progress and the operator's state."""
        topic, partition, _, original, target, adding, removing, isr, leader, done, total = progress
        dirs = tuple(log_dirs) if log_dirs else None
        return cls(
            topic,
            partition,
            state,
            original,
            target,
            adding,
            removing,
            isr,
            leader,
            done,
            total,
            message,
            dirs,
        )

    @classmethod
    def from_status(cls, entry: Mapping[str, Any]) -> PartitionStatus | None:
        """Parse one ``status.partitions[]`` entry; ``None`` when it is unusable.

        Entries without topic, partition or target, or with a state outside
        :class:`~kpo_kafka.states.MoveState` (e.g. written by hand), are unusable.
        A missing state reads as Pending.
        """
        target = tuple(entry.get("targetReplicas") or ())
        if not target or "topic" not in entry or "partition" not in entry:
            return None
        try:
            state = _MOVE_STATES[entry.get("state") or MoveState.PENDING]
        except (KeyError, TypeError):
            return None
        done, total = entry.get("bytesDone"), entry.get("bytesTotal")
        return cls(
            str(entry["topic"]),
            int(entry["partition"]),
            state,
            tuple(entry.get("originalReplicas") or ()),
            target,
            tuple(entry.get("addingReplicas") or ()),
            tuple(entry.get("removingReplicas") or ()),
            tuple(entry.get("isr") or ()),
            int(entry.get("leader", -1)),
            None if done is None else int(done),
            None if total is None else int(total),
            str(entry.get("message") or ""),
            tuple(entry["targetLogDirs"]) if entry.get("targetLogDirs") else None,
        )

    def to_status(self) -> dict[str, Any]:
        """Return the ``status.partitions[]`` entry (camelCase keys, absent ones left out)."""
        out: dict[str, Any] = {
            "topic": self.topic,
            "partition": self.partition,
            "state": str(self.state),
            "originalReplicas": list(self.original_replicas),
            "targetReplicas": list(self.target_replicas),
            "addingReplicas": list(self.adding),
            "removingReplicas": list(self.removing),
            "isr": list(self.isr),
            "leader": self.leader,
        }
        if self.bytes_done is not None:
            out["bytesDone"] = self.bytes_done
        if self.bytes_total is not None:
            out["bytesTotal"] = self.bytes_total
        if self.message:
            out["message"] = self.message
        if self.target_log_dirs:
            out["targetLogDirs"] = list(self.target_log_dirs)
        return out


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

    def to_model(self, rate: float | None = None) -> TotalsStatus:
        """Return ``status.totals``; ``rate`` in bytes/s is included (whole) if known."""
        return TotalsStatus(
            partitions=self.partitions,
            partitions_done=self.partitions_done,
            bytes_done=self.bytes_done,
            bytes_total=self.bytes_total,
            progress=self.progress,
            rate=None if rate is None else int(rate),
        )

    def to_status(self, rate: float | None = None) -> dict[str, Any]:
        """Return the ``status.totals`` object (:meth:`to_model`, as a dict)."""
        return self.to_model(rate).to_status()


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


def parse_time(text: object) -> datetime | None:
    """Parse a time written by :func:`format_time` (UTC-aware); ``None`` for anything else."""
    if not isinstance(text, str):
        return None
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return None
