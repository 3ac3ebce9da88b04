"""The real control plane: etcd + kube-apiserver, one kubeconfig for kubectl and Python."""

import json
import os
import time
from pathlib import Path

import pytest
from kubernetes import client

from kpo_devenv import ControlPlane, ProcessStartError
from kpo_operator.resources import ALL_KINDS, GROUP
from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.integration


def _pinned_kubernetes_version() -> str:
    for line in (REPO_ROOT / "tools" / "versions.env").read_text().splitlines():
        if line.startswith("KUBERNETES_VERSION="):
            return line.split("=", 1)[1].strip()
    raise AssertionError("KUBERNETES_VERSION missing from tools/versions.env")


def _gone(pid: int) -> bool:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def test_apiserver_reports_the_pinned_release(control_plane: ControlPlane) -> None:
    version = json.loads(control_plane.apiserver.get("/version"))
    assert version["gitVersion"] == _pinned_kubernetes_version()
    assert version["gitTreeState"] == "clean"


def test_kubectl_uses_the_kubeconfig(control_plane: ControlPlane) -> None:
    out = control_plane.kubectl("version", "-o", "json").stdout
    versions = json.loads(out)
    assert versions["serverVersion"]["gitVersion"] == _pinned_kubernetes_version()
    assert versions["clientVersion"]["gitVersion"] == _pinned_kubernetes_version()
    assert (
        control_plane.kubectl("auth", "whoami", "-o", "jsonpath={.status.userInfo.username}").stdout
        == "kpo-admin"
    )


def test_python_client_uses_the_same_kubeconfig(kube_client: client.ApiClient) -> None:
    names = {ns.metadata.name for ns in client.CoreV1Api(kube_client).list_namespace().items}
    assert {"default", "kube-system"} <= names


def test_crds_are_established_with_short_names(
    control_plane: ControlPlane, kube_client: client.ApiClient
) -> None:
    api = client.ApiextensionsV1Api(kube_client)
    for kind in ALL_KINDS:
        crd = api.read_custom_resource_definition(kind.crd_name)
        established = [c for c in crd.status.conditions if c.type == "Established"]
        assert established and established[0].status == "True"
        assert tuple(crd.spec.names.short_names) == kind.short_names
    listed = control_plane.kubectl("api-resources", f"--api-group={GROUP}", "-o", "name").stdout
    assert set(listed.split()) == {f"{k.plural}.{GROUP}" for k in ALL_KINDS}


def test_start_stop_leaves_no_process(tmp_path: Path) -> None:
    plane = ControlPlane(tmp_path).start()
    pids = [p.pid for p in plane.processes]
    assert all(p.is_running() for p in plane.processes)
    plane.stop()
    assert all(pid is not None and _gone(pid) for pid in pids)


def test_failed_apiserver_start_shows_its_log_tail_and_stops_etcd(tmp_path: Path) -> None:
    plane = ControlPlane(tmp_path)
    plane.apiserver.process.argv.append("--no-such-flag")
    with pytest.raises(ProcessStartError) as info:
        plane.start()
    message = str(info.value)
    assert "kube-apiserver exited" in message
    assert "unknown flag: --no-such-flag" in message
    etcd_pid = plane.etcd.process.pid
    assert etcd_pid is not None and _gone(etcd_pid)
