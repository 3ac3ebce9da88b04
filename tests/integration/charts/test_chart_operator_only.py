"""``helm install`` of the chart's operator-only mode beside an existing Kafka cluster.

The release is installed into the real control plane with ``mode: operator-only`` and
the bootstrap servers of a Kafka cluster the chart did not create (three broker processes
on the session's ZooKeeper, started before the release). Nothing of ZooKeeper or brokers
is installed; the operator's Deployment pod runs as a local process from its rendered
spec with a token of the chart's ServiceAccount (see :mod:`tests.integration.charts.local_pods`)
and completes a throttled reassignment on that cluster; the placement CronJob reads the
Prometheus server given in the values.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kpo_devenv import ControlPlane
from kpo_devenv.kafka_cluster import KafkaCluster
from kpo_devenv.net import free_port
from kpo_devenv.zookeeper import ZooKeeperServer
from tests.integration.broker.conftest import wait_cluster_ready, wait_for
from tests.integration.broker.server.helpers import create_topic, wait_metadata_replicas
from tests.integration.charts.local_pods import LocalPod, Manifest
from tests.integration.operator.conftest import produce
from tests.unit.charts.helm import CHART, helm

pytestmark = pytest.mark.integration

RELEASE = "kpo-only"
NAMESPACE = "kpo-operator-only"
PROMETHEUS = "http://prometheus.monitoring.svc:9090"


def _helm(plane: ControlPlane, *args: str) -> str:
    result = helm(*args, "--namespace", NAMESPACE, "--kubeconfig", str(plane.kubeconfig))
    assert result.returncode == 0, result.stderr
    return result.stdout


def _service_account_kubeconfig(plane: ControlPlane, account: str, path: Path) -> Path:
    token = plane.kubectl(
        "create", "token", account, "-n", NAMESPACE, "--duration=1h"
    ).stdout.strip()
    config = yaml.safe_load(Path(plane.kubeconfig).read_text())
    for user in config["users"]:
        user["user"] = {"token": token}
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture
def existing_kafka(zookeeper: ZooKeeperServer, tmp_path: Path) -> Iterator[KafkaCluster]:
    """A 3-broker Kafka cluster started outside the chart."""
    chroot = f"existing-{uuid.uuid4().hex[:8]}"
    cluster = KafkaCluster(tmp_path / chroot, f"{zookeeper.connect_string}/{chroot}", 3)
    try:
        cluster.start()
        wait_cluster_ready(cluster, 60)
        yield cluster
    finally:
        cluster.stop()


def test_operator_only_release_drives_an_existing_cluster(
    control_plane: ControlPlane, existing_kafka: KafkaCluster, tmp_path: Path
) -> None:
    values = {
        "mode": "operator-only",
        "operator": {
            "bootstrapServers": existing_kafka.bootstrap_servers,
            "watchNamespaces": [NAMESPACE],
            "pollIntervalSeconds": 1,
        },
        "placement": {"prometheusUrl": PROMETHEUS, "prometheusWindowSeconds": 600},
    }
    values_file = tmp_path / "values.yaml"
    values_file.write_text(yaml.safe_dump(values))
    control_plane.kubectl("create", "namespace", NAMESPACE)
    operator = None
    try:
        _helm(control_plane, "install", RELEASE, str(CHART), "-f", str(values_file))
        objects: list[Manifest] = [
            d for d in yaml.safe_load_all(_helm(control_plane, "get", "manifest", RELEASE)) if d
        ]
        kinds = {o["kind"] for o in objects}
        assert not kinds & {"StatefulSet", "Service", "PodDisruptionBudget"}, kinds
        assert not [o for o in objects if "zookeeper" in o["metadata"]["name"]]
        assert _helm(control_plane, "get", "hooks", RELEASE).strip() == ""  # no helm test pod
        pods = json.loads(
            control_plane.kubectl(
                "get", "statefulsets,services", "-n", NAMESPACE, "-o", "json"
            ).stdout
        )
        assert pods["items"] == []
        (cron,) = [o for o in objects if o["kind"] == "CronJob"]
        (job,) = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
        assert f"--prometheus-url={PROMETHEUS}" in job["args"] and "--window=600" in job["args"]
        assert f"--bootstrap-server={existing_kafka.bootstrap_servers}" in job["args"]
        notes = _helm(control_plane, "get", "notes", RELEASE)
        assert "Mode operator-only" in notes and "Brokers:" not in notes

        (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
        spec = deployment["spec"]["template"]["spec"]
        kubeconfig = _service_account_kubeconfig(
            control_plane, spec["serviceAccountName"], tmp_path / "operator-kubeconfig"
        )
        pod = LocalPod(
            "operator",
            spec,
            objects,
            tmp_path / "operator",
            labels=deployment["spec"]["template"]["metadata"].get("labels", {}),
            namespace=NAMESPACE,
            overrides={"KPO_LIVENESS_PORT": str(free_port()), "KUBECONFIG": str(kubeconfig)},
        )
        operator = pod.start()

        create_topic(existing_kafka, "orders", assignment={0: [0, 1]})
        produce(existing_kafka, "orders", 1, 2 * 1024 * 1024)
        manifest: dict[str, Any] = {
            "apiVersion": "kpo.dev/v1alpha1",
            "kind": "PartitionReassignment",
            "metadata": {"name": "to-2", "namespace": NAMESPACE},
            "spec": {
                "partitions": [{"topic": "orders", "partition": 0, "replicas": [2, 1]}],
                "throttle": {"replicationRate": 2 * 1024 * 1024},
            },
        }
        control_plane.kubectl("apply", "-f", "-", input_text=yaml.safe_dump(manifest))

        def phase() -> str:
            out = control_plane.kubectl(
                "get", "pr", "to-2", "-n", NAMESPACE, "-o", "jsonpath={.status.phase}"
            ).stdout
            return out.strip()

        try:
            wait_for(lambda: phase() in {"Completed", "Failed"}, 120, "the reassignment to end")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\noperator log:\n{operator.log_tail(40)}") from exc
        assert phase() == "Completed"
        wait_metadata_replicas(existing_kafka, "orders", {0: [2, 1]})
        refused = [
            line for line in operator.log_path.read_text().splitlines() if "Forbidden" in line
        ]
        assert not refused, refused[:5]
    finally:
        if operator is not None:
            operator.stop(timeout_s=15)
        helm("uninstall", RELEASE, "-n", NAMESPACE, "--kubeconfig", str(control_plane.kubeconfig))
        control_plane.drop_finalizers(NAMESPACE)
        control_plane.kubectl("delete", "namespace", NAMESPACE, "--wait=false", check=False)
