"""ManagedProcess against real child processes (sh, sleep): start, readiness, log tail, stop."""

import os
import time
from pathlib import Path

import pytest

from kpo_devenv.process import ManagedProcess, ProcessStartError, live_processes


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # A zombie still answers kill(0); it is gone once its state is Z or it is reaped.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except FileNotFoundError:
        return True


def test_stop_kills_the_whole_process_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    proc = ManagedProcess(
        "tree", ["sh", "-c", f"sleep 300 & echo $! > {pidfile}; wait"], tmp_path / "log"
    )
    proc.start()
    proc.wait_ready(pidfile.exists, timeout_s=10)
    time.sleep(0.1)
    grandchild = int(pidfile.read_text())
    assert proc.pid is not None
    shell = proc.pid
    assert proc in live_processes()
    proc.stop()
    assert _gone(shell)
    deadline = time.monotonic() + 5
    while not _gone(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(grandchild)
    assert proc not in live_processes()
    proc.stop()  # idempotent


def test_a_process_ignoring_sigterm_is_killed(tmp_path: Path) -> None:
    proc = ManagedProcess(
        "stubborn",
        ["sh", "-c", "trap '' TERM; echo up; while :; do sleep 0.1; done"],
        tmp_path / "log",
    )
    proc.start()
    proc.wait_ready(lambda: "up" in proc.log_tail(), timeout_s=10)
    started = time.monotonic()
    proc.stop(timeout_s=0.5)
    assert not proc.is_running()
    assert time.monotonic() - started < 5


def test_exit_during_start_reports_the_log_tail(tmp_path: Path) -> None:
    proc = ManagedProcess(
        "broken",
        ["sh", "-c", "echo 'line one'; echo 'fatal: bad flag' >&2; exit 3"],
        tmp_path / "log",
    )
    proc.start()
    with pytest.raises(ProcessStartError) as info:
        proc.wait_ready(lambda: False, timeout_s=10)
    message = str(info.value)
    assert "broken exited with code 3" in message
    assert "fatal: bad flag" in message and "line one" in message
    assert proc not in live_processes()


def test_readiness_timeout_stops_the_process_and_reports_the_log_tail(tmp_path: Path) -> None:
    proc = ManagedProcess(
        "slow", ["sh", "-c", "echo still warming up; sleep 300"], tmp_path / "log"
    )
    proc.start()
    with pytest.raises(ProcessStartError) as info:
        proc.wait_ready(lambda: False, timeout_s=1, interval_s=0.1)
    assert "not ready after 1 s" in str(info.value)
    assert "still warming up" in str(info.value)
    assert not proc.is_running()


def test_missing_executable_is_a_start_error(tmp_path: Path) -> None:
    proc = ManagedProcess("ghost", [str(tmp_path / "no-such-binary")], tmp_path / "log")
    with pytest.raises(ProcessStartError, match="cannot run"):
        proc.start()
