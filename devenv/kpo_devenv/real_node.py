"""A real Kubernetes node on this machine: containerd, the kubelet, kube-proxy and CoreDNS.

kwok (:mod:`kpo_devenv.cluster_addons`) only marks pods Running; this node runs them. It
joins a :class:`~kpo_devenv.controlplane.ControlPlane` (with kube-controller-manager and
kube-scheduler from :class:`~kpo_devenv.cluster_addons.ClusterAddons` minus kwok) and
runs the pods bound to it in real containers of locally built images:

- containerd (Debian's ``containerd`` package, CRI plugin) with runc, the overlayfs
  snapshotter and a CNI bridge network (Debian's ``containernetworking-plugins``) giving
  each pod an address of :data:`POD_SUBNET`; images come from podman's store
  (:meth:`Containerd.import_image`), since no registry is reachable;
- the kubelet (built from the Go module proxy like the other Kubernetes binaries),
  registered with a ``system:node:<name>`` client certificate of the control plane's CA;
- kube-proxy in iptables mode, so Service addresses reach their pods;
- CoreDNS (built from the Go module proxy) serving ``cluster.local`` behind a
  ``kube-system/kube-dns`` Service at :data:`CLUSTER_DNS_IP`.

Two settings make the kubelet and containerd run in this sandbox (a container whose
kernel has the hybrid cgroup v1 layout and which refuses a negative ``oom_score_adj``):
``failCgroupV1: false`` in the kubelet configuration (Kubernetes 1.35+ refuses cgroup v1
by default, KEP-5573) and containerd's ``restrict_oom_score_adj = true`` (the CRI gives
pod sandboxes ``oom_score_adj`` -998, which this sandbox refuses: runc then fails with
"can't get final child's PID from pipe: EOF"). cAdvisor finds no statistics for the
root disk here, so the kubelet's eviction manager logs an error every 10 s and evicts
nothing.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

import yaml

from kpo_devenv.controlplane import ControlPlane
from kpo_devenv.net import free_port
from kpo_devenv.process import ManagedProcess
from kpo_devenv.tools import ToolNotFoundError, tool_path

#: Pod addresses of the node's CNI bridge (apart from kwok's and podman's ranges).
POD_SUBNET = "10.246.0.0/24"
#: The ``kube-dns`` Service address (inside the control plane's service CIDR).
CLUSTER_DNS_IP = "10.0.0.10"
#: The image of every pod sandbox (its entrypoint sleeps); built by :func:`sandbox_image`.
SANDBOX_IMAGE = "localhost/kpo-pause:dev"
#: containerd's namespace for the CRI.
CRI_NAMESPACE = "k8s.io"


class RealNodeError(RuntimeError):
    """The node could not be set up; the message names the step and its error."""


def host_ip() -> str:
    """Return this machine's first non-loopback IPv4 address (the node's InternalIP).

    Raises:
        RealNodeError: the machine has no route outwards.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("198.51.100.1", 9))  # TEST-NET-2, default route; nothing is sent
        except OSError as exc:
            raise RealNodeError(f"no non-loopback IPv4 address: {exc}") from exc
        address: str = probe.getsockname()[0]
    return address


def required_tools() -> list[str]:
    """Return what is missing for a real node (empty when it can run).

    The kubelet, kube-proxy and coredns come from ``bash tools/install.sh node``;
    containerd, ``ctr``, the CNI plugins and podman from Debian.
    """
    missing = []
    for name in ("kubelet", "kube-proxy", "coredns"):
        try:
            tool_path(name)
        except ToolNotFoundError:
            missing.append(name)
    for name in ("containerd", "ctr", "podman", "iptables"):
        if shutil.which(name) is None:
            missing.append(name)
    if not Path("/usr/lib/cni/bridge").exists():
        missing.append("containernetworking-plugins")
    return missing


def _run(argv: list[str], what: str, timeout_s: float = 300, **kwargs: object) -> str:
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=timeout_s, check=False, **kwargs
    )  # type: ignore[call-overload]
    if done.returncode != 0:
        raise RealNodeError(f"{what}: {' '.join(argv[:4])} failed: {done.stderr.strip()[-500:]}")
    return str(done.stdout)


