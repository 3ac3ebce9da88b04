"""A broker gone on purpose, or a broker that failed (pure logic).

When a broker leaves the Kafka cluster the BalancingPolicy must not move its replicas
away while it is only restarting: a StatefulSet rolling update, a node drain, a pod
deleted by hand all bring it back on its own, with its data. It should heal (after the
policy's threshold) when the broker failed: its pod cannot start, or its node is gone.
:func:`absent_broker_verdict` tells the two apart from what Kubernetes says of the
broker's StatefulSet, pod and node (read by :mod:`kpo_operator.kube_workloads`); the
first rule that applies decides:

==  ================================================  ===========  ==========================
#   When                                              Cause        Reason (example)
==  ================================================  ===========  ==========================
1   the policy has the ``kpo.dev/maintenance``        Maintenance  ``planned maintenance:
    annotation (any non-blank value)                               kernel upgrade``
2   no workload given, or the broker id is not one    Unknown      ``broker 7 is not one of
    of the StatefulSet's ordinals (plus the offset)                StatefulSet kafka/b``
3   the pod's node is known to be gone or not Ready;  Failure      ``node n3 gone (pod b-2)``
    or, the node not read, the pod was deleted by
    the taint manager or the pod garbage collector
4   a container of the pod cannot start               Failure      ``pod b-2 crash-looping
    (CrashLoopBackOff, ImagePullBackOff, ...)                      (CrashLoopBackOff)``
5   the pod is terminating: evicted; on a cordoned    Maintenance  ``pod b-2 evicted
    node; otherwise                                                (drain)``
6   no pod exists for the broker's ordinal            Maintenance  ``pod b-2 being
                                                                   recreated by ...``
7   the StatefulSet is rolling out                    Maintenance  ``StatefulSet kafka/b
                                                                   rolling out (...)``
8   the pod was created less than ``start_grace``     Maintenance  ``pod b-2 recreated 40s
    ago and is not Ready                                           ago, starting``
9   anything else                                     Failure      ``pod b-2 Pending, not
                                                                   ready``
==  ================================================  ===========  ==========================

A lost node is a failure even in the middle of a rollout (rule 3 before rule 7), and so is
a pod that cannot start (rule 4): a rollout of a broken image or configuration is not a
maintenance to wait for. Maintenance makes healing wait; a failure still waits for the
policy's threshold; Unknown leaves the threshold alone to decide.

Sources, the Kubernetes API reference and documentation:

* StatefulSet status (https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/stateful-set-v1/):
  ``observedGeneration`` lags ``metadata.generation`` until the controller has seen a spec
  change; ``currentRevision``/``updateRevision`` name the ControllerRevisions of the old
  and new pod template and are equal once a rolling update is done; ``updatedReplicas``
  counts the pods at ``updateRevision`` (their ``controller-revision-hash`` label). The
  controller recreates a deleted pod under the same name and ordinal
  (https://kubernetes.io/docs/concepts/workloads/controllers/statefulset/#rolling-updates).
  A rollout held by ``rollingUpdate.partition`` or left to the ``OnDelete`` strategy counts
  as rolling out here until every pod is at the update revision.
* The Eviction API (https://kubernetes.io/docs/concepts/scheduling-eviction/api-eviction/),
  which ``kubectl drain`` uses after cordoning the node (``spec.unschedulable``), and the
  ``DisruptionTarget`` pod condition (Kubernetes 1.26 and later,
  https://kubernetes.io/docs/concepts/workloads/pods/disruptions/#pod-disruption-conditions)
  whose reason says who is deleting the pod: ``EvictionByEvictionAPI`` (an eviction),
  ``DeletionByTaintManager`` (a ``NoExecute`` taint, such as those the node lifecycle
  controller puts on a node that stopped reporting), ``DeletionByPodGC`` (the pod's node
  no longer exists), ``PreemptionByScheduler``, ``TerminationByKubelet``. A pod evicted by
  the kubelet under node pressure has ``status.reason`` ``Evicted``.
* Container waiting reasons (https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/#container-state-waiting)
  and the node ``Ready`` condition (https://kubernetes.io/docs/reference/node/node-status/#condition).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum

#: The BalancingPolicy annotation announcing planned maintenance: any non-blank value (the
#: reason, shown in the status) makes healing wait until it is removed.
MAINTENANCE_ANNOTATION = "kpo.dev/maintenance"

#: Container waiting reasons of a pod that cannot start by itself.
CANNOT_START_REASONS = frozenset(
    {
        "CrashLoopBackOff",
        "ImagePullBackOff",
        "ErrImagePull",
        "InvalidImageName",
        "CreateContainerConfigError",
    }
)

#: ``DisruptionTarget`` reasons of an eviction through the Eviction API (a drain).
EVICTION_BY_API = "EvictionByEvictionAPI"
#: ``DisruptionTarget`` reasons that, when the node could not be read, mean a lost node:
#: the taint manager deletes pods of a node tainted ``NoExecute`` (not-ready, unreachable),
#: the pod garbage collector those bound to a node that no longer exists.
NODE_LOST_DISRUPTIONS = frozenset({"DeletionByTaintManager", "DeletionByPodGC"})

DEFAULT_START_GRACE = timedelta(minutes=5)


@dataclass(frozen=True)
class BrokerPod:
    """What Kubernetes says of one broker's pod and its node.

    Attributes:
        broker_id: The broker id (pod ordinal plus the StatefulSet's broker id offset).
        name: The pod's name, ``<statefulset>-<ordinal>``.
        phase: ``status.phase`` (``Pending``, ``Running``, ``Succeeded``, ``Failed``,
            ``Unknown``), ``None`` when not reported yet.
        ready: The pod's ``Ready`` condition is ``True``.
        terminating: ``metadata.deletionTimestamp`` is set (the pod is being deleted).
        evicted: The pod was evicted: a ``DisruptionTarget`` condition with reason
            ``EvictionByEvictionAPI``, or ``status.reason`` ``Evicted`` (the kubelet).
        created: ``metadata.creationTimestamp`` (aware), ``None`` when unknown.
        revision: The ``controller-revision-hash`` label (the StatefulSet revision the pod
            was created from).
        crash_looping: A container (or init container) waits with a reason of
            :data:`CANNOT_START_REASONS`: the pod cannot start by itself.
        waiting_reason: The reason a container waits for (a cannot-start reason first),
            ``None`` when none waits.
        node_name: ``spec.nodeName``, ``None`` while unscheduled.
        node_exists: The node exists; ``None`` when not known (not read, or not allowed).
        node_ready: The node's ``Ready`` condition is ``True`` (``False`` for ``False`` and
            ``Unknown``); ``None`` when not known.
        node_unschedulable: The node is cordoned (``spec.unschedulable``; ``kubectl drain``
            cordons before it evicts); ``False`` when not known.
        disruption_reason: The reason of the pod's ``DisruptionTarget`` condition when it
            is ``True`` (who deletes the pod), else ``None``.
        evicted_by_kubelet: ``status.reason`` is ``Evicted`` (node-pressure eviction).
    """

    broker_id: int
    name: str
    phase: str | None
    ready: bool
    terminating: bool
    evicted: bool
    created: datetime | None
    revision: str | None
    crash_looping: bool
    waiting_reason: str | None
    node_name: str | None
    node_exists: bool | None
    node_ready: bool | None
    node_unschedulable: bool
    disruption_reason: str | None = None
    evicted_by_kubelet: bool = False


@dataclass(frozen=True)
class StatefulSetState:
    """A broker StatefulSet: its rollout status and the pods of its ordinals.

    Attributes:
        name: The StatefulSet's name.
        namespace: Its namespace.
        replicas: ``spec.replicas`` (desired pods).
        ready_replicas: ``status.readyReplicas``.
        updated_replicas: ``status.updatedReplicas`` (pods at ``update_revision``).
        current_revision: ``status.currentRevision``.
        update_revision: ``status.updateRevision``.
        generation: ``metadata.generation``.
        observed_generation: ``status.observedGeneration``.
        pods: Broker id -> pod; a missing key means no pod exists for that ordinal.
        broker_id_offset: Broker id = pod ordinal + this (0 for the chart's brokers).
        first_ordinal: The first pod ordinal, ``spec.ordinals.start`` (0 by default).
    """

    name: str
    namespace: str
    replicas: int
    ready_replicas: int
    updated_replicas: int
    current_revision: str | None
    update_revision: str | None
    generation: int
    observed_generation: int
    pods: Mapping[int, BrokerPod] = field(default_factory=dict)
    broker_id_offset: int = 0
    first_ordinal: int = 0

    @property
    def key(self) -> str:
        """``namespace/name``."""
        return f"{self.namespace}/{self.name}"

    @property
    def broker_ids(self) -> range:
        """The broker ids of the StatefulSet's ordinals."""
        first = self.first_ordinal + self.broker_id_offset
        return range(first, first + max(self.replicas, 0))

    @property
    def rolling(self) -> bool:
        """A rollout is under way or pending.

        The controller has not observed the latest spec (``observed_generation <
        generation``), the pods' revisions differ (``update_revision !=
        current_revision``), or not every pod is at the update revision
        (``updated_replicas < replicas``).
        """
        return (
            self.observed_generation < self.generation
            or self.update_revision != self.current_revision
            or self.updated_replicas < self.replicas
        )


class Cause(StrEnum):
    """Why a broker is absent, as far as Kubernetes tells."""

    MAINTENANCE = "Maintenance"
    """Gone on purpose and coming back: healing waits."""
    FAILURE = "Failure"
    """Failed: counts as failed (the policy's threshold still applies)."""
    UNKNOWN = "Unknown"
    """Not a broker of the StatefulSet, or no workload known: the threshold alone decides."""


@dataclass(frozen=True)
class Verdict:
    """The cause of a broker's absence and a sentence for the policy's status.

    Attributes:
        cause: Maintenance, Failure or Unknown.
        reason: Human text, e.g. ``"pod kpo-broker-2 evicted (drain)"``.
    """

    cause: Cause
    reason: str


def maintenance_annotation(policy: Mapping[str, object]) -> str | None:
    """Return the non-blank value of :data:`MAINTENANCE_ANNOTATION` on an object, or ``None``.

    Args:
        policy: A BalancingPolicy as the API returns it (``metadata.annotations``).
    """
    metadata = policy.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, Mapping) else None
    value = annotations.get(MAINTENANCE_ANNOTATION) if isinstance(annotations, Mapping) else None
    return value.strip() or None if isinstance(value, str) else None


