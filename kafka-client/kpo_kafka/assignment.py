"""Kafka's replica assignment: ``AdminUtils.assignReplicasToBrokers`` and its checks (pure).

One implementation for the broker's controller (topic creation and CreatePartitions,
``AdminZkClient``) and the operator's ``kafka-reassign-partitions --generate``:

- Rack-unaware: brokers sorted by id; partition ``p``'s first replica (its preferred
  leader) is broker ``(p + start) mod n``, so leaders go round robin; follower ``j``
  (``j = 0 .. RF-2``) sits at distance ``1 + (shift + j) mod (n - 1)`` from the first
  replica, and ``shift`` grows by one after every ``n`` partitions, so that the
  followers of a broker's partitions are spread over the other brokers. With start
  index 0 and no shift, replica ``j`` of partition ``i`` is on broker ``(i + j) mod n``.
- Rack-aware (every broker has ``broker.rack``): the same walk over a broker list that
  alternates racks (one broker of each rack in turn, racks sorted by name), with the
  shift multiplied by the number of racks, skipping a broker whose rack already holds
  a replica of the partition while some rack holds none, and a broker that already
  holds one. A partition's replicas are thus on ``min(RF, racks)`` distinct racks.

Kafka draws the start index and the initial shift at random (in that order) for every
topic; a fixed start index (Kafka's ``fixedStartIndex``) is used for both. Callers
that need a reproducible answer pass a seeded ``random.Random`` or fix both values
(:func:`assign_replicas`).
"""

from __future__ import annotations

import enum
import random
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass


class ReplicaAssignmentError(ValueError):
    """Replicas cannot be assigned as asked; the subclass says why."""


class BrokerListError(ReplicaAssignmentError):
    """The brokers to assign over are none, or name a broker twice or a negative id."""


class InvalidPartitionsError(ReplicaAssignmentError):
    """The partition count is not positive, or does not grow the topic (``INVALID_PARTITIONS``)."""


class InvalidReplicationFactorError(ReplicaAssignmentError):
    """The replication factor is below 1 or above the number of brokers.

    Kafka's ``INVALID_REPLICATION_FACTOR``.
    """


class InvalidReplicaAssignmentError(ReplicaAssignmentError):
    """An explicit assignment is inconsistent (``INVALID_REPLICA_ASSIGNMENT``)."""


class InconsistentBrokerRacksError(ReplicaAssignmentError):
    """Some brokers have ``broker.rack`` and others not, with rack awareness enforced.

    Kafka's ``AdminOperationException`` "Not all brokers have rack information".
    """


class RackAwareMode(enum.Enum):
    """How racks are used (Kafka's ``RackAwareMode``).

    ``ENFORCED``: rack-aware; brokers with and without racks together are an error.
    ``SAFE``: rack-aware only when every broker has a rack. ``DISABLED``: racks ignored.
    """

    ENFORCED = "Enforced"
    SAFE = "Safe"
    DISABLED = "Disabled"


@dataclass(frozen=True)
class BrokerMetadata:
    """A broker as replica assignment sees it.

    Attributes:
        id: ``broker.id``.
        rack: ``broker.rack``, or None.
    """

    id: int
    rack: str | None = None


def rack_alternated_brokers(racks: Mapping[int, str]) -> list[int]:
    """Return broker ids ordered by taking one broker of each rack in turn.

    Racks are visited in name order and each rack's brokers in id order; racks that run
    out of brokers are skipped. E.g. ``{0: "r1", 1: "r3", 2: "r3", 3: "r2", 4: "r2",
    5: "r1"}`` gives ``[0, 3, 1, 5, 4, 2]``.
    """
    by_rack: dict[str, list[int]] = {}
    for broker, rack in sorted(racks.items()):
        by_rack.setdefault(rack, []).append(broker)
    columns = [by_rack[rack] for rack in sorted(by_rack)]
    depth = max((len(c) for c in columns), default=0)
    return [column[row] for row in range(depth) for column in columns if row < len(column)]


def _effective_racks(
    brokers: Sequence[BrokerMetadata], mode: RackAwareMode
) -> Mapping[int, str] | None:
    with_rack = {b.id: b.rack for b in brokers if b.rack is not None}
    if mode is RackAwareMode.DISABLED or not with_rack:
        return None
    if len(with_rack) < len(brokers):
        if mode is RackAwareMode.SAFE:
            return None
        raise InconsistentBrokerRacksError(
            "not all brokers have rack information for a rack-aware assignment"
        )
    return with_rack