class Containerd:
    """containerd with the CRI plugin, runc, overlayfs and a CNI bridge (see the module doc).

    Its root lives under ``workdir``; its state (with the socket) under a short
    ``/run/kpo-ctd-<id>`` path, as unix socket paths are limited to 108 bytes.

    Args:
        workdir: folder for the config, the CNI config, the root and the log.
    """

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        suffix = uuid.uuid4().hex[:6]
        self.state = Path(f"/run/kpo-ctd-{suffix}")
        self.socket = self.state / "containerd.sock"
        self.bridge = f"kpo{suffix}"
        self.config = workdir / "config.toml"
        self.cni_dir = workdir / "cni"
        self.process = ManagedProcess(
            "containerd", ["containerd", f"--config={self.config}"], workdir / "containerd.log"
        )

    def _config_text(self) -> str:
        cri = 'plugins."io.containerd.grpc.v1.cri"'
        return "\n".join(
            [
                "version = 2",
                f'root = "{self.workdir / "root"}"',
                f'state = "{self.state}"',
                "[grpc]",
                f'  address = "{self.socket}"',
                f"[{cri}]",
                f'  sandbox_image = "{SANDBOX_IMAGE}"',
                "  restrict_oom_score_adj = true",
                f"[{cri}.containerd]",
                '  snapshotter = "overlayfs"',
                '  default_runtime_name = "runc"',
                f"[{cri}.containerd.runtimes.runc]",
                '  runtime_type = "io.containerd.runc.v2"',
                f"[{cri}.containerd.runtimes.runc.options]",
                "  SystemdCgroup = false",
                f"[{cri}.cni]",
                '  bin_dir = "/usr/lib/cni"',
                f'  conf_dir = "{self.cni_dir}"',
                "",
            ]
        )

    def _cni_config(self) -> dict[str, object]:
        return {
            "cniVersion": "1.0.0",
            "name": "kpo-pods",
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": self.bridge,
                    "isGateway": True,
                    "ipMasq": True,
                    "ipam": {
                        "type": "host-local",
                        "dataDir": str(self.workdir / "ipam"),
                        "ranges": [[{"subnet": POD_SUBNET}]],
                        "routes": [{"dst": "0.0.0.0/0"}],
                    },
                },
                {"type": "portmap", "capabilities": {"portMappings": True}},
            ],
        }

    def ctr(self, *args: str, timeout_s: float = 300, stdin: bytes | None = None) -> str:
        """Run ``ctr`` against this containerd in the CRI namespace; return its output.

        Raises:
            RealNodeError: ``ctr`` failed.
        """
        argv = ["ctr", f"--address={self.socket}", f"--namespace={CRI_NAMESPACE}", *args]
        done = subprocess.run(
            argv, capture_output=True, input=stdin, timeout=timeout_s, check=False
        )
        if done.returncode != 0:
            err = done.stderr.decode(errors="replace").strip()[-500:]
            raise RealNodeError(f"ctr {' '.join(args[:3])} failed: {err}")
        return done.stdout.decode(errors="replace")

    def start(self, timeout_s: float = 60) -> None:
        """Write the configs, start containerd and wait until it answers.

        Raises:
            ProcessStartError: containerd exited or did not answer in time.
        """
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.cni_dir.mkdir(exist_ok=True)
        self.config.write_text(self._config_text())
        (self.cni_dir / "10-kpo.conflist").write_text(json.dumps(self._cni_config()))
        self.process.start()

        def answers() -> bool:
            try:
                self.ctr("version", timeout_s=10)
            except (RealNodeError, subprocess.TimeoutExpired):
                return False
            return True

        self.process.wait_ready(answers, timeout_s, interval_s=0.5)

    def import_image(self, image: str, engine: str = "podman") -> None:
        """Copy ``image`` from the engine's store into containerd (``save`` | ``ctr import``).

        Raises:
            RealNodeError: the image is not in the engine's store or the import failed.
        """
        archive = self.workdir / f"image-{uuid.uuid4().hex[:8]}.tar"
        try:
            _run([engine, "save", "--format", "docker-archive", "-o", str(archive), image], "save")
            self.ctr("images", "import", str(archive), timeout_s=600)
        finally:
            archive.unlink(missing_ok=True)

    def remove_containers(self) -> None:
        """Kill and delete every task and container of the CRI namespace (pods left behind)."""
        with contextlib.suppress(RealNodeError, subprocess.TimeoutExpired):
            for task in self.ctr("tasks", "ls", "-q", timeout_s=30).split():
                with contextlib.suppress(RealNodeError, subprocess.TimeoutExpired):
                    self.ctr("tasks", "kill", "-s", "SIGKILL", task, timeout_s=30)
                    time.sleep(0.2)
                    self.ctr("tasks", "delete", "-f", task, timeout_s=30)
            containers = self.ctr("containers", "ls", "-q", timeout_s=30).split()
            if containers:
                self.ctr("containers", "rm", *containers, timeout_s=60)

    def stop(self) -> None:
        """Remove the pods' containers, stop containerd, unmount and delete its bridge."""
        if self.process.is_running():
            self.remove_containers()
        self.process.stop()
        _unmount_under(self.state)
        _unmount_under(self.workdir)
        shutil.rmtree(self.state, ignore_errors=True)
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True, check=False)


