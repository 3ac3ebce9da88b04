"""A real Kubernetes control plane on loopback: etcd and kube-apiserver, a kubeconfig, the CRDs.

The kubeconfig written here (user ``kpo-admin`` in ``system:masters``, a
client certificate signed by the generated CA) is read by ``kubectl`` and by
the Python ``kubernetes`` client alike.
"""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

import yaml

from kpo_devenv.net import LOOPBACK, free_port, port_accepts
from kpo_devenv.pki import Pki, generate_pki
from kpo_devenv.process import ManagedProcess
from kpo_devenv.tools import tool_path

#: The service CIDR given to kube-apiserver (``--service-cluster-ip-range``).
SERVICE_CIDR = "10.0.0.0/24"
#: The plural names of the project's custom resources (API group ``kpo.dev``).
KPO_PLURALS = ("partitionreassignments", "topicreplicaquotas")
#: The service-account token issuer (``--service-account-issuer``).
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"


class KubectlError(RuntimeError):
    """``kubectl`` exited non-zero; the message has its command line and stderr."""


class Etcd:
    """A single-member etcd server, plain HTTP on 127.0.0.1, data in ``workdir/data``.

    Args:
        workdir: folder for the data directory and ``etcd.log``.
    """

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.client_port = free_port()
        self.peer_port = free_port()
        peer_url = f"http://{LOOPBACK}:{self.peer_port}"
        self.process = ManagedProcess(
            "etcd",
            [
                str(tool_path("etcd")),
                "--name=kpo",
                f"--data-dir={workdir / 'data'}",
                f"--listen-client-urls={self.client_url}",
                f"--advertise-client-urls={self.client_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=kpo={peer_url}",
                "--unsafe-no-fsync=true",
                "--log-level=warn",
            ],
            workdir / "etcd.log",
        )

    @property
    def client_url(self) -> str:
        """The client URL, e.g. ``"http://127.0.0.1:2379"`` (``--etcd-servers``)."""
        return f"http://{LOOPBACK}:{self.client_port}"

    def is_healthy(self) -> bool:
        """Return whether ``/health`` reports ``{"health": "true"}``."""
        with urllib.request.urlopen(f"{self.client_url}/health", timeout=2) as response:
            return bool(json.load(response).get("health") == "true")

    def start(self, timeout_s: float = 60.0) -> None:
        """Start etcd and wait until healthy.

        Raises:
            ProcessStartError: it exited or stayed unhealthy (message carries the log tail).
        """
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.process.start()
        self.process.wait_ready(self.is_healthy, timeout_s)

    def stop(self) -> None:
        """Stop etcd (idempotent)."""
        self.process.stop()


class KubeApiServer:
    """kube-apiserver on a loopback HTTPS port, backed by :class:`Etcd`, RBAC authorization.

    Args:
        workdir: folder for ``kube-apiserver.log``.
        pki: certificates and keys from :func:`generate_pki`.
        etcd_url: etcd's client URL.
    """

    def __init__(self, workdir: Path, pki: Pki, etcd_url: str) -> None:
        self.workdir = workdir
        self.pki = pki
        self.port = free_port()
        self.process = ManagedProcess(
            "kube-apiserver",
            [
                str(tool_path("kube-apiserver")),
                f"--advertise-address={LOOPBACK}",
                f"--bind-address={LOOPBACK}",
                f"--secure-port={self.port}",
                f"--etcd-servers={etcd_url}",
                f"--cert-dir={workdir / 'certs'}",
                f"--tls-cert-file={pki.serving.cert}",
                f"--tls-private-key-file={pki.serving.key}",
                f"--client-ca-file={pki.ca.cert}",
                f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
                f"--service-account-key-file={pki.service_account_pub}",
                f"--service-account-signing-key-file={pki.service_account_key}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--authorization-mode=RBAC",
                "--allow-privileged=true",
                "--profiling=false",
                "--kubelet-preferred-address-types=InternalIP,Hostname",
                f"--kubelet-client-certificate={pki.admin.cert}",
                f"--kubelet-client-key={pki.admin.key}",
            ],
            workdir / "kube-apiserver.log",
        )

    @property
    def url(self) -> str:
        """The server URL, e.g. ``"https://127.0.0.1:6443"``."""
        return f"https://{LOOPBACK}:{self.port}"

    def ssl_context(self) -> ssl.SSLContext:
        """Return a TLS context trusting the CA and presenting the admin client cert."""
        context = ssl.create_default_context(cafile=str(self.pki.ca.cert))
        context.load_cert_chain(str(self.pki.admin.cert), str(self.pki.admin.key))
        return context

    def get(self, path: str, timeout_s: float = 5.0) -> bytes:
        """GET ``path`` as the admin user and return the body.

        Raises:
            urllib.error.URLError: the request failed or returned an error status.
        """
        with urllib.request.urlopen(
            f"{self.url}{path}", timeout=timeout_s, context=self.ssl_context()
        ) as response:
            body: bytes = response.read()
            return body

    def is_ready(self) -> bool:
        """Return whether ``/readyz`` answers ``ok``."""
        return self.get("/readyz").strip() == b"ok"

    def start(self, timeout_s: float = 120.0) -> None:
        """Start kube-apiserver and wait for ``/readyz``.

        Raises:
            ProcessStartError: it exited or was not ready (message carries the log tail).
        """
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.process.start()
        self.process.wait_ready(self.is_ready, timeout_s, interval_s=0.5)

    def stop(self) -> None:
        """Stop kube-apiserver (idempotent)."""
        self.process.stop()


