"""Follow a PartitionReassignment's status in a rich progress bar until it ends.

Bytes done/total, rate and ETA are the operator's own numbers
(``status.totals.bytesDone/bytesTotal/rate``, ``status.eta``; the CRD's status
schema), read from the API server with the ``kubernetes`` client.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kubernetes import client, config
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn

from kpo_devenv.operator_process import OperatorProcess

GROUP, VERSION, PLURAL = "kpo.dev", "v1alpha1", "partitionreassignments"
#: Phases after which the object will not reach ``Completed`` on its own.
FAILED_PHASES = ("Failed", "Cancelled")


class DemoFailedError(RuntimeError):
    """The move failed, was cancelled or timed out; the message says what the operator reported."""


def mib(n: float) -> str:
    """Format ``n`` bytes as MiB with one decimal, e.g. ``"1.0 MiB"``."""
    return f"{n / 1024 / 1024:.1f} MiB"


def eta_text(value: str | None, now: datetime | None = None) -> str:
    """Format an RFC 3339 ``status.eta`` as ``[h:]m:ss`` from ``now`` (``--:--`` when unknown)."""
    if not value:
        return "--:--"
    now = now or datetime.now(UTC)
    seconds = max(0, int((datetime.fromisoformat(value) - now).total_seconds()))
    hours, rest = divmod(seconds, 3600)
    text = f"{rest // 60}:{rest % 60:02d}"
    return f"{hours}:{text.zfill(5)}" if hours else text


def summary(status: dict[str, Any]) -> str:
    """Return one line about a finished move: its message, bytes copied and the time taken."""
    totals = status.get("totals") or {}
    line = f"{status.get('message', '')}; {mib(totals.get('bytesDone', 0))} copied"
    start, end = status.get("startTime"), status.get("completionTime")
    if start and end:
        took = datetime.fromisoformat(end) - datetime.fromisoformat(start)
        line += f" in {took.total_seconds():.0f} s"
    return line


def _fields(status: dict[str, Any]) -> dict[str, Any]:
    """Return the progress-bar fields for a status (bytes in ``total``/``completed``)."""
    totals = status.get("totals") or {}
    phase = status.get("phase") or "Waiting"
    total = totals.get("bytesTotal") or None
    done = totals.get("bytesDone", 0)
    if phase == "Completed":
        total = done = total or 1
    rate = totals.get("rate")
    return {
        "total": total,
        "completed": done,
        "phase": phase,
        "bytes": f"{done / 2**20:.1f}/{(total or 0) / 2**20:.1f} MiB" if total else "",
        "rate": f"{mib(rate)}/s" if rate is not None else "",
        "eta": eta_text(status.get("eta")) if phase == "Moving" else "--:--",
        "parts": f"{totals.get('partitionsDone', 0)}/{totals['partitions']} partitions"
        if "partitions" in totals
        else "",
    }


def watch_reassignment(
    kubeconfig: Path,
    namespace: str,
    name: str,
    operator: OperatorProcess,
    timeout_s: float,
    console: Console,
    poll_s: float = 0.5,
    note: Callable[[], str | None] | None = None,
) -> dict[str, Any]:
    """Show the object's status as a progress bar until its phase is ``Completed``.

    Args:
        kubeconfig: Kubeconfig of the control plane.
        namespace: The object's namespace.
        name: The PartitionReassignment's name.
        operator: The operator process (its death ends the wait).
        timeout_s: Limit, seconds.
        console: Where the bar is drawn.
        poll_s: Pause between GETs, seconds.
        note: Called at every poll while the phase is Moving; a line it returns is printed
            above the bar with the time since the watch began, the phase and the progress.

    Returns:
        The final object.

    Raises:
        DemoFailedError: phase Failed or Cancelled, the operator exited, or not
            Completed within ``timeout_s`` seconds.
    """
    api = config.new_client_from_config(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]
    objects = client.CustomObjectsApi(api)
    columns = (
        TextColumn("[bold]{task.fields[phase]:<9}"),
        BarColumn(bar_width=10),
        TextColumn("{task.percentage:>3.0f}%"),
        TextColumn("{task.fields[bytes]}"),
        TextColumn("{task.fields[rate]:>10}  ETA {task.fields[eta]}  {task.fields[parts]}"),
    )
    began = time.monotonic()
    deadline = began + timeout_s
    status: dict[str, Any] = {}
    last_error: Exception | None = None
    try:
        with Progress(*columns, console=console) as bar:
            task = bar.add_task(name, **_fields({}))
            while True:
                obj: Any = None
                try:
                    obj = objects.get_namespaced_custom_object(
                        GROUP, VERSION, namespace, PLURAL, name
                    )
                    status = obj.get("status") or {}
                except Exception as exc:  # the API server is briefly unavailable
                    last_error = exc
                fields = _fields(status)
                bar.update(task, **fields)
                phase = fields["phase"]
                line = note() if note is not None and phase == "Moving" else None
                if line:
                    done = bar.tasks[0].percentage if fields["total"] else 0.0
                    bar.console.print(
                        f"  {time.monotonic() - began:4.0f} s  {phase} {done:3.0f}%  {line}",
                        markup=False,
                        highlight=False,
                    )
                if obj is not None and phase == "Completed":
                    return dict(obj)
                if phase in FAILED_PHASES:
                    raise DemoFailedError(f"{name} {phase}: {status.get('message', '')}")
                if not operator.process.is_running():
                    raise DemoFailedError(
                        f"the operator exited; last lines of its log:\n{operator.log_tail()}"
                    )
                if time.monotonic() > deadline:
                    raise DemoFailedError(
                        f"{name} not Completed after {timeout_s:.0f} s (phase {phase}: "
                        f"{status.get('message', '')}; last API error: {last_error}); "
                        f"operator log: {operator.log_path}"
                    )
                time.sleep(poll_s)
    finally:
        api.close()
