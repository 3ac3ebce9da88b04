"""A real, standalone ZooKeeper server (Debian's ``zookeeper`` 3.8) on a loopback port."""

from __future__ import annotations

import socket
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

from kpo_devenv.net import LOOPBACK, free_port, port_accepts
from kpo_devenv.process import ManagedProcess, ProcessStartError
from kpo_devenv.runner import Runner
from kpo_devenv.tools import ZOOKEEPER_JARS, java_path, zookeeper_classpath

#: ZooKeeper's standalone entry point (the one zkServer.sh starts).
MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"


def four_letter_word(port: int, word: str, host: str = LOOPBACK, timeout_s: float = 2.0) -> str:
    """Send a ZooKeeper four-letter command (``ruok``, ``srvr``...) and return the reply text.

    Raises:
        OSError: the server cannot be reached.
    """
    with socket.create_connection((host, port), timeout=timeout_s) as sock:
        sock.sendall(word.encode("ascii"))
        chunks = []
        while chunk := sock.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", errors="replace")


class ZooKeeperServer:
    """A standalone ZooKeeper server with its data in ``workdir``.

    Args:
        workdir: folder for ``zoo.cfg``, the data directory and ``zookeeper.log``.
        port: client port on 127.0.0.1; a free one is picked when None.
        tick_time_ms: ZooKeeper's ``tickTime`` (ms); session timeouts are
            bounded to 2..20 ticks.
        extra_config: further ``zoo.cfg`` settings, overriding the defaults.
        runner: how the server runs: a local process with the machine's Java and Debian's
            jars (default), or e.g. a container of the ``zookeeper`` image
            (:class:`kpo_devenv.runner.ContainerRunner`; the same jars at the same paths).
    """

    def __init__(
        self,
        workdir: Path,
        port: int | None = None,
        tick_time_ms: int = 500,
        extra_config: Mapping[str, str] | None = None,
        runner: Runner | None = None,
    ) -> None:
        self.workdir = workdir
        self.port = port if port is not None else free_port()
        self.tick_time_ms = tick_time_ms
        self.extra_config = dict(extra_config or {})
        self.config_path = workdir / "zoo.cfg"
        self.data_dir = workdir / "data"
        options = [
            "-Xmx256m",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=info",
            "-Dorg.slf4j.simpleLogger.showDateTime=true",
            "-Dzookeeper.jmx.log4j.disable=true",
        ]
        log = workdir / "zookeeper.log"
        config = str(self.config_path)
        self.process: ManagedProcess
        if runner is None:
            self.process = ManagedProcess(
                "zookeeper",
                [str(java_path()), *options, "-cp", zookeeper_classpath(), MAIN_CLASS, config],
                log,
            )
        else:
            classpath = ":".join(str(jar) for jar in ZOOKEEPER_JARS)
            self.process = runner.process(
                "zookeeper",
                "zookeeper",
                ["java", *options, "-cp", classpath, MAIN_CLASS, config],
                log,
                mounts=[workdir],
            )

    @property
    def connect_string(self) -> str:
        """The ``zookeeper.connect`` string, e.g. ``"127.0.0.1:2181"``."""
        return f"{LOOPBACK}:{self.port}"

    def write_config(self) -> None:
        """Write ``zoo.cfg`` for a standalone server on 127.0.0.1."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        settings = {
            "tickTime": str(self.tick_time_ms),
            "dataDir": str(self.data_dir),
            "clientPort": str(self.port),
            "clientPortAddress": LOOPBACK,
            "maxClientCnxns": "0",
            "admin.enableServer": "false",
            "4lw.commands.whitelist": "ruok,srvr,stat,mntr",
            **self.extra_config,
        }
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))

    def is_serving(self) -> bool:
        """Return whether the server answers ``ruok`` with ``imok``."""
        try:
            return four_letter_word(self.port, "ruok") == "imok"
        except OSError:
            return False

    def start(self, timeout_s: float = 60.0) -> ZooKeeperServer:
        """Write the config, start the server and wait until it serves.

        Raises:
            ProcessStartError: the port is already taken, or the server exited or
                did not serve within ``timeout_s`` s (the message carries the log tail).
        """
        if port_accepts(self.port):
            raise ProcessStartError(f"zookeeper: port {self.port} on {LOOPBACK} is already in use")
        self.write_config()
        self.process.start()
        self.process.wait_ready(self.is_serving, timeout_s)
        return self

    def stop(self) -> None:
        """Stop the server (idempotent)."""
        self.process.stop()

    def __enter__(self) -> ZooKeeperServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
