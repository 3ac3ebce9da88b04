"""A cluster of Apache Kafka 4.x nodes in KRaft mode run from the Maven Central jars.

Kafka 4.0 removed ZooKeeper: metadata lives in a Raft quorum of controllers (KIP-500,
KIP-631). Here every node is combined (``process.roles=broker,controller``), the
quorum is static (``controller.quorum.voters=<id>@127.0.0.1:<port>,...``) and each
node's log dir is formatted first with Kafka's own ``kafka-storage format --cluster-id
<id> --config server.properties`` (``kafka.tools.StorageTool``), as Kafka's quick
start does. ``tools/install-kafka.sh 4`` installs the jars (``KAFKA4_VERSION`` in
``tools/versions.env``).

The classes keep the interface of :mod:`kpo_devenv.apache_kafka` (ZooKeeper mode), so
the operator's tests run on both unchanged: ``brokers[id]`` with ``start``/``stop``/
``kill``/``port``/``log_dir``, :attr:`~KafkaCluster.bootstrap_servers`,
``bootstrap_for(listener)``, ``acls(...)`` and :meth:`KraftKafkaCluster.add_scram_user`,
and the same :class:`~kpo_devenv.apache_kafka.KafkaSecurity`. What differs in KRaft:

- SCRAM users before start are written into the metadata log by ``kafka-storage format
  --add-scram 'SCRAM-SHA-512=[name=<user>,password=<password>]'`` (KIP-900); afterwards
  they are created through the Admin API (AlterUserScramCredentials, KIP-554) with
  Kafka's ``kafka-configs --bootstrap-server``, as a super user.
- ACLs are enforced by ``StandardAuthorizer`` (``AclAuthorizer`` needed ZooKeeper).
- The controller listener (``CONTROLLER``) is PLAINTEXT, or ``SSL`` with client
  certificates on a secured cluster so that only the nodes' own principals
  (``User:CN=broker-<id>,O=kpo``, super users) reach the quorum.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kpo_devenv.apache_kafka import (
    SCRAM_MECHANISM,
    ApacheBroker,
    ApacheKafkaCluster,
    KafkaSecurity,
    client_properties,
    java_command,
    run_kafka_tool,
    write_properties,
)
from kpo_devenv.kafka_cluster import BrokerProcess
from kpo_devenv.net import LOOPBACK, free_port, port_accepts

#: Kafka's ``kafka-storage`` (formats a node's log dirs with the cluster id).
STORAGE_TOOL = "kafka.tools.StorageTool"
#: Kafka's ``kafka-configs`` and ``kafka-acls`` in 4.x (``kafka-tools``).
CONFIG_COMMAND = "org.apache.kafka.tools.ConfigCommand"
ACL_COMMAND = "org.apache.kafka.tools.AclCommand"
#: The KRaft authorizer (ACLs in the metadata log).
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
CONTROLLER_LISTENER = "CONTROLLER"

_LOG4J2 = """\
status = warn
appender.stdout.type = Console
appender.stdout.name = STDOUT
appender.stdout.layout.type = PatternLayout
appender.stdout.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.stdout.ref = STDOUT
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.state.name = state.change.logger
logger.state.level = INFO
"""


def new_cluster_id() -> str:
    """Return a random KRaft cluster id: 16 random bytes in URL-safe base64 without padding.

    The form of Kafka's ``Uuid.toString`` (``kafka-storage random-uuid``), 22 characters.
    """
    while True:  # as Kafka's Uuid.randomUuid: never one starting with "-" (read as an option)
        found = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not found.startswith("-"):
            return found


class KraftNode(ApacheBroker):
    """One combined broker+controller Apache Kafka 4.x node (``process.roles=broker,controller``).

    Args:
        node_id: ``node.id`` (also its id as a broker).
        workdir: folder for ``server.properties``, ``log4j2.properties``, the log dir
            (``data``, also the metadata log dir) and ``broker.log``.
        classpath: Kafka's class path (:func:`~kpo_devenv.apache_kafka.kafka_classpath`).
        controller_port: this node's ``CONTROLLER`` listener port.
        voters: ``controller.quorum.voters`` (``<id>@<host>:<port>,...``).
        properties: node properties overriding the defaults here (Kafka names).
        heap_mb: JVM heap, MiB.
        security: TLS listeners, SCRAM and ACLs; ``None``: PLAINTEXT.
        size: nodes in the cluster (their principals are super users).
        jvm_options: further JVM options, e.g. a ``-javaagent:`` (:func:`jmx_exporter_option`).
    """

    log4j_text = _LOG4J2

    def __init__(
        self,
        node_id: int,
        workdir: Path,
        classpath: str,
        controller_port: int,
        voters: str,
        properties: Mapping[str, str] | None = None,
        heap_mb: int = 512,
        security: KafkaSecurity | None = None,
        size: int = 3,
        jvm_options: list[str] | None = None,
    ) -> None:
        super().__init__(node_id, workdir, "", classpath, None, heap_mb, security, size)
        self.controller_port = controller_port
        self.log4j_path = workdir / "log4j2.properties"
        base = {k: v for k, v in self.properties.items() if k not in ("zookeeper.connect",)}
        del base["broker.id"]
        controller = f"{CONTROLLER_LISTENER}://{LOOPBACK}:{controller_port}"
        names = security.listeners if security else ("PLAINTEXT",)
        protocols = {name: name for name in names}
        protocols[CONTROLLER_LISTENER] = "SSL" if security else "PLAINTEXT"
        kraft = {
            "process.roles": "broker,controller",
            "node.id": str(node_id),
            "controller.quorum.voters": voters,
            "controller.listener.names": CONTROLLER_LISTENER,
            "listeners": f"{base['listeners']},{controller}",
            "listener.security.protocol.map": ",".join(f"{k}:{v}" for k, v in protocols.items()),
            "inter.broker.listener.name": base.get("inter.broker.listener.name", "PLAINTEXT"),
        }
        if security is not None:
            kraft["authorizer.class.name"] = STANDARD_AUTHORIZER
            kraft["listener.name.controller.ssl.client.auth"] = "required"
        self.properties = {**base, **kraft, **(properties or {})}
        self._argv = java_command(
            classpath,
            heap_mb,
            "kafka.Kafka",
            [str(self.config_path)],
            [f"-Dlog4j2.configurationFile={self.log4j_path}", *(jvm_options or [])],
        )
        self.process = self._new_process()

    def write_config(self) -> None:
        """Write ``server.properties`` (as :meth:`start` does)."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in self.properties.items()))

    def launch(self) -> None:
        """Start the JVM without waiting for it to listen (a quorum needs its peers first)."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.log4j_path.write_text(self.log4j_text)
        self._write_keystore()
        self.write_config()
        if self.process.pid is not None:
            self.process = self._new_process()
        self.process.start()

    def wait_listening(self, timeout_s: float = 120.0) -> None:
        """Wait until the client listener and the controller listener accept connections.

        Raises:
            kpo_devenv.process.ProcessStartError: the JVM exited or never listened.
        """
        self.process.wait_ready(
            lambda: port_accepts(self.port) and port_accepts(self.controller_port), timeout_s
        )

    def start(self, timeout_s: float = 120.0) -> KraftNode:
        """Restart this one node (its peers running); wait until it listens.

        Raises:
            kpo_devenv.process.ProcessStartError: the JVM exited or never listened.
        """
        self.launch()
        self.wait_listening(timeout_s)
        return self

    def _write_keystore(self) -> None:
        keystore = self.workdir / "keystore.pem"
        if self.security is not None and not keystore.exists():
            pair = self.security.pki.broker(self.broker_id)
            keystore.write_text(pair.key.read_text() + pair.cert.read_text())
            keystore.chmod(0o600)


class KraftKafkaCluster(ApacheKafkaCluster):
    """``size`` combined broker+controller Apache Kafka 4.x nodes with ids ``0..size-1``.

    Args:
        workdir: parent folder; node ``i`` uses ``workdir/broker-<i>``.
        classpath: Kafka 4.x's class path (:func:`~kpo_devenv.apache_kafka.kafka_classpath`
            of ``KAFKA4_VERSION``).
        size: number of nodes, every one a voter of the quorum.
        properties: extra properties for every node.
        heap_mb: heap of each JVM, MiB.
        security: TLS listeners, SCRAM users and ACL authorization; ``None``: PLAINTEXT.
        cluster_id: the KRaft cluster id (random by default).
        jvm_options: node id -> further JVM options of that node (e.g. the JMX exporter).
    """

    acl_command = ACL_COMMAND

    def __init__(
        self,
        workdir: Path,
        classpath: str,
        size: int = 3,
        properties: Mapping[str, str] | None = None,
        heap_mb: int = 512,
        security: KafkaSecurity | None = None,
        cluster_id: str | None = None,
        jvm_options: Callable[[int], list[str]] | None = None,
    ) -> None:  # the parent's __init__ is not called: it builds ZooKeeper-mode brokers
        self.workdir = workdir
        self.zookeeper_connect = ""
        self.classpath = classpath
        self.security = security
        self.cluster_id = cluster_id or new_cluster_id()
        self._formatted = False
        self._pending_users: dict[str, str] = dict(security.users()) if security else {}
        ports = {i: free_port() for i in range(size)}
        voters = ",".join(f"{i}@{LOOPBACK}:{port}" for i, port in ports.items())
        nodes = {
            i: KraftNode(
                i,
                workdir / f"broker-{i}",
                classpath,
                ports[i],
                voters,
                properties,
                heap_mb,
                security,
                size,
                jvm_options(i) if jvm_options else None,
            )
            for i in range(size)
        }
        self.nodes = nodes
        self.brokers: dict[int, BrokerProcess] = dict(nodes)

    def format(self) -> None:
        """Format every node's log dir with the cluster id and the pending SCRAM users.

        Kafka's ``kafka-storage format --cluster-id <id> --config server.properties
        [--add-scram 'SCRAM-SHA-512=[name=...,password=...]']`` per node, in parallel.

        Raises:
            KafkaToolError: the tool refused (e.g. a log dir formatted with another id).
        """
        scram: list[str] = []
        for user, password in self._pending_users.items():
            scram += ["--add-scram", f"{SCRAM_MECHANISM}=[name={user},password={password}]"]

        def one(node: KraftNode) -> None:
            node.write_config()
            run_kafka_tool(
                self.classpath,
                STORAGE_TOOL,
                [
                    "format",
                    "--cluster-id",
                    self.cluster_id,
                    "--config",
                    str(node.config_path),
                    "--ignore-formatted",
                    *scram,
                ],
                timeout_s=300.0,  # three JVMs at once on a loaded machine
            )

        with ThreadPoolExecutor(len(self.nodes)) as pool:
            list(pool.map(one, self.nodes.values()))
        self._formatted = True
        self._pending_users.clear()

    def start(self) -> KraftKafkaCluster:
        """Format the log dirs (first start), launch every node, wait until all listen.

        Raises:
            KafkaToolError: ``kafka-storage format`` failed.
            kpo_devenv.process.ProcessStartError: a node did not start (all are stopped).
        """
        if not self._formatted:
            self.format()
        try:
            for node in self.nodes.values():
                node.launch()
            for node in self.nodes.values():
                node.wait_listening()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop every node at once (SIGTERM, SIGKILL after :attr:`stop_timeout_s`).

        One by one, the last nodes would wait for a quorum that has already gone.
        """
        with ThreadPoolExecutor(len(self.nodes)) as pool:
            list(
                pool.map(
                    lambda n: n.process.stop(timeout_s=self.stop_timeout_s), self.nodes.values()
                )
            )

    def add_scram_user(self, user: str, password: str) -> None:
        """Create (or update) a SCRAM-SHA-512 user.

        Before the first start, the user goes into ``kafka-storage format --add-scram``;
        afterwards Kafka's ``kafka-configs --bootstrap-server ... --alter --add-config
        'SCRAM-SHA-512=[password=...]' --entity-type users`` (AlterUserScramCredentials)
        runs as node 0's super principal (its certificate on ``SSL``, else the brokers'
        SCRAM user).

        Raises:
            KafkaToolError: the tool failed.
        """
        if not self._formatted:
            self._pending_users[user] = password
            return
        assert self.security is not None, "SCRAM users need a secured cluster"
        node = self.nodes[0]
        listener = "SSL" if "SSL" in self.security.listeners else "SASL_SSL"
        if listener == "SSL":
            props = client_properties(
                self.security, "SSL", certificate=self.security.pki.broker(node.broker_id)
            )
        else:
            props = client_properties(self.security, listener, user=self.security.broker_user)
        config = write_properties(self.workdir / "super-user.properties", props)
        run_kafka_tool(
            self.classpath,
            CONFIG_COMMAND,
            [
                "--bootstrap-server",
                self.bootstrap_for(listener),
                "--command-config",
                str(config),
                "--alter",
                "--add-config",
                f"{SCRAM_MECHANISM}=[password={password}]",
                "--entity-type",
                "users",
                "--entity-name",
                user,
            ],
        )


def jmx_exporter_option(agent_jar: Path, port: int, rules: Path) -> str:
    """Return the ``-javaagent:`` option attaching the Prometheus JMX exporter to a Kafka JVM.

    ``jmx_prometheus_javaagent`` (``tools/install-jmx-exporter.sh``) then serves
    ``http://127.0.0.1:<port>/metrics`` with ``rules`` (e.g.
    ``deploy/jmx-exporter/kafka-kpo-rules.yaml``), as Kafka's ``KAFKA_OPTS`` would attach it.
    """
    return f"-javaagent:{agent_jar}={LOOPBACK}:{port}:{rules}"
