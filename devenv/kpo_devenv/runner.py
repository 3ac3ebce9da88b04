"""How a component of the local stack runs: as a local process, or in a container of kpo's images.

A component (ZooKeeper, a broker, the operator) describes what it runs as a logical
command (``python -m kpo_broker ...``, ``java -cp ... QuorumPeerMain ...``), its
environment and the host folders it uses; a runner turns that into a
:class:`~kpo_devenv.process.ManagedProcess`:

- :class:`LocalRunner` (the default) runs it here, ``python`` being this interpreter and
  ``java`` the machine's Java.
- :class:`ContainerRunner` runs it with ``podman run`` (attached, so its output is the
  log file as for a process) in one of kpo's images (``make image``, ``--target
  zookeeper`` for ZooKeeper): host network, runc, uid/gid 10001, read-only root
  filesystem with a tmpfs ``/tmp``, no capabilities, no new privileges, each folder
  bind-mounted at its own path and handed to uid 10001 (podman's ``:U``), as a pod's
  volume with ``fsGroup`` would be. Stopping is ``podman stop`` (SIGTERM, then SIGKILL
  after the grace period), killing is ``podman kill``; the container is removed after.
"""

from __future__ import annotations

import base64
import contextlib
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import yaml

from kpo_devenv.process import ManagedProcess
from kpo_devenv.tools import java_path

#: The user the images run as (broker-image/Dockerfile, the chart's securityContext).
IMAGE_UID = 10001
#: Label on every container a runner starts, for finding leftovers.
LABEL = "dev.kpo.devenv"


class Runner(Protocol):
    """Makes the process of one component; see the module doc."""

    def process(
        self,
        name: str,
        kind: str,
        argv: Sequence[str],
        log_path: Path,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        mounts: Sequence[Path] = (),
    ) -> ManagedProcess:
        """Return the (not yet started) process of component ``name``.

        Args:
            name: Short name for messages and the container name, e.g. ``broker-0``.
            kind: ``zookeeper``, ``broker`` or ``operator``: which image runs it.
            argv: The command, starting with ``python`` or ``java``.
            log_path: File receiving its output.
            env: Environment variables it needs (beyond the image's).
            cwd: Working directory.
            mounts: Host folders it reads and writes (bind-mounted at the same path).
        """
        ...


class LocalRunner:
    """Runs components as local processes (``python``: this interpreter; ``java``: PATH's)."""

    def process(
        self,
        name: str,
        kind: str,
        argv: Sequence[str],
        log_path: Path,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        mounts: Sequence[Path] = (),
    ) -> ManagedProcess:
        """Return a :class:`ManagedProcess` of ``argv`` (see :meth:`Runner.process`).

        Raises:
            ToolNotFoundError: ``java`` is asked for and none is on PATH.
        """
        first = {"python": sys.executable, "java": "java"}.get(argv[0], argv[0])
        if first == "java":
            first = str(java_path())
        return ManagedProcess(name, [first, *argv[1:]], log_path, env=env, cwd=cwd)


