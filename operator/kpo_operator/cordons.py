"""Cordoning the brokers a reassignment drains (KIP-1066), and who owns each cordon: pure logic.

Kafka 4.3 added the broker config ``cordoned.log.dirs`` (KIP-1066): a comma-separated list
of the broker's log dirs, or ``*`` for all of them, that take no new replicas. The KRaft
controller's replica placer (``StripedReplicaPlacer``) skips a broker whose log dirs are all
cordoned when it places new partitions, and a manual assignment (CreateTopics with
replicas, CreatePartitions, AlterPartitionReassignments) naming such a broker is refused
with INVALID_REPLICA_ASSIGNMENT ("... but all its log directories are cordoned"). Setting it
needs ``metadata.version`` 4.3-IV0 or newer (the controller answers INVALID_CONFIG
otherwise); a broker that knows it answers DescribeLogDirs v5, whose ``IsCordoned`` flag
reports each dir. Kafka 3.9, ZooKeeper mode and this project's brokers have no such config.

While a PartitionReassignment moves every replica off a broker (it *drains* it), the
operator sets ``cordoned.log.dirs=*`` on that broker, so that nothing new lands there during
the move, and puts the previous value back when the move completes, is cancelled or its
object is deleted. As with the throttles (:mod:`kpo_operator.throttle_ledger`), it changes
only what it owns, recorded in a :class:`CordonLedger` saved ahead of each write: a cordon
someone else set is left alone, and a value someone changed after the operator wrote it
is not reverted when the operator lets go.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from kpo_kafka.admin_types import PartitionInfo
from kpo_kafka.topic_partition import TopicPartition

CORDONED_LOG_DIRS = "cordoned.log.dirs"
"""Kafka's broker config (``ServerLogConfigs.CORDONED_LOG_DIRS_CONFIG``, KIP-1066)."""
CORDON_ALL = "*"
"""``cordoned.log.dirs`` value cordoning every log dir of the broker."""
CORDON_MIN_DESCRIBE_LOG_DIRS = 5
"""DescribeLogDirs version that brokers knowing ``cordoned.log.dirs`` answer (Kafka 4.3)."""
CORDON_LEDGER_VERSION = 1
"""Version of the ledger's JSON layout; another version is refused."""


class CordonLedgerFormatError(ValueError):
    """A stored cordon ledger is not valid JSON of the expected layout."""


def cordon_supported(describe_log_dirs_version: int | None) -> bool:
    """Whether a broker knows ``cordoned.log.dirs``, from its newest DescribeLogDirs version.

    DescribeLogDirs v5 (``IsCordoned``) came with KIP-1066 in Kafka 4.3; kafka-python
    infers 4.3 by the same request version. ``None``: the broker lacks the request.
    """
    return (describe_log_dirs_version or 0) >= CORDON_MIN_DESCRIBE_LOG_DIRS


def drained_brokers(
    topics: Mapping[str, Mapping[int, PartitionInfo]],
    targets: Mapping[TopicPartition, Sequence[int]],
) -> frozenset[int]:
    """Brokers that hold replicas of ``targets``' partitions now and none once they moved.

    Args:
        topics: Every topic of the cluster (Metadata): topic -> partition -> replicas.
            A partition in flight counts with all of its replicas (target and removing).
        targets: The target replicas of the partitions being moved.

    Returns:
        The brokers that lose a replica to the move and keep no replica of any partition
        of the cluster (the move drains them).
    """
    losing: set[int] = set()
    keeping: set[int] = set()
    for topic, partitions in topics.items():
        for index, info in partitions.items():
            target = targets.get(TopicPartition(topic, index))
            if target is None:
                keeping.update(info.replicas)
                continue
            keeping.update(target)
            losing.update(b for b in info.replicas if b not in target)
    return frozenset(losing - keeping)


def replica_counts(topics: Mapping[str, Mapping[int, PartitionInfo]]) -> dict[int, int]:
    """Broker id -> how many partitions of ``topics`` have a replica on it (AR).

    Computed once per Metadata of every topic, for :func:`drained_by` of many objects.
    """
    counts: dict[int, int] = {}
    for partitions in topics.values():
        for info in partitions.values():
            for broker in info.replicas:
                counts[broker] = counts.get(broker, 0) + 1
    return counts


def drained_by(
    counts: Mapping[int, int],
    topics: Mapping[str, Mapping[int, PartitionInfo]],
    targets: Mapping[TopicPartition, Sequence[int]],
) -> frozenset[int]:
    """:func:`drained_brokers`, in time that grows with ``targets`` rather than the cluster.

    Args:
        counts: :func:`replica_counts` of ``topics``.
        topics: Every topic of the cluster (Metadata), as for :func:`drained_brokers`.
        targets: The target replicas of the partitions being moved.

    A broker is drained when it is in no existing target and every partition holding a
    replica on it is one of the targets, which drops it.
    """
    losing: dict[int, int] = {}  # broker -> target partitions holding it that drop it
    kept: set[int] = set()
    for (topic, index), target in targets.items():
        info = topics.get(topic, {}).get(index)
        if info is None:
            continue
        kept.update(target)
        for broker in info.replicas:
            if broker not in target:
                losing[broker] = losing.get(broker, 0) + 1
    return frozenset(b for b, lost in losing.items() if b not in kept and lost == counts.get(b, 0))