def _unmount_under(folder: Path) -> None:
    """Lazily unmount every mount point below ``folder`` (deepest first)."""
    mounts = Path("/proc/self/mounts").read_text().splitlines()
    points = [line.split()[1] for line in mounts if len(line.split()) > 1]
    below = [p for p in points if p == str(folder) or p.startswith(f"{folder}/")]
    for point in sorted(below, key=len, reverse=True):
        subprocess.run(["umount", "-l", point], capture_output=True, check=False)


def sandbox_image(base: str, engine: str = "podman") -> str:
    """Build :data:`SANDBOX_IMAGE` (``base`` with ``sleep infinity`` as entrypoint).

    The kubelet's usual pause image is not reachable here; any image whose entrypoint
    waits forever holds a pod's namespaces as well.

    Raises:
        RealNodeError: the build failed.
    """
    with tempfile.TemporaryDirectory(prefix="kpo-sandbox-") as folder:
        (Path(folder) / "Containerfile").write_text(
            f'FROM {base}\nENTRYPOINT ["sleep", "infinity"]\n'
        )
        _run([engine, "build", "-q", "-t", SANDBOX_IMAGE, folder], "sandbox image")
    return SANDBOX_IMAGE


class Kubelet:
    """The kubelet of node ``name``, on containerd, registered with a node certificate.

    The control plane authorises with RBAC only (no Node authorizer), so the group
    ``system:nodes`` is bound to the ``system:node`` ClusterRole. The kubelet serves its
    API on ``node_ip`` (a free port) and accepts the control plane's client certificates.

    Args:
        workdir: folder for the configs, the kubelet's root dir and its log.
        plane: the started control plane.
        name: the Node's name.
        node_ip: the Node's InternalIP.
        containerd: the started runtime.
        cluster_dns: the ``clusterDNS`` address given to pods.
    """

    def __init__(
        self,
        workdir: Path,
        plane: ControlPlane,
        name: str,
        node_ip: str,
        containerd: Containerd,
        cluster_dns: str = CLUSTER_DNS_IP,
    ) -> None:
        self.workdir = workdir
        self.plane = plane
        self.name = name
        self.node_ip = node_ip
        self.containerd = containerd
        self.cluster_dns = cluster_dns
        self.root = workdir / "root"
        self.process: ManagedProcess | None = None

    def _configuration(self) -> dict[str, object]:
        return {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "failCgroupV1": False,
            "cgroupDriver": "cgroupfs",
            "failSwapOn": False,
            "containerRuntimeEndpoint": f"unix://{self.containerd.socket}",
            "authentication": {
                "anonymous": {"enabled": False},
                "webhook": {"enabled": False},
                "x509": {"clientCAFile": str(self.plane.pki.ca.cert)},
            },
            "authorization": {"mode": "AlwaysAllow"},
            "address": self.node_ip,
            "port": free_port(),
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": free_port(),
            "clusterDNS": [self.cluster_dns],
            "clusterDomain": "cluster.local",
            "resolvConf": "/etc/resolv.conf",
            "enforceNodeAllocatable": [],
            "evictionHard": {"memory.available": "100Mi"},
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "serializeImagePulls": False,
            "localStorageCapacityIsolation": False,
        }

    def start(self, timeout_s: float = 120) -> None:
        """Write the certificate, kubeconfig and configuration; start; wait for the Node Ready.

        Raises:
            ProcessStartError: the kubelet exited or its Node did not turn Ready in time.
        """
        self.workdir.mkdir(parents=True, exist_ok=True)
        cert = self.plane.pki.client(
            f"node-{self.name}", f"system:node:{self.name}", ("system:nodes",)
        )
        config = yaml.safe_load(self.plane.kubeconfig.read_text())
        config["users"][0]["user"] = {
            "client-certificate": str(cert.cert),
            "client-key": str(cert.key),
        }
        kubeconfig = self.workdir / "kubeconfig"
        kubeconfig.write_text(yaml.safe_dump(config))
        binding = {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "kpo-real-nodes"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "system:node",
            },
            "subjects": [
                {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:nodes"}
            ],
        }
        self.plane.kubectl("apply", "-f", "-", input_text=json.dumps(binding))
        configuration = self.workdir / "kubelet.yaml"
        configuration.write_text(yaml.safe_dump(self._configuration()))
        self.process = ManagedProcess(
            "kubelet",
            [
                str(tool_path("kubelet")),
                f"--config={configuration}",
                f"--kubeconfig={kubeconfig}",
                f"--root-dir={self.root}",
                f"--hostname-override={self.name}",
                f"--node-ip={self.node_ip}",
                "--v=1",
            ],
            self.workdir / "kubelet.log",
        )
        self.process.start()
        self.process.wait_ready(self.is_ready, timeout_s, interval_s=1.0)

    def is_ready(self) -> bool:
        """Return whether the Node reports condition Ready=True."""
        done = self.plane.kubectl("get", "node", self.name, "-o", "json", check=False)
        if done.returncode != 0:
            return False
        conditions = json.loads(done.stdout).get("status", {}).get("conditions", [])
        return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)

    def stop(self) -> None:
        """Stop the kubelet, unmount its pods' volumes and delete its Node (idempotent)."""
        if self.process is not None:
            self.process.stop()
        _unmount_under(self.root)
        with contextlib.suppress(Exception):
            self.plane.kubectl("delete", "node", self.name, "--ignore-not-found", check=False)


