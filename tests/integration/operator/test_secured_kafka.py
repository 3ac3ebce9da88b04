"""The operator on a secured Apache Kafka: SASL_SSL with SCRAM-SHA-512, mutual TLS, ACLs.

One 3-broker Apache Kafka (jars from Maven Central) per module and flavor
(3.9 in ZooKeeper mode, 4.x in KRaft mode), with two TLS listeners (PEM keystores from a
CA made in the test):

- ``SASL_SSL`` with SCRAM-SHA-512; the users are created before the brokers start with
  Kafka's own ``kafka-configs --zookeeper ... --add-config 'SCRAM-SHA-512=[...]'`` (3.9)
  or ``kafka-storage format --add-scram 'SCRAM-SHA-512=[...]'`` (KRaft);
- ``SSL`` with ``ssl.client.auth=required`` (mutual TLS; brokers replicate over it as
  ``User:CN=broker-<id>,O=kpo``, super users).

``AclAuthorizer`` (3.9) or ``StandardAuthorizer`` (KRaft) refuses whatever no ACL allows.
The operator's principals get exactly the ACLs that docs/operations/kafka-acls.md lists,
granted with Kafka's own ``kafka-acls``; a third principal lacks Alter on the Cluster. The
operator runs as a process configured as the chart configures it: a client properties file
plus the password and key as files (Secrets).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaProducer

from kpo_devenv import ControlPlane, ZooKeeperServer
from kpo_devenv.apache_kafka import (
    ApacheKafkaCluster,
    KafkaSecurity,
    client_properties,
    kafka_classpath,
    write_properties,
)
from kpo_devenv.apache_kraft import KraftKafkaCluster
from kpo_devenv.operator_process import OperatorProcess
from kpo_devenv.pki import KafkaPki, generate_kafka_pki
from kpo_devenv.tools import pinned_version
from kpo_kafka.admin import KafkaPythonAdmin
from kpo_kafka.client_config import ClientSecurity, client_security_from_env
from tests.integration.broker.conftest import wait_for
from tests.integration.operator.conftest import (
    KAFKA3_ZK,
    KAFKA4_KRAFT,
    LIST_KEYS,
    THROTTLE_KEYS,
    Stack,
    reassignment,
)

pytestmark = pytest.mark.integration

MB = 1024 * 1024
ADMIN_PASSWORD = "admin-Pw-7f3c9"
OPERATOR_USER = "kpo-operator"
OPERATOR_PASSWORD = "op-Secret-91d2e4a6"
LIMITED_USER = "kpo-limited"
LIMITED_PASSWORD = "lim-Secret-5b8e17"
PASSWORDS = (ADMIN_PASSWORD, OPERATOR_PASSWORD, LIMITED_PASSWORD)
TLS_OPERATOR = "User:CN=kpo-operator"
"""The principal of the operator's client certificate (Kafka's default mapping rules)."""

CLUSTER_OPERATIONS = ("Describe", "Alter", "DescribeConfigs", "AlterConfigs")
TOPIC_OPERATIONS = ("Describe", "DescribeConfigs", "AlterConfigs")


def acl_args(principals: list[str], operations: tuple[str, ...], *resource: str) -> list[str]:
    """``kafka-acls --add`` arguments allowing ``operations`` on ``resource`` to ``principals``."""
    args = ["--add"]
    for principal in principals:
        args += ["--allow-principal", principal]
    for operation in operations:
        args += ["--operation", operation]
    return [*args, *resource]


@dataclass
class Secured:
    """The module's secured cluster and what the tests connect with."""

    cluster: ApacheKafkaCluster
    security: KafkaSecurity
    pki: KafkaPki
    workdir: Path
    admin_config: Path
    admin: ClientSecurity

    def admin_client(self) -> KafkaPythonAdmin:
        return KafkaPythonAdmin(
            self.cluster.bootstrap_for("SASL_SSL"), "kpo-test", 15000, self.admin
        )


