"""The rest of a cluster on top of :class:`ControlPlane`: controllers, scheduler, fake nodes.

kube-controller-manager runs the workload, garbage-collection, namespace,
service-account and PersistentVolume binding controllers; kube-scheduler binds
pods to nodes; kwok plays the kubelet of fake Node objects (it marks the pods
bound to them Running without starting any container). Together they let a
Helm release go all the way to Running pods and Bound claims on loopback.
"""

from __future__ import annotations

import json
import ssl
import urllib.request
from collections.abc import Sequence
from pathlib import Path

import yaml

from kpo_devenv.controlplane import ControlPlane
from kpo_devenv.net import LOOPBACK, free_port
from kpo_devenv.process import ManagedProcess
from kpo_devenv.tools import tool_path

#: Annotation (and value) that marks the nodes kwok manages
#: (``--manage-nodes-with-annotation-selector``).
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
KWOK_NODE_VALUE = "fake"
#: Label every fake node carries, to find (and delete) them again.
FAKE_NODE_LABEL = "kpo.dev/fake-node"
#: Node label holding the zone (the well-known ``topology.kubernetes.io/zone``).
ZONE_LABEL = "topology.kubernetes.io/zone"
#: Pod IP range kwok assigns from (``--cidr``); kept apart from the service CIDR.
POD_CIDR = "10.244.0.0/16"

_STAGE_API = "kwok.x-k8s.io/v1alpha1"

# Go templates kwok renders into a status patch. A node becomes Ready with an
# InternalIP; a bound pod goes from Pending to Running with every container
# running and every init container completed.
_NODE_READY_STATUS = """
{{ $t := Now | Quote }}
phase: Running
addresses:
- {type: InternalIP, address: {{ NodeIP | Quote }}}
- {type: Hostname, address: {{ .metadata.name | Quote }}}
conditions:
- type: Ready
  status: "True"
  reason: KwokReady
  lastHeartbeatTime: {{ $t }}
  lastTransitionTime: {{ $t }}
"""
_POD_RUNNING_STATUS = """
{{ $t := Now | Quote }}
phase: Running
startTime: {{ $t }}
hostIP: {{ NodeIPWith .spec.nodeName | Quote }}
{{ $hostNet := or .spec.hostNetwork false }}
{{ $uid := or .metadata.uid "" }}
{{ $ip := PodIPWith .spec.nodeName $hostNet $uid .metadata.name .metadata.namespace }}
podIP: {{ $ip | Quote }}
podIPs:
- ip: {{ $ip | Quote }}
conditions:
{{ range list "PodScheduled" "Initialized" "ContainersReady" "Ready" }}
- {type: {{ . }}, status: "True", lastTransitionTime: {{ $t }}}
{{ end }}
initContainerStatuses:
{{ range .spec.initContainers }}
- name: {{ .name | Quote }}
  image: {{ .image | Quote }}
  ready: true
  restartCount: 0
  state: {terminated: {exitCode: 0, reason: Completed, startedAt: {{ $t }}, finishedAt: {{ $t }}}}
{{ end }}
containerStatuses:
{{ range .spec.containers }}
- name: {{ .name | Quote }}
  image: {{ .image | Quote }}
  ready: true
  started: true
  restartCount: 0
  state: {running: {startedAt: {{ $t }}}}
{{ end }}
"""


