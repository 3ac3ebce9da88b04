"""Replica swaps: the step that unblocks balance when single moves cannot help.

A broker can be stuck outside the band on one resource while another resource sits at
the band's edge: e.g. a new broker below the band on disk but full on replica count
(single moves add one replica each, so none fits), or the reverse. Exchanging a replica
that is large in the stuck resource for one that is small in it fixes the first resource
and leaves the count unchanged.

For each stuck broker (worst first) and a few partners on the other side of the mean,
the ``POOL`` replicas of the giving broker largest in the stuck resource are paired with
the ``POOL`` replicas of the receiving broker smallest in it; the gain of every pair is
computed at once (NumPy, ``POOL x POOL``) with the scoring of
:mod:`kpo_placement.scoring`, and the best pair per byte is applied when it improves
balance and keeps every hard goal (distinct brokers and racks, disk threshold).
"""

from __future__ import annotations

import numpy as np

from kpo_placement.goals import DISK
from kpo_placement.model import BoolArray, FloatArray, IntArray
from kpo_placement.scoring import MIN_GAIN, penalty
from kpo_placement.state import PlanState

POOL = 48
"""Replicas considered on each side of a swap."""
PARTNERS = 6
"""Partner brokers tried per stuck broker and pass."""


def swap_pass(
    state: PlanState,
    weights: list[float],
    stuck_allowed: BoolArray,
    partners_allowed: BoolArray,
    max_swaps: int = 1_000,
) -> int:
    """Apply improving swaps around the stuck brokers once; return how many were applied.

    Args:
        state: The target under construction (changed in place).
        weights: Resource weights of the balance.
        stuck_allowed: ``bool[B]`` brokers whose balance the swaps fix.
        partners_allowed: ``bool[B]`` brokers they may swap with.
        max_swaps: Upper bound on swaps in this pass.
    """
    w = np.asarray(weights)
    applied = 0
    util = state.util()
    active = state.eligible & stuck_allowed
    partner_ok = state.eligible & partners_allowed
    low = np.where(active[:, None] & (w > 0), state.lower - util, 0.0)
    high = np.where(active[:, None] & (w > 0), util - state.upper, 0.0)
    worst = np.maximum(low, high)
    stuck = np.flatnonzero(worst.max(axis=1) > 0)
    for x in stuck[np.argsort(-worst.max(axis=1)[stuck], kind="stable")].tolist():
        if applied >= max_swaps:
            break
        r = int(np.argmax(worst[x]))
        util = state.util()
        is_low = bool(util[x, r] < state.lower)
        side = util[:, r] > 1.0 if is_low else util[:, r] < 1.0
        partners = np.flatnonzero(side & partner_ok)
        order = np.argsort(-util[partners, r] if is_low else util[partners, r], kind="stable")
        for y in partners[order][:PARTNERS].tolist():
            giver, taker = (y, x) if is_low else (x, y)
            if _best_swap(state, w, giver, taker, r):
                applied += 1
                break
    return applied


def _movable(state: PlanState, p: IntArray, slot: IntArray, dest: int) -> BoolArray:
    """Return ``bool[n]``: the replicas ``(p, slot)`` may move to ``dest`` (brokers, racks)."""
    others = state.others(p, slot)
    racks = state.other_racks(others)
    clash = (others == dest).any(axis=1)
    ordered = np.sort(racks, axis=1)
    fresh = ordered >= 0
    fresh[:, 1:] &= ordered[:, 1:] != ordered[:, :-1]
    need_new = fresh.sum(axis=1) < state.need_racks[p]
    same_rack = (racks == state.rack[dest]).any(axis=1)
    return np.asarray(~clash & ~(need_new & same_rack), dtype=bool)


def _side(state: PlanState, broker: int, dest: int, r: int, largest: bool) -> tuple[IntArray, ...]:
    """Return ``(p, slot)`` of up to POOL replicas of ``broker`` movable to ``dest``."""
    a = state.assignment
    rows, cols = np.nonzero(a == broker)
    p, slot = rows.astype(np.int32), cols.astype(np.int32)
    ok = _movable(state, p, slot, dest)
    p, slot = p[ok], slot[ok]
    amount = state.replica_load(p, slot)[:, r]
    order = np.lexsort((p, -amount if largest else amount))[:POOL]
    return p[order], slot[order]


def _best_swap(state: PlanState, w: FloatArray, giver: int, taker: int, r: int) -> bool:
    """Swap the best pair between ``giver`` (gives large-in-``r``) and ``taker``; True if done."""
    pa, sa = _side(state, giver, taker, r, largest=True)
    pb, sb = _side(state, taker, giver, r, largest=False)
    if pa.size == 0 or pb.size == 0:
        return False
    xa = state.replica_load(pa, sa)
    xb = state.replica_load(pb, sb)
    delta = xa[:, None, :] - xb[None, :, :]
    util = state.util()
    gain = np.zeros(delta.shape[:2])
    for q in np.flatnonzero(w > 0).tolist():
        vg, vt = util[giver, q], util[taker, q]
        after_g = vg - delta[:, :, q] * state.scale[giver, q]
        after_t = vt + delta[:, :, q] * state.scale[taker, q]
        pen_g = penalty(np.asarray(vg), state.upper, state.lower)
        pen_t = penalty(np.asarray(vt), state.upper, state.lower)
        gain += w[q] * (pen_g - penalty(after_g, state.upper, state.lower))
        gain += w[q] * (pen_t - penalty(after_t, state.upper, state.lower))
    disk = delta[:, :, DISK]
    fits = (state.loads[taker, DISK] + disk <= state.disk_limit[taker]) & (
        state.loads[giver, DISK] - disk <= state.disk_limit[giver]
    )
    fits &= pa[:, None] != pb[None, :]
    mean_size = max(float(state.model.size_bytes.mean()), 1.0)
    cost = (xa[:, None, DISK] + xb[None, :, DISK]) / mean_size + 0.1
    value = np.where(fits & (gain > MIN_GAIN), gain / cost, -np.inf)
    best = int(np.argmax(value))
    i, j = divmod(best, value.shape[1])
    if not np.isfinite(value[i, j]):
        return False
    state.move_replica(int(pa[i]), int(sa[i]), taker, xa[i])
    state.move_replica(int(pb[j]), int(sb[j]), giver, xb[j])
    return True
