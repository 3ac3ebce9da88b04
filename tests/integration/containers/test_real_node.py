"""``helm install`` of the whole chart on a real node: kpo's images run as real pods.

A control plane of its own (etcd, kube-apiserver, kube-controller-manager, kube-scheduler)
and one real node (:mod:`kpo_devenv.real_node`: containerd, the kubelet, kube-proxy,
CoreDNS) run the release's pods from the images built from this tree: ZooKeeper, three
brokers, the operator, the security hook Job and the ``helm test`` pod, with the chart's
default security (SASL_SSL clients, mutual TLS between brokers, ZooKeeper SASL). Services
and DNS names are real (kube-proxy, CoreDNS); volumes are hostPath PersistentVolumes.

Skipped when the node's tools are missing (``bash tools/install.sh node`` installs them:
containerd and the CNI plugins from Debian, the kubelet, kube-proxy and CoreDNS from the Go
module proxy) or when podman cannot run containers here.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kpo_devenv import ControlPlane
from kpo_devenv.cluster_addons import KubeControllerManager, KubeScheduler
from kpo_devenv.real_node import RealNode, required_tools
from kpo_devenv.tools import tool_path
from tests.integration.charts.storage import hostpath_storage
from tests.unit.charts.helm import CHART

pytestmark = pytest.mark.integration

RELEASE = "kpo-real"
NAMESPACE = "kpo-real-node"
STORAGE_CLASS = "kpo-real-local"
PV_COUNT = 5  # 1 ZooKeeper + 3 brokers + 1 spare
INSTANCE = f"app.kubernetes.io/instance={RELEASE}"
#: Small requests: the node has 2 cores for five pods, a Job and the test pod.
SMALL = {"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"memory": "1Gi"}}


def _image(ref: str) -> dict[str, str]:
    repository, tag = ref.rsplit(":", 1)
    return {"repository": repository, "tag": tag, "pullPolicy": "Never"}


def _values(images: dict[str, str]) -> dict[str, Any]:
    return {
        "image": _image(images["kpo"]),
        "zookeeper": {
            "replicas": 1,
            "image": _image(images["zookeeper"]),
            "storage": {"storageClassName": STORAGE_CLASS, "size": "1Gi"},
            "resources": SMALL,
        },
        "broker": {
            "replicas": 3,
            "storage": {"storageClassName": STORAGE_CLASS, "size": "1Gi"},
            "rack": {"source": "static", "racks": ["a", "b", "c"]},
            "resources": SMALL,
        },
        "operator": {"resources": SMALL},
        "placement": {
            "image": _image(images["placement"]),
            "action": "dry-run",
            "schedule": "0 3 * * *",
            "resources": SMALL,
        },
    }


def _wait_for(check: Callable[[], bool], what: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(2)


@pytest.fixture(scope="module")
def plane(
    images: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ControlPlane]:
    """A control plane with kube-controller-manager, kube-scheduler and one real node."""
    missing = required_tools()
    if missing:
        pytest.skip(f"a real node needs {', '.join(missing)}: bash tools/install.sh node")
    workdir = tmp_path_factory.mktemp("real-node")
    plane = ControlPlane(workdir / "plane").start()
    started: list[Any] = [plane]
    try:
        for addon in (
            KubeControllerManager(workdir / "kcm", plane),
            KubeScheduler(workdir / "scheduler", plane),
        ):
            addon.start()
            started.append(addon)
        node = RealNode(workdir / "node", plane)
        started.append(node.start([images["kpo"], images["zookeeper"], images["placement"]]))
        yield plane
    finally:
        for component in reversed(started):
            component.stop()


def _helm(plane: ControlPlane, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [str(tool_path("helm")), *args, "--namespace", NAMESPACE]
    argv += ["--kubeconfig", str(plane.kubeconfig)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=1200, check=False)


def _pods(plane: ControlPlane) -> list[dict[str, Any]]:
    out = plane.kubectl("get", "pods", "-n", NAMESPACE, "-l", INSTANCE, "-o", "json").stdout
    items: list[dict[str, Any]] = json.loads(out)["items"]
    return items


def _ready(pod: dict[str, Any]) -> bool:
    conditions = pod.get("status", {}).get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def _diagnostics(plane: ControlPlane) -> str:
    pods = plane.kubectl("get", "pods", "-n", NAMESPACE, "-o", "wide", check=False).stdout
    events = plane.kubectl(
        "get", "events", "-n", NAMESPACE, "--sort-by=.lastTimestamp", check=False
    ).stdout
    return f"{pods}\n{events[-4000:]}"


def test_helm_install_runs_real_pods_and_helm_test_passes(
    plane: ControlPlane, images: dict[str, str], tmp_path: Path
) -> None:
    plane.kubectl("create", "namespace", NAMESPACE)
    plane.kubectl(
        "create",
        "-f",
        "-",
        input_text=yaml.safe_dump_all(hostpath_storage(STORAGE_CLASS, PV_COUNT, tmp_path / "pv")),
    )
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump(_values(images)))

    # The post-install hook (the security bootstrap Job creating the SCRAM users) runs as
    # a real pod too; helm waits for it.
    installed = _helm(plane, "install", RELEASE, str(CHART), "-f", str(values), "--timeout=12m")
    assert installed.returncode == 0, f"{installed.stderr}\n{_diagnostics(plane)}"

    expected = {f"{RELEASE}-zookeeper-0"} | {f"{RELEASE}-broker-{i}" for i in range(3)}

    def running() -> bool:
        pods = {p["metadata"]["name"]: p for p in _pods(plane)}
        brokers_and_zk = all(name in pods and _ready(pods[name]) for name in expected)
        operator = any(
            name.startswith(f"{RELEASE}-operator-") and _ready(pod) for name, pod in pods.items()
        )
        return brokers_and_zk and operator

    try:
        _wait_for(running, "ZooKeeper, three brokers and the operator Ready", 600)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{_diagnostics(plane)}") from None

    for pod in _pods(plane):
        assert pod["spec"]["nodeName"] == "kpo-node-0"
        assert pod["status"]["podIP"].startswith("10.246.0."), pod["status"]
        for status in pod["status"].get("containerStatuses", []):
            assert status["imageID"], status  # a real container ran the image

    tested = _helm(plane, "test", RELEASE, "--logs", "--timeout=10m")
    assert tested.returncode == 0, f"{tested.stdout}\n{tested.stderr}\n{_diagnostics(plane)}"
    assert "Phase:          Succeeded" in tested.stdout
