"""Replica moves in rounds: pick candidates, score them all (the scorer), accept the best.

Two phases use the same round:

* **repair** moves the replicas that must move: those on ineligible brokers (dead or being
  removed), one replica of each partition spanning too few racks, and replicas of brokers
  above the disk threshold or the replica cap (until the broker is back under it). They
  move even if balance gets worse, to their best feasible destination.
* **balance** moves replicas off brokers above the balance band as long as balance
  improves. A replica of such a broker moves only while that still relieves it (the
  destination's gain alone never justifies it: that would copy bytes twice). When those
  brokers have little left to give (:data:`STRICT_YIELD`), brokers above the mean of a
  resource on which some broker is below the band give too, to fill it (e.g. a broker
  whose rack has no broker above the band). At most ``candidates_per_broker`` replicas of
  each source are offered per round, those whose removal helps the source most per byte
  (``source score / (size / mean size + SIZE_OFFSET)``), so that small replicas fix counts
  and rates and large ones fix disk.

Disk usage, network in and the replica count are weighted (:data:`REPLICA_WEIGHTS`);
network out and leader counts depend only on leadership and are left to
:mod:`kpo_placement.leadership`. A moved replica keeps its slot in the replica list.

Accepting: candidates are taken in order (required first, largest first; then by
predicted gain per byte); each is re-scored against its ``top_k`` destinations with the
loads left by the moves already accepted, and moves to the first one still feasible and
still worth at least :data:`STALE` of its predicted gain. One move per partition per
round keeps the rack check of the scorer valid.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kpo_placement.goals import DISK, REPLICAS
from kpo_placement.model import NO_BROKER, BoolArray, FloatArray, IntArray
from kpo_placement.scoring import (
    MIN_GAIN,
    TIE,
    BestMoves,
    CandidateScorer,
    RoundProblem,
    penalty,
)
from kpo_placement.state import PlanState, active_resources

REPLICA_WEIGHTS = [1.0, 1.0, 0.0, 1.0, 0.0]
"""Resource weights of replica moves: disk, network in, replica count."""
SIZE_OFFSET = 0.1
"""Cost of a move in mean replica sizes on top of its bytes, when ranking by gain per cost."""
STALE = 0.5
"""A move re-scored below this fraction of its predicted hinge gain waits a round."""
STRICT_YIELD = 0.01
"""Rounds offer only brokers above the band while they move at least this share of their
candidates; then brokers above the mean join in to fill the brokers below the band."""
MUST = 1
"""Candidate kind: the replica must move (ineligible broker, rack)."""
WHILE_OVER = 2
"""Candidate kind: must move while its broker breaks the disk threshold or replica cap."""


@dataclass(frozen=True)
class RoundSettings:
    """Knobs of the rounds.

    Attributes:
        top_k: Destinations the scorer returns per candidate.
        candidates_per_broker: Replicas offered per source broker per balance round.
        max_rounds: Rounds per phase at most.
    """

    top_k: int = 16
    candidates_per_broker: int = 400
    max_rounds: int = 200


@dataclass
class Candidates:
    """One round's candidate replicas.

    Attributes:
        p: ``int32[n]`` partition positions.
        slot: ``int32[n]`` slots in the replica list.
        kind: ``int32[n]`` 0 (optional), :data:`MUST` or :data:`WHILE_OVER`.
        relieve: ``bool[n]`` the source is above the band: move the replica only while
            that still helps the source (not just the destination).
        weights: Resource weights of the round.
    """

    p: IntArray
    slot: IntArray
    kind: IntArray
    relieve: BoolArray
    weights: list[float]


def repair(state: PlanState, scorer: CandidateScorer, settings: RoundSettings) -> tuple[int, int]:
    """Run repair rounds until nothing must move or no progress; return (rounds, moves)."""
    rounds = moves = 0
    for _ in range(settings.max_rounds):
        cands = required_candidates(state)
        if cands.p.size == 0:
            break
        rounds += 1
        accepted = run_round(state, scorer, cands, state.eligible, settings)
        moves += accepted
        if accepted == 0:
            break
    return rounds, moves


def balance(
    state: PlanState,
    scorer: CandidateScorer,
    settings: RoundSettings,
    *,
    sources_allowed: BoolArray,
    dests_allowed: BoolArray,
    weights: list[float] = REPLICA_WEIGHTS,
) -> tuple[int, int]:
    """Run balance rounds until balanced or no improving move; return (rounds, moves)."""
    rounds = moves = 0
    strict = True
    while rounds < settings.max_rounds and not within_tolerance(state, weights):
        cands = balance_candidates(
            state, sources_allowed, settings.candidates_per_broker, weights, strict=strict
        )
        accepted = 0
        if cands.p.size:
            rounds += 1
            accepted = run_round(state, scorer, cands, state.eligible & dests_allowed, settings)
            moves += accepted
        if accepted == 0 and not strict:
            break
        strict = accepted >= max(1, STRICT_YIELD * cands.p.size)
    return rounds, moves


def within_tolerance(state: PlanState, weights: list[float]) -> bool:
    """Return whether every eligible broker is within the tolerance on the weighted resources."""
    util = state.util()[state.eligible][:, np.asarray(weights) > 0]
    slack = 1e-9
    return bool(
        (util <= state.tolerance + slack).all() and (util >= 2 - state.tolerance - slack).all()
    )


def required_candidates(state: PlanState) -> Candidates:
    """Return the replicas that must move now (see the module docstring)."""
    a = state.assignment
    held = a != NO_BROKER
    b = np.maximum(a, 0)
    must = held & ~state.eligible[b]
    keys = np.where(held, state.rack[b], -1)
    dup = np.zeros_like(held)
    for j in range(1, a.shape[1]):
        dup[:, j] = held[:, j] & (keys[:, :j] == keys[:, j : j + 1]).any(axis=1)
    short = _distinct(keys) < state.need_racks
    first_dup = dup & (np.cumsum(dup, axis=1) == 1)
    must |= first_dup & short[:, None]
    over = state.eligible & (
        (state.loads[:, DISK] > state.disk_limit) | (state.loads[:, REPLICAS] > state.replica_limit)
    )
    over_cells = held & ~must & over[b]
    p, slot = np.nonzero(must | over_cells)
    kind = np.where(must[p, slot], MUST, WHILE_OVER)
    return Candidates(
        p.astype(np.int32),
        slot.astype(np.int32),
        kind.astype(np.int32),
        np.zeros(p.size, bool),
        REPLICA_WEIGHTS,
    )


def balance_candidates(
    state: PlanState,
    sources_allowed: BoolArray,
    per_broker: int,
    weights: list[float],
    *,
    strict: bool = True,
) -> Candidates:
    """Return the replicas offered for balance this round (see the module docstring).

    Sources are the brokers above the band; with ``strict`` False, or when none is above
    it, also the brokers above the mean of a resource on which some broker is below the
    band.
    """
    util = state.util()
    elig = state.eligible
    w = np.asarray(weights) > 0
    over = elig & ((util > state.upper) & w).any(axis=1)
    short = np.asarray(((util[elig] < state.lower) & w).any(axis=0), dtype=bool)
    generous = elig & ((util > 1.0) & short[None, :] & w).any(axis=1)
    use_over_only = strict and bool((over & sources_allowed).any())
    sources = (over if use_over_only else over | generous) & sources_allowed
    a = state.assignment
    held = a != NO_BROKER
    rows, cols = np.nonzero(held & sources[np.maximum(a, 0)])
    if rows.size == 0:
        empty = np.zeros(0, np.int32)
        return Candidates(empty, empty, empty, np.zeros(0, bool), weights)
    p, slot = rows.astype(np.int32), cols.astype(np.int32)
    load = state.replica_load(p, slot)
    _, src_score = source_gains(state, a[p, slot], load, weights)
    mean_size = max(float(state.model.size_bytes.mean()), 1.0)
    efficiency = src_score / (state.model.size_bytes[p] / mean_size + SIZE_OFFSET)
    src = a[p, slot]
    # rows come sorted by (p, slot) and lexsort is stable, so equal efficiencies keep that
    # order; a 16-bit source key sorts by radix
    key = src.astype(np.int16) if state.model.num_brokers < 2**15 else src
    order = np.lexsort((-efficiency, key))
    starts = np.searchsorted(src[order], src[order], side="left")
    rank = np.arange(order.size) - starts
    keep = np.sort(order[rank < per_broker])
    kind = np.zeros(keep.size, dtype=np.int32)
    return Candidates(p[keep], slot[keep], kind, over[src[keep]], weights)


def source_gains(
    state: PlanState, src: IntArray, load: FloatArray, weights: list[float]
) -> tuple[FloatArray, FloatArray]:
    """Return ``(hinge, score)`` of removing each ``load`` row from ``src`` (0 if ineligible)."""
    util = state.util()
    hinge = np.zeros(src.shape[0])
    tie = np.zeros(src.shape[0])
    for r, wr in enumerate(weights):
        if wr == 0.0:
            continue
        vs = util[src, r]
        after = vs - load[:, r] * state.scale[src, r]
        hinge += wr * (
            penalty(vs, state.upper, state.lower) - penalty(after, state.upper, state.lower)
        )
        tie += wr * TIE * (vs * vs - after * after)
    counts = state.eligible[src]
    return np.where(counts, hinge, 0.0), np.where(counts, hinge + tie, 0.0)


def build_problem(
    state: PlanState, cands: Candidates, dests: BoolArray, top_k: int
) -> RoundProblem:
    """Describe one round for a :class:`CandidateScorer`."""
    a = state.assignment
    src = a[cands.p, cands.slot]
    load = state.replica_load(cands.p, cands.slot)
    others = state.others(cands.p, cands.slot)
    others_rack = state.other_racks(others)
    need_new = _distinct(others_rack) < state.need_racks[cands.p]
    topics, topic_row = np.unique(state.topic[cands.p], return_inverse=True)
    full = state.topic_count[topics] >= state.topic_cap[topics][:, None]
    hinge, score = source_gains(state, src, load, cands.weights)
    t = state.topic[cands.p]
    src_over = state.topic_count[t, src] > state.topic_cap[t]
    score = score + state.topic_weight * src_over
    util = state.util()
    return RoundProblem(
        source=src.astype(np.int32),
        load=load,
        others=others,
        others_rack=others_rack,
        need_new_rack=need_new,
        topic_row=topic_row.astype(np.int32),
        required=cands.kind > 0,
        source_hinge=hinge,
        source_score=score,
        dest_ok=dests.copy(),
        dest_rack=state.rack,
        dest_util=util,
        dest_pen=penalty(util, state.upper, state.lower),
        dest_scale=state.scale,
        disk_room=state.disk_limit - state.loads[:, DISK],
        slot_room=np.clip(state.replica_limit - state.loads[:, REPLICAS], -1, 2**31 - 1).astype(
            np.int32
        ),
        topic_full=full,
        weights=np.asarray(cands.weights),
        upper=state.upper,
        lower=state.lower,
        topic_weight=state.topic_weight,
        top_k=top_k,
    )


def run_round(
    state: PlanState,
    scorer: CandidateScorer,
    cands: Candidates,
    dests: BoolArray,
    settings: RoundSettings,
) -> int:
    """Score ``cands`` with ``scorer`` and apply the accepted moves; return how many."""
    problem = build_problem(state, cands, dests, settings.top_k)
    best = scorer.best_moves(problem)
    return accept(state, cands, problem, best)


def accept(state: PlanState, cands: Candidates, problem: RoundProblem, best: BestMoves) -> int:
    """Apply the moves still worth it, in order (see the module docstring); return how many.

    The loop is sequential (each move changes the loads the next ones see), so it runs on
    Python lists converted once per round and the state's float mirrors.
    """
    size = state.model.size_bytes[cands.p]
    mean_size = max(float(state.model.size_bytes.mean()), 1.0)
    predicted = np.nan_to_num(best.hinge[:, 0], nan=-np.inf) if best.hinge.shape[1] else None
    if predicted is None:
        return 0
    efficiency = predicted / (size / mean_size + SIZE_OFFSET)
    urgency = np.where(cands.kind == MUST, size, np.where(cands.kind > 0, predicted, efficiency))
    order = np.lexsort((cands.slot, cands.p, -urgency, cands.kind == 0))
    with np.errstate(invalid="ignore"):
        dest_part = np.nanmax(np.nan_to_num(best.hinge, nan=-np.inf), axis=1) - problem.source_hinge
    pick = _Picker(state, cands, problem, best, predicted, dest_part)
    moved: set[int] = set()
    accepted = 0
    for c in order.tolist():
        p = pick.p[c]
        if p in moved or pick.dests[c][0] < 0:
            continue
        s = pick.source[c]
        if pick.kind[c] == WHILE_OVER and not state.over_hard_limit(s):
            continue
        d = pick.destination(c, p, s)
        if d < 0:
            continue
        state.move_replica(p, pick.slot[c], d, problem.load[c])
        moved.add(p)
        accepted += 1
    return accepted


class _Picker:
    """The per-candidate decision of :func:`accept`, on lists made once per round."""

    def __init__(
        self,
        state: PlanState,
        cands: Candidates,
        problem: RoundProblem,
        best: BestMoves,
        predicted: FloatArray,
        dest_part: FloatArray,
    ) -> None:
        self.state = state
        self.active = active_resources(cands.weights)
        self.p: list[int] = cands.p.tolist()
        self.slot: list[int] = cands.slot.tolist()
        self.kind: list[int] = cands.kind.tolist()
        self.source: list[int] = problem.source.tolist()
        self.dests: list[list[int]] = best.dest.tolist()
        self.loads: list[list[float]] = problem.load.tolist()
        self.predicted: list[float] = predicted.tolist()
        self.dest_part: list[float] = dest_part.tolist()
        hinge = problem.source_hinge.tolist()
        self.relieve: list[float | None] = [
            h if r else None for h, r in zip(hinge, cands.relieve.tolist(), strict=True)
        ]

    def destination(self, c: int, p: int, s: int) -> int:
        """Return the destination to use for candidate ``c`` now, or -1 to skip it this round.

        A candidate offered to relieve its source (``relieve``: its predicted source gain)
        waits once the source is relieved.
        """
        state, active, kind = self.state, self.active, self.kind[c]
        load = self.loads[c]
        predicted = self.predicted[c]
        if state.is_eligible(s):
            src_hinge, src_score = state.gain(s, load, active, -1.0)
        else:
            src_hinge = src_score = 0.0
        relieve = self.relieve[c]
        if relieve is not None and (src_hinge <= MIN_GAIN or src_hinge < STALE * relieve):
            return -1  # the source is relieved already: moving more would only overshoot
        if kind == 0 and src_hinge + self.dest_part[c] < STALE * predicted:
            return -1  # the source no longer needs it, and no destination can make up for that
        chosen, chosen_score = -1, -np.inf
        size = load[DISK]
        for d in self.dests[c]:
            if d < 0:
                break
            if not state.fits(d, size):
                continue
            dest_hinge, dest_score = state.gain(d, load, active, 1.0)
            hinge = src_hinge + dest_hinge
            if kind > 0:
                score = src_score + dest_score + state.topic_term(p, s, d)
                if score > chosen_score:
                    chosen, chosen_score = d, score
            elif hinge > MIN_GAIN and hinge >= STALE * predicted:
                return d
        return chosen


def _distinct(keys: IntArray) -> IntArray:
    """Return ``int32[n]``: distinct non-negative values per row of ``keys``."""
    ordered = np.sort(keys, axis=1)
    fresh = ordered >= 0
    fresh[:, 1:] &= ordered[:, 1:] != ordered[:, :-1]
    return np.asarray(fresh.sum(axis=1), dtype=np.int32)
