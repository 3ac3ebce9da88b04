"""The brokers' StatefulSet, pods and nodes: parsing API objects, and the reader's errors."""

from __future__ import annotations

import copy
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from kpo_operator.balancing.maintenance import Cause, absent_broker_verdict
from kpo_operator.kube_workloads import (
    GONE_NODE,
    NODE_RETRY_S,
    UNKNOWN_NODE,
    KubeWorkloadReader,
    NodeState,
    label_selector,
    node_state,
    parse_time,
    pod_ordinal,
    pod_state,
    statefulset_state,
    with_node,
)
from kpo_operator.store import ObjectStoreError

NOW = datetime(2025, 1, 6, 12, 0, tzinfo=UTC)
LABELS = {"app.kubernetes.io/name": "kpo", "app.kubernetes.io/component": "broker"}
OWNER = {
    "apiVersion": "apps/v1",
    "kind": "StatefulSet",
    "name": "kpo-broker",
    "uid": "0c1d5c3e-sts",
    "controller": True,
    "blockOwnerDeletion": True,
}


def sts_dict(**status: Any) -> dict[str, Any]:
    """A StatefulSet as ``kubectl get sts -o json`` shows it, mid-rollout."""
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {
            "name": "kpo-broker",
            "namespace": "kafka",
            "uid": "0c1d5c3e-sts",
            "generation": 5,
            "creationTimestamp": "2025-01-01T08:00:00Z",
            "labels": dict(LABELS),
        },
        "spec": {
            "replicas": 3,
            "serviceName": "kpo-broker",
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": dict(LABELS)},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
            "template": {"metadata": {"labels": dict(LABELS)}, "spec": {"containers": []}},
        },
        "status": {
            "observedGeneration": 5,
            "replicas": 3,
            "readyReplicas": 2,
            "currentReplicas": 1,
            "updatedReplicas": 2,
            "availableReplicas": 2,
            "currentRevision": "kpo-broker-6b8f9d",
            "updateRevision": "kpo-broker-7c9d4f",
            "collisionCount": 0,
            **status,
        },
    }


def pod_dict(
    ordinal: int,
    *,
    ready: bool = True,
    phase: str = "Running",
    node: str | None = "n1",
    created: str = "2025-01-03T10:00:00Z",
    revision: str = "kpo-broker-7c9d4f",
) -> dict[str, Any]:
    """A broker pod as ``kubectl get pod -o json`` shows it."""
    name = f"kpo-broker-{ordinal}"
    status = "True" if ready else "False"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "kafka",
            "uid": f"uid-{ordinal}",
            "creationTimestamp": created,
            "generateName": "kpo-broker-",
            "labels": {
                **LABELS,
                "apps.kubernetes.io/pod-index": str(ordinal),
                "controller-revision-hash": revision,
                "statefulset.kubernetes.io/pod-name": name,
            },
            "ownerReferences": [dict(OWNER)],
        },
        "spec": {
            "hostname": name,
            "subdomain": "kpo-broker",
            "containers": [{"name": "broker", "image": "kpo/broker:0.1.0"}],
            **({"nodeName": node} if node else {}),
        },
        "status": {
            "phase": phase,
            "conditions": [
                {"type": "PodReadyToStartContainers", "status": "True"},
                {"type": "Initialized", "status": "True"},
                {"type": "Ready", "status": status, "lastTransitionTime": created},
                {"type": "ContainersReady", "status": status},
                {"type": "PodScheduled", "status": "True" if node else "False"},
            ],
            "containerStatuses": [
                {
                    "name": "broker",
                    "ready": ready,
                    "restartCount": 0,
                    "started": ready,
                    "image": "kpo/broker:0.1.0",
                    "state": {"running": {"startedAt": created}},
                }
            ],
            "hostIP": "10.0.0.11",
            "podIP": f"10.244.1.{10 + ordinal}",
            "qosClass": "Burstable",
            "startTime": created,
        },
    }


def crash_looping(pod: dict[str, Any], reason: str = "CrashLoopBackOff") -> dict[str, Any]:
    pod = copy.deepcopy(pod)
    pod["status"]["containerStatuses"][0].update(
        ready=False,
        restartCount=7,
        state={"waiting": {"reason": reason, "message": "back-off 5m0s restarting failed"}},
        lastState={"terminated": {"exitCode": 1, "reason": "Error"}},
    )
    return pod


