"""The placement planner: a target meeting the hard goals, balanced, with few bytes moved.

:func:`plan` works on a :class:`ClusterModel` in phases (modes in :class:`PlanOptions`):

1. **repair** (all modes but ``leaders``): replicas that must move do
   (:mod:`kpo_placement.replica_rounds`): off dead brokers and brokers being removed, out
   of a rack a partition already uses when another rack is free, off brokers above the
   disk threshold or the replica cap.
2. **balance** (``rebalance``, ``add-brokers``): replica moves from brokers outside the
   balance band while balance improves, in rounds whose candidate scoring is done by a
   :class:`CandidateScorer` (NumPy on the driver by default, Spark with
   :class:`kpo_placement.spark_scorer.SparkScorer`). ``add-brokers`` moves replicas only to
   the added brokers. When single moves get stuck, a swap pass (:mod:`kpo_placement.swaps`)
   exchanges pairs of replicas, then balance rounds resume.
3. **leaders** (all modes): preferred-leader changes balance network out and leader
   counts, copying no bytes (:mod:`kpo_placement.leadership`).

Hard goals (:func:`kpo_placement.goals.hard_goal_violations`) are checked on every move
and on the result; the result never breaks one (else :class:`UnsatisfiableGoalError`).
Soft goals, within ``balance_tolerance`` (:mod:`kpo_placement.goals`): disk, network in,
network out, replica and leader counts, and the per-topic replica spread (a score term).
Bytes moved stay low because only brokers outside the band give replicas, and only while
it helps. The rounds aim at 90 % of the tolerance band (:data:`kpo_placement.state.
INNER_BAND`) so that the result lands inside it. The planner uses no randomness: the same
model and options give the same plan.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from kpo_placement import goals
from kpo_placement.goals import Imbalance, Violation
from kpo_placement.leadership import balance_leaders
from kpo_placement.model import NO_BROKER, ClusterModel, IntArray
from kpo_placement.plan_checks import (
    InsufficientCapacityError,
    InvalidOptionsError,
    PlanError,
    UnsatisfiableGoalError,
    check_capacity,
    check_options,
    check_result,
)
from kpo_placement.plan_options import MODES, Mode, PlanOptions
from kpo_placement.replica_rounds import (
    REPLICA_WEIGHTS,
    RoundSettings,
    balance,
    repair,
    within_tolerance,
)
from kpo_placement.scoring import CandidateScorer, NumpyScorer
from kpo_placement.state import PlanState
from kpo_placement.swaps import swap_pass

__all__ = [
    "MODES",
    "CandidateScorer",
    "InsufficientCapacityError",
    "InvalidOptionsError",
    "Mode",
    "Move",
    "NumpyScorer",
    "Plan",
    "PlanError",
    "PlanOptions",
    "PlanStats",
    "UnsatisfiableGoalError",
    "plan",
]

SWAP_PASSES = 20
"""Swap passes at most, each followed by more balance rounds. In ``add-brokers`` mode a
swap exchanges replicas between an added broker and an old one."""


@dataclass(frozen=True)
class Move:
    """One partition's reassignment (ids, preferred leader first).

    Attributes:
        p: Partition position in the model.
        topic: Topic name.
        partition: Partition index.
        old_replicas: Current replica broker ids.
        new_replicas: Target replica broker ids.
        bytes_moved: Bytes copied: the partition size per adding replica.
    """

    p: int
    topic: str
    partition: int
    old_replicas: tuple[int, ...]
    new_replicas: tuple[int, ...]
    bytes_moved: float

    @property
    def adding(self) -> tuple[int, ...]:
        """Broker ids gaining a replica (Kafka's adding replicas), target order."""
        return tuple(b for b in self.new_replicas if b not in self.old_replicas)

    @property
    def removing(self) -> tuple[int, ...]:
        """Broker ids losing their replica (Kafka's removing replicas)."""
        return tuple(b for b in self.old_replicas if b not in self.new_replicas)

    @property
    def leader_only(self) -> bool:
        """Whether only the order (the preferred leader) changes: nothing is copied."""
        return set(self.old_replicas) == set(self.new_replicas)


@dataclass(frozen=True)
class PlanStats:
    """Figures of a plan.

    Attributes:
        mode: The mode planned.
        elapsed_s: Wall time of :func:`plan`, s.
        rounds: Phase name -> rounds run.
        replica_moves: Replica relocations applied (a partition may have several).
        leader_moves: Moves that only change the preferred leader.
        bytes_moved: Bytes copied by the plan.
        bytes_lower_bound: :func:`goals.bytes_moved_lower_bound` of the model.
        imbalance_before: Balance of the current placement (actual leaders).
        imbalance_after: Balance of the target (preferred leaders lead).
        topic_spread_before: :func:`goals.topic_spread_excess` before.
        topic_spread_after: The same after.
        balanced: Whether the target is within the tolerance on every resource.
        violations_before: Hard goals the current placement breaks.
    """

    mode: str
    elapsed_s: float
    rounds: dict[str, int]
    replica_moves: int
    leader_moves: int
    bytes_moved: float
    bytes_lower_bound: float
    imbalance_before: Imbalance
    imbalance_after: Imbalance
    topic_spread_before: int
    topic_spread_after: int
    balanced: bool
    violations_before: list[Violation] = field(default_factory=list)


@dataclass(frozen=True)
class Plan:
    """A computed placement.

    Attributes:
        target: ``int32[P, max_rf]`` target broker positions, preferred leader first.
        moves: The partitions whose replica list changes, by position.
        stats: Figures of the plan.
    """

    target: IntArray
    moves: list[Move]
    stats: PlanStats

    @property
    def bytes_moved(self) -> float:
        """Bytes the plan copies in all."""
        return float(sum(m.bytes_moved for m in self.moves))


def plan(model: ClusterModel, options: PlanOptions, scorer: CandidateScorer | None = None) -> Plan:
    """Compute a target assignment for ``model`` (see the module docstring).

    Args:
        model: The cluster snapshot.
        options: What to plan.
        scorer: Round scorer; default :class:`NumpyScorer`.

    Returns:
        The plan: target, moves (sorted by partition position) and stats.

    Raises:
        ModelError: The model is inconsistent.
        InvalidOptionsError: The options do not fit the model.
        InsufficientCapacityError: The replicas cannot fit (see the class), including a
            ``remove-brokers`` that cannot drain.
        UnsatisfiableGoalError: A hard goal stays broken.
    """
    started = time.perf_counter()
    model.validate()
    check_options(model, options)
    scorer = scorer if scorer is not None else NumpyScorer()
    removed = options.brokers_to_remove if options.mode == "remove-brokers" else ()
    eligible = goals.eligible_brokers(model, removed)
    before_violations = goals.hard_goal_violations(
        model,
        model.replicas,
        eligible=eligible,
        disk_threshold=options.disk_threshold,
        max_replicas_per_broker=options.max_replicas_per_broker,
    )
    if options.mode != "leaders":
        check_capacity(model, options, eligible)
    state = PlanState.start(
        model,
        eligible,
        tolerance=options.balance_tolerance,
        disk_threshold=options.disk_threshold,
        max_replicas_per_broker=options.max_replicas_per_broker,
    )
    settings = RoundSettings(options.top_k, options.candidates_per_broker, options.max_rounds)
    rounds: dict[str, int] = {}
    replica_moves = 0
    if options.mode != "leaders":
        rounds["repair"], replica_moves = repair(state, scorer, settings)
        if options.mode in ("rebalance", "add-brokers"):
            dests = eligible.copy()
            sources = eligible.copy()
            if options.mode == "add-brokers":
                added = np.isin(model.broker_ids, options.brokers_to_add)
                dests, sources = added, eligible & ~added
            rounds["balance"] = rounds["swaps"] = 0
            for _ in range(SWAP_PASSES + 1):
                r, n = balance(
                    state, scorer, settings, sources_allowed=sources, dests_allowed=dests
                )
                rounds["balance"] += r
                replica_moves += n
                if within_tolerance(state, REPLICA_WEIGHTS):
                    break
                swapped = swap_pass(state, REPLICA_WEIGHTS, dests, sources)
                rounds["swaps"] += 1
                replica_moves += 2 * swapped
                if swapped == 0:
                    break
    rounds["leaders"] = balance_leaders(state, options.max_rounds)
    check_result(model, options, state, eligible, before_violations)
    moves = _moves(model, state.assignment)
    after = goals.imbalance(model, state.assignment, eligible)
    stats = PlanStats(
        mode=options.mode,
        elapsed_s=time.perf_counter() - started,
        rounds=rounds,
        replica_moves=replica_moves,
        leader_moves=sum(1 for m in moves if m.leader_only),
        bytes_moved=float(sum(m.bytes_moved for m in moves)),
        bytes_lower_bound=goals.bytes_moved_lower_bound(
            model, model.replicas, eligible, options.balance_tolerance
        ),
        imbalance_before=goals.imbalance(model, model.replicas, eligible, _leaders(model)),
        imbalance_after=after,
        topic_spread_before=goals.topic_spread_excess(model, model.replicas, eligible),
        topic_spread_after=goals.topic_spread_excess(model, state.assignment, eligible),
        balanced=after.within(options.balance_tolerance),
        violations_before=before_violations,
    )
    return Plan(target=state.assignment, moves=moves, stats=stats)


def _leaders(model: ClusterModel) -> IntArray:
    """Actual leaders, the preferred one where the snapshot has none."""
    return np.where(model.leaders >= 0, model.leaders, model.replicas[:, 0]).astype(np.int32)


def _moves(model: ClusterModel, target: IntArray) -> list[Move]:
    """Return a :class:`Move` per partition whose replica list changes.

    The ids, copies and bytes are computed for all changed partitions at once; only the
    :class:`Move` objects are made one by one.
    """
    before = model.replicas
    changed = np.flatnonzero((before != target).any(axis=1))
    ids = model.broker_ids
    old = before[changed]
    new = target[changed]
    old_ids = np.where(old != NO_BROKER, ids[np.maximum(old, 0)], NO_BROKER)
    new_ids = np.where(new != NO_BROKER, ids[np.maximum(new, 0)], NO_BROKER)
    kept = (new[:, :, None] == old[:, None, :]).any(axis=2)
    copies = ((new != NO_BROKER) & ~kept).sum(axis=1)
    moved = (copies * model.size_bytes[changed]).tolist()
    return [
        Move(
            p=p,
            topic=str(topic),
            partition=partition,
            old_replicas=_ids(o),
            new_replicas=_ids(n),
            bytes_moved=b,
        )
        for p, topic, partition, o, n, b in zip(
            changed.tolist(),
            model.topics[changed].tolist(),
            model.partitions[changed].tolist(),
            old_ids.tolist(),
            new_ids.tolist(),
            moved,
            strict=True,
        )
    ]


def _ids(row: list[int]) -> tuple[int, ...]:
    """Return the broker ids of a replica row without its padding."""
    return tuple(row) if NO_BROKER not in row else tuple(b for b in row if b != NO_BROKER)
