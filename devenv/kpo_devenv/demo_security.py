"""The demo's secured fleet, configured as the chart's secure default.

:class:`DemoSecurity` holds what the main job needs to run its brokers secured:

- listeners ``CLIENT`` (``SASL_SSL`` with SCRAM-SHA-512) for every client and ``INTERNAL``
  (``SSL`` with ``ssl.client.auth=required``) between brokers
  (``inter.broker.listener.name=INTERNAL``): replica fetchers, the controller's requests
  and controlled shutdown use mutual TLS with each broker's PEM keystore;
- a CA made for the run (:func:`kpo_devenv.pki.generate_kafka_pki`) signing one
  certificate per broker (subject ``CN=broker-<id>,O=kpo``), written into that broker's
  folder (a container mounts nothing else);
- ``authorizer.class.name=kafka.security.authorizer.AclAuthorizer`` with the brokers'
  certificate subjects as ``super.users``: every other principal gets only what an ACL
  allows;
- brokers reach ZooKeeper over TLS only (KIP-515: ``zookeeper.ssl.client.enable``, the
  Netty client socket, their own PEM keystore as client certificate, the run's CA as
  truststore, the server's host name checked; the server has no plaintext port and needs
  a client certificate), log in with SASL DIGEST-MD5 (a JAAS ``Client`` section named by
  ``KAFKA_OPTS``) and create their znodes with Kafka's ACLs (``zookeeper.set.acl=true``);
  the ZooKeeper server refuses unauthenticated sessions;
- two SCRAM users with random passwords, created in ZooKeeper before the brokers start
  (as ``kafka-configs --zookeeper ... --add-config 'SCRAM-SHA-512=[...]'``), with their
  ACLs (as ``kafka-acls --authorizer-properties zookeeper.connect=...``):
  ``kpo-operator``, the operator, with only what Kafka's ``KafkaApis`` checks for its
  calls on the demo's topic (docs/operations/kafka-acls.md), and ``kpo-demo``,
  the demo's producer, consumer group and checks.

The operator is configured as the chart configures it: a client properties file without
secrets, the password in a file (``KPO_KAFKA_SASL_PASSWORD_FILE``).
"""

from __future__ import annotations

import secrets
import shutil
import socket
import struct
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kafka import KafkaConsumer, TopicPartition
from kafka.errors import TopicAuthorizationFailedError

from kpo_broker.security.acl import (
    CLUSTER_NAME,
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    kafka_name,
)
from kpo_broker.zk.security import ZkClientSecurity
from kpo_broker.zk.tls import resolve_zk_client_tls
from kpo_devenv.kafka_security import (
    add_acls,
    add_scram_user,
    pem_keystore,
    zookeeper_client_jaas,
    zookeeper_tls_properties,
)
from kpo_devenv.net import LOOPBACK
from kpo_devenv.pki import KafkaPki, generate_kafka_pki
from kpo_devenv.zookeeper import ZooKeeperTls, four_letter_word
from kpo_kafka.client_config import ClientSecurity, Secret

__all__ = ["LISTENERS", "MECHANISM", "DemoSecurity", "Grant", "plaintext_answered"]

#: Listener name -> security protocol, as in the chart (the first is the clients' one).
LISTENERS = {"CLIENT": "SASL_SSL", "INTERNAL": "SSL"}
#: SCRAM mechanism of the client listener and the users.
MECHANISM = "SCRAM-SHA-512"
AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
#: The brokers' ZooKeeper SASL user.
ZOOKEEPER_USER = "kafka"
OPERATOR_USER = "kpo-operator"
DEMO_USER = "kpo-demo"


@dataclass(frozen=True)
class Grant:
    """Operations one principal is allowed on one literal resource.

    Attributes:
        resource_type: ``ResourceType.CLUSTER``, ``TOPIC`` or ``GROUP``.
        name: the resource name (``kafka-cluster`` for the Cluster).
        operations: the operations allowed.
    """

    resource_type: ResourceType
    name: str
    operations: tuple[AclOperation, ...]

    def describe(self) -> str:
        """E.g. ``Alter, Describe on Cluster:kafka-cluster`` (kafka-acls' names)."""
        ops = ", ".join(kafka_name(op) for op in self.operations)
        return f"{ops} on {kafka_name(self.resource_type)}:{self.name}"