def drained(pod: dict[str, Any]) -> dict[str, Any]:
    """The pod as it is after ``kubectl drain`` evicted it, while it shuts down."""
    pod = copy.deepcopy(pod)
    pod["metadata"]["deletionTimestamp"] = "2025-01-06T11:59:30Z"
    pod["metadata"]["deletionGracePeriodSeconds"] = 120
    pod["status"]["conditions"].append(
        {
            "type": "DisruptionTarget",
            "status": "True",
            "reason": "EvictionByEvictionAPI",
            "message": "Eviction API: evicting",
            "lastTransitionTime": "2025-01-06T11:59:30Z",
        }
    )
    return pod


def node_dict(
    name: str = "n1", *, ready: str = "True", unschedulable: bool = False
) -> dict[str, Any]:
    """A Node as ``kubectl get node -o json`` shows it."""
    spec: dict[str, Any] = {"podCIDR": "10.244.1.0/24"}
    if unschedulable:
        spec["unschedulable"] = True
        spec["taints"] = [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"topology.kubernetes.io/zone": "a"}},
        "spec": spec,
        "status": {
            "conditions": [
                {
                    "type": "MemoryPressure",
                    "status": "False",
                    "reason": "KubeletHasSufficientMemory",
                },
                {"type": "DiskPressure", "status": "False"},
                {"type": "PIDPressure", "status": "False"},
                {"type": "Ready", "status": ready, "reason": "KubeletReady"},
            ]
        },
    }


# --- small parsers -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2025-01-06T11:58:00Z", datetime(2025, 1, 6, 11, 58, tzinfo=UTC)),
        ("2025-01-06T11:58:00+00:00", datetime(2025, 1, 6, 11, 58, tzinfo=UTC)),
        ("2025-01-06T12:58:00+01:00", datetime(2025, 1, 6, 11, 58, tzinfo=UTC)),
        ("2025-01-06T11:58:00", datetime(2025, 1, 6, 11, 58, tzinfo=UTC)),
        (datetime(2025, 1, 6, 11, 58, tzinfo=UTC), datetime(2025, 1, 6, 11, 58, tzinfo=UTC)),
        ("not a time", None),
        ("", None),
        (None, None),
        (17, None),
    ],
)
def test_parse_time(value: Any, expected: datetime | None) -> None:
    assert parse_time(value) == expected


def test_pod_ordinal() -> None:
    assert pod_ordinal("kpo-broker-0") == 0
    assert pod_ordinal("kpo-broker-12") == 12
    for bad in ("kpo-broker", "kpo-broker-", "kpo-broker-x1", "3", "kpo-broker-²"):
        with pytest.raises(ValueError, match="no StatefulSet ordinal"):
            pod_ordinal(bad)


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ({"matchLabels": {"b": "2", "a": "1"}}, "a=1,b=2"),
        (
            {
                "matchLabels": {"app": "kafka"},
                "matchExpressions": [
                    {"key": "tier", "operator": "In", "values": ["broker", "controller"]},
                    {"key": "env", "operator": "NotIn", "values": ["dev"]},
                    {"key": "managed", "operator": "Exists"},
                    {"key": "legacy", "operator": "DoesNotExist"},
                ],
            },
            "app=kafka,tier in (broker,controller),env notin (dev),managed,!legacy",
        ),
    ],
)
def test_label_selector(selector: dict[str, Any], expected: str) -> None:
    assert label_selector(selector) == expected


def test_label_selector_refuses() -> None:
    with pytest.raises(ValueError, match="empty label selector"):
        label_selector({})
    with pytest.raises(ValueError, match="unknown label selector operator 'Gt'"):
        label_selector({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]})


# --- pods ----------------------------------------------------------------------------------


def test_running_ready_pod() -> None:
    parsed = pod_state(pod_dict(2))
    assert parsed.broker_id == 2
    assert parsed.name == "kpo-broker-2"
    assert parsed.phase == "Running"
    assert parsed.ready
    assert not parsed.terminating
    assert not parsed.evicted
    assert parsed.created == datetime(2025, 1, 3, 10, tzinfo=UTC)
    assert parsed.revision == "kpo-broker-7c9d4f"
    assert not parsed.crash_looping
    assert parsed.waiting_reason is None
    assert parsed.node_name == "n1"
    assert (parsed.node_exists, parsed.node_ready, parsed.node_unschedulable) == (
        None,
        None,
        False,
    )
    assert parsed.disruption_reason is None


