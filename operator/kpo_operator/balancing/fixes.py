"""A BalancingPolicy's fixes: ordinary PartitionReassignments, labelled and owned by it (pure).

A fix is written as any PartitionReassignment would be, so everything a person knows
about those (``kubectl get pr``, suspend/resume, cancel, progress, ETA, throttles)
holds for it. What marks it as a fix:

=================================== =======================================================
metadata                            value
=================================== =======================================================
label ``kpo.dev/balancing-policy``  the policy's name
label ``kpo.dev/anomaly``           the anomaly's id as a label value (:func:`anomaly_slug`)
label ``kpo.dev/anomaly-kind``      ``broker-failure``, ``disk-failure``, ``disk-usage``,
                                    ``goal-violation``
annotation ``kpo.dev/anomaly-id``   the anomaly's id as the policy's status shows it
annotation ``kpo.dev/replan``       set when the policy cancelled the fix to plan it again
ownerReferences                     the policy (controller): deleting the policy deletes
                                    its fixes, whose finalizers cancel what is in flight
=================================== =======================================================
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kpo_kafka.states import FINAL_PHASES, Phase
from kpo_kafka.topic_partition import TopicPartition
from kpo_operator.balancing.budget import BudgetShare
from kpo_operator.progress import parse_time
from kpo_operator.resources import API_VERSION, BALANCING_POLICY, PARTITION_REASSIGNMENT

POLICY_LABEL = "kpo.dev/balancing-policy"
ANOMALY_LABEL = "kpo.dev/anomaly"
ANOMALY_KIND_LABEL = "kpo.dev/anomaly-kind"
ANOMALY_ID_ANNOTATION = "kpo.dev/anomaly-id"
REPLAN_ANNOTATION = "kpo.dev/replan"

_LABEL_MAX = 63
_NAME_MAX = 253


def _kebab(text: str) -> str:
    text = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "-", text).lower()
    return re.sub(r"[^a-z0-9]+", "-", text).strip("-")


def anomaly_slug(anomaly_id: str) -> str:
    """Return the anomaly's id as a label value and name part.

    ``BrokerFailure/3`` gives ``broker-failure-3``.

    An id with a path (``DiskUsage/1:/var/lib/kafka/d1``) or longer than a label allows
    ends with 8 hex digits of its SHA-256, so different ids never share a slug.
    """
    kind, _, subject = anomaly_id.partition("/")
    slug = _kebab(kind) + ("-" + _kebab(subject) if subject else "")
    if ":" in subject or "/" in subject or len(slug) > _LABEL_MAX:
        digest = hashlib.sha256(anomaly_id.encode()).hexdigest()[:8]
        slug = f"{slug[: _LABEL_MAX - 9].rstrip('-')}-{digest}"
    return slug


def fix_name(policy: str, anomaly_id: str, number: int) -> str:
    """Name of the ``number``-th fix (from 1) of an anomaly: ``<policy>-<slug>-<number>``."""
    suffix = f"-{anomaly_slug(anomaly_id)}-{number}"
    return policy[: _NAME_MAX - len(suffix)] + suffix


@dataclass(frozen=True)
class FixPlan:
    """One fix to write.

    Attributes:
        targets: Target replicas per partition (preferred leader first).
        log_dirs: Target log dir per replica for the partitions that name them.
        moved_bytes: Bytes the fix copies.
    """

    targets: Mapping[TopicPartition, Sequence[int]]
    log_dirs: Mapping[TopicPartition, Sequence[str]]
    moved_bytes: int


def fix_object(
    policy: Mapping[str, Any],
    anomaly_id: str,
    kind_label: str,
    number: int,
    plan: FixPlan,
    share: BudgetShare,
    suspend: bool,
    preferred_leader_election: bool,
) -> dict[str, Any]:
    """Return the PartitionReassignment of one fix (``suspend``: a Manual approval waits on it)."""
    meta = policy["metadata"]
    spec: dict[str, Any] = {
        "partitions": [
            {"topic": tp.topic, "partition": tp.partition, "replicas": list(replicas)}
            | ({"logDirs": list(plan.log_dirs[tp])} if tp in plan.log_dirs else {})
            for tp, replicas in sorted(plan.targets.items())
        ],
        "concurrentPartitionMovementsPerBroker": share.partition_movements,
        "concurrentLeaderMovements": share.leader_movements,
        "preferredLeaderElection": preferred_leader_election,
    }
    if share.fix_rate is not None:
        spec["throttle"] = {"replicationRate": share.fix_rate}
    if suspend:
        spec["suspend"] = True
    cluster_ref = (policy.get("spec") or {}).get("clusterRef")
    if cluster_ref:
        spec["clusterRef"] = cluster_ref
    return {
        "apiVersion": API_VERSION,
        "kind": PARTITION_REASSIGNMENT.kind,
        "metadata": {
            "name": fix_name(str(meta["name"]), anomaly_id, number),
            "namespace": meta["namespace"],
            "labels": {
                POLICY_LABEL: str(meta["name"])[:_LABEL_MAX],
                ANOMALY_LABEL: anomaly_slug(anomaly_id),
                ANOMALY_KIND_LABEL: kind_label,
            },
            "annotations": {ANOMALY_ID_ANNOTATION: anomaly_id},
            "ownerReferences": [
                {
                    "apiVersion": API_VERSION,
                    "kind": BALANCING_POLICY.kind,
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": spec,
    }


@dataclass(frozen=True)
class FixState:
    """A fix as read back.

    Attributes:
        name: Its name.
        phase: ``status.phase`` (``None``: not reconciled yet).
        suspended: ``spec.suspend`` is true.
        cancelled_by_policy: The policy cancelled it to plan again.
        targets: Its target replicas.
        message: ``status.message``.
        predicted_duration: ``status.predictedDuration``.
        completion_time: ``status.completionTime`` (UTC), when it completed.
        spec: Its spec as read.
    """

    name: str
    phase: Phase | None
    suspended: bool
    cancelled_by_policy: bool
    targets: Mapping[TopicPartition, tuple[int, ...]]
    message: str
    predicted_duration: str | None
    completion_time: datetime | None
    spec: Mapping[str, Any]

    @property
    def final(self) -> bool:
        """Completed, Cancelled or Failed."""
        return self.phase in FINAL_PHASES or self.phase is Phase.FAILED

    @property
    def running(self) -> bool:
        """Not final and not waiting for a person (its replication counts against the budget)."""
        return not self.final and not self.suspended


def fix_state(obj: Mapping[str, Any]) -> FixState:
    """Read a fix object (a PartitionReassignment dict)."""
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    phase = status.get("phase")
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    return FixState(
        name=str(obj["metadata"]["name"]),
        phase=Phase(phase) if phase else None,
        suspended=bool(spec.get("suspend")),
        cancelled_by_policy=REPLAN_ANNOTATION in annotations,
        targets={
            TopicPartition(str(p["topic"]), int(p["partition"])): tuple(
                int(b) for b in p["replicas"]
            )
            for p in spec.get("partitions") or []
        },
        message=str(status.get("message") or ""),
        predicted_duration=status.get("predictedDuration"),
        completion_time=parse_time(status.get("completionTime")),
        spec=spec,
    )


def budget_patch(fix: FixState, share: BudgetShare) -> dict[str, Any] | None:
    """Return the spec merge patch that gives a running fix its share, ``None`` when it has it."""
    patch: dict[str, Any] = {}
    rate = (fix.spec.get("throttle") or {}).get("replicationRate")
    if share.fix_rate is not None and rate != share.fix_rate:
        patch["throttle"] = {"replicationRate": share.fix_rate}
    if fix.spec.get("concurrentLeaderMovements") != share.leader_movements:
        patch["concurrentLeaderMovements"] = share.leader_movements
    if fix.spec.get("concurrentPartitionMovementsPerBroker") != share.partition_movements:
        patch["concurrentPartitionMovementsPerBroker"] = share.partition_movements
    return {"spec": patch} if patch else None
