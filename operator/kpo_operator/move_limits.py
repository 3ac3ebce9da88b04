"""Concurrency limits of one PartitionReassignment: which waiting partitions to submit now (pure).

A PartitionReassignment may bound how much of it Kafka moves at once, as Cruise
Control's executor does with ``num.concurrent.partition.movements.per.broker`` and
``num.concurrent.leader.movements`` (Strimzi's KafkaRebalance passes them as
``concurrentPartitionMovementsPerBroker`` and ``concurrentLeaderMovements``). The step
that would submit partitions with AlterPartitionReassignments (KIP-455) asks
:func:`admit` which of them to submit now; the others stay Pending, with the reason in
their ``status.partitions`` message, and are asked about again at the next step.

The rules of :func:`admit`:

- **Movements.** A partition's movement adds a replica to each broker of its adding
  replicas (target minus OAR) and removes one from each broker of its removing replicas
  (OAR minus target); it counts once on each of those brokers. A broker's *load* is the
  number of in-flight movements counting on it: every reassignment in flight on the
  cluster (ListPartitionReassignments), this object's, other objects' and other tools'.
  Brokers that are not live count nothing and block nothing (nothing is copied out of a
  dead broker, and a replica added to one waits for it whatever the limit).
- **Order.** Candidates are taken in the caller's order (the spec's); one held back does
  not hold back those after it (a later partition on idle brokers goes first), and each
  one admitted counts for the ones after it.
- **Per broker.** A candidate is admitted when none of the live brokers its movement
  newly touches already carries ``per_broker`` movements. A candidate already in flight
  (a changed target, which KIP-455 applies to the same OAR) replaces its movement: the
  brokers the old one touched are not newly touched.
- **Leaders.** A candidate whose current leader is not in its target replicas moves the
  leader; it is admitted while fewer than ``leader_moves`` of this object's in-flight
  partitions do (their leader not in the target Kafka moves them to). A partition without
  a leader moves none.
- **No deadlock.** When nothing of this object is in flight (and nothing was admitted
  before it in the same call), the first candidate is admitted even if a broker it touches
  is at the limit. A broker at the limit only with this object's movements frees up as they
  finish; a broker held by other objects' or tools' movements, however long they take,
  then still lets this object move one partition at a time. A broker therefore carries at
  most ``per_broker`` movements, plus one per object that has nothing else in flight. The
  leader limit cannot block that candidate: with nothing in flight the object moves no
  leader, and ``leader_moves`` is at least 1.

Limits changed by an edit apply from the next call; in-flight partitions are never
resubmitted for them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from kpo_kafka.specs import PartitionReassignmentSpec
from kpo_kafka.states import MoveState
from kpo_kafka.topic_partition import TopicPartition
from kpo_operator.progress import PartitionStatus

PER_BROKER_FIELD = "concurrentPartitionMovementsPerBroker"
"""``spec`` field of the per-broker limit (``num.concurrent.partition.movements.per.broker``)."""
LEADER_FIELD = "concurrentLeaderMovements"
"""``spec`` field of the leader limit (``num.concurrent.leader.movements``)."""


class Movement(Protocol):
    """A reassignment in flight as ListPartitionReassignments reports it (KIP-455).

    :class:`~kpo_kafka.admin_types.Reassignment` and an in-flight
    :class:`~kpo_kafka.admin_types.PartitionInfo` are both one.
    """

    @property
    def replicas(self) -> tuple[int, ...]:
        """AR: the target replicas followed by the ones being removed."""
        ...

    @property
    def adding(self) -> tuple[int, ...]:
        """Replicas being added (RAR minus OAR)."""
        ...

    @property
    def removing(self) -> tuple[int, ...]:
        """Replicas being removed (OAR minus RAR)."""
        ...


@dataclass(frozen=True)
class MoveLimits:
    """The concurrency limits of one object; ``None``: no limit.

    Attributes:
        per_broker: ``spec.concurrentPartitionMovementsPerBroker``, movements per broker.
        leader_moves: ``spec.concurrentLeaderMovements``, partitions.
    """

    per_broker: int | None = None
    leader_moves: int | None = None

    def __bool__(self) -> bool:
        return self.per_broker is not None or self.leader_moves is not None

    @classmethod
    def of(cls, spec: PartitionReassignmentSpec | None, raw: object = None) -> MoveLimits:
        """Return the limits of ``spec``, or of the raw ``spec`` dict when it did not parse.

        An object whose spec became invalid while it moves keeps moving what was
        accepted; its limits are then read from ``raw`` (the object's ``spec``) field by
        field. A field there that is not an integer >= 1 (the CRD rejects it, other
        sources may not) limits to 1, the strictest value.
        """
        if spec is not None:
            return cls(
                spec.concurrent_partition_movements_per_broker, spec.concurrent_leader_movements
            )
        fields: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
        return cls(_raw_limit(fields, PER_BROKER_FIELD), _raw_limit(fields, LEADER_FIELD))


def _raw_limit(fields: Mapping[str, Any], name: str) -> int | None:
    if name not in fields or fields[name] is None:
        return None
    value = fields[name]
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else 1


@dataclass(frozen=True)
class Candidate:
    """A partition the step would submit.

    Attributes:
        tp: The partition.
        original: OAR: its replicas before any reassignment in flight (AR minus adding).
        target: RAR: the accepted target replicas, preferred leader first.
        leader: Its current leader's broker id, -1 if none.
    """

    tp: TopicPartition
    original: tuple[int, ...]
    target: tuple[int, ...]
    leader: int

    @property
    def brokers(self) -> frozenset[int]:
        """The brokers its movement adds a replica to or removes one from."""
        return frozenset(self.original).symmetric_difference(self.target)


@dataclass(frozen=True)
class Admission:
    """What :func:`admit` decided.

    Attributes:
        admitted: Partition -> target replicas to submit now, in the candidates' order.
        waiting: Partition -> why it waits (``"waiting: ..."``, the limit and brokers).
    """

    admitted: dict[TopicPartition, list[int]] = field(default_factory=dict)
    waiting: dict[TopicPartition, str] = field(default_factory=dict)


def admit(
    candidates: Sequence[Candidate],
    in_flight: Mapping[TopicPartition, Movement],
    live: Collection[int],
    limits: MoveLimits,
    own: Mapping[TopicPartition, int],
) -> Admission:
    """Split ``candidates`` into those to submit now and those to keep waiting.

    Args:
        candidates: The partitions the step would submit, in the spec's order.
        in_flight: Every reassignment in flight on the cluster (ListPartitionReassignments).
        live: The live brokers' ids (DescribeCluster).
        limits: The object's limits; without any, every candidate is admitted.
        own: This object's partitions that may be in flight -> their current leader (-1:
            none); only those in ``in_flight`` count.

    Returns:
        The :class:`Admission`; see the module for the rules.
    """
    alive = frozenset(live)
    per_broker, leader_moves = limits.per_broker, limits.leader_moves
    load: Counter[int] = Counter()
    if per_broker is not None:
        for movement in in_flight.values():
            load.update(_touched(movement, alive))
    ours = [tp for tp in own if tp in in_flight]
    leading = {tp for tp in ours if _moves_leader(own[tp], _target_of(in_flight[tp]))}
    found = Admission()
    for candidate in candidates:
        old = in_flight.get(candidate.tp)
        before = _touched(old, alive) if old is not None else frozenset()
        after = candidate.brokers & alive
        moves_leader = _moves_leader(candidate.leader, candidate.target)
        reasons: list[str] = []
        if per_broker is not None:
            full = sorted(b for b in after - before if load[b] >= per_broker)
            if full and (ours or found.admitted):
                brokers = "brokers " if len(full) > 1 else "broker "
                named = brokers + ", ".join(map(str, full))
                reasons.append(f"{PER_BROKER_FIELD} {per_broker} reached on {named}")
        if (
            leader_moves is not None
            and moves_leader
            and candidate.tp not in leading
            and len(leading) >= leader_moves
        ):
            reasons.append(f"{LEADER_FIELD} {leader_moves} reached")
        if reasons:
            found.waiting[candidate.tp] = "waiting: " + "; ".join(reasons)
            continue
        found.admitted[candidate.tp] = list(candidate.target)
        load.subtract(before)
        load.update(after)
        leading.discard(candidate.tp)
        if moves_leader:
            leading.add(candidate.tp)
    return found


def mark_waiting(
    entries: Sequence[PartitionStatus], waiting: Mapping[TopicPartition, str]
) -> list[PartitionStatus]:
    """Return ``entries`` with each waiting Pending one's message set to why it waits."""
    if not waiting:
        return list(entries)
    return [
        e._replace(message=waiting[e.key])
        if e.state == MoveState.PENDING and e.key in waiting
        else e
        for e in entries
    ]


def _touched(movement: Movement, alive: frozenset[int]) -> frozenset[int]:
    """Return the live brokers an in-flight ``movement`` adds a replica to or removes one from."""
    return frozenset(movement.adding).union(movement.removing) & alive


def _target_of(movement: Movement) -> tuple[int, ...]:
    """Return the replicas Kafka moves the partition to (AR minus removing)."""
    return tuple(b for b in movement.replicas if b not in movement.removing)


def _moves_leader(leader: int, target: Collection[int]) -> bool:
    """Whether reaching ``target`` moves the leader (one exists and is not in the target)."""
    return leader >= 0 and leader not in target
