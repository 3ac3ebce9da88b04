"""Goals of a placement: broker loads, hard-goal checks, imbalance and a bytes-moved bound.

An *assignment* is an ``int32[P, max_rf]`` array of broker positions shaped like
:attr:`ClusterModel.replicas` (preferred leader first, padded with ``NO_BROKER``). Loads
follow the resource model of :mod:`kpo_placement.model`, with the preferred leader (column
0) as the leader: the state after the reassignment and a preferred-leader election
(``auto.leader.rebalance.enable``). :func:`broker_loads` can take the actual leaders instead.

*Eligible* brokers are the alive brokers not being removed: the only ones that may hold
replicas in a target. Balance is measured on them:

* A broker's *normalised utilisation* of a resource is its load over its capacity, divided
  by the ideal utilisation (the total load of all replicas over the eligible brokers' total
  capacity). The counts (replicas, leaders) have capacity 1 per broker. With equal
  capacities this is load over mean load.
* The *imbalance* of a resource is the largest normalised utilisation (max/mean); a
  placement is *balanced* within ``tolerance`` when every eligible broker lies in
  ``[2 - tolerance, tolerance]`` for every resource.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from kpo_placement.model import NO_BROKER, BoolArray, ClusterModel, FloatArray, IntArray

RESOURCES: tuple[str, ...] = ("disk", "net_in", "net_out", "replicas", "leaders")
"""The balanced resources, in the column order of :func:`broker_loads`."""
DISK, NET_IN, NET_OUT, REPLICAS, LEADERS = range(5)

RACK = "rack"
DISK_THRESHOLD = "disk-threshold"
MAX_REPLICAS = "max-replicas"
REPLICATION_FACTOR = "replication-factor"
PARTITION_COUNT = "partition-count"
DUPLICATE_REPLICA = "duplicate-replica"
INELIGIBLE_BROKER = "ineligible-broker"
HARD_GOALS: tuple[str, ...] = (
    RACK,
    DISK_THRESHOLD,
    MAX_REPLICAS,
    REPLICATION_FACTOR,
    PARTITION_COUNT,
    DUPLICATE_REPLICA,
    INELIGIBLE_BROKER,
)
"""Names of the hard goals, as :attr:`Violation.goal` reports them."""


@dataclass(frozen=True)
class Violation:
    """One broken hard goal.

    Attributes:
        goal: One of :data:`HARD_GOALS`.
        detail: A sentence naming the partition or broker and the numbers.
        partition: Partition position, or None for a broker-level goal.
        broker_id: Kafka broker id, or None for a partition-level goal.
    """

    goal: str
    detail: str
    partition: int | None = None
    broker_id: int | None = None


def eligible_brokers(model: ClusterModel, removed: Iterable[int] = ()) -> BoolArray:
    """Return ``bool[B]``: alive and not among the ``removed`` broker ids."""
    mask = model.alive.copy()
    for broker_id in removed:
        mask[model.position_of(broker_id)] = False
    return mask


def rack_keys(model: ClusterModel) -> IntArray:
    """Return ``int32[B]``: the rack index, or a rack of its own for a broker without one.

    A broker without ``broker.rack`` counts as a rack of its own, so a cluster without
    racks puts no rack constraint on top of "distinct brokers".
    """
    own = len(model.rack_names) + np.arange(model.num_brokers, dtype=np.int32)
    return np.where(model.racks >= 0, model.racks, own).astype(np.int32)


def required_racks(model: ClusterModel, assignment: IntArray, eligible: BoolArray) -> IntArray:
    """Return ``int32[P]``: the distinct racks each partition must span, ``min(RF, racks)``.

    ``racks`` counts the distinct racks of the eligible brokers ("where racks allow").
    """
    racks_available = np.unique(rack_keys(model)[eligible]).size
    rf = (assignment != NO_BROKER).sum(axis=1)
    return np.asarray(np.minimum(rf, racks_available), dtype=np.int32)


def distinct_racks(model: ClusterModel, assignment: IntArray) -> IntArray:
    """Return ``int32[P]``: how many distinct racks hold a replica of each partition."""
    keys = np.where(assignment != NO_BROKER, rack_keys(model)[assignment], -1)
    ordered = np.sort(keys, axis=1)
    fresh = (ordered != -1) & np.concatenate(
        [np.ones((ordered.shape[0], 1), dtype=bool), ordered[:, 1:] != ordered[:, :-1]], axis=1
    )
    return np.asarray(fresh.sum(axis=1), dtype=np.int32)


def capacities(model: ClusterModel) -> FloatArray:
    """Return ``float64[B, 5]``: capacity per resource (bytes, B/s, B/s, 1, 1)."""
    ones = np.ones(model.num_brokers)
    return np.stack(
        [model.disk_capacity, model.net_in_capacity, model.net_out_capacity, ones, ones], axis=1
    )


def leader_net_out(model: ClusterModel, assignment: IntArray) -> FloatArray:
    """Return ``float64[P]``: network out of a partition's leader, ``out + in * (RF - 1)``."""
    rf = (assignment != NO_BROKER).sum(axis=1)
    return np.asarray(model.bytes_out + model.bytes_in * (rf - 1), dtype=np.float64)


