"""What a running demo leaves on disk so that ``kpo-devenv demo-down`` can stop it from elsewhere.

The demo writes ``<workdir>/demo.pids`` (JSON: the demo's own process and every
server process group it started, each with its Linux start time so a recycled
pid is never signalled) and points ``<state dir>/current`` at that workdir. The
state dir is ``$KPO_DEMO_STATE_DIR`` or ``~/.cache/kpo-demo``. :func:`demo_down`
asks the demo process to stop (SIGTERM: it stops its servers in order), then
stops any server group still alive (SIGTERM, then SIGKILL), and removes the pointer.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

STATE_FILE = "demo.pids"
POINTER_FILE = "current"


class DemoAlreadyRunningError(RuntimeError):
    """Another demo recorded in the state dir still has live processes (run demo-down first)."""


@dataclass(frozen=True)
class ProcessRecord:
    """One process the demo owns.

    Attributes:
        name: What it is, e.g. ``"broker-2"`` or ``"demo"``.
        pid: Its pid; for servers also its process-group id (they lead their group).
        start_ticks: Field 22 of ``/proc/<pid>/stat`` (start time after boot, clock ticks).
        group: Whether to signal the whole process group (servers) or only the pid (the demo).
    """

    name: str
    pid: int
    start_ticks: int
    group: bool = True


def default_state_dir() -> Path:
    """Return ``$KPO_DEMO_STATE_DIR`` or ``~/.cache/kpo-demo``."""
    configured = os.environ.get("KPO_DEMO_STATE_DIR")
    return Path(configured) if configured else Path.home() / ".cache" / "kpo-demo"


def start_ticks(pid: int) -> int | None:
    """Return the start time of ``pid`` (clock ticks after boot), None if no such live process."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    fields = text[text.rindex(")") + 2 :].split()  # fields 3.. follow the command name
    if fields[0] == "Z":  # a zombie has exited already
        return None
    return int(fields[19])


def record(name: str, pid: int, group: bool = True) -> ProcessRecord | None:
    """Return a :class:`ProcessRecord` for a live ``pid``, None if it is gone."""
    ticks = start_ticks(pid)
    return None if ticks is None else ProcessRecord(name, pid, ticks, group)


def is_alive(entry: ProcessRecord) -> bool:
    """Whether the recorded process still runs (same pid and same start time)."""
    return start_ticks(entry.pid) == entry.start_ticks


def write_state(workdir: Path, entries: Iterable[ProcessRecord], state_dir: Path) -> Path:
    """Write ``<workdir>/demo.pids`` and point ``<state_dir>/current`` at ``workdir``.

    Returns:
        The state file's path.
    """
    path = workdir / STATE_FILE
    payload = {"workdir": str(workdir), "processes": [asdict(e) for e in entries]}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(payload, indent=2))
    tmp.replace(path)
    state_dir.mkdir(parents=True, exist_ok=True)
    (state_dir / POINTER_FILE).write_text(f"{workdir}\n")
    return path


def read_state(state_dir: Path) -> tuple[Path | None, list[ProcessRecord]]:
    """Return the workdir the pointer names and its recorded processes (empty when unreadable)."""
    try:
        workdir = Path((state_dir / POINTER_FILE).read_text().strip())
        payload = json.loads((workdir / STATE_FILE).read_text())
    except (FileNotFoundError, NotADirectoryError, ValueError):
        return None, []
    entries = [ProcessRecord(**item) for item in payload.get("processes", [])]
    return workdir, entries


def clear_state(workdir: Path, state_dir: Path) -> None:
    """Remove ``<state_dir>/current`` if it points at ``workdir`` (idempotent)."""
    pointer = state_dir / POINTER_FILE
    with contextlib.suppress(FileNotFoundError):
        if Path(pointer.read_text().strip()) == workdir:
            pointer.unlink()


def ensure_not_running(state_dir: Path) -> None:
    """Clear a stale pointer; raise if the demo it names still has live processes.

    Raises:
        DemoAlreadyRunningError: a recorded process is alive.
    """
    workdir, entries = read_state(state_dir)
    alive = [e.name for e in entries if is_alive(e)]
    if alive:
        raise DemoAlreadyRunningError(
            f"a demo in {workdir} is still running ({', '.join(alive)}): run `make demo-down`"
        )
    with contextlib.suppress(FileNotFoundError):
        (state_dir / POINTER_FILE).unlink()


def _signal(entry: ProcessRecord, sig: signal.Signals) -> None:
    if is_alive(entry):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if entry.group:
                os.killpg(entry.pid, sig)
            else:
                os.kill(entry.pid, sig)


def _wait_gone(entries: list[ProcessRecord], timeout_s: float) -> list[ProcessRecord]:
    deadline = time.monotonic() + timeout_s
    while (alive := [e for e in entries if is_alive(e)]) and time.monotonic() < deadline:
        time.sleep(0.1)
    return alive


def demo_down(state_dir: Path | None = None, timeout_s: float = 90.0) -> list[str]:
    """Stop the demo the state dir points at, if any; safe when nothing runs.

    The demo process gets SIGTERM and ``timeout_s`` seconds to stop its servers
    itself; server groups still alive then get SIGTERM, and SIGKILL 10 s later.

    Args:
        state_dir: Where the pointer lives (default :func:`default_state_dir`).
        timeout_s: How long the demo process may take to stop, seconds.

    Returns:
        The names of the processes that were alive and have been stopped.
    """
    state_dir = state_dir or default_state_dir()
    workdir, entries = read_state(state_dir)
    alive = [e for e in entries if is_alive(e)]
    owners = [e for e in alive if not e.group]
    for entry in owners:
        _signal(entry, signal.SIGTERM)
    _wait_gone(owners, timeout_s)
    servers = [e for e in alive if e.group]
    for entry in _wait_gone(servers, 0):
        _signal(entry, signal.SIGTERM)
    for entry in _wait_gone(servers, 10.0):
        _signal(entry, signal.SIGKILL)
    _wait_gone(alive, 5.0)
    if workdir is not None:
        clear_state(workdir, state_dir)
    with contextlib.suppress(FileNotFoundError):
        (state_dir / POINTER_FILE).unlink()
    return [e.name for e in alive]
