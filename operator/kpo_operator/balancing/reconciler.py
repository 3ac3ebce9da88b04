"""Reconcile one BalancingPolicy: observe, detect, gate, plan, write fixes, share the budget.

Each :meth:`BalancingPolicyReconciler.reconcile` is one check of the cluster:

1. read the policy; an invalid spec, or an older policy acting on the same Kafka
   cluster, makes it ``Stalled`` and nothing else happens;
2. observe the cluster (:func:`~kpo_operator.balancing.observation.observe`) and run the
   detectors (:func:`~kpo_operator.balancing.anomalies.detect`);
3. advance every anomaly, open ones from ``status.anomalies`` and new findings, one at a
   time in id order (a fix written for one is in flight for the next):

   - with fixes written: read them back. A fix Failed, or Cancelled by someone else,
     fails the anomaly; a fix whose target names a broker that is gone is cancelled
     (annotation ``kpo.dev/replan``) and planned again once Cancelled; a suspended fix
     waits for approval; a running one keeps the anomaly ``Fixing``; when all completed,
     the anomaly is ``Fixed`` unless its finding remains (the next wave is planned);
   - without a running fix, the gates in order: the finding cleared (``Fixed``),
     ``Threshold``, ``Maintenance`` (the ``kpo.dev/maintenance`` annotation, a rollout of
     the brokers' StatefulSet, a broker gone on purpose:
     :func:`~kpo_operator.balancing.maintenance.absent_broker_verdict`), ``Window``
     (detectors with ``respectWindows``); then the plan
     (:mod:`~kpo_operator.balancing.healing`) and the fix, suspended for ``Manual``
     approval (``Waiting`` / ``Approval``), else ``Fixing``;

4. give the running fixes their share of the budget
   (:func:`~kpo_operator.balancing.budget.share_budget`), patching their specs;
5. write the status, with an Event on each anomaly state change.

Anomaly states follow :data:`~kpo_operator.balancing.anomalies.STATE_VALID_PREVIOUS`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from kpo_kafka.admin import KafkaAdmin
from kpo_kafka.admin_types import KafkaAdminError
from kpo_kafka.specs import SpecError
from kpo_kafka.states import ConditionType, Phase
from kpo_kafka.topic_partition import TopicPartition
from kpo_operator.balancing.anomalies import (
    FINAL_STATES,
    AnomalyKind,
    AnomalyState,
    Finding,
    WaitReason,
    check_transition,
    detect,
)
from kpo_operator.balancing.budget import BudgetShare, receiving_brokers, share_budget
from kpo_operator.balancing.fixes import (
    ANOMALY_ID_ANNOTATION,
    REPLAN_ANNOTATION,
    FixPlan,
    FixState,
    budget_patch,
    fix_object,
    fix_state,
)
from kpo_operator.balancing.healing import (
    LogDirUsage,
    balance_bytes,
    relieve_usage,
    replace_replicas,
)
from kpo_operator.balancing.maintenance import (
    Cause,
    StatefulSetState,
    absent_broker_verdict,
    maintenance_annotation,
    rollout_reason,
)
from kpo_operator.balancing.observation import ClusterObservation, observe
from kpo_operator.balancing.spec import Approval, BalancingPolicySpec, DetectorSpec, UsageScope
from kpo_operator.balancing.windows import WindowState, format_duration, window_state
from kpo_operator.conditions import Condition, quota_conditions, stamp_conditions
from kpo_operator.connections import cluster_key_of
from kpo_operator.kube_workloads import WorkloadReader
from kpo_operator.metrics import OperatorMetrics
from kpo_operator.progress import format_time, parse_time
from kpo_operator.resources import BALANCING_POLICY, PARTITION_REASSIGNMENT
from kpo_operator.status_models import (
    AnomalyStatus,
    BalancingPolicyStatus,
    BudgetStatus,
    PolicyBrokers,
    WindowStatus,
)
from kpo_operator.store import NORMAL, WARNING, Object, ObjectStore, object_key

logger = logging.getLogger(__name__)

FINISHED_RETENTION = timedelta(hours=1)
"""How long a Fixed or Failed anomaly stays in ``status.anomalies``. A Fixed one's finding
seen again is a new anomaly at once; a Failed one's only after this (a failed fix is tried
again hourly)."""

MAX_FINISHED = 20
"""At most this many finished anomalies are kept in the status (the newest)."""

DEFAULT_THRESHOLDS: Mapping[AnomalyKind, timedelta] = {
    AnomalyKind.BROKER_FAILURE: timedelta(minutes=10),
    AnomalyKind.DISK_FAILURE: timedelta(0),
    AnomalyKind.DISK_USAGE: timedelta(minutes=5),
    AnomalyKind.GOAL_VIOLATION: timedelta(minutes=30),
    AnomalyKind.UNDER_REPLICATED: timedelta(minutes=5),
}
"""Threshold of each detector when its spec sets none."""

RESPECTS_WINDOWS: Mapping[AnomalyKind, bool] = {
    AnomalyKind.BROKER_FAILURE: False,
    AnomalyKind.DISK_FAILURE: False,
    AnomalyKind.DISK_USAGE: True,
    AnomalyKind.GOAL_VIOLATION: True,
}
"""Whether a detector's fixes wait for a window when its spec does not say: failures are
healed at any time, balancing moves only inside windows."""

_KIND_LABELS: Mapping[AnomalyKind, str] = {
    AnomalyKind.BROKER_FAILURE: "broker-failure",
    AnomalyKind.DISK_FAILURE: "disk-failure",
    AnomalyKind.DISK_USAGE: "disk-usage",
    AnomalyKind.GOAL_VIOLATION: "goal-violation",
}


@dataclass
class _Check:
    """What one reconcile step works with (read once at its start)."""

    obj: Object
    spec: BalancingPolicySpec
    obs: ClusterObservation
    now: datetime
    window: WindowState
    annotation: str | None
    workload: StatefulSetState | None
    findings: dict[str, Finding]
    fixes: dict[str, FixState] = field(default_factory=dict)
    due: frozenset[int] = frozenset()
    """Absent brokers whose BrokerFailure anomaly may be fixed now (its gates passed)."""
    created: list[FixState] = field(default_factory=list)

    @property
    def namespace(self) -> str:
        return str(self.obj["metadata"]["namespace"])


class BalancingPolicyReconciler:
    """The reconcile step of every BalancingPolicy of one Kafka cluster.

    Args:
        admin: The cluster's Admin API client.
        store: The Kubernetes API (the cluster's scoped store).
        clock: The wall clock (UTC-aware ``datetime``).
        metrics: Where anomalies and fixes are counted (``None``: not counted).
        cluster: The ``cluster`` label of those metrics.
    """

    def __init__(
        self,
        admin: KafkaAdmin,
        store: ObjectStore,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        metrics: OperatorMetrics | None = None,
        cluster: str = "default",
    ) -> None:
        self.admin = admin
        self.store = store
        self.clock = clock
        self.metrics = metrics
        self.cluster = cluster

    # -- the step ---------------------------------------------------------------------

    def reconcile(self, namespace: str, name: str, workloads: WorkloadReader | None = None) -> None:
        """Check the cluster once for policy ``namespace/name`` and act (module docstring).

        Args:
            namespace: The policy's namespace.
            name: The policy's name.
            workloads: Reads the brokers' StatefulSet (``None``: only the threshold and
                the annotation tell maintenance).

        Raises:
            kpo_kafka.admin_types.KafkaAdminError: Kafka could not be read.
            kpo_operator.store.ObjectStoreError: The API server failed.
        """
        obj = self.store.get(BALANCING_POLICY, namespace, name)
        if obj is None or obj["metadata"].get("deletionTimestamp"):
            return
        status = BalancingPolicyStatus.from_status(obj.get("status"))
        generation = int(obj["metadata"].get("generation") or 1)
        now = self.clock()
        try:
            spec = BalancingPolicySpec.from_object(obj)
        except SpecError as exc:
            self._stalled(obj, status, "InvalidSpec", "; ".join(exc.errors), now)
            return
        older = self._older_policy(obj)
        if older is not None:
            message = f"policy {older} acts on this Kafka cluster; at most one policy does"
            self._stalled(obj, status, "Superseded", message, now)
            return
        detectors = (
            spec.detectors.broker_failure,
            spec.detectors.disk_failure,
            spec.detectors.disk_usage,
            spec.detectors.goal_violation,
        )
        needs_dirs = any(d is not None and d.enabled for d in detectors)
        try:
            obs = observe(self.admin, log_dirs=needs_dirs)
        except KafkaAdminError as exc:
            self._stalled(
                obj, status, "ClusterUnreachable", f"cannot check the cluster: {exc}", now
            )
            raise
        workload = None
        if workloads is not None and spec.maintenance.stateful_set:
            workload = workloads.statefulset(
                namespace, spec.maintenance.stateful_set, spec.maintenance.broker_id_offset
            )
        check = _Check(
            obj=obj,
            spec=spec,
            obs=obs,
            now=now,
            window=window_state(spec.parsed_windows(), now),
            annotation=maintenance_annotation(obj),
            workload=workload,
            findings=detect(obs, spec),
        )
        previous = {a.id: a for a in status.anomalies or [] if a.id}
        check.due = self._due_brokers(check, previous)
        for anomaly in previous.values():
            if anomaly.state not in FINAL_STATES:
                for fix_name in anomaly.fixes or []:
                    self._fix(check, fix_name)  # read once: the budget counts every running fix
        anomalies: list[AnomalyStatus] = []
        for anomaly_id in sorted(set(previous) | set(check.findings)):
            old = previous.get(anomaly_id)
            if old is not None and old.state in FINAL_STATES:
                if anomaly_id in check.findings and (
                    old.state == AnomalyState.FIXED or self._expired(old, now)
                ):
                    old = None  # seen again (a failed one: after an hour): a new anomaly
                else:
                    anomalies.append(old)
                    continue
            anomalies.append(self._advance(check, anomaly_id, old))
        share = self._share_budget(check, anomalies)
        self._write(obj, status, check, anomalies, share, generation)

    # -- one anomaly --------------------------------------------------------------------

    def _advance(self, check: _Check, anomaly_id: str, old: AnomalyStatus | None) -> AnomalyStatus:
        finding = check.findings.get(anomaly_id)
        if old is None:
            assert finding is not None
            old = AnomalyStatus(
                id=anomaly_id,
                kind=str(finding.kind),
                since=format_time(check.now),
                fixes=[],
                planned_bytes=0,
            )
            new = self._decide(check, old, finding)
            self._record(check, None, new)
            return new
        new = self._decide(check, old, finding)
        self._record(check, AnomalyState(old.state) if old.state else None, new)
        return new

    def _decide(self, check: _Check, old: AnomalyStatus, finding: Finding | None) -> AnomalyStatus:
        kind = AnomalyKind(str(old.kind))
        current = old.model_copy()
        if finding is not None:
            current.brokers = list(finding.brokers)
            current.log_dirs = list(finding.log_dirs) or None
            current.partitions = len(finding.partitions)
        fixes = [self._fix(check, n) for n in old.fixes or []]
        open_fixes = [f for f in fixes if f is not None and not f.final]
        for fix in open_fixes:
            gone = sorted(_destinations(fix, check.obs) - set(check.obs.live))
            if gone and not fix.cancelled_by_policy:
                self._withdraw(check, fix)
                return _state(
                    current,
                    AnomalyState.FIXING,
                    f"fix {fix.name} targets broker {gone[0]}, gone: cancelling it to plan again",
                )
        for done in (f for f in fixes if f is not None):
            if done.phase is Phase.FAILED:
                text = f"fix {done.name} failed: {done.message}"
                return _state(current, AnomalyState.FAILED, text)
            if done.phase is Phase.CANCELLED and not done.cancelled_by_policy:
                return _state(current, AnomalyState.FAILED, f"fix {done.name} was cancelled")
        if open_fixes and finding is None and all(f.suspended for f in open_fixes):
            for fix in open_fixes:  # not approved, and no longer needed
                self._withdraw(check, fix)
            names = ", ".join(f.name for f in open_fixes)
            return _state(
                current, AnomalyState.FIXED, f"it cleared; suspended fix {names} cancelled"
            )
        if open_fixes:
            fix = open_fixes[-1]
            if fix.suspended:
                return _state(
                    current,
                    AnomalyState.WAITING,
                    f"fix {fix.name} is suspended with its plan"
                    + (f" (predicted {fix.predicted_duration})" if fix.predicted_duration else "")
                    + ": set spec.suspend to false to start it",
                    WaitReason.APPROVAL,
                )
            if any(f.cancelled_by_policy for f in open_fixes):
                return _state(current, AnomalyState.FIXING, "cancelling a fix to plan it again")
            return _state(current, AnomalyState.FIXING, f"fix {fix.name} {fix.phase or 'accepted'}")
        if finding is None:
            cleared = "its fixes completed" if fixes else "it cleared"
            return _state(current, AnomalyState.FIXED, cleared)
        settling = _settling(fixes, kind, check.now)
        if settling is not None:
            return _state(
                current,
                AnomalyState.WAITING,
                f"{finding.detail}; the moved replicas' old files are deleted after "
                f"Kafka's delete delay: next check of the space in {settling}",
                WaitReason.IN_FLIGHT,
            )
        return self._gate(check, current, kind, finding)

    def _gate(
        self, check: _Check, current: AnomalyStatus, kind: AnomalyKind, finding: Finding
    ) -> AnomalyStatus:
        detector = self._detector(check.spec, kind)
        threshold = (
            detector.threshold_of(DEFAULT_THRESHOLDS[kind])
            if detector is not None
            else _report_threshold(check.spec)
        )
        since = parse_time(current.since) or check.now
        left = since + threshold - check.now
        if left > timedelta(0):
            return _state(
                current,
                AnomalyState.WAITING,
                f"{finding.detail}; a fix is due in {format_duration(_whole(left))}",
                WaitReason.THRESHOLD,
            )
        if detector is None:  # report only
            return _state(
                current,
                AnomalyState.DETECTED,
                f"{finding.detail}: no reassignment restores them (reported only)",
            )
        waits = self._maintenance(check, kind, finding)
        if waits is not None:
            return _state(current, AnomalyState.WAITING, waits, WaitReason.MAINTENANCE)
        respect = detector.respect_windows
        if respect is None:
            respect = RESPECTS_WINDOWS[kind]
        if respect and not check.window.open:
            when = check.window.next_open
            text = f"next window opens {format_time(when)}" if when else "no window opens"
            return _state(current, AnomalyState.WAITING, text, WaitReason.WINDOW)
        plan, unplaceable, held = self._plan(check, kind, finding)
        if plan is None:
            if unplaceable:
                return _state(current, AnomalyState.FAILED, f"no plan: {unplaceable}")
            if held:
                brokers = ", ".join(map(str, sorted(held)))
                if kind is AnomalyKind.BROKER_FAILURE:
                    text = (
                        f"{finding.detail}; its partitions also have replicas on absent "
                        f"broker {brokers}, not due yet: they are replaced together"
                    )
                    return _state(current, AnomalyState.WAITING, text, WaitReason.THRESHOLD)
                text = (
                    f"{finding.detail}; its partitions have replicas on absent broker "
                    f"{brokers}: healed first"
                )
                return _state(current, AnomalyState.WAITING, text, WaitReason.IN_FLIGHT)
            if kind is AnomalyKind.GOAL_VIOLATION:
                return _state(
                    current,
                    AnomalyState.DETECTED,
                    f"{finding.detail}; no replica move improves it now (racks, room, "
                    "moves in flight)",
                )
            if not finding.partitions & set(check.obs.in_flight):
                return _state(
                    current,
                    AnomalyState.DETECTED,
                    f"{finding.detail}; no replica move fixes it now (racks, room)",
                )
            return _state(
                current,
                AnomalyState.WAITING,
                f"{finding.detail}; its partitions are being moved by other reassignments",
                WaitReason.IN_FLIGHT,
            )
        suspend = detector.approval is Approval.MANUAL
        fix = self._create_fix(check, current, kind, plan, self._share_with(check, plan), suspend)
        check.created.append(fix)
        if self.metrics is not None:
            self.metrics.balancing_fixes.labels(self.cluster, _KIND_LABELS[kind]).inc()
        current.fixes = [*(current.fixes or []), fix.name]
        current.planned_bytes = (current.planned_bytes or 0) + plan.moved_bytes
        text = f"fix {fix.name}: {len(plan.targets)} partitions, {plan.moved_bytes} bytes" + (
            f"; {unplaceable}" if unplaceable else ""
        )
        if suspend:
            return _state(
                current,
                AnomalyState.WAITING,
                text + ": suspended for approval (set spec.suspend to false)",
                WaitReason.APPROVAL,
            )
        return _state(current, AnomalyState.FIXING, text)

    # -- gates and plans ----------------------------------------------------------------

    @staticmethod
    def _detector(spec: BalancingPolicySpec, kind: AnomalyKind) -> DetectorSpec | None:
        detectors = spec.detectors
        return {
            AnomalyKind.BROKER_FAILURE: detectors.broker_failure,
            AnomalyKind.DISK_FAILURE: detectors.disk_failure,
            AnomalyKind.DISK_USAGE: detectors.disk_usage,
            AnomalyKind.GOAL_VIOLATION: detectors.goal_violation,
        }.get(kind)

    @staticmethod
    def _maintenance(check: _Check, kind: AnomalyKind, finding: Finding) -> str | None:
        """Why healing waits for maintenance now, ``None`` when it need not."""
        if kind is AnomalyKind.BROKER_FAILURE:
            for broker in finding.brokers:
                verdict = absent_broker_verdict(broker, check.workload, check.annotation, check.now)
                if verdict.cause is Cause.MAINTENANCE:
                    return verdict.reason
            return None
        if check.annotation:
            return f"planned maintenance: {check.annotation}"
        if check.workload is not None:
            return rollout_reason(check.workload)
        return None

    def _plan(
        self, check: _Check, kind: AnomalyKind, finding: Finding
    ) -> tuple[FixPlan | None, str, frozenset[int]]:
        """Return the next wave of ``finding``'s fix.

        Returns:
            ``(plan, unplaceable, held)``: the plan (``None``: nothing to move now), what
            cannot be placed (``""``: all can), and the absent brokers not due yet that
            hold some of its partitions back.
        """
        obs = check.obs
        held: set[int] = set()
        busy = set(obs.in_flight) | {tp for f in check.created for tp in f.targets}
        if kind is not AnomalyKind.BROKER_FAILURE:  # their absent replicas are healed first
            on_absent = {
                tp for tp, info in obs.partitions.items() if set(info.replicas) & obs.absent
            }
            busy |= on_absent
            held |= {
                b for tp in finding.partitions & on_absent for b in obs.partitions[tp].replicas
            } & obs.absent
        todo = sorted(tp for tp in finding.partitions if tp not in busy)
        offline = [tp for tp in todo if obs.partitions[tp].leader < 0]
        todo = [tp for tp in todo if obs.partitions[tp].leader >= 0]
        current = obs.replicas()
        for fix in check.created:  # fixes written in this step count as placed
            current.update(fix.targets)
        if kind is AnomalyKind.DISK_USAGE:
            usage = check.spec.detectors.disk_usage
            assert usage is not None
            plan = relieve_usage(
                current,
                obs.live,
                _dir_usage(obs),
                usage.threshold_percent / 100,
                per_broker=usage.scope is UsageScope.BROKER,
                busy=busy | (set(obs.partitions) - set(todo)),
            )
        elif kind is AnomalyKind.GOAL_VIOLATION:
            goal = check.spec.detectors.goal_violation
            assert goal is not None
            leaderless = {tp for tp, info in obs.partitions.items() if info.leader < 0}
            offline = []  # not this detector's to report
            plan = balance_bytes(
                current,
                obs.live,
                obs.sizes,
                1 + goal.tolerance_percent / 100,
                busy=busy | leaderless,
                max_moves=check.spec.budget.max_partitions_per_fix,
                room=_room(obs),
            )
        else:
            if kind is AnomalyKind.DISK_FAILURE:
                todo = self._same_broker_dirs(check, finding, todo)
            # Kafka refuses a target naming a broker that is not live
            # (ReassignPartitionsCommand, AlterPartitionReassignments): every absent
            # replica of a partition is replaced together, once each one's anomaly is due.
            leaving: dict[TopicPartition, tuple[int, ...]] = {}
            for tp in todo:
                gone = tuple(b for b in current[tp] if b in obs.absent)
                mine = tuple(b for b in finding.brokers if b in current[tp])
                if set(gone) <= check.due | set(mine):
                    leaving[tp] = tuple(dict.fromkeys(mine + gone))
                else:
                    held |= set(gone) - check.due - set(mine)
            plan = replace_replicas(
                current,
                obs.live,
                leaving,
                obs.sizes,
                excluded=obs.unreachable,
                room=_room(obs),
            )
        limit = check.spec.budget.max_partitions_per_fix
        chosen = sorted(plan.targets)[:limit]
        problems = [f"{tp}: {why}" for tp, why in sorted(plan.unplaceable.items())]
        problems += [f"{tp}: offline (no leader to copy from)" for tp in offline]
        unplaceable = "; ".join(problems[:5]) + (
            f" (+{len(problems) - 5} more)" if len(problems) > 5 else ""
        )
        if not chosen:
            return None, unplaceable, frozenset(held)
        sizes = obs.sizes
        moved = sum(
            sizes.get(tp, 0)
            * max(
                1 if tp in plan.log_dirs else 0,
                len(set(plan.targets[tp]) - set(current.get(tp, ()))),
            )
            for tp in chosen
        )
        return (
            FixPlan(
                targets={tp: plan.targets[tp] for tp in chosen},
                log_dirs={tp: plan.log_dirs[tp] for tp in chosen if tp in plan.log_dirs},
                moved_bytes=moved,
            ),
            unplaceable,
            frozenset(held),
        )

    def _same_broker_dirs(
        self, check: _Check, finding: Finding, todo: Sequence[TopicPartition]
    ) -> list[TopicPartition]:
        """Ask each broker to place its lost replicas in an online dir of its own.

        AlterReplicaLogDirs (KIP-113) names the dir; a broker that accepts creates the
        replica there and it catches up from the leader. Kafka refuses it for a replica
        of an offline dir (KAFKA_STORAGE_ERROR; our fleet answers REPLICA_NOT_AVAILABLE), so
        on both the replicas go to other brokers; a broker that accepts is used. Only with
        ``Automatic`` approval: nothing is changed without one. Returns the partitions
        still to move to other brokers.
        """
        detector = check.spec.detectors.disk_failure
        if detector is None or detector.approval is not Approval.AUTOMATIC:
            return list(todo)
        moves: dict[tuple[int, str, int], str] = {}
        for broker in finding.brokers:
            online = sorted(
                (d for d in check.obs.log_dirs.get(broker, ()) if d.online),
                key=lambda d: -d.usable_bytes,
            )
            if not online:
                continue
            for tp in todo:
                moves[(broker, tp.topic, tp.partition)] = online[0].path
        if not moves:
            return list(todo)
        try:
            errors = self.admin.alter_replica_log_dirs(moves)
        except KafkaAdminError as exc:
            logger.info("%s: AlterReplicaLogDirs refused: %s", object_key(check.obj), exc)
            return list(todo)
        placed = {TopicPartition(t, p) for (_, t, p), e in errors.items() if e is None}
        if placed:
            self.store.event(
                check.obj,
                NORMAL,
                "ReplicasPlaced",
                f"{len(placed)} replicas of an offline log dir placed in an online dir "
                "of the same broker (AlterReplicaLogDirs)",
            )
        return [tp for tp in todo if tp not in placed]

    def _due_brokers(self, check: _Check, previous: Mapping[str, AnomalyStatus]) -> frozenset[int]:
        """Return the absent brokers whose BrokerFailure anomaly passes its gates now.

        The threshold (from the anomaly's ``since``), maintenance and windows, as
        :meth:`_gate` applies them; a partition with replicas on several absent brokers is
        fixed once all of them are due.
        """
        detector = check.spec.detectors.broker_failure
        if detector is None or not detector.enabled:
            return frozenset()
        threshold = detector.threshold_of(DEFAULT_THRESHOLDS[AnomalyKind.BROKER_FAILURE])
        respect = bool(detector.respect_windows)
        due: set[int] = set()
        for finding in check.findings.values():
            if finding.kind is not AnomalyKind.BROKER_FAILURE:
                continue
            old = previous.get(finding.id)
            since = parse_time(old.since if old and old.state not in FINAL_STATES else None)
            if check.now - (since or check.now) < threshold:
                continue
            if self._maintenance(check, AnomalyKind.BROKER_FAILURE, finding) is not None:
                continue
            if respect and not check.window.open:
                continue
            due.update(finding.brokers)
        return frozenset(due)

    # -- fixes and budget ---------------------------------------------------------------

    def _withdraw(self, check: _Check, fix: FixState) -> None:
        """Cancel ``fix`` (KIP-455 cancellation of what is in flight), marked as the policy's."""
        self.store.patch(
            PARTITION_REASSIGNMENT,
            check.namespace,
            fix.name,
            {"metadata": {"annotations": {REPLAN_ANNOTATION: "true"}}, "spec": {"cancel": True}},
        )

    def _create_fix(
        self,
        check: _Check,
        current: AnomalyStatus,
        kind: AnomalyKind,
        plan: FixPlan,
        share: BudgetShare,
        suspend: bool,
    ) -> FixState:
        """Write the next fix of ``current``; return it as written (or as found).

        Fixes are numbered from 1 per anomaly id. A name already taken by a finished fix
        (of an earlier anomaly with the same id) is skipped; one taken by an unfinished
        fix of this anomaly is that fix, written by a step whose status write was lost
        (the operator restarted in between), and is taken over rather than written twice.
        """
        number = len(current.fixes or []) + 1
        while True:
            body = fix_object(
                check.obj,
                str(current.id),
                _KIND_LABELS[kind],
                number,
                plan,
                share,
                suspend,
                check.spec.preferred_leader_election,
            )
            name = str(body["metadata"]["name"])
            created = self.store.create(PARTITION_REASSIGNMENT, check.namespace, body)
            if created is not None:
                return fix_state(created)
            existing = self.store.get(PARTITION_REASSIGNMENT, check.namespace, name)
            if existing is not None:
                found = fix_state(existing)
                annotations = existing["metadata"].get("annotations") or {}
                if not found.final and annotations.get(ANOMALY_ID_ANNOTATION) == current.id:
                    return found
            number += 1

    def _fix(self, check: _Check, name: str) -> FixState | None:
        if name not in check.fixes:
            obj = self.store.get(PARTITION_REASSIGNMENT, check.namespace, name)
            if obj is None:
                return None
            check.fixes[name] = fix_state(obj)
        return check.fixes[name]

    def _running(self, check: _Check, anomalies: Sequence[AnomalyStatus]) -> list[FixState]:
        names = {n for a in anomalies if a.state not in FINAL_STATES for n in a.fixes or []}
        known = {f.name: f for f in check.created}
        out = []
        for name in sorted(names):
            fix = known.get(name) or self._fix(check, name)
            if fix is not None and fix.running:
                out.append(fix)
        return out

    def _share_with(self, check: _Check, plan: FixPlan) -> BudgetShare:
        """Return the budget share a new fix gets, counted with the fixes running now."""
        running = [f for f in check.fixes.values() if f.running] + list(check.created)
        receivers = receiving_brokers(
            [*(f.targets for f in running), plan.targets], check.obs.replicas(), _adding(check.obs)
        )
        return share_budget(check.spec.budget, receivers, len(running) + 1)

    def _share_budget(self, check: _Check, anomalies: Sequence[AnomalyStatus]) -> BudgetShare:
        running = self._running(check, anomalies)
        receivers = receiving_brokers(
            [f.targets for f in running], check.obs.replicas(), _adding(check.obs)
        )
        share = share_budget(check.spec.budget, receivers, len(running))
        for fix in running:
            patch = budget_patch(fix, share)
            if patch is not None:
                self.store.patch(PARTITION_REASSIGNMENT, check.namespace, fix.name, patch)
        return share

    # -- status -------------------------------------------------------------------------

    def _record(self, check: _Check, previous: AnomalyState | None, new: AnomalyStatus) -> None:
        state = AnomalyState(str(new.state))
        check_transition(previous, state)
        if previous is not state:
            new.last_transition_time = format_time(check.now)
            type_ = WARNING if state in (AnomalyState.FAILED, AnomalyState.DETECTED) else NORMAL
            reason = _event_reason(state)
            self.store.event(check.obj, type_, reason, f"{new.id}: {new.message or ''}")

    def _write(
        self,
        obj: Object,
        status: BalancingPolicyStatus,
        check: _Check,
        anomalies: list[AnomalyStatus],
        share: BudgetShare,
        generation: int,
    ) -> None:
        open_ = [a for a in anomalies if a.state not in FINAL_STATES]
        finished = sorted(
            (a for a in anomalies if a.state in FINAL_STATES and not self._expired(a, check.now)),
            key=lambda a: a.last_transition_time or "",
        )[-MAX_FINISHED:]
        kept = sorted([*open_, *finished], key=lambda a: str(a.id))
        running = len(self._running(check, kept))
        waits = _maintenance_reason(check)
        message = (
            f"{len(check.obs.live)} brokers live"
            + (f", {sorted(check.obs.absent)} absent" if check.obs.absent else "")
            + (f", {sorted(check.obs.unreachable)} not answering" if check.obs.unreachable else "")
            + f"; {len(open_)} anomalies open, {running} fixes running"
        )
        if check.spec.maintenance.stateful_set and check.workload is None:
            message += (
                f"; StatefulSet {check.spec.maintenance.stateful_set} not found: only the "
                "threshold and the annotation tell maintenance"
            )
        window = check.window
        new = status.model_copy(deep=True)
        new.observed_generation = generation
        new.last_check_time = format_time(check.now)
        new.message = message
        new.open_anomalies = len(open_)
        new.running_fixes = running
        new.maintenance = waits or ""
        new.brokers = PolicyBrokers(live=sorted(check.obs.live), absent=sorted(check.obs.absent))
        new.window = WindowStatus(
            state="Always" if not check.spec.windows else ("Open" if window.open else "Closed"),
            closes_at=format_time(window.closes_at) if window.closes_at else None,
            next_open=format_time(window.next_open) if window.next_open else None,
        )
        new.budget = BudgetStatus(
            replication_rate=check.spec.budget.replication_rate,
            fix_rate=share.fix_rate,
            receiving_brokers=share.receiving_brokers,
        )
        new.anomalies = kept
        desired = quota_conditions(ConditionType.READY, "Checked", message)
        new_dict = new.to_status()
        new_dict["conditions"] = stamp_conditions(
            (obj.get("status") or {}).get("conditions") or [], desired, generation, check.now
        )
        self.store.patch_status(
            BALANCING_POLICY, check.namespace, str(obj["metadata"]["name"]), new_dict
        )
        if self.metrics is not None:
            policy = object_key(obj)
            for kind in AnomalyKind:
                for state in AnomalyState:
                    count = sum(1 for a in kept if a.kind == kind and a.state == state)
                    self.metrics.balancing_anomalies.labels(
                        self.cluster, policy, kind.value, state.value
                    ).set(count)

    def _stalled(
        self, obj: Object, status: BalancingPolicyStatus, reason: str, message: str, now: datetime
    ) -> None:
        generation = int(obj["metadata"].get("generation") or 1)
        desired: list[Condition] = quota_conditions(ConditionType.STALLED, reason, message)
        conditions = stamp_conditions(
            (obj.get("status") or {}).get("conditions") or [], desired, generation, now
        )
        if status.message == message and status.observed_generation == generation:
            return
        meta = obj["metadata"]
        self.store.patch_status(
            BALANCING_POLICY,
            str(meta["namespace"]),
            str(meta["name"]),
            {"observedGeneration": generation, "message": message, "conditions": conditions},
        )
        self.store.event(obj, WARNING, reason, message)

    def _older_policy(self, obj: Object) -> str | None:
        """Return the policy acting on the same Kafka cluster before ``obj`` (oldest wins)."""
        mine = cluster_key_of(obj)

        def age(o: Object) -> tuple[str, str]:
            meta = o["metadata"]
            return (str(meta.get("creationTimestamp") or ""), object_key(o))

        same = [
            o
            for o in self.store.list(BALANCING_POLICY)
            if cluster_key_of(o) == mine and not o["metadata"].get("deletionTimestamp")
        ]
        first = min(same, key=age, default=None)
        if first is None or object_key(first) == object_key(obj):
            return None
        return object_key(first)

    @staticmethod
    def _expired(anomaly: AnomalyStatus, now: datetime) -> bool:
        when = parse_time(anomaly.last_transition_time)
        return when is not None and now - when > FINISHED_RETENTION


def _state(
    current: AnomalyStatus,
    state: AnomalyState,
    message: str,
    waiting_for: WaitReason | None = None,
) -> AnomalyStatus:
    new = current.model_copy()
    new.state = state.value
    new.message = message
    new.waiting_for = waiting_for.value if waiting_for else None
    return new


def _destinations(fix: FixState, obs: ClusterObservation) -> frozenset[int]:
    """Return the brokers ``fix`` adds a replica to.

    A replica it keeps on a broker that is gone is not a destination: another anomaly's
    fix replaces it.
    """
    return receiving_brokers([fix.targets], obs.replicas(), _adding(obs))


def _adding(obs: ClusterObservation) -> dict[TopicPartition, tuple[int, ...]]:
    """Partition in flight -> its adding replicas (ListPartitionReassignments)."""
    return {tp: r.adding for tp, r in obs.in_flight.items()}


DISK_SETTLE = timedelta(seconds=90)
"""After a DiskUsage fix completes, how long before the next wave is planned: Kafka deletes
a moved replica's files only after ``file.delete.delay.ms`` (60 s by default), and until
then its dir's used bytes still count them (planning again at once moved far more than
the excess)."""


def _settling(fixes: Sequence[FixState | None], kind: AnomalyKind, now: datetime) -> str | None:
    """Return how long a DiskUsage anomaly waits for its last fix's freed space, if it does."""
    if kind is not AnomalyKind.DISK_USAGE:
        return None
    completed = [f.completion_time for f in fixes if f is not None and f.completion_time]
    if not completed:
        return None
    left = max(completed) + DISK_SETTLE - now
    return format_duration(_whole(left)) if left > timedelta(0) else None


def _event_reason(state: AnomalyState) -> str:
    """Return the reason of the Event recorded when an anomaly enters ``state``."""
    if state is AnomalyState.DETECTED:
        return "AnomalyDetected"
    if state is AnomalyState.WAITING:
        return "AnomalyWaiting"
    if state is AnomalyState.FIXING:
        return "AnomalyFixing"
    if state is AnomalyState.FIXED:
        return "AnomalyFixed"
    return "AnomalyFailed"


def _maintenance_reason(check: _Check) -> str | None:
    if check.annotation:
        return f"planned maintenance: {check.annotation}"
    if check.workload is not None:
        reason = rollout_reason(check.workload)
        if reason:
            return reason
        for broker in sorted(check.obs.absent):
            verdict = absent_broker_verdict(broker, check.workload, None, check.now)
            if verdict.cause is Cause.MAINTENANCE:
                return verdict.reason
    return None


def _report_threshold(spec: BalancingPolicySpec) -> timedelta:
    urp = spec.detectors.under_replicated_partitions
    default = DEFAULT_THRESHOLDS[AnomalyKind.UNDER_REPLICATED]
    return urp.threshold_of(default) if urp is not None else default


def _dir_usage(obs: ClusterObservation) -> list[LogDirUsage]:
    replicas: dict[tuple[int, str], dict[TopicPartition, int]] = {}
    for (broker, topic, partition), info in obs.replica_dirs.items():
        replicas.setdefault((broker, info.log_dir), {})[TopicPartition(topic, partition)] = (
            info.size_bytes
        )
    return [
        LogDirUsage(
            broker=broker,
            path=d.path,
            total_bytes=d.total_bytes,
            usable_bytes=d.usable_bytes,
            replicas=replicas.get((broker, d.path), {}),
        )
        for broker, dirs in sorted(obs.log_dirs.items())
        for d in dirs
        if d.online and d.total_bytes > 0
    ]


FREE_RESERVE = 0.05
"""Share of each log dir's file system a fix never fills (a failure fix places replicas only
where they leave at least this much free)."""


def _room(obs: ClusterObservation) -> dict[int, int] | None:
    """Return the bytes each live broker may still receive: free space above :data:`FREE_RESERVE`.

    A broker that did not answer DescribeLogDirs is left out (it receives nothing).
    ``None`` (no limit) when no broker reports its volumes (DescribeLogDirs before v4,
    KIP-827).
    """
    room: dict[int, int] = {}
    for broker in obs.live:
        dirs = [d for d in obs.log_dirs.get(broker, ()) if d.online and d.total_bytes > 0]
        if dirs:
            room[broker] = sum(
                max(0, d.usable_bytes - int(FREE_RESERVE * d.total_bytes)) for d in dirs
            )
    return room or None


def _whole(delta: timedelta) -> timedelta:
    return timedelta(seconds=max(1, int(delta.total_seconds() + 0.999)))
