"""The budget a BalancingPolicy's running fixes share (pure).

Kafka throttles replication per broker (KIP-73): ``follower.replication.throttled.rate``
caps what one broker fetches for its throttled replicas, whatever reassignment they
belong to, and the operator gives each broker the lowest rate any contribution asks
(:func:`~kpo_operator.throttles.merge`). So when every running fix asks for rate ``r``,
the cluster's replication traffic into the brokers receiving replicas is at most
``r`` times their number. :func:`share_budget` picks ``r`` as the budget divided by the
brokers receiving replicas from any running fix, and divides the leadership movements
among the fixes (Cruise Control's ``num.concurrent.leader.movements`` is one cluster-wide
number; here each fix enforces its share, ``spec.concurrentLeaderMovements``).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from kpo_kafka.topic_partition import TopicPartition
from kpo_operator.balancing.spec import BudgetSpec


@dataclass(frozen=True)
class BudgetShare:
    """What each running fix is given.

    Attributes:
        fix_rate: Replication throttle of each fix, bytes/s per broker (``None``: none).
        receiving_brokers: Brokers receiving replicas from a running fix.
        leader_movements: Each fix's ``spec.concurrentLeaderMovements``.
        partition_movements: Each fix's ``spec.concurrentPartitionMovementsPerBroker``
            (counted over every in-flight reassignment, so shared as it is).
    """

    fix_rate: int | None
    receiving_brokers: int
    leader_movements: int
    partition_movements: int


def receiving_brokers(
    targets: Iterable[Mapping[TopicPartition, Sequence[int]]],
    current: Mapping[TopicPartition, Sequence[int]],
    adding: Mapping[TopicPartition, Sequence[int]],
) -> frozenset[int]:
    """Return the brokers that gain a replica in any of ``targets``.

    For a partition in flight, Kafka's adding replicas (``adding``, from
    ListPartitionReassignments: the replica set in Metadata already includes them); for
    one not submitted yet, its target replicas minus its ``current`` ones; none for one
    that reached its target.
    """
    out: set[int] = set()
    for fix in targets:
        for tp, replicas in fix.items():
            if tp in adding:
                out.update(adding[tp])
            else:
                out.update(set(replicas) - set(current.get(tp, ())))
    return frozenset(out)


def share_budget(budget: BudgetSpec, receiving: Collection[int], running_fixes: int) -> BudgetShare:
    """Divide ``budget`` among ``running_fixes`` fixes sending to ``receiving`` brokers.

    The rate is rounded down to whole bytes/s and at least 1 KiB/s (the CRD's minimum).
    """
    rate = None
    if budget.replication_rate is not None:
        rate = max(1024, budget.replication_rate // max(1, len(receiving)))
    leaders = max(1, budget.concurrent_leader_movements // max(1, running_fixes))
    return BudgetShare(
        fix_rate=rate,
        receiving_brokers=len(receiving),
        leader_movements=leaders,
        partition_movements=budget.concurrent_partition_movements_per_broker,
    )
