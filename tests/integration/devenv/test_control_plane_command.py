"""``python -m kpo_devenv control-plane`` as a user runs it: a process that holds until a signal."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from kpo_devenv.tools import tool_path
from tests.conftest import CRDS_DIR

pytestmark = pytest.mark.integration

CRD_NAMES = {yaml.safe_load(p.read_text())["metadata"]["name"] for p in CRDS_DIR.glob("*.yaml")}


def _processes_mentioning(text: str) -> dict[int, str]:
    """Running processes whose command line contains ``text``: pid -> command line."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # exited meanwhile
            continue
        if text in argv:
            found[int(entry.name)] = argv
    return found


def _wait_for(path: Path, process: subprocess.Popen[bytes], log: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        code = process.poll()
        assert code is None, f"exited with {code} before writing {path}:\n{log.read_text()}"
        assert time.monotonic() < deadline, f"no {path} after {timeout_s} s:\n{log.read_text()}"
        time.sleep(0.2)


@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "term"])
def test_control_plane_serves_the_crds_until_stopped(
    tmp_path: Path, stop_signal: signal.Signals
) -> None:
    kubeconfig = tmp_path / "here" / "kpo-kubeconfig"
    workdir = tmp_path / "plane"
    log = tmp_path / "control-plane.out"
    command = [sys.executable, "-m", "kpo_devenv", "control-plane"]
    command += ["--kubeconfig", str(kubeconfig), "--workdir", str(workdir)]
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
    try:
        _wait_for(kubeconfig, process, log, timeout_s=240)
        assert oct(kubeconfig.stat().st_mode & 0o777) == "0o600"
        listed = subprocess.run(
            [str(tool_path("kubectl")), f"--kubeconfig={kubeconfig}", "get", "crd", "-o", "name"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout.split()
        assert {
            name.removeprefix("customresourcedefinition.apiextensions.k8s.io/") for name in listed
        } == CRD_NAMES
        # The kubeconfig appears only after the CRDs are Established, so it is usable at once.
        established = subprocess.run(
            [
                str(tool_path("kubectl")),
                f"--kubeconfig={kubeconfig}",
                "get",
                "crd",
                "-o",
                "jsonpath={range .items[*]}"
                "{.status.conditions[?(@.type=='Established')].status}{' '}{end}",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout.split()
        assert established == ["True"] * len(CRD_NAMES)
        # The command announces the kubeconfig right after writing it.
        line = f"export KUBECONFIG={kubeconfig}\n"
        deadline = time.monotonic() + 30
        while line not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.2)
        output = log.read_text()
        assert f"export KUBECONFIG={kubeconfig}\n" in output
        servers = _processes_mentioning(str(workdir))
        del servers[process.pid]  # the command itself names the work dir too
        names = {Path(argv.split()[0]).name for argv in servers.values()}
        assert names == {"etcd", "kube-apiserver"}, servers

        # A second control plane may not take the kubeconfig of the running one.
        before = kubeconfig.read_text()
        second = subprocess.run(
            [*command[:-2], "--workdir", str(tmp_path / "second")],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert second.returncode == 1
        assert "still uses" in second.stdout and "stop it first" in second.stdout
        assert kubeconfig.read_text() == before
        assert not (tmp_path / "second").exists()

        process.send_signal(stop_signal)
        assert process.wait(timeout=90) == 0, log.read_text()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert _processes_mentioning(str(workdir)) == {}
    assert not kubeconfig.exists()
    assert log.read_text().rstrip().endswith("stopped")
    assert (workdir / "etcd" / "etcd.log").exists()  # a given work dir is kept


def test_a_foreign_file_at_the_kubeconfig_path_is_left_alone(tmp_path: Path) -> None:
    foreign = tmp_path / "config"
    text = "apiVersion: v1\nkind: Config\ncurrent-context: prod\n"
    foreign.write_text(text)
    done = subprocess.run(
        [sys.executable, "-m", "kpo_devenv", "control-plane", "--kubeconfig", str(foreign)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert "is not a kubeconfig written by kpo-devenv" in done.stdout
    assert foreign.read_text() == text
