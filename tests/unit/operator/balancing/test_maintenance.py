"""A broker gone on purpose or failed: every verdict rule, and their order."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from kpo_operator.balancing.maintenance import (
    MAINTENANCE_ANNOTATION,
    BrokerPod,
    Cause,
    StatefulSetState,
    Verdict,
    absent_broker_verdict,
    maintenance_annotation,
    rollout_reason,
)

NOW = datetime(2025, 1, 6, 12, 0, tzinfo=UTC)
REV = "kpo-broker-7c9d"


def pod(broker_id: int = 2, **changes: object) -> BrokerPod:
    """A healthy-looking, long-running pod at the current revision (not Ready: absent)."""
    base = BrokerPod(
        broker_id=broker_id,
        name=f"kpo-broker-{broker_id}",
        phase="Running",
        ready=False,
        terminating=False,
        evicted=False,
        created=NOW - timedelta(days=3),
        revision=REV,
        crash_looping=False,
        waiting_reason=None,
        node_name="n3",
        node_exists=True,
        node_ready=True,
        node_unschedulable=False,
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def sts(pods: dict[int, BrokerPod] | None = None, /, **changes: object) -> StatefulSetState:
    """A settled StatefulSet of 4 brokers (no rollout)."""
    base = StatefulSetState(
        name="kpo-broker",
        namespace="kafka",
        replicas=4,
        ready_replicas=3,
        updated_replicas=4,
        current_revision=REV,
        update_revision=REV,
        generation=3,
        observed_generation=3,
        pods=pods if pods is not None else {i: pod(i) for i in range(4)},
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def verdict(workload: StatefulSetState | None, broker_id: int = 2, **kw: object) -> Verdict:
    annotation = kw.pop("annotation", None)
    return absent_broker_verdict(broker_id, workload, annotation, NOW, **kw)  # type: ignore[arg-type]


def with_pod(**changes: object) -> StatefulSetState:
    pods = {i: pod(i) for i in range(4)}
    pods[2] = pod(2, **changes)
    return sts(pods)


ROLLING = {"update_revision": "kpo-broker-99aa", "updated_replicas": 2}


# --- StatefulSetState.rolling and rollout_reason -----------------------------------------


def test_settled_is_not_rolling() -> None:
    assert not sts().rolling
    assert rollout_reason(sts()) is None
    assert rollout_reason(None) is None


@pytest.mark.parametrize(
    "changes",
    [
        {"generation": 4},  # spec changed, controller not caught up
        {"update_revision": "kpo-broker-99aa"},
        {"updated_replicas": 3},
        {"current_revision": None},
    ],
)
def test_rolling(changes: dict[str, object]) -> None:
    assert sts(**changes).rolling


def test_rollout_reason_texts() -> None:
    assert rollout_reason(sts(**ROLLING)) == (
        "StatefulSet kafka/kpo-broker rolling out (updated 2/4 to revision kpo-broker-99aa)"
    )
    assert rollout_reason(sts(generation=4)) == (
        "StatefulSet kafka/kpo-broker rolling out (generation 4 not yet observed by the controller)"
    )
    assert rollout_reason(sts(update_revision=None, updated_replicas=0)) == (
        "StatefulSet kafka/kpo-broker rolling out (updated 0/4 to revision unknown)"
    )


def test_broker_ids_follow_offset_and_first_ordinal() -> None:
    assert list(sts().broker_ids) == [0, 1, 2, 3]
    assert list(sts(broker_id_offset=100).broker_ids) == [100, 101, 102, 103]
    assert list(sts(first_ordinal=1, replicas=2).broker_ids) == [1, 2]
    assert list(sts(replicas=0).broker_ids) == []


# --- the annotation ------------------------------------------------------------------------


def test_maintenance_annotation_reader() -> None:
    policy = {"metadata": {"annotations": {MAINTENANCE_ANNOTATION: " kernel upgrade "}}}
    assert maintenance_annotation(policy) == "kernel upgrade"
    assert (
        maintenance_annotation({"metadata": {"annotations": {MAINTENANCE_ANNOTATION: " "}}}) is None
    )
    assert maintenance_annotation({"metadata": {"annotations": {"other": "x"}}}) is None
    assert maintenance_annotation({"metadata": {}}) is None
    assert maintenance_annotation({}) is None
    assert MAINTENANCE_ANNOTATION == "kpo.dev/maintenance"


# --- rule 1: planned maintenance -----------------------------------------------------------


def test_rule1_annotation_wins_over_everything() -> None:
    lost_node = with_pod(node_exists=False, crash_looping=True, waiting_reason="CrashLoopBackOff")
    for workload in (lost_node, None):
        assert verdict(workload, annotation="kernel upgrade") == Verdict(
            Cause.MAINTENANCE, "planned maintenance: kernel upgrade"
        )
    assert verdict(sts(), broker_id=42, annotation="x").cause is Cause.MAINTENANCE


@pytest.mark.parametrize("blank", ["", "  "])
def test_rule1_blank_annotation_is_no_maintenance(blank: str) -> None:
    assert verdict(None, annotation=blank).cause is Cause.UNKNOWN


# --- rule 2: not a broker of the workload --------------------------------------------------


def test_rule2_no_workload() -> None:
    assert verdict(None) == Verdict(Cause.UNKNOWN, "broker 2: no broker workload known")


@pytest.mark.parametrize("broker_id", [-1, 4, 1000])
def test_rule2_broker_outside_the_ordinals(broker_id: int) -> None:
    result = verdict(sts(), broker_id=broker_id)
    assert result == Verdict(
        Cause.UNKNOWN, f"broker {broker_id} is not one of StatefulSet kafka/kpo-broker"
    )


def test_rule2_offset() -> None:
    workload = sts({102: pod(102, node_exists=False)}, broker_id_offset=100)
    assert verdict(workload, broker_id=2).cause is Cause.UNKNOWN
    assert verdict(workload, broker_id=104).cause is Cause.UNKNOWN
    assert verdict(workload, broker_id=102).cause is Cause.FAILURE
    # No pod for broker 101: ordinal 1.
    assert verdict(workload, broker_id=101) == Verdict(
        Cause.MAINTENANCE, "pod kpo-broker-1 being recreated by the StatefulSet controller"
    )


def test_rule2_scaled_down_broker_is_unknown() -> None:
    assert verdict(sts(replicas=2), broker_id=3).cause is Cause.UNKNOWN


# --- rule 3: node lost ---------------------------------------------------------------------


def test_rule3_node_gone() -> None:
    assert verdict(with_pod(node_exists=False, node_ready=None)) == Verdict(
        Cause.FAILURE, "node n3 gone (pod kpo-broker-2)"
    )


def test_rule3_node_not_ready() -> None:
    assert verdict(with_pod(node_ready=False)) == Verdict(
        Cause.FAILURE, "node n3 not ready (pod kpo-broker-2)"
    )


def test_rule3_before_a_rollout_and_a_deletion() -> None:
    pods = {i: pod(i) for i in range(4)}
    pods[2] = pod(2, node_ready=False, terminating=True, evicted=True)
    assert verdict(sts(pods, **ROLLING)).cause is Cause.FAILURE


def test_rule3_before_crash_looping() -> None:
    changes = {"node_exists": False, "crash_looping": True, "waiting_reason": "CrashLoopBackOff"}
    assert verdict(with_pod(**changes)).reason == "node n3 gone (pod kpo-broker-2)"


@pytest.mark.parametrize("reason", ["DeletionByTaintManager", "DeletionByPodGC"])
def test_rule3_node_unknown_but_the_pod_says_it_is_lost(reason: str) -> None:
    workload = with_pod(
        node_exists=None, node_ready=None, terminating=True, disruption_reason=reason
    )
    assert verdict(workload) == Verdict(
        Cause.FAILURE, f"pod kpo-broker-2 deleted by Kubernetes, node n3 lost ({reason})"
    )


def test_rule3_taint_manager_on_a_ready_node_is_a_deletion() -> None:
    # Someone tainted a healthy node NoExecute: the node is known Ready, a planned deletion.
    workload = with_pod(terminating=True, disruption_reason="DeletionByTaintManager")
    assert verdict(workload) == Verdict(
        Cause.MAINTENANCE, "pod kpo-broker-2 deleted (rollout or restart)"
    )


def test_rule3_unknown_node_alone_is_not_a_failure() -> None:
    workload = with_pod(node_exists=None, node_ready=None, terminating=True)
    assert verdict(workload).cause is Cause.MAINTENANCE


def test_rule3_unscheduled_pod_has_no_node() -> None:
    workload = with_pod(node_name=None, node_exists=None, node_ready=None, phase="Pending")
    assert verdict(workload) == Verdict(Cause.FAILURE, "pod kpo-broker-2 Pending, not ready")


# --- rule 4: cannot start ------------------------------------------------------------------


@pytest.mark.parametrize(
    "reason", ["CrashLoopBackOff", "ImagePullBackOff", "ErrImagePull", "CreateContainerConfigError"]
)
def test_rule4_crash_looping(reason: str) -> None:
    assert verdict(with_pod(crash_looping=True, waiting_reason=reason)) == Verdict(
        Cause.FAILURE, f"pod kpo-broker-2 crash-looping ({reason})"
    )


def test_rule4_before_rollout_grace_and_deletion() -> None:
    pods = {i: pod(i) for i in range(4)}
    pods[2] = pod(
        2,
        crash_looping=True,
        waiting_reason="CrashLoopBackOff",
        terminating=True,
        created=NOW - timedelta(seconds=10),
    )
    assert verdict(sts(pods, **ROLLING)).cause is Cause.FAILURE


def test_rule4_without_a_reason() -> None:
    assert (
        verdict(with_pod(crash_looping=True)).reason == "pod kpo-broker-2 crash-looping (unknown)"
    )


# --- rule 5: terminating -------------------------------------------------------------------


def test_rule5_evicted_is_a_drain() -> None:
    workload = with_pod(terminating=True, evicted=True, disruption_reason="EvictionByEvictionAPI")
    assert verdict(workload) == Verdict(Cause.MAINTENANCE, "pod kpo-broker-2 evicted (drain)")


def test_rule5_evicted_by_the_kubelet() -> None:
    workload = with_pod(terminating=True, evicted=True, evicted_by_kubelet=True)
    assert verdict(workload) == Verdict(
        Cause.MAINTENANCE, "pod kpo-broker-2 evicted by the kubelet (node pressure)"
    )


def test_rule5_deleted_on_a_cordoned_node() -> None:
    workload = with_pod(terminating=True, node_unschedulable=True)
    assert verdict(workload) == Verdict(
        Cause.MAINTENANCE, "pod kpo-broker-2 deleted, node n3 cordoned (drain)"
    )


def test_rule5_eviction_wins_over_cordon() -> None:
    workload = with_pod(terminating=True, evicted=True, node_unschedulable=True)
    assert verdict(workload).reason == "pod kpo-broker-2 evicted (drain)"


def test_rule5_deleted() -> None:
    assert verdict(with_pod(terminating=True)) == Verdict(
        Cause.MAINTENANCE, "pod kpo-broker-2 deleted (rollout or restart)"
    )


def test_rule5_before_rollout() -> None:
    pods = {i: pod(i) for i in range(4)}
    pods[2] = pod(2, terminating=True)
    assert verdict(sts(pods, **ROLLING)).reason == "pod kpo-broker-2 deleted (rollout or restart)"


def test_evicted_but_not_yet_deleted_is_a_failure_until_deleted() -> None:
    # The kubelet failed the pod (phase Failed, reason Evicted); the StatefulSet controller
    # deletes and recreates it next.
    workload = with_pod(phase="Failed", evicted=True, evicted_by_kubelet=True)
    assert verdict(workload) == Verdict(Cause.FAILURE, "pod kpo-broker-2 Failed, not ready")


# --- rule 6: no pod ------------------------------------------------------------------------


def test_rule6_missing_pod() -> None:
    pods = {i: pod(i) for i in (0, 1, 3)}
    assert verdict(sts(pods)) == Verdict(
        Cause.MAINTENANCE, "pod kpo-broker-2 being recreated by the StatefulSet controller"
    )


def test_rule6_before_rollout() -> None:
    pods = {i: pod(i) for i in (0, 1, 3)}
    assert verdict(sts(pods, **ROLLING)).reason.startswith("pod kpo-broker-2 being recreated")


def test_rule6_first_ordinal() -> None:
    workload = sts({}, first_ordinal=3, replicas=2, broker_id_offset=10)
    assert verdict(workload, broker_id=14).reason == (
        "pod kpo-broker-4 being recreated by the StatefulSet controller"
    )
    assert verdict(workload, broker_id=12).cause is Cause.UNKNOWN


# --- rule 7: rolling -----------------------------------------------------------------------


def test_rule7_rolling() -> None:
    assert verdict(sts(**ROLLING)) == Verdict(
        Cause.MAINTENANCE,
        "StatefulSet kafka/kpo-broker rolling out (updated 2/4 to revision kpo-broker-99aa)",
    )


def test_rule7_unobserved_generation() -> None:
    assert verdict(sts(generation=9)).reason == (
        "StatefulSet kafka/kpo-broker rolling out (generation 9 not yet observed by the controller)"
    )


def test_rule7_before_start_grace() -> None:
    pods = {i: pod(i) for i in range(4)}
    pods[2] = pod(2, created=NOW - timedelta(seconds=30), phase="Pending")
    assert verdict(sts(pods, **ROLLING)).reason.startswith("StatefulSet kafka/kpo-broker rolling")


# --- rule 8: starting ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("age", "text"),
    [
        (timedelta(seconds=40), "40s"),
        (timedelta(minutes=3, seconds=20), "3m20s"),
        (timedelta(minutes=4), "4m"),
        (timedelta(seconds=-5), "0s"),  # clocks a little apart
    ],
)
def test_rule8_recreated_and_starting(age: timedelta, text: str) -> None:
    workload = with_pod(created=NOW - age, phase="Pending", waiting_reason="ContainerCreating")
    assert verdict(workload) == Verdict(
        Cause.MAINTENANCE, f"pod kpo-broker-2 recreated {text} ago, starting"
    )


def test_rule8_grace_is_exclusive_and_configurable() -> None:
    workload = with_pod(created=NOW - timedelta(minutes=5))
    assert verdict(workload).cause is Cause.FAILURE
    assert verdict(workload, start_grace=timedelta(minutes=10)).cause is Cause.MAINTENANCE
    assert verdict(workload, start_grace=timedelta(hours=2)).reason == (
        "pod kpo-broker-2 recreated 5m ago, starting"
    )
    old = with_pod(created=NOW - timedelta(hours=3))
    assert verdict(old, start_grace=timedelta(hours=4)).reason == (
        "pod kpo-broker-2 recreated 3h ago, starting"
    )
    older = with_pod(created=NOW - timedelta(hours=3, minutes=5))
    assert verdict(older, start_grace=timedelta(hours=4)).reason == (
        "pod kpo-broker-2 recreated 3h5m ago, starting"
    )


def test_rule8_needs_a_creation_time_and_not_ready() -> None:
    assert verdict(with_pod(created=None)).cause is Cause.FAILURE
    young_ready = with_pod(created=NOW - timedelta(seconds=10), ready=True)
    assert verdict(young_ready).reason == (
        "pod kpo-broker-2 running and ready, but the broker is not registered"
    )


# --- rule 9: failure -----------------------------------------------------------------------


def test_rule9_not_ready() -> None:
    assert verdict(with_pod()) == Verdict(Cause.FAILURE, "pod kpo-broker-2 Running, not ready")


def test_rule9_waiting_reason_is_shown() -> None:
    workload = with_pod(phase="Pending", waiting_reason="ContainerCreating")
    assert verdict(workload).reason == (
        "pod kpo-broker-2 Pending, not ready (waiting: ContainerCreating)"
    )


def test_rule9_no_phase() -> None:
    assert verdict(with_pod(phase=None)).reason == "pod kpo-broker-2 phase unknown, not ready"


def test_rule9_ready_but_not_registered() -> None:
    assert verdict(with_pod(ready=True)) == Verdict(
        Cause.FAILURE, "pod kpo-broker-2 running and ready, but the broker is not registered"
    )


# --- misc ----------------------------------------------------------------------------------


def test_naive_now_is_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        absent_broker_verdict(2, sts(), None, datetime(2025, 1, 6, 12))


def test_now_in_another_zone() -> None:
    from datetime import timezone

    workload = with_pod(created=NOW - timedelta(seconds=30))
    later_elsewhere = NOW.astimezone(timezone(timedelta(hours=-7)))
    assert absent_broker_verdict(2, workload, None, later_elsewhere).cause is Cause.MAINTENANCE


def test_cause_values() -> None:
    assert [c.value for c in Cause] == ["Maintenance", "Failure", "Unknown"]
    assert Cause("Failure") is Cause.FAILURE
    assert f"{Cause.MAINTENANCE}" == "Maintenance"
