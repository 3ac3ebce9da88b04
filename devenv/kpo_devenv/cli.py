"""``kpo-devenv``: bring up the real local stack (ZooKeeper, etcd, kube-apiserver) and show it.

``kpo-devenv demo`` is what ``make demo`` runs.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from kpo_devenv.controlplane import ControlPlane
from kpo_devenv.zookeeper import ZooKeeperServer, four_letter_word

app = typer.Typer(help=__doc__, no_args_is_help=True, add_completion=False)
console = Console()

REPO_ROOT = Path(__file__).resolve().parents[2]
DEMO_NAMESPACE = "kpo-demo"

WorkdirOption = Annotated[
    Path | None, typer.Option(help="Folder for data and logs (default: a temp dir).")
]


def _show(plane: ControlPlane, *args: str) -> None:
    console.rule(f"[bold]kubectl {' '.join(args)}")
    console.print(
        plane.kubectl(*args).stdout.rstrip(), markup=False, highlight=False, soft_wrap=True
    )


@app.command()
def demo(
    hold: Annotated[bool, typer.Option(help="Keep the stack running until Ctrl-C.")] = False,
    workdir: WorkdirOption = None,
    crds: Annotated[Path, typer.Option(help="Folder of CRD manifests.")] = REPO_ROOT / "crds",
) -> None:
    """Start ZooKeeper and a control plane, apply the CRDs and examples, and show them."""
    base = workdir or Path(tempfile.mkdtemp(prefix="kpo-demo-"))
    console.print(f"work dir: {base}")
    with ZooKeeperServer(base / "zookeeper") as zookeeper:
        server = four_letter_word(zookeeper.port, "srvr").splitlines()[0]
        console.print(f"ZooKeeper serving on {zookeeper.connect_string} ({server})")
        started = time.monotonic()
        with ControlPlane(base / "control-plane", crds_dir=crds) as plane:
            console.print(
                f"kube-apiserver ready on {plane.apiserver.url} with CRDs Established "
                f"in {time.monotonic() - started:.1f} s; KUBECONFIG={plane.kubeconfig}"
            )
            _show(plane, "version")
            _show(plane, "get", "crd", "-l", "app.kubernetes.io/part-of=kpo")
            plane.kubectl("create", "namespace", DEMO_NAMESPACE)
            _show(plane, "apply", "-n", DEMO_NAMESPACE, "-f", str(crds / "examples"))
            _show(plane, "get", "partitionreassignments,topicreplicaquotas", "-n", DEMO_NAMESPACE)
            _show(plane, "explain", "partitionreassignment.spec.partitions")
            if hold:
                console.print(
                    f"\nRunning. Try: export KUBECONFIG={plane.kubeconfig}; "
                    f"kubectl get pr -n {DEMO_NAMESPACE}\nCtrl-C stops everything."
                )
                try:
                    while all(p.is_running() for p in plane.processes):
                        time.sleep(1)
                except KeyboardInterrupt:
                    pass
    console.print("stopped ZooKeeper, kube-apiserver and etcd")


@app.command()
def zookeeper(
    port: Annotated[int, typer.Option(help="Client port on 127.0.0.1.")] = 2181,
    workdir: WorkdirOption = None,
) -> None:
    """Run a standalone ZooKeeper server until Ctrl-C."""
    base = workdir or Path(tempfile.mkdtemp(prefix="kpo-zookeeper-"))
    with ZooKeeperServer(base, port=port) as server:
        console.print(f"ZooKeeper on {server.connect_string}; Ctrl-C stops it")
        try:
            while server.process.is_running():
                time.sleep(1)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    app()
