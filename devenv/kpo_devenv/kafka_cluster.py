"""A cluster of real broker processes (``python -m kpo_broker``) sharing one ZooKeeper.

Each broker runs in its own process with a fresh log dir and a ``server.properties``
written here, listening on a free loopback port. Brokers can be stopped cleanly
(SIGTERM: controlled shutdown), killed (SIGKILL) and restarted on the same port and
log dir, which is what the broker tests need.

By default a broker has one ``PLAINTEXT`` listener. ``listeners`` (name -> security
protocol) gives it several, each on its own free port (the first is :attr:`BrokerProcess.port`
and the one start-up waits for); TLS and SASL settings go in ``properties``
(see :mod:`kpo_devenv.kafka_security` for PEM keystores and SCRAM users).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType

from kpo_devenv.net import LOOPBACK, free_port, port_accepts
from kpo_devenv.process import ManagedProcess
from kpo_devenv.runner import LocalRunner, Runner


class BrokerProcess:
    """One broker process.

    Args:
        broker_id: ``broker.id``.
        workdir: folder for ``server.properties``, the log dir and ``broker.log``.
        zookeeper_connect: ``zookeeper.connect`` (may carry a chroot).
        properties: further broker properties (Kafka names), overriding the defaults here.
        rack: ``broker.rack``, if any.
        log_dir_count: number of log dirs (``data``, ``data-1``, ...; KIP-113 tests).
        metrics: serve Prometheus metrics on a free loopback port (``metrics.port``,
            :attr:`metrics_port`); off by default.
        listeners: listener name -> security protocol (``PLAINTEXT``, ``SSL``,
            ``SASL_PLAINTEXT``, ``SASL_SSL``), each on a free loopback port; default one
            ``PLAINTEXT`` listener.
        runner: how the broker runs: a local process (default) or a container
            (:class:`kpo_devenv.runner.ContainerRunner`, the workdir mounted at its path).
        env: further environment variables of the broker process, e.g. ``KAFKA_OPTS``
            naming a JAAS file for ZooKeeper SASL
            (:func:`kpo_devenv.kafka_security.zookeeper_client_jaas`).
    """

    #: Port of the Prometheus endpoint (``metrics.port``); None when metrics are off.
    metrics_port: int | None = None

    def __init__(
        self,
        broker_id: int,
        workdir: Path,
        zookeeper_connect: str,
        properties: Mapping[str, str] | None = None,
        rack: str | None = None,
        log_dir_count: int = 1,
        metrics: bool = False,
        listeners: Mapping[str, str] | None = None,
        runner: Runner | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.env = dict(env or {})
        self.runner: Runner = runner or LocalRunner()
        self.workdir = workdir
        self.listener_protocols = dict(listeners or {"PLAINTEXT": "PLAINTEXT"})
        #: listener name -> port.
        self.ports = {name: free_port() for name in self.listener_protocols}
        self.port = next(iter(self.ports.values()))
        self.metrics_port = free_port() if metrics else None
        self.log_dir = workdir / "data"
        self.log_dirs = [self.log_dir] + [workdir / f"data-{i}" for i in range(1, log_dir_count)]
        self.config_path = workdir / "server.properties"
        endpoints = ",".join(f"{name}://{LOOPBACK}:{port}" for name, port in self.ports.items())
        settings = {
            "broker.id": str(broker_id),
            "listeners": endpoints,
            "advertised.listeners": endpoints,
            "log.dirs": ",".join(str(d) for d in self.log_dirs),
            "zookeeper.connect": zookeeper_connect,
            "zookeeper.session.timeout.ms": "6000",
            "replica.lag.time.max.ms": "10000",
            "replica.fetch.wait.max.ms": "100",
            "replica.fetch.backoff.ms": "200",
            "controlled.shutdown.retry.backoff.ms": "200",
            "leader.imbalance.check.interval.seconds": "5",
        }
        if any(name != protocol for name, protocol in self.listener_protocols.items()):
            settings["listener.security.protocol.map"] = ",".join(
                f"{name}:{protocol}" for name, protocol in self.listener_protocols.items()
            )
        if rack is not None:
            settings["broker.rack"] = rack
        if self.metrics_port is not None:
            settings["metrics.port"] = str(self.metrics_port)
            settings["metrics.host"] = LOOPBACK
        settings.update(properties or {})
        self.properties = settings
        self.process = self._new_process()

    def _new_process(self) -> ManagedProcess:
        return self.runner.process(
            f"broker-{self.broker_id}",
            "broker",
            ["python", "-m", "kpo_broker", str(self.config_path)],
            self.workdir / "broker.log",
            env={"PYTHONUNBUFFERED": "1", **self.env},
            mounts=[self.workdir],
        )

    @property
    def bootstrap(self) -> str:
        """``host:port`` of this broker's listener."""
        return f"{LOOPBACK}:{self.port}"

    def bootstrap_for(self, listener: str) -> str:
        """``host:port`` of this broker's listener ``listener``."""
        return f"{LOOPBACK}:{self.ports[listener]}"

    @property
    def metrics_url(self) -> str | None:
        """``http://host:port/metrics`` of this broker, None when metrics are off."""
        if self.metrics_port is None:
            return None
        return f"http://{LOOPBACK}:{self.metrics_port}/metrics"

    def start(self, timeout_s: float = 60.0) -> BrokerProcess:
        """Write the properties and start the broker; wait until its port accepts.

        With metrics on, the metrics port must accept too (it opens last in start-up).

        Raises:
            ProcessStartError: the broker exited or never listened (with its log tail).
        """
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in self.properties.items()))
        if self.process.pid is not None:
            self.process = self._new_process()
        self.process.start()
        metrics_port = self.metrics_port
        self.process.wait_ready(
            lambda: (
                port_accepts(self.port) and (metrics_port is None or port_accepts(metrics_port))
            ),
            timeout_s,
        )
        return self

    def stop(self, timeout_s: float = 60.0) -> None:
        """Stop cleanly with SIGTERM (controlled shutdown), SIGKILL after ``timeout_s``."""
        self.process.stop(timeout_s=timeout_s)

    def kill(self) -> None:
        """Kill the broker with SIGKILL (a crash: no controlled shutdown, no flush)."""
        self.process.kill()

    def is_running(self) -> bool:
        """Whether the process is alive."""
        return self.process.is_running()