def test_broker_id_offset() -> None:
    assert pod_state(pod_dict(2), broker_id_offset=100).broker_id == 102


def test_pod_without_ordinal_is_refused() -> None:
    pod = pod_dict(1)
    pod["metadata"]["name"] = "kpo-broker-abc"
    with pytest.raises(ValueError):
        pod_state(pod)


@pytest.mark.parametrize(
    "reason", ["CrashLoopBackOff", "ImagePullBackOff", "ErrImagePull", "CreateContainerConfigError"]
)
def test_cannot_start(reason: str) -> None:
    parsed = pod_state(crash_looping(pod_dict(1, ready=False), reason))
    assert parsed.crash_looping
    assert parsed.waiting_reason == reason
    assert not parsed.ready


def test_waiting_to_be_created_is_not_crash_looping() -> None:
    pod = pod_dict(1, ready=False, phase="Pending")
    pod["status"]["containerStatuses"][0]["state"] = {"waiting": {"reason": "ContainerCreating"}}
    parsed = pod_state(pod)
    assert not parsed.crash_looping
    assert parsed.waiting_reason == "ContainerCreating"


def test_init_container_crash_looping() -> None:
    pod = pod_dict(1, ready=False, phase="Pending")
    pod["status"]["containerStatuses"][0]["state"] = {"waiting": {"reason": "PodInitializing"}}
    pod["status"]["initContainerStatuses"] = [
        {"name": "rack", "ready": False, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}
    ]
    parsed = pod_state(pod)
    assert parsed.crash_looping
    assert parsed.waiting_reason == "CrashLoopBackOff"


def test_drained_pod() -> None:
    parsed = pod_state(drained(pod_dict(1)))
    assert parsed.terminating
    assert parsed.evicted
    assert parsed.disruption_reason == "EvictionByEvictionAPI"
    assert not parsed.evicted_by_kubelet


def test_deleted_pod_is_terminating_not_evicted() -> None:
    pod = pod_dict(1)
    pod["metadata"]["deletionTimestamp"] = "2025-01-06T11:59:30Z"
    parsed = pod_state(pod)
    assert parsed.terminating
    assert not parsed.evicted
    assert parsed.disruption_reason is None


def test_pod_evicted_by_the_kubelet() -> None:
    pod = pod_dict(1, ready=False, phase="Failed")
    pod["status"]["reason"] = "Evicted"
    pod["status"]["message"] = "The node was low on resource: memory."
    pod["status"]["conditions"].append(
        {"type": "DisruptionTarget", "status": "True", "reason": "TerminationByKubelet"}
    )
    parsed = pod_state(pod)
    assert parsed.evicted
    assert parsed.evicted_by_kubelet
    assert parsed.phase == "Failed"
    assert parsed.disruption_reason == "TerminationByKubelet"


def test_disruption_condition_not_true_is_ignored() -> None:
    pod = pod_dict(1)
    pod["status"]["conditions"].append(
        {"type": "DisruptionTarget", "status": "False", "reason": "EvictionByEvictionAPI"}
    )
    parsed = pod_state(pod)
    assert not parsed.evicted
    assert parsed.disruption_reason is None


def test_taint_manager_deletion() -> None:
    pod = pod_dict(1)
    pod["metadata"]["deletionTimestamp"] = "2025-01-06T11:59:30Z"
    pod["status"]["conditions"].append(
        {
            "type": "DisruptionTarget",
            "status": "True",
            "reason": "DeletionByTaintManager",
            "message": "Taint manager: deleting due to NoExecute taint",
        }
    )
    parsed = pod_state(pod)
    assert parsed.disruption_reason == "DeletionByTaintManager"
    assert not parsed.evicted


def test_unscheduled_pod() -> None:
    pod = pod_dict(1, ready=False, phase="Pending", node=None)
    del pod["status"]["containerStatuses"]
    parsed = pod_state(pod)
    assert parsed.node_name is None
    assert parsed.phase == "Pending"
    assert parsed.waiting_reason is None


