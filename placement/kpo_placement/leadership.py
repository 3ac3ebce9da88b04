"""Leader moves: balance network out and leader counts by choosing the preferred leaders.

A partition's leader carries its produce traffic to consumers and to every follower
(``bytes_out + bytes_in * (RF - 1)``, see :mod:`kpo_placement.model`); followers send
nothing. Network out and the leader count therefore depend only on *which* replica leads,
and changing that copies no bytes: the target lists the new preferred leader first, and a
preferred-leader election (Kafka's ``kafka-leader-election --election-type PREFERRED``, or
``auto.leader.rebalance.enable``) hands it the leadership.

Each round scores, for every partition led from a broker outside the balance band, handing
leadership to each of its other replicas on an eligible broker (vector arithmetic over all
of them), then accepts the best swaps one by one, re-scoring each against the loads left
by the swaps already accepted. A leader on an ineligible broker always moves when another
replica can lead.
"""

from __future__ import annotations

import numpy as np

from kpo_placement.goals import LEADERS, NET_OUT
from kpo_placement.model import NO_BROKER, IntArray
from kpo_placement.scoring import MIN_GAIN, penalty
from kpo_placement.state import PlanState, active_resources

LEADER_WEIGHTS = [0.0, 0.0, 1.0, 0.0, 1.0]
"""Resource weights of leader moves: network out and leader count only."""
STALE = 0.5
"""A swap re-scored below this fraction of its round's score waits for the next round."""


def balance_leaders(state: PlanState, max_rounds: int) -> int:
    """Reorder ``state.assignment`` rows to balance leadership; return the rounds run.

    Args:
        state: The target under construction (changed in place).
        max_rounds: Upper bound on rounds.
    """
    rounds = 0
    for _ in range(max_rounds):
        cand_p, cand_slot, gain, forced = _round_candidates(state)
        if cand_p.size == 0:
            break
        rounds += 1
        if _accept(state, cand_p, cand_slot, gain, forced) == 0:
            break
    return rounds


def _sources(state: PlanState) -> np.ndarray:
    """Return ``bool[B]``: brokers whose leaderships should be offered to others."""
    util = state.util()
    elig = state.eligible
    cols = [NET_OUT, LEADERS]
    over = elig & (util[:, cols] > state.upper).any(axis=1)
    short = np.asarray((util[elig][:, cols] < state.lower).any(axis=0), dtype=bool)
    generous = elig & ((util[:, cols] > 1.0) & short[None, :]).any(axis=1)
    return np.asarray(over | generous | ~elig, dtype=bool)


def _round_candidates(
    state: PlanState,
) -> tuple[IntArray, IntArray, np.ndarray, np.ndarray]:
    """Return each candidate partition's best new leader slot, its gain, and whether forced."""
    a = state.assignment
    lead = a[:, 0]
    sources = _sources(state)
    p = np.flatnonzero(sources[lead] & (a[:, 1:] != NO_BROKER).any(axis=1)).astype(np.int32)
    if p.size == 0:
        return p, p, np.zeros(0), np.zeros(0, dtype=bool)
    util = state.util()
    s = lead[p]
    forced = ~state.eligible[s]
    load = state.leader_out[p]
    best_gain = np.full(p.size, -np.inf)
    best_slot = np.zeros(p.size, dtype=np.int32)
    src_gain = np.zeros(p.size)
    for r, amount in ((NET_OUT, load), (LEADERS, np.ones(p.size))):
        vs = util[s, r]
        after = vs - amount * state.scale[s, r]
        part = penalty(vs, state.upper, state.lower) - penalty(after, state.upper, state.lower)
        src_gain += np.where(forced, 0.0, part)
    for j in range(1, a.shape[1]):
        o = a[p, j]
        valid = (o != NO_BROKER) & state.eligible[np.maximum(o, 0)]
        gain = src_gain.copy()
        for r, amount in ((NET_OUT, load), (LEADERS, np.ones(p.size))):
            vo = util[np.maximum(o, 0), r]
            after = vo + amount * state.scale[np.maximum(o, 0), r]
            gain += penalty(vo, state.upper, state.lower) - penalty(after, state.upper, state.lower)
        better = valid & (gain > best_gain)
        best_gain = np.where(better, gain, best_gain)
        best_slot = np.where(better, j, best_slot).astype(np.int32)
    keep = np.isfinite(best_gain) & (forced | (best_gain > MIN_GAIN))
    return p[keep], best_slot[keep], best_gain[keep], forced[keep]


def _accept(
    state: PlanState, p: IntArray, slot: IntArray, gain: np.ndarray, forced: np.ndarray
) -> int:
    """Apply the still-improving swaps, forced first, then by gain; return how many."""
    order = np.lexsort((p, -gain, ~forced))
    active = active_resources(LEADER_WEIGHTS)
    parts, slots = p.tolist(), slot.tolist()
    gains, forces = gain.tolist(), forced.tolist()
    rows = state.assignment
    accepted = 0
    for c in order.tolist():
        part, j = parts[c], slots[c]
        s, o = int(rows[part, 0]), int(rows[part, j])
        if not forces[c]:
            load = state.leader_load(part)
            src = state.gain(s, load, active, -1.0)[0] if state.is_eligible(s) else 0.0
            hinge = src + state.gain(o, load, active, 1.0)[0]
            if hinge <= MIN_GAIN or hinge < STALE * gains[c]:
                continue
        state.swap_leader(part, j)
        accepted += 1
    return accepted