def rollout_reason(workload: StatefulSetState | None) -> str | None:
    """Why the StatefulSet is rolling out, for the status; ``None`` when it is not.

    E.g. ``"StatefulSet kafka/kpo-broker rolling out (updated 2/4 to revision
    kpo-broker-6d9f)"`` or ``"... (generation 7 not yet observed by the controller)"``.
    """
    if workload is None or not workload.rolling:
        return None
    if workload.observed_generation < workload.generation:
        detail = f"generation {workload.generation} not yet observed by the controller"
    else:
        detail = (
            f"updated {workload.updated_replicas}/{workload.replicas} "
            f"to revision {workload.update_revision or 'unknown'}"
        )
    return f"StatefulSet {workload.key} rolling out ({detail})"


def _age(seconds: float) -> str:
    """``40s``, ``3m20s``, ``2h5m``: an age for a sentence."""
    whole = max(int(seconds), 0)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m" if minutes else f"{hours}h"
    if minutes:
        return f"{minutes}m{secs}s" if secs else f"{minutes}m"
    return f"{secs}s"


def _node_lost(pod: BrokerPod) -> str | None:
    """Rule 3: the reason the pod's node is lost, else ``None``."""
    node = pod.node_name
    if pod.node_exists is False:
        return f"node {node} gone (pod {pod.name})"
    if pod.node_ready is False:
        return f"node {node} not ready (pod {pod.name})"
    if pod.node_exists is None and pod.disruption_reason in NODE_LOST_DISRUPTIONS:
        where = f"node {node}" if node else "its node"
        return f"pod {pod.name} deleted by Kubernetes, {where} lost ({pod.disruption_reason})"
    return None