def test_bare_pod() -> None:
    parsed = pod_state({"metadata": {"name": "kpo-broker-0"}})
    assert parsed.broker_id == 0
    assert parsed.phase is None
    assert not parsed.ready
    assert parsed.created is None
    assert parsed.revision is None
    assert parsed.node_name is None


# --- nodes ---------------------------------------------------------------------------------


def test_node_states() -> None:
    assert node_state(node_dict()) == NodeState(exists=True, ready=True, unschedulable=False)
    assert node_state(node_dict(ready="False")) == NodeState(True, False, False)
    assert node_state(node_dict(ready="Unknown")) == NodeState(True, False, False)
    assert node_state(node_dict(unschedulable=True)) == NodeState(True, True, True)
    assert node_state({"metadata": {"name": "n"}}) == NodeState(True, False, False)
    assert node_state(None) == GONE_NODE == NodeState(False, None, False)
    assert NodeState(None, None, False) == UNKNOWN_NODE


def test_with_node() -> None:
    parsed = with_node(pod_state(pod_dict(0)), node_state(node_dict(unschedulable=True)))
    assert (parsed.node_exists, parsed.node_ready, parsed.node_unschedulable) == (True, True, True)


# --- StatefulSets --------------------------------------------------------------------------


def test_statefulset_mid_rollout() -> None:
    pods = [
        pod_dict(0, revision="kpo-broker-6b8f9d"),
        pod_dict(1, node="n2"),
        drained(pod_dict(2, node="n3")),
    ]
    nodes = {"n1": node_dict("n1"), "n2": None, "n3": node_dict("n3", unschedulable=True)}
    state = statefulset_state(sts_dict(), pods, nodes)
    assert (state.name, state.namespace) == ("kpo-broker", "kafka")
    assert (state.replicas, state.ready_replicas, state.updated_replicas) == (3, 2, 2)
    assert (state.current_revision, state.update_revision) == (
        "kpo-broker-6b8f9d",
        "kpo-broker-7c9d4f",
    )
    assert (state.generation, state.observed_generation) == (5, 5)
    assert state.first_ordinal == 0
    assert state.rolling
    assert sorted(state.pods) == [0, 1, 2]
    assert state.pods[0].revision == "kpo-broker-6b8f9d"
    assert (state.pods[0].node_exists, state.pods[0].node_ready) == (True, True)
    assert (state.pods[1].node_exists, state.pods[1].node_ready) == (False, None)
    assert state.pods[2].node_unschedulable
    assert state.pods[2].evicted


def test_statefulset_settled() -> None:
    status = {"currentRevision": "kpo-broker-7c9d4f", "updatedReplicas": 3, "readyReplicas": 3}
    state = statefulset_state(sts_dict(**status), [pod_dict(i) for i in range(3)], {})
    assert not state.rolling
    assert all(p.node_exists is None for p in state.pods.values())  # nodes not read


def test_statefulset_defaults() -> None:
    sts = {"metadata": {"name": "b", "namespace": "k"}, "spec": {"selector": {}}}
    state = statefulset_state(sts, [], {})
    assert state.replicas == 1  # the API's default
    assert (state.ready_replicas, state.updated_replicas) == (0, 0)
    assert (state.generation, state.observed_generation) == (0, 0)
    assert state.current_revision is None
    assert state.pods == {}


def test_statefulset_offset_and_start_ordinal() -> None:
    sts = sts_dict()
    sts["spec"]["ordinals"] = {"start": 1}
    state = statefulset_state(sts, [pod_dict(1), pod_dict(3)], {}, broker_id_offset=100)
    assert state.first_ordinal == 1
    assert sorted(state.pods) == [101, 103]
    assert list(state.broker_ids) == [101, 102, 103]
    assert state.broker_id_offset == 100


def test_statefulset_skips_pods_of_others() -> None:
    other_owner = pod_dict(1)
    other_owner["metadata"]["ownerReferences"][0]["uid"] = "another-uid"
    other_name = pod_dict(2)
    other_name["metadata"]["name"] = "kpo-broker-canary-2"
    no_ordinal = pod_dict(0)
    no_ordinal["metadata"]["name"] = "kpo-broker-x"
    orphan = pod_dict(0)
    orphan["metadata"]["ownerReferences"] = []
    job_pod = pod_dict(2)
    job_pod["metadata"]["ownerReferences"] = [
        {"kind": "Job", "name": "kpo-broker", "controller": True}
    ]
    state = statefulset_state(
        sts_dict(), [other_owner, other_name, no_ordinal, orphan, job_pod], {}
    )
    assert sorted(state.pods) == [0]  # only the orphan, which the StatefulSet would adopt


