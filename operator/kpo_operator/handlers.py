"""kopf registrations: one thin handler per event, all logic in the reconcilers.

======================== =============================================================
handler                  does
======================== =============================================================
startup                  read :class:`~kpo_operator.settings.OperatorSettings`, build the
                         :class:`~kpo_operator.runtime.OperatorRuntime`, set kopf's
                         storage keys under ``kpo.dev`` and the finalizer name, serve
                         ``/metrics`` on ``KPO_METRICS_PORT`` (:mod:`kpo_operator.metrics`)
reassignment create/     hand the object to the tracker, which takes a reconcile step
update/resume            (validate, throttle, submit...) at once; also on operator start
                         for every existing object
reassignment timer       from the first phase until Completed/Cancelled: hand kopf's live
                         body to the tracker, which steps every active object every
                         ``poll_interval_s`` (progress, completion)
reassignment delete      cancel what is in flight, remove throttles; the finalizer holds
                         the object until that is done
quota create/update/     sync the throttles now and report
resume
quota timer              every ``quota_interval_s``: drift repair and status
quota delete             sync without the quota (removes what only it set)
cluster create/update/   connect (or reconnect) a KafkaCluster and write its status
resume
cluster timer            every ``cluster_interval_s``: re-read its Secrets (a rotated
                         one reconnects) and refresh the status
cluster delete           wait while objects name it, then close its connections
policy create/update/    check the cluster once: detectors, gates, fixes, budget, status
resume
policy timer             every ``policy_interval_s``: the same check
cleanup                  close the Kafka connections
======================== =============================================================

PartitionReassignment, TopicReplicaQuota and BalancingPolicy handlers act on the cluster named in
``spec.clusterRef`` (:meth:`~kpo_operator.runtime.OperatorRuntime.run_on`), the default
connection without one.
"""

from __future__ import annotations

import logging
from typing import Any

import kopf

from kpo_kafka.states import FINAL_PHASES
from kpo_operator.cluster_status import ClusterInUse
from kpo_operator.diffbase import SpecDigestDiffBaseStorage
from kpo_operator.metrics import OperatorMetrics
from kpo_operator.resources import (
    BALANCING_POLICY,
    GROUP,
    KAFKA_CLUSTER,
    PARTITION_REASSIGNMENT,
    TOPIC_REPLICA_QUOTA,
    VERSION,
)
from kpo_operator.runtime import MAX_WORKERS, OperatorRuntime, RetryLater
from kpo_operator.settings import OperatorSettings

logger = logging.getLogger("kpo_operator")

READY_MESSAGE = "kpo operator started"
"""Logged once the operator is configured (the local process runner waits for it)."""

FINALIZER = "kpo.dev/finalizer"

_SETTINGS = OperatorSettings.from_env()
_PR = (GROUP, VERSION, PARTITION_REASSIGNMENT.plural)
_TRQ = (GROUP, VERSION, TOPIC_REPLICA_QUOTA.plural)
_KC = (GROUP, VERSION, KAFKA_CLUSTER.plural)
_BP = (GROUP, VERSION, BALANCING_POLICY.plural)

TIMER_EXIT_POLL_S = 1.0
"""How often (s) kopf checks whether a deleted object's running timer has exited."""

HANDOVER_INTERVAL_S = 30.0
"""Seconds between two hand-overs of an active PartitionReassignment by its kopf timer.

kopf runs a timer as soon as its ``when`` filter holds (the object's first phase), so the
first hand-over of the live body comes with the first phase; later ones only re-track an
object the tracker dropped. At the poll interval, kopf's own work per timer call (200
objects at 2 s: 100 calls a second) cost more than the tracker's polls."""


def _runtime(memo: Any) -> OperatorRuntime:
    runtime: OperatorRuntime = memo.runtime
    return runtime


def _ref(spec: Any) -> str | None:
    ref = (spec or {}).get("clusterRef")
    return str(ref) if ref else None


def _active(*, status: Any, **_: Any) -> bool:
    """Whether the poll timer runs: from the first phase a step wrote until a final phase.

    A new object's first step is the one its creation handler asks the tracker for. kopf
    spawns timers before it calls that handler: a timer running from the start would hand
    the object over first, and the creation handler's log line would no longer be the
    first of the object's handlers.
    """
    phase = (status or {}).get("phase")
    return bool(phase) and phase not in FINAL_PHASES