class ContainerProcess(ManagedProcess):
    """A component in a container: ``podman run`` attached, stopped with ``podman stop``.

    Args:
        name: Name for messages; the container is ``<prefix>-<name>``.
        container: The container name.
        engine: The engine executable (``podman``).
        run_argv: The full ``podman run`` command line.
        log_path: File receiving the container's output.
        stop_timeout_s: ``podman stop -t``: grace before SIGKILL, seconds.
    """

    def __init__(
        self,
        name: str,
        container: str,
        engine: str,
        run_argv: Sequence[str],
        log_path: Path,
        stop_timeout_s: float = 30.0,
    ) -> None:
        super().__init__(name, run_argv, log_path)
        self.container = container
        self.engine = engine
        self.stop_timeout_s = stop_timeout_s

    def _engine(self, *args: str, timeout_s: float = 120.0) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [self.engine, *args], capture_output=True, text=True, timeout=timeout_s, check=False
        )

    def start(self) -> None:
        """Remove a leftover container of the same name, then ``podman run`` attached."""
        self._engine("rm", "-f", "-t", "0", self.container)
        super().start()

    def stop(self, timeout_s: float | None = None) -> None:
        """``podman stop -t <grace>`` (SIGTERM, SIGKILL after the grace), then remove it.

        Args:
            timeout_s: The grace period, seconds; :attr:`stop_timeout_s` when None.
        """
        grace = self.stop_timeout_s if timeout_s is None else timeout_s
        self._end(("stop", "-t", str(int(grace))), grace + 60, wait_s=30, client_stop_s=5)

    def kill(self, timeout_s: float = 10.0) -> None:
        """``podman kill`` (SIGKILL: a crash, no controlled shutdown), wait, remove."""
        self._end(("kill",), 120.0, wait_s=timeout_s, client_stop_s=1)

    def _end(
        self, verb: Sequence[str], engine_timeout_s: float, wait_s: float, client_stop_s: float
    ) -> None:
        """Send ``podman <verb>`` to a running container, wait for the attached client, remove."""
        if self.is_running():
            self._engine(*verb, self.container, timeout_s=engine_timeout_s)
        self._wait_client(wait_s)
        self._engine("rm", "-f", "-t", "0", self.container)
        super().stop(timeout_s=client_stop_s)

    def _wait_client(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while self.is_running() and time.monotonic() < deadline:
            time.sleep(0.1)


@dataclass
class ContainerRunner:
    """Runs components in containers of kpo's images (see the module doc).

    Args:
        images: Image per component kind (``zookeeper``, ``broker``, ``operator``).
        engine: The engine executable.
        runtime: The OCI runtime (runc: crun refuses this kernel's cgroup layout).
        prefix: Start of every container name (unique per runner by default).
        stop_timeout_s: Grace period of ``podman stop``, seconds.
    """

    images: Mapping[str, str]
    engine: str = "podman"
    runtime: str = "runc"
    prefix: str = field(default_factory=lambda: f"kpo-{uuid.uuid4().hex[:6]}")
    stop_timeout_s: float = 30.0

    @property
    def _label(self) -> str:
        return f"{LABEL}={self.prefix}"

    def run_argv(
        self,
        container: str,
        image: str,
        argv: Sequence[str],
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        mounts: Sequence[Path] = (),
        read_only_mounts: Sequence[tuple[Path, str]] = (),
    ) -> list[str]:
        """Return the ``podman run`` command line of one container (attached, removed on exit).

        Args:
            container: Container name.
            image: Image reference.
            argv: Command and arguments in the image.
            env: Environment variables.
            cwd: Working directory in the container.
            mounts: Host folders mounted read-write at the same path, owned by uid 10001.
            read_only_mounts: ``(host path, container path)`` mounted read-only.
        """
        run = [self.engine, "run", "--rm", "--name", container, "--label", self._label]
        run += ["--runtime", self.runtime, "--network", "host", "--init=false"]
        run += [f"--user={IMAGE_UID}:{IMAGE_UID}", "--read-only", "--tmpfs", "/tmp:rw,mode=1777"]
        run += ["--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--pull", "never"]
        for folder in mounts:
            folder.mkdir(parents=True, exist_ok=True)
            run += ["-v", f"{folder}:{folder}:U"]
        for host, inside in read_only_mounts:
            run += ["-v", f"{host}:{inside}:ro"]
        for key, value in (env or {}).items():
            run += ["-e", f"{key}={value}"]
        if cwd is not None:
            run += ["--workdir", str(cwd)]
        return [*run, image, *argv]

    def process(
        self,
        name: str,
        kind: str,
        argv: Sequence[str],
        log_path: Path,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        mounts: Sequence[Path] = (),
    ) -> ContainerProcess:
        """Return the container of component ``name`` (see :meth:`Runner.process`).

        Raises:
            KeyError: no image is configured for ``kind``.
        """
        container = f"{self.prefix}-{name}"
        image = self.images[kind]
        run = self.run_argv(container, image, argv, env, cwd, mounts)
        return ContainerProcess(name, container, self.engine, run, log_path, self.stop_timeout_s)

    def remove_all(self) -> list[str]:
        """Remove (``rm -f``) every container this runner's prefix labels; returns their names."""
        listed = subprocess.run(
            [self.engine, "ps", "-a", "--format", "{{.Names}}", "--filter", f"label={self._label}"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        ).stdout.split()
        if listed:
            subprocess.run(
                [self.engine, "rm", "-f", "-t", "0", *listed],
                capture_output=True,
                timeout=120,
                check=False,
            )
        return listed


def engine_available(engine: str = "podman") -> str | None:
    """Return why ``engine`` cannot run containers here, or None when it can.

    Runs ``<engine> info``; the reason names the engine's error.
    """
    try:
        done = subprocess.run(
            [engine, "info", "--format", "{{.Host.OCIRuntime.Name}}"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{engine} cannot run: {exc}"
    if done.returncode != 0:
        return f"{engine} info failed: {done.stderr.strip()[-300:]}"
    return None


def inline_kubeconfig(source: Path, dest: Path) -> Path:
    """Write ``source`` with its certificate and key files inlined (``*-data``), to ``dest``.

    A container reads the result without the host's key files (which uid 10001 may not).

    Raises:
        OSError: a referenced file cannot be read.
    """
    config = yaml.safe_load(source.read_text())
    pairs = (
        ("certificate-authority", "certificate-authority-data"),
        ("client-certificate", "client-certificate-data"),
        ("client-key", "client-key-data"),
    )
    for section in ("clusters", "users"):
        for entry in config.get(section, []):
            body = entry.get("cluster" if section == "clusters" else "user", {})
            for path_key, data_key in pairs:
                if path_key in body:
                    raw = Path(body.pop(path_key)).read_bytes()
                    body[data_key] = base64.b64encode(raw).decode("ascii")
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(yaml.safe_dump(config))
    with contextlib.suppress(OSError):
        os.chmod(dest, 0o600)
    return dest