def test_owner_without_uid_is_matched_by_name() -> None:
    pod = pod_dict(1)
    del pod["metadata"]["ownerReferences"][0]["uid"]
    assert sorted(statefulset_state(sts_dict(), [pod], {}).pods) == [1]


def test_from_kubernetes_client_objects() -> None:
    """Dicts made by ``sanitize_for_serialization`` (what the reader parses) read the same."""
    api: Any = client.ApiClient()
    created = datetime(2025, 1, 6, 11, 58, 20, tzinfo=UTC)
    pod = client.V1Pod(
        metadata=client.V1ObjectMeta(
            name="kpo-broker-1",
            namespace="kafka",
            creation_timestamp=created,
            labels={"controller-revision-hash": "kpo-broker-7c9d4f"},
            owner_references=[
                client.V1OwnerReference(
                    api_version="apps/v1",
                    kind="StatefulSet",
                    name="kpo-broker",
                    uid="0c1d5c3e-sts",
                    controller=True,
                )
            ],
        ),
        spec=client.V1PodSpec(containers=[client.V1Container(name="broker")], node_name="n1"),
        status=client.V1PodStatus(
            phase="Pending",
            conditions=[client.V1PodCondition(type="Ready", status="False")],
            container_statuses=[
                client.V1ContainerStatus(
                    name="broker",
                    image="kpo/broker",
                    image_id="",
                    ready=False,
                    restart_count=0,
                    state=client.V1ContainerState(
                        waiting=client.V1ContainerStateWaiting(reason="ContainerCreating")
                    ),
                )
            ],
        ),
    )
    node = client.V1Node(
        metadata=client.V1ObjectMeta(name="n1"),
        spec=client.V1NodeSpec(unschedulable=True),
        status=client.V1NodeStatus(
            conditions=[client.V1NodeCondition(type="Ready", status="True")]
        ),
    )
    sts = client.V1StatefulSet(
        metadata=client.V1ObjectMeta(
            name="kpo-broker", namespace="kafka", uid="0c1d5c3e-sts", generation=2
        ),
        spec=client.V1StatefulSetSpec(
            replicas=3,
            selector=client.V1LabelSelector(match_labels=LABELS),
            service_name="kpo-broker",
            template=client.V1PodTemplateSpec(),
        ),
        status=client.V1StatefulSetStatus(
            replicas=3,
            ready_replicas=2,
            updated_replicas=3,
            observed_generation=2,
            current_revision="kpo-broker-7c9d4f",
            update_revision="kpo-broker-7c9d4f",
        ),
    )
    state = statefulset_state(
        api.sanitize_for_serialization(sts),
        [api.sanitize_for_serialization(pod)],
        {"n1": api.sanitize_for_serialization(node)},
    )
    assert not state.rolling
    parsed = state.pods[1]
    assert parsed.created == created
    assert parsed.waiting_reason == "ContainerCreating"
    assert (parsed.node_exists, parsed.node_ready, parsed.node_unschedulable) == (True, True, True)
    verdict = absent_broker_verdict(1, state, None, NOW)
    assert verdict.cause is Cause.MAINTENANCE
    assert verdict.reason == "pod kpo-broker-1 recreated 1m40s ago, starting"


# --- from API objects to verdicts ----------------------------------------------------------


def verdict_of(pods: list[dict[str, Any]], nodes: dict[str, Any], **status: Any) -> Any:
    settled = {"currentRevision": "kpo-broker-7c9d4f", "updatedReplicas": 3, **status}
    state = statefulset_state(sts_dict(**settled), pods, nodes)
    return absent_broker_verdict(2, state, None, NOW)