@dataclass(frozen=True)
class OwnedCordon:
    """A ``cordoned.log.dirs`` value the operator wrote on one broker.

    Attributes:
        value: The value written (``*``).
        previous: The broker's own (per-broker dynamic) value before, put back when the
            operator lets go; ``None``: there was none (the key is deleted).
        pending: Saved ahead of a write not yet confirmed: the config may still hold
            ``previous``.
    """

    value: str
    previous: str | None = None
    pending: bool = False

    def written(self, current: str | None) -> bool:
        """Whether the broker's ``current`` value is one the operator wrote (or, pending, had)."""
        return current == self.value or (self.pending and current == self.previous)


@dataclass
class CordonLedger:
    """The cordons the operator owns in one Kafka cluster.

    Attributes:
        cluster_id: The Kafka cluster id the entries belong to (DescribeCluster).
        brokers: broker id -> the cordon the operator wrote there.
    """

    cluster_id: str | None = None
    brokers: dict[int, OwnedCordon] = field(default_factory=dict)

    def to_json(self) -> str:
        """Return the stored form: sorted, compact JSON."""
        brokers: dict[str, dict[str, Any]] = {}
        for broker, owned in sorted(self.brokers.items()):
            entry: dict[str, Any] = {"value": owned.value, "previous": owned.previous}
            if owned.pending:
                entry["pending"] = True
            brokers[str(broker)] = entry
        body = {"version": CORDON_LEDGER_VERSION, "clusterId": self.cluster_id, "brokers": brokers}
        return json.dumps(body, sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> CordonLedger:
        """Read the stored form written by :meth:`to_json`.

        Raises:
            CordonLedgerFormatError: Not JSON, another version, or a malformed entry.
        """
        try:
            body = json.loads(text)
            if body.get("version") != CORDON_LEDGER_VERSION:
                raise CordonLedgerFormatError(
                    f"unknown cordon ledger version {body.get('version')!r}"
                )
            ledger = cls(body.get("clusterId"))
            for broker, entry in body.get("brokers", {}).items():
                previous = entry.get("previous")
                ledger.brokers[int(broker)] = OwnedCordon(
                    str(entry["value"]),
                    None if previous is None else str(previous),
                    bool(entry.get("pending", False)),
                )
        except CordonLedgerFormatError:
            raise
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise CordonLedgerFormatError(f"malformed cordon ledger: {exc}") from exc
        return ledger


@dataclass(frozen=True)
class CordonPlan:
    """The writes one sync makes and the ledgers around them.

    Attributes:
        changes: broker -> new ``cordoned.log.dirs`` value (``None``: delete the key).
        write_ahead: The ledger to save before the writes (new entries pending).
        ledger: The ledger once every write succeeded.
        foreign: Wanted brokers left alone: their value was set outside the operator.
        before: The ledger the plan started from.
    """

    changes: dict[int, str | None]
    write_ahead: CordonLedger
    ledger: CordonLedger
    foreign: dict[int, str]
    before: CordonLedger

    def settled(self, failed: set[int]) -> CordonLedger:
        """Return the ledger after the writes, those to ``failed`` brokers not applied.

        A failed write keeps the broker's entry as before the sync: a failed cordon
        leaves none, a failed release or repair keeps owning.
        """
        out = CordonLedger(self.ledger.cluster_id, dict(self.ledger.brokers))
        for broker in failed:
            prior = self.before.brokers.get(broker)
            if prior is None:
                out.brokers.pop(broker, None)
            else:
                out.brokers[broker] = prior
        return out


def plan_cordons(
    wanted: frozenset[int],
    current: Mapping[int, str | None],
    ledger: CordonLedger,
) -> CordonPlan:
    """Decide the ``cordoned.log.dirs`` writes: cordon ``wanted``, release what is no longer.

    Args:
        wanted: Live brokers that some reassignment drains (and that support cordoning).
        current: broker -> its per-broker dynamic ``cordoned.log.dirs`` (``None``: unset),
            for every broker in ``wanted`` and in the ledger that is live.
        ledger: What the operator owns now.

    Rules, per broker: wanted and not owned: cordon (``*``) unless a value set outside the
    operator is there (left alone, reported in ``foreign``); wanted and owned: write
    ``*`` again if someone changed it (drift repair); owned and no longer wanted: put the
    previous value back if the broker still has the operator's value, else (someone changed
    it since) leave it; either way the entry goes. Brokers absent from ``current`` (not
    live) keep their entries untouched.
    """
    changes: dict[int, str | None] = {}
    ahead = CordonLedger(ledger.cluster_id, dict(ledger.brokers))
    after = CordonLedger(ledger.cluster_id, dict(ledger.brokers))
    foreign: dict[int, str] = {}
    for broker in sorted(wanted | set(ledger.brokers)):
        if broker not in current:
            continue
        value = current[broker]
        owned = ledger.brokers.get(broker)
        if broker in wanted:
            if owned is None:
                if value:
                    foreign[broker] = value
                    continue
                changes[broker] = CORDON_ALL
                ahead.brokers[broker] = OwnedCordon(CORDON_ALL, value, pending=True)
                after.brokers[broker] = OwnedCordon(CORDON_ALL, value)
            else:
                settled = replace(owned, pending=False)
                after.brokers[broker] = settled
                if value != owned.value:
                    changes[broker] = owned.value
                    ahead.brokers[broker] = replace(owned, pending=True)
            continue
        assert owned is not None
        after.brokers.pop(broker)
        if owned.written(value) and value != owned.previous:
            changes[broker] = owned.previous
    return CordonPlan(changes, ahead, after, foreign, ledger)