def _follower_index(first: int, shift: int, follower: int, broker_count: int) -> int:
    """Return the broker-list index of follower number ``follower`` (0-based)."""
    return (first + 1 + (shift + follower) % (broker_count - 1)) % broker_count


def assign_replicas(
    brokers: Sequence[int],
    partitions: Iterable[int],
    replication_factor: int,
    *,
    start_index: int,
    replica_shift: int,
    racks: Mapping[int, str] | None = None,
) -> dict[int, tuple[int, ...]]:
    """Place ``replication_factor`` replicas of each partition on ``brokers``.

    The walk of Kafka's ``AdminUtils.assignReplicasToBrokers`` (see the module
    docstring) with the random start index and replica shift given.

    Args:
        brokers: Distinct broker ids; they are taken in id order (rack-alternated
            order when ``racks`` is given).
        partitions: Partition indexes to place (usually ``0 .. count-1``).
        replication_factor: Replicas per partition.
        start_index: Where partition 0's first replica goes in the broker order.
        replica_shift: Initial distance offset of the followers.
        racks: broker id -> rack for every broker, to place rack-aware; ``None`` not to.

    Returns:
        partition -> replicas, preferred leader first.

    Raises:
        BrokerListError: ``brokers`` is empty or repeats an id.
        InvalidReplicationFactorError: ``replication_factor`` is < 1 or > ``len(brokers)``.
        InconsistentBrokerRacksError: ``racks`` lacks a broker.
    """
    if not brokers or len(set(brokers)) != len(brokers):
        raise BrokerListError(f"broker list must be non-empty and distinct: {list(brokers)}")
    if not 1 <= replication_factor <= len(brokers):
        raise InvalidReplicationFactorError(
            f"replication factor {replication_factor} is not within 1..{len(brokers)} "
            f"(the number of brokers)"
        )
    if racks is not None and (missing := set(brokers) - set(racks)):
        raise InconsistentBrokerRacksError(f"no rack known for brokers {sorted(missing)}")
    ordered = (
        sorted(brokers)
        if racks is None
        else rack_alternated_brokers({b: racks[b] for b in brokers})
    )
    n = len(ordered)
    rack_count = 1 if racks is None else len({racks[b] for b in brokers})
    result: dict[int, tuple[int, ...]] = {}
    shift = replica_shift
    for partition in sorted(set(partitions)):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start_index) % n
        chosen = [ordered[first]]
        if racks is None:
            chosen += [
                ordered[_follower_index(first, shift, j, n)] for j in range(replication_factor - 1)
            ]
        else:
            used_racks = {racks[chosen[0]]}
            candidate = 0
            while len(chosen) < replication_factor:
                broker = ordered[_follower_index(first, shift * rack_count, candidate, n)]
                candidate += 1
                # A rack may take a second replica only once every rack has one.
                rack_ok = racks[broker] not in used_racks or len(used_racks) == rack_count
                if rack_ok and broker not in chosen:
                    chosen.append(broker)
                    used_racks.add(racks[broker])
        result[partition] = tuple(chosen)
    return result


def assign_replicas_to_brokers(
    brokers: Iterable[BrokerMetadata],
    partition_count: int,
    replication_factor: int,
    *,
    start_index: int | None = None,
    start_partition_id: int = 0,
    rng: random.Random | None = None,
    rack_aware_mode: RackAwareMode = RackAwareMode.ENFORCED,
) -> dict[int, list[int]]:
    """Assign the replicas of ``partition_count`` partitions to brokers (topic creation).

    Kafka's ``AdminUtils.assignReplicasToBrokers``: checks the counts and the racks,
    draws the start index and the replica shift, then places with
    :func:`assign_replicas`.

    Args:
        brokers: the brokers to use (usually the live ones); ids must be distinct.
        partition_count: number of partitions to assign.
        replication_factor: replicas per partition.
        start_index: index (in the broker order) of partition 0's first replica, also
            used as the initial follower shift; random when None.
        start_partition_id: id of the first partition assigned (new partitions of an
            existing topic continue its numbering).
        rng: random source for the start index and shift (default: a new ``Random``).
        rack_aware_mode: how to use ``broker.rack``.

    Returns:
        partition id -> replicas, the first being the preferred leader.

    Raises:
        InvalidPartitionsError: ``partition_count`` < 1.
        InvalidReplicationFactorError: ``replication_factor`` < 1 or > number of brokers.
        InconsistentBrokerRacksError: mixed racks with :attr:`RackAwareMode.ENFORCED`.
        BrokerListError: two brokers have the same id.
    """
    metadata = sorted(brokers, key=lambda b: b.id)
    if partition_count < 1:
        raise InvalidPartitionsError("number of partitions must be larger than 0")
    if replication_factor < 1:
        raise InvalidReplicationFactorError("replication factor must be larger than 0")
    if replication_factor > len(metadata):
        raise InvalidReplicationFactorError(
            f"replication factor: {replication_factor} larger than available brokers: "
            f"{len(metadata)}"
        )
    racks = _effective_racks(metadata, rack_aware_mode)
    count = len(metadata)
    source = rng or random.Random()
    start = start_index if start_index is not None else source.randrange(count)
    shift = start_index if start_index is not None else source.randrange(count)
    first_partition = max(0, start_partition_id)
    placed = assign_replicas(
        [b.id for b in metadata],
        range(first_partition, first_partition + partition_count),
        replication_factor,
        start_index=start,
        replica_shift=shift,
        racks=racks,
    )
    return {partition: list(replicas) for partition, replicas in placed.items()}


