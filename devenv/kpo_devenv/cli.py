"""``kpo-devenv``: the real local stack and the main job on it.

``kpo-devenv demo`` is what ``make demo`` runs (see :mod:`kpo_devenv.demo`);
``kpo-devenv demo-down`` stops a demo left running with ``--hold``.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from kpo_devenv.controlplane import KubectlError
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
