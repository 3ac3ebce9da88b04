"""``kpo-devenv``: the real local stack and the main job on it.

``kpo-devenv demo`` is what ``make demo`` runs (see :mod:`kpo_devenv.demo`);
``kpo-devenv demo-down`` stops a demo left running with ``--hold``;
``kpo-devenv control-plane`` runs etcd and kube-apiserver with kpo's CRDs for an operator
run by hand (see :func:`control_plane`); ``kpo-devenv zookeeper`` runs a ZooKeeper server.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Annotated

import typer
import yaml
from rich.console import Console
from rich.markup import escape

from kpo_devenv.controlplane import (
    ControlPlane,
    KubeconfigInUseError,
    KubectlError,
    is_devenv_kubeconfig,
    live_devenv_server,
    publish_kubeconfig,
)
from kpo_devenv.demo import DEFAULT_THROTTLE, DemoOptions, install_signal_handlers, run_demo
from kpo_devenv.demo_data import DemoDataError
from kpo_devenv.demo_state import DemoAlreadyRunningError, demo_down
from kpo_devenv.demo_watch import DemoFailedError
from kpo_devenv.process import ProcessStartError
from kpo_devenv.tools import ToolNotFoundError
from kpo_devenv.zookeeper import ZooKeeperServer

app = typer.Typer(help=__doc__, no_args_is_help=True, add_completion=False)
console = Console()

REPO_ROOT = Path(__file__).resolve().parents[2]

WorkdirOption = Annotated[
    Path | None, typer.Option(help="Folder for data and logs (default: a temp dir).")
]


@app.command()
def demo(
    megabytes: Annotated[int, typer.Option(min=1, help="Data to produce, MiB.")] = 50,
    throttle: Annotated[
        int, typer.Option(min=1, help="Replication throttle of the move, bytes/s.")
    ] = DEFAULT_THROTTLE,
    timeout: Annotated[
        float | None, typer.Option(help="Limit for the move, s (default: from the throttle).")
    ] = None,
    hold: Annotated[
        bool, typer.Option(help="Keep the stack running after the job until demo-down/Ctrl-C.")
    ] = False,
    workdir: WorkdirOption = None,
    crds: Annotated[Path, typer.Option(help="Folder of CRD manifests.")] = REPO_ROOT / "crds",
    containers: Annotated[
        bool,
        typer.Option(
            help="Run ZooKeeper, the brokers and the operator in podman containers of "
            "kpo's images (make image) rather than as processes."
        ),
    ] = False,
    image: Annotated[
        str, typer.Option(help="With --containers: image of the brokers and the operator.")
    ] = "ghcr.io/kpo-dev/kpo:dev",
    zookeeper_image: Annotated[
        str, typer.Option(help="With --containers: image of ZooKeeper.")
    ] = "localhost/kpo-zookeeper:dev",
    plaintext: Annotated[
        bool,
        typer.Option(
            help="DEVELOPMENT ONLY: PLAINTEXT listeners, no ACLs, ZooKeeper without SASL "
            "(default: SASL_SSL with SCRAM for clients, mutual TLS between brokers, ACLs)."
        ),
    ] = False,
) -> None:
    """Run the main job: stack up, topic, data, a throttled PartitionReassignment, verify, stop."""
    images = {"zookeeper": zookeeper_image, "broker": image, "operator": image}
    options = DemoOptions(
        workdir=workdir or Path(tempfile.mkdtemp(prefix="kpo-demo-")),
        megabytes=megabytes,
        throttle=throttle,
        timeout_s=timeout,
        hold=hold,
        crds_dir=crds,
        images=images if containers else None,
        plaintext=plaintext,
    )
    install_signal_handlers()
    try:
        result = run_demo(options, console)
    except KeyboardInterrupt:
        console.print("interrupted: everything is stopped")
        raise typer.Exit(130) from None
    except (
        DemoAlreadyRunningError,
        DemoFailedError,
        DemoDataError,
        ProcessStartError,
        KubectlError,
        ToolNotFoundError,
    ) as exc:
        console.print(f"[red]demo failed:[/] {escape(str(exc))}", highlight=False)
        console.print(f"logs: {options.workdir}")
        raise typer.Exit(1) from None
    if not result.ok:
        console.print(
            f"[red]demo failed: phase {result.phase}, checks above; logs in {options.workdir}"
        )
        raise typer.Exit(1)
    console.print("[green]demo passed: the move completed and every record is on its new replicas")
    if workdir is None:  # a temp dir of our own: its ~3x --megabytes of logs are not needed
        shutil.rmtree(options.workdir, ignore_errors=True)


@app.command("demo-down")
def demo_down_command(
    timeout: Annotated[float, typer.Option(help="Time the demo gets to stop itself, s.")] = 90,
) -> None:
    """Stop a demo still running (e.g. after --hold); does nothing when none runs."""
    stopped = demo_down(timeout_s=timeout)
    console.print(f"stopped: {', '.join(stopped)}" if stopped else "no demo running")


@app.command(
    "control-plane",
    help="Run etcd and kube-apiserver with kpo's CRDs Established until Ctrl-C or SIGTERM. "
    "The kubeconfig appears once the CRDs are Established; on exit the servers stop and it "
    "is removed.",
)
def control_plane(
    kubeconfig: Annotated[
        Path, typer.Option(help="Where to write the kubeconfig (removed again on exit).")
    ] = Path("kpo-kubeconfig"),
    workdir: WorkdirOption = None,
    crds: Annotated[Path, typer.Option(help="Folder of CRD manifests.")] = REPO_ROOT / "crds",
) -> None:
    """Run etcd and kube-apiserver with kpo's CRDs Established until Ctrl-C or SIGTERM.

    The kubeconfig (user ``kpo-admin``, in ``system:masters``) is written once the CRDs
    are Established, so its appearance means the API server is ready for the operator.
    On exit the servers are stopped and the kubeconfig removed (and a temporary work dir,
    unless a server failed); the exit status is 0 after Ctrl-C or SIGTERM, 1 if a server
    failed.
    """
    if kubeconfig.exists() and not is_devenv_kubeconfig(kubeconfig):
        console.print(
            f"[red]{escape(str(kubeconfig))} exists and is not a kubeconfig written by "
            "kpo-devenv:[/] give another path (--kubeconfig)",
            highlight=False,
        )
        raise typer.Exit(1)
    if (running := live_devenv_server(kubeconfig)) is not None:
        console.print(
            f"[red]the control plane at {running} still uses {escape(str(kubeconfig))}:[/] "
            "stop it first (Ctrl-C in its terminal) or give another path (--kubeconfig)",
            highlight=False,
        )
        raise typer.Exit(1)
    base = workdir or Path(tempfile.mkdtemp(prefix="kpo-control-plane-"))
    install_signal_handlers()
    plane: ControlPlane | None = None
    published: Path | None = None
    written = ""
    failed = False
    try:
        names = sorted(
            yaml.safe_load(p.read_text())["metadata"]["name"] for p in crds.glob("*.yaml")
        )
        plane = ControlPlane(base, crds_dir=crds)
        plane.start()
        # Published last and announced at once: its appearance means ready.
        published = publish_kubeconfig(kubeconfig, plane.apiserver.url, plane.pki)
        written = published.read_text()
        console.print(
            f"kube-apiserver on {plane.apiserver.url}, etcd on {plane.etcd.client_url}; "
            f"CRDs Established: {', '.join(names)}",
            highlight=False,
            soft_wrap=True,
        )
        console.print(f"logs: {escape(str(base))}", highlight=False, soft_wrap=True)
        console.print("Use it from another terminal:", highlight=False)
        console.print(
            f"    export KUBECONFIG={escape(str(published))}", highlight=False, soft_wrap=True
        )
        console.print("Ctrl-C stops it.", highlight=False)
        while all(process.is_running() for process in plane.processes):
            time.sleep(0.5)
        stopped = [p for p in plane.processes if not p.is_running()]
        for process in stopped:
            console.print(
                f"[red]{process.name} exited with code {process.returncode}; "
                f"last lines of {escape(str(process.log_path))}:[/]\n"
                f"{escape(process.log_tail(20))}",
                highlight=False,
            )
        failed = True
    except KeyboardInterrupt:
        console.print("stopping the control plane")
    except (ProcessStartError, KubectlError, KubeconfigInUseError, ToolNotFoundError) as exc:
        console.print(f"[red]control plane failed:[/] {escape(str(exc))}", highlight=False)
        failed = True
    finally:
        if plane is not None:
            plane.stop()
        if published is not None and _reads(published) == written:  # not replaced since
            published.unlink(missing_ok=True)
    if failed:  # the logs stay for a look
        console.print(f"logs kept in {escape(str(base))}", highlight=False)
        raise typer.Exit(1)
    if workdir is None:
        shutil.rmtree(base, ignore_errors=True)
    console.print("stopped")


def _reads(path: Path) -> str | None:
    """Return the text of ``path``, None if it cannot be read (e.g. removed)."""
    try:
        return path.read_text()
    except OSError:
        return None


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
