"""Run the chart's rendered pod specs as podman containers of the built images.

What a kubelet takes from a pod spec, this takes too, so that a chart change that the
image cannot follow fails here: the container's ``image``, ``command`` + ``args`` (no
other entry point), its environment (as :class:`LocalPod` builds it, ``$(VAR)``,
``fieldRef`` and ``configMapKeyRef`` included), every ``volumeMount`` (the pod's volumes
are folders here, mounted at their ``mountPath``, read-only when the mount says so, handed
to the pod's user like ``fsGroup`` does), ``securityContext`` (``runAsUser``/``runAsGroup``,
``runAsNonRoot`` checked, ``readOnlyRootFilesystem`` without podman's extra tmpfs mounts,
dropped capabilities, ``allowPrivilegeEscalation: false`` as ``no-new-privileges``) and
the probes (``tcpSocket``, ``httpGet``, ``exec``). Pods share the host's network here, so
the caller maps each container port to the host port the pod was given (the pod IP's job).
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from typing import Any

from kpo_devenv.net import LOOPBACK, port_accepts
from kpo_devenv.runner import LABEL, ContainerProcess
from tests.integration.charts.local_pods import LocalPod, Manifest, PodSpecError

ENGINE = "podman"


def security_args(pod: LocalPod, container: Manifest) -> list[str]:
    """``podman run`` options from the pod's and the container's ``securityContext``.

    Raises:
        PodSpecError: ``runAsNonRoot`` with no non-zero ``runAsUser``.
    """
    pod_context: dict[str, Any] = pod.spec.get("securityContext", {})
    context = {**pod_context, **container.get("securityContext", {})}
    uid = context.get("runAsUser")
    if context.get("runAsNonRoot") and not uid:
        raise PodSpecError(f"{container['name']}: runAsNonRoot without a non-zero runAsUser")
    args = []
    if uid is not None:
        args.append(f"--user={uid}:{context.get('runAsGroup', uid)}")
    if "fsGroup" in pod_context:
        args.append(f"--group-add={pod_context['fsGroup']}")
    if context.get("readOnlyRootFilesystem"):
        args += ["--read-only", "--read-only-tmpfs=false"]
    for cap in context.get("capabilities", {}).get("drop", []):
        args += ["--cap-drop", cap]
    for cap in context.get("capabilities", {}).get("add", []):
        args += ["--cap-add", cap]
    if context.get("allowPrivilegeEscalation") is False:
        args += ["--security-opt", "no-new-privileges"]
    if context.get("privileged"):
        args.append("--privileged")
    if context.get("seccompProfile", {}).get("type") == "Unconfined":
        args += ["--security-opt", "seccomp=unconfined"]
    return args


def run_argv(pod: LocalPod, container: Manifest, name: str, label: str) -> list[str]:
    """The ``podman run`` command line of ``container`` of ``pod`` (attached, removed on exit).

    Raises:
        PodSpecError: the container has no ``command`` or uses what is not supported.
    """
    if "command" not in container:
        raise PodSpecError(f"{container['name']}: no command (the images have no entry point)")
    run = [ENGINE, "run", "--rm", "--name", name, "--label", f"{LABEL}={label}"]
    run += ["--runtime", "runc", "--network", "host", "--pull", "never"]
    run += security_args(pod, container)
    for mount in container.get("volumeMounts", []):
        folder = pod.paths[mount["mountPath"]]
        mode = "ro" if mount.get("readOnly") else "U"
        run += ["-v", f"{folder}:{mount['mountPath']}:{mode}"]
    for key, value in pod.environment(container).items():
        run += ["-e", f"{key}={value}"]
    if "workingDir" in container:
        run += ["--workdir", container["workingDir"]]
    return [*run, container["image"], *container["command"], *container.get("args", [])]


def run_init_containers(pod: LocalPod, label: str, timeout_s: float = 120) -> list[str]:
    """Run the pod's init containers one after the other; returns their outputs.

    Raises:
        AssertionError: one exited non-zero (its output is in the message).
    """
    outputs = []
    for container in pod.spec.get("initContainers", []):
        argv = run_argv(pod, container, f"{label}-{pod.name}-{container['name']}", label)
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)
        assert done.returncode == 0, f"{pod.name}/{container['name']}: {done.stderr}"
        outputs.append(done.stdout)
    return outputs


def main_container(pod: LocalPod, name: str | None = None) -> Manifest:
    """The pod's first container, or the one called ``name``."""
    containers: list[Manifest] = pod.spec["containers"]
    return next((c for c in containers if name in (None, c["name"])), containers[0])


def container_process(pod: LocalPod, label: str, grace_s: float | None = None) -> ContainerProcess:
    """The pod's main container as a process: ``podman stop -t`` uses the pod's grace period."""
    container = main_container(pod)
    name = f"{label}-{pod.name}"
    grace = grace_s if grace_s is not None else pod.spec.get("terminationGracePeriodSeconds", 30)
    log = pod.root / f"{container['name']}.log"
    return ContainerProcess(
        pod.name, name, ENGINE, run_argv(pod, container, name, label), log, float(grace)
    )


def _port(container: Manifest, port: int | str, ports: dict[int, int]) -> int:
    if isinstance(port, str):
        (found,) = [p["containerPort"] for p in container.get("ports", []) if p["name"] == port]
        port = int(found)
    return ports.get(port, port)


def probe_passes(
    probe: Manifest, container: Manifest, ports: dict[int, int], process: ContainerProcess
) -> bool:
    """Run one probe once, as the kubelet does.

    Args:
        probe: The rendered probe (``tcpSocket``, ``httpGet`` or ``exec``).
        container: Its container (named ports are resolved in its ``ports``).
        ports: container port -> host port of this pod.
        process: The running container (for ``exec``).

    Raises:
        PodSpecError: another kind of probe.
    """
    timeout = float(probe.get("timeoutSeconds", 1))
    if "tcpSocket" in probe:
        return port_accepts(_port(container, probe["tcpSocket"]["port"], ports))
    if "httpGet" in probe:
        get = probe["httpGet"]
        url = f"http://{LOOPBACK}:{_port(container, get['port'], ports)}{get.get('path', '/')}"
        try:
            with urllib.request.urlopen(url, timeout=timeout) as answer:
                return 200 <= int(answer.status) < 400
        except OSError:
            return False
    if "exec" in probe:
        done = subprocess.run(
            [ENGINE, "exec", process.container, *probe["exec"]["command"]],
            capture_output=True,
            timeout=timeout + 30,
            check=False,
        )
        return done.returncode == 0
    raise PodSpecError(f"probe {sorted(probe)} is not supported")


def wait_probe(
    probe: Manifest,
    container: Manifest,
    ports: dict[int, int],
    process: ContainerProcess,
    limit_s: float = 120,
) -> float:
    """Wait until ``probe`` passes, polling at its ``periodSeconds``; returns seconds waited.

    Raises:
        AssertionError: the container exited, or the probe did not pass within ``limit_s``.
    """
    started = time.monotonic()
    period = min(float(probe.get("periodSeconds", 10)), 1.0)
    while not probe_passes(probe, container, ports, process):
        assert process.is_running(), f"{process.name} exited:\n{process.log_tail()}"
        assert time.monotonic() - started < limit_s, f"{process.name}: probe never passed"
        time.sleep(period)
    return time.monotonic() - started


def inspect(name: str) -> dict[str, Any]:
    """``podman inspect`` of one container."""
    out = subprocess.run(
        [ENGINE, "inspect", name], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    (found,) = json.loads(out)
    return dict(found)