def operator_grants(topic: str) -> tuple[Grant, ...]:
    """Return the operator's ACLs for moving ``topic``'s partitions under a throttle.

    What Kafka 3.9's ``KafkaApis`` checks for its calls (``kpo_kafka.acls``): Describe
    (ListPartitionReassignments, DescribeLogDirs), Alter (AlterPartitionReassignments,
    ElectLeaders), DescribeConfigs and AlterConfigs (the brokers' throttle rates) on the
    Cluster; Describe (Metadata), DescribeConfigs and AlterConfigs (the throttled replica
    lists) on the topic. Nothing else: it cannot read or write records, create or delete
    topics, or touch any other topic.
    """
    d, a = AclOperation.DESCRIBE, AclOperation.ALTER
    dc, ac = AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS
    return (
        Grant(ResourceType.CLUSTER, CLUSTER_NAME, (d, a, dc, ac)),
        Grant(ResourceType.TOPIC, topic, (d, dc, ac)),
    )


def client_grants(topic: str, group: str) -> tuple[Grant, ...]:
    """Return the demo's clients' ACLs: create, write and read ``topic``, read in ``group``.

    Describe on the Cluster is for DescribeLogDirs (the replica sizes the checks compare);
    Write on the topic also lets the idempotent producer get its producer id (KIP-679).
    """
    topic_ops = (AclOperation.CREATE, AclOperation.WRITE, AclOperation.READ)
    return (
        Grant(ResourceType.TOPIC, topic, (*topic_ops, AclOperation.DESCRIBE)),
        Grant(ResourceType.GROUP, group, (AclOperation.READ,)),
        Grant(ResourceType.CLUSTER, CLUSTER_NAME, (AclOperation.DESCRIBE,)),
    )


def _bindings(user: str, grants: tuple[Grant, ...]) -> list[AclBinding]:
    return [
        AclBinding(
            ResourcePattern(g.resource_type, g.name, PatternType.LITERAL),
            AccessControlEntry(f"User:{user}", "*", op, AclPermissionType.ALLOW),
        )
        for g in grants
        for op in g.operations
    ]


