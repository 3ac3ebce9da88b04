"""Kafka refusing the operator itself (a missing ACL, bad credentials), reported on the object.

When Kafka answers an Admin API call with TOPIC/CLUSTER_AUTHORIZATION_FAILED, or refuses
the client's SASL credentials or TLS handshake, retrying soon cannot help: a person must
grant an ACL or fix a Secret. The object then gets, instead of a generic retry:

- ``Stalled`` True (``Ready`` and ``Reconciling`` False) with reason ``AuthorizationFailed``
  (or ``AuthenticationFailed``) and a message naming the API, the operation and the
  resource refused, e.g. ``AlterPartitionReassignments needs Alter on
  Cluster:kafka-cluster (CLUSTER_AUTHORIZATION_FAILED, 31)``;
- ``status.message`` with the same text and one Warning Event per distinct text.

The phase is kept (a refused object is not Failed: it resumes once the ACL is granted,
and the next successful step rewrites the conditions). Before writing anything, a new
reassignment's cluster-level needs are checked against the operations DescribeCluster
reports the principal may perform (KIP-430, :func:`missing_cluster_operations`), so a
missing Alter on the Cluster refuses it before any throttle is written.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from kpo_kafka.acls import REQUIRED, refusal
from kpo_kafka.admin_types import KafkaAdminError, KafkaAuthenticationError, KafkaAuthorizationError
from kpo_kafka.specs import PartitionReassignmentSpec
from kpo_kafka.states import ConditionType, Phase, check_phase_transition
from kpo_operator.conditions import Condition, stamp_conditions
from kpo_operator.resources import ResourceKind
from kpo_operator.store import WARNING, Object, ObjectStore

AUTHORIZATION_FAILED = "AuthorizationFailed"
AUTHENTICATION_FAILED = "AuthenticationFailed"


def reason_of(exc: KafkaAdminError) -> str | None:
    """Return the condition reason of a refusal, ``None`` for other Kafka errors."""
    if isinstance(exc, KafkaAuthorizationError):
        return AUTHORIZATION_FAILED
    if isinstance(exc, KafkaAuthenticationError):
        return AUTHENTICATION_FAILED
    return None


def reassignment_needs(spec: PartitionReassignmentSpec) -> list[str]:
    """Return the Admin APIs a reassignment calls that need an operation on the Cluster.

    AlterPartitionReassignments always; DescribeConfigs and IncrementalAlterConfigs for a
    throttle (broker rates); ElectLeaders for ``preferredLeaderElection``;
    AlterReplicaLogDirs for log dirs.
    """
    apis = ["ListPartitionReassignments", "DescribeLogDirs", "AlterPartitionReassignments"]
    if spec.throttle is not None:
        apis += ["DescribeConfigs", "IncrementalAlterConfigs"]
    if spec.preferred_leader_election:
        apis.append("ElectLeaders")
    if any(t.log_dirs for t in spec.partitions):
        apis.append("AlterReplicaLogDirs")
    return apis


def missing_cluster_operations(authorized: frozenset[str] | None, apis: list[str]) -> list[str]:
    """Say which of ``apis`` the principal may not call, from its authorized operations.

    Args:
        authorized: the operations allowed on the Cluster (DescribeCluster, KIP-430);
            ``None`` when the cluster did not report them (then nothing is refused here).
        apis: Admin API names (keys of :data:`kpo_kafka.acls.REQUIRED`, Cluster resources).

    Returns:
        One ``"<API> needs <operation> on Cluster:kafka-cluster"`` per missing operation.
    """
    if authorized is None:
        return []
    return [
        refusal(api, 31)
        for api in apis
        if REQUIRED[api].resource_type == "Cluster" and REQUIRED[api].operation not in authorized
    ]


def refused_conditions(reason: str, message: str, completed: bool) -> list[Condition]:
    """Conditions of a refused object: Stalled True; Ready, Reconciling (Completed) False."""
    types = [ConditionType.READY, ConditionType.RECONCILING, ConditionType.STALLED]
    if completed:
        types.append(ConditionType.COMPLETED)
    return [
        Condition(t, "True" if t == ConditionType.STALLED else "False", reason, message)
        for t in types
    ]


def record_refusal(
    store: ObjectStore,
    kind: ResourceKind,
    obj: Object,
    reason: str,
    message: str,
    now: datetime,
    default_phase: Phase | None = None,
) -> None:
    """Write the refusal into ``obj``'s status (if it changed) and a Warning Event.

    Args:
        store: The Kubernetes API.
        kind: The object's kind.
        obj: The object as last read.
        reason: ``AuthorizationFailed`` or ``AuthenticationFailed``.
        message: What was refused (never a secret: Kafka's errors carry none).
        now: Condition timestamps.
        default_phase: ``status.phase`` for an object without one (PartitionReassignment:
            ``Pending``); ``None`` writes no phase.

    Raises:
        IllegalPhaseTransitionError: ``default_phase`` may not be a first phase
            (:data:`~kpo_kafka.states.PHASE_VALID_PREVIOUS`).
    """
    old: Mapping[str, Any] = obj.get("status") or {}
    generation = int(obj["metadata"].get("generation") or 1)
    new = dict(old)
    if default_phase is not None and not old.get("phase"):
        check_phase_transition(None, default_phase)
        new["phase"] = default_phase.value
    if default_phase is not None:
        new["message"] = message
    new.setdefault("observedGeneration", generation)
    completed = kind.kind == "PartitionReassignment"
    new["conditions"] = stamp_conditions(
        old.get("conditions") or [], refused_conditions(reason, message, completed), generation, now
    )
    if new == dict(old):
        return
    meta = obj["metadata"]
    store.patch_status(kind, meta["namespace"], meta["name"], new)
    said = {c.get("type"): c for c in old.get("conditions") or []}.get(ConditionType.STALLED, {})
    if (said.get("status"), said.get("reason"), said.get("message")) != ("True", reason, message):
        store.event(obj, WARNING, reason, message)