def broker_loads(
    model: ClusterModel, assignment: IntArray, leaders: IntArray | None = None
) -> FloatArray:
    """Return ``float64[B, 5]``: each broker's load per resource (see :data:`RESOURCES`).

    Args:
        model: The cluster (sizes and rates per partition).
        assignment: ``int32[P, max_rf]`` broker positions.
        leaders: ``int32[P]`` leader positions (-1 = none); default: column 0 of
            ``assignment`` (the preferred leaders).
    """
    b = model.num_brokers
    held = assignment != NO_BROKER
    rows = np.nonzero(held)[0]
    brokers = assignment[held]
    lead = assignment[:, 0] if leaders is None else leaders
    led = lead >= 0
    loads = np.zeros((b, len(RESOURCES)))
    loads[:, DISK] = np.bincount(brokers, model.size_bytes[rows], minlength=b)
    loads[:, NET_IN] = np.bincount(brokers, model.bytes_in[rows], minlength=b)
    loads[:, NET_OUT] = np.bincount(lead[led], leader_net_out(model, assignment)[led], minlength=b)
    loads[:, REPLICAS] = np.bincount(brokers, minlength=b)
    loads[:, LEADERS] = np.bincount(lead[led], minlength=b)
    return loads


def ideal_utilisation(loads: FloatArray, caps: FloatArray, eligible: BoolArray) -> FloatArray:
    """Return ``float64[5]``: total load over the eligible brokers' total capacity.

    A resource with no load (or no capacity) gets 1.0, so normalising by it is harmless.
    """
    total = loads.sum(axis=0)
    cap = caps[eligible].sum(axis=0)
    ideal = np.divide(total, cap, out=np.zeros_like(total), where=cap > 0)
    return np.where(ideal > 0, ideal, 1.0)


def utilisation(loads: FloatArray, caps: FloatArray, eligible: BoolArray) -> FloatArray:
    """Return ``float64[B, 5]``: normalised utilisation (1.0 = ideal) of every broker.

    A resource nobody uses (total load 0) is balanced: 1.0 everywhere.
    """
    util = loads / caps / ideal_utilisation(loads, caps, eligible)
    return np.asarray(np.where(loads.sum(axis=0) > 0, util, 1.0), dtype=np.float64)


@dataclass(frozen=True)
class Imbalance:
    """Balance of each resource over the eligible brokers.

    Attributes:
        max_over_mean: resource name -> largest normalised utilisation (1.0 = perfect).
        min_over_mean: resource name -> smallest normalised utilisation.
    """

    max_over_mean: dict[str, float]
    min_over_mean: dict[str, float]

    def worst(self) -> float:
        """Return the largest max/mean over all resources."""
        return max(self.max_over_mean.values())

    def within(self, tolerance: float) -> bool:
        """Return whether every resource lies in ``[2 - tolerance, tolerance]``."""
        return all(v <= tolerance + 1e-9 for v in self.max_over_mean.values()) and all(
            v >= 2 - tolerance - 1e-9 for v in self.min_over_mean.values()
        )


def imbalance(
    model: ClusterModel,
    assignment: IntArray,
    eligible: BoolArray,
    leaders: IntArray | None = None,
) -> Imbalance:
    """Return the :class:`Imbalance` of ``assignment`` over the ``eligible`` brokers.

    Args:
        model: The cluster.
        assignment: ``int32[P, max_rf]`` broker positions.
        eligible: ``bool[B]`` brokers that count (see :func:`eligible_brokers`).
        leaders: Actual leaders, ``int32[P]``; default the preferred leaders.
    """
    util = utilisation(broker_loads(model, assignment, leaders), capacities(model), eligible)
    util = util[eligible]
    return Imbalance(
        max_over_mean={r: float(util[:, i].max()) for i, r in enumerate(RESOURCES)},
        min_over_mean={r: float(util[:, i].min()) for i, r in enumerate(RESOURCES)},
    )