@dataclass(frozen=True)
class DemoSecurity:
    """The secured fleet's material and settings (see the module doc).

    Attributes:
        pki: the run's CA (``<workdir>/pki``); the host's clients trust its certificate.
        passwords: SCRAM user -> password (random per run).
        zookeeper_password: the brokers' ZooKeeper SASL password (random per run).
        grants: SCRAM user -> its ACLs.
        setup_keystore: the PEM keystore with which the set-up here reaches ZooKeeper
            over TLS (``CN=kpo-demo-setup``).
    """

    pki: KafkaPki
    passwords: Mapping[str, str]
    zookeeper_password: str
    grants: Mapping[str, tuple[Grant, ...]]
    setup_keystore: Path

    @classmethod
    def create(cls, workdir: Path, topic: str, group: str) -> DemoSecurity:
        """Make the CA in ``workdir/pki`` and the users' passwords.

        Args:
            workdir: the demo's folder.
            topic: the topic the operator moves and the demo's clients use.
            group: the demo's consumer group.
        """
        grants = {OPERATOR_USER: operator_grants(topic), DEMO_USER: client_grants(topic, group)}
        pki = generate_kafka_pki(workdir / "pki")
        return cls(
            pki,
            {user: secrets.token_urlsafe(18) for user in grants},
            secrets.token_urlsafe(18),
            grants,
            pem_keystore(pki.client("zookeeper-setup", "kpo-demo-setup")),
        )

    @property
    def zookeeper_users(self) -> dict[str, str]:
        """The ZooKeeper server's SASL users (its JAAS ``Server`` section)."""
        return {ZOOKEEPER_USER: self.zookeeper_password}

    @property
    def zk_security(self) -> ZkClientSecurity:
        """How the set-up here reaches ZooKeeper: TLS, and SASL as the brokers' user."""
        tls = resolve_zk_client_tls(
            zookeeper_tls_properties(self.setup_keystore, self.pki.ca.cert), {}
        )
        return ZkClientSecurity(ZOOKEEPER_USER, self.zookeeper_password, set_acl=True, tls=tls)

    def zookeeper_tls(self, zookeeper_dir: Path) -> ZooKeeperTls:
        """Return the ZooKeeper server's TLS; issue its keystore into ``zookeeper_dir/tls``.

        Its client port needs a client certificate signed by the run's CA
        (``ssl.clientAuth=need``); the readiness check presents :attr:`setup_keystore`.
        """
        tls = zookeeper_dir / "tls"
        tls.mkdir(parents=True, exist_ok=True)
        keystore = pem_keystore(KafkaPki(tls, self.pki.ca).zookeeper())
        truststore = Path(shutil.copy(self.pki.ca.cert, tls / "ca.crt"))
        return ZooKeeperTls(keystore, truststore, probe_keystore=self.setup_keystore)

    def super_users(self, broker_ids: list[int]) -> str:
        """``super.users``: the brokers' certificate subjects (Kafka's default mapping)."""
        return ";".join(f"User:CN=broker-{i},O=kpo" for i in broker_ids)

    def broker_properties(self, broker_id: int, broker_dir: Path, brokers: int) -> dict[str, str]:
        """Broker ``broker_id``'s security properties; issues its keystore into ``broker_dir``.

        Args:
            broker_id: the broker.
            broker_dir: the broker's folder (``<dir>/tls`` gets its keystore and the CA).
            brokers: how many brokers there are (ids 0..n-1, the super users).
        """
        tls = broker_dir / "tls"
        tls.mkdir(parents=True, exist_ok=True)
        keystore = pem_keystore(KafkaPki(tls, self.pki.ca).broker(broker_id))
        truststore = shutil.copy(self.pki.ca.cert, tls / "ca.crt")
        return {
            "inter.broker.listener.name": "INTERNAL",
            "listener.name.client.sasl.enabled.mechanisms": MECHANISM,
            f"listener.name.client.{MECHANISM.lower()}.sasl.jaas.config": (
                f"{SCRAM_LOGIN_MODULE} required;"
            ),
            "listener.name.internal.ssl.client.auth": "required",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(keystore),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(truststore),
            **zookeeper_tls_properties(keystore, Path(truststore)),
            "zookeeper.set.acl": "true",
            "authorizer.class.name": AUTHORIZER,
            "super.users": self.super_users(list(range(brokers))),
        }

    def broker_env(self, broker_dir: Path) -> dict[str, str]:
        """Return the broker's ``KAFKA_OPTS``: a JAAS file (in ``broker_dir``) for ZooKeeper."""
        broker_dir.mkdir(parents=True, exist_ok=True)
        jaas = broker_dir / "kafka_jaas.conf"
        return {"KAFKA_OPTS": zookeeper_client_jaas(jaas, ZOOKEEPER_USER, self.zookeeper_password)}

    def provision(self, zookeeper_connect: str) -> None:
        """Create the SCRAM users and their ACLs in ZooKeeper (before the brokers start).

        Raises:
            ValueError: an ACL was refused.
            kpo_broker.zk.errors.ZkError: ZooKeeper refused or failed.
        """
        for user, password in self.passwords.items():
            add_scram_user(zookeeper_connect, user, password, (MECHANISM,), 4096, self.zk_security)
        bindings = [b for user, grants in self.grants.items() for b in _bindings(user, grants)]
        add_acls(zookeeper_connect, bindings, self.zk_security)

    def client_properties(self, truststore: Path | None = None) -> dict[str, str]:
        """Kafka client properties for ``CLIENT`` without the user and password.

        Args:
            truststore: the CA file to name (default: the run's CA).
        """
        return {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": MECHANISM,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(truststore or self.pki.ca.cert),
        }

    def client(self, user: str = DEMO_USER) -> ClientSecurity:
        """Return ``user``'s client settings (``kafka_python_kwargs()`` for kafka-python)."""
        return ClientSecurity.from_properties(
            self.client_properties(), username=user, password=Secret(self.passwords[user])
        )

    def tool_properties(self, path: Path, user: str = DEMO_USER) -> Path:
        """Write a ``--command-config`` file of ``user`` for Kafka's tools (with the password)."""
        props = self.client_properties()
        props["sasl.jaas.config"] = (
            f'{SCRAM_LOGIN_MODULE} required username="{user}" password="{self.passwords[user]}";'
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        path.chmod(0o600)
        return path

    def operator_env(self, folder: Path) -> dict[str, str]:
        """Return the operator's ``KPO_KAFKA_*`` settings, as the chart gives them.

        Writes ``folder/kafka-client/`` (the CA, the password, ``client.properties``), as
        a mounted Secret and ConfigMap would show them.
        """
        secret = folder / "kafka-client"
        secret.mkdir(parents=True, exist_ok=True)
        ca = Path(shutil.copy(self.pki.ca.cert, secret / "ca.crt"))
        password = secret / "password"
        password.write_text(self.passwords[OPERATOR_USER] + "\n")
        password.chmod(0o600)
        config = secret / "client.properties"
        props = self.client_properties(ca)
        config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        return {
            "KPO_KAFKA_CLIENT_CONFIG": str(config),
            "KPO_KAFKA_SASL_USERNAME": OPERATOR_USER,
            "KPO_KAFKA_SASL_PASSWORD_FILE": str(password),
        }

    def refusals(
        self, bootstrap_servers: str, topic: str, zookeeper_port: int | None = None
    ) -> tuple[list[str], list[str]]:
        """Check that the fleet refuses what it must; return (what was refused, problems).

        A client without TLS gets no answer from the ``CLIENT`` listener of the first
        broker nor from ZooKeeper, and ``kpo-operator`` may not read ``topic`` (it holds
        no Read ACL).

        Args:
            bootstrap_servers: the ``CLIENT`` listeners, ``host:port,...``.
            topic: an existing topic with records.
            zookeeper_port: ZooKeeper's (TLS) client port on loopback, if it is checked.
        """
        host, _, port = bootstrap_servers.split(",")[0].rpartition(":")
        refused, problems = [], []
        if zookeeper_port is not None:
            try:
                answer = four_letter_word(zookeeper_port, "ruok", timeout_s=10.0)
            except OSError:
                answer = ""
            if answer:
                problems.append(f"ZooKeeper answered {answer!r} to a client without TLS")
            else:
                refused.append(
                    f"a client without TLS gets nothing from ZooKeeper at {LOOPBACK}:"
                    f"{zookeeper_port}"
                )
        if plaintext_answered(host, int(port)):
            problems.append(f"{host}:{port} answered a PLAINTEXT request")
        else:
            refused.append(f"a client without TLS and SASL gets nothing from {host}:{port}")
        if read_refused(bootstrap_servers, self.client(OPERATOR_USER), topic):
            refused.append(f"User:{OPERATOR_USER} may not read {topic}: TOPIC_AUTHORIZATION_FAILED")
        else:
            problems.append(f"User:{OPERATOR_USER} was not refused reading {topic}")
        return refused, problems

    def summary(self) -> list[str]:
        """Lines for the console: how the fleet is secured and who may do what."""
        lines = [
            "listeners CLIENT (SASL_SSL, SCRAM-SHA-512) and INTERNAL (SSL, mutual TLS, "
            "inter-broker); AclAuthorizer, super users: the brokers' certificates; "
            "ZooKeeper: TLS with client certificates, SASL DIGEST-MD5, znode ACLs",
        ]
        for user, grants in self.grants.items():
            lines.append(f"User:{user}: " + "; ".join(g.describe() for g in grants))
        return lines


def plaintext_answered(host: str, port: int, timeout_s: float = 10.0) -> bool:
    """Send a PLAINTEXT ApiVersions v0 request to ``host:port``; return whether it was answered.

    A TLS listener must not answer it: it sees a failed TLS handshake and closes the
    connection (perhaps after a TLS alert, which is no Kafka response).
    """
    correlation = 0x6B706F31
    client_id = b"kpo-demo-unauthenticated"
    body = struct.pack(">hhih", 18, 0, correlation, len(client_id)) + client_id
    received = b""
    with socket.create_connection((host, port), timeout=timeout_s) as sock:
        sock.sendall(struct.pack(">i", len(body)) + body)
        deadline = time.monotonic() + timeout_s
        while len(received) < 8 and time.monotonic() < deadline:
            try:
                chunk = sock.recv(8 - len(received))
            except (ConnectionError, TimeoutError):
                break
            if not chunk:
                break
            received += chunk
    return len(received) == 8 and struct.unpack(">i", received[4:])[0] == correlation


def read_refused(
    bootstrap_servers: str, client: ClientSecurity, topic: str, timeout_s: float = 30.0
) -> bool:
    """Return whether reading ``topic`` (Fetch) as ``client`` fails with TOPIC_AUTHORIZATION_FAILED.

    Raises:
        kafka.errors.KafkaError: another error than the refusal.
    """
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap_servers,
        client_id="kpo-demo-refused",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        **client.kafka_python_kwargs(),
    )
    try:
        consumer.assign([TopicPartition(topic, 0)])
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                if consumer.poll(timeout_ms=500):
                    return False
            except TopicAuthorizationFailedError:
                return True
        return False
    finally:
        consumer.close()
