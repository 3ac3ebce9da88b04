"""Reconcile one PartitionReassignment: validate, throttle, submit, track, finish, cancel.

Each call of :meth:`ReassignmentReconciler.reconcile` reads the object fresh and
the cluster (Metadata, ListPartitionReassignments, DescribeLogDirs), takes one
step and writes the status if it changed. The step depends on the phase:

- **new / Pending / Suspended, or a new generation**: validate as
  ReassignPartitionsCommand does (:mod:`kpo_operator.validation`). Invalid:
  ``Failed`` with every bad entry and nothing changed in Kafka. ``suspend``:
  ``Suspended`` with the plan (bytes to move, predicted duration). Otherwise the
  accepted targets are written to status *first* (state Pending), the throttles
  applied through the single :class:`~kpo_operator.throttle_writer.ThrottleWriter`,
  and the partitions not already in flight with that target are submitted with
  AlterPartitionReassignments (KIP-455), so a restarted operator never resubmits.
  Throttled, they are submitted at a later step, once a throttle sync begun after the
  write found the throttles in place (one sync before each poll of the objects confirms
  all those waiting, :meth:`ReassignmentReconciler.confirm_throttles`). The submissions
  of steps running at once go out in one request
  (:class:`~kpo_operator.reassignment_batch.SubmissionBatcher`). A move without a
  throttle, which neither sets nor set any throttle config, waits for no throttle sync.
  With ``concurrentPartitionMovementsPerBroker`` or ``concurrentLeaderMovements``, only
  those the limits admit are submitted, in the spec's order; the others stay Pending
  and are submitted by later steps as movements finish (:mod:`kpo_operator.move_limits`).
- **Moving**: measure each partition (adding/removing replicas, ISR, leader,
  bytes of the adding replicas vs the leader's) and the rate/ETA; when every
  partition is done, remove this object's throttles, run the preferred-leader
  election if asked and set ``Completed``. A partition that leaves flight
  without reaching its target (cancelled by someone else) is ``Failed``. Totals,
  rate and ETA are written at every step; ``status.partitions`` when an entry
  changed other than in its byte counters, else every ``partition_status_interval_s``
  (:func:`~kpo_operator.reassignment_status.partitions_due`).
- **Edits while Moving** are applied as an incremental reassignment: a changed
  target is resubmitted (Kafka keeps the original replicas, KIP-455), a removed
  partition is cancelled, a new one submitted, a throttle change re-applied. An
  invalid edit is not applied (the accepted targets keep moving; a Warning Event
  and ``status.message`` say why); if it is still invalid when they finish, the
  object ends ``Failed``. ``suspend`` cannot pause a submitted reassignment
  (Kafka has no pause): use ``cancel``.
- **cancel: true or deletion**: cancel the in-flight partitions this object
  submitted (revert to OAR), wait until none is in flight (``Cancelling``), remove
  its throttles, then ``Cancelled`` (and the finalizer lets the object go).

``Completed`` and ``Cancelled`` are final; ``Failed`` is final until the spec changes.

Structure, after Kafka's ``KafkaController.onPartitionReassignment``: a step first builds
one :class:`StepContext` (the object, its parsed spec, its accepted partitions, the
cluster snapshot, the time), then runs named steps, each a method of one job:
:meth:`~ReassignmentReconciler._accept` (validate, then ``_suspend`` or
``_record_accepted`` (write-ahead) and ``_apply_throttles``), :meth:`~ReassignmentReconciler._track`
(``_measure``, ``_submit``, log-dir moves, ``_report_progress`` or ``_finish``) and
:meth:`~ReassignmentReconciler._cancel` (``_revert``, order restore, throttle removal).
The status is typed (:class:`~kpo_operator.status_models.ReassignmentStatus`); every
write goes through :func:`~kpo_operator.reassignment_status.updated_status`, which checks
the phase transition against :data:`~kpo_kafka.states.PHASE_VALID_PREVIOUS` and raises
:class:`~kpo_kafka.states.IllegalPhaseTransitionError` on one it does not list. What the
reconciler remembers of an object between steps is one :class:`ObjectMemory`, dropped
with :meth:`~ReassignmentReconciler.forget`. The pure parts are in
:mod:`kpo_operator.reassignment_status` (status updates), :mod:`kpo_operator.progress`
(the partition entries) and :mod:`kpo_operator.reassignment_actions` (single Admin API
actions, cancellation maths).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import nullcontext
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from kpo_kafka.admin import KafkaAdmin
from kpo_kafka.admin_types import KafkaAdminError, KafkaAuthorizationError
from kpo_kafka.copy_time import format_duration, throttled_duration
from kpo_kafka.specs import PartitionReassignmentSpec, PartitionTarget, SpecError
from kpo_kafka.states import (
    ACTIVE_STATES,
    FINAL_PHASES,
    THROTTLING_PHASES,
    ConditionType,
    MoveState,
    Phase,
)
from kpo_kafka.topic_partition import TopicPartition
from kpo_operator.cluster import ClusterSnapshot, with_owners
from kpo_operator.cluster_reader import SharedClusterReader
from kpo_operator.conditions import Condition, stamp_conditions
from kpo_operator.cordon_writer import CordonWriter, cordon_report
from kpo_operator.cordons import drained_by
from kpo_operator.move_limits import (
    Admission,
    Candidate,
    MoveLimits,
    Movement,
    admit,
    mark_waiting,
)
from kpo_operator.progress import (
    PartitionProgress,
    PartitionStatus,
    RateEstimator,
    eta,
    format_time,
    measure_partition,
    parse_time,
    partition_progress,
    totals,
)
from kpo_operator.quota_window import WINDOW_NUM, WINDOW_SIZE, QuotaWindow, throttled_finish
from kpo_operator.reassignment_actions import (
    cancelled_entries,
    current_target,
    dirs_reached,
    elect_preferred,
    move_log_dirs,
    needs_submission,
    oar,
    order_restores,
)
from kpo_operator.reassignment_batch import SubmissionBatcher
from kpo_operator.reassignment_index import ReassignmentIndex
from kpo_operator.reassignment_status import (
    StatusUpdate,
    parse_partitions,
    partitions_due,
    removed_keys,
    spec_of_accepted,
    status_changed,
    status_patch,
    updated_status,
)
from kpo_operator.refusals import (
    missing_cluster_operations,
    reason_of,
    reassignment_needs,
    record_refusal,
)
from kpo_operator.resources import PARTITION_REASSIGNMENT
from kpo_operator.status_models import CordonStatus, ReassignmentStatus
from kpo_operator.store import NORMAL, WARNING, Object, ObjectStore, object_key
from kpo_operator.throttle_writer import (
    SyncResult,
    ThrottleWriter,
    sets_anything,
    source_of,
    wants,
)
from kpo_operator.throttles import Contribution, reassignment_contribution
from kpo_operator.validation import failure_reason, validate_reassignment

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class StepContext:
    """Everything one reconcile step of one object decides on, read once at its start.

    Attributes:
        obj: The object as read from the API server.
        status: Its status as last written: the steps' writes update it in place.
        generation: ``metadata.generation`` (the spec version this step works on).
        phase: ``status.phase`` at the start of the step (``None`` for a new object).
        now: Wall-clock time of the step (status timestamps, ETA).
        deleting: The object is being deleted (finalizer) or ``deletionTimestamp`` is set.
        spec: The parsed spec; ``None`` when it is invalid while work is in flight.
        accepted: The accepted partitions in ``status.partitions`` (the operator's memory).
        snapshot: The cluster: the object's topics, in-flight reassignments with their
            owners (:func:`~kpo_operator.cluster.with_owners`), replica sizes, log dirs.
    """

    obj: Object
    status: ReassignmentStatus
    generation: int
    phase: Phase | None
    now: datetime
    deleting: bool
    spec: PartitionReassignmentSpec | None
    accepted: dict[TopicPartition, PartitionStatus]
    snapshot: ClusterSnapshot

    @property
    def key(self) -> str:
        """``namespace/name`` of the object (owner of its in-flight partitions)."""
        return object_key(self.obj)

    @property
    def source(self) -> str:
        """The object's name as a throttle contribution (:func:`source_of`)."""
        return source_of(PARTITION_REASSIGNMENT, self.obj)

    def measure(self, target: PartitionTarget, original: tuple[int, ...]) -> PartitionProgress:
        """Measure ``target``'s partition in the snapshot (OAR ``original``)."""
        return partition_progress(target, original, self.snapshot.view, self.snapshot.sizes)


@dataclass(frozen=True)
class _Tracked:
    """The accepted partitions as measured by :meth:`ReassignmentReconciler._measure`.

    Attributes:
        parts: Each partition's measured progress (what the totals and ETA sum).
        entries: The new ``status.partitions`` entries.
        unsubmitted: Pending partitions not in flight towards their target -> RAR.
    """

    parts: list[PartitionProgress]
    entries: list[PartitionStatus]
    unsubmitted: dict[TopicPartition, list[int]]


@dataclass(frozen=True)
class _Parsed:
    """An object's ``status.partitions`` as last parsed or written (kept per object).

    Attributes:
        raw: The list as found in (or written to) the status.
        entries: :func:`accepted_partitions` of it (shared: copy before changing).
        active: The partitions in an active state (Pending, Moving).
        topics: Their topics, every entry's.
    """

    raw: list[Any]
    entries: dict[TopicPartition, PartitionStatus]
    active: frozenset[TopicPartition]
    topics: frozenset[str]

    @classmethod
    def of(cls, raw: list[Any], entries: dict[TopicPartition, PartitionStatus]) -> _Parsed:
        """Keep ``raw`` with its parsed ``entries``."""
        active = frozenset(tp for tp, a in entries.items() if a.state in ACTIVE_STATES)
        return cls(raw, entries, active, frozenset(tp[0] for tp in entries))


@dataclass
class ObjectMemory:
    """What the reconciler remembers about one object between its steps.

    Everything here is a cache or a measurement over time, none of it needed for
    correctness after a restart: the object's status is the operator's memory
    (:mod:`kpo_operator.reassignment_status`). Dropped with
    :meth:`ReassignmentReconciler.forget` when the object ends or goes.

    Attributes:
        spec: ``(metadata.generation, parsed spec)`` of the last spec parsed.
        accepted: Its ``status.partitions`` as last parsed or written.
        rate: The replication-rate estimator of its move (``None`` until it moves,
            and again once it completed).
        throttled_at: When a step last synced its throttles (clock seconds), until a
            submission confirms them; ``None``: not synced since.
        cordon_synced_at: When its cordons were last synced (clock seconds); ``None``:
            never, or released.
    """

    spec: tuple[int, PartitionReassignmentSpec] | None = None
    accepted: _Parsed | None = None
    rate: RateEstimator | None = None
    throttled_at: float | None = None
    cordon_synced_at: float | None = None


class ReassignmentReconciler:
    """Drives PartitionReassignment objects; safe to call again at any time (idempotent).

    Objects are independent: the reconciler may run for different objects in different
    threads at once (its Admin API client and store must allow that); one object's
    steps must not overlap (the caller serialises them, see
    :class:`~kpo_operator.runtime.OperatorRuntime`).

    Args:
        admin: The Admin API client of the managed cluster.
        store: The Kubernetes API.
        writer: The single throttle writer.
        rate_window_s: Window of the replication-rate estimate, seconds.
        throttle_resync_s: How often a Moving object re-checks its throttles, seconds.
        partition_status_interval_s: How often a Moving object's ``status.partitions``
            is written when only byte counters changed, seconds (0: every step; see
            :func:`~kpo_operator.reassignment_status.partitions_due`).
        clock: Monotonic seconds (rate estimates).
        now: Wall-clock time (status timestamps).
        cordons: The single writer of ``cordoned.log.dirs`` (KIP-1066): brokers a move
            drains are cordoned while it moves; ``None``: never cordon.
        reader: Where step snapshots come from (default: a read per step); a
            :class:`~kpo_operator.cluster_reader.SharedClusterReader` shared by the
            cluster's objects batches them.
        owners: The cluster's PartitionReassignments as last seen, shared with the
            throttle writer: who owns which in-flight partition; every status written
            and every object read by a step goes into it (default: a list per step).

    Errors: ``KafkaAdminError`` and ``ObjectStoreError`` propagate; the caller retries.
    :class:`~kpo_kafka.states.IllegalPhaseTransitionError` propagates too: a step that
    would write a phase the transition table does not allow writes nothing.
    """

    def __init__(
        self,
        admin: KafkaAdmin,
        store: ObjectStore,
        writer: ThrottleWriter,
        rate_window_s: float = 30.0,
        throttle_resync_s: float = 30.0,
        partition_status_interval_s: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        cordons: CordonWriter | None = None,
        reader: SharedClusterReader | None = None,
        owners: ReassignmentIndex | None = None,
    ) -> None:
        self.admin = admin
        self.cordons = cordons
        self.store = store
        self.writer = writer
        self.reader = reader or SharedClusterReader(admin, 0.0)
        # Concurrent steps' submissions go out together (one request per batch).
        self.submissions = SubmissionBatcher(
            lambda targets: self.admin.alter_partition_reassignments(targets),
            lambda: self.reader.invalidate(),
        )
        self.owners = owners or ReassignmentIndex(store, 0.0)
        self.rate_window_s = rate_window_s
        self.throttle_resync_s = throttle_resync_s
        self.partition_status_interval_s = partition_status_interval_s
        self._quota_window: tuple[float, QuotaWindow] | None = None  # (read at, window)
        self.clock = clock
        self.now = now
        self._memory: dict[str, ObjectMemory] = {}  # object uid -> what is remembered of it
        # Held from reading the in-flight movements to submitting by the steps of objects
        # with a per-broker limit, so that two of them never admit against the same count.
        self._admitting = threading.Lock()

    # -- entry points -------------------------------------------------------------------

    def reconcile(self, namespace: str, name: str, known: Object | None = None) -> str | None:
        """Take one step for the object; return its phase afterwards (``None``: gone).

        ``known`` is the object as the caller holds it (kopf's body, a plain copy); the
        store returns it instead of reading when it is the latest version it has seen
        (:meth:`~kpo_operator.store.ObjectStore.get`).
        """
        read_at = self.owners.clock()
        obj = self.store.get(PARTITION_REASSIGNMENT, namespace, name, known)
        if obj is None:
            return None
        try:
            return self._step(obj, read_at=read_at)
        except KafkaAdminError as exc:
            self._refused(obj, exc)
            raise

    def finalize(self, namespace: str, name: str) -> bool:
        """Cancel what is in flight and drop the throttles of a deleted object.

        Returns:
            ``True`` once nothing of this object is in flight and its throttles are
            gone (the finalizer may be removed); ``False`` to be called again later.
        """
        read_at = self.owners.clock()
        obj = self.store.get(PARTITION_REASSIGNMENT, namespace, name)
        if obj is None:
            return True
        try:
            phase = self._step(obj, deleting=True, read_at=read_at)
        except KafkaAdminError as exc:
            self._refused(obj, exc)
            raise
        if phase in THROTTLING_PHASES:
            return False
        if self.writer.sync({source_of(PARTITION_REASSIGNMENT, obj): None}).errors:
            return False
        self.forget(_object_uid(obj))
        self.owners.forget(object_key(obj))
        return True

    def confirm_throttles(self) -> bool:
        """Sync the throttles once if an accepted object waits to submit; return whether.

        An object whose throttles its acceptance wrote submits at a later step, once a
        sync begun after that write found them in place (:meth:`_submit`). Called before
        a poll of every object (:class:`~kpo_operator.reassignment_tracker.ReassignmentTracker`),
        this one sync confirms all the objects accepted since the last one: their steps
        submit without a sync each.

        Raises:
            KafkaAdminError: The sync failed (each step then syncs for itself).
            ObjectStoreError: Listing the TopicReplicaQuotas failed.
        """
        if all(m.throttled_at is None for m in list(self._memory.values())):
            return False
        self.writer.sync()
        return True

    def forget(self, uid: str) -> None:
        """Drop the :class:`ObjectMemory` of the object whose ``metadata.uid`` is ``uid``."""
        self._memory.pop(uid, None)

    def _memory_of(self, obj: Object) -> ObjectMemory:
        """Return what is remembered of ``obj`` (a new, empty record the first time)."""
        return self._memory.setdefault(_object_uid(obj), ObjectMemory())

    # -- the step -------------------------------------------------------------------------

    def _step(self, obj: Object, deleting: bool = False, read_at: float | None = None) -> str:
        """One step, as Kafka's ``KafkaController.onPartitionReassignment`` sequences one.

        validate -> plan (suspend) -> record the accepted targets (write-ahead) ->
        apply throttles -> submit (AlterPartitionReassignments) -> track progress ->
        move log dirs -> finish (remove throttles, preferred election); or cancel.
        ``read_at``: when the read of ``obj`` began (the index's clock; ``None``: now).
        """
        status = ReassignmentStatus.from_status(obj.get("status"))
        phase = status.phase
        generation = int(obj["metadata"].get("generation") or 1)
        now = self.now()
        if phase in FINAL_PHASES:
            self.forget(_object_uid(obj))
            return phase
        if phase == Phase.FAILED and status.observed_generation == generation:
            return phase
        try:
            spec: PartitionReassignmentSpec | None = self._spec_of(obj, generation)
        except SpecError as exc:
            if phase not in THROTTLING_PHASES:
                update = _invalid(generation, exc.errors, "InvalidSpec")
                self._write(obj, status, update, "InvalidSpec", now)
                return Phase.FAILED
            spec = None  # keep tracking what was accepted; cancel on delete
        ctx = self._context(obj, status, generation, now, spec, deleting, read_at)
        if ctx.deleting or (spec is not None and spec.cancel):
            return self._cancel(ctx)
        edited = phase not in THROTTLING_PHASES or status.observed_generation != generation
        if spec is None or not edited:
            return self._track(ctx)
        return self._accept(ctx, spec)

    def _spec_of(self, obj: Object, generation: int) -> PartitionReassignmentSpec:
        """Parse ``obj``'s spec, or return it as parsed for the same uid and generation.

        The API server raises ``metadata.generation`` on every spec change, so a spec of
        up to 2,000 entries is validated once per generation, not at every poll.

        Raises:
            SpecError: The spec is invalid (not cached: parsed again next time).
        """
        memory = self._memory_of(obj)
        if memory.spec is not None and memory.spec[0] == generation:
            return memory.spec[1]
        spec = PartitionReassignmentSpec.from_object(obj)
        memory.spec = (generation, spec)
        return spec

    def _context(
        self,
        obj: Object,
        status: ReassignmentStatus,
        generation: int,
        now: datetime,
        spec: PartitionReassignmentSpec | None,
        deleting: bool,
        read_at: float | None = None,
    ) -> StepContext:
        """Read the cluster for ``obj`` and build its step context.

        The snapshot covers the accepted and the wanted topics, with replica sizes
        (DescribeLogDirs) and the log dirs of brokers named in ``logDirs``; in-flight
        partitions are attributed to the object that accepted them.
        """
        parsed = self._parsed(obj, status)
        accepted = dict(parsed.entries)
        wanted = spec.partitions if spec else []
        topics = parsed.topics | {t.topic for t in wanted}
        dirs = {b for t in wanted if t.log_dirs for b in t.replicas}
        snapshot = self.reader.read(sorted(topics), replica_sizes=True, log_dirs_of=dirs)
        key = object_key(obj)
        held = parsed.active if status.phase in THROTTLING_PHASES else frozenset()
        self.owners.seen(obj, held, read_at)  # held: active_partitions(status), not parsed again
        owners = self.owners.owners_of(snapshot.view.reassigning, exclude=key)
        owners.update(dict.fromkeys(parsed.active, key))
        with_owners(snapshot.view, owners)
        return StepContext(
            obj=obj,
            status=status,
            generation=generation,
            phase=status.phase,
            now=now,
            deleting=deleting or bool(obj["metadata"].get("deletionTimestamp")),
            spec=spec,
            accepted=accepted,
            snapshot=snapshot,
        )

    def _parsed(self, obj: Object, status: ReassignmentStatus) -> _Parsed:
        """Return ``status.partitions`` parsed, parsed again only when it changed.

        ``status.partitions`` changes only when this operator writes it, and then the
        entries it wrote are kept parsed (:meth:`_write`): comparing the list with the
        one parsed last costs a tenth of parsing up to 2,000 entries again.
        """
        memory = self._memory_of(obj)
        raw = status.partitions or []
        cached = memory.accepted
        if cached is None or cached.raw != raw:
            cached = _Parsed.of(raw, parse_partitions(raw))
            memory.accepted = cached
        return cached

    # -- accepting a (new) spec -------------------------------------------------------------

    def _accept(self, ctx: StepContext, spec: PartitionReassignmentSpec) -> str:
        """Validate a new spec or generation, then plan it or start it."""
        issues = validate_reassignment(spec, ctx.snapshot.view, ctx.key)
        if issues and ctx.phase not in THROTTLING_PHASES:
            problems = [str(i) for i in issues]
            reason = failure_reason(issues)
            update = _invalid(ctx.generation, problems, reason)
            self._record(ctx, update, reason)
            return Phase.FAILED
        if issues:
            return self._track(ctx, rejected=self._reject_edit(ctx, [str(i) for i in issues]))
        if ctx.phase not in THROTTLING_PHASES and spec.suspend:
            return self._suspend(ctx, spec)
        authorized = ctx.snapshot.authorized_operations
        if missing := missing_cluster_operations(authorized, reassignment_needs(spec)):
            granted = ", ".join(sorted(authorized or ())) or "none"
            raise KafkaAuthorizationError(
                "; ".join(missing) + f" (operations granted on the Cluster: {granted})",
                api="AlterPartitionReassignments",
            )
        self._record_drained(ctx, spec)
        pending = self._record_accepted(ctx, spec)
        ctx = replace(ctx, accepted=dict(self._parsed(ctx.obj, ctx.status).entries))
        self._sync_cordons(ctx)
        throttles = self._apply_throttles(ctx)
        memory = self._memory_of(ctx.obj)
        if throttles is None:  # nothing to throttle, nothing was: submitted at once
            memory.throttled_at = None
            return self._track(ctx)
        if throttles.changed_for(ctx.source) and pending:
            # Submitted on the next step, once brokers have the throttles; any sync begun
            # after this one that finds them in place confirms them (:meth:`_submit`).
            memory.throttled_at = self.clock()
            return Phase.MOVING
        memory.throttled_at = throttles.started
        return self._track(ctx)

    def _reject_edit(self, ctx: StepContext, problems: list[str]) -> str:
        """Keep the accepted work moving, say why the edit is not applied; return why."""
        text = "edit not applied: " + "; ".join(problems)
        if ctx.status.message != text:
            self.store.event(ctx.obj, WARNING, "EditRejected", text)
        ctx.status.message = text
        return text

    def _suspend(self, ctx: StepContext, spec: PartitionReassignmentSpec) -> str:
        """Plan only: bytes to move and the predicted duration at the throttle."""
        parts = [ctx.measure(t, oar(t, ctx.snapshot)) for t in spec.partitions]
        rate = spec.throttle.replication_rate if spec.throttle else None
        duration = throttled_duration(parts, rate)
        summary = totals(parts)
        message = (
            f"suspended: {summary.partitions} partitions, {summary.bytes_total} bytes to move"
            + (f", about {format_duration(duration)} at {rate} bytes/s" if duration else "")
            + "; set spec.suspend to false to start"
        )
        update = StatusUpdate(
            Phase.SUSPENDED,
            message,
            ctx.generation,
            partitions=[PartitionStatus.from_progress(p, MoveState.PENDING) for p in parts],
            totals=summary,
            predicted_duration=format_duration(duration) if duration else None,
        )
        self._record(ctx, update, Phase.SUSPENDED)
        return Phase.SUSPENDED

    def _record_accepted(self, ctx: StepContext, spec: PartitionReassignmentSpec) -> bool:
        """Write the accepted targets ahead of any change in Kafka (write-ahead).

        Partitions not already in flight towards their target are Pending; partitions
        dropped from the spec while in flight get their OAR as new target (KIP-455: no
        data moves, the adding replicas go). Returns whether any partition is Pending.
        """
        view = ctx.snapshot.view
        wanted = {t.key: t for t in spec.partitions}
        for tp, dropped in ctx.accepted.items():
            if tp not in wanted and dropped.state in ACTIVE_STATES and tp in view.reassigning:
                wanted[tp] = PartitionTarget(
                    topic=tp[0], partition=tp[1], replicas=list(dropped.original_replicas)
                )
        entries: list[PartitionStatus] = []
        for tp, target in wanted.items():
            prior = ctx.accepted.get(tp)
            original = prior.original_replicas if prior else oar(target, ctx.snapshot)
            pending = needs_submission(ctx.snapshot, tp, tuple(target.replicas))
            state = MoveState.PENDING if pending else MoveState.MOVING
            progress = ctx.measure(target, original)
            entries.append(PartitionStatus.from_progress(progress, state, log_dirs=target.log_dirs))
        ahead = StatusUpdate(
            Phase.MOVING,
            f"accepted generation {ctx.generation}",
            ctx.generation,
            partitions=entries,
            start_time=ctx.status.start_time or format_time(ctx.now),
            throttle=_throttle_status(spec) or {},
        )
        self._record(ctx, ahead, "Accepted")
        return any(e.state == MoveState.PENDING for e in entries)

    def _apply_throttles(self, ctx: StepContext) -> SyncResult | None:
        """Set the throttles of the accepted work (KIP-73) through the single writer.

        When configs had to change, the caller waits one step before submitting, so
        that every broker has applied them (config changes reach brokers asynchronously
        through ZooKeeper); otherwise the first fetches of new replicas run unthrottled.
        ``None``: no sync was needed (:meth:`_changes_nothing`).
        """
        contribution = Contribution(ctx.source)
        if (moving := self._accepted_spec(ctx)) is not None:
            contribution = reassignment_contribution(ctx.source, moving, ctx.snapshot.view)
        if self._changes_nothing(ctx.source, contribution):
            return None
        throttles = self.writer.sync({ctx.source: contribution})
        if throttles.errors:
            failed = ", ".join(f"{r.kind} {r.name}: {e}" for r, e in throttles.errors.items())
            text = f"could not set throttles: {failed}"
            self.store.event(ctx.obj, WARNING, "ThrottleFailed", text)
        return throttles

    # -- cordoning the drained brokers (KIP-1066) ----------------------------------------------

    def _record_drained(self, ctx: StepContext, spec: PartitionReassignmentSpec) -> None:
        """Put the brokers ``spec`` drains in ``status.cordon`` (written with the accepted targets).

        A broker is drained when the targets take all its replicas away and it holds no
        replica of any other partition (Metadata of every topic, read once per half poll
        interval for every acceptance: :meth:`SharedClusterReader.every_topic`).
        """
        if self.cordons is None:
            return
        every = self.reader.every_topic()
        targets = {t.key: t.replicas for t in spec.partitions}
        drained = drained_by(every.counts, every.topics, targets)
        if drained or ctx.status.drained:
            cordon = (ctx.status.cordon or CordonStatus()).model_copy()
            cordon.drained_brokers = sorted(drained)
            ctx.status.cordon = cordon

    def _sync_cordons(self, ctx: StepContext) -> None:
        """Cordon the brokers this object drains (recorded in its status); report the outcome."""
        if self.cordons is None:
            return
        drained = ctx.status.drained
        if not drained and ctx.status.cordon is None:
            return
        result = self.cordons.sync({ctx.source: drained or None})
        self._memory_of(ctx.obj).cordon_synced_at = self.clock()
        if drained:
            self._report_cordon(ctx, *cordon_report(drained, result))

    def _release_cordons(self, ctx: StepContext) -> bool:
        """Let go of this object's cordons (previous values back); ``False`` when that failed."""
        drained = ctx.status.drained
        if self.cordons is None or not drained or _released(ctx.status):
            return True
        result = self.cordons.sync({ctx.source: None})
        self._memory_of(ctx.obj).cordon_synced_at = None
        if any(b in result.errors for b in drained):
            return False
        held = (ctx.status.cordon.cordoned_brokers if ctx.status.cordon else None) or []
        if held or drained & result.released:  # else nothing was cordoned: keep saying why
            self._report_cordon(ctx, *cordon_report(drained, result, released=True))
        return True

    def _report_cordon(self, ctx: StepContext, cordon: dict[str, Any], cond: Condition) -> None:
        """Write ``status.cordon`` and the ``Cordoned`` condition; an Event when it changes."""
        conditions = ctx.status.condition_dicts()
        before = ctx.status.condition(ConditionType.CORDONED)
        stamped = stamp_conditions(conditions, [cond], ctx.generation, ctx.now)
        was = ctx.status.cordon.to_status() if ctx.status.cordon is not None else None
        if was == cordon and conditions == stamped:
            return
        meta = ctx.obj["metadata"]
        answer = self.store.patch_status(
            PARTITION_REASSIGNMENT,
            meta["namespace"],
            meta["name"],
            {"cordon": cordon, "conditions": stamped},
        )
        ctx.status.cordon = CordonStatus.from_status(cordon)
        ctx.status.set_conditions(stamped)
        ctx.obj["status"] = ctx.status.to_status()
        _patched(ctx.obj, answer)
        said = (before.status, before.reason) if before is not None else (None, None)
        if said != (cond.status, cond.reason):
            warn = cond.reason in ("CordonFailed", "CordonedOutside")
            self.store.event(ctx.obj, WARNING if warn else NORMAL, cond.reason, cond.message)

    # -- tracking the accepted work -----------------------------------------------------------

    def _track(self, ctx: StepContext, rejected: str | None = None) -> str:
        """Submit what is accepted and not in flight, move log dirs, report or finish.

        Only the accepted targets in ``status.partitions`` are tracked; ``ctx.spec`` is
        used for the preferred-leader election at the end. ``rejected`` is the message
        of an edit not applied (the object ends Failed with it).
        """
        tracked = self._measure(ctx)
        entries = tracked.entries
        if tracked.unsubmitted:
            entries = self._submit(ctx, entries, tracked.unsubmitted)
        with_dirs = [a.as_target() for a in ctx.accepted.values() if a.target_log_dirs]
        move_log_dirs(self.admin, with_dirs, ctx.snapshot)
        if any(e.state in ACTIVE_STATES for e in entries):
            return self._report_progress(ctx, tracked.parts, entries, rejected)
        return self._finish(ctx, tracked.parts, entries, rejected)

    def _measure(self, ctx: StepContext) -> _Tracked:
        """Classify each accepted partition by what the cluster shows.

        Active partitions at their target (and log dirs) are Completed; Pending ones not
        in flight towards their target are to be submitted; one that left flight without
        reaching its target (cancelled by someone else) is Failed; the rest Moving.
        """
        tracked = _Tracked([], [], {})
        view, sizes = ctx.snapshot.view, ctx.snapshot.sizes
        for tp, prior in ctx.accepted.items():
            progress = measure_partition(
                prior.topic,
                prior.partition,
                prior.target_replicas,
                prior.original_replicas,
                view,
                sizes,
            )
            state, message = prior.state, prior.message
            if state in ACTIVE_STATES:
                if progress.state == MoveState.COMPLETED and (
                    not prior.target_log_dirs or dirs_reached(prior.as_target(), ctx.snapshot)
                ):
                    state = MoveState.COMPLETED
                elif state == MoveState.PENDING and needs_submission(
                    ctx.snapshot, tp, prior.target_replicas
                ):
                    tracked.unsubmitted[tp] = list(prior.target_replicas)
                elif progress.state == MoveState.PENDING and not _may_be_stale(
                    ctx.snapshot, tp, prior.target_replicas
                ):
                    state = MoveState.FAILED
                    message = "left flight without reaching its target replicas"
                else:
                    state = MoveState.MOVING
            tracked.parts.append(progress)
            tracked.entries.append(
                PartitionStatus.from_progress(progress, state, message, prior.target_log_dirs)
            )
        return tracked

    def _submit(
        self,
        ctx: StepContext,
        entries: list[PartitionStatus],
        targets: dict[TopicPartition, list[int]],
    ) -> list[PartitionStatus]:
        """Submit ``targets`` with AlterPartitionReassignments (KIP-455), throttles first.

        The throttles of the accepted work are synced first (also after a crash before
        they were written); the targets are sent only if no config had to change, else
        on a later step. A sync begun after this object's throttles were written (by the
        step that accepted it, a poll interval ago) that found them in place confirms them
        without a sync of its own (:meth:`ThrottleWriter.confirmed`): at scale each sync
        waits for the one in progress, and every object took two.

        With concurrency limits in the spec, only the targets :meth:`_admit` admits are
        sent (nothing is synced when it admits none); the others stay Pending with why
        they wait as their message. Returns ``entries`` with the submitted ones Moving
        and the refused ones Failed.
        """
        limits = MoveLimits.of(ctx.spec, ctx.obj.get("spec"))
        waiting: dict[TopicPartition, str] = {}
        with self._admitting if limits.per_broker is not None else nullcontext():
            if limits:
                admission = self._admit(ctx, targets, limits)
                targets, waiting = admission.admitted, admission.waiting
                if not targets:
                    return mark_waiting(entries, waiting)
            moving = self._accepted_spec(ctx)
            own = (
                reassignment_contribution(ctx.source, moving, ctx.snapshot.view) if moving else None
            )
            own = own or Contribution(ctx.source)
            memory = self._memory_of(ctx.obj)
            since, memory.throttled_at = memory.throttled_at, None
            if (
                not self._changes_nothing(ctx.source, own)
                and (since is None or not self.writer.confirmed(ctx.source, own, since))
                and self.writer.sync({ctx.source: own}).changed_for(ctx.source)
            ):
                return mark_waiting(entries, waiting)
            errors = self.submissions.submit(dict(targets))
        refused = {tp: str(e) for tp, e in errors.items() if e is not None}
        submitted: list[PartitionStatus] = []
        for entry in mark_waiting(entries, waiting):
            if entry.key in refused:
                entry = entry._replace(state=MoveState.FAILED, message=refused[entry.key])
            elif entry.key in targets:
                entry = entry._replace(state=MoveState.MOVING, message="")
            submitted.append(entry)
        text = f"submitted {len(targets) - len(refused)} partitions"
        if waiting:
            text += f"; {len(waiting)} wait for the concurrency limits"
        if refused:
            text += "; refused by Kafka: " + "; ".join(
                f"{t}-{p}: {m}" for (t, p), m in sorted(refused.items())
            )
        self.store.event(ctx.obj, WARNING if refused else NORMAL, "Submitted", text)
        return submitted

    def _admit(
        self, ctx: StepContext, targets: dict[TopicPartition, list[int]], limits: MoveLimits
    ) -> Admission:
        """Return which of ``targets`` the object's ``limits`` let it submit now.

        The per-broker limit counts every movement in flight on the cluster, read here with
        ListPartitionReassignments (the step's snapshot holds only its own topics', and
        may be a poll interval old); the leader limit counts this object's, which the
        snapshot holds. Leaders and OAR come from the snapshot's Metadata.

        Raises:
            KafkaAdminError: ListPartitionReassignments failed.
        """
        view = ctx.snapshot.view
        in_flight: Mapping[TopicPartition, Movement]
        if limits.per_broker is not None:
            in_flight = self.admin.list_partition_reassignments()
        else:
            in_flight = {tp: s for tp in view.reassigning if (s := view.partition(*tp))}
        candidates = []
        for tp, target in targets.items():
            state = view.partition(*tp)
            original, leader = (state.original_replicas, state.leader) if state else ((), -1)
            candidates.append(Candidate(tp, original, tuple(target), leader))
        own = {
            tp: state.leader
            for tp, a in ctx.accepted.items()
            if a.state in ACTIVE_STATES and (state := view.partition(*tp)) is not None
        }
        return admit(candidates, in_flight, view.live_brokers, limits, own)

    def _rate(self, ctx: StepContext, bytes_done: int) -> float | None:
        """Record ``bytes_done`` and return the replication rate over the window, bytes/s."""
        memory = self._memory_of(ctx.obj)
        if memory.rate is None:
            memory.rate = RateEstimator(self.rate_window_s, self.clock)
        estimator = memory.rate
        estimator.observe(bytes_done)
        return estimator.rate()

    def _report_progress(
        self,
        ctx: StepContext,
        parts: list[PartitionProgress],
        entries: list[PartitionStatus],
        rejected: str | None,
    ) -> str:
        """Still moving: re-check the throttles now and then, write progress, rate and ETA."""
        summary = totals(parts)
        rate = self._rate(ctx, summary.bytes_done)
        remaining = summary.bytes_total - summary.bytes_done
        last = self._memory_of(ctx.obj).cordon_synced_at
        if last is None or self.clock() - last >= self.throttle_resync_s:
            self._sync_cordons(ctx)  # after a restart, and to repair a changed cordon
        observed = ctx.status.observed_generation or ctx.generation
        throttle = ctx.status.replication_rate
        synced = self.writer.sync(max_age_s=self.throttle_resync_s)
        left = throttled_duration(parts, throttle)
        message = rejected or (
            f"{summary.partitions_done}/{summary.partitions} partitions done, "
            f"{summary.progress} of {summary.bytes_total} bytes"
        )
        if not rejected and (waiting := sum(e.state == MoveState.PENDING for e in entries)):
            message += f"; {waiting} partitions waiting to be submitted"
        if (mine := synced.contributions.get(ctx.source)) is not None:
            foreign = [
                f
                for f in synced.foreign
                if wants(mine, f.resource_type, f.resource_name, f.key) and not f.overridden
            ]
            if foreign:
                message += f"; {len(foreign)} throttle values set outside the operator left alone"
        written_at = parse_time(ctx.status.partitions_update_time)
        interval_s = self.partition_status_interval_s
        due = partitions_due(ctx.accepted, entries, written_at, ctx.now, interval_s)
        update = StatusUpdate(
            Phase.MOVING,
            message,
            observed if rejected else ctx.generation,
            entries if due else None,
            summary,
            rate,
            self._eta(ctx, parts, summary.bytes_total, remaining, rate, throttle, left),
            format_duration(left) if left else None,
        )
        self._record(ctx, update, None)
        return Phase.MOVING

    def _eta(
        self,
        ctx: StepContext,
        parts: list[PartitionProgress],
        bytes_total: int,
        remaining: int,
        rate: float | None,
        throttle: int | None,
        left: timedelta | None,
    ) -> datetime | None:
        """Predict the end: with a throttle, by replaying Kafka's quota window.

        Throttled, the busiest broker's pace (``left`` at ``throttle``) gives the rate the
        bytes drain at, and :func:`~kpo_operator.quota_window.throttled_finish` replays
        the brokers' quota window (``replication.quota.window.num`` x ``.size.seconds``,
        read once from a broker) over the progress seen so far. Unthrottled, or before
        two observations: the remaining bytes at the measured rate.
        """
        if remaining <= 0:
            return None
        estimator = self._memory_of(ctx.obj).rate
        history = estimator.history() if estimator is not None else ()
        if throttle and left and left.total_seconds() > 0 and len(history) >= 2:
            window = self._read_quota_window(parts)
            started = parse_time(ctx.status.start_time)
            seen_s = history[-1][0] - history[0][0]
            expired = started is not None and (ctx.now - started).total_seconds() - seen_s > (
                window.samples * window.sample_s
            )
            drain = remaining / left.total_seconds()
            # The move's start on the observations' clock (the newest was taken this step).
            start = (
                None if started is None else history[-1][0] - (ctx.now - started).total_seconds()
            )
            found = throttled_finish(
                history, bytes_total, drain, window, baseline_expired=expired, started=start
            )
            if found is not None:
                return ctx.now + timedelta(seconds=found)
        return eta(remaining, rate, ctx.now)

    def _read_quota_window(self, parts: list[PartitionProgress]) -> QuotaWindow:
        """Return a receiving broker's quota window, read every 10 minutes (static configs)."""
        now = self.clock()
        if self._quota_window is not None and now - self._quota_window[0] < 600:
            return self._quota_window[1]
        brokers = sorted({b for p in parts for b in p.adding} or {p.leader for p in parts})
        window = QuotaWindow()
        if brokers and brokers[0] >= 0:
            try:
                configs = self.admin.broker_config_values(brokers[0], (WINDOW_NUM, WINDOW_SIZE))
            except KafkaAdminError as exc:
                logger.info(
                    "quota window of broker %s unknown (%s): Kafka's defaults", brokers[0], exc
                )
            else:
                window = QuotaWindow.from_configs(configs)
        self._quota_window = (now, window)
        return window

    def _finish(
        self,
        ctx: StepContext,
        parts: list[PartitionProgress],
        entries: list[PartitionStatus],
        rejected: str | None,
    ) -> str:
        """Every partition is done: remove the throttles, elect preferred leaders, end."""
        summary = totals(parts)
        rate = self._rate(ctx, summary.bytes_done)
        removal = None
        if not self._changes_nothing(ctx.source):
            removal = self.writer.sync({ctx.source: None})
        if removal is not None and removal.errors:
            text = "all partitions done; removing throttles failed, retrying: " + "; ".join(
                f"{r.kind} {r.name}: {e}" for r, e in removal.errors.items()
            )
            update = StatusUpdate(Phase.MOVING, text, ctx.generation, entries, summary, rate)
            self._record(ctx, update, None)
            return Phase.MOVING
        if not self._release_cordons(ctx):
            text = "all partitions done; restoring cordoned.log.dirs failed, retrying"
            update = StatusUpdate(Phase.MOVING, text, ctx.generation, entries, summary, rate)
            self._record(ctx, update, None)
            return Phase.MOVING
        self._memory_of(ctx.obj).rate = None
        done = ""
        if ctx.spec is not None:
            done = elect_preferred(self.admin, self.store, ctx.obj, ctx.spec, ctx.accepted)
        failed = [
            f"{e.topic}-{e.partition}: {e.message}" for e in entries if e.state == MoveState.FAILED
        ]
        if failed or rejected:
            update = StatusUpdate(
                Phase.FAILED,
                "; ".join(failed + ([rejected] if rejected else [])),
                ctx.generation,
                entries,
                summary,
                completion_time=format_time(ctx.now),
                reason="EditRejected" if rejected and not failed else "PartitionsFailed",
            )
            self._record(ctx, update, Phase.FAILED)
            return Phase.FAILED
        text = f"all {summary.partitions} partitions reassigned; throttles removed" + done
        update = StatusUpdate(
            Phase.COMPLETED,
            text,
            ctx.generation,
            entries,
            summary,
            rate,
            completion_time=format_time(ctx.now),
        )
        self._record(ctx, update, Phase.COMPLETED)
        return Phase.COMPLETED

    # -- cancelling (spec.cancel or deletion, KIP-455) --------------------------------------

    def _cancel(self, ctx: StepContext) -> str:
        """Revert this object's in-flight partitions, restore their order, drop throttles.

        Each call takes the first step still needed; the object is ``Cancelling`` until
        the last one, then ``Cancelled`` (not written while deleting: the object goes).
        """
        if ctx.phase not in THROTTLING_PHASES:
            if not ctx.deleting:
                text = "cancelled before anything was submitted"
                update = StatusUpdate(
                    Phase.CANCELLED, text, ctx.generation, completion_time=format_time(ctx.now)
                )
                self._record(ctx, update, Phase.CANCELLED)
            return Phase.CANCELLED
        # Kafka refuses an assignment naming a fully cordoned broker, so the cordons go
        # first: the order restore below puts drained brokers back.
        if not self._release_cordons(ctx):
            text = "cancelling; restoring cordoned.log.dirs failed, retrying"
            self._record(ctx, StatusUpdate(Phase.CANCELLING, text, ctx.generation), None)
            return Phase.CANCELLING
        if ours := self._in_flight_of(ctx):
            return self._revert(ctx, ours)
        # Kafka reverts a cancelled partition to OAR in its in-flight order (target first),
        # which can change the preferred leader: restore the recorded order (no data moves).
        if reorder := order_restores(ctx.accepted, ctx.snapshot.view):
            self.admin.alter_partition_reassignments(reorder)
            self.reader.invalidate()
            text = f"restoring the original replica order of {len(reorder)} partitions"
            self._record(ctx, StatusUpdate(Phase.CANCELLING, text, ctx.generation), None)
            return Phase.CANCELLING
        if self.writer.sync({ctx.source: None}).errors:
            text = "cancelled; removing throttles failed, retrying"
            self._record(ctx, StatusUpdate(Phase.CANCELLING, text, ctx.generation), None)
            return Phase.CANCELLING
        entries = cancelled_entries(ctx.accepted, ctx.snapshot.view)
        moved = sum(e.state == MoveState.COMPLETED for e in entries)
        text = (
            f"cancelled: {len(entries) - moved} partitions reverted, {moved} had already "
            "completed; throttles removed"
        )
        update = StatusUpdate(
            Phase.CANCELLED, text, ctx.generation, entries, completion_time=format_time(ctx.now)
        )
        self._record(ctx, update, Phase.CANCELLED)
        return Phase.CANCELLED

    def _changes_nothing(self, source: str, contribution: Contribution | None = None) -> bool:
        """Whether syncing ``contribution`` (``None``: dropping it) for ``source`` changes nothing.

        So when it sets nothing and ``source`` set nothing in the last sync
        (:meth:`ThrottleWriter.contributes`): a move without a throttle then never waits
        for a sync, which at scale waits for the one in progress of every other object.
        """
        empty = contribution is None or not sets_anything(contribution)
        return empty and self.writer.contributes(source) is False

    def _in_flight_of(self, ctx: StepContext) -> list[TopicPartition]:
        """Return the accepted partitions Kafka is still moving to this object's targets."""
        view = ctx.snapshot.view
        return [
            tp
            for tp, a in ctx.accepted.items()
            if a.state in ACTIVE_STATES
            and tp in view.reassigning
            and (
                current_target(ctx.snapshot, tp) == a.target_replicas
                or a.state == MoveState.PENDING
            )
        ]

    def _revert(self, ctx: StepContext, ours: list[TopicPartition]) -> str:
        """Cancel ``ours`` with AlterPartitionReassignments (``None`` targets, KIP-455)."""
        errors = self.admin.alter_partition_reassignments({tp: None for tp in ours})
        self.reader.invalidate()
        refused = {tp: e for tp, e in errors.items() if e is not None}
        text = f"cancelling {len(ours)} in-flight partitions (reverting to their replicas)"
        if refused:
            text += "; " + "; ".join(f"{t}-{p}: {e}" for (t, p), e in refused.items())
        self._record(ctx, StatusUpdate(Phase.CANCELLING, text, ctx.generation), Phase.CANCELLING)
        return Phase.CANCELLING

    # -- status ---------------------------------------------------------------------------

    def _refused(self, obj: Object, exc: KafkaAdminError) -> None:
        """Report a missing ACL or refused credentials on the object (Stalled, Event).

        Other Kafka errors (unreachable, retriable) are left to the caller's retry.
        """
        reason = reason_of(exc)
        if reason is None:
            return
        latest = self.store.get(PARTITION_REASSIGNMENT, *_name_of(obj)) or obj
        record_refusal(
            self.store, PARTITION_REASSIGNMENT, latest, reason, str(exc), self.now(), Phase.PENDING
        )

    def _record(self, ctx: StepContext, update: StatusUpdate, reason: str | None) -> None:
        """Write ``update`` for the step's object (see :meth:`_write`)."""
        self._write(ctx.obj, ctx.status, update, reason, ctx.now)

    def _write(
        self,
        obj: Object,
        old: ReassignmentStatus,
        update: StatusUpdate,
        reason: str | None,
        now: datetime,
    ) -> None:
        """Patch the status if it changed; record an Event named ``reason`` on a new phase.

        ``old`` is updated in place to the written status.

        Raises:
            IllegalPhaseTransitionError: ``update.phase`` may not follow ``old.phase``.
        """
        before = old.phase
        written = updated_status(old, update, now)
        was = old.to_status()
        new = {**written.to_status(), **removed_keys(written, update)}
        if not status_changed(was, new):
            return
        meta = obj["metadata"]
        patch = status_patch(was, new)
        answer = self.store.patch_status(
            PARTITION_REASSIGNMENT, meta["namespace"], meta["name"], patch
        )
        obj["status"] = written.to_status()
        _patched(obj, answer)
        if "partitions" in patch and update.partitions is not None:
            entries = {e.key: e for e in update.partitions if e.target_replicas}  # as parsed
            self._memory_of(obj).accepted = _Parsed.of(written.partitions or [], entries)
        held: frozenset[TopicPartition] = frozenset()
        if update.phase in THROTTLING_PHASES:
            held = self._parsed(obj, written).active
        self.owners.written(obj, held)  # with the answer's resourceVersion: write-through
        old.replace_with(written)
        if reason is not None and update.phase != before:
            kind = WARNING if update.phase is Phase.FAILED else NORMAL
            self.store.event(obj, kind, reason, update.message)

    def _accepted_spec(self, ctx: StepContext) -> PartitionReassignmentSpec | None:
        """Return the object's work in flight as a spec (its Pending/Moving entries, throttle)."""
        throttle = ctx.status.throttle.to_status() if ctx.status.throttle else None
        return spec_of_accepted(self._parsed(ctx.obj, ctx.status).entries.values(), throttle)


def _released(status: ReassignmentStatus) -> bool:
    """Whether the object's cordons were already let go (condition ``Cordoned`` ``Released``)."""
    found = status.condition(ConditionType.CORDONED)
    return found is not None and found.reason == "Released"


def _patched(obj: Object, answer: Object | None) -> None:
    """Give ``obj`` (its status just written) the ``resourceVersion`` the patch was answered with.

    Without an answer the version is dropped (the written status is not the one it
    named): caches keyed by it compare contents instead. ``metadata`` is replaced, not
    edited (it may be shared with the caller's copy or the reassignment index's).
    """
    meta = {k: v for k, v in obj["metadata"].items() if k != "resourceVersion"}
    version = ((answer or {}).get("metadata") or {}).get("resourceVersion")
    if version:
        meta["resourceVersion"] = version
    obj["metadata"] = meta


def _name_of(obj: Object) -> tuple[str, str]:
    meta = obj["metadata"]
    return str(meta.get("namespace") or ""), str(meta["name"])


def _invalid(generation: int, problems: list[str], reason: str) -> StatusUpdate:
    return StatusUpdate(Phase.FAILED, "invalid: " + "; ".join(problems), generation, reason=reason)


def _object_uid(obj: Object) -> str:
    """Return ``metadata.uid`` (``namespace/name`` without one), the key of per-object state."""
    return str(obj["metadata"].get("uid") or object_key(obj))


def _throttle_status(spec: PartitionReassignmentSpec) -> dict[str, int] | None:
    if spec.throttle is None:
        return None
    out = {
        "replicationRate": spec.throttle.replication_rate,
        "logDirMoveRate": spec.throttle.log_dir_move_rate,
    }
    return {k: v for k, v in out.items() if v is not None}


def _may_be_stale(snapshot: ClusterSnapshot, tp: TopicPartition, target: tuple[int, ...]) -> bool:
    """Tell whether AR still holds every target replica (a just-completed move, seen stale).

    A broker's metadata cache may not have had the controller's UpdateMetadata yet. A
    partition that really left flight without reaching its target (cancelled by someone
    else) is back to OAR, which lacks the adding replicas.
    """
    state = snapshot.view.partition(*tp)
    return state is not None and set(target) <= set(state.replicas)
