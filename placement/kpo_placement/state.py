"""The planner's working state: the target assignment being built and the loads it implies.

:class:`PlanState` keeps the loads, per-topic counts and the limits of the hard goals in
step with the assignment, so that each accepted move costs a few scalar updates. Broker
loads follow the resource model of :mod:`kpo_placement.model` with the preferred leader
(column 0) leading. The score arithmetic mirrors :mod:`kpo_placement.scoring` for one
(replica, destination) pair at a time, on Python-float mirrors of the utilisation
(:meth:`PlanState.refresh`), which every move keeps up to date.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kpo_placement import goals
from kpo_placement.goals import DISK, LEADERS, NET_OUT, REPLICAS
from kpo_placement.model import NO_BROKER, BoolArray, ClusterModel, FloatArray, IntArray
from kpo_placement.scoring import TIE

INNER_BAND = 0.9
"""The planner aims at this fraction of the tolerance band (1.045 for 1.05), so that the
last moves, which cannot always land exactly, still end within the tolerance."""


def active_resources(weights: list[float]) -> list[tuple[int, float]]:
    """Return the ``(resource, weight)`` pairs of ``weights`` that are not zero, in order."""
    return [(r, w) for r, w in enumerate(weights) if w != 0.0]


@dataclass
class PlanState:
    """Mutable target under construction (positions, not ids).

    Attributes:
        model: The cluster.
        assignment: ``int32[P, max_rf]`` target being built.
        eligible: ``bool[B]`` alive brokers not being removed.
        loads: ``float64[B, 5]`` loads of ``assignment`` (preferred leaders lead).
        scale: ``float64[B, 5]`` ``1 / (capacity * ideal utilisation)``; 0 for a resource
            with no load at all.
        base: ``float64[5]`` 1.0 for a resource with no load (its utilisation is then 1.0,
            balanced), else 0.
        rack: ``int32[B]`` rack keys (:func:`goals.rack_keys`).
        need_racks: ``int32[P]`` racks each partition must span.
        topic: ``int32[P]`` topic number per partition.
        topic_count: ``int32[T, B]`` replicas of each topic per broker.
        topic_cap: ``int32[T]`` per-topic per-broker share.
        leader_out: ``float64[P]`` network out of each partition's leader, B/s.
        disk_limit: ``float64[B]`` disk bytes allowed (threshold times capacity).
        replica_limit: Replicas allowed per broker.
        tolerance: The balance tolerance (band ``[2 - tolerance, tolerance]``).
        upper: Top of the balance band aimed at (see :data:`INNER_BAND`).
        lower: Bottom of the band aimed at.
        topic_weight: Score penalty of a destination holding its share of the topic.
    """

    model: ClusterModel
    assignment: IntArray
    eligible: BoolArray
    loads: FloatArray
    scale: FloatArray
    base: FloatArray
    rack: IntArray
    need_racks: IntArray
    topic: IntArray
    topic_count: IntArray
    topic_cap: IntArray
    leader_out: FloatArray
    disk_limit: FloatArray
    replica_limit: int
    tolerance: float
    upper: float
    lower: float
    topic_weight: float
    _util: list[list[float]] = field(default_factory=list, init=False, repr=False)
    _scale: list[list[float]] = field(default_factory=list, init=False, repr=False)
    _disk: list[float] = field(default_factory=list, init=False, repr=False)
    _count: list[float] = field(default_factory=list, init=False, repr=False)
    _disk_limit: list[float] = field(default_factory=list, init=False, repr=False)
    _eligible: list[bool] = field(default_factory=list, init=False, repr=False)

    @classmethod
    def start(
        cls,
        model: ClusterModel,
        eligible: BoolArray,
        *,
        tolerance: float,
        disk_threshold: float,
        max_replicas_per_broker: int | None,
    ) -> PlanState:
        """Return the state of the current assignment (``model.replicas``)."""
        assignment = model.replicas.copy()
        loads = goals.broker_loads(model, assignment)
        caps = goals.capacities(model)
        ideal = goals.ideal_utilisation(loads, caps, eligible)
        topic, _ = goals.topic_index(model)
        mean_replicas = loads[:, REPLICAS].sum() / max(int(eligible.sum()), 1)
        idle = loads.sum(axis=0) <= 0  # a resource nobody uses is balanced as it is
        state = cls(
            model=model,
            assignment=assignment,
            eligible=eligible,
            loads=loads,
            scale=np.where(idle, 0.0, 1.0 / (caps * ideal)),
            base=np.where(idle, 1.0, 0.0),
            rack=goals.rack_keys(model),
            need_racks=goals.required_racks(model, assignment, eligible),
            topic=topic,
            topic_count=goals.topic_counts(model, assignment),
            topic_cap=goals.topic_caps(model, assignment, eligible),
            leader_out=goals.leader_net_out(model, assignment),
            disk_limit=disk_threshold * model.disk_capacity,
            replica_limit=(
                max_replicas_per_broker if max_replicas_per_broker is not None else 2**31 - 1
            ),
            tolerance=tolerance,
            upper=1.0 + INNER_BAND * (tolerance - 1.0),
            lower=1.0 - INNER_BAND * (tolerance - 1.0),
            topic_weight=0.5 / max(mean_replicas, 1.0),
        )
        state.refresh()
        return state

    def util(self) -> FloatArray:
        """Return ``float64[B, 5]`` normalised utilisation of the current loads."""
        return np.asarray(self.loads * self.scale + self.base, dtype=np.float64)

    def replica_load(self, p: IntArray, slot: IntArray) -> FloatArray:
        """Return ``float64[n, 5]`` load carried by the replicas at ``(p, slot)``."""
        leads = slot == 0
        m = self.model
        return np.stack(
            [
                m.size_bytes[p],
                m.bytes_in[p],
                np.where(leads, self.leader_out[p], 0.0),
                np.ones(p.shape[0]),
                leads.astype(np.float64),
            ],
            axis=1,
        )

    def leader_load(self, p: int) -> list[float]:
        """Return what leading partition ``p`` adds to a broker (net out, leader count)."""
        load = [0.0] * 5
        load[NET_OUT] = float(self.leader_out[p])
        load[LEADERS] = 1.0
        return load

    def over_hard_limit(self, b: int) -> bool:
        """Return whether broker ``b`` breaks the disk threshold or the replica cap."""
        return bool(
            self.loads[b, DISK] > self.disk_limit[b] or self.loads[b, REPLICAS] > self.replica_limit
        )

    def fits(self, d: int, size: float) -> bool:
        """Return whether broker ``d`` can take one more replica of ``size`` bytes (mirrors)."""
        return (
            self._disk[d] + size <= self._disk_limit[d] and self._count[d] + 1 <= self.replica_limit
        )

    def refresh(self) -> None:
        """Rebuild the Python-float mirrors of utilisation used by the scalar scoring."""
        self._util = self.util().tolist()
        self._scale = self.scale.tolist()
        self._disk = self.loads[:, DISK].tolist()
        self._count = self.loads[:, REPLICAS].tolist()
        self._disk_limit = self.disk_limit.tolist()
        self._eligible = self.eligible.tolist()

    def gain(
        self, b: int, load: list[float], active: list[tuple[int, float]], sign: float
    ) -> tuple[float, float]:
        """Hinge and score change of broker ``b`` whose loads change by ``sign * load``.

        Args:
            b: Broker position (eligibility is not checked here).
            load: The replica's load per resource (5 floats).
            active: ``(resource, weight)`` pairs of the non-zero weights, in resource
                order (:func:`active_resources`).
            sign: 1.0 to add the load, -1.0 to remove it.
        """
        util = self._util[b]
        scale = self._scale[b]
        up, lo = self.upper, self.lower
        hinge = tie = 0.0
        for r, w in active:
            x = load[r]
            if x == 0.0:
                continue
            v = util[r]
            after = v + sign * x * scale[r]
            e, f = v - up, lo - v
            pen = (e * (1.0 + e) if e > 0.0 else 0.0) + (f * (1.0 + f) if f > 0.0 else 0.0)
            e, f = after - up, lo - after
            pen -= (e * (1.0 + e) if e > 0.0 else 0.0) + (f * (1.0 + f) if f > 0.0 else 0.0)
            hinge += w * pen
            tie += w * TIE * (v * v - after * after)
        return hinge, hinge + tie

    def is_eligible(self, b: int) -> bool:
        """Return whether broker ``b`` may hold replicas (a Python bool, from the mirror)."""
        return self._eligible[b]

    def topic_term(self, p: int, s: int, d: int) -> float:
        """Return the per-topic spread part of the score of moving ``p``'s replica s -> d."""
        t = self.topic[p]
        cap = self.topic_cap[t]
        gain = self.topic_weight if self.topic_count[t, s] > cap else 0.0
        if self.topic_count[t, d] >= cap:
            gain -= self.topic_weight
        return gain

    def move_replica(self, p: int, slot: int, d: int, load: list[float]) -> None:
        """Put the replica of partition ``p`` at ``slot`` on broker ``d`` (keeps its slot)."""
        s = int(self.assignment[p, slot])
        self.assignment[p, slot] = d
        self.loads[s] -= load
        self.loads[d] += load
        self._sync(s)
        self._sync(d)
        t = self.topic[p]
        self.topic_count[t, s] -= 1
        self.topic_count[t, d] += 1

    def swap_leader(self, p: int, slot: int) -> None:
        """Make the replica at ``slot`` of ``p`` the preferred leader (swap with slot 0)."""
        row = self.assignment[p]
        old, new = int(row[0]), int(row[slot])
        row[0], row[slot] = new, old
        load = np.asarray(self.leader_load(p))
        self.loads[old] -= load
        self.loads[new] += load
        self._sync(old)
        self._sync(new)

    def _sync(self, b: int) -> None:
        """Update the mirrors of broker ``b`` after its loads changed."""
        self._util[b] = (self.loads[b] * self.scale[b] + self.base).tolist()
        self._disk[b] = float(self.loads[b, DISK])
        self._count[b] = float(self.loads[b, REPLICAS])

    def others(self, p: IntArray, slot: IntArray) -> IntArray:
        """Return ``int32[n, max_rf - 1]``: the other replicas of each ``(p, slot)``, -1 padded."""
        rows = self.assignment[p]
        width = rows.shape[1]
        keep = np.arange(width)[None, :] != slot[:, None]
        out = rows[keep].reshape(p.shape[0], width - 1)
        return np.asarray(out, dtype=np.int32)

    def other_racks(self, others: IntArray) -> IntArray:
        """Return the rack keys of ``others`` (-1 where there is no replica)."""
        return np.where(others != NO_BROKER, self.rack[others], -1).astype(np.int32)
