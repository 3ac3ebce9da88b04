"""The one writer of every ``*.replication.throttled.*`` config in the cluster (I/O edge).

Every reconciler that wants a throttle changed calls :meth:`ThrottleWriter.sync`.
A sync recomputes the whole effective configuration from *all* objects, so no two
writers can fight and removing one object removes exactly what it alone set:

1. list every TopicReplicaQuota (unless being deleted), in the watched namespaces, and
   take every PartitionReassignment whose status is Moving or Cancelling from the
   cluster's :class:`~kpo_operator.reassignment_index.ReassignmentIndex` (each object as the
   operator last saw it: a status written by a step is in it at once, objects created or
   changed elsewhere after its next list, at most its ``max_age_s`` later; a sync does not
   list every object's status), and compute their contributions (a reassignment's from
   the targets and throttle it *accepted*, recorded in its status, not from an unaccepted edit)
   (:func:`~kpo_operator.throttles.quota_contribution`,
   :func:`~kpo_operator.throttles.reassignment_contribution`) over a snapshot of the
   topics they name (with a :class:`~kpo_operator.cluster_reader.SharedClusterReader`,
   the read the cluster's steps share; else a fresh read); a caller's ``overrides``
   replace (or, with ``None``, drop) the contribution of the objects it is changing
   right now;
2. :func:`~kpo_operator.throttles.merge` them (lowest rate wins);
3. read the five throttle keys back with DescribeConfigs from every live broker and
   every topic a contribution or the ledger names (a topic neither names holds no
   value the operator may change: :func:`~kpo_operator.throttles.plan` leaves foreign
   values alone unless they are wanted), :func:`~kpo_operator.throttles.plan` the writes
   against the ownership
   ledger (:class:`~kpo_operator.throttle_ledger.ThrottleLedger`: only values the
   operator wrote are changed or deleted; foreign replica-list pairs are kept), save
   the ledger ahead of the write (pending entries), apply with
   IncrementalAlterConfigs (KIP-339), then save the settled ledger.

An owned value changed or removed outside the operator is put back and a Warning
Event ``ThrottleDriftRepaired`` is recorded on each object that wants that key. A
foreign value in the way of what an object wants is left alone (or, for a broker a
TopicReplicaQuota claims in ``spec.brokers``, overridden and remembered) and a
Warning Event ``ForeignThrottle`` naming the key, the resource and both values is
recorded on each object that wants the key, once per distinct finding.
At most one sync runs at a time; the syncs asked for meanwhile are merged into the next
one (group commit), and a caller content with a recent sync (``max_age_s``) gets it
without waiting for the one in progress.

A sync's CPU must not grow with every object's partitions at every sync:
each object's accepted spec is parsed again only when its accepted entries or throttle
changed (not at each status write of its totals), and its contribution is computed
again only when that spec or the state of its partitions in the snapshot changed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from kpo_kafka.admin import KafkaAdmin
from kpo_kafka.admin_types import ApiError, ConfigResource, ConfigResourceKind
from kpo_kafka.specs import PartitionReassignmentSpec, SpecError, TopicReplicaQuotaSpec
from kpo_kafka.states import THROTTLING_PHASES
from kpo_operator.cluster import ClusterSnapshot, read_cluster
from kpo_operator.cluster_reader import SharedClusterReader
from kpo_operator.model import ClusterView
from kpo_operator.reassignment_index import ReassignmentIndex
from kpo_operator.reassignment_status import accepted_spec
from kpo_operator.resources import PARTITION_REASSIGNMENT, TOPIC_REPLICA_QUOTA, ResourceKind
from kpo_operator.store import WARNING, Object, ObjectStore, object_key
from kpo_operator.throttle_ledger import LedgerFormatError, ThrottleLedger, ThrottleLedgerStore
from kpo_operator.throttles import (
    BROKER_KEYS,
    TOPIC_KEYS,
    ConfigChange,
    Contribution,
    EffectiveThrottles,
    ForeignThrottle,
    OpType,
    ReplicaListCache,
    ThrottleConfigs,
    ThrottledReplicas,
    ThrottleFormatError,
    merge,
    plan,
    quota_contribution,
    reassignment_contribution,
)

logger = logging.getLogger(__name__)


def source_of(kind: ResourceKind, obj: Mapping[str, object]) -> str:
    """Return the contribution name of an object, e.g. ``TopicReplicaQuota ns/name``."""
    return f"{kind.kind} {object_key(obj)}"


@dataclass
class SyncResult:
    """What one sync found and did.

    Attributes:
        effective: The merged configuration now wanted (with rate conflicts).
        contributions: source -> what that object contributes.
        applied: The IncrementalAlterConfigs operations sent.
        drift: Those of ``applied`` that repaired a hand-made change of an owned value.
        foreign: Values set outside the operator that differ from what is wanted
            (left alone, or overridden on a claimed broker).
        errors: Resources whose update failed, with Kafka's error.
        snapshot: The cluster snapshot the contributions were computed on.
        generations: source -> ``metadata.generation`` of the object whose spec was read.
        before: The throttle configs as read before the writes.
        started: When the sync began (the writer's monotonic clock).
    """

    effective: EffectiveThrottles
    contributions: dict[str, Contribution]
    applied: list[ConfigChange] = field(default_factory=list)
    drift: list[ConfigChange] = field(default_factory=list)
    foreign: list[ForeignThrottle] = field(default_factory=list)
    errors: dict[ConfigResource, ApiError] = field(default_factory=dict)
    snapshot: ClusterSnapshot | None = None
    generations: dict[str, int] = field(default_factory=dict)
    before: ThrottleConfigs = field(default_factory=ThrottleConfigs)
    started: float = 0.0

    def changed_for(self, source: str) -> bool:
        """Whether this sync wrote a config ``source`` needs that was not in place before.

        A broker rate it wants that was written, or a topic replica list written while it
        lacked ``source``'s pairs. Brokers apply config changes asynchronously, so such a
        source waits before submitting; changes made for other objects only (e.g. their
        pairs added to a shared topic's list) do not hold it up.
        """
        mine = self.contributions.get(source)
        if mine is None:
            return False
        for change in self.applied:
            name, key = change.resource_name, change.key
            if not wants(mine, change.resource_type, name, key):
                continue
            if change.resource_type is ConfigResourceKind.BROKER:
                return True
            try:
                had = ThrottledReplicas.parse(self.before.topics.get(name, {}).get(key, ""))
            except ThrottleFormatError:
                return True
            needed = mine.topic_replicas[name][key]
            if not had.wildcard and (needed.wildcard or not needed.replicas <= had.replicas):
                return True
        return False


@dataclass(frozen=True)
class _Moving:
    """A PartitionReassignment with accepted work in flight, as one sync listed it."""

    source: str
    obj: Object
    spec: PartitionReassignmentSpec


@dataclass
class _Batch:
    """Sync requests merged into one sync (group commit)."""

    overrides: dict[str, Contribution | None] = field(default_factory=dict)
    done: threading.Event = field(default_factory=threading.Event)
    result: SyncResult | None = None
    error: BaseException | None = None


@dataclass(frozen=True)
class _Accepted:
    """One object's accepted work as last parsed (see :meth:`ThrottleWriter._accepted_spec`)."""

    version: str
    partitions: Any
    throttle: Any
    spec: PartitionReassignmentSpec | None


@dataclass(frozen=True)
class _Computed:
    """One object's contribution and what it was computed from."""

    spec: PartitionReassignmentSpec
    states: tuple[object, ...]
    contribution: Contribution


def partition_states(spec: PartitionReassignmentSpec, view: ClusterView) -> tuple[object, ...]:
    """Return what :func:`reassignment_contribution` reads of ``view`` for ``spec``, per partition.

    ``(replicas, adding)`` of each target partition (``None`` when it is missing): equal
    tuples give equal contributions for one spec.
    """
    found: list[object] = []
    topics = view.topics
    for target in spec.partitions:
        state = topics.get(target.topic, {}).get(target.partition)
        found.append(None if state is None else (state.replicas, state.adding))
    return tuple(found)


class ThrottleWriter:
    """Keeps the cluster's throttle configs equal to the merge of all contributions.

    Args:
        admin: The Admin API client.
        store: The custom resources (to list contributors and record Events).
        ledger_store: Where the ownership ledger is kept (read on the first sync, and
            again whenever the cluster id changes).
        clock: Monotonic seconds, for ``max_age_s``.
        reader: The cluster's shared reads (the steps' own): a sync's snapshot of the
            topics it needs comes from it (a read at most its ``max_age_s`` old, fresh
            after an :meth:`~kpo_operator.cluster_reader.SharedClusterReader.invalidate`);
            ``None``: a fresh read per sync. A TopicReplicaQuota of every topic
            (``topics.all``) makes a sync read every topic fresh either way.
        index: The cluster's PartitionReassignments as last seen, shared with its steps
            (:class:`~kpo_operator.reassignment_index.ReassignmentIndex`: listed at most once per
            its ``max_age_s``, written through by every status the steps write); ``None``:
            a list per sync.

    Errors of :meth:`sync`: ``KafkaAdminError`` from the Admin API and
    ``ObjectStoreError`` from the Kubernetes API propagate (the caller retries).
    """

    def __init__(
        self,
        admin: KafkaAdmin,
        store: ObjectStore,
        ledger_store: ThrottleLedgerStore,
        clock: Callable[[], float] = time.monotonic,
        reader: SharedClusterReader | None = None,
        index: ReassignmentIndex | None = None,
    ) -> None:
        self.admin = admin
        self.store = store
        self.ledger_store = ledger_store
        self.clock = clock
        self._lock = threading.Lock()  # one sync at a time
        self._batch_lock = threading.Lock()  # guards _open and _last
        self._open: _Batch | None = None
        self._ledger: ThrottleLedger | None = None
        self._reported: set[tuple[str, ForeignThrottle]] = set()
        self._last: tuple[float, SyncResult] | None = None
        self.reader = reader
        self.index = index or ReassignmentIndex(store, 0.0)
        self._parsed: dict[str, _Accepted] = {}
        self._computed: dict[str, _Computed] = {}
        self._lists = ReplicaListCache()

    def sync(
        self,
        overrides: Mapping[str, Contribution | None] | None = None,
        max_age_s: float | None = None,
        observed: tuple[str, int] | None = None,
    ) -> SyncResult:
        """Recompute and apply the effective throttles.

        Args:
            overrides: source -> contribution to use instead of the stored object's
                (``None`` drops that source), for an object whose status is about to change.
            max_age_s: Without overrides, reuse a sync younger than this many seconds,
                or the last one while another sync is in progress (never waiting for it:
                a periodic re-check needs only one caller to run it).
            observed: ``(source, generation)`` of the caller's object: a sync is reused
                only if it read that generation of that object's spec (a sync from before
                the object was created or its spec changed is not).

        Syncs asked for while one runs are done together as the next one (group commit:
        their overrides are merged, each caller gets that sync's result), so N objects
        accepted at once cost about two syncs, not N one after another.
        """
        if not overrides and max_age_s is not None:
            with self._batch_lock:
                last = self._last
                busy = self._open is not None or self._lock.locked()
            if last is not None:
                at, result = last
                read = observed is None or result.generations.get(observed[0]) == observed[1]
                if read and (busy or self.clock() - at < max_age_s):
                    return result  # recent, or a newer one is being made by someone else
        with self._batch_lock:
            batch = self._open
            leader = batch is None
            if batch is None:
                batch = self._open = _Batch()
            batch.overrides.update(overrides or {})
        if not leader:
            batch.done.wait()
            if batch.error is not None:
                raise batch.error
            assert batch.result is not None
            return batch.result
        try:
            with self._lock:
                with self._batch_lock:
                    self._open = None  # later callers start the next batch
                started = self.clock()
                result = self._sync(dict(batch.overrides))
                result.started = started
                with self._batch_lock:
                    self._last = (self.clock(), result)
            batch.result = result
            return result
        except BaseException as exc:
            batch.error = exc
            raise
        finally:
            batch.done.set()

    def contributes(self, source: str) -> bool | None:
        """Whether ``source``'s contribution to the last sync set any config.

        ``None`` before the first sync, and when the last one failed to write a resource.

        A source that sets nothing and set nothing in the last sync (a move without a
        throttle) changes nothing the writer decides, whether it is added or dropped: its
        object need not wait for a sync of its own, which waits for the one in progress
        and reads the configs of every broker and throttled topic back.
        """
        with self._batch_lock:
            last = self._last
        if last is None or last[1].errors:
            return None  # a write failed: what is in place is not known
        found = last[1].contributions.get(source)
        return found is not None and sets_anything(found)

    def confirmed(self, source: str, contribution: Contribution, since: float) -> bool:
        """Whether the last sync, begun at or after ``since``, found ``contribution`` in place.

        That sync merged ``contribution`` as ``source``'s (read from its status, or
        asked for), wrote nothing it needed (:meth:`SyncResult.changed_for`) and failed on
        none of its resources: the configs ``source`` needs were read back in place after
        ``since``. A step about to submit that has seen its own throttles written at
        ``since`` (a poll interval ago) can take that instead of a sync of its own, which
        at scale waits for the sync in progress and then makes one more.
        """
        with self._batch_lock:
            last = self._last
        if last is None:
            return False
        result = last[1]
        if result.started < since or result.contributions.get(source) != contribution:
            return False
        for resource in result.errors:
            if wants_any(contribution, resource.kind, resource.name):
                return False
        return not result.changed_for(source)

    def _listed(self) -> tuple[list[tuple[str, Object, TopicReplicaQuotaSpec]], list[_Moving]]:
        """Return the contributors: quotas (parsed specs), reassignments (accepted specs).

        The quotas are listed (few and small); the reassignments come from the index.
        """
        quotas: list[tuple[str, Object, TopicReplicaQuotaSpec]] = []
        for obj in self.store.list(TOPIC_REPLICA_QUOTA):
            if obj.get("metadata", {}).get("deletionTimestamp"):
                continue
            source = source_of(TOPIC_REPLICA_QUOTA, obj)
            try:
                quotas.append((source, obj, TopicReplicaQuotaSpec.from_object(obj)))
            except SpecError as exc:
                logger.warning("%s contributes nothing: %s", source, exc)
        listed = self.index.objects()
        present = {source_of(PARTITION_REASSIGNMENT, o) for o in listed}
        self._parsed = {k: v for k, v in self._parsed.items() if k in present}
        self._computed = {k: v for k, v in self._computed.items() if k in present}
        moving: list[_Moving] = []
        for obj in listed:
            if (obj.get("status") or {}).get("phase") not in THROTTLING_PHASES:
                continue
            source = source_of(PARTITION_REASSIGNMENT, obj)
            spec = self._accepted_spec(source, obj)
            if spec is not None:
                moving.append(_Moving(source, obj, spec))
        return quotas, moving

    def _contributors(
        self,
        quotas: list[tuple[str, Object, TopicReplicaQuotaSpec]],
        moving: list[_Moving],
        snapshot: ClusterSnapshot,
    ) -> tuple[dict[str, Contribution], dict[str, Object]]:
        contributions: dict[str, Contribution] = {}
        objects: dict[str, Object] = {}
        for source, obj, quota in quotas:
            try:
                contributions[source] = quota_contribution(source, quota, snapshot.view)
            except ThrottleFormatError as exc:
                logger.warning("%s contributes nothing: %s", source, exc)
                continue
            objects[source] = obj
        for found in moving:
            contributions[found.source] = self._contribution(found.source, found.spec, snapshot)
            objects[found.source] = found.obj
        return contributions, objects

    def _contribution(
        self, source: str, spec: PartitionReassignmentSpec, snapshot: ClusterSnapshot
    ) -> Contribution:
        """:func:`reassignment_contribution`, computed again only when its inputs changed.

        Its inputs are ``spec`` (the same object while the accepted work is unchanged,
        :meth:`_accepted_spec`) and the replicas and adding replicas of its partitions
        (:func:`partition_states`): looking those up costs a fraction of computing.
        Only the thread holding the sync lock calls it.
        """
        states = partition_states(spec, snapshot.view)
        cached = self._computed.get(source)
        if cached is not None and cached.spec is spec and cached.states == states:
            return cached.contribution
        contribution = reassignment_contribution(source, spec, snapshot.view)
        self._computed[source] = _Computed(spec, states, contribution)
        return contribution

    def _accepted_spec(self, source: str, obj: Object) -> PartitionReassignmentSpec | None:
        """:func:`accepted_spec` of ``obj``, parsed again only when its accepted work changed.

        A sync goes through every moving object; parsing each one's accepted entries (up to 2,000)
        at every sync was most of a sync's CPU. Every step writes its object's status
        (totals), so the ``resourceVersion`` changes at every step: when it differs, the
        entries and ``status.throttle`` are compared with those last parsed (a comparison
        of plain lists and dicts costs a small part of parsing them). Only the thread
        holding the sync lock calls it.
        """
        version = str(obj.get("metadata", {}).get("resourceVersion") or "")
        status = obj.get("status") or {}
        cached = self._parsed.get(source)
        if cached is not None and version and cached.version == version:
            return cached.spec
        partitions, throttle = status.get("partitions"), status.get("throttle")
        if cached is not None and cached.partitions == partitions and cached.throttle == throttle:
            spec = cached.spec
        else:
            spec = accepted_spec(status)
        self._parsed[source] = _Accepted(version, partitions, throttle, spec)
        return spec

    def _snapshot(
        self,
        quotas: list[tuple[str, Object, TopicReplicaQuotaSpec]],
        moving: list[_Moving],
        overrides: Mapping[str, Contribution | None],
        owned: Collection[str],
    ) -> tuple[ClusterSnapshot, frozenset[str] | None]:
        """Read the topics the sync needs (``None``: every topic); return them with the snapshot.

        Those are the topics of the accepted work, of the quotas and overrides, and
        ``owned`` (the ledger's): a topic none of them names gets nothing written.
        """
        if any(q.topics.names is None for _, _, q in quotas):
            return read_cluster(self.admin), None
        topics: set[str] = set(owned)
        for _, _, quota in quotas:
            topics.update(quota.topics.names or ())
        for found in moving:
            topics.update(t.topic for t in found.spec.partitions)
        for contribution in overrides.values():
            if contribution is not None:
                topics.update(contribution.topic_replicas)
        if self.reader is not None:
            return self.reader.read(topics), frozenset(topics)
        return read_cluster(self.admin, topics), frozenset(topics)

    def _ledger_of(self, cluster_id: str | None) -> ThrottleLedger:
        """Return the ledger of ``cluster_id``: cached, else loaded (another cluster: empty)."""
        if self._ledger is not None and self._ledger.cluster_id == cluster_id:
            return self._ledger
        try:
            saved = self.ledger_store.load()
        except LedgerFormatError as exc:
            # Starting empty makes what was owned foreign: it is left alone, never deleted.
            logger.error("throttle ledger unreadable, starting empty: %s", exc)
            saved = None
        if saved is None or saved.cluster_id != cluster_id:
            if saved is not None:
                logger.warning(
                    "throttle ledger is of cluster %s, not %s: starting empty",
                    saved.cluster_id,
                    cluster_id,
                )
            saved = ThrottleLedger(cluster_id)
        self._ledger = saved
        return saved

    def _save(self, ledger: ThrottleLedger, old: ThrottleLedger) -> None:
        if ledger != old:
            self.ledger_store.save(ledger)
        self._ledger = ledger

    def _sync(self, overrides: dict[str, Contribution | None]) -> SyncResult:
        quotas, moving = self._listed()
        known = set(self._ledger.topics) if self._ledger is not None else set()
        snapshot, asked = self._snapshot(quotas, moving, overrides, known)
        ledger = self._ledger_of(snapshot.cluster_id)
        if asked is not None and not set(ledger.topics) <= asked:
            # First sync, or another cluster: the ledger's topics are read too.
            snapshot, asked = self._snapshot(quotas, moving, overrides, ledger.topics)
        contributions, objects = self._contributors(quotas, moving, snapshot)
        for source, contribution in overrides.items():
            if contribution is None:
                contributions.pop(source, None)
            else:
                contributions[source] = contribution
        effective = merge(contributions[s] for s in sorted(contributions))
        brokers = sorted(snapshot.view.live_brokers)
        topics = sorted(snapshot.view.topics)
        described = self.admin.describe_configs(brokers, topics, keys=BROKER_KEYS + TOPIC_KEYS)
        current = ThrottleConfigs()
        for resource, values in described.items():
            if resource.kind is ConfigResourceKind.BROKER:
                current.brokers[int(resource.name)] = dict(values)
            else:
                current.topics[resource.name] = dict(values)
        live = set(brokers)
        wanted = EffectiveThrottles(
            {b: r for b, r in effective.brokers.items() if b in live},
            {t: r for t, r in effective.topics.items() if t in snapshot.view.topics},
            effective.conflicts,
            {(b, k) for b, k in effective.claims if b in live},
        )
        self._lists.keep(current.topics)
        decided = plan(wanted, current, ledger, self._lists)
        result = SyncResult(
            effective,
            contributions,
            snapshot=snapshot,
            before=current,
            foreign=decided.foreign,
            generations={
                source: int(obj["metadata"].get("generation") or 1)
                for source, obj in objects.items()
                if source not in overrides
            },
        )
        settled = decided.ledger
        if decided.changes:
            self._save(decided.write_ahead, ledger)
            grouped: dict[ConfigResource, dict[str, str | None]] = {}
            for change in decided.changes:
                resource = ConfigResource(change.resource_type, change.resource_name)
                value = change.value if change.op is OpType.SET else None
                grouped.setdefault(resource, {})[change.key] = value
            answers = self.admin.incremental_alter_configs(grouped)
            result.errors = {r: e for r, e in answers.items() if e is not None}
            failed = set(result.errors)
            result.applied = [
                c
                for c in decided.changes
                if ConfigResource(c.resource_type, c.resource_name) not in failed
            ]
            for change in result.applied:
                logger.info(
                    "throttle %s %s %s=%s",
                    change.resource_type,
                    change.resource_name,
                    change.key,
                    change.value if change.op is OpType.SET else "<deleted>",
                )
            settled = decided.settled({(r.kind, r.name) for r in failed})
            result.drift = [c for c in decided.drift if c in result.applied]
        self._save(settled, self._ledger or ledger)
        self._report_drift(result.drift, contributions, objects)
        self._report_foreign(result.foreign, contributions, objects)
        return result

    def _report_drift(
        self,
        drift: list[ConfigChange],
        contributions: Mapping[str, Contribution],
        objects: Mapping[str, Object],
    ) -> None:
        for source, obj in objects.items():
            contribution = contributions.get(source)
            if contribution is None:
                continue
            mine = [
                c for c in drift if wants(contribution, c.resource_type, c.resource_name, c.key)
            ]
            if mine:
                fixed = ", ".join(f"{c.resource_type} {c.resource_name} {c.key}" for c in mine[:10])
                self.store.event(
                    obj,
                    WARNING,
                    "ThrottleDriftRepaired",
                    f"throttle configs changed outside the operator were put back: {fixed}",
                )

    def _report_foreign(
        self,
        foreign: list[ForeignThrottle],
        contributions: Mapping[str, Contribution],
        objects: Mapping[str, Object],
    ) -> None:
        """Record a Warning Event ``ForeignThrottle`` per new finding on each object it concerns."""
        seen: set[tuple[str, ForeignThrottle]] = set()
        for source, obj in objects.items():
            contribution = contributions.get(source)
            if contribution is None:
                continue
            for found in foreign:
                if not wants(contribution, found.resource_type, found.resource_name, found.key):
                    continue
                seen.add((source, found))
                if (source, found) not in self._reported:
                    self.store.event(obj, WARNING, "ForeignThrottle", found.message)
        self._reported = seen


def sets_anything(contribution: Contribution) -> bool:
    """Whether ``contribution`` sets any throttle config at all."""
    return any(contribution.broker_rates.values()) or any(contribution.topic_replicas.values())


def wants_any(contribution: Contribution, kind: ConfigResourceKind, name: str) -> bool:
    """Whether ``contribution`` sets any throttle key on the broker or topic ``kind``/``name``."""
    if kind is ConfigResourceKind.BROKER:
        return bool(contribution.broker_rates.get(int(name)))
    return bool(contribution.topic_replicas.get(name))


def wants(contribution: Contribution, kind: ConfigResourceKind, name: str, key: str) -> bool:
    """Whether ``contribution`` sets ``key`` on the broker or topic ``kind``/``name``."""
    if kind is ConfigResourceKind.BROKER:
        return key in BROKER_KEYS and key in contribution.broker_rates.get(int(name), {})
    return key in TOPIC_KEYS and key in contribution.topic_replicas.get(name, {})
