"""Scoring of candidate replica moves, one round at a time: the planner's data-parallel seam.

In each round the planner (on the driver) picks *candidates* (replicas it may move, each
with the load it carries) and describes every broker as a possible *destination*. A
:class:`CandidateScorer` scores every (candidate, destination) pair and returns, per
candidate, its best ``top_k`` destinations. :class:`NumpyScorer` does it with NumPy on the
driver; :class:`kpo_placement.spark_scorer.SparkScorer` does the same arithmetic with
Spark DataFrames and must return the same answer.

Score of moving a replica carrying load ``x`` (per resource) to broker ``d``, with
normalised utilisation ``v`` (1.0 = ideal, see :mod:`kpo_placement.goals`) and
``a = x * scale[d]``::

    hinge = source_hinge + sum_r w_r * (pen(v_r) - pen(v_r + a_r))
    score = source_score + sum_r (w_r * (pen(v_r) - pen(v_r + a_r))
                                  + w_r * TIE * (v_r ** 2 - (v_r + a_r) ** 2))
            - topic_weight * topic_full[d]

with ``pen(v) = e * (1 + e) + f * (1 + f)``, ``e = max(v - upper, 0)``,
``f = max(lower - v, 0)``: zero inside the balance band, growing outside it. The
``source_*`` terms (the same for all destinations) are computed by the planner. ``hinge``
says whether the move improves balance at all; ``score`` adds a small pull towards the
least loaded broker (``TIE``) and the per-topic spread. The sums run in resource order,
left to right, so both scorers round the same way.

A pair is *feasible* when ``d`` may receive (``dest_ok``), is not the source and holds no
replica of the partition; when the other replicas miss a rack, ``d``'s rack is new to
them (rack awareness); the replica fits under the disk threshold (``disk_room``) and the
replica cap (``slot_room``). Feasible pairs are kept when the candidate is *required*
(it must move) or when ``hinge > MIN_GAIN``: balance comes first, the score only ranks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from kpo_placement.model import BoolArray, FloatArray, IntArray

TIE = 1e-3
"""Weight of the pull towards less loaded destinations (breaks ties between them)."""
MIN_GAIN = 1e-12
"""Smallest ``hinge`` that counts as an improvement."""


def penalty(v: FloatArray, upper: float, lower: float) -> FloatArray:
    """Return ``pen(v)`` element-wise (see the module docstring); 0 inside the band."""
    e = np.maximum(v - upper, 0.0)
    f = np.maximum(lower - v, 0.0)
    return np.asarray(e * (1.0 + e) + f * (1.0 + f), dtype=np.float64)


def penalty_scalar(v: float, upper: float, lower: float) -> float:
    """Return ``pen(v)`` for one float (the planner's accept loop)."""
    e = v - upper
    f = lower - v
    return (e * (1.0 + e) if e > 0.0 else 0.0) + (f * (1.0 + f) if f > 0.0 else 0.0)


@dataclass(frozen=True)
class RoundProblem:
    """One round's candidates and destinations (``n`` candidates, ``B`` brokers, 5 resources).

    Attributes:
        source: ``int32[n]`` broker position each candidate leaves.
        load: ``float64[n, 5]`` resource load the replica carries (bytes, B/s, B/s, 1, 1).
        others: ``int32[n, K]`` positions of the partition's other replicas, -1 padded.
        others_rack: ``int32[n, K]`` rack keys of those replicas, -1 padded.
        need_new_rack: ``bool[n]`` the destination's rack must be new to ``others``.
        topic_row: ``int32[n]`` row of the candidate's topic in ``topic_full``.
        required: ``bool[n]`` the replica must move even if balance gets worse.
        source_hinge: ``float64[n]`` hinge gain of removing the replica from its source.
        source_score: ``float64[n]`` score gain of the same.
        dest_ok: ``bool[B]`` brokers that may receive in this round.
        dest_rack: ``int32[B]`` rack key per broker (never -1).
        dest_util: ``float64[B, 5]`` normalised utilisation.
        dest_pen: ``float64[B, 5]`` ``pen(dest_util)``.
        dest_scale: ``float64[B, 5]`` ``1 / (capacity * ideal utilisation)``.
        disk_room: ``float64[B]`` bytes each broker may still take (disk threshold).
        slot_room: ``int32[B]`` replicas each broker may still take (replica cap).
        topic_full: ``bool[T, B]`` the broker already holds its share of the topic.
        weights: ``float64[5]`` resource weights ``w_r``.
        upper: Top of the balance band (normalised).
        lower: Bottom of the balance band.
        topic_weight: Penalty for a destination full of the topic.
        top_k: Destinations to return per candidate.
    """

    source: IntArray
    load: FloatArray
    others: IntArray
    others_rack: IntArray
    need_new_rack: BoolArray
    topic_row: IntArray
    required: BoolArray
    source_hinge: FloatArray
    source_score: FloatArray
    dest_ok: BoolArray
    dest_rack: IntArray
    dest_util: FloatArray
    dest_pen: FloatArray
    dest_scale: FloatArray
    disk_room: FloatArray
    slot_room: IntArray
    topic_full: BoolArray
    weights: FloatArray
    upper: float
    lower: float
    topic_weight: float
    top_k: int

    @property
    def size(self) -> int:
        """n, the number of candidates."""
        return int(self.source.shape[0])


@dataclass(frozen=True)
class BestMoves:
    """Each candidate's best destinations, best first (score descending, then position).

    Attributes:
        dest: ``int32[n, k]`` broker positions, -1 where fewer are kept.
        score: ``float64[n, k]`` scores (NaN where ``dest`` is -1).
        hinge: ``float64[n, k]`` hinge gains (NaN where ``dest`` is -1).
    """

    dest: IntArray
    score: FloatArray
    hinge: FloatArray


class CandidateScorer(Protocol):
    """Scores a round's (candidate, destination) pairs; see the module docstring."""

    def best_moves(self, problem: RoundProblem) -> BestMoves:
        """Return the best ``problem.top_k`` feasible kept destinations of each candidate.

        Ties on score go to the lower broker position. Must be deterministic.
        """
        ...


class NumpyScorer:
    """:class:`CandidateScorer` with NumPy on the driver, in chunks of candidates.

    Args:
        max_cells: Pairs scored at once (bounds memory: about 60 bytes per pair; small
            chunks keep the buffers in the CPU caches, 2 MiB each by default).
    """

    def __init__(self, max_cells: int = 1 << 18) -> None:
        self.max_cells = max_cells

    def best_moves(self, problem: RoundProblem) -> BestMoves:
        """Score all pairs chunk by chunk; see :meth:`CandidateScorer.best_moves`."""
        n, b = problem.size, problem.dest_ok.shape[0]
        k = min(problem.top_k, b)
        dest = np.full((n, k), -1, dtype=np.int32)
        score = np.full((n, k), np.nan)
        hinge = np.full((n, k), np.nan)
        step = max(1, self.max_cells // max(b, 1))
        for start in range(0, n, step):
            rows = slice(start, min(n, start + step))
            d, s, h = _score_chunk(problem, rows, k)
            dest[rows], score[rows], hinge[rows] = d, s, h
        return BestMoves(dest, score, hinge)


def _score_chunk(
    problem: RoundProblem, rows: slice, k: int
) -> tuple[IntArray, FloatArray, FloatArray]:
    """Score candidates ``rows`` against every broker; return their top ``k``.

    The arithmetic runs in place on a few ``(rows, B)`` buffers, operation by operation
    as the module docstring writes it (so it rounds as :class:`SparkScorer` does).
    """
    src = problem.source[rows]
    load = problem.load[rows]
    m, b = src.shape[0], problem.dest_ok.shape[0]
    brokers = np.arange(b, dtype=np.int32)
    hinge = np.empty((m, b))
    hinge[:] = problem.source_hinge[rows][:, None]
    score = np.empty((m, b))
    score[:] = problem.source_score[rows][:, None]
    after = np.empty((m, b))
    pen = np.empty((m, b))
    tmp = np.empty((m, b))
    for r in range(load.shape[1]):
        w = float(problem.weights[r])
        if w == 0.0:
            continue
        v = problem.dest_util[:, r][None, :]
        np.multiply(load[:, r : r + 1], problem.dest_scale[:, r][None, :], out=after)
        np.add(v, after, out=after)  # v + load * scale
        _penalty_into(after, problem.upper, problem.lower, pen, tmp)
        np.subtract(problem.dest_pen[:, r][None, :], pen, out=pen)
        np.multiply(w, pen, out=pen)  # dh = w * (pen(v) - pen(after))
        np.add(hinge, pen, out=hinge)
        np.add(score, pen, out=score)
        np.multiply(after, after, out=tmp)
        np.subtract(v * v, tmp, out=tmp)
        np.multiply(w * TIE, tmp, out=tmp)  # dt = w * TIE * (v * v - after * after)
        np.add(score, tmp, out=score)
    full = problem.topic_full[problem.topic_row[rows]]
    np.subtract(score, problem.topic_weight * full, out=score)
    ok = problem.dest_ok[None, :] & (brokers[None, :] != src[:, None])
    for j in range(problem.others.shape[1]):
        ok &= brokers[None, :] != problem.others[rows, j][:, None]
        new_rack = problem.dest_rack[None, :] != problem.others_rack[rows, j][:, None]
        ok &= ~problem.need_new_rack[rows][:, None] | new_rack
    ok &= load[:, 0:1] <= problem.disk_room[None, :]
    ok &= problem.slot_room[None, :] >= 1
    ok &= problem.required[rows][:, None] | (hinge > MIN_GAIN)
    np.negative(score, out=tmp)
    np.putmask(tmp, ~ok | np.isnan(tmp), np.inf)  # ranked: -score where feasible, else last
    order = _smallest_k(tmp, k)
    top_score = -np.take_along_axis(tmp, order, axis=1)
    top_hinge = np.take_along_axis(hinge, order, axis=1)
    found = np.isfinite(top_score)
    return (
        np.where(found, order, -1).astype(np.int32),
        np.where(found, top_score, np.nan),
        np.where(found, top_hinge, np.nan),
    )


def _penalty_into(
    v: FloatArray, upper: float, lower: float, out: FloatArray, tmp: FloatArray
) -> None:
    """Write :func:`penalty` of ``v`` into ``out`` (``tmp`` is scratch), the same operations."""
    np.subtract(v, upper, out=out)
    np.maximum(out, 0.0, out=out)  # e
    np.add(out, 1.0, out=tmp)
    np.multiply(out, tmp, out=out)  # e * (1 + e)
    np.subtract(lower, v, out=tmp)
    np.maximum(tmp, 0.0, out=tmp)  # f
    f_part = np.add(tmp, 1.0)
    np.multiply(tmp, f_part, out=tmp)  # f * (1 + f)
    np.add(out, tmp, out=out)


def _smallest_k(values: FloatArray, k: int) -> IntArray:
    """Return ``int32[m, k]``: per row, the columns of the ``k`` smallest values, ascending.

    Equal values keep column order (what a stable full ``argsort`` gives), but only the
    ``k`` selected are sorted: a partition finds each row's k-th value, every smaller one
    is taken and the equal ones fill up from the left.
    """
    m, b = values.shape
    if k >= b:
        return np.argsort(values, axis=1, kind="stable").astype(np.int32)
    kth = np.partition(values, k - 1, axis=1)[:, k - 1 : k]
    below = values < kth
    equal = values == kth
    room = k - below.sum(axis=1, keepdims=True)
    take = below | (equal & (np.cumsum(equal, axis=1) <= room))
    cols = np.nonzero(take)[1].reshape(m, k)
    ranked = np.argsort(np.take_along_axis(values, cols, axis=1), axis=1, kind="stable")
    return np.asarray(np.take_along_axis(cols, ranked, axis=1), dtype=np.int32)
