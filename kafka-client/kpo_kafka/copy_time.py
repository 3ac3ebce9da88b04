"""How long replica copies take under Kafka's replication throttle (KIP-73); pure.

A reassignment copies the leader's log to each adding replica (RAR - OAR, KIP-455).
With a throttle, each broker's ``ReplicationQuotaManager`` caps what it moves: a leader
sends at most ``leader.replication.throttled.rate`` bytes/s, a follower fetches at most
``follower.replication.throttled.rate``. :func:`throttled_duration` predicts the copy
time from that model; the operator uses it for the ETA of a suspended or moving
PartitionReassignment, the placement job for the predicted duration of a wave.
:func:`format_duration` prints a duration as Kubernetes prints ages.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from typing import NamedTuple, Protocol


class ReplicaCopy(Protocol):
    """What the throttled-duration model needs of one partition's copy.

    Attributes:
        leader: Broker id of the leader, which sends the bytes.
        adding: Broker ids of the replicas being added, which receive them.
        bytes_done: Bytes already copied to the adding replicas (all of them together).
        bytes_total: Bytes the adding replicas must copy (the leader's log size times
            the number of adding replicas).
    """

    @property
    def leader(self) -> int:
        """Broker id of the leader."""

    @property
    def adding(self) -> tuple[int, ...]:
        """Broker ids of the adding replicas."""

    @property
    def bytes_done(self) -> int:
        """Bytes copied so far."""

    @property
    def bytes_total(self) -> int:
        """Bytes to copy in all."""


class PlannedCopy(NamedTuple):
    """A :class:`ReplicaCopy` not started yet, for a plan that has no measurement.

    Attributes:
        leader: Broker id of the leader (the source of the copies).
        adding: Broker ids of the replicas being added.
        bytes_total: Bytes to copy: one replica's size times ``len(adding)``.
        bytes_done: Bytes copied so far; 0 for a plan.
    """

    leader: int
    adding: tuple[int, ...]
    bytes_total: int
    bytes_done: int = 0


def throttled_duration(parts: Iterable[ReplicaCopy], rate: int | None) -> timedelta | None:
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
    """Format a duration as Kubernetes prints ages: ``"45s"``, ``"3m20s"``, ``"2h5m"``.

    Negative durations print as ``"0s"``; seconds are rounded to the nearest whole one.
    """
    seconds = max(0, round(span.total_seconds()))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m"
    if minutes:
        return f"{minutes}m{secs}s"
    return f"{secs}s"