def write_kubeconfig(path: Path, server: str, pki: Pki, user: str = "kpo-admin") -> Path:
    """Write a kubeconfig whose only context points at ``server`` as the admin client cert.

    Args:
        path: output file.
        server: the apiserver URL.
        pki: supplies the CA and the admin certificate and key (by path).
        user: the kubeconfig user entry's name.
    """
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "kpo",
                "cluster": {"server": server, "certificate-authority": str(pki.ca.cert)},
            }
        ],
        "users": [
            {
                "name": user,
                "user": {
                    "client-certificate": str(pki.admin.cert),
                    "client-key": str(pki.admin.key),
                },
            }
        ],
        "contexts": [{"name": "kpo", "context": {"cluster": "kpo", "user": user}}],
        "current-context": "kpo",
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
    return path


class KubeconfigInUseError(FileExistsError):
    """The path given for a kubeconfig holds a file this module did not write."""


def is_devenv_kubeconfig(path: Path) -> bool:
    """Return whether ``path`` is a kubeconfig as :func:`write_kubeconfig` writes them.

    Such a file has exactly one cluster and one context, both named ``kpo``, and that
    context is the current one. Anything else (another tool's kubeconfig, any other file)
    is not, and is never overwritten or removed by :func:`publish_kubeconfig`.
    """
    try:
        config = yaml.safe_load(path.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return False
    if not isinstance(config, dict):
        return False
    clusters = config.get("clusters")
    contexts = config.get("contexts")
    return (
        config.get("kind") == "Config"
        and config.get("current-context") == "kpo"
        and isinstance(clusters, list)
        and [c.get("name") for c in clusters if isinstance(c, dict)] == ["kpo"]
        and isinstance(contexts, list)
        and [c.get("name") for c in contexts if isinstance(c, dict)] == ["kpo"]
    )


def live_devenv_server(path: Path) -> str | None:
    """Return the server of the kpo-devenv kubeconfig at ``path`` while its port accepts.

    A control plane that still runs keeps its kubeconfig; one that was killed leaves it
    behind with nothing listening. None: no such kubeconfig, or nothing listens there.
    """
    if not is_devenv_kubeconfig(path):
        return None
    config = yaml.safe_load(path.read_text())
    server = str(config["clusters"][0].get("cluster", {}).get("server", ""))
    parsed = urllib.parse.urlsplit(server)
    try:
        port = parsed.port
    except ValueError:
        return None
    if parsed.hostname is None or port is None:
        return None
    return server if port_accepts(port, parsed.hostname) else None


def publish_kubeconfig(path: Path, server: str, pki: Pki) -> Path:
    """Write the admin kubeconfig of ``server`` at ``path`` in one step (a rename).

    A reader polling for ``path`` never sees it half written. An existing file is replaced
    only when it is a kubeconfig of this module (:func:`is_devenv_kubeconfig`), e.g. one
    left behind by a control plane that was killed.

    Returns:
        ``path``, absolute.

    Raises:
        KubeconfigInUseError: ``path`` holds some other file.
    """
    path = path.absolute()
    if path.exists() and not is_devenv_kubeconfig(path):
        raise KubeconfigInUseError(
            f"{path} exists and is not a kubeconfig written by kpo-devenv: "
            "give another path (--kubeconfig)"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    write_kubeconfig(partial, server, pki)
    os.replace(partial, path)
    return path


class ControlPlane:
    """etcd + kube-apiserver with generated PKI, a kubeconfig, and optionally the CRDs applied.

    Args:
        workdir: folder for the PKI, the servers' data and logs, and ``kubeconfig``.
        crds_dir: folder of CustomResourceDefinition manifests to apply and wait
            Established on start; None applies none.
    """

    def __init__(self, workdir: Path, crds_dir: Path | None = None) -> None:
        self.workdir = workdir
        self.crds_dir = crds_dir
        self.pki = generate_pki(workdir / "pki")
        self.etcd = Etcd(workdir / "etcd")
        self.apiserver = KubeApiServer(workdir / "apiserver", self.pki, self.etcd.client_url)
        self.kubeconfig = workdir / "kubeconfig"

    @property
    def processes(self) -> list[ManagedProcess]:
        """The server processes, in start order."""
        return [self.etcd.process, self.apiserver.process]

    def start(self) -> ControlPlane:
        """Start etcd, then kube-apiserver; write the kubeconfig; apply the CRDs.

        On any failure everything already started is stopped before the error
        propagates.

        Raises:
            ProcessStartError: a server did not start (message carries its log tail).
            KubectlError: the CRDs were rejected or did not become Established.
        """
        try:
            self.etcd.start()
            self.apiserver.start()
            write_kubeconfig(self.kubeconfig, self.apiserver.url, self.pki)
            if self.crds_dir is not None:
                self.apply_crds(self.crds_dir)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop kube-apiserver, then etcd (idempotent)."""
        self.apiserver.stop()
        self.etcd.stop()

    def kubectl(
        self, *args: str, input_text: str | None = None, check: bool = True, timeout_s: float = 120
    ) -> subprocess.CompletedProcess[str]:
        """Run ``kubectl`` against this control plane.

        Args:
            args: kubectl's arguments, e.g. ``("get", "crd")``.
            input_text: text for kubectl's stdin (for ``-f -``).
            check: raise on a non-zero exit.
            timeout_s: limit for the command, in seconds.

        Raises:
            KubectlError: kubectl exited non-zero and ``check`` is set.
        """
        argv = [str(tool_path("kubectl")), f"--kubeconfig={self.kubeconfig}", *args]
        result = subprocess.run(
            argv,
            input=input_text,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env={**os.environ, "KUBECONFIG": str(self.kubeconfig)},
            check=False,
        )
        if check and result.returncode != 0:
            raise KubectlError(f"kubectl {' '.join(args)} failed:\n{result.stderr}")
        return result

    def drop_finalizers(self, namespace: str, plurals: Sequence[str] = KPO_PLURALS) -> None:
        """Clear the finalizers of every ``plurals`` object in ``namespace`` (best effort).

        Without an operator running, the operator's finalizer (``kpo.dev/finalizer``) would
        hold those objects, and so their namespace, forever; a test or bench that stopped
        its operator calls this before deleting the namespace. kubectl errors are ignored.
        """
        for plural in plurals:
            listed = self.kubectl(
                "-n", namespace, "get", plural, "-o", "name", check=False
            ).stdout.split()
            for ref in listed:
                self.kubectl(
                    "-n",
                    namespace,
                    "patch",
                    ref,
                    "--type=merge",
                    "-p",
                    '{"metadata":{"finalizers":null}}',
                    check=False,
                )

    def apply_crds(self, crds_dir: Path, timeout_s: float = 60) -> list[str]:
        """Apply every CRD manifest in ``crds_dir`` and wait until each is Established.

        Returns:
            The names of the CRDs applied.

        Raises:
            KubectlError: a manifest was rejected or a CRD not Established in time.
        """
        files = sorted(crds_dir.glob("*.yaml"))
        names = [yaml.safe_load(path.read_text())["metadata"]["name"] for path in files]
        file_args: list[str] = []
        for path in files:
            file_args += ["-f", str(path)]
        self.kubectl("apply", "--server-side", "--field-manager=kpo-devenv", *file_args)
        self.wait_established(names, timeout_s)
        return names

    def wait_established(self, names: Sequence[str], timeout_s: float = 60) -> None:
        """Wait until the named CRDs have condition Established.

        Raises:
            KubectlError: not Established within ``timeout_s`` seconds.
        """
        if names:
            self.kubectl(
                "wait",
                "--for=condition=Established",
                f"--timeout={int(timeout_s)}s",
                *[f"crd/{name}" for name in names],
                timeout_s=timeout_s + 10,
            )

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
