"""The single writer of replication throttles (KIP-73): contributions, merge and diff.

Kafka throttles replication with five dynamic configs (read by ``ReplicationQuotaManager``):
on brokers ``leader.replication.throttled.rate``, ``follower.replication.throttled.rate``
(bytes/s of throttled replication traffic) and
``replica.alter.log.dirs.io.max.bytes.per.second`` (bytes/s of moves between log
dirs, KIP-113); on topics ``leader.replication.throttled.replicas`` and
``follower.replication.throttled.replicas`` (``"*"`` or ``partition:broker`` pairs
naming the throttled replicas). The operator owns exactly these keys and nothing else.

Each TopicReplicaQuota and each in-flight PartitionReassignment *contributes*
values (:func:`quota_contribution`, :func:`reassignment_contribution`);
:func:`merge` folds all contributions into one effective configuration (replica
lists: union, ``*`` if any contribution says ``*``; rates: the lowest wins, every
disagreement reported as a :class:`ThrottleConflict`); :func:`diff` turns the
effective configuration and the configuration read back with DescribeConfigs into
IncrementalAlterConfigs operations. Because the effective configuration is always
recomputed from all contributions, dropping one contribution removes exactly what
it alone set.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum

from kpo_kafka.admin_types import ConfigResourceKind
from kpo_kafka.specs import ANY_LOG_DIR, PartitionReassignmentSpec, TopicReplicaQuotaSpec
from kpo_operator.model import ClusterView

LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LOG_DIR_MOVE_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
BROKER_KEYS = (LEADER_RATE, FOLLOWER_RATE, LOG_DIR_MOVE_RATE)
"""Broker config keys owned by the operator (rates, bytes/s)."""
TOPIC_KEYS = (LEADER_REPLICAS, FOLLOWER_REPLICAS)
"""Topic config keys owned by the operator (throttled replica lists)."""


class ThrottleFormatError(ValueError):
    """A throttled-replicas value is neither ``*`` nor ``partition:broker[,...]``."""


@dataclass(frozen=True)
class ThrottledReplicas:
    """The value of a ``*.replication.throttled.replicas`` topic config.

    Attributes:
        wildcard: ``True`` for ``"*"`` (every replica of the topic).
        replicas: ``(partition, broker id)`` pairs; empty when ``wildcard``.
    """

    wildcard: bool = False
    replicas: frozenset[tuple[int, int]] = frozenset()

    @classmethod
    def parse(cls, text: str) -> ThrottledReplicas:
        """Parse Kafka's text form, e.g. ``"*"`` or ``"0:101,1:102"`` (blanks ignored).

        Raises:
            ThrottleFormatError: The text is not in that form.
        """
        text = text.strip()
        if text == "*":
            return cls(wildcard=True)
        pairs: set[tuple[int, int]] = set()
        for item in filter(None, (part.strip() for part in text.split(","))):
            partition, sep, broker = item.partition(":")
            if not sep or not partition.strip().isdigit() or not broker.strip().isdigit():
                raise ThrottleFormatError(f"not a partition:broker pair: {item!r}")
            pairs.add((int(partition), int(broker)))
        return cls(replicas=frozenset(pairs))

    def render(self) -> str:
        """Kafka's text form, pairs sorted by partition then broker."""
        if self.wildcard:
            return "*"
        return ",".join(f"{p}:{b}" for p, b in sorted(self.replicas))

    def union(self, other: ThrottledReplicas) -> ThrottledReplicas:
        """Both lists together; ``*`` if either is ``*``."""
        if self.wildcard or other.wildcard:
            return ThrottledReplicas(wildcard=True)
        return ThrottledReplicas(replicas=self.replicas | other.replicas)

    def __bool__(self) -> bool:
        return self.wildcard or bool(self.replicas)


@dataclass(frozen=True)
class Contribution:
    """What one object wants set.

    Attributes:
        source: The contributing object, e.g. ``TopicReplicaQuota ns/name``; used to
            name winners in conflicts and to break ties.
        broker_rates: broker id -> config key (one of :data:`BROKER_KEYS`) -> bytes/s.
        topic_replicas: topic -> config key (one of :data:`TOPIC_KEYS`) -> replicas.
    """

    source: str
    broker_rates: Mapping[int, Mapping[str, int]] = field(default_factory=dict)
    topic_replicas: Mapping[str, Mapping[str, ThrottledReplicas]] = field(default_factory=dict)