@pytest.fixture(scope="module", params=[KAFKA3_ZK, KAFKA4_KRAFT])
def secured(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Secured]:
    """A secured 3-broker Apache Kafka shared by the module's tests (one per flavor)."""
    workdir = tmp_path_factory.mktemp("secured-kafka")
    pki = generate_kafka_pki(workdir / "pki")
    security = KafkaSecurity(
        pki,
        listeners=("SASL_SSL", "SSL"),
        ssl_client_auth=True,
        scram_users={
            "admin": ADMIN_PASSWORD,
            OPERATOR_USER: OPERATOR_PASSWORD,
            LIMITED_USER: LIMITED_PASSWORD,
        },
        super_users=("User:admin",),
    )
    properties = {"auto.create.topics.enable": "false", "replica.fetch.wait.max.ms": "100"}
    cluster: ApacheKafkaCluster
    if request.param == KAFKA3_ZK:
        zookeeper: ZooKeeperServer = request.getfixturevalue("zookeeper")
        chroot = f"secured-{uuid.uuid4().hex[:8]}"
        cluster = ApacheKafkaCluster(
            workdir / "kafka",
            f"{zookeeper.connect_string}/{chroot}",
            kafka_classpath(pinned_version("KAFKA_VERSION")),
            3,
            properties,
            security=security,
        )
    else:
        cluster = KraftKafkaCluster(
            workdir / "kafka",
            kafka_classpath(pinned_version("KAFKA4_VERSION")),
            3,
            properties,
            security=security,
        )
    admin_config = write_properties(
        workdir / "admin.properties", client_properties(security, "SASL_SSL", user="admin")
    )
    try:
        cluster.start()
        found = Secured(
            cluster,
            security,
            pki,
            workdir,
            admin_config,
            client_security_from_env({}, admin_config),
        )

        def ready() -> bool:
            admin = found.admin_client()
            try:
                info = admin.describe_cluster()
            finally:
                admin.close()
            return set(info.brokers) == {0, 1, 2} and info.controller_id is not None

        wait_for(ready, 180, "the secured brokers and a controller")
        # The documented ACLs (one kafka-acls run per resource), the third principal without
        # Alter on the Cluster.
        full = [f"User:{OPERATOR_USER}", TLS_OPERATOR]
        limited = [f"User:{LIMITED_USER}"]
        cluster.acls(admin_config, *acl_args(full, CLUSTER_OPERATIONS, "--cluster"))
        cluster.acls(admin_config, *acl_args(full + limited, TOPIC_OPERATIONS, "--topic", "*"))
        no_alter = tuple(op for op in CLUSTER_OPERATIONS if op != "Alter")
        cluster.acls(admin_config, *acl_args(limited, no_alter, "--cluster"))
        yield found
    finally:
        cluster.stop()


@pytest.fixture
def operators(control_plane: ControlPlane, tmp_path: Path) -> Iterator[list[OperatorProcess]]:
    """Operator processes started by a test; stopped (and namespaces dropped) after it."""
    started: list[OperatorProcess] = []
    yield started
    for process in started:
        process.stop(timeout_s=10)
        namespace = process.env["KPO_NAMESPACES"]
        control_plane.drop_finalizers(namespace)
        control_plane.kubectl("delete", "namespace", namespace, "--wait=false", check=False)


def _operator(
    secured: Secured,
    control_plane: ControlPlane,
    operators: list[OperatorProcess],
    workdir: Path,
    listener: str,
    env: dict[str, str],
    wait_ready: bool = True,
) -> Stack:
    namespace = f"t-{uuid.uuid4().hex[:8]}"
    control_plane.kubectl("create", "namespace", namespace)
    process = OperatorProcess(
        workdir / f"operator-{namespace}",
        control_plane.kubeconfig,
        secured.cluster.bootstrap_for(listener),
        [namespace],
        quota_interval_s=2.0,
        env=env,
    )
    operators.append(process)
    if wait_ready:
        process.start()
    return Stack(secured.cluster, control_plane, namespace, process)


def _secret_files(folder: Path, files: dict[str, str]) -> dict[str, Path]:
    """Write files as a mounted Secret would show them (read-only for the owner)."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, text in files.items():
        path = folder / name
        path.write_text(text)
        path.chmod(0o400)
        paths[name] = path
    return paths


def _scram_operator_env(secured: Secured, folder: Path, user: str, password: str) -> dict[str, str]:
    """A client properties file without secrets, the password as a file (the chart's way)."""
    secret = _secret_files(
        folder / "secret", {"ca.crt": secured.pki.ca.cert.read_text(), "password": password + "\n"}
    )
    config = write_properties(
        folder / "client.properties",
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(secret["ca.crt"]),
        },
    )
    return {
        "KPO_KAFKA_CLIENT_CONFIG": str(config),
        "KPO_KAFKA_SASL_USERNAME": user,
        "KPO_KAFKA_SASL_PASSWORD_FILE": str(secret["password"]),
    }


def _create_topic(secured: Secured, name: str, assignment: dict[int, list[int]]) -> None:
    admin = secured.admin_client()
    try:
        admin.create_topic(name, assignment=assignment, wait_for_metadata=True)
    finally:
        admin.close()


