"""Run the chart's rendered pods as local processes: a small stand-in for a kubelet.

No container engine runs here, so a pod spec rendered by the chart is executed the
way a kubelet would, minus the image: volumes become folders (a ConfigMap's or a
Secret's keys are written as files, also through ``items`` and ``projected`` sources,
``emptyDir`` and the StatefulSet's claim are empty folders), the
init containers run one after the other and must exit 0, then the main container
starts with the pod's environment (``value`` with ``$(VAR)`` expansion, ``fieldRef``
and ``configMapKeyRef``). The interpreter is this test run's Python, which has the
same packages the image installs.

Paths are the one thing a container has that a process does not: every mount path of
the pod is rewritten to its folder in the command, the arguments, the environment
and the ConfigMap files. Pods on one host also share one network, so the caller
gives each pod the ports and addresses a pod IP and DNS name would provide
(``overrides``); everything else comes from the rendered manifest as it is.
"""

from __future__ import annotations

import base64
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kpo_devenv.process import ManagedProcess

Manifest = dict[str, Any]

POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"
_VAR_REF = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")
_LABEL_REF = re.compile(r"^metadata\.labels\['([^']+)'\]$")


class PodSpecError(ValueError):
    """The pod spec uses something this stand-in does not provide (named in the message)."""


