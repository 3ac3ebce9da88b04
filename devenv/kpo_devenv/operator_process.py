"""The kpo operator as a local process (``python -m kpo_operator``), out of cluster.

It talks to the control plane through a kubeconfig and to the brokers through
their bootstrap servers, configured with the ``KPO_*`` variables of
:mod:`kpo_operator.settings`; its log goes to ``operator.log`` in its work dir.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

from kpo_devenv.process import ManagedProcess

READY_LINE = "kpo operator started"
"""What the operator logs once its handlers are registered and it is watching."""


class OperatorProcess:
    """One operator process watching ``namespaces`` (every namespace when empty).

    Args:
        workdir: Folder for ``operator.log``.
        kubeconfig: Kubeconfig of the control plane.
        bootstrap_servers: ``host:port[,...]`` of the Kafka cluster it manages.
        namespaces: Namespaces to watch.
        poll_interval_s: ``KPO_POLL_INTERVAL_S``, seconds between progress checks.
        quota_interval_s: ``KPO_QUOTA_INTERVAL_S``, seconds between drift checks.
        rate_window_s: ``KPO_RATE_WINDOW_S``, seconds of samples behind the rate/ETA.
        env: further variables, e.g. the Kafka client security ``KPO_KAFKA_*``.
    """

    def __init__(
        self,
        workdir: Path,
        kubeconfig: Path,
        bootstrap_servers: str,
        namespaces: Sequence[str] = (),
        poll_interval_s: float = 1.0,
        quota_interval_s: float = 5.0,
        rate_window_s: float = 10.0,
        env: dict[str, str] | None = None,
    ) -> None:
        self.workdir = workdir
        self.log_path = workdir / "operator.log"
        self.env = {
            "KUBECONFIG": str(kubeconfig),
            "KPO_BOOTSTRAP_SERVERS": bootstrap_servers,
            "KPO_NAMESPACES": ",".join(namespaces),
            "KPO_POLL_INTERVAL_S": str(poll_interval_s),
            "KPO_QUOTA_INTERVAL_S": str(quota_interval_s),
            "KPO_RATE_WINDOW_S": str(rate_window_s),
            "PYTHONUNBUFFERED": "1",
            **(env or {}),
        }
        self.process = self._new_process()

    def _new_process(self) -> ManagedProcess:
        return ManagedProcess(
            "kpo-operator",
            [sys.executable, "-m", "kpo_operator"],
            self.log_path,
            env=self.env,
            cwd=self.workdir,
        )

    def start(self, timeout_s: float = 60.0) -> OperatorProcess:
        """Start (or restart) the operator and wait until it logs :data:`READY_LINE`.

        Raises:
            ProcessStartError: It exited or did not get ready within ``timeout_s``.
        """
        self.workdir.mkdir(parents=True, exist_ok=True)
        offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        if not self.process.is_running():
            self.process = self._new_process()
        self.process.start()

        def ready() -> bool:
            with self.log_path.open("rb") as log:
                log.seek(offset)
                return READY_LINE.encode() in log.read()

        self.process.wait_ready(ready, timeout_s=timeout_s)
        return self

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop with SIGTERM (kopf finishes its handlers), SIGKILL after ``timeout_s``."""
        self.process.stop(timeout_s=timeout_s)

    def kill(self) -> None:
        """Kill the operator with SIGKILL, as a crashed pod would die, and wait for it."""
        self.process.kill()

    def log_tail(self, lines: int = 60) -> str:
        """Return the last ``lines`` lines of the operator's log."""
        return self.process.log_tail(lines)

    def __enter__(self) -> OperatorProcess:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