@kopf.on.startup()
def startup(*, settings: kopf.OperatorSettings, memo: Any, **_: Any) -> None:
    """Configure kopf and create the runtime (Kafka client, API store, reconcilers)."""
    settings.persistence.finalizer = FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
    # The last handled spec as a digest, not a copy of the spec (diffbase.py).
    settings.persistence.diffbase_storage = SpecDigestDiffBaseStorage(prefix=GROUP)
    settings.posting.level = logging.WARNING  # the reconcilers record their own Events
    settings.execution.max_workers = MAX_WORKERS
    # Watching exact namespaces needs no namespace list/watch, which a namespaced install's
    # Roles do not grant; with scanning on, kopf retries that list for about a minute first.
    settings.scanning.disabled = not _SETTINGS.clusterwide
    # A deleted object keeps its finalizer until its timers have exited. A timer caught in
    # the middle of a (synchronous) reconcile step exits when that step ends, but kopf only
    # looks again after ``cancellation_polling`` (60 s by default): a `kubectl delete` of a
    # TopicReplicaQuota polled at that moment then hung for a minute after its delete
    # handler had finished.
    settings.background.cancellation_polling = TIMER_EXIT_POLL_S
    metrics = None
    if _SETTINGS.metrics_port is not None:
        metrics = OperatorMetrics()
        metrics.serve(_SETTINGS.metrics_port)
    memo.runtime = OperatorRuntime(_SETTINGS, metrics=metrics)
    logger.info(
        "%s: Kafka %s (%s), namespaces %s",
        READY_MESSAGE,
        ",".join(_SETTINGS.bootstrap_servers),
        _SETTINGS.kafka_security.describe(),
        ",".join(_SETTINGS.namespaces) or "<all>",
    )


@kopf.on.cleanup()
def cleanup(*, memo: Any, **_: Any) -> None:
    """Close the Kafka connections."""
    runtime = getattr(memo, "runtime", None)
    if runtime is not None:
        runtime.close()


@kopf.on.resume(*_PR)
@kopf.on.create(*_PR)
@kopf.on.update(*_PR, field="spec")
async def reassignment_changed(
    *, memo: Any, namespace: str | None, name: str, spec: Any, body: Any, **_: Any
) -> None:
    """Have a PartitionReassignment stepped at once when it appears or its spec changes.

    The step is the tracker's (:class:`~kpo_operator.reassignment_tracker.ReassignmentTracker`),
    ahead of the polls, in its own threads: a burst of new objects is accepted together
    (their reads, throttle syncs and submissions shared), not one by one in kopf's
    handler threads. A step that fails is taken again by the tracker.
    """
    _runtime(memo).track(namespace or "", name, _ref(spec), body, urgent=True)


@kopf.timer(*_PR, interval=max(_SETTINGS.poll_interval_s, HANDOVER_INTERVAL_S), when=_active)
async def reassignment_poll(
    *, memo: Any, namespace: str | None, name: str, spec: Any, body: Any, **_: Any
) -> None:
    """Keep an active PartitionReassignment tracked: progress, completion, resumption.

    The tracker polls every active object once per ``poll_interval_s`` in one tick
    (their cluster reads, throttle syncs and submissions shared); this timer hands it
    kopf's live body of the object (replaced by kopf as watch events arrive), which
    stands in for a GET when it is the latest version the operator has read or written
    (:meth:`~kpo_operator.store.ObjectStore.get`): at the first phase, then every
    :data:`HANDOVER_INTERVAL_S`. It does no I/O: kopf runs it in its event loop, not in a
    handler thread.
    """
    _runtime(memo).track(namespace or "", name, _ref(spec), body)


@kopf.on.delete(*_PR)
def reassignment_deleted(
    *, memo: Any, namespace: str | None, name: str, spec: Any, **_: Any
) -> None:
    """Cancel what is in flight and remove the throttles before the object goes.

    An object naming a KafkaCluster that no longer exists has nothing left to undo.
    """
    runtime, ns = _runtime(memo), namespace or ""
    try:
        done = runtime.run_on(
            PARTITION_REASSIGNMENT,
            ns,
            name,
            _ref(spec),
            lambda cluster: cluster.reassignments.finalize(ns, name),
            when_missing=lambda: True,
        )
    except RetryLater as exc:
        raise kopf.TemporaryError(str(exc), delay=exc.delay_s) from exc
    if not done:
        raise kopf.TemporaryError(
            "cancelling in-flight partitions", delay=_SETTINGS.poll_interval_s
        )
    runtime.forget(PARTITION_REASSIGNMENT.plural, ns, name)


def _step_quota(memo: Any, namespace: str, name: str, spec: Any, max_age_s: float | None) -> None:
    runtime = _runtime(memo)
    try:
        runtime.run_on(
            TOPIC_REPLICA_QUOTA,
            namespace,
            name,
            _ref(spec),
            lambda cluster: cluster.quotas.reconcile(namespace, name, max_age_s),
        )
    except RetryLater as exc:
        raise kopf.TemporaryError(str(exc), delay=exc.delay_s) from exc


@kopf.on.resume(*_TRQ)
@kopf.on.create(*_TRQ)
@kopf.on.update(*_TRQ, field="spec")
def quota_changed(*, memo: Any, namespace: str | None, name: str, spec: Any, **_: Any) -> None:
    """Apply a TopicReplicaQuota as soon as it appears or changes."""
    _step_quota(memo, namespace or "", name, spec, None)