def _terminating(pod: BrokerPod) -> str:
    """Rule 5: the reason of a terminating pod (a planned deletion)."""
    if pod.evicted:
        if pod.evicted_by_kubelet and pod.disruption_reason != EVICTION_BY_API:
            return f"pod {pod.name} evicted by the kubelet (node pressure)"
        return f"pod {pod.name} evicted (drain)"
    if pod.node_unschedulable:
        return f"pod {pod.name} deleted, node {pod.node_name} cordoned (drain)"
    return f"pod {pod.name} deleted (rollout or restart)"


def absent_broker_verdict(
    broker_id: int,
    workload: StatefulSetState | None,
    annotation: str | None,
    now: datetime,
    start_grace: timedelta = DEFAULT_START_GRACE,
) -> Verdict:
    """Whether an absent broker is gone on purpose or failed (the rules of the module).

    Args:
        broker_id: The Kafka broker id that is not registered.
        workload: The StatefulSet that runs the brokers, ``None`` when not known.
        annotation: The policy's :data:`MAINTENANCE_ANNOTATION` value, ``None`` if absent.
        now: The current time, timezone-aware.
        start_grace: How long a new pod that is not Ready yet counts as starting.

    Returns:
        The verdict; its reason names the pod, node or StatefulSet concerned.

    Raises:
        ValueError: ``now`` is naive.
    """
    if now.tzinfo is None or now.utcoffset() is None:
        raise ValueError(f"now must be timezone-aware, got {now!r}")
    # 1. Planned maintenance announced on the policy.
    if annotation is not None and annotation.strip():
        return Verdict(Cause.MAINTENANCE, f"planned maintenance: {annotation.strip()}")
    # 2. Not a broker this workload runs.
    if workload is None:
        return Verdict(Cause.UNKNOWN, f"broker {broker_id}: no broker workload known")
    if broker_id not in workload.broker_ids:
        return Verdict(
            Cause.UNKNOWN, f"broker {broker_id} is not one of StatefulSet {workload.key}"
        )
    pod = workload.pods.get(broker_id)
    if pod is not None:
        # 3. The node is lost (a failure even mid-rollout).
        lost = _node_lost(pod)
        if lost is not None:
            return Verdict(Cause.FAILURE, lost)
        # 4. The pod cannot start.
        if pod.crash_looping:
            return Verdict(
                Cause.FAILURE, f"pod {pod.name} crash-looping ({pod.waiting_reason or 'unknown'})"
            )
        # 5. The pod is being deleted: a drain, a rollout or a restart.
        if pod.terminating:
            return Verdict(Cause.MAINTENANCE, _terminating(pod))
    else:
        # 6. The controller recreates the pod of a missing ordinal.
        ordinal = broker_id - workload.broker_id_offset
        return Verdict(
            Cause.MAINTENANCE,
            f"pod {workload.name}-{ordinal} being recreated by the StatefulSet controller",
        )
    # 7. A rollout is under way.
    rolling = rollout_reason(workload)
    if rolling is not None:
        return Verdict(Cause.MAINTENANCE, rolling)
    # 8. A new pod still starting.
    if not pod.ready and pod.created is not None:
        age = (now - pod.created).total_seconds()
        if age < start_grace.total_seconds():
            return Verdict(Cause.MAINTENANCE, f"pod {pod.name} recreated {_age(age)} ago, starting")
    # 9. Anything else is a failure.
    if pod.ready:
        return Verdict(
            Cause.FAILURE, f"pod {pod.name} running and ready, but the broker is not registered"
        )
    detail = f" (waiting: {pod.waiting_reason})" if pod.waiting_reason else ""
    return Verdict(
        Cause.FAILURE, f"pod {pod.name} {pod.phase or 'phase unknown'}, not ready{detail}"
    )
