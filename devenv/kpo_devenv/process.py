"""One real server process: started in its own process group, logged to a file, always stopped.

Every :class:`ManagedProcess` is registered until stopped; an ``atexit`` hook
stops whatever is left, and on Linux the child is also asked (``PR_SET_PDEATHSIG``)
to be killed when the process that started it dies, so a crashed or killed
test run leaves no server behind.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import ctypes.util
import os
import signal
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO

from kpo_devenv.waiting import wait_until

_PR_SET_PDEATHSIG = 1
_LIBC_NAME = ctypes.util.find_library("c")
_LIBC = ctypes.CDLL(_LIBC_NAME, use_errno=True) if _LIBC_NAME else None

_LIVE: set[ManagedProcess] = set()


class ProcessStartError(RuntimeError):
    """A server process exited or did not become ready; the message ends with its log tail."""


def _die_with_parent() -> None:
    """Run in the child before exec: deliver SIGKILL to it when its parent dies."""
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class ManagedProcess:
    """A server process with a log file, a readiness wait and a guaranteed stop.

    Args:
        name: a short name for messages, e.g. ``"etcd"``.
        argv: the command line.
        log_path: file receiving the process's stdout and stderr.
        env: extra environment variables (added to this process's environment).
        cwd: working directory.
    """

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        log_path: Path,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.name = name
        self.argv = [str(arg) for arg in argv]
        self.log_path = log_path
        self.env = dict(env or {})
        self.cwd = cwd
        self._popen: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def pid(self) -> int | None:
        """The process id, or None before :meth:`start`."""
        return self._popen.pid if self._popen else None

    @property
    def returncode(self) -> int | None:
        """The exit status once the process has exited (negative: killed by that signal)."""
        return self._popen.poll() if self._popen else None

    def is_running(self) -> bool:
        """Return whether the process has been started and has not exited."""
        return self._popen is not None and self._popen.poll() is None

    def start(self) -> None:
        """Start the process in a new process group, logging to :attr:`log_path`.

        Raises:
            ProcessStartError: the executable cannot be run.
        """
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("ab")
        try:
            self._popen = subprocess.Popen(
                self.argv,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.cwd,
                env={**os.environ, **self.env},
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        except OSError as exc:
            self._log.close()
            raise ProcessStartError(f"{self.name}: cannot run {self.argv[0]}: {exc}") from exc
        _LIVE.add(self)

    def log_tail(self, lines: int = 40) -> str:
        """Return the last ``lines`` lines of the process's log (empty if none)."""
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def wait_ready(
        self, probe: Callable[[], bool], timeout_s: float, interval_s: float = 0.2
    ) -> None:
        """Poll ``probe`` until it returns True.

        Args:
            probe: returns True once the server serves; exceptions count as "not yet".
            timeout_s: how long to wait, in seconds.
            interval_s: pause between probes, in seconds.

        Raises:
            ProcessStartError: the process exited, or was not ready within
                ``timeout_s`` (it is then stopped). The message carries the log tail.
        """

        def ready() -> bool | None:
            if self._popen is None:
                raise ProcessStartError(f"{self.name} was never started")
            code = self._popen.poll()
            if code is not None:
                self._discard()
                raise ProcessStartError(self._failure(f"exited with code {code} while starting"))
            try:
                return True if probe() else None
            except Exception:  # a failing probe means "not ready yet"
                return None

        def not_ready() -> ProcessStartError:
            message = self._failure(f"not ready after {timeout_s:.0f} s")
            self.stop()
            return ProcessStartError(message)

        wait_until(ready, timeout_s, not_ready, interval_s)

    def _failure(self, what: str) -> str:
        return (
            f"{self.name} {what}\ncommand: {' '.join(self.argv)}\n"
            f"--- last lines of {self.log_path} ---\n{self.log_tail()}"
        )

    def stop(self, timeout_s: float = 15.0) -> None:
        """Stop the whole process group: SIGTERM, then SIGKILL after ``timeout_s`` seconds.

        Safe to call more than once and on a process that already exited.
        """
        popen = self._popen
        if popen is not None and popen.poll() is None:
            self._signal_group(popen.pid, signal.SIGTERM)
            try:
                popen.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self._signal_group(popen.pid, signal.SIGKILL)
                popen.wait(timeout=timeout_s)
        if popen is not None:
            # Children the server may have forked share its process group.
            self._signal_group(popen.pid, signal.SIGKILL)
        self._discard()

    def kill(self, timeout_s: float = 10.0) -> None:
        """Kill the process with SIGKILL (a crash: no clean shutdown) and wait for it to exit.

        Its process group is then stopped as :meth:`stop` does; safe if it already exited.
        """
        popen = self._popen
        if popen is not None and popen.poll() is None:
            os.kill(popen.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                popen.wait(timeout=timeout_s)
        self.stop(timeout_s=1)

    def _discard(self) -> None:
        _LIVE.discard(self)
        if self._log is not None:
            self._log.close()
            self._log = None

    @staticmethod
    def _signal_group(pgid: int, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)

    def __repr__(self) -> str:
        return f"ManagedProcess({self.name!r}, pid={self.pid})"


def live_processes() -> list[ManagedProcess]:
    """Return the processes started and not yet stopped."""
    return list(_LIVE)


@atexit.register
def stop_all() -> None:
    """Stop every process still running (registered with ``atexit``)."""
    for process in list(_LIVE):
        process.stop(timeout_s=5.0)
