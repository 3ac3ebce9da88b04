"""A cluster of Apache Kafka brokers (ZooKeeper mode) run from the Maven Central jars.

``tools/install-kafka.sh`` puts ``kafka_2.13`` and ``kafka-tools`` with their
dependencies in ``$KPO_TOOLS_DIR/kafka-<version>/libs``; each broker here is
``java -cp '<libs>/*' kafka.Kafka server.properties``, with its own loopback port,
log dir, log4j file and heap. The classes subclass :class:`kpo_devenv.kafka_cluster.KafkaCluster`
and ``BrokerProcess`` (``brokers[id]`` with ``start``/``stop``/``kill``, ``port``,
``log_dir``), so the benchmark and the operator's tests on Apache Kafka drive both
systems the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from kpo_devenv.kafka_cluster import BrokerProcess, KafkaCluster
from kpo_devenv.net import LOOPBACK, free_port
from kpo_devenv.process import ManagedProcess
from kpo_devenv.tools import java_path, tools_dir

#: The broker's entry point in ``kafka_2.13``.
MAIN_CLASS = "kafka.Kafka"

_LOG4J = """\
log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
log4j.logger.state.change.logger=INFO
"""


class KafkaNotInstalledError(FileNotFoundError):
    """The Apache Kafka jars are missing; the message says how to install them."""


def kafka_libs(version: str) -> Path:
    """Return the folder of Apache Kafka's jars for ``version``.

    Args:
        version: e.g. ``"3.9.2"`` (``KAFKA_VERSION`` in ``tools/versions.env``).

    Raises:
        KafkaNotInstalledError: ``tools/install-kafka.sh`` has not installed that version.
    """
    libs = tools_dir() / f"kafka-{version}" / "libs"
    if not (libs / f"kafka_2.13-{version}.jar").exists():
        raise KafkaNotInstalledError(f"Kafka {version} not in {libs}: run tools/install-kafka.sh")
    return libs


def kafka_classpath(version: str) -> str:
    """Return the ``-cp`` value (``<libs>/*``) for Kafka ``version``.

    Raises:
        KafkaNotInstalledError: see :func:`kafka_libs`.
    """
    return str(kafka_libs(version) / "*")


def java_command(
    classpath: str,
    heap_mb: int,
    main_class: str,
    args: list[str],
    jvm_options: list[str] | None = None,
) -> list[str]:
    """Return a ``java`` command line with a fixed heap and G1, as Kafka's start scripts use.

    Args:
        classpath: the ``-cp`` value.
        heap_mb: ``-Xms``/``-Xmx``, MiB.
        main_class: the class to run.
        args: its arguments.
        jvm_options: further JVM options (``-D...``).

    Raises:
        kpo_devenv.tools.ToolNotFoundError: no ``java`` on ``PATH``.
    """
    return [
        str(java_path()),
        f"-Xms{heap_mb}m",
        f"-Xmx{heap_mb}m",
        "-XX:+UseG1GC",
        "-XX:MaxGCPauseMillis=20",
        "-XX:InitiatingHeapOccupancyPercent=35",
        "-Djava.awt.headless=true",
        *(jvm_options or []),
        "-cp",
        classpath,
        main_class,
        *args,
    ]


class ApacheBroker(BrokerProcess):
    """One Apache Kafka broker process in ZooKeeper mode.

    Shares start/stop/kill with our :class:`~kpo_devenv.kafka_cluster.BrokerProcess`;
    only the command line, its defaults and the log4j file differ.

    Args:
        broker_id: ``broker.id``.
        workdir: folder for ``server.properties``, ``log4j.properties``, the log dir
            (``data``) and ``broker.log``.
        zookeeper_connect: ``zookeeper.connect`` including this cluster's chroot.
        classpath: Kafka's class path (:func:`kafka_classpath`).
        properties: broker properties overriding the defaults here (Kafka names).
        heap_mb: JVM heap (``-Xms``/``-Xmx``), MiB.
    """

    def __init__(
        self,
        broker_id: int,
        workdir: Path,
        zookeeper_connect: str,
        classpath: str,
        properties: Mapping[str, str] | None = None,
        heap_mb: int = 512,
    ) -> None:  # the parent's __init__ is not called: its defaults are ours, not Kafka's
        self.broker_id = broker_id
        self.workdir = workdir
        self.port = free_port()
        self.log_dir = workdir / "data"
        self.config_path = workdir / "server.properties"
        self.log4j_path = workdir / "log4j.properties"
        listener = f"PLAINTEXT://{LOOPBACK}:{self.port}"
        self.properties = {
            "broker.id": str(broker_id),
            "listeners": listener,
            "advertised.listeners": listener,
            "log.dirs": str(self.log_dir),
            "zookeeper.connect": zookeeper_connect,
            "offsets.topic.replication.factor": "3",
            "transaction.state.log.replication.factor": "3",
            "group.initial.rebalance.delay.ms": "0",
            **(properties or {}),
        }
        self._argv = java_command(
            classpath,
            heap_mb,
            MAIN_CLASS,
            [str(self.config_path)],
            [f"-Dlog4j.configuration=file:{self.log4j_path}"],
        )
        self.process = self._new_process()

    def _new_process(self) -> ManagedProcess:
        return ManagedProcess(f"kafka-{self.broker_id}", self._argv, self.workdir / "broker.log")

    def start(self, timeout_s: float = 90.0) -> ApacheBroker:
        """Write ``log4j.properties`` and start like our brokers (wait for the port).

        Raises:
            kpo_devenv.process.ProcessStartError: the JVM exited or never listened.
        """
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.log4j_path.write_text(_LOG4J)
        super().start(timeout_s)
        return self


class ApacheKafkaCluster(KafkaCluster):
    """``size`` Apache Kafka brokers with ids ``0..size-1`` on one ZooKeeper chroot.

    Args:
        workdir: parent folder; broker ``i`` uses ``workdir/broker-<i>``.
        zookeeper_connect: ``zookeeper.connect`` with a chroot unique to this cluster.
        classpath: Kafka's class path (:func:`kafka_classpath`).
        size: number of brokers.
        properties: extra properties for every broker.
        heap_mb: heap of each broker JVM, MiB.
    """

    stop_timeout_s = 30.0

    def __init__(
        self,
        workdir: Path,
        zookeeper_connect: str,
        classpath: str,
        size: int = 3,
        properties: Mapping[str, str] | None = None,
        heap_mb: int = 512,
    ) -> None:  # the parent's __init__ is not called: it builds our broker processes
        self.workdir = workdir
        self.zookeeper_connect = zookeeper_connect
        self.brokers = {
            i: ApacheBroker(
                i, workdir / f"broker-{i}", zookeeper_connect, classpath, properties, heap_mb
            )
            for i in range(size)
        }
