"""The single writer of replication throttles (KIP-73): contributions, merge and plan.

Kafka throttles replication with five dynamic configs (read by ``ReplicationQuotaManager``):
on brokers ``leader.replication.throttled.rate``, ``follower.replication.throttled.rate``
(bytes/s of throttled replication traffic) and
``replica.alter.log.dirs.io.max.bytes.per.second`` (bytes/s of moves between log
dirs, KIP-113); on topics ``leader.replication.throttled.replicas`` and
``follower.replication.throttled.replicas`` (``"*"`` or ``partition:broker`` pairs
naming the throttled replicas). Others write these keys too (Kafka's
``kafka-reassign-partitions --throttle``, people): the operator changes only the
values and pairs it wrote itself, recorded in a
:class:`~kpo_operator.throttle_ledger.ThrottleLedger`, and never a key outside them.

Each TopicReplicaQuota and each in-flight PartitionReassignment *contributes*
values (:func:`quota_contribution`, :func:`reassignment_contribution`);
:func:`merge` folds all contributions into one effective configuration (replica
lists: union, ``*`` if any contribution says ``*``; rates: the lowest wins, every
disagreement reported as a :class:`ThrottleConflict`); :func:`plan` turns the
effective configuration, the configuration read back with DescribeConfigs and the
ledger into IncrementalAlterConfigs operations, the ledger to keep, and the foreign
values in the way (:class:`ForeignThrottle`). Because the effective configuration is
always recomputed from all contributions, dropping one contribution removes exactly
what it alone set.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import IntEnum

from kpo_kafka.admin_types import ConfigResourceKind
from kpo_kafka.specs import ANY_LOG_DIR, MAX_ID, PartitionReassignmentSpec, TopicReplicaQuotaSpec
from kpo_operator.model import ClusterView
from kpo_operator.throttle_ledger import OwnedRate, OwnedReplicas, ThrottleLedger

LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LOG_DIR_MOVE_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
BROKER_KEYS = (LEADER_RATE, FOLLOWER_RATE, LOG_DIR_MOVE_RATE)
"""Broker config keys the operator writes (rates, bytes/s)."""
TOPIC_KEYS = (LEADER_REPLICAS, FOLLOWER_REPLICAS)
"""Topic config keys the operator writes (throttled replica lists)."""


class ThrottleFormatError(ValueError):
    """A throttled-replicas value is neither ``*`` nor ``partition:broker[,...]`` of Java ints."""


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
            ThrottleFormatError: The text is not in that form, or an id is above
                :data:`~kpo_kafka.specs.MAX_ID` (Kafka reads ids as Java ints).
        """
        text = text.strip()
        if text == "*":
            return cls(wildcard=True)
        pairs: set[tuple[int, int]] = set()
        for item in filter(None, (part.strip() for part in text.split(","))):
            partition, sep, broker = item.partition(":")
            if not sep or not partition.strip().isdigit() or not broker.strip().isdigit():
                raise ThrottleFormatError(f"not a partition:broker pair: {item!r}")
            pair = (int(partition), int(broker))
            if max(pair) > MAX_ID:
                raise ThrottleFormatError(f"id above {MAX_ID} (a Java int): {item!r}")
            pairs.add(pair)
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
        claims: The brokers of ``broker_rates`` were named explicitly (a
            TopicReplicaQuota's ``spec.brokers``): its rates there replace foreign values.
    """

    source: str
    broker_rates: Mapping[int, Mapping[str, int]] = field(default_factory=dict)
    topic_replicas: Mapping[str, Mapping[str, ThrottledReplicas]] = field(default_factory=dict)
    claims: bool = False


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

    Rates go to ``spec.brokers`` (every live broker of ``view`` when omitted; named
    brokers are *claimed*: the quota's rates replace foreign rates there); replica
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
        claims=spec.brokers is not None,
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
        claims: ``(broker, key)`` rates that a claiming contribution wants: they
            replace foreign values (see :attr:`Contribution.claims`).
    """

    brokers: dict[int, dict[str, int]] = field(default_factory=dict)
    topics: dict[str, dict[str, ThrottledReplicas]] = field(default_factory=dict)
    conflicts: list[ThrottleConflict] = field(default_factory=list)
    claims: set[tuple[int, str]] = field(default_factory=set)

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
            are ignored by :func:`plan`.
        topics: topic -> config key -> value; keys outside :data:`TOPIC_KEYS` are ignored.
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
                if contribution.claims:
                    result.claims.add((broker, key))
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


@dataclass(frozen=True)
class ForeignThrottle:
    """A throttle value set outside the operator that differs from what it wants.

    Attributes:
        resource_type: BROKER or TOPIC.
        resource_name: Broker id as a string, or the topic name.
        key: The config key.
        foreign: The value found (set by someone else, e.g. Kafka's
            ``kafka-reassign-partitions --throttle``).
        wanted: The value the operator's objects want.
        overridden: ``True`` when a TopicReplicaQuota claims the broker in its
            ``spec.brokers`` and the operator overwrote the value (it is put back
            when no object wants the key any more); ``False``: left alone.
    """

    resource_type: ConfigResourceKind
    resource_name: str
    key: str
    foreign: str
    wanted: str
    overridden: bool = False

    @property
    def message(self) -> str:
        """A sentence for a condition or Event naming the key, the resource and both values."""
        where = f"{self.resource_type.name.lower()} {self.resource_name} {self.key}"
        if self.overridden:
            return (
                f"{where}: {self.foreign!r} set outside the operator was replaced by "
                f"{self.wanted!r} (broker claimed in spec.brokers; put back when released)"
            )
        return (
            f"{where}: {self.foreign!r} set outside the operator is left alone "
            f"({self.wanted!r} wanted)"
        )


@dataclass
class ThrottlePlan:
    """What one sync must write, and what the operator owns before and after.

    Attributes:
        changes: IncrementalAlterConfigs operations, sorted by kind, name and key.
        ledger: What the operator owns once every change is applied.
        write_ahead: What to save *before* applying: the entries being set (pending)
            and the owned entries being deleted or released, so that a crash at any
            point leaves nothing the operator wrote unowned.
        foreign: Foreign values that differ from what is wanted (left alone or,
            for a claimed broker, overridden).
        drift: Those of ``changes`` that repair an owned value changed or removed
            outside the operator.
    """

    changes: list[ConfigChange]
    ledger: ThrottleLedger
    write_ahead: ThrottleLedger
    foreign: list[ForeignThrottle] = field(default_factory=list)
    drift: list[ConfigChange] = field(default_factory=list)

    def settled(self, failed: Collection[tuple[ConfigResourceKind, str]]) -> ThrottleLedger:
        """Return the ledger to keep after applying (``failed`` keep their write-ahead entries).

        Args:
            failed: ``(kind, name)`` of the resources whose IncrementalAlterConfigs failed.
        """
        failed_set = set(failed)
        result = ThrottleLedger(self.ledger.cluster_id)
        for broker in set(self.ledger.brokers) | set(self.write_ahead.brokers):
            side = self.write_ahead if (BROKER, str(broker)) in failed_set else self.ledger
            if side.brokers.get(broker):
                result.brokers[broker] = dict(side.brokers[broker])
        for topic in set(self.ledger.topics) | set(self.write_ahead.topics):
            side = self.write_ahead if (TOPIC, topic) in failed_set else self.ledger
            if side.topics.get(topic):
                result.topics[topic] = dict(side.topics[topic])
        return result


BROKER = ConfigResourceKind.BROKER
TOPIC = ConfigResourceKind.TOPIC


def _rate(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return int(text.strip())
    except ValueError:
        return None


@dataclass
class _Decision:
    """One key's outcome: the change, the owned entry after it and ahead of it."""

    change: ConfigChange | None = None
    after: OwnedRate | OwnedReplicas | None = None
    ahead: OwnedRate | OwnedReplicas | None = None
    drift: bool = False
    foreign: ForeignThrottle | None = None


def _plan_rate(
    broker: int,
    key: str,
    current: str | None,
    owned: OwnedRate | None,
    want: int | None,
    *,
    claimed: bool,
) -> _Decision:
    """Decide one broker rate (see :func:`plan`)."""
    name = str(broker)

    def set_to(value: int, replaced: str | None, previous: int | None) -> _Decision:
        return _Decision(
            ConfigChange(BROKER, name, key, OpType.SET, str(value)),
            OwnedRate(value, replaced),
            OwnedRate(value, replaced, pending=True, previous=previous),
        )

    rate = _rate(current)
    if current is None:
        if want is None:
            return _Decision()
        decision = set_to(want, None, None)
        decision.drift = owned is not None and not owned.pending
        return decision
    if owned is not None and owned.written(rate):
        assert rate is not None
        if want is not None:
            if rate == want:
                kept = OwnedRate(want, owned.replaced)
                return _Decision(None, kept, kept)
            return set_to(want, owned.replaced, rate)
        restore = (
            ConfigChange(BROKER, name, key, OpType.SET, owned.replaced)
            if owned.replaced is not None
            else ConfigChange(BROKER, name, key, OpType.DELETE)
        )
        return _Decision(restore, None, OwnedRate(rate, owned.replaced))
    if owned is not None:  # an owned value changed outside the operator
        if want is None:
            return _Decision()  # released: the new value is someone else's now
        if rate == want:
            kept = OwnedRate(want, owned.replaced)
            return _Decision(None, kept, kept)
        decision = set_to(want, owned.replaced, None)
        decision.drift = not owned.pending
        return decision
    if want is None or rate == want:
        return _Decision()
    if claimed:
        decision = set_to(want, current, None)
        decision.foreign = ForeignThrottle(BROKER, name, key, current, str(want), overridden=True)
        return decision
    return _Decision(foreign=ForeignThrottle(BROKER, name, key, current, str(want)))


class ReplicaListCache:
    """Replica lists last read back, parsed (:meth:`ThrottledReplicas.parse`), per topic and key.

    A sync reads every list it may change back at each sync, most of them unchanged
    since the last one; parsing one of thousands of pairs again costs far more than
    comparing its text. Not thread-safe (one sync at a time uses it).
    """

    def __init__(self) -> None:
        self._parsed: dict[tuple[str, str], tuple[str, ThrottledReplicas]] = {}

    def parse(self, topic: str, key: str, text: str) -> ThrottledReplicas:
        """:meth:`ThrottledReplicas.parse` of ``text``, kept while ``topic``'s ``key`` reads so.

        Raises:
            ThrottleFormatError: As :meth:`ThrottledReplicas.parse` (nothing is kept).
        """
        cached = self._parsed.get((topic, key))
        if cached is not None and cached[0] == text:
            return cached[1]
        parsed = ThrottledReplicas.parse(text)
        self._parsed[(topic, key)] = (text, parsed)
        return parsed

    def keep(self, topics: Collection[str]) -> None:
        """Forget the lists of topics not in ``topics`` (deleted, or no longer read)."""
        self._parsed = {k: v for k, v in self._parsed.items() if k[0] in topics}


def _plan_replicas(
    topic: str,
    key: str,
    current: str | None,
    owned: OwnedReplicas | None,
    want: ThrottledReplicas | None,
    lists: ReplicaListCache | None = None,
) -> _Decision:
    """Decide one topic's replica list (see :func:`plan`)."""
    if current is None:
        found: ThrottledReplicas | None = None
    else:
        try:
            found = (
                lists.parse(topic, key, current)
                if lists is not None
                else ThrottledReplicas.parse(current)
            )
        except ThrottleFormatError:
            if owned is None:  # someone else's malformed value: not ours to fix
                if want is None:
                    return _Decision()
                return _Decision(foreign=ForeignThrottle(TOPIC, topic, key, current, want.render()))
            found = None  # ours, garbled: rewritten (or deleted when not wanted) below
    mine = owned or OwnedReplicas()
    if found is None:
        foreign = ThrottledReplicas()
    elif found.wildcard:
        foreign = (
            ThrottledReplicas(replicas=mine.covered)
            if mine.wildcard
            else ThrottledReplicas(wildcard=True)
        )
    else:
        foreign = ThrottledReplicas(replicas=found.replicas - mine.pairs)
    after: OwnedReplicas | None = None
    if want is not None and not foreign.wildcard:
        if want.wildcard:
            after = OwnedReplicas(wildcard=True, covered=foreign.replicas)
        elif pairs := want.replicas - foreign.replicas:
            after = OwnedReplicas(pairs=frozenset(pairs))
    new = foreign.union(want) if want is not None else foreign
    change: ConfigChange | None = None
    if not new:
        if current is not None:
            change = ConfigChange(TOPIC, topic, key, OpType.DELETE)
    elif found is None or found != new:
        change = ConfigChange(TOPIC, topic, key, OpType.SET, new.render())
    if change is None:
        return _Decision(None, after, after)
    ahead = mine.union(after) if owned is not None and after is not None else owned or after
    if ahead is not None:
        ahead = replace(ahead, pending=True)
    drift = False
    if owned is not None and not owned.pending and want is not None:
        # Something the operator wrote and still wants was changed or removed by hand.
        if current is not None and found is None:
            drift = True  # garbled
        elif found is None or not found.wildcard:
            lost = owned.pairs - (found.replicas if found is not None else frozenset())
            drift = (
                (owned.wildcard and want.wildcard)
                or bool(lost & want.replicas)
                or (want.wildcard and bool(lost))
            )
    return _Decision(change, after, ahead, drift)


def plan(
    wanted: EffectiveThrottles,
    current: ThrottleConfigs,
    ledger: ThrottleLedger,
    lists: ReplicaListCache | None = None,
) -> ThrottlePlan:
    """Decide the writes that give ``wanted`` while touching only what the operator owns.

    Args:
        wanted: The merged contributions, restricted to live brokers and existing topics.
        current: The five throttle keys of every live broker and every topic as read
            with DescribeConfigs (a resource with none of them maps to ``{}``); other
            keys are ignored.
        ledger: What the operator owns (:class:`~kpo_operator.throttle_ledger.ThrottleLedger`).
        lists: Parsed replica lists of earlier plans, reused when unchanged (the result
            does not depend on it).

    Broker rates, per broker and key (``owned``: the ledger has it and the broker holds
    a value the operator wrote):

    - absent: set when wanted (a drift repair if it was owned);
    - owned: set when a different rate is wanted; when not wanted, deleted, or the
      foreign value it replaced is put back;
    - owned key changed outside the operator: set again when wanted (drift repair),
      otherwise released and left as it is;
    - foreign: left alone and reported when a different rate is wanted, unless the
      key is in ``wanted.claims`` (a TopicReplicaQuota's explicit ``spec.brokers``):
      then set, owned, and the foreign value remembered and reported as overridden.

    Replica lists, per topic and key: the foreign pairs (found but not owned; a
    foreign ``"*"`` stays ``"*"``) are kept and united with the wanted ones; an
    empty result deletes the key; the operator owns the wanted pairs that were not
    foreign (or its ``"*"`` and the foreign pairs it covers). Owned pairs missing
    from the config (e.g. Kafka's ``--verify`` removed the whole key) are written
    again while still wanted. A malformed foreign value is left alone and reported; a
    malformed owned one (Kafka refuses to store one) is rewritten, or deleted when not wanted.

    Ledger entries of brokers not in ``current`` (not live) are kept as they are;
    those of topics not in ``current`` (deleted, with their configs) are dropped.
    """
    result = ThrottlePlan([], ThrottleLedger(ledger.cluster_id), ThrottleLedger(ledger.cluster_id))

    def note(decision: _Decision) -> None:
        if decision.change is not None:
            result.changes.append(decision.change)
            if decision.drift:
                result.drift.append(decision.change)
        if decision.foreign is not None:
            result.foreign.append(decision.foreign)

    for broker, configs in current.brokers.items():
        owned_rates = ledger.brokers.get(broker, {})
        want_rates = wanted.brokers.get(broker, {})
        for key in BROKER_KEYS:
            rate = _plan_rate(
                broker,
                key,
                configs.get(key),
                owned_rates.get(key),
                want_rates.get(key),
                claimed=(broker, key) in wanted.claims,
            )
            held = rate.after
            if rate.foreign is None and isinstance(held, OwnedRate) and held.replaced is not None:
                # Still holding a claimed broker: the status keeps saying so.
                rate.foreign = ForeignThrottle(
                    BROKER, str(broker), key, held.replaced, str(held.value), overridden=True
                )
            note(rate)
            for book, owned_rate in ((result.ledger, rate.after), (result.write_ahead, rate.ahead)):
                if isinstance(owned_rate, OwnedRate):
                    book.brokers.setdefault(broker, {})[key] = owned_rate
    for broker, owned_rates in ledger.brokers.items():
        if broker not in current.brokers:
            result.ledger.brokers[broker] = dict(owned_rates)
            result.write_ahead.brokers[broker] = dict(owned_rates)
    for topic, configs in current.topics.items():
        owned_lists = ledger.topics.get(topic, {})
        want_lists = wanted.topics.get(topic, {})
        for key in TOPIC_KEYS:
            topic_list = _plan_replicas(
                topic, key, configs.get(key), owned_lists.get(key), want_lists.get(key), lists
            )
            note(topic_list)
            sides = ((result.ledger, topic_list.after), (result.write_ahead, topic_list.ahead))
            for book, owned in sides:
                if isinstance(owned, OwnedReplicas):
                    book.topics.setdefault(topic, {})[key] = owned
    result.changes.sort()
    result.drift.sort()
    return result