@kopf.timer(*_TRQ, interval=_SETTINGS.quota_interval_s)
def quota_poll(*, memo: Any, namespace: str | None, name: str, spec: Any, **_: Any) -> None:
    """Repair drift and refresh the status (one sync per interval per cluster)."""
    _step_quota(memo, namespace or "", name, spec, _SETTINGS.quota_interval_s * 0.9)


@kopf.on.delete(*_TRQ)
def quota_deleted(*, memo: Any, namespace: str | None, name: str, spec: Any, **_: Any) -> None:
    """Remove what only this quota set before the object goes.

    A quota naming a KafkaCluster that no longer exists has nothing left to undo.
    """
    runtime, ns = _runtime(memo), namespace or ""
    try:
        done = runtime.run_on(
            TOPIC_REPLICA_QUOTA,
            ns,
            name,
            _ref(spec),
            lambda cluster: cluster.quotas.finalize(ns, name),
            when_missing=lambda: True,
        )
    except RetryLater as exc:
        raise kopf.TemporaryError(str(exc), delay=exc.delay_s) from exc
    if not done:
        raise kopf.TemporaryError("removing throttles failed", delay=_SETTINGS.quota_interval_s)
    runtime.forget(TOPIC_REPLICA_QUOTA.plural, ns, name)


def _refresh_cluster(memo: Any, namespace: str, name: str) -> None:
    runtime = _runtime(memo)
    try:
        runtime.run(
            KAFKA_CLUSTER.plural,
            namespace,
            name,
            lambda: runtime.kafka_clusters.reconcile(namespace, name),
        )
    except RetryLater as exc:
        raise kopf.TemporaryError(str(exc), delay=exc.delay_s) from exc


@kopf.on.resume(*_KC)
@kopf.on.create(*_KC)
@kopf.on.update(*_KC, field="spec")
def cluster_changed(*, memo: Any, namespace: str | None, name: str, **_: Any) -> None:
    """Connect (or reconnect) a KafkaCluster and report what the cluster answers."""
    _refresh_cluster(memo, namespace or "", name)


@kopf.timer(*_KC, interval=_SETTINGS.cluster_interval_s)
def cluster_poll(*, memo: Any, namespace: str | None, name: str, **_: Any) -> None:
    """Re-read the Secrets (reconnect when rotated) and refresh the status."""
    _refresh_cluster(memo, namespace or "", name)


@kopf.on.delete(*_KC)
def cluster_deleted(*, memo: Any, namespace: str | None, name: str, **_: Any) -> None:
    """Let a KafkaCluster go once no quota or unfinished reassignment names it."""
    runtime, ns = _runtime(memo), namespace or ""
    try:
        runtime.run(
            KAFKA_CLUSTER.plural, ns, name, lambda: runtime.kafka_clusters.finalize(ns, name)
        )
    except ClusterInUse as exc:
        raise kopf.TemporaryError(str(exc), delay=_SETTINGS.poll_interval_s * 5) from exc
    except RetryLater as exc:
        raise kopf.TemporaryError(str(exc), delay=exc.delay_s) from exc
    runtime.forget(KAFKA_CLUSTER.plural, ns, name)


def _check_policy(memo: Any, namespace: str, name: str, spec: Any) -> None:
    runtime = _runtime(memo)
    try:
        runtime.run_on(
            BALANCING_POLICY,
            namespace,
            name,
            _ref(spec),
            lambda cluster: cluster.policies.reconcile(namespace, name, runtime.workloads),
        )
    except RetryLater as exc:
        raise kopf.TemporaryError(str(exc), delay=exc.delay_s) from exc


@kopf.on.resume(*_BP)
@kopf.on.create(*_BP)
@kopf.on.update(*_BP, field="spec")
def policy_changed(*, memo: Any, namespace: str | None, name: str, spec: Any, **_: Any) -> None:
    """Check the cluster as soon as a BalancingPolicy appears or its spec changes."""
    _check_policy(memo, namespace or "", name, spec)


@kopf.timer(*_BP, interval=_SETTINGS.policy_interval_s, sharp=True)
def policy_poll(*, memo: Any, namespace: str | None, name: str, spec: Any, **_: Any) -> None:
    """Check the cluster every ``policy_interval_s``: detect, gate, fix, share the budget."""
    _check_policy(memo, namespace or "", name, spec)


@kopf.on.delete(*_BP, optional=True)
def policy_deleted(*, memo: Any, namespace: str | None, name: str, **_: Any) -> None:
    """Forget a deleted policy (its fixes go with it: they are owned by it)."""
    _runtime(memo).forget(BALANCING_POLICY.plural, namespace or "", name)