def _produce(secured: Secured, topic: str, total_bytes: int) -> None:
    producer = KafkaProducer(
        bootstrap_servers=secured.cluster.bootstrap_for("SASL_SSL"),
        acks="all",
        linger_ms=20,
        batch_size=512 * 1024,
        max_request_size=2 * 1024 * 1024,
        **secured.admin.kafka_python_kwargs(),
    )
    record = 16 * 1024
    try:
        for i in range(total_bytes // record):
            producer.send(topic, i.to_bytes(8, "big") * (record // 8), partition=0)
        producer.flush(120)
    finally:
        producer.close()


def _replicas(secured: Secured, topic: str) -> tuple[int, ...]:
    admin = secured.admin_client()
    try:
        return admin.describe_topics([topic])[topic][0].replicas
    finally:
        admin.close()


def _throttle_configs(secured: Secured, topics: list[str]) -> dict[str, dict[str, str]]:
    admin = secured.admin_client()
    try:
        found = admin.describe_configs(
            brokers=[0, 1, 2], topics=topics, keys=THROTTLE_KEYS + LIST_KEYS
        )
    finally:
        admin.close()
    return {r.name: dict(v) for r, v in found.items() if v}


def _in_flight(secured: Secured) -> list[Any]:
    admin = secured.admin_client()
    try:
        return list(admin.list_partition_reassignments())
    finally:
        admin.close()


def _condition(stack: Stack, plural: str, name: str, kind: str) -> dict[str, Any]:
    status = stack.get(plural, name).get("status") or {}
    return next((c for c in status.get("conditions", []) if c["type"] == kind), {})


def _assert_no_secret_leaked(stack: Stack, names: list[str]) -> None:
    """No password in the operator's log, the objects (status included) or their Events."""
    log = stack.operator.log_path.read_text()
    texts = [log, stack.kubectl("get", "partitionreassignments,topicreplicaquotas", "-o", "json")]
    texts += [json.dumps(stack.events(name)) for name in names]
    for text in texts:
        for password in PASSWORDS:
            assert password not in text


def test_sasl_scram_operator_moves_with_a_throttle_and_applies_a_quota(
    secured: Secured, control_plane: ControlPlane, operators: list[OperatorProcess], tmp_path: Path
) -> None:
    env = _scram_operator_env(secured, tmp_path / "scram", OPERATOR_USER, OPERATOR_PASSWORD)
    stack = _operator(secured, control_plane, operators, tmp_path, "SASL_SSL", env)
    assert f"SASL_SSL, SCRAM-SHA-512 as {OPERATOR_USER}" in stack.operator.log_tail(20)
    _create_topic(secured, "scram-moved", {0: [0]})
    _create_topic(secured, "scram-quota", {0: [1, 2]})
    _produce(secured, "scram-moved", 2 * MB)

    stack.apply(
        reassignment(
            "move",
            [{"topic": "scram-moved", "partition": 0, "replicas": [1]}],
            throttle={"replicationRate": 4 * MB},
        )
    )
    stack.apply(
        {
            "apiVersion": "kpo.dev/v1alpha1",
            "kind": "TopicReplicaQuota",
            "metadata": {"name": "quota"},
            "spec": {
                "topics": {"names": ["scram-quota"]},
                "brokers": [1, 2],
                "leaderReplicationThrottledRate": 8 * MB,
                "followerReplicationThrottledRate": 8 * MB,
                "leaderReplicationThrottledReplicas": "*",
                "followerReplicationThrottledReplicas": "*",
            },
        }
    )
    status = stack.wait_phase("move", "Completed", 180)
    assert status["message"].endswith("throttles removed")
    assert _replicas(secured, "scram-moved") == (1,)
    wait_for(
        lambda: _condition(stack, "topicreplicaquotas", "quota", "Ready").get("status") == "True",
        60,
        "the quota Ready",
    )
    rate = str(8 * MB)
    configs = _throttle_configs(secured, ["scram-moved", "scram-quota"])
    assert configs["1"] == configs["2"] == {THROTTLE_KEYS[0]: rate, THROTTLE_KEYS[1]: rate}
    assert configs["scram-quota"] == {LIST_KEYS[0]: "*", LIST_KEYS[1]: "*"}
    assert "scram-moved" not in configs and "0" not in configs  # the move's throttles are gone
    _assert_no_secret_leaked(stack, ["move", "quota"])

    stack.kubectl("delete", "topicreplicaquota", "quota", "--wait=true", "--timeout=60s")
    wait_for(
        lambda: not _throttle_configs(secured, ["scram-quota"]), 30, "the quota's configs removed"
    )


def test_mutual_tls_operator_and_one_without_a_client_certificate(
    secured: Secured, control_plane: ControlPlane, operators: list[OperatorProcess], tmp_path: Path
) -> None:
    client = secured.pki.client("kpo-operator-tls", "kpo-operator")
    secret = _secret_files(
        tmp_path / "mtls-secret",
        {
            "ca.crt": secured.pki.ca.cert.read_text(),
            "tls.crt": client.cert.read_text(),
            "tls.key": client.key.read_text(),
        },
    )
    env = {
        "KPO_KAFKA_SECURITY_PROTOCOL": "SSL",
        "KPO_KAFKA_SSL_TRUSTSTORE_TYPE": "PEM",
        "KPO_KAFKA_SSL_TRUSTSTORE_LOCATION": str(secret["ca.crt"]),
        "KPO_KAFKA_SSL_KEYSTORE_TYPE": "PEM",
        "KPO_KAFKA_SSL_KEYSTORE_CERTIFICATE_CHAIN_FILE": str(secret["tls.crt"]),
        "KPO_KAFKA_SSL_KEYSTORE_KEY_FILE": str(secret["tls.key"]),
    }
    stack = _operator(secured, control_plane, operators, tmp_path, "SSL", env)
    _create_topic(secured, "mtls-moved", {0: [2]})
    _produce(secured, "mtls-moved", MB)
    stack.apply(
        reassignment(
            "move",
            [{"topic": "mtls-moved", "partition": 0, "replicas": [0, 2]}],
            throttle={"replicationRate": 4 * MB},
        )
    )
    stack.wait_phase("move", "Completed", 180)
    assert _replicas(secured, "mtls-moved") == (0, 2)

    # Without the client certificate the brokers refuse the TLS handshake.
    without = {k: v for k, v in env.items() if "KEYSTORE" not in k}
    without["KPO_REQUEST_TIMEOUT_MS"] = "10000"  # the bootstrap gives up sooner
    refused = _operator(secured, control_plane, operators, tmp_path, "SSL", without)
    refused.apply(
        reassignment("move", [{"topic": "mtls-moved", "partition": 0, "replicas": [2, 0]}])
    )
    stalled: dict[str, Any] = {}

    def reported() -> bool:
        stalled.update(_condition(refused, "partitionreassignments", "move", "Stalled"))
        return stalled.get("status") == "True"

    wait_for(reported, 90, "a Stalled condition on the refused operator's object")
    assert stalled["reason"] == "AuthenticationFailed", stalled
    assert "TLS handshake failed" in stalled["message"], stalled
    assert "certificate" in stalled["message"].lower(), stalled  # Java: bad_certificate
    # kopf logs the handler's error after the handler returned, i.e. after the status write.
    wait_for(
        lambda: "TLS handshake failed" in refused.operator.log_path.read_text(),
        30,
        "the TLS failure in the operator log",
    )
    assert _replicas(secured, "mtls-moved") == (0, 2)


def test_missing_alter_on_cluster_is_reported_and_nothing_is_written(
    secured: Secured, control_plane: ControlPlane, operators: list[OperatorProcess], tmp_path: Path
) -> None:
    env = _scram_operator_env(secured, tmp_path / "limited", LIMITED_USER, LIMITED_PASSWORD)
    stack = _operator(secured, control_plane, operators, tmp_path, "SASL_SSL", env)
    _create_topic(secured, "acl-moved", {0: [0]})
    _produce(secured, "acl-moved", MB)
    stack.apply(
        reassignment(
            "move",
            [{"topic": "acl-moved", "partition": 0, "replicas": [1]}],
            throttle={"replicationRate": 4 * MB},
        )
    )
    stalled: dict[str, Any] = {}

    def reported() -> bool:
        stalled.update(_condition(stack, "partitionreassignments", "move", "Stalled"))
        return stalled.get("status") == "True"

    wait_for(reported, 60, "the Stalled condition")
    assert stalled["reason"] == "AuthorizationFailed"
    assert stalled["message"].startswith(
        "AlterPartitionReassignments needs Alter on Cluster:kafka-cluster"
    ), stalled
    assert stack.status("move")["phase"] == "Pending"
    reasons = [e["reason"] for e in stack.events("move")]
    assert reasons.count("AuthorizationFailed") == 1, reasons
    # Nothing was written to the cluster: no throttle, no reassignment, same replicas.
    time.sleep(3)
    assert not _throttle_configs(secured, ["acl-moved"])
    assert not any(tp.topic == "acl-moved" for tp in _in_flight(secured))
    assert _replicas(secured, "acl-moved") == (0,)
    _assert_no_secret_leaked(stack, ["move"])

    # Granting the missing ACL with kafka-acls lets the same object complete.
    secured.cluster.acls(
        secured.admin_config,
        "--add",
        "--allow-principal",
        f"User:{LIMITED_USER}",
        "--operation",
        "Alter",
        "--cluster",
    )
    stack.wait_phase("move", "Completed", 180)
    assert _replicas(secured, "acl-moved") == (1,)
    assert _condition(stack, "partitionreassignments", "move", "Stalled")["status"] == "False"


def test_kafka_cluster_with_mutual_tls_from_secrets(
    secured: Secured, control_plane: ControlPlane, operators: list[OperatorProcess], tmp_path: Path
) -> None:
    """A KafkaCluster reaches the SSL listener with the CA, certificate and key from Secrets."""
    env = _scram_operator_env(secured, tmp_path / "scram", OPERATOR_USER, OPERATOR_PASSWORD)
    env["KPO_CLUSTER_INTERVAL_S"] = "3"
    stack = _operator(secured, control_plane, operators, tmp_path, "SASL_SSL", env)
    client = secured.pki.client("kpo-operator-kc", "kpo-operator")
    key_text = client.key.read_text()
    stack.kubectl(
        "create",
        "secret",
        "generic",
        "kafka-tls",
        f"--from-file=ca.crt={secured.pki.ca.cert}",
        f"--from-file=tls.crt={client.cert}",
        f"--from-file=tls.key={client.key}",
    )
    stack.apply(
        {
            "apiVersion": "kpo.dev/v1alpha1",
            "kind": "KafkaCluster",
            "metadata": {"name": "mtls"},
            "spec": {
                "bootstrapServers": secured.cluster.bootstrap_for("SSL").split(","),
                "config": {"security.protocol": "SSL"},
                "secretRefs": {
                    "ssl.truststore.certificates": {"name": "kafka-tls", "key": "ca.crt"},
                    "ssl.keystore.certificate.chain": {"name": "kafka-tls", "key": "tls.crt"},
                    "ssl.keystore.key": {"name": "kafka-tls", "key": "tls.key"},
                },
            },
        }
    )
    wait_for(
        lambda: _condition(stack, "kafkaclusters", "mtls", "Ready").get("status") == "True",
        60,
        "the KafkaCluster Ready",
    )
    status = stack.get("kafkaclusters", "mtls")["status"]
    admin = secured.admin_client()
    try:
        info = admin.describe_cluster()
    finally:
        admin.close()
    assert status["clusterId"] == info.cluster_id and status["brokerCount"] == 3
    # Inferred from ApiVersions with kafka-python's table, a lower bound of the release: its
    # table ends before Kafka 4.4, which shows as 4.3.
    if isinstance(secured.cluster, KraftKafkaCluster):
        assert status["kafkaVersion"].startswith("4."), status["kafkaVersion"]
    else:
        assert status["kafkaVersion"] == ".".join(pinned_version("KAFKA_VERSION").split(".")[:2])

    _create_topic(secured, "kc-quota", {0: [0, 1]})
    quota = {
        "apiVersion": "kpo.dev/v1alpha1",
        "kind": "TopicReplicaQuota",
        "metadata": {"name": "kc-quota"},
        "spec": {
            "clusterRef": "mtls",
            "topics": {"names": ["kc-quota"]},
            "brokers": [0, 1],
            "leaderReplicationThrottledRate": 3 * MB,
            "leaderReplicationThrottledReplicas": "*",
        },
    }
    stack.apply(quota)
    wait_for(
        lambda: (
            _condition(stack, "topicreplicaquotas", "kc-quota", "Ready").get("status") == "True"
        ),
        60,
        "the quota on the KafkaCluster Ready",
    )
    # Ready means written. A ZooKeeper-mode broker applies its dynamic config when it sees
    # the change notification, so its DescribeConfigs may lag the write by a moment (as it
    # does for kafka-configs.sh --alter).
    expected = {
        "0": {"leader.replication.throttled.rate": str(3 * MB)},
        "1": {"leader.replication.throttled.rate": str(3 * MB)},
        "kc-quota": {"leader.replication.throttled.replicas": "*"},
    }
    deadline = time.monotonic() + 30
    while (configs := _throttle_configs(secured, ["kc-quota"])) != expected:
        if time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert configs == expected
    stack.kubectl("delete", "topicreplicaquota", "kc-quota", "--timeout=60s")
    wait_for(lambda: not _throttle_configs(secured, ["kc-quota"]), 30, "the quota's configs gone")
    for text in (
        stack.operator.log_path.read_text(),
        stack.kubectl("get", "kafkaclusters", "-o", "json"),
        stack.kubectl("get", "events", "-o", "json"),
    ):
        assert "PRIVATE KEY" not in text and key_text not in text
