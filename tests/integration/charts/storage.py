"""Local storage for chart installs: a StorageClass and pre-created hostPath PersistentVolumes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: The label every test PersistentVolume carries, so a test can delete exactly its volumes.
TEST_PV_LABEL = "kpo.dev/test-pv"


def hostpath_storage(storage_class: str, count: int, root: Path) -> list[dict[str, Any]]:
    """A no-provisioner StorageClass and ``count`` 1 GiB hostPath PersistentVolumes under ``root``.

    Each volume's folder (``root/pv-<i>``) is created world-writable: hostPath volumes ignore
    a pod's ``fsGroup``, and the chart's pods run as non-root users (10001, 1000). Binding is
    ``Immediate`` and reclaiming ``Retain``, so the data stays for the test to read.

    Returns:
        The objects as dicts, for ``yaml.safe_dump_all`` and ``kubectl create -f -``.
    """
    objects: list[dict[str, Any]] = [
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": storage_class},
            "provisioner": "kubernetes.io/no-provisioner",
            "volumeBindingMode": "Immediate",
            "reclaimPolicy": "Retain",
        }
    ]
    for i in range(count):
        folder = root / f"pv-{i}"
        folder.mkdir(parents=True, exist_ok=True)
        folder.chmod(0o777)
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolume",
                "metadata": {"name": f"{storage_class}-{i}", "labels": {TEST_PV_LABEL: "true"}},
                "spec": {
                    "capacity": {"storage": "1Gi"},
                    "accessModes": ["ReadWriteOnce"],
                    "persistentVolumeReclaimPolicy": "Retain",
                    "storageClassName": storage_class,
                    "hostPath": {"path": str(folder), "type": "Directory"},
                },
            }
        )
    return objects
