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
- **Moving**: measure each partition (adding/removing replicas, ISR, leader,
  bytes of the adding replicas vs the leader's) and the rate/ETA; when every
  partition is done, remove this object's throttles, run the preferred-leader
  election if asked and set ``Completed``. A partition that leaves flight
  without reaching its target (cancelled by someone else) is ``Failed``.
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
"""

from __future__ import annotations

import logging
from typing import Any

from kpo_kafka.specs import PartitionReassignmentSpec, PartitionTarget, SpecError
from kpo_kafka.topic_partition import TopicPartition
from kpo_operator.cluster import ClusterSnapshot, read_cluster, with_owners
from kpo_operator.conditions import Phase
from kpo_operator.progress import (
    PartitionProgress,
    RateEstimator,
    eta,
    format_duration,
    format_time,
    throttled_duration,
    totals,
)
from kpo_operator.reassignment_actions import (
    dirs_reached,
    elect_preferred,
    move_log_dirs,
    needs_submission,
    oar,
    owners_of_in_flight,
)
from kpo_operator.reassignment_cancel import CancellingReconciler
from kpo_operator.reassignment_core import object_uid
from kpo_operator.reassignment_status import (
    ACTIVE_STATES,
    COMPLETED,
    FAILED,
    MOVING,
    PENDING,
    Accepted,
    StatusUpdate,
    accepted_partitions,
    accepted_spec,
    partition_entry,
)
from kpo_operator.resources import PARTITION_REASSIGNMENT
from kpo_operator.store import NORMAL, WARNING, Object, object_key
from kpo_operator.throttle_writer import THROTTLING_PHASES, source_of
from kpo_operator.throttles import Contribution, reassignment_contribution
from kpo_operator.validation import validate_reassignment

logger = logging.getLogger(__name__)

FINAL_PHASES = frozenset({Phase.COMPLETED.value, Phase.CANCELLED.value})


class ReassignmentReconciler(CancellingReconciler):
    """Drives PartitionReassignment objects; safe to call again at any time (idempotent).

    Constructor arguments: see :class:`~kpo_operator.reassignment_core.ReconcilerCore`.

    Errors: ``KafkaAdminError`` and ``ObjectStoreError`` propagate; the caller retries.
    """

    # -- entry points -------------------------------------------------------------------

    def reconcile(self, namespace: str, name: str) -> str | None:
        """Take one step for the object; return its phase afterwards (``None``: gone)."""
        obj = self.store.get(PARTITION_REASSIGNMENT, namespace, name)
        if obj is None:
            return None
        return self._step(obj)

    def finalize(self, namespace: str, name: str) -> bool:
        """Cancel what is in flight and drop the throttles of a deleted object.

        Returns:
            ``True`` once nothing of this object is in flight and its throttles are
            gone (the finalizer may be removed); ``False`` to be called again later.
        """
        obj = self.store.get(PARTITION_REASSIGNMENT, namespace, name)
        if obj is None:
            return True
        phase = self._step(obj, deleting=True)
        if phase in THROTTLING_PHASES:
            return False
        if self.writer.sync({source_of(PARTITION_REASSIGNMENT, obj): None}).errors:
            return False
        self._rates.pop(object_uid(obj), None)
        return True

    # -- steps ----------------------------------------------------------------------------

    def _step(self, obj: Object, deleting: bool = False) -> str:
        status: dict[str, Any] = dict(obj.get("status") or {})
        phase = status.get("phase") or ""
        generation = int(obj["metadata"].get("generation") or 1)
        deleting = deleting or bool(obj["metadata"].get("deletionTimestamp"))
        if phase in FINAL_PHASES:
            return phase
        if phase == Phase.FAILED and status.get("observedGeneration") == generation:
            return phase
        try:
            spec = PartitionReassignmentSpec.from_object(obj)
        except SpecError as exc:
            if phase in THROTTLING_PHASES:  # keep tracking what was accepted; cancel on delete
                spec = None
            else:
                self._write(
                    obj, status, self._failed(generation, exc.errors, "InvalidSpec"), "InvalidSpec"
                )
                return Phase.FAILED
        accepted = accepted_partitions(status)
        topics = {tp[0] for tp in accepted} | (
            {t.topic for t in spec.partitions} if spec else set()
        )
        dirs = {b for t in (spec.partitions if spec else []) if t.log_dirs for b in t.replicas}
        snapshot = read_cluster(self.admin, sorted(topics), replica_sizes=True, log_dirs_of=dirs)
        key = object_key(obj)
        owners = owners_of_in_flight(self.store, exclude=key)
        owners.update({tp: key for tp, a in accepted.items() if a.state in ACTIVE_STATES})
        with_owners(snapshot.view, owners)
        if deleting or (spec is not None and spec.cancel):
            return self._cancel(obj, status, generation, accepted, snapshot, deleting)
        if spec is None:
            return self._track(obj, status, generation, None, accepted, snapshot)
        edited = phase not in THROTTLING_PHASES or status.get("observedGeneration") != generation
        if edited:
            issues = validate_reassignment(spec, snapshot.view, key)
            if issues and phase not in THROTTLING_PHASES:
                self._write(
                    obj,
                    status,
                    self._failed(generation, [str(i) for i in issues], "ValidationFailed"),
                    "ValidationFailed",
                )
                return Phase.FAILED
            if issues:
                text = "edit not applied: " + "; ".join(str(i) for i in issues)
                if status.get("message") != text:
                    self.store.event(obj, WARNING, "EditRejected", text)
                status["message"] = text
                return self._track(obj, status, generation, spec, accepted, snapshot, rejected=text)
            if phase not in THROTTLING_PHASES and spec.suspend:
                return self._suspend(obj, status, generation, spec, snapshot)
            return self._submit(obj, status, generation, spec, accepted, snapshot)
        return self._track(obj, status, generation, spec, accepted, snapshot)

    def _suspend(
        self,
        obj: Object,
        status: dict[str, Any],
        generation: int,
        spec: PartitionReassignmentSpec,
        snapshot: ClusterSnapshot,
    ) -> str:
        parts = [self._measure(t, oar(t, snapshot), snapshot) for t in spec.partitions]
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
            generation,
            partitions=[partition_entry(p, PENDING) for p in parts],
            totals=summary,
            predicted_duration=format_duration(duration) if duration else None,
        )
        self._write(obj, status, update, "Suspended")
        return Phase.SUSPENDED

    def _submit(
        self,
        obj: Object,
        status: dict[str, Any],
        generation: int,
        spec: PartitionReassignmentSpec,
        accepted: dict[TopicPartition, Accepted],
        snapshot: ClusterSnapshot,
    ) -> str:
        """Accept ``spec``: write the targets ahead (Pending), set the throttles, submit.

        Partitions dropped from the spec while in flight get their OAR as new target
        (KIP-455: no data moves, the adding replicas go). When throttle configs had to
        change, the submission waits for the next step so that every broker has applied
        them (config changes reach brokers asynchronously through ZooKeeper); otherwise
        the first fetches of the new replicas would run unthrottled.
        """
        view = snapshot.view
        wanted = {t.key: t for t in spec.partitions}
        for tp, dropped in accepted.items():
            if tp not in wanted and dropped.state in ACTIVE_STATES and tp in view.reassigning:
                wanted[tp] = PartitionTarget(
                    topic=tp[0], partition=tp[1], replicas=list(dropped.original)
                )
        entries: list[dict[str, Any]] = []
        for tp, target in wanted.items():
            prior = accepted.get(tp)
            original = prior.original if prior else oar(target, snapshot)
            progress = self._measure(target, original, snapshot)
            pending = needs_submission(snapshot, tp, tuple(target.replicas))
            entries.append(
                partition_entry(progress, PENDING if pending else MOVING, log_dirs=target.log_dirs)
            )
        ahead = StatusUpdate(
            Phase.MOVING,
            f"accepted generation {generation}",
            generation,
            partitions=entries,
            start_time=status.get("startTime") or format_time(self.now()),
            throttle=_throttle_status(spec) or {},
        )
        self._write(obj, status, ahead, "Accepted")
        source = source_of(PARTITION_REASSIGNMENT, obj)
        contribution = Contribution(source)
        if (moving := accepted_spec(status)) is not None:
            contribution = reassignment_contribution(source, moving, view)
        throttles = self.writer.sync({source: contribution})
        if throttles.errors:
            failed = ", ".join(f"{r.kind} {r.name}: {e}" for r, e in throttles.errors.items())
            self.store.event(obj, WARNING, "ThrottleFailed", f"could not set throttles: {failed}")
        if throttles.applied and any(e["state"] == PENDING for e in entries):
            return Phase.MOVING  # submitted on the next step, once brokers have the throttles
        return self._track(obj, status, generation, spec, accepted_partitions(status), snapshot)

    def _send(
        self, obj: Object, entries: list[dict[str, Any]], targets: dict[TopicPartition, list[int]]
    ) -> None:
        """Submit ``targets`` (AlterPartitionReassignments) and mark ``entries`` accordingly."""
        errors = self.admin.alter_partition_reassignments(dict(targets))
        refused = {tp: str(e) for tp, e in errors.items() if e is not None}
        for entry in entries:
            tp = (entry["topic"], entry["partition"])
            if tp in refused:
                entry["state"], entry["message"] = FAILED, refused[tp]
            elif tp in targets:
                entry["state"] = MOVING
        text = f"submitted {len(targets) - len(refused)} partitions"
        if refused:
            text += "; refused by Kafka: " + "; ".join(
                f"{t}-{p}: {m}" for (t, p), m in sorted(refused.items())
            )
        self.store.event(obj, WARNING if refused else NORMAL, "Submitted", text)

    def _track(
        self,
        obj: Object,
        status: dict[str, Any],
        generation: int,
        spec: PartitionReassignmentSpec | None,
        accepted: dict[TopicPartition, Accepted],
        snapshot: ClusterSnapshot,
        rejected: str | None = None,
    ) -> str:
        """Submit accepted partitions not yet in flight, measure, and finish when all are done.

        Only the accepted targets in ``status.partitions`` are tracked; ``spec`` is used
        for the preferred-leader election at the end.
        """
        entries: list[dict[str, Any]] = []
        parts: list[PartitionProgress] = []
        send: dict[TopicPartition, list[int]] = {}
        for tp, prior in accepted.items():
            target = prior.as_target(tp)
            progress = self._measure(target, prior.original, snapshot)
            state, message = prior.state, prior.message
            if state in ACTIVE_STATES:
                if progress.state == COMPLETED and dirs_reached(target, snapshot):
                    state = COMPLETED
                elif state == PENDING and needs_submission(snapshot, tp, prior.target):
                    send[tp] = list(prior.target)  # accepted, not (yet) submitted
                elif progress.state == "Pending" and not _may_be_stale(snapshot, tp, prior.target):
                    state, message = FAILED, "left flight without reaching its target replicas"
                else:
                    state = MOVING
            parts.append(progress)
            entries.append(partition_entry(progress, state, message, log_dirs=target.log_dirs))
        if send:
            # Throttles first (also after a crash before they were written): send only
            # once the configs are in place, one step after any change.
            moving = accepted_spec(status)
            source = source_of(PARTITION_REASSIGNMENT, obj)
            own = reassignment_contribution(source, moving, snapshot.view) if moving else None
            if not self.writer.sync({source: own or Contribution(source)}).applied:
                self._send(obj, entries, send)
        move_log_dirs(self.admin, [a.as_target(tp) for tp, a in accepted.items()], snapshot)
        summary = totals(parts)
        uid = object_uid(obj)
        estimator = self._rates.setdefault(uid, RateEstimator(self.rate_window_s, self.clock))
        estimator.observe(summary.bytes_done)
        rate = estimator.rate()
        remaining = summary.bytes_total - summary.bytes_done
        observed = int(status.get("observedGeneration") or generation)
        source = source_of(PARTITION_REASSIGNMENT, obj)
        throttle = (status.get("throttle") or {}).get("replicationRate")
        if any(e["state"] in ACTIVE_STATES for e in entries):
            self.writer.sync(max_age_s=self.throttle_resync_s)
            left = throttled_duration(parts, throttle)
            message = rejected or (
                f"{summary.partitions_done}/{summary.partitions} partitions done, "
                f"{summary.progress} of {summary.bytes_total} bytes"
            )
            update = StatusUpdate(
                Phase.MOVING,
                message,
                observed if rejected else generation,
                entries,
                summary,
                rate,
                eta(remaining, rate, self.now()) if remaining > 0 else None,
                format_duration(left) if left else None,
            )
            self._write(obj, status, update, None)
            return Phase.MOVING
        removal = self.writer.sync({source: None})
        if removal.errors:
            text = "all partitions done; removing throttles failed, retrying: " + "; ".join(
                f"{r.kind} {r.name}: {e}" for r, e in removal.errors.items()
            )
            update = StatusUpdate(Phase.MOVING, text, generation, entries, summary, rate)
            self._write(obj, status, update, None)
            return Phase.MOVING
        self._rates.pop(object_uid(obj), None)
        done = ""
        if spec is not None:
            done = elect_preferred(self.admin, self.store, obj, spec, accepted)
        failed = [
            f"{e['topic']}-{e['partition']}: {e.get('message', '')}"
            for e in entries
            if e["state"] == FAILED
        ]
        if failed or rejected:
            text = "; ".join(failed + ([rejected] if rejected else []))
            update = StatusUpdate(
                Phase.FAILED,
                text,
                generation,
                entries,
                summary,
                completion_time=format_time(self.now()),
                reason="EditRejected" if rejected and not failed else "PartitionsFailed",
            )
            self._write(obj, status, update, "Failed")
            return Phase.FAILED
        text = f"all {summary.partitions} partitions reassigned; throttles removed" + done
        update = StatusUpdate(
            Phase.COMPLETED,
            text,
            generation,
            entries,
            summary,
            rate,
            completion_time=format_time(self.now()),
        )
        self._write(obj, status, update, "Completed")
        return Phase.COMPLETED


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
