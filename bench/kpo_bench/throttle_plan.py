"""The throttled-reassignment experiments: moves, throttles, estimate (pure logic).

Each experiment moves two partitions of equal size under one throttle rate R (KIP-73) and
is judged against an estimate of the cluster-wide move rate, ``min(distinct throttled
leaders, distinct throttled followers) * R``: each throttled leader sends, and each
throttled follower fetches, at most R (Kafka's leader and follower
``ReplicationQuotaManager``). The three cases, here with 3 brokers and one partition per
topic:

- (a) both partitions leave the same leader for different followers: one leader
  quota carries both moves, so they take ``2 * size / R``;
- (b) two leaders feed the same new follower: one follower quota, ``2 * size / R``;
- (c) distinct leaders and distinct followers: the moves do not share a quota,
  ``size / R``.

The throttles are set as ``kafka-reassign-partitions --throttle`` sets them: both
rates on every broker of the current and target replicas, the topic's
``leader.replication.throttled.replicas`` listing ``partition:broker`` for each
current replica, and ``follower.replication.throttled.replicas`` each adding replica.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

#: Broker dynamic configs holding the throttle rate, bytes/s (KIP-73).
RATE_CONFIGS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
#: Topic config listing the ``partition:broker`` replicas throttled as leaders (KIP-73).
LEADER_REPLICAS_CONFIG = "leader.replication.throttled.replicas"
#: Topic config listing the ``partition:broker`` replicas throttled as followers (KIP-73).
FOLLOWER_REPLICAS_CONFIG = "follower.replication.throttled.replicas"
#: Broker static configs the experiments use: two 1 s quota samples (Kafka's default
#: ``replication.quota.window.num`` is 11), so a quota's measured rate follows a change
#: within about 2 s. Kafka's rate (``SimpleRate``) divides by at least one window, so either
#: setting starts a move with about one window's worth (R bytes) of burst;
#: ``--quota-window-num 11`` runs Kafka's default.
THROTTLE_BROKER_PROPERTIES = {"replication.quota.window.num": "2"}
#: The acceptable deviation of a measured duration from the estimate (+-5 %).
TOLERANCE = 0.05


class ThrottlePlanError(ValueError):
    """A move or an experiment cannot be throttled as specified (no replica added, R <= 0)."""


@dataclass(frozen=True)
class PartitionMove:
    """One partition's reassignment.

    Attributes:
        topic: the topic (partition 0 of a one-partition topic).
        current: the replicas before the move (AR), preferred leader first.
        target: the replicas after the move (the new AR).
    """

    topic: str
    current: tuple[int, ...]
    target: tuple[int, ...]

    @property
    def partition(self) -> int:
        """The partition index (always 0 here)."""
        return 0

    @property
    def adding(self) -> tuple[int, ...]:
        """The adding replicas (in the target, not in the current AR), target order."""
        return tuple(b for b in self.target if b not in self.current)

    @property
    def leader(self) -> int:
        """The current leader: the preferred (first) current replica."""
        return self.current[0]


@dataclass(frozen=True)
class ThrottleExperiment:
    """One of the throttled-reassignment experiments.

    Attributes:
        key: short name used in metric keys and topic names, e.g. ``"a"``.
        label: human-readable description.
        moves: the partitions moved together (one reassignment request).
    """

    key: str
    label: str
    moves: tuple[PartitionMove, ...]


def _experiment(key: str, label: str, moves: Sequence[tuple[int, int]]) -> ThrottleExperiment:
    built = tuple(
        PartitionMove(f"bench-throttle-{key}{i + 1}", (leader,), (leader, follower))
        for i, (leader, follower) in enumerate(moves)
    )
    return ThrottleExperiment(key, label, built)


#: The three experiments on brokers 0, 1, 2: (leader, new follower) per partition.
EXPERIMENTS: tuple[ThrottleExperiment, ...] = (
    _experiment("a", "(a) same leader, two followers", [(0, 1), (0, 2)]),
    _experiment("b", "(b) two leaders, same follower", [(0, 2), (1, 2)]),
    _experiment("c", "(c) distinct leaders and followers", [(0, 1), (1, 2)]),
)


def throttled_leaders(moves: Iterable[PartitionMove]) -> set[int]:
    """Return the distinct brokers that lead a moving partition (they send the copies)."""
    return {m.leader for m in moves}


def throttled_followers(moves: Iterable[PartitionMove]) -> set[int]:
    """Return the distinct brokers that receive an adding replica (they fetch the copies)."""
    return {b for m in moves for b in m.adding}


def involved_brokers(moves: Iterable[PartitionMove]) -> set[int]:
    """Return every broker of the current and target replicas: those given the rates."""
    return {b for m in moves for b in (*m.current, *m.target)}


def leader_replicas_value(move: PartitionMove) -> str:
    """Return ``leader.replication.throttled.replicas`` for ``move``: ``"0:0,0:1"``.

    One ``partition:broker`` pair per current replica (any of them may lead during
    the move), as ``kafka-reassign-partitions --throttle`` writes it.
    """
    return ",".join(f"{move.partition}:{b}" for b in move.current)


def follower_replicas_value(move: PartitionMove) -> str:
    """Return ``follower.replication.throttled.replicas`` for ``move``: ``"0:2"``.

    Raises:
        ThrottlePlanError: the move adds no replica (nothing to throttle).
    """
    if not move.adding:
        raise ThrottlePlanError(f"{move.topic}: target {move.target} adds no replica")
    return ",".join(f"{move.partition}:{b}" for b in move.adding)


def estimate_s(total_bytes: int, moves: Sequence[PartitionMove], rate_bytes_s: float) -> float:
    """Return the estimate of the moves' duration, s.

    The cluster-wide rate is ``min(len(throttled_leaders), len(throttled_followers)) *
    rate_bytes_s``; the duration is the bytes copied over that rate.

    Args:
        total_bytes: the bytes the adding replicas copy in all (log bytes, each
            adding replica counting its partition once).
        moves: the moves made together.
        rate_bytes_s: the throttle R, bytes/s, on every involved broker.

    Raises:
        ThrottlePlanError: ``rate_bytes_s`` is not positive, or no move adds a replica.
    """
    if rate_bytes_s <= 0:
        raise ThrottlePlanError(f"throttle rate must be positive, got {rate_bytes_s}")
    lanes = min(len(throttled_leaders(moves)), len(throttled_followers(moves)))
    if lanes == 0:
        raise ThrottlePlanError("no move adds a replica")
    return total_bytes / (lanes * rate_bytes_s)


def copied_bytes(moves: Sequence[PartitionMove], leader_log_bytes: dict[str, int]) -> int:
    """Return the bytes all adding replicas copy: each topic's leader log bytes per adding replica.

    Args:
        moves: the moves.
        leader_log_bytes: topic -> its partition's log bytes on the leader before the move.

    Raises:
        KeyError: a moved topic has no size.
    """
    return sum(leader_log_bytes[m.topic] * len(m.adding) for m in moves)


def deviation(measured_s: float, estimated_s: float) -> float:
    """Return ``measured / estimated - 1`` (0.03 means 3 % slower than the estimate).

    Raises:
        ThrottlePlanError: ``estimated_s`` is not positive.
    """
    if estimated_s <= 0:
        raise ThrottlePlanError(f"estimate must be positive, got {estimated_s}")
    return measured_s / estimated_s - 1.0


def within_tolerance(measured_s: float, estimated_s: float, tolerance: float = TOLERANCE) -> bool:
    """Return whether ``measured_s`` is within ``+-tolerance`` (a fraction) of ``estimated_s``."""
    return abs(deviation(measured_s, estimated_s)) <= tolerance