def test_verdicts_from_api_objects() -> None:
    healthy = [pod_dict(0), pod_dict(1)]
    nodes = {"n1": node_dict("n1"), "n3": node_dict("n3")}
    cases: list[tuple[dict[str, Any] | None, dict[str, Any], str]] = [
        (drained(pod_dict(2, node="n3")), nodes, "pod kpo-broker-2 evicted (drain)"),
        (pod_dict(2, node="n3"), {"n1": node_dict()}, "pod kpo-broker-2 running and ready, "
         "but the broker is not registered"),
        (pod_dict(2, node="n3"), {"n3": None}, "node n3 gone (pod kpo-broker-2)"),
        (pod_dict(2, node="n3", ready=False), {"n3": node_dict("n3", ready="Unknown")},
         "node n3 not ready (pod kpo-broker-2)"),
        (crash_looping(pod_dict(2, ready=False)), nodes,
         "pod kpo-broker-2 crash-looping (CrashLoopBackOff)"),
        (None, nodes, "pod kpo-broker-2 being recreated by the StatefulSet controller"),
        (pod_dict(2, ready=False, phase="Pending", created="2025-01-06T11:59:00Z"), nodes,
         "pod kpo-broker-2 recreated 1m ago, starting"),
    ]  # fmt: skip
    for pod, node_map, reason in cases:
        pods = healthy + ([pod] if pod is not None else [])
        assert verdict_of(pods, node_map).reason == reason


def test_rollout_verdict_from_api_objects() -> None:
    pods = [pod_dict(0, revision="kpo-broker-6b8f9d"), pod_dict(1), pod_dict(2, ready=False)]
    state = statefulset_state(sts_dict(), pods, {"n1": node_dict()})
    assert absent_broker_verdict(2, state, None, NOW).reason == (
        "StatefulSet kafka/kpo-broker rolling out (updated 2/3 to revision kpo-broker-7c9d4f)"
    )


# --- KubeWorkloadReader over fake APIs -----------------------------------------------------


class FakeApps:
    def __init__(self, sts: Any) -> None:
        self.sts = sts
        self.calls: list[tuple[str, str]] = []

    def read_namespaced_stateful_set(self, name: str, namespace: str) -> Any:
        self.calls.append((namespace, name))
        if isinstance(self.sts, Exception):
            raise self.sts
        return self.sts


class FakeCore:
    def __init__(self, pods: Any, nodes: dict[str, Any]) -> None:
        self.pods = pods
        self.nodes = nodes
        self.selectors: list[str] = []
        self.node_reads: list[str] = []

    def list_namespaced_pod(self, namespace: str, label_selector: str) -> Any:
        self.selectors.append(label_selector)
        if isinstance(self.pods, Exception):
            raise self.pods
        return {"apiVersion": "v1", "kind": "PodList", "items": self.pods}

    def read_node(self, name: str) -> Any:
        self.node_reads.append(name)
        node = self.nodes.get(name, ApiException(status=404, reason="Not Found"))
        if isinstance(node, Exception):
            raise node
        return node


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def reader(
    sts: Any, pods: Any, nodes: dict[str, Any], clock: Callable[[], float] | None = None
) -> tuple[KubeWorkloadReader, FakeApps, FakeCore]:
    made = KubeWorkloadReader(client.ApiClient(), clock=clock or Clock())
    apps, core = FakeApps(sts), FakeCore(pods, nodes)
    made._apps = apps  # type: ignore[assignment]
    made._core = core  # type: ignore[assignment]
    return made, apps, core


def test_reader_reads_statefulset_pods_and_nodes() -> None:
    pods = [pod_dict(0), pod_dict(1, node="n2"), pod_dict(2, node="n2")]
    made, apps, core = reader(sts_dict(), pods, {"n1": node_dict("n1")})
    state = made.statefulset("kafka", "kpo-broker", broker_id_offset=10)
    assert state is not None
    assert apps.calls == [("kafka", "kpo-broker")]
    assert core.selectors == ["app.kubernetes.io/component=broker,app.kubernetes.io/name=kpo"]
    assert core.node_reads == ["n1", "n2"]  # each node once
    assert sorted(state.pods) == [10, 11, 12]
    assert state.pods[10].node_ready is True
    assert state.pods[11].node_exists is False  # 404