class KubeProxy:
    """kube-proxy in iptables mode for node ``name`` (Service addresses reach pods).

    Its rules are removed on stop (``kube-proxy --cleanup``).

    Args:
        workdir: folder for the configuration and the log.
        plane: the started control plane.
        name: the Node's name.
        node_ip: the Node's address.
        cluster_cidr: the pods' range (traffic from outside it is masqueraded).
    """

    def __init__(
        self, workdir: Path, plane: ControlPlane, name: str, node_ip: str, cluster_cidr: str
    ) -> None:
        self.workdir = workdir
        self.plane = plane
        self.configuration = workdir / "kube-proxy.yaml"
        self.healthz_port = free_port()
        self._document = {
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
            "kind": "KubeProxyConfiguration",
            "clientConnection": {"kubeconfig": str(plane.kubeconfig)},
            "mode": "iptables",
            "clusterCIDR": cluster_cidr,
            "hostnameOverride": name,
            "bindAddress": node_ip,
            "healthzBindAddress": f"127.0.0.1:{self.healthz_port}",
            "metricsBindAddress": f"127.0.0.1:{free_port()}",
            "conntrack": {"maxPerCore": 0},
        }
        self.process = ManagedProcess(
            "kube-proxy",
            [str(tool_path("kube-proxy")), f"--config={self.configuration}"],
            workdir / "kube-proxy.log",
        )

    def is_healthy(self) -> bool:
        """Return whether ``/healthz`` answers 200."""
        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{self.healthz_port}/healthz", timeout=2
            ) as response:
                return bool(response.status == 200)
        except OSError:
            return False

    def start(self, timeout_s: float = 60) -> None:
        """Write the configuration, start and wait until healthy.

        Raises:
            ProcessStartError: kube-proxy exited or stayed unhealthy.
        """
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.configuration.write_text(yaml.safe_dump(self._document))
        self.process.start()
        self.process.wait_ready(self.is_healthy, timeout_s, interval_s=0.5)

    def stop(self) -> None:
        """Stop kube-proxy and remove its iptables rules."""
        self.process.stop()
        subprocess.run(
            [str(tool_path("kube-proxy")), "--cleanup"],
            capture_output=True,
            timeout=60,
            check=False,
        )