def kwok_stages() -> list[dict[str, object]]:
    """Return the kwok Stage objects this dev cluster uses (kwok has none built in).

    ``kpo-node-ready``: a managed node not yet Ready turns Ready.
    ``kpo-pod-running``: a Pending pod bound to a managed node turns Running.
    ``kpo-pod-gone``: a pod with a deletion timestamp is removed at once (no grace).
    """

    def stage(
        name: str, kind: str, expressions: list[dict[str, object]], then: object
    ) -> dict[str, object]:
        return {
            "apiVersion": _STAGE_API,
            "kind": "Stage",
            "metadata": {"name": name},
            "spec": {
                "resourceRef": {"apiGroup": "v1", "kind": kind},
                "selector": {"matchExpressions": expressions},
                "next": then,
            },
        }

    ready = '.status.conditions.[] | select( .type == "Ready" ) | .status'
    return [
        stage(
            "kpo-node-ready",
            "Node",
            [{"key": ready, "operator": "NotIn", "values": ["True"]}],
            {"statusTemplate": _NODE_READY_STATUS},
        ),
        stage(
            "kpo-pod-running",
            "Pod",
            [
                {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"},
                {"key": ".status.phase", "operator": "In", "values": ["Pending"]},
            ],
            {"statusTemplate": _POD_RUNNING_STATUS},
        ),
        stage(
            "kpo-pod-gone",
            "Pod",
            [{"key": ".metadata.deletionTimestamp", "operator": "Exists"}],
            {"delete": True},
        ),
    ]


def _insecure_healthz(url: str) -> bool:
    """Return whether ``url`` answers ``ok``; the self-signed serving cert is not checked."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    handler = urllib.request.HTTPSHandler(context=context) if url.startswith("https") else None
    opener = urllib.request.build_opener(*([handler] if handler else []))
    with opener.open(url, timeout=2) as response:
        return bool(response.read().strip() == b"ok")


class _Addon:
    """A ManagedProcess answering ``/healthz`` on a loopback port."""

    name = ""
    scheme = "https"

    def __init__(self, workdir: Path, argv: Sequence[str], port: int) -> None:
        self.workdir = workdir
        self.port = port
        self.process = ManagedProcess(self.name, argv, workdir / f"{self.name}.log")

    @property
    def healthz_url(self) -> str:
        """The health endpoint, e.g. ``"https://127.0.0.1:10257/healthz"``."""
        return f"{self.scheme}://{LOOPBACK}:{self.port}/healthz"

    def is_healthy(self) -> bool:
        """Return whether ``/healthz`` answers ``ok``."""
        return _insecure_healthz(self.healthz_url)

    def start(self, timeout_s: float = 60.0) -> None:
        """Start the process and wait until ``/healthz`` answers ``ok``.

        Raises:
            ProcessStartError: it exited or stayed unhealthy (message carries the log tail).
        """
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.process.start()
        self.process.wait_ready(self.is_healthy, timeout_s, interval_s=0.3)

    def stop(self) -> None:
        """Stop the process (idempotent)."""
        self.process.stop()


class KubeControllerManager(_Addon):
    """kube-controller-manager against ``plane``, signing tokens with the PKI's service-account key.

    ``--service-account-private-key-file`` is the private half of the apiserver's
    ``--service-account-key-file``; ``--root-ca-file`` is published into every
    namespace as ConfigMap ``kube-root-ca.crt``. Leader election is off (one instance).

    Args:
        workdir: folder for ``kube-controller-manager.log``.
        plane: a started control plane (its kubeconfig and PKI are used).
    """

    name = "kube-controller-manager"

    def __init__(self, workdir: Path, plane: ControlPlane) -> None:
        port = free_port()
        pki = plane.pki
        super().__init__(
            workdir,
            [
                str(tool_path("kube-controller-manager")),
                f"--kubeconfig={plane.kubeconfig}",
                f"--authentication-kubeconfig={plane.kubeconfig}",
                f"--authorization-kubeconfig={plane.kubeconfig}",
                f"--bind-address={LOOPBACK}",
                f"--secure-port={port}",
                f"--cert-dir={workdir / 'certs'}",
                f"--service-account-private-key-file={pki.service_account_key}",
                f"--root-ca-file={pki.ca.cert}",
                f"--cluster-signing-cert-file={pki.ca.cert}",
                f"--cluster-signing-key-file={pki.ca.key}",
                "--use-service-account-credentials=true",
                "--controllers=*",
                "--leader-elect=false",
                "--profiling=false",
            ],
            port,
        )


class KubeScheduler(_Addon):
    """kube-scheduler against ``plane`` with its default profile; leader election off.

    Args:
        workdir: folder for ``kube-scheduler.log``.
        plane: a started control plane (its kubeconfig is used).
    """

    name = "kube-scheduler"

    def __init__(self, workdir: Path, plane: ControlPlane) -> None:
        port = free_port()
        super().__init__(
            workdir,
            [
                str(tool_path("kube-scheduler")),
                f"--kubeconfig={plane.kubeconfig}",
                f"--authentication-kubeconfig={plane.kubeconfig}",
                f"--authorization-kubeconfig={plane.kubeconfig}",
                f"--bind-address={LOOPBACK}",
                f"--secure-port={port}",
                f"--cert-dir={workdir / 'certs'}",
                "--leader-elect=false",
                "--profiling=false",
            ],
            port,
        )


class Kwok(_Addon):
    """kwok managing only the nodes annotated ``kwok.x-k8s.io/node=fake``.

    Its config holds :func:`kwok_stages`: managed nodes turn Ready (kwok renews
    their leases), pods bound to them become Running (pod IP from
    :data:`POD_CIDR`), deleted pods are removed at once.

    Args:
        workdir: folder for ``kwok.log`` and kwok's (empty) config file.
        plane: a started control plane (its kubeconfig is used).
    """

    name = "kwok"
    scheme = "http"

    def __init__(self, workdir: Path, plane: ControlPlane) -> None:
        port = free_port()
        config = workdir / "kwok.yaml"
        super().__init__(
            workdir,
            [
                str(tool_path("kwok")),
                f"--config={config}",
                f"--kubeconfig={plane.kubeconfig}",
                "--manage-all-nodes=false",
                f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}={KWOK_NODE_VALUE}",
                f"--cidr={POD_CIDR}",
                f"--node-ip={LOOPBACK}",
                f"--server-address={LOOPBACK}:{port}",
                "--node-lease-duration-seconds=40",
            ],
            port,
        )
        self.config = config

    def start(self, timeout_s: float = 60.0) -> None:
        """Write the kwok config (the :func:`kwok_stages`), start kwok, wait until healthy.

        Raises:
            ProcessStartError: it exited or stayed unhealthy (message carries the log tail).
        """
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.config.write_text(yaml.safe_dump_all(kwok_stages(), sort_keys=False))
        super().start(timeout_s)


def fake_node(name: str, zone: str, cpu: str = "32", memory: str = "256Gi") -> dict[str, object]:
    """Return a Node manifest kwok will manage, labelled with ``zone``.

    Args:
        name: the node name (also its ``kubernetes.io/hostname`` label).
        zone: value of ``topology.kubernetes.io/zone``.
        cpu: CPU capacity, Kubernetes quantity (cores).
        memory: memory capacity, Kubernetes quantity (bytes, e.g. ``"256Gi"``).
    """
    capacity = {"cpu": cpu, "memory": memory, "pods": "110", "ephemeral-storage": "1Ti"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {KWOK_NODE_ANNOTATION: KWOK_NODE_VALUE},
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "type": "kwok",
                FAKE_NODE_LABEL: "true",
                ZONE_LABEL: zone,
            },
        },
        "spec": {},
        "status": {"capacity": capacity, "allocatable": capacity},
    }


def create_fake_nodes(
    plane: ControlPlane, zones: Sequence[str], prefix: str = "kwok-node"
) -> list[str]:
    """Create one fake node per entry of ``zones`` (``<prefix>-0``, ``<prefix>-1``, ...).

    Args:
        plane: the control plane to create them in.
        zones: the zone of each node, e.g. ``["zone-a", "zone-b", "zone-c"]``.
        prefix: node name prefix.

    Returns:
        The node names, in the order of ``zones``.

    Raises:
        KubectlError: the apiserver refused a node.
    """
    nodes = [fake_node(f"{prefix}-{i}", zone) for i, zone in enumerate(zones)]
    plane.kubectl("create", "-f", "-", input_text=yaml.safe_dump_all(nodes))
    return [str(node["metadata"]["name"]) for node in nodes]  # type: ignore[index]


def ready_nodes(plane: ControlPlane, names: Sequence[str]) -> set[str]:
    """Return which of ``names`` report condition ``Ready=True``.

    Raises:
        KubectlError: the nodes could not be listed.
    """
    listing = json.loads(plane.kubectl("get", "nodes", "-o", "json").stdout)
    ready: set[str] = set()
    for node in listing["items"]:
        conditions = node.get("status", {}).get("conditions", [])
        if any(c["type"] == "Ready" and c["status"] == "True" for c in conditions):
            ready.add(node["metadata"]["name"])
    return ready & set(names)


def delete_fake_nodes(plane: ControlPlane) -> None:
    """Delete every node carrying :data:`FAKE_NODE_LABEL` and wait until they are gone.

    Raises:
        KubectlError: the deletion failed or timed out.
    """
    plane.kubectl("delete", "nodes", "-l", f"{FAKE_NODE_LABEL}=true", "--wait=true")


class ClusterAddons:
    """kube-controller-manager, kube-scheduler and kwok for one control plane.

    Args:
        workdir: parent folder of the three processes' folders.
        plane: a started control plane.
    """

    def __init__(self, workdir: Path, plane: ControlPlane) -> None:
        self.controller_manager = KubeControllerManager(workdir / "controller-manager", plane)
        self.scheduler = KubeScheduler(workdir / "scheduler", plane)
        self.kwok = Kwok(workdir / "kwok", plane)

    @property
    def processes(self) -> list[ManagedProcess]:
        """The processes, in start order."""
        return [a.process for a in (self.controller_manager, self.scheduler, self.kwok)]

    def start(self) -> ClusterAddons:
        """Start the controller manager, the scheduler, then kwok; stop all on any failure.

        Raises:
            ProcessStartError: a process did not become healthy (message carries its log tail).
        """
        try:
            self.controller_manager.start()
            self.scheduler.start()
            self.kwok.start()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop kwok, the scheduler and the controller manager (idempotent)."""
        self.kwok.stop()
        self.scheduler.stop()
        self.controller_manager.stop()