def reassignment_contribution(
    source: str, spec: PartitionReassignmentSpec, view: ClusterView
) -> Contribution:
    """Compute the throttles ``kafka-reassign-partitions --throttle`` would set for ``spec``.

    A partition *moves* when its target replicas differ from its original replicas
    (OAR: ``view``'s AR minus the adding replicas, so this is stable while the
    reassignment runs). Partitions missing from ``view`` are skipped. With
    ``throttle.replicationRate``:

    - topic ``leader.replication.throttled.replicas``: ``partition:broker`` for every
      original replica of each moving partition (any of them may be the leader that
      serves the new replicas);
    - topic ``follower.replication.throttled.replicas``: ``partition:broker`` for every
      adding replica (target minus original);
    - broker ``leader.replication.throttled.rate`` and
      ``follower.replication.throttled.rate``: on every broker in the original or the
      target replicas of a moving partition, i.e. every broker that leads (or may
      lead) or receives a moving partition, as Kafka's tool does.

    With ``throttle.logDirMoveRate``: ``replica.alter.log.dirs.io.max.bytes.per.second``
    on every broker given an explicit (not ``"any"``) log dir.
    """
    throttle = spec.throttle
    rates: dict[int, dict[str, int]] = {}
    topics: dict[str, dict[str, ThrottledReplicas]] = {}
    if throttle is None:
        return Contribution(source)
    for target in spec.partitions:
        state = view.partition(target.topic, target.partition)
        if throttle.replication_rate is not None and state is not None:
            original = state.original_replicas
            if list(original) != list(target.replicas) or state.adding:
                # Replicas Kafka is still adding towards an older target stay throttled
                # until the new target is submitted (KIP-455 drops them then).
                adding = [b for b in target.replicas if b not in original]
                adding += [b for b in state.adding if b not in adding]
                entry = topics.setdefault(target.topic, {})
                for key, brokers in ((LEADER_REPLICAS, original), (FOLLOWER_REPLICAS, adding)):
                    pairs = frozenset((target.partition, b) for b in brokers)
                    old = entry.get(key, ThrottledReplicas())
                    entry[key] = old.union(ThrottledReplicas(replicas=pairs))
                for broker in (*original, *target.replicas, *state.adding):
                    rates.setdefault(broker, {})[LEADER_RATE] = throttle.replication_rate
                    rates[broker][FOLLOWER_RATE] = throttle.replication_rate
        if throttle.log_dir_move_rate is not None and target.log_dirs is not None:
            for broker, log_dir in zip(target.replicas, target.log_dirs, strict=False):
                if log_dir != ANY_LOG_DIR:
                    rates.setdefault(broker, {})[LOG_DIR_MOVE_RATE] = throttle.log_dir_move_rate
    topics = {t: {k: v for k, v in e.items() if v} for t, e in topics.items()}
    return Contribution(source, rates, {t: e for t, e in topics.items() if e})


def quota_contribution(source: str, spec: TopicReplicaQuotaSpec, view: ClusterView) -> Contribution:
    """Compute the configs a TopicReplicaQuota sets.

    Rates go to ``spec.brokers`` (every live broker of ``view`` when omitted); replica
    lists go to ``spec.topics.names`` (every topic of ``view`` with ``topics.all``).

    Raises:
        ThrottleFormatError: A replica list is malformed (the model's pattern prevents it).
    """
    brokers = spec.brokers if spec.brokers is not None else sorted(view.live_brokers)
    topic_names = spec.topics.names if spec.topics.names is not None else sorted(view.topics)
    broker_rates: dict[str, int] = {}
    if spec.leader_replication_throttled_rate is not None:
        broker_rates[LEADER_RATE] = spec.leader_replication_throttled_rate
    if spec.follower_replication_throttled_rate is not None:
        broker_rates[FOLLOWER_RATE] = spec.follower_replication_throttled_rate
    lists: dict[str, ThrottledReplicas] = {}
    if spec.leader_replication_throttled_replicas is not None:
        lists[LEADER_REPLICAS] = ThrottledReplicas.parse(spec.leader_replication_throttled_replicas)
    if spec.follower_replication_throttled_replicas is not None:
        lists[FOLLOWER_REPLICAS] = ThrottledReplicas.parse(
            spec.follower_replication_throttled_replicas
        )
    return Contribution(
        source,
        {b: dict(broker_rates) for b in brokers} if broker_rates else {},
        {t: dict(lists) for t in topic_names} if lists else {},
    )


@dataclass(frozen=True)
class ThrottleConflict:
    """Contributions disagreeing on one broker rate; the lowest rate wins.

    Attributes:
        broker: The broker id.
        key: The config key.
        winner: Source whose value is applied (lowest rate; ties: first source name).
        value: The applied rate, bytes/s.
        others: ``(source, rate)`` of every other contribution, sorted.
    """

    broker: int
    key: str
    winner: str
    value: int
    others: tuple[tuple[str, int], ...]

    @property
    def message(self) -> str:
        """A sentence for a condition or Event."""
        others = ", ".join(f"{s} wants {v}" for s, v in self.others)
        return (
            f"broker {self.broker} {self.key}: {self.winner} wins with {self.value} bytes/s "
            f"(the lowest rate wins; {others})"
        )


