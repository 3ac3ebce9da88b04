"""``helm install``/``upgrade``/``uninstall`` of the chart into a cluster of real parts.

etcd, kube-apiserver, kube-controller-manager and kube-scheduler are the real binaries;
kwok stands in for the kubelets of three fake nodes (zones a/b/c) and marks the pods
bound to them Running. Volumes come from pre-created hostPath PersistentVolumes of a
StorageClass with ``volumeBindingMode: Immediate``. The tests run in file order: install,
upgrade, uninstall of one release. kwok's pods never finish, so the security bootstrap
hook Job could not complete: install and upgrade pass ``--no-hooks`` (the hook's pod runs
against real brokers in ``test_chart_processes.py``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kpo_devenv import ControlPlane
from kpo_devenv.cluster_addons import ClusterAddons
from tests.integration.charts.storage import hostpath_storage
from tests.unit.charts.helm import CHART, helm

pytestmark = pytest.mark.integration

RELEASE = "kpo-it"  # contains "kpo": the objects are named "kpo-it-<component>"
NAMESPACE = "kpo-helm-it"
STORAGE_CLASS = "kpo-kwok-local"
PV_COUNT = 5  # 1 ZooKeeper + 3 brokers + 1 spare
INSTANCE = f"app.kubernetes.io/instance={RELEASE}"
VALUES: dict[str, Any] = {
    "zookeeper": {"replicas": 1, "storage": {"storageClassName": STORAGE_CLASS, "size": "1Gi"}},
    "broker": {
        "replicas": 3,
        "storage": {"storageClassName": STORAGE_CLASS, "size": "1Gi"},
        "rack": {"source": "nodeLabel", "nodeLabel": "topology.kubernetes.io/zone"},
        "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "2Gi"}},
    },
    "placement": {"action": "dry-run", "schedule": "0 3 * * *"},
}
STATEFULSETS = {f"{RELEASE}-zookeeper", f"{RELEASE}-broker"}
DEPLOYMENTS = {f"{RELEASE}-operator"}
CRONJOBS = {f"{RELEASE}-placement"}
POD_COUNT = 1 + 3 + 1  # ZooKeeper, brokers, operator
CLAIMS = {f"data-{RELEASE}-zookeeper-0"} | {f"data-{RELEASE}-broker-{i}" for i in range(3)}
SECRETS = {f"{RELEASE}-{name}" for name in ("ca", "broker-tls", "zookeeper-sasl")} | {
    f"{RELEASE}-user-{component}" for component in ("operator", "placement", "test")
}


def _wait_for(check: Callable[[], bool], what: str, timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


def _get(plane: ControlPlane, *args: str) -> list[dict[str, Any]]:
    out = plane.kubectl("get", *args, "-n", NAMESPACE, "-l", INSTANCE, "-o", "json").stdout
    items: list[dict[str, Any]] = json.loads(out)["items"]
    return items


def _helm(plane: ControlPlane, *args: str) -> str:
    result = helm(*args, "--namespace", NAMESPACE, "--kubeconfig", str(plane.kubeconfig))
    assert result.returncode == 0, result.stderr
    return result.stdout


def _values_file(directory: Path, values: dict[str, Any]) -> str:
    path = directory / f"values-{time.monotonic_ns()}.yaml"
    path.write_text(yaml.safe_dump(values))
    return str(path)


@pytest.fixture(scope="module")
def release(
    control_plane: ControlPlane,
    cluster_addons: ClusterAddons,
    fake_nodes: list[str],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Path]:
    """The chart installed as ``RELEASE`` in ``NAMESPACE``; yields a folder for values files.

    At the end the release (if still there), the namespace, the PersistentVolumes and the
    StorageClass are deleted while kube-controller-manager still runs to finalize them.
    """
    workdir = tmp_path_factory.mktemp("helm-install")
    storage = yaml.safe_dump_all(hostpath_storage(STORAGE_CLASS, PV_COUNT, workdir / "volumes"))
    control_plane.kubectl("create", "namespace", NAMESPACE)
    control_plane.kubectl("create", "-f", "-", input_text=storage)
    try:
        _helm(
            control_plane,
            "install",
            RELEASE,
            str(CHART),
            "-f",
            _values_file(workdir, VALUES),
            "--no-hooks",
        )
        yield workdir
    finally:
        helm("uninstall", RELEASE, "-n", NAMESPACE, "--kubeconfig", str(control_plane.kubeconfig))
        control_plane.kubectl("delete", "namespace", NAMESPACE, "--timeout=90s")
        control_plane.kubectl("delete", "-f", "-", "--timeout=60s", input_text=storage)


def _pods_running_on(plane: ControlPlane, nodes: list[str]) -> list[dict[str, Any]] | None:
    pods = _get(plane, "pods")
    if len(pods) != POD_COUNT:
        return None
    for pod in pods:
        if pod["status"].get("phase") != "Running" or "deletionTimestamp" in pod["metadata"]:
            return None
        assert pod["spec"].get("nodeName") in nodes, pod["metadata"]["name"]
    return pods


def _names(items: list[dict[str, Any]]) -> set[str]:
    return {str(item["metadata"]["name"]) for item in items}


def test_install_creates_workloads_with_running_pods_and_bound_claims(
    control_plane: ControlPlane, release: Path, fake_nodes: list[str]
) -> None:
    assert _names(_get(control_plane, "statefulsets")) == STATEFULSETS
    assert _names(_get(control_plane, "deployments")) == DEPLOYMENTS
    assert _names(_get(control_plane, "cronjobs")) == CRONJOBS

    _wait_for(lambda: _pods_running_on(control_plane, fake_nodes) is not None, "Running pods")
    _wait_for(
        lambda: all(
            s["status"].get("readyReplicas") == s["spec"]["replicas"]
            for s in _get(control_plane, "statefulsets")
        ),
        "StatefulSets ready",
    )
    _wait_for(
        lambda: all(
            d["status"].get("availableReplicas") == 1 for d in _get(control_plane, "deployments")
        ),
        "operator Deployment available",
    )
    claims = _get(control_plane, "pvc")
    assert _names(claims) == CLAIMS
    assert _names(_get(control_plane, "secrets")) == SECRETS
    hooks = _helm(control_plane, "get", "hooks", RELEASE)
    assert f"name: {RELEASE}-security-bootstrap\n" in hooks
    for claim in claims:
        assert claim["status"]["phase"] == "Bound"
        assert claim["spec"]["storageClassName"] == STORAGE_CLASS
        assert claim["spec"]["volumeName"].startswith(f"{STORAGE_CLASS}-")
    # The chart leaves persistentVolumeClaimRetentionPolicy unset: Kubernetes' default
    # keeps the claims when a StatefulSet is deleted or scaled down.
    for sts in _get(control_plane, "statefulsets"):
        policy = sts["spec"].get("persistentVolumeClaimRetentionPolicy", {})
        assert policy.get("whenDeleted", "Retain") == "Retain"


def test_upgrade_changes_broker_resources_and_placement_schedule(
    control_plane: ControlPlane, release: Path, fake_nodes: list[str]
) -> None:
    values = json.loads(json.dumps(VALUES))
    values["broker"]["resources"]["requests"]["cpu"] = "250m"
    values["placement"]["schedule"] = "30 4 * * 1"
    secrets = {s["metadata"]["name"]: s["data"] for s in _get(control_plane, "secrets")}
    _helm(
        control_plane,
        "upgrade",
        RELEASE,
        str(CHART),
        "-f",
        _values_file(release, values),
        "--no-hooks",
    )
    # The generated CA, the broker certificates and every password survive the upgrade.
    after = {s["metadata"]["name"]: s["data"] for s in _get(control_plane, "secrets")}
    assert after == secrets

    (cronjob,) = _get(control_plane, "cronjobs")
    assert cronjob["spec"]["schedule"] == "30 4 * * 1"
    (broker,) = [
        s for s in _get(control_plane, "statefulsets") if s["metadata"]["name"].endswith("-broker")
    ]
    (container,) = [
        c for c in broker["spec"]["template"]["spec"]["containers"] if c["name"] == "broker"
    ]
    assert container["resources"]["requests"]["cpu"] == "250m"

    def brokers_rolled() -> bool:
        pods = _pods_running_on(control_plane, fake_nodes)
        if pods is None:
            return False
        brokers = [
            p
            for p in pods
            if p["metadata"]["labels"].get("app.kubernetes.io/component") == "broker"
        ]
        cpus = {
            c["resources"]["requests"]["cpu"]
            for p in brokers
            for c in p["spec"]["containers"]
            if c["name"] == "broker"
        }
        return len(brokers) == 3 and cpus == {"250m"}

    _wait_for(brokers_rolled, "brokers replaced with the new resources")
    assert _helm(control_plane, "history", RELEASE, "-o", "json").count('"revision"') == 2
    # The claims stay bound to the same volumes across the rolling update.
    assert {c["status"]["phase"] for c in _get(control_plane, "pvc")} == {"Bound"}


def test_uninstall_removes_every_object_except_the_retained_claims_and_ledger(
    control_plane: ControlPlane, release: Path
) -> None:
    _helm(control_plane, "uninstall", RELEASE)
    resources = control_plane.kubectl(
        "api-resources", "--verbs=list", "--namespaced=true", "-o", "name"
    ).stdout.split()
    kinds = ",".join(
        r
        for r in resources
        if r not in ("persistentvolumeclaims", "events", "events.events.k8s.io")
    )

    def leftovers() -> list[str]:
        out = control_plane.kubectl(
            "get", kinds, "-n", NAMESPACE, "-l", INSTANCE, "-o", "name"
        ).stdout
        return out.split()

    # The throttle ownership ledger is kept (helm.sh/resource-policy: keep): a reinstall must
    # still know which throttle values the operator wrote, so it neither leaks nor deletes
    # values that other tools set. So is the generated CA: a reinstall keeps trusting it.
    kept = sorted([f"configmap/{RELEASE}-operator-throttle-ledger", f"secret/{RELEASE}-ca"])
    _wait_for(
        lambda: sorted(leftovers()) == kept,
        f"only the ledger and the CA of the release left (have {leftovers()})",
    )
    cluster_scoped = control_plane.kubectl(
        "get", "clusterroles,clusterrolebindings", "-l", INSTANCE, "-o", "name"
    ).stdout.split()
    assert cluster_scoped == []
    release_records = control_plane.kubectl(
        "get", "secrets", "-n", NAMESPACE, "-l", f"owner=helm,name={RELEASE}", "-o", "name"
    ).stdout.split()
    assert release_records == []
    # Kept by Kubernetes by design (retention policy Retain), as are the CRDs (Helm never
    # deletes CRDs).
    assert _names(_get(control_plane, "pvc")) == CLAIMS
    for crd in ("partitionreassignments.kpo.dev", "topicreplicaquotas.kpo.dev"):
        control_plane.kubectl("get", "crd", crd)