def topic_index(model: ClusterModel) -> tuple[IntArray, int]:
    """Return ``(int32[P] topic number per partition, number of topics)``, topics sorted.

    Sorting millions of names takes seconds, so the answer for the last ``model.topics``
    array seen is kept (by identity, weakly): an array must not be changed in place.
    """
    cached = _TOPIC_INDEX.get("last")
    if cached is not None and cached[0]() is model.topics:
        return cached[1].copy(), cached[2]
    names, inverse = np.unique(model.topics.astype(str), return_inverse=True)
    index = inverse.astype(np.int32)
    _TOPIC_INDEX["last"] = (weakref.ref(model.topics), index, int(names.size))
    return index.copy(), int(names.size)


_TOPIC_INDEX: dict[str, tuple[weakref.ref[npt.NDArray[np.object_]], IntArray, int]] = {}
"""The last :func:`topic_index` answer, with a weak reference to its ``topics`` array."""


def topic_counts(model: ClusterModel, assignment: IntArray) -> IntArray:
    """Return ``int32[T, B]``: replicas of each topic (see :func:`topic_index`) per broker."""
    topic, count = topic_index(model)
    held = assignment != NO_BROKER
    cells = topic[np.nonzero(held)[0]].astype(np.int64) * model.num_brokers + assignment[held]
    flat = np.bincount(cells, minlength=count * model.num_brokers)
    return flat.reshape(count, model.num_brokers).astype(np.int32)


