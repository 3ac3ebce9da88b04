"""A Spark standalone cluster (a master and workers) as processes on loopback ports.

The processes come from the PySpark distribution installed in the virtualenv (its
``bin/spark-class`` and jars, ``SPARK_HOME`` = the ``pyspark`` package folder), started
as Spark's own ``sbin/start-master.sh`` / ``start-worker.sh`` would start them:
``spark-class org.apache.spark.deploy.master.Master --host --port --webui-port`` and
``spark-class org.apache.spark.deploy.worker.Worker --cores --memory --work-dir
spark://host:port``. The cluster is ready when the master's web UI (``/json/``, the
status page Spark's ``MasterWebUI`` serves) lists every worker as ``ALIVE``. A driver
then connects with ``SparkSession.builder.master(cluster.master_url)``.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.request
from pathlib import Path
from types import TracebackType

from kpo_devenv.net import LOOPBACK, free_port
from kpo_devenv.process import ManagedProcess, ProcessStartError
from kpo_devenv.tools import ToolNotFoundError, java_path

#: Spark's standalone master and worker entry points.
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


def spark_home() -> Path:
    """Return the Spark distribution inside the installed ``pyspark`` package.

    Raises:
        ToolNotFoundError: PySpark is not installed, or has no ``bin/spark-class``.
    """
    try:
        import pyspark
    except ImportError as exc:
        raise ToolNotFoundError("pyspark is not installed (the placement extra)") from exc
    home = Path(pyspark.__file__).parent
    if not (home / "bin" / "spark-class").is_file():
        raise ToolNotFoundError(f"{home} has no bin/spark-class")
    return home


class SparkStandaloneCluster:
    """A standalone master and ``workers`` workers on 127.0.0.1, logs in ``workdir``.

    Args:
        workdir: folder for the logs and each worker's work directory.
        workers: how many workers to start.
        cores_per_worker: ``--cores`` of each worker (cores offered to executors).
        memory_per_worker: ``--memory`` of each worker, e.g. ``"1g"``.
        daemon_memory: heap of the master and worker daemons (``SPARK_DAEMON_MEMORY``).

    Raises:
        ToolNotFoundError: no Java runtime or no PySpark distribution.
    """

    def __init__(
        self,
        workdir: Path,
        workers: int = 2,
        cores_per_worker: int = 1,
        memory_per_worker: str = "1g",
        daemon_memory: str = "256m",
    ) -> None:
        self.workdir = workdir
        self.home = spark_home()
        java = java_path()
        self.port = free_port()
        self.webui_port = free_port()
        self.worker_count = workers
        self.env = {
            "SPARK_HOME": str(self.home),
            "JAVA_HOME": str(java.resolve().parent.parent),
            "SPARK_LOCAL_IP": LOOPBACK,
            "SPARK_DAEMON_MEMORY": daemon_memory,
            "SPARK_LOG_DIR": str(workdir),
            "SPARK_NO_DAEMONIZE": "1",
            "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable),
        }
        spark_class = str(self.home / "bin" / "spark-class")
        self.master = ManagedProcess(
            "spark-master",
            [
                spark_class,
                MASTER_CLASS,
                "--host",
                LOOPBACK,
                "--port",
                str(self.port),
                "--webui-port",
                str(self.webui_port),
            ],
            workdir / "master.log",
            env=self.env,
            cwd=workdir,
        )
        self.workers: list[ManagedProcess] = []
        for i in range(workers):
            work = workdir / f"worker-{i}"
            self.workers.append(
                ManagedProcess(
                    f"spark-worker-{i}",
                    [
                        spark_class,
                        WORKER_CLASS,
                        "--host",
                        LOOPBACK,
                        "--port",
                        str(free_port()),
                        "--webui-port",
                        str(free_port()),
                        "--cores",
                        str(cores_per_worker),
                        "--memory",
                        memory_per_worker,
                        "--work-dir",
                        str(work),
                        self.master_url,
                    ],
                    workdir / f"worker-{i}.log",
                    env=self.env,
                    cwd=workdir,
                )
            )

    @property
    def master_url(self) -> str:
        """The ``--master`` URL of the cluster, ``spark://127.0.0.1:<port>``."""
        return f"spark://{LOOPBACK}:{self.port}"

    def status(self) -> dict[str, object]:
        """Return the master's status page (``/json/``: workers, applications...).

        Raises:
            OSError: the master's web UI does not answer.
        """
        url = f"http://{LOOPBACK}:{self.webui_port}/json/"
        with urllib.request.urlopen(url, timeout=5) as reply:
            data: dict[str, object] = json.load(reply)
        return data

    def alive_workers(self) -> int:
        """Return how many workers the master lists as ``ALIVE`` (0 if it does not answer)."""
        try:
            workers = self.status().get("workers", [])
        except OSError:
            return 0
        if not isinstance(workers, list):
            return 0
        return len([w for w in workers if isinstance(w, dict) and w.get("state") == "ALIVE"])

    def start(self, timeout_s: float = 120.0) -> None:
        """Start the master, then the workers; wait until every worker is ``ALIVE``.

        Raises:
            ProcessStartError: a process exited or the workers did not register within
                ``timeout_s`` (everything is stopped then).
        """
        self.workdir.mkdir(parents=True, exist_ok=True)
        try:
            self.master.start()
            self.master.wait_ready(lambda: "workers" in self.status(), timeout_s)
            for worker in self.workers:
                worker.start()
            self.master.wait_ready(lambda: self.alive_workers() == self.worker_count, timeout_s)
        except ProcessStartError:
            self.stop()
            raise
        if self.alive_workers() != self.worker_count:  # pragma: no cover - defensive
            self.stop()
            raise ProcessStartError("spark workers did not register")

    def stop(self) -> None:
        """Stop the workers, then the master (safe to call more than once)."""
        for worker in self.workers:
            worker.stop()
        self.master.stop()

    def __enter__(self) -> SparkStandaloneCluster:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
