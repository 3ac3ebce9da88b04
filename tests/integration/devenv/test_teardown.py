"""Teardown leaves no server behind when a test fails, or when pytest itself is killed."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.integration

INNER_TEST = """
import os, time
from pathlib import Path

def test_uses_zookeeper_then_{how}(zookeeper):
    Path(os.environ["PID_FILE"]).write_text(str(zookeeper.process.pid))
    {body}
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split()[2] != "Z"


def _wait_gone(pid: int, timeout_s: float = 15) -> bool:
    deadline = time.monotonic() + timeout_s
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not _alive(pid)


def _inner_pytest(tmp_path: Path, how: str, body: str) -> tuple[subprocess.Popen[bytes], Path]:
    test_file = tmp_path / f"test_inner_{how}.py"
    test_file.write_text(INNER_TEST.format(how=how, body=body))
    pid_file = tmp_path / "zookeeper.pid"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "tests.conftest",
            str(test_file),
            "--rootdir",
            str(tmp_path),
            "-p",
            "no:cacheprovider",
        ],
        cwd=REPO_ROOT,
        env={**os.environ, "PID_FILE": str(pid_file)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    return proc, pid_file


def test_failing_test_still_stops_zookeeper(tmp_path: Path) -> None:
    proc, pid_file = _inner_pytest(tmp_path, "fail", "assert False, 'boom'")
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 1, out.decode()
    assert b"1 failed" in out
    assert _wait_gone(int(pid_file.read_text()))


def test_killed_pytest_takes_zookeeper_with_it(tmp_path: Path) -> None:
    proc, pid_file = _inner_pytest(tmp_path, "hang", "time.sleep(300)")
    deadline = time.monotonic() + 90
    while not pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    zookeeper_pid = int(pid_file.read_text())
    assert _alive(zookeeper_pid)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert _wait_gone(zookeeper_pid)