def topic_caps(model: ClusterModel, assignment: IntArray, eligible: BoolArray) -> IntArray:
    """Return ``int32[T]``: the most replicas of a topic one broker should hold.

    ``ceil(replicas of the topic / eligible brokers)``: the per-topic replica spread goal.
    """
    counts = topic_counts(model, assignment).sum(axis=1)
    brokers = max(int(eligible.sum()), 1)
    return np.asarray(-(-counts // brokers), dtype=np.int32)


def topic_spread_excess(model: ClusterModel, assignment: IntArray, eligible: BoolArray) -> int:
    """Return how many replicas sit above their topic's per-broker cap (0 = evenly spread)."""
    over = topic_counts(model, assignment) - topic_caps(model, assignment, eligible)[:, None]
    return int(np.maximum(over, 0).sum())


def bytes_moved(model: ClusterModel, before: IntArray, after: IntArray) -> float:
    """Return the bytes copied to go from ``before`` to ``after``.

    Each replica in ``after`` that is not in ``before`` copies its partition's size once;
    a new order alone (a leader move) copies nothing.
    """
    width = max(before.shape[1], after.shape[1])
    old = np.full((before.shape[0], width), NO_BROKER, dtype=np.int32)
    old[:, : before.shape[1]] = before
    new_ones = np.zeros(after.shape[0], dtype=np.int64)
    for j in range(after.shape[1]):
        fresh = (after[:, j] != NO_BROKER) & ~(old == after[:, j : j + 1]).any(axis=1)
        new_ones += fresh
    return float((new_ones * model.size_bytes).sum())


def bytes_moved_lower_bound(
    model: ClusterModel, assignment: IntArray, eligible: BoolArray, tolerance: float
) -> float:
    """Return a lower bound of the bytes any plan must copy to balance the disks.

    Only disk usage costs bytes (a replica with a high rate can be small), so the bound
    comes from disk alone. With ``m_b`` the ideal disk load of broker ``b`` (its capacity
    times the ideal utilisation), every balanced target has each eligible broker in
    ``[(2 - tolerance) m_b, tolerance m_b]``. A broker above the top must send at least its
    excess and an ineligible broker all it holds; a broker below the bottom must receive
    at least its deficit. Every copied replica leaves one broker and reaches one broker,
    so the bound is ``max(sum of drains + excesses, sum of deficits)``.

    When every partition's RF equals the number of racks of the eligible brokers (e.g.
    RF 3 over 3 zones) and every replica sits in one of those racks, a replica can only
    move within its rack (every other rack already holds a replica of the partition), so
    the bound is taken rack by rack and summed.
    Otherwise it ignores racks; it always ignores the other resources, so it can be below
    the true minimum.

    Args:
        model: The cluster.
        assignment: The current ``int32[P, max_rf]`` assignment.
        eligible: ``bool[B]`` brokers that may hold replicas.
        tolerance: Balance tolerance, e.g. 1.05.
    """
    disk = broker_loads(model, assignment)[:, DISK]
    cap = model.disk_capacity
    eligible_cap = cap[eligible].sum()
    ideal = disk.sum() / eligible_cap if eligible_cap > 0 else 0.0
    target = ideal * cap
    sent = np.where(eligible, np.maximum(disk - tolerance * target, 0.0), disk)
    received = np.where(eligible, np.maximum((2 - tolerance) * target - disk, 0.0), 0.0)
    keys = rack_keys(model)
    racks = np.unique(keys[eligible])
    rf = (assignment != NO_BROKER).sum(axis=1)
    holding = np.unique(keys[assignment[assignment != NO_BROKER]])
    rack_bound = rf.size > 0 and bool(np.all(rf == racks.size))
    if racks.size > 1 and rack_bound and np.isin(holding, racks).all():
        groups = [keys == k for k in np.unique(keys)]
    else:
        groups = [np.ones(model.num_brokers, dtype=bool)]
    return float(sum(max(sent[g].sum(), received[g].sum()) for g in groups))


def hard_goal_violations(
    model: ClusterModel,
    assignment: IntArray,
    *,
    eligible: BoolArray | None = None,
    disk_threshold: float = 0.8,
    max_replicas_per_broker: int | None = None,
    reference: IntArray | None = None,
) -> list[Violation]:
    """Return every hard goal ``assignment`` breaks, partition goals first, by position.

    Goals (names in :data:`HARD_GOALS`): each partition spans ``min(RF, racks)`` racks
    (:func:`required_racks`); no broker lists a partition twice; every replica is on an
    eligible broker (alive, not removed); each eligible broker's disk load is at most
    ``disk_threshold`` of its capacity and its replica count at most
    ``max_replicas_per_broker``; the partition count and each partition's RF equal those of
    ``reference``.

    Args:
        model: The cluster.
        assignment: ``int32[P, max_rf]`` broker positions.
        eligible: ``bool[B]``; default the alive brokers.
        disk_threshold: Fraction of disk capacity never exceeded.
        max_replicas_per_broker: Cap of replicas per broker, or None.
        reference: Assignment whose RF and partition count must be kept; default
            ``model.replicas``.
    """
    eligible = model.alive if eligible is None else eligible
    reference = model.replicas if reference is None else reference
    found: list[Violation] = []
    if assignment.shape[0] != reference.shape[0]:
        return [
            Violation(
                PARTITION_COUNT,
                f"{assignment.shape[0]} partitions instead of {reference.shape[0]}",
            )
        ]
    ids = model.broker_ids
    rf = (assignment != NO_BROKER).sum(axis=1)
    ref_rf = (reference != NO_BROKER).sum(axis=1)
    for p in np.flatnonzero(rf != ref_rf):
        found.append(
            Violation(REPLICATION_FACTOR, f"{_name(model, p)}: RF {rf[p]}, was {ref_rf[p]}", int(p))
        )
    ordered = np.sort(assignment, axis=1)
    twice = ((ordered[:, 1:] == ordered[:, :-1]) & (ordered[:, 1:] != NO_BROKER)).any(axis=1)
    for p in np.flatnonzero(twice):
        found.append(
            Violation(DUPLICATE_REPLICA, f"{_name(model, p)} lists a broker twice", int(p))
        )
    need = required_racks(model, assignment, eligible)
    have = distinct_racks(model, assignment)
    for p in np.flatnonzero(have < need):
        found.append(
            Violation(RACK, f"{_name(model, p)} spans {have[p]} racks, needs {need[p]}", int(p))
        )
    loads = broker_loads(model, assignment)
    for b in np.flatnonzero(~eligible & (loads[:, REPLICAS] > 0)):
        state = "dead" if not model.alive[b] else "being removed"
        found.append(
            Violation(
                INELIGIBLE_BROKER,
                f"broker {ids[b]} is {state} and holds {int(loads[b, REPLICAS])} replicas",
                broker_id=int(ids[b]),
            )
        )
    limit = disk_threshold * model.disk_capacity
    for b in np.flatnonzero(eligible & (loads[:, DISK] > limit)):
        found.append(
            Violation(
                DISK_THRESHOLD,
                f"broker {ids[b]} holds {loads[b, DISK]:.0f} bytes, above "
                f"{disk_threshold:.0%} of its {model.disk_capacity[b]:.0f}",
                broker_id=int(ids[b]),
            )
        )
    if max_replicas_per_broker is not None:
        for b in np.flatnonzero(eligible & (loads[:, REPLICAS] > max_replicas_per_broker)):
            found.append(
                Violation(
                    MAX_REPLICAS,
                    f"broker {ids[b]} holds {int(loads[b, REPLICAS])} replicas, above "
                    f"{max_replicas_per_broker}",
                    broker_id=int(ids[b]),
                )
            )
    return found


def _name(model: ClusterModel, p: int | np.integer) -> str:
    return f"{model.topics[p]}-{model.partitions[p]}"
