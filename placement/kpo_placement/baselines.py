"""Two baseline planners the benchmark compares :func:`kpo_placement.planner.plan` with.

* :func:`kafka_generate`: what ``kafka-reassign-partitions --generate`` proposes for all
  topics over the eligible brokers: every topic laid out again round-robin by Kafka's
  topic-creation placement (rack-aware when every broker has a rack), through
  :func:`kpo_kafka.generate.propose_move`. It ignores loads and the current placement,
  so it moves most bytes.
* :func:`greedy_plan`: a plain greedy planner on disk usage only. It drains ineligible
  brokers, then repeatedly moves the largest replica of the most loaded broker that
  fits (keeps the hard goals and does not make the pair's maximum worse) to the least
  loaded broker able to take it, until disk is within the tolerance or nothing fits. It
  leaves leadership alone.

Both return a target ``int32[P, max_rf]`` of broker positions, like :attr:`Plan.target`.
"""

from __future__ import annotations

import numpy as np

from kpo_kafka.generate import propose_move
from kpo_kafka.topic_partition import TopicPartition
from kpo_placement import goals
from kpo_placement.goals import DISK
from kpo_placement.model import NO_BROKER, BoolArray, ClusterModel, IntArray


def kafka_generate(model: ClusterModel, eligible: BoolArray, seed: int = 0) -> IntArray:
    """Return ``--generate``'s proposal for every topic over the ``eligible`` brokers.

    Args:
        model: The cluster.
        eligible: ``bool[B]`` brokers in ``--broker-list``.
        seed: Seed of the per-topic start index and shift draws.

    Raises:
        kpo_kafka.assignment.ReplicaAssignmentError: Kafka would refuse (e.g. RF above the
            number of brokers, some brokers with a rack and others without).
        kpo_kafka.generate.GenerateError: the brokers or topics are not in the model.
    """
    ids = [int(i) for i in model.broker_ids]
    current: dict[str, dict[int, list[int]]] = {}
    for p in range(model.num_partitions):
        row = [ids[b] for b in model.replicas[p] if b != NO_BROKER]
        current.setdefault(str(model.topics[p]), {})[int(model.partitions[p])] = row
    racks = {
        ids[b]: (model.rack_names[model.racks[b]] if model.racks[b] >= 0 else None)
        for b in range(model.num_brokers)
    }
    brokers = [ids[b] for b in np.flatnonzero(eligible)]
    proposal = propose_move(current, sorted(current), brokers, racks, seed=seed)
    position = {broker_id: b for b, broker_id in enumerate(ids)}
    target = np.full_like(model.replicas, NO_BROKER)
    for p in range(model.num_partitions):
        proposed = proposal.proposed[TopicPartition(str(model.topics[p]), int(model.partitions[p]))]
        target[p, : len(proposed)] = [position[i] for i in proposed]
    return target


def greedy_plan(
    model: ClusterModel,
    eligible: BoolArray,
    *,
    tolerance: float = 1.05,
    disk_threshold: float = 0.8,
    max_moves: int | None = None,
) -> IntArray:
    """Return the plain greedy planner's target (see the module docstring).

    Args:
        model: The cluster.
        eligible: ``bool[B]`` brokers that may hold replicas.
        tolerance: Stop when every eligible broker's disk is below ``tolerance`` x mean.
        disk_threshold: Fraction of disk capacity no move may exceed.
        max_moves: Moves at most; default ``2 x replicas``.
    """
    target = model.replicas.copy()
    loads = goals.broker_loads(model, target)[:, DISK]
    cap = model.disk_capacity
    ideal = loads.sum() / cap[eligible].sum()
    keys = goals.rack_keys(model)
    need = goals.required_racks(model, target, eligible)
    held: list[list[int]] = [[] for _ in range(model.num_brokers)]
    for p, b in zip(*np.nonzero(target != NO_BROKER), strict=True):
        held[int(target[p, b])].append(int(p))
    budget = max_moves if max_moves is not None else 2 * len(model.replicas.flat)
    stuck: set[int] = set()
    for _ in range(budget):
        util = loads / cap / ideal
        draining = [b for b in np.flatnonzero(~eligible) if held[b] and b not in stuck]
        if draining:
            s = int(draining[0])
        else:
            ranked = [b for b in np.argsort(-util, kind="stable") if eligible[b] and b not in stuck]
            if not ranked or util[ranked[0]] <= tolerance:
                break
            s = int(ranked[0])
        if not _move_largest(model, target, loads, held, s, eligible, keys, need, disk_threshold):
            stuck.add(s)
    return target


def _move_largest(
    model: ClusterModel,
    target: IntArray,
    loads: np.ndarray,
    held: list[list[int]],
    s: int,
    eligible: BoolArray,
    keys: IntArray,
    need: IntArray,
    disk_threshold: float,
) -> bool:
    """Move ``s``'s largest replica that fits to the least loaded broker; True if moved."""
    cap = model.disk_capacity
    util = loads / cap
    dests = [int(d) for d in np.argsort(util, kind="stable") if eligible[d] and d != s]
    draining = not eligible[s]
    for p in sorted(held[s], key=lambda q: (-model.size_bytes[q], q)):
        size = float(model.size_bytes[p])
        row = target[p]
        slot = int(np.flatnonzero(row == s)[0])
        others = [int(b) for b in row if b != NO_BROKER and b != s]
        other_racks = {int(keys[b]) for b in others}
        for d in dests:
            after = (loads[d] + size) / cap[d]
            if not draining and after >= util[s]:
                break  # every later broker is more loaded: this replica cannot help
            if d in others or loads[d] + size > disk_threshold * cap[d]:
                continue
            if len(other_racks) < need[p] and int(keys[d]) in other_racks:
                continue
            target[p, slot] = d
            loads[s] -= size
            loads[d] += size
            held[s].remove(p)
            held[d].append(p)
            return True
    return False