class CoreDns:
    """CoreDNS answering ``cluster.local`` from the API and forwarding the rest.

    It listens on ``node_ip`` at a free port; the Service ``kube-system/kube-dns`` at
    ``cluster_dns`` (port 53) with a manual Endpoints object points pods at it.

    Args:
        workdir: folder for the Corefile and the log.
        plane: the started control plane.
        node_ip: the address it binds.
        cluster_dns: the Service address.
    """

    def __init__(
        self, workdir: Path, plane: ControlPlane, node_ip: str, cluster_dns: str = CLUSTER_DNS_IP
    ) -> None:
        self.workdir = workdir
        self.plane = plane
        self.node_ip = node_ip
        self.cluster_dns = cluster_dns
        self.port = free_port()
        self.corefile = workdir / "Corefile"
        self.process = ManagedProcess(
            "coredns",
            [str(tool_path("coredns")), "-conf", str(self.corefile)],
            workdir / "coredns.log",
        )

    def _service(self) -> dict[str, object]:
        ports = [("dns", "UDP"), ("dns-tcp", "TCP")]
        return {
            "apiVersion": "v1",
            "kind": "List",
            "items": [
                {
                    "apiVersion": "v1",
                    "kind": "Service",
                    "metadata": {"name": "kube-dns", "namespace": "kube-system"},
                    "spec": {
                        "clusterIP": self.cluster_dns,
                        "ports": [
                            {"name": n, "port": 53, "targetPort": self.port, "protocol": p}
                            for n, p in ports
                        ],
                    },
                },
                {
                    "apiVersion": "v1",
                    "kind": "Endpoints",
                    "metadata": {"name": "kube-dns", "namespace": "kube-system"},
                    "subsets": [
                        {
                            "addresses": [{"ip": self.node_ip}],
                            "ports": [
                                {"name": n, "port": self.port, "protocol": p} for n, p in ports
                            ],
                        }
                    ],
                },
            ],
        }

    def start(self, timeout_s: float = 60) -> None:
        """Write the Corefile, start CoreDNS, publish the ``kube-dns`` Service.

        Raises:
            ProcessStartError: CoreDNS exited or did not listen in time.
        """
        self.workdir.mkdir(parents=True, exist_ok=True)
        bind = f"bind {self.node_ip}"
        self.corefile.write_text(
            f"cluster.local:{self.port} {{\n  {bind}\n"
            f"  kubernetes cluster.local {{\n    kubeconfig {self.plane.kubeconfig} kpo\n  }}\n}}\n"
            f".:{self.port} {{\n  {bind}\n  forward . /etc/resolv.conf\n}}\n"
        )
        self.process.start()

        def listens() -> bool:
            with socket.socket() as probe:
                return probe.connect_ex((self.node_ip, self.port)) == 0

        self.process.wait_ready(listens, timeout_s, interval_s=0.3)
        self.plane.kubectl("apply", "-f", "-", input_text=json.dumps(self._service()))

    def stop(self) -> None:
        """Stop CoreDNS (the Service goes with the control plane)."""
        self.process.stop()


class RealNode:
    """One real node: :class:`Containerd`, :class:`Kubelet`, :class:`KubeProxy`, :class:`CoreDns`.

    Args:
        workdir: folder for every component's files and logs.
        plane: the started control plane (kube-controller-manager and kube-scheduler
            must run beside it for workloads to get pods and pods a node).
        name: the Node's name.
    """

    def __init__(self, workdir: Path, plane: ControlPlane, name: str = "kpo-node-0") -> None:
        self.node_ip = host_ip()
        self.containerd = Containerd(workdir / "containerd")
        self.kubelet = Kubelet(workdir / "kubelet", plane, name, self.node_ip, self.containerd)
        self.proxy = KubeProxy(workdir / "kube-proxy", plane, name, self.node_ip, POD_SUBNET)
        self.dns = CoreDns(workdir / "coredns", plane, self.node_ip)

    def start(self, images: list[str], engine: str = "podman") -> RealNode:
        """Start containerd, load ``images`` and the sandbox image, then the node's services.

        On failure everything started is stopped before the error propagates.

        Args:
            images: image references in the engine's store that pods will run
                (``imagePullPolicy: Never`` or ``IfNotPresent``); the first is the base
                of the sandbox image.
            engine: the engine holding them.

        Raises:
            RealNodeError: an image could not be loaded.
            ProcessStartError: a component did not start.
        """
        try:
            self.containerd.start()
            for image in [sandbox_image(images[0], engine), *images]:
                self.containerd.import_image(image, engine)
            self.dns.start()
            self.kubelet.start()  # kube-proxy waits for its Node object
            self.proxy.start()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop the kubelet, kube-proxy and CoreDNS, then remove the pods and containerd."""
        self.kubelet.stop()
        self.proxy.stop()
        self.dns.stop()
        self.containerd.stop()