def test_reader_sanitizes_client_objects() -> None:
    sts = client.V1StatefulSet(
        metadata=client.V1ObjectMeta(name="kpo-broker", namespace="kafka", generation=1),
        spec=client.V1StatefulSetSpec(
            replicas=1,
            selector=client.V1LabelSelector(match_labels={"app": "kafka"}),
            service_name="kpo-broker",
            template=client.V1PodTemplateSpec(),
        ),
        status=client.V1StatefulSetStatus(replicas=1, observed_generation=1, updated_replicas=1),
    )
    pod = client.V1Pod(
        metadata=client.V1ObjectMeta(name="kpo-broker-0"),
        spec=client.V1PodSpec(containers=[], node_name="n1"),
        status=client.V1PodStatus(phase="Running"),
    )
    node = client.V1Node(metadata=client.V1ObjectMeta(name="n1"))
    made, _apps, core = reader(sts, None, {"n1": node})
    core.list_namespaced_pod = lambda namespace, label_selector: client.V1PodList(items=[pod])  # type: ignore[method-assign]
    state = made.statefulset("kafka", "kpo-broker")
    assert state is not None
    assert state.pods[0].phase == "Running"
    assert state.pods[0].node_exists is True


def test_reader_missing_statefulset() -> None:
    made, _apps, core = reader(ApiException(status=404, reason="Not Found"), [], {})
    assert made.statefulset("kafka", "nope") is None
    assert core.selectors == []


@pytest.mark.parametrize("status", [403, 500])
def test_reader_statefulset_errors(status: int) -> None:
    made, _apps, _core = reader(ApiException(status=status, reason="Boom"), [], {})
    with pytest.raises(ObjectStoreError, match=f"get StatefulSet kafka/kpo-broker: {status} Boom"):
        made.statefulset("kafka", "kpo-broker")


def test_reader_connection_error() -> None:
    made, _apps, _core = reader(ConnectionError("refused"), [], {})
    with pytest.raises(ObjectStoreError, match="refused"):
        made.statefulset("kafka", "kpo-broker")


def test_reader_pod_list_error() -> None:
    made, _apps, _core = reader(sts_dict(), ApiException(status=403, reason="Forbidden"), {})
    with pytest.raises(ObjectStoreError, match="list pods of StatefulSet kafka/kpo-broker"):
        made.statefulset("kafka", "kpo-broker")


def test_reader_statefulset_without_selector() -> None:
    sts = sts_dict()
    sts["spec"]["selector"] = {}
    made, _apps, _core = reader(sts, [], {})
    with pytest.raises(ObjectStoreError, match="empty label selector"):
        made.statefulset("kafka", "kpo-broker")


def test_reader_node_403_is_unknown_and_pauses_node_reads() -> None:
    clock = Clock()
    forbidden = ApiException(status=403, reason="Forbidden")
    pods = [pod_dict(0), pod_dict(1, node="n2")]
    made, _apps, core = reader(sts_dict(), pods, {"n1": forbidden, "n2": node_dict("n2")}, clock)
    state = made.statefulset("kafka", "kpo-broker")
    assert state is not None
    assert core.node_reads == ["n1"]  # the first refusal stops the others
    assert all(p.node_exists is None and p.node_ready is None for p in state.pods.values())
    clock.now += NODE_RETRY_S - 1
    made.statefulset("kafka", "kpo-broker")
    assert core.node_reads == ["n1"]  # paused
    clock.now += 2
    core.nodes["n1"] = node_dict("n1")
    state = made.statefulset("kafka", "kpo-broker")
    assert state is not None
    assert core.node_reads == ["n1", "n1", "n2"]  # retried, allowed again
    assert state.pods[0].node_ready is True


def test_reader_node_server_error_is_an_error() -> None:
    made, _apps, _core = reader(
        sts_dict(), [pod_dict(0)], {"n1": ApiException(status=500, reason="Internal")}
    )
    with pytest.raises(ObjectStoreError, match="get node n1: 500"):
        made.statefulset("kafka", "kpo-broker")


def test_reader_unscheduled_pod_reads_no_node() -> None:
    made, _apps, core = reader(sts_dict(), [pod_dict(0, node=None)], {})
    state = made.statefulset("kafka", "kpo-broker")
    assert state is not None
    assert core.node_reads == []
    assert state.pods[0].node_name is None


def test_reader_pod_age_uses_api_timestamps() -> None:
    created = (NOW - timedelta(seconds=30)).isoformat()
    made, _apps, _core = reader(sts_dict(), [pod_dict(0, created=created)], {})
    state = made.statefulset("kafka", "kpo-broker")
    assert state is not None
    assert state.pods[0].created == NOW - timedelta(seconds=30)
