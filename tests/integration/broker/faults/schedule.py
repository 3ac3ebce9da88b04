"""A seeded schedule of faults for the fault suite (pure: no I/O).

Each fault names its kind, the broker role it targets and the pause before it; the same
seed and count always give the same schedule, so a failing soak can be replayed. Every
kind appears once in each round of ``len(FaultKind)`` faults (in a seeded order), so a
short run covers every kind and a long one covers them evenly.
"""

from __future__ import annotations

import enum
import random
from dataclasses import dataclass


class FaultKind(enum.Enum):
    """What is done to the cluster."""

    KILL_LEADER = "kill -9 of a partition leader"
    KILL_CONTROLLER = "kill -9 of the controller"
    PAUSE_LEADER = "SIGSTOP of a leader past the session timeout"
    ZOOKEEPER_RESTART = "ZooKeeper restart"
    FULL_LOG_DIR = "a full log dir"
    REASSIGNMENT = "reassignment reordering a partition's replicas"
    NETWORK_PARTITION = "network partition of a leader (or the controller) past the session timeout"


@dataclass(frozen=True)
class Fault:
    """One scheduled fault.

    Attributes:
        index: position in the schedule, from 0.
        kind: what is done.
        partition: the partition whose leader (or replicas) it targets, when it targets one.
        pause_s: seconds of normal traffic before it.
    """

    index: int
    kind: FaultKind
    partition: int
    pause_s: float


def build_schedule(
    seed: int, count: int, partitions: int, only: frozenset[FaultKind] | None = None
) -> list[Fault]:
    """Return ``count`` faults for a topic of ``partitions`` partitions, from ``seed``.

    Args:
        seed: the random seed.
        count: number of faults.
        partitions: the topic's partition count.
        only: the kinds to use (every kind when None), to replay or study some.

    Raises:
        ValueError: ``count`` is negative, ``partitions`` is not positive or ``only`` empty.
    """
    if count < 0 or partitions <= 0:
        raise ValueError(f"count {count} and partitions {partitions} must be >= 0 and > 0")
    if only is not None and not only:
        raise ValueError("no fault kind to schedule")
    rng = random.Random(seed)
    kinds: list[FaultKind] = []
    while len(kinds) < count:
        round_ = [k for k in FaultKind if only is None or k in only]
        rng.shuffle(round_)
        kinds.extend(round_)
    return [
        Fault(i, kind, rng.randrange(partitions), round(rng.uniform(0.5, 2.0), 2))
        for i, kind in enumerate(kinds[:count])
    ]