class KafkaCluster:
    """N brokers with ids ``first_id..first_id+N-1`` on one ZooKeeper.

    Args:
        workdir: parent folder; broker ``i`` uses ``workdir/broker-<i>``.
        zookeeper_connect: ``zookeeper.connect`` including a chroot unique to this cluster.
        size: number of brokers.
        properties: extra properties for every broker.
        racks: optional rack per broker, in id order.
        first_id: id of the first broker.
        log_dir_count: number of log dirs per broker.
        metrics: give every broker a Prometheus metrics port (:attr:`BrokerProcess.metrics_url`).
        listeners: listener name -> security protocol, for every broker (see
            :class:`BrokerProcess`).
        broker_properties: broker id -> properties of that broker only (its keystore...),
            over ``properties``.
        runner: how the brokers run (local processes by default; see :mod:`kpo_devenv.runner`).
        env: further environment variables of every broker (see :class:`BrokerProcess`).
        broker_env: broker id -> environment variables of that broker only (e.g. a
            ``KAFKA_OPTS`` naming a file in its own folder), over ``env``.
    """

    def __init__(
        self,
        workdir: Path,
        zookeeper_connect: str,
        size: int = 3,
        properties: Mapping[str, str] | None = None,
        racks: list[str] | None = None,
        first_id: int = 0,
        log_dir_count: int = 1,
        metrics: bool = False,
        listeners: Mapping[str, str] | None = None,
        broker_properties: Callable[[int], Mapping[str, str]] | None = None,
        runner: Runner | None = None,
        env: Mapping[str, str] | None = None,
        broker_env: Callable[[int], Mapping[str, str]] | None = None,
    ) -> None:
        self.workdir = workdir
        self.zookeeper_connect = zookeeper_connect
        self.brokers = {
            first_id + i: BrokerProcess(
                first_id + i,
                workdir / f"broker-{first_id + i}",
                zookeeper_connect,
                {
                    **(properties or {}),
                    **(broker_properties(first_id + i) if broker_properties else {}),
                },
                racks[i] if racks else None,
                log_dir_count,
                metrics,
                listeners,
                runner,
                {**(env or {}), **(broker_env(first_id + i) if broker_env else {})},
            )
            for i in range(size)
        }

    @property
    def bootstrap_servers(self) -> str:
        """Comma-separated ``host:port`` of the running brokers."""
        return ",".join(b.bootstrap for b in self.brokers.values() if b.is_running())

    def bootstrap_servers_for(self, listener: str) -> str:
        """Comma-separated ``host:port`` of the running brokers' listener ``listener``."""
        return ",".join(b.bootstrap_for(listener) for b in self.brokers.values() if b.is_running())

    def start(self) -> KafkaCluster:
        """Start every broker (stopping all of them if one fails)."""
        try:
            for broker in self.brokers.values():
                broker.start()
        except BaseException:
            self.stop()
            raise
        return self

    #: How long a broker may take to stop cleanly before SIGKILL, s.
    stop_timeout_s = 20.0

    def stop(self) -> None:
        """Stop every broker (SIGTERM, then SIGKILL after :attr:`stop_timeout_s`)."""
        for broker in self.brokers.values():
            broker.process.stop(timeout_s=self.stop_timeout_s)

    def __enter__(self) -> KafkaCluster:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