def assign_replicas_for_new_partitions(
    brokers: Iterable[BrokerMetadata],
    existing: Mapping[int, Sequence[int]],
    partition_count: int,
    *,
    rack_aware_mode: RackAwareMode = RackAwareMode.ENFORCED,
) -> dict[int, list[int]]:
    """Assign the partitions that CreatePartitions adds to a topic.

    The new partitions continue the existing numbering, keep partition 0's replication
    factor, and start the round robin at the first broker (by id) whose id is at least
    partition 0's preferred leader (Kafka's ``AdminZkClient.createPartitions``).

    Args:
        brokers: the brokers to use.
        existing: the topic's current assignment, partition id -> replicas.
        partition_count: the topic's new total number of partitions.
        rack_aware_mode: how to use ``broker.rack``.

    Returns:
        the new partitions only: partition id -> replicas.

    Raises:
        InvalidPartitionsError: ``partition_count`` does not exceed the current count.
        InvalidReplicaAssignmentError: the existing assignment has no partition 0.
        InvalidReplicationFactorError: partition 0 has more replicas than there are brokers.
        InconsistentBrokerRacksError: mixed racks with :attr:`RackAwareMode.ENFORCED`.
    """
    metadata = sorted(brokers, key=lambda b: b.id)
    if 0 not in existing or not existing[0]:
        raise InvalidReplicaAssignmentError("the existing assignment has no partition 0")
    if partition_count <= len(existing):
        raise InvalidPartitionsError(
            f"the number of partitions can only be increased: the topic has {len(existing)}, "
            f"{partition_count} would not be an increase"
        )
    preferred = existing[0][0]
    start = next((i for i, b in enumerate(metadata) if b.id >= preferred), 0)
    return assign_replicas_to_brokers(
        metadata,
        partition_count - len(existing),
        len(existing[0]),
        start_index=start,
        start_partition_id=len(existing),
        rack_aware_mode=rack_aware_mode,
    )


def validate_replica_assignment(
    assignment: Mapping[int, Sequence[int]],
    broker_ids: Collection[int],
    *,
    start_partition_id: int = 0,
    replication_factor: int | None = None,
) -> None:
    """Check an explicit assignment (CreateTopics/CreatePartitions with ``assignments``).

    Args:
        assignment: partition id -> replicas.
        broker_ids: ids of the brokers that exist.
        start_partition_id: the first partition id expected (the current partition count
            when adding partitions).
        replication_factor: the replica count every partition must have; when None,
            the partitions must merely agree with each other.

    Raises:
        InvalidReplicaAssignmentError: partition ids are not consecutive from
            ``start_partition_id``, a replica list is empty or has duplicates, the
            replica counts differ, or a broker does not exist.
    """
    if not assignment:
        raise InvalidReplicaAssignmentError("the assignment is empty")
    expected_ids = set(range(start_partition_id, start_partition_id + len(assignment)))
    if set(assignment) != expected_ids:
        raise InvalidReplicaAssignmentError(
            f"partition ids must be consecutive from {start_partition_id}, got {sorted(assignment)}"
        )
    counts = {len(replicas) for replicas in assignment.values()}
    if replication_factor is not None:
        counts.add(replication_factor)
    if len(counts) > 1:
        raise InvalidReplicaAssignmentError("all partitions must have the same number of replicas")
    for partition, replicas in sorted(assignment.items()):
        if not replicas:
            raise InvalidReplicaAssignmentError(f"partition {partition} has no replicas")
        if len(set(replicas)) != len(replicas):
            raise InvalidReplicaAssignmentError(f"partition {partition} has duplicate replicas")
        unknown = sorted(set(replicas) - set(broker_ids))
        if unknown:
            raise InvalidReplicaAssignmentError(
                f"partition {partition} names unknown brokers {unknown}"
            )
