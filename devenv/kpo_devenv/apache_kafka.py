"""A cluster of Apache Kafka brokers (ZooKeeper mode) run from the Maven Central jars.

``tools/install-kafka.sh`` puts ``kafka_2.13`` and ``kafka-tools`` with their
dependencies in ``$KPO_TOOLS_DIR/kafka-<version>/libs``; each broker here is
``java -cp '<libs>/*' kafka.Kafka server.properties``, with its own loopback port,
log dir, log4j file and heap. The classes subclass :class:`kpo_devenv.kafka_cluster.KafkaCluster`
and ``BrokerProcess`` (``brokers[id]`` with ``start``/``stop``/``kill``, ``port``,
``log_dir``), so the benchmark and the operator's tests on Apache Kafka drive both
systems the same way.

With a :class:`KafkaSecurity`, the brokers listen only on TLS listeners (``SASL_SSL``
with SCRAM-SHA-512 and/or ``SSL`` with ``ssl.client.auth=required``, PEM keystores from a
:class:`~kpo_devenv.pki.KafkaPki`), authorize with ``AclAuthorizer`` (no ACL: refused), and
:meth:`ApacheKafkaCluster.start` first creates the SCRAM users with Kafka's own
``kafka-configs --zookeeper ... --alter --add-config 'SCRAM-SHA-512=[...]' --entity-type
users``, as Kafka's documentation does before the brokers start. ACLs are granted with
Kafka's own ``kafka-acls`` (:meth:`ApacheKafkaCluster.acls`). Without one, brokers listen
on PLAINTEXT as before.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kazoo.client import KazooClient

from kpo_devenv.kafka_cluster import BrokerProcess, KafkaCluster
from kpo_devenv.net import LOOPBACK, free_port
from kpo_devenv.pki import CertKeyPair, KafkaPki
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


#: Kafka's tools run here (``kafka-configs``, ``kafka-acls``).
CONFIG_COMMAND = "kafka.admin.ConfigCommand"
ACL_COMMAND = "kafka.admin.AclCommand"

SCRAM_MECHANISM = "SCRAM-SHA-512"
_SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


@dataclass(frozen=True)
class KafkaSecurity:
    """TLS listeners, SCRAM users and ACL authorization for an Apache Kafka cluster.

    Attributes:
        pki: the CA and certificate issuer (broker certificates are issued per broker).
        listeners: the listeners each broker opens, among ``SASL_SSL`` and ``SSL`` (and
            ``PLAINTEXT``, e.g. for a benchmark's unsecured figure); the first is
            :attr:`ApacheBroker.port`. Brokers talk to each other on ``SSL`` (their
            certificates' principals ``User:CN=broker-<id>,O=kpo``) when it is listed, else
            on ``PLAINTEXT`` when that is listed, else on ``SASL_SSL`` as the SCRAM user
            ``broker``.
        ssl_client_auth: ``ssl.client.auth=required`` on the ``SSL`` listener (mutual TLS).
        scram_users: SCRAM-SHA-512 users to create before start, name -> password.
        super_users: further principals in ``super.users``, e.g. ``User:admin``.
        authorization: ``AclAuthorizer`` with ``super.users``; False: no authorizer
            (every authenticated principal may do everything, as Kafka's default).
    """

    pki: KafkaPki
    listeners: tuple[str, ...] = ("SASL_SSL",)
    ssl_client_auth: bool = True
    scram_users: Mapping[str, str] = field(default_factory=dict)
    super_users: tuple[str, ...] = ()
    authorization: bool = True

    #: The SCRAM user brokers authenticate as on ``SASL_SSL`` without an ``SSL`` listener.
    broker_user = "broker"
    broker_password = "broker-scram-secret"

    @property
    def inter_broker_listener(self) -> str:
        """The listener brokers replicate over."""
        for name in ("SSL", "PLAINTEXT"):
            if name in self.listeners:
                return name
        return "SASL_SSL"

    def users(self) -> dict[str, str]:
        """Every SCRAM user to create (the broker's included when it needs one)."""
        users = dict(self.scram_users)
        if self.inter_broker_listener == "SASL_SSL":
            users[self.broker_user] = self.broker_password
        return users

    def broker_properties(
        self, broker_id: int, ports: Mapping[str, int], keystore: Path, size: int
    ) -> dict[str, str]:
        """``server.properties`` entries of broker ``broker_id`` (Kafka's names)."""
        listeners = ",".join(f"{name}://{LOOPBACK}:{ports[name]}" for name in self.listeners)
        brokers = [f"User:CN=broker-{i},O=kpo" for i in range(size)]
        props = {
            "listeners": listeners,
            "advertised.listeners": listeners,
            "inter.broker.listener.name": self.inter_broker_listener,
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(keystore),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.pki.ca.cert),
        }
        if self.authorization:
            props["authorizer.class.name"] = "kafka.security.authorizer.AclAuthorizer"
            users = [*brokers, f"User:{self.broker_user}", *self.super_users]
            props["super.users"] = ";".join(users)
        if "SSL" in self.listeners and self.ssl_client_auth:
            props["listener.name.ssl.ssl.client.auth"] = "required"
        if "SASL_SSL" in self.listeners:
            props["sasl.enabled.mechanisms"] = SCRAM_MECHANISM
            props["sasl.mechanism.inter.broker.protocol"] = SCRAM_MECHANISM
            login = f"{_SCRAM_MODULE} required"
            if self.inter_broker_listener == "SASL_SSL":
                login += f' username="{self.broker_user}" password="{self.broker_password}"'
            props["listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config"] = login + ";"
        return props


def _jaas_quote(value: str) -> str:
    """Escape a JAAS option value for double quotes (Kafka's JaasConfig tokenizer)."""
    return value.replace("\\", "\\\\").replace('"', '\\"')


def client_properties(
    security: KafkaSecurity,
    listener: str,
    *,
    user: str | None = None,
    certificate: CertKeyPair | None = None,
) -> dict[str, str]:
    """Kafka client properties (``--command-config``) for ``listener`` of a secured cluster.

    Args:
        security: the cluster's security.
        listener: ``SASL_SSL`` or ``SSL``.
        user: the SCRAM user (``SASL_SSL``); its password is taken from ``scram_users``.
        certificate: the client certificate and key for mutual TLS (``SSL``).
    """
    props = {
        "security.protocol": listener,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(security.pki.ca.cert),
    }
    if listener == "SASL_SSL":
        assert user is not None
        password = security.users()[user]
        props["sasl.mechanism"] = SCRAM_MECHANISM
        props["sasl.jaas.config"] = (
            f'{_SCRAM_MODULE} required username="{_jaas_quote(user)}" '
            f'password="{_jaas_quote(password)}";'
        )
    if certificate is not None:
        props["ssl.keystore.type"] = "PEM"
        props["ssl.keystore.certificate.chain"] = certificate.cert.read_text().strip()
        props["ssl.keystore.key"] = certificate.key.read_text().strip()
    return props


def write_properties(path: Path, properties: Mapping[str, str]) -> Path:
    """Write ``properties`` as a Java properties file (newlines escaped); return ``path``."""
    lines = []
    for key, value in properties.items():
        escaped = value.replace("\\", "\\\\").replace("\n", "\\n")
        lines.append(f"{key}={escaped}\n")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(lines))
    path.chmod(0o600)
    return path


class KafkaToolError(RuntimeError):
    """One of Kafka's command-line tools exited non-zero; the message has its output."""


def run_kafka_tool(
    classpath: str, main_class: str, args: Sequence[str], timeout_s: float = 120.0
) -> str:
    """Run one of Kafka's tools (``java -cp <libs>/* <main class> <args>``); return stdout.

    Raises:
        KafkaToolError: it exited non-zero (with its stdout and stderr).
    """
    argv = java_command(classpath, 256, main_class, list(args))
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)
    if done.returncode != 0:
        raise KafkaToolError(
            f"{main_class} {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
        )
    return done.stdout


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
        security: TLS listeners and ACLs (:class:`KafkaSecurity`); ``None``: PLAINTEXT.
        size: brokers in the cluster (their principals are super users).
    """

    #: The logging configuration written to :attr:`log4j_path` (log4j 1 syntax for 3.x).
    log4j_text = _LOG4J

    def __init__(
        self,
        broker_id: int,
        workdir: Path,
        zookeeper_connect: str,
        classpath: str,
        properties: Mapping[str, str] | None = None,
        heap_mb: int = 512,
        security: KafkaSecurity | None = None,
        size: int = 3,
    ) -> None:  # the parent's __init__ is not called: its defaults are ours, not Kafka's
        self.broker_id = broker_id
        self.workdir = workdir
        self.security = security
        names = security.listeners if security else ("PLAINTEXT",)
        #: listener name -> loopback port.
        self.listener_ports = {name: free_port() for name in names}
        self.port = self.listener_ports[names[0]]
        self.ports = self.listener_ports  # as our brokers name it (bootstrap_servers_for)
        self.log_dir = workdir / "data"
        self.config_path = workdir / "server.properties"
        self.log4j_path = workdir / "log4j.properties"
        listener = f"PLAINTEXT://{LOOPBACK}:{self.port}"
        secured: dict[str, str] = {}
        if security is not None:
            keystore = workdir / "keystore.pem"
            secured = security.broker_properties(broker_id, self.listener_ports, keystore, size)
        self.properties = {
            "broker.id": str(broker_id),
            "listeners": listener,
            "advertised.listeners": listener,
            "log.dirs": str(self.log_dir),
            "zookeeper.connect": zookeeper_connect,
            "offsets.topic.replication.factor": "3",
            "transaction.state.log.replication.factor": "3",
            "group.initial.rebalance.delay.ms": "0",
            **secured,
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
        self.log4j_path.write_text(self.log4j_text)
        keystore = self.workdir / "keystore.pem"
        if self.security is not None and not keystore.exists():
            pair = self.security.pki.broker(self.broker_id)
            keystore.write_text(pair.key.read_text() + pair.cert.read_text())
            keystore.chmod(0o600)
        super().start(timeout_s)
        return self

    def bootstrap_of(self, listener: str) -> str:
        """``host:port`` of this broker's ``listener`` (e.g. ``SSL``)."""
        return f"{LOOPBACK}:{self.listener_ports[listener]}"


class ApacheKafkaCluster(KafkaCluster):
    """``size`` Apache Kafka brokers with ids ``0..size-1`` on one ZooKeeper chroot.

    Args:
        workdir: parent folder; broker ``i`` uses ``workdir/broker-<i>``.
        zookeeper_connect: ``zookeeper.connect`` with a chroot unique to this cluster.
        classpath: Kafka's class path (:func:`kafka_classpath`).
        size: number of brokers.
        properties: extra properties for every broker.
        heap_mb: heap of each broker JVM, MiB.
        security: TLS listeners, SCRAM users and ACL authorization; ``None``: PLAINTEXT.
    """

    stop_timeout_s = 30.0
    #: Kafka's ``kafka-acls`` main class (it moved to ``kafka-tools`` in 4.0).
    acl_command = ACL_COMMAND

    def __init__(
        self,
        workdir: Path,
        zookeeper_connect: str,
        classpath: str,
        size: int = 3,
        properties: Mapping[str, str] | None = None,
        heap_mb: int = 512,
        security: KafkaSecurity | None = None,
    ) -> None:  # the parent's __init__ is not called: it builds our broker processes
        self.workdir = workdir
        self.zookeeper_connect = zookeeper_connect
        self.classpath = classpath
        self.security = security
        self.brokers = {
            i: ApacheBroker(
                i,
                workdir / f"broker-{i}",
                zookeeper_connect,
                classpath,
                properties,
                heap_mb,
                security,
                size,
            )
            for i in range(size)
        }

    def start(self) -> ApacheKafkaCluster:
        """Create the SCRAM users (secured clusters), then start every broker.

        Raises:
            KafkaToolError: ``kafka-configs`` refused a user.
            kpo_devenv.process.ProcessStartError: a broker did not start.
        """
        if self.security is not None and self.security.users():
            self._ensure_chroot()
            for user, password in self.security.users().items():
                self.add_scram_user(user, password)
        super().start()
        return self

    def _ensure_chroot(self) -> None:
        hosts, _, chroot = self.zookeeper_connect.partition("/")
        client = KazooClient(hosts=hosts)
        client.start(timeout=30)
        try:
            client.ensure_path("/" + chroot)
        finally:
            client.stop()
            client.close()

    def add_scram_user(self, user: str, password: str) -> None:
        """Create (or update) SCRAM-SHA-512 credentials in ZooKeeper with ``kafka-configs``.

        Kafka's documented way before the brokers start: ``kafka-configs --zookeeper <zk>
        --alter --add-config 'SCRAM-SHA-512=[password=...]' --entity-type users
        --entity-name <user>``.

        Raises:
            KafkaToolError: the tool failed.
        """
        run_kafka_tool(
            self.classpath,
            CONFIG_COMMAND,
            [
                "--zookeeper",
                self.zookeeper_connect,
                "--alter",
                "--add-config",
                f"{SCRAM_MECHANISM}=[password={password}]",
                "--entity-type",
                "users",
                "--entity-name",
                user,
            ],
        )

    def bootstrap_for(self, listener: str) -> str:
        """Comma-separated ``host:port`` of the running brokers' ``listener``."""
        return ",".join(
            b.bootstrap_of(listener)
            for b in self.brokers.values()
            if isinstance(b, ApacheBroker) and b.is_running()
        )

    def acls(self, command_config: Path, *args: str) -> str:
        """Run Kafka's ``kafka-acls`` (AclCommand) against the cluster; return its output.

        Args:
            command_config: a super user's client properties (``--command-config``).
            args: e.g. ``--add --allow-principal User:op --operation Alter --cluster``.

        Raises:
            KafkaToolError: the tool failed.
        """
        assert self.security is not None, "ACLs need a secured cluster"
        listener = self.security.listeners[0]
        return run_kafka_tool(
            self.classpath,
            self.acl_command,
            [
                "--bootstrap-server",
                self.bootstrap_for(listener),
                "--command-config",
                str(command_config),
                *args,
            ],
        )