@dataclass
class EffectiveThrottles:
    """The merged configuration to keep applied.

    Attributes:
        brokers: broker id -> key -> bytes/s.
        topics: topic -> key -> throttled replicas (never empty).
        conflicts: Rate disagreements and how they were resolved.
    """

    brokers: dict[int, dict[str, int]] = field(default_factory=dict)
    topics: dict[str, dict[str, ThrottledReplicas]] = field(default_factory=dict)
    conflicts: list[ThrottleConflict] = field(default_factory=list)

    def render(self) -> ThrottleConfigs:
        """Return the configuration as Kafka config strings."""
        return ThrottleConfigs(
            {b: {k: str(v) for k, v in c.items()} for b, c in self.brokers.items()},
            {t: {k: v.render() for k, v in c.items()} for t, c in self.topics.items()},
        )


@dataclass
class ThrottleConfigs:
    """Throttle configs as strings, e.g. as DescribeConfigs returns them.

    Attributes:
        brokers: broker id -> config key -> value; keys outside :data:`BROKER_KEYS`
            are ignored by :func:`diff`.
        topics: topic -> config key -> value; keys outside :data:`TOPIC_KEYS` ignored.
    """

    brokers: dict[int, dict[str, str]] = field(default_factory=dict)
    topics: dict[str, dict[str, str]] = field(default_factory=dict)


def merge(contributions: Iterable[Contribution]) -> EffectiveThrottles:
    """Fold every contribution into one configuration; the result ignores their order.

    Replica lists of one topic/key are united (``*`` absorbs everything). For each
    broker/key the lowest rate wins, as the most protective choice; when
    contributions disagree a :class:`ThrottleConflict` names the winner.
    """
    rate_votes: dict[tuple[int, str], list[tuple[int, str]]] = {}
    result = EffectiveThrottles()
    for contribution in contributions:
        for broker, rates in contribution.broker_rates.items():
            for key, rate in rates.items():
                rate_votes.setdefault((broker, key), []).append((rate, contribution.source))
        for topic, lists in contribution.topic_replicas.items():
            for key, replicas in lists.items():
                if not replicas:
                    continue
                entry = result.topics.setdefault(topic, {})
                entry[key] = entry.get(key, ThrottledReplicas()).union(replicas)
    for (broker, key), votes in sorted(rate_votes.items()):
        votes.sort()
        value, winner = votes[0]
        result.brokers.setdefault(broker, {})[key] = value
        if len({v for v, _ in votes}) > 1:
            others = tuple(sorted((s, v) for v, s in votes[1:]))
            result.conflicts.append(ThrottleConflict(broker, key, winner, value, others))
    return result


class OpType(IntEnum):
    """IncrementalAlterConfigs operation types (KIP-339)."""

    SET = 0
    DELETE = 1


@dataclass(frozen=True, order=True)
class ConfigChange:
    """One IncrementalAlterConfigs operation.

    Attributes:
        resource_type: BROKER or TOPIC.
        resource_name: Broker id as a string, or the topic name.
        key: The config key.
        op: SET or DELETE.
        value: The new value for SET, ``None`` for DELETE.
    """

    resource_type: ConfigResourceKind
    resource_name: str
    key: str
    op: OpType
    value: str | None = None


def _same(key: str, wanted: str, current: str) -> bool:
    try:
        if key in TOPIC_KEYS:
            return ThrottledReplicas.parse(wanted) == ThrottledReplicas.parse(current)
        return int(wanted) == int(current.strip())
    except ValueError:
        return False


def diff(effective: EffectiveThrottles, current: ThrottleConfigs) -> list[ConfigChange]:
    """Compute the operations turning ``current`` into ``effective`` on owned keys only.

    ``current`` must hold the configs of every broker and topic that may carry an owned
    key (all brokers and topics of the cluster): an owned key set there but absent from
    ``effective`` is deleted; a value equal in meaning (same rate, same pairs in another
    order) is left alone; keys the operator does not own are never touched.

    Returns:
        Changes sorted by resource kind (brokers, then topics), name and key.
    """
    wanted = effective.render()
    changes: list[ConfigChange] = []
    sides: tuple[
        tuple[ConfigResourceKind, dict[str, dict[str, str]], dict[str, dict[str, str]]], ...
    ]
    sides = (
        (
            ConfigResourceKind.BROKER,
            {str(b): c for b, c in wanted.brokers.items()},
            {str(b): c for b, c in current.brokers.items()},
        ),
        (ConfigResourceKind.TOPIC, wanted.topics, current.topics),
    )
    for rtype, want_side, have_side in sides:
        owned = BROKER_KEYS if rtype is ConfigResourceKind.BROKER else TOPIC_KEYS
        for name in sorted(set(want_side) | set(have_side)):
            want, have = want_side.get(name, {}), have_side.get(name, {})
            for key in owned:
                if key in want and (key not in have or not _same(key, want[key], have[key])):
                    changes.append(ConfigChange(rtype, name, key, OpType.SET, want[key]))
                elif key not in want and key in have:
                    changes.append(ConfigChange(rtype, name, key, OpType.DELETE))
    return sorted(changes)
