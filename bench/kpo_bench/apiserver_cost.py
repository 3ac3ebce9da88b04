"""kube-apiserver CPU per status write of a PartitionReassignment, by object size.

The operator at scale: every reconcile step that changes a Moving object's status
sends one merge PATCH to its ``status`` subresource. The number of PATCHes grows with the
number of objects, but what each one costs the API server grows with the object: it
decodes the stored object, applies the patch, validates the whole object against the
CRD's schema, recomputes the field ownership (``metadata.managedFields``), encodes it
for etcd and for every watcher. This measures that cost on the real control plane
(etcd and kube-apiserver from the tool cache, the checkout's CRDs)::

    .venv/bin/python -m kpo_bench.apiserver_cost --partitions 40,2000 --patches 50
        [--crds DIR] [--diffbase digest|spec] [--last-applied] [--watchers 1] [--workdir DIR]

For each size N, one object of N partitions (topics of 100 partitions, each moved from
``[0, 1]`` to ``[2, 1]``) is created as the operator leaves it: the spec, kopf's
``kpo.dev/last-handled-configuration`` annotation as
:class:`~kpo_operator.diffbase.SpecDigestDiffBaseStorage` writes it (``--diffbase spec``:
the whole spec, as kopf's default storage does), and a status of N Moving entries
rendered by the operator's own :class:`~kpo_operator.progress.PartitionStatus`.
``--last-applied`` adds the annotation a client-side ``kubectl apply`` writes (the
applied object as JSON).
Then ``--patches`` status PATCHes are sent one after another, of two kinds: the totals and
message only (what a step writes between two ``partitionStatusIntervalSeconds``), and
every entry's byte counters. Printed per size and kind: the object's size as the API
server returns it and that of its ``managedFields`` (KiB), the API server's CPU per PATCH
(``/proc/<pid>/stat`` utime + stime before and after, ms) and the client's wall time per
PATCH (ms). ``--watchers`` threads watch the objects meanwhile, as the operator (kopf)
does; ``--crds`` measures another version of the CRDs (e.g. an older checkout's).
Nothing is compared with a target.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client, config, watch

from kpo_bench.machine import process_cpu_seconds
from kpo_bench.operator_latency import CRDS_DIR
from kpo_devenv.controlplane import ControlPlane
from kpo_kafka.states import MoveState
from kpo_operator.diffbase import SPEC_DIGEST, spec_digest
from kpo_operator.progress import PartitionStatus
from kpo_operator.resources import GROUP, PARTITION_REASSIGNMENT, VERSION

NAMESPACE = "default"
KOPF_DIFFBASE = f"{GROUP}/last-handled-configuration"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


@dataclass(frozen=True)
class PatchCost:
    """The API server's cost of one kind of status PATCH on one object.

    Attributes:
        partitions: Partitions of the object.
        kind: ``"totals"`` (totals and message) or ``"partitions"`` (every entry's bytes).
        object_bytes: The object as the API server returns it, JSON bytes.
        managed_fields_bytes: Its ``metadata.managedFields``, JSON bytes.
        cpu_ms: kube-apiserver CPU per PATCH, milliseconds.
        wall_ms: The client's wall time per PATCH, milliseconds.
    """

    partitions: int
    kind: str
    object_bytes: int
    managed_fields_bytes: int
    cpu_ms: float
    wall_ms: float

    def line(self) -> str:
        """One printable line."""
        return (
            f"{self.partitions:5d} partitions, object {self.object_bytes / 1024:7.1f} KiB "
            f"(managedFields {self.managed_fields_bytes / 1024:6.1f} KiB), {self.kind:10s}: "
            f"kube-apiserver {self.cpu_ms:7.1f} ms CPU per PATCH, {self.wall_ms:7.1f} ms wall"
        )


def _spec(partitions: int) -> dict[str, Any]:
    return {
        "partitions": [
            {"topic": f"scale-{p // 100}", "partition": p % 100, "replicas": [2, 1]}
            for p in range(partitions)
        ],
        "throttle": {"replicationRate": 65536},
    }


def _entries(partitions: int, done: int) -> list[dict[str, Any]]:
    return [
        PartitionStatus(
            f"scale-{p // 100}",
            p % 100,
            MoveState.MOVING,
            (0, 1),
            (2, 1),
            adding=(2,),
            removing=(0,),
            isr=(0, 1),
            leader=0,
            bytes_done=done + p,
            bytes_total=1 << 20,
        ).to_status()
        for p in range(partitions)
    ]


def measure(
    api: client.CustomObjectsApi,
    apiserver_pid: int,
    partitions: int,
    patches: int,
    diffbase: str = "digest",
    last_applied: bool = False,
) -> list[PatchCost]:
    """Create one object of ``partitions`` partitions and time both kinds of status PATCH.

    Raises:
        kubernetes.client.ApiException: The API server refused a write (e.g. 413 or
            ``etcdserver: request is too large`` for an object over etcd's 1.5 MiB).
    """
    name = f"cost-{partitions}"
    spec = _spec(partitions)
    handled = {"spec": spec if diffbase == "spec" else {SPEC_DIGEST: spec_digest(spec)}}
    body: dict[str, Any] = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "PartitionReassignment",
        "metadata": {"name": name, "annotations": {KOPF_DIFFBASE: json.dumps(handled)}},
        "spec": spec,
    }
    if last_applied:
        applied = {k: v for k, v in body.items() if k != "metadata"} | {
            "metadata": {"name": name, "namespace": NAMESPACE}
        }
        body["metadata"]["annotations"][LAST_APPLIED] = json.dumps(applied)
    args = (GROUP, VERSION, NAMESPACE, PARTITION_REASSIGNMENT.plural)
    api.create_namespaced_custom_object(*args, body)
    status: dict[str, Any] = {
        "phase": "Moving",
        "message": "accepted",
        "partitions": _entries(partitions, 0),
    }
    api.patch_namespaced_custom_object_status(*args, name, {"status": status})
    stored: dict[str, Any] = api.get_namespaced_custom_object(*args, name)  # type: ignore[assignment]
    size = len(json.dumps(stored))
    owned = len(json.dumps(stored["metadata"].get("managedFields")))
    costs = []
    for kind in ("totals", "partitions"):
        cpu, began = process_cpu_seconds(apiserver_pid), time.monotonic()
        for n in range(patches):
            patch: dict[str, Any]
            if kind == "totals":
                patch = {
                    "message": f"moving {n}",
                    "totals": {"bytesDone": n, "partitions": partitions},
                }
            else:
                patch = {"partitions": _entries(partitions, n + 1)}
            api.patch_namespaced_custom_object_status(*args, name, {"status": patch})
        cpu_ms = (process_cpu_seconds(apiserver_pid) - cpu) * 1000 / patches
        wall_ms = (time.monotonic() - began) * 1000 / patches
        costs.append(PatchCost(partitions, kind, size, owned, cpu_ms, wall_ms))
    api.delete_namespaced_custom_object(*args, name)
    return costs


def _watch(api_client: client.ApiClient, stop: threading.Event) -> None:
    api = client.CustomObjectsApi(api_client)
    while not stop.is_set():
        for _ in watch.Watch().stream(  # type: ignore[no-untyped-call]
            api.list_namespaced_custom_object,
            GROUP,
            VERSION,
            NAMESPACE,
            PARTITION_REASSIGNMENT.plural,
            timeout_seconds=2,
        ):
            if stop.is_set():
                return


def run(
    workdir: Path,
    sizes: list[int],
    patches: int,
    crds: Path = CRDS_DIR,
    watchers: int = 1,
    diffbase: str = "digest",
    last_applied: bool = False,
) -> list[PatchCost]:
    """Start etcd and kube-apiserver with ``crds``, measure each size, stop them."""
    plane = ControlPlane(workdir / "control-plane", crds_dir=crds)
    plane.start()
    stop = threading.Event()
    try:
        api_client = config.new_client_from_config(str(plane.kubeconfig))  # type: ignore[no-untyped-call]
        for _ in range(watchers):
            watcher_client = config.new_client_from_config(str(plane.kubeconfig))  # type: ignore[no-untyped-call]
            threading.Thread(target=_watch, args=(watcher_client, stop), daemon=True).start()
        pid = plane.apiserver.process.pid
        if pid is None:
            raise RuntimeError("kube-apiserver is not running")
        api = client.CustomObjectsApi(api_client)
        costs = []
        for partitions in sizes:
            for cost in measure(api, pid, partitions, patches, diffbase, last_applied):
                print(cost.line(), flush=True)
                costs.append(cost)
        return costs
    finally:
        stop.set()
        plane.stop()


def main(argv: list[str] | None = None) -> int:
    """Command line: see the module docstring."""
    parser = argparse.ArgumentParser(prog="python -m kpo_bench.apiserver_cost", description=__doc__)
    parser.add_argument("--partitions", default="40,2000", help="object sizes, comma-separated")
    parser.add_argument("--patches", type=int, default=50, help="PATCHes per size and kind")
    parser.add_argument("--crds", type=Path, default=CRDS_DIR, help="folder of the CRDs")
    parser.add_argument("--watchers", type=int, default=1, help="watches of the objects")
    parser.add_argument(
        "--diffbase", choices=("digest", "spec"), default="digest", help="kopf's stored essence"
    )
    parser.add_argument(
        "--last-applied", action="store_true", help="add kubectl's last-applied annotation"
    )
    parser.add_argument("--workdir", type=Path, help="scratch folder (default: a temporary one)")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.partitions.split(",") if s.strip()]
    with tempfile.TemporaryDirectory(prefix="kpo-apiserver-cost-") as tmp:
        run(
            args.workdir or Path(tmp),
            sizes,
            args.patches,
            crds=args.crds,
            watchers=args.watchers,
            diffbase=args.diffbase,
            last_applied=args.last_applied,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