@dataclass
class LocalPod:
    """One rendered pod spec made ready to run under ``root``.

    Args:
        name: ``metadata.name`` of the pod (``<statefulset>-<ordinal>`` for a StatefulSet).
        spec: the rendered pod spec.
        objects: every rendered object (ConfigMaps are looked up here).
        root: folder holding the pod's volumes and logs.
        labels: the pod's labels (a StatefulSet pod also gets ``apps.kubernetes.io/pod-index``).
        namespace: ``metadata.namespace``.
        node_name: ``spec.nodeName`` as a scheduler would set it.
        overrides: environment variables set over the rendered ones (the pod's network).
        claims: volume names bound to PersistentVolumeClaims (a StatefulSet's templates).
        in_place: the pod runs in containers with its volumes mounted at their mount paths
            (:mod:`tests.integration.containers.pod_containers`): paths are not rewritten.
    """

    name: str
    spec: Manifest
    objects: list[Manifest]
    root: Path
    labels: dict[str, str] = field(default_factory=dict)
    namespace: str = "default"
    node_name: str = "local"
    overrides: dict[str, str] = field(default_factory=dict)
    claims: tuple[str, ...] = ()
    in_place: bool = False

    def __post_init__(self) -> None:
        self.paths = self._mount_paths()
        self._materialize_volumes()

    def _config_map(self, name: str) -> dict[str, str]:
        for obj in self.objects:
            if obj["kind"] == "ConfigMap" and obj["metadata"]["name"] == name:
                return dict(obj.get("data") or {})
        raise PodSpecError(f"ConfigMap {name} is not among the rendered objects")

    def _secret(self, name: str) -> dict[str, str]:
        for obj in self.objects:
            if obj["kind"] == "Secret" and obj["metadata"]["name"] == name:
                data = {k: base64.b64decode(v).decode() for k, v in (obj.get("data") or {}).items()}
                return {**data, **(obj.get("stringData") or {})}
        raise PodSpecError(f"Secret {name} is not among the given objects")

    def _write_keys(self, folder: Path, data: dict[str, str], items: list[Manifest] | None) -> None:
        """Write a ConfigMap's or Secret's keys (or only ``items``, at their paths)."""
        chosen = [(i["key"], i["path"]) for i in items] if items else [(k, k) for k in data]
        for key, path in chosen:
            target = folder / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(self.rewrite(data[key]))

    def _volume_dir(self, volume: str) -> Path:
        return self.root / "volumes" / volume

    def _mount_paths(self) -> dict[str, Path]:
        """mountPath -> the folder of its volume, over every container of the pod."""
        paths: dict[str, Path] = {}
        containers = [*self.spec.get("initContainers", []), *self.spec["containers"]]
        for container in containers:
            for mount in container.get("volumeMounts", []):
                if "subPath" in mount:
                    raise PodSpecError(f"{container['name']}: subPath mounts are not supported")
                folder = self._volume_dir(mount["name"])
                known = paths.setdefault(mount["mountPath"], folder)
                if known != folder:
                    raise PodSpecError(f"{mount['mountPath']} holds two volumes in {self.name}")
        return paths

    def rewrite(self, text: str) -> str:
        """``text`` with every mount path of the pod replaced by its local folder."""
        if not self.paths or self.in_place:
            return text
        # One pass, longest path first, so a replacement is never rewritten again.
        choices = "|".join(re.escape(p) for p in sorted(self.paths, key=len, reverse=True))
        pattern = re.compile(r"(?<![\w./-])(" + choices + r")(?![\w.-])")
        return pattern.sub(lambda m: str(self.paths[m.group(1)]), text)

    def _materialize_volumes(self) -> None:
        for volume in self.spec.get("volumes", []):
            folder = self._volume_dir(volume["name"])
            folder.mkdir(parents=True, exist_ok=True)
            if "configMap" in volume:
                source = volume["configMap"]
                self._write_keys(folder, self._config_map(source["name"]), source.get("items"))
            elif "secret" in volume:
                source = volume["secret"]
                self._write_keys(folder, self._secret(source["secretName"]), source.get("items"))
            elif "projected" in volume:
                for part in volume["projected"]["sources"]:
                    if "secret" in part:
                        data = self._secret(part["secret"]["name"])
                        self._write_keys(folder, data, part["secret"].get("items"))
                    elif "configMap" in part and "serviceAccountToken" not in str(
                        volume["projected"]["sources"]
                    ):
                        data = self._config_map(part["configMap"]["name"])
                        self._write_keys(folder, data, part["configMap"].get("items"))
            elif "emptyDir" not in volume:
                raise PodSpecError(f"volume {volume['name']}: only configMap, secret, emptyDir")
        for claim in self.claims:
            self._volume_dir(claim).mkdir(parents=True, exist_ok=True)

    def _field(self, path: str) -> str:
        if path == "metadata.name":
            return self.name
        if path == "metadata.namespace":
            return self.namespace
        if path == "spec.nodeName":
            return self.node_name
        label = _LABEL_REF.match(path)
        if label and label.group(1) in self.labels:
            return self.labels[label.group(1)]
        raise PodSpecError(f"fieldRef {path} is not provided for pod {self.name}")

    def environment(self, container: Manifest) -> dict[str, str]:
        """The container's environment as the kubelet builds it, then :attr:`overrides`."""
        env: dict[str, str] = {}
        for var in container.get("env", []):
            if "value" in var:
                value = _VAR_REF.sub(lambda m: env.get(m.group(1), m.group(0)), var["value"])
            elif "fieldRef" in var.get("valueFrom", {}):
                value = self._field(var["valueFrom"]["fieldRef"]["fieldPath"])
            elif "configMapKeyRef" in var.get("valueFrom", {}):
                ref = var["valueFrom"]["configMapKeyRef"]
                value = self._config_map(ref["name"])[ref["key"]]
            else:
                raise PodSpecError(f"{container['name']}: env {var['name']} source not supported")
            env[var["name"]] = self.rewrite(value)
        env.update(self.overrides)
        return env

    def argv(self, container: Manifest) -> list[str]:
        """``command`` + ``args`` with the image's ``python`` being this run's interpreter."""
        argv = [self.rewrite(a) for a in [*container["command"], *container.get("args", [])]]
        if argv[0] == "python":
            argv[0] = sys.executable
        return argv

    def run_init_containers(self, timeout_s: float = 60) -> list[str]:
        """Run each init container to completion; returns their outputs.

        Raises:
            AssertionError: one exited non-zero (its output is in the message).
        """
        outputs: list[str] = []
        for container in self.spec.get("initContainers", []):
            done = subprocess.run(
                self.argv(container),
                env={"PATH": "/usr/bin:/bin", **self.environment(container)},
                capture_output=True,
                text=True,
                timeout=timeout_s,
                check=False,
            )
            assert done.returncode == 0, f"{self.name}/{container['name']}: {done.stderr}"
            outputs.append(done.stdout)
        return outputs

    def start(self, container_name: str | None = None) -> ManagedProcess:
        """Start the main container (the first, or the one named) as a managed process."""
        containers = self.spec["containers"]
        container = next(
            (c for c in containers if container_name in (None, c["name"])), containers[0]
        )
        process = ManagedProcess(
            f"{self.name}/{container['name']}",
            self.argv(container),
            self.root / f"{container['name']}.log",
            env=self.environment(container),
            cwd=self.root,
        )
        process.start()
        return process


def statefulset_pod(
    statefulset: Manifest,
    ordinal: int,
    objects: list[Manifest],
    root: Path,
    namespace: str,
    overrides: dict[str, str] | None = None,
    in_place: bool = False,
) -> LocalPod:
    """The pod ``<name>-<ordinal>`` of a rendered StatefulSet, as its controller would make it.

    It carries the template's labels plus ``apps.kubernetes.io/pod-index`` and
    ``statefulset.kubernetes.io/pod-name``; each volume claim template is a folder.
    """
    name = f"{statefulset['metadata']['name']}-{ordinal}"
    template = statefulset["spec"]["template"]
    labels = {
        **template["metadata"].get("labels", {}),
        POD_INDEX_LABEL: str(ordinal),
        "statefulset.kubernetes.io/pod-name": name,
    }
    claims = tuple(
        t["metadata"]["name"] for t in statefulset["spec"].get("volumeClaimTemplates", [])
    )
    return LocalPod(
        name,
        template["spec"],
        objects,
        root / name,
        labels=labels,
        namespace=namespace,
        overrides=dict(overrides or {}),
        claims=claims,
        in_place=in_place,
    )
