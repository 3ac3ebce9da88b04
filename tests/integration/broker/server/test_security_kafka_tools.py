"""Apache Kafka's own tools against secured brokers (jars from ``tools/install-kafka.sh``).

``kafka-configs`` (ConfigCommand) creates a SCRAM user over SASL_SSL with
AlterUserScramCredentials (as ``--bootstrap-server`` does in Kafka 3.9), and that user
then runs ``kafka-topics`` (TopicCommand) with ``--command-config``; Java's TLS checks the
brokers' certificates and host names. Another ``kafka-topics`` client presents a client
certificate to a mutual-TLS listener.
"""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import pytest

from kpo_devenv import ZooKeeperServer
from kpo_devenv.apache_kafka import java_command
from kpo_devenv.kafka_cluster import KafkaCluster
from kpo_devenv.kafka_security import add_scram_user, broker_ssl_properties, pem_keystore
from kpo_devenv.pki import KafkaPki, generate_kafka_pki
from tests.integration.broker.conftest import ClusterFactory
from tests.integration.broker.server.helpers import create_topic
from tests.integration.broker.server.security_helpers import (
    SCRAM_JAAS,
    kafka_python_tls,
    produce_and_consume_kafka_python,
    wait_isr_full,
)

CONFIG_COMMAND = "kafka.admin.ConfigCommand"
TOPIC_COMMAND = "org.apache.kafka.tools.TopicCommand"


@pytest.fixture
def pki(tmp_path: Path) -> KafkaPki:
    return generate_kafka_pki(tmp_path / "pki")


def _tool(classpath: str, main_class: str, *args: str) -> subprocess.CompletedProcess[str]:
    argv = java_command(classpath, 256, main_class, list(args))
    return subprocess.run(argv, capture_output=True, text=True, timeout=180, check=False)


def _client_properties(path: Path, lines: dict[str, str]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in lines.items()))
    return path


def _scram_client(path: Path, pki: KafkaPki, user: str, password: str) -> Path:
    return _client_properties(
        path,
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": SCRAM_JAAS.format(u=user, p=password),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(pki.ca.cert),
        },
    )


def _scram_cluster(
    factory: ClusterFactory, zookeeper: ZooKeeperServer, pki: KafkaPki
) -> KafkaCluster:
    chroot = f"kafka-{uuid.uuid4().hex[:8]}"
    add_scram_user(f"{zookeeper.connect_string}/{chroot}", "admin", "admin-secret")
    return factory(
        2,
        {
            "inter.broker.listener.name": "SASL_SSL",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": SCRAM_JAAS.format(
                u="admin", p="admin-secret"
            ),
        },
        listeners={"PLAINTEXT": "PLAINTEXT", "SASL_SSL": "SASL_SSL"},
        broker_properties=lambda broker_id: broker_ssl_properties(pki, broker_id),
        chroot=chroot,
    )


def test_config_command_creates_a_scram_user_who_then_uses_topic_command(
    kafka_cluster_factory: ClusterFactory,
    zookeeper: ZooKeeperServer,
    pki: KafkaPki,
    classpath: str,
    tmp_path: Path,
) -> None:
    cluster = _scram_cluster(kafka_cluster_factory, zookeeper, pki)
    bootstrap = cluster.bootstrap_servers_for("SASL_SSL")
    admin = _scram_client(tmp_path / "admin.properties", pki, "admin", "admin-secret")
    created = _tool(
        classpath,
        CONFIG_COMMAND,
        "--bootstrap-server",
        bootstrap,
        "--command-config",
        str(admin),
        "--alter",
        "--add-config",
        "SCRAM-SHA-512=[iterations=8192,password=carol-secret]",
        "--entity-type",
        "users",
        "--entity-name",
        "carol",
    )
    assert created.returncode == 0, created.stdout + created.stderr
    assert "Completed updating config for user carol." in created.stdout
    carol = _scram_client(tmp_path / "carol.properties", pki, "carol", "carol-secret")
    topic_args = ["--bootstrap-server", bootstrap, "--command-config", str(carol)]
    made = _tool(
        classpath,
        TOPIC_COMMAND,
        *topic_args,
        "--create",
        "--topic",
        "carol-topic",
        "--partitions",
        "2",
        "--replication-factor",
        "2",
    )
    assert made.returncode == 0, made.stdout + made.stderr
    assert "Created topic carol-topic." in made.stdout
    listed = _tool(classpath, TOPIC_COMMAND, *topic_args, "--list")
    assert listed.returncode == 0 and "carol-topic" in listed.stdout.split()
    wait_isr_full(cluster, "carol-topic", 2)
    described = _tool(classpath, TOPIC_COMMAND, *topic_args, "--describe", "--topic", "carol-topic")
    assert described.returncode == 0 and "ReplicationFactor: 2" in described.stdout
    produce_and_consume_kafka_python(
        bootstrap,
        "carol-topic",
        10,
        {
            "security_protocol": "SASL_SSL",
            "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_plain_username": "carol",
            "sasl_plain_password": "carol-secret",
            **kafka_python_tls(pki, None),
        },
    )
    # A wrong password: Kafka's own client reports the authentication failure.
    wrong = _scram_client(tmp_path / "wrong.properties", pki, "carol", "not-carol")
    refused = _tool(
        classpath,
        TOPIC_COMMAND,
        "--bootstrap-server",
        bootstrap,
        "--command-config",
        str(wrong),
        "--list",
    )
    assert refused.returncode != 0
    assert (
        "invalid credentials with SASL mechanism SCRAM-SHA-512" in refused.stdout + refused.stderr
    )


def test_topic_command_over_mutual_tls(
    kafka_cluster_factory: ClusterFactory, pki: KafkaPki, classpath: str, tmp_path: Path
) -> None:
    cluster = kafka_cluster_factory(
        2,
        {"inter.broker.listener.name": "SSL", "ssl.client.auth": "required"},
        listeners={"PLAINTEXT": "PLAINTEXT", "SSL": "SSL"},
        broker_properties=lambda broker_id: broker_ssl_properties(pki, broker_id),
    )
    client = _client_properties(
        tmp_path / "mtls.properties",
        {
            "security.protocol": "SSL",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(pem_keystore(pki.client("dave"))),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(pki.ca.cert),
        },
    )
    args = ["--bootstrap-server", cluster.bootstrap_servers_for("SSL"), "--command-config"]
    made = _tool(
        classpath,
        TOPIC_COMMAND,
        *args,
        str(client),
        "--create",
        "--topic",
        "mtls-topic",
        "--replication-factor",
        "2",
        "--partitions",
        "1",
    )
    assert made.returncode == 0, made.stdout + made.stderr
    wait_isr_full(cluster, "mtls-topic", 2)
    no_cert = _client_properties(
        tmp_path / "no-cert.properties",
        {
            "security.protocol": "SSL",
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(pki.ca.cert),
        },
    )
    refused = _tool(classpath, TOPIC_COMMAND, *args, str(no_cert), "--list")
    assert refused.returncode != 0


def test_scram_users_in_zookeeper_are_shared_with_kafkas_own_format(
    kafka_cluster_factory: ClusterFactory,
    zookeeper: ZooKeeperServer,
    pki: KafkaPki,
    classpath: str,
) -> None:
    """Kafka's ``kafka-configs --zookeeper`` writes a user the running brokers then accept,
    and reads back the credential our AlterUserScramCredentials stored."""
    cluster = _scram_cluster(kafka_cluster_factory, zookeeper, pki)
    connect = cluster.zookeeper_connect
    zk_args = ["--zookeeper", connect, "--entity-type", "users"]
    written = _tool(
        classpath,
        CONFIG_COMMAND,
        *zk_args,
        "--entity-name",
        "erin",
        "--alter",
        "--add-config",
        "SCRAM-SHA-512=[password=erin-secret]",
    )
    assert written.returncode == 0, written.stdout + written.stderr
    erin = {
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "erin",
        "sasl_plain_password": "erin-secret",
        **kafka_python_tls(pki, None),
    }
    create_topic(cluster, "erin-topic", partitions=1, rf=2)
    for broker in cluster.brokers.values():  # each broker followed /config/changes
        produce_and_consume_kafka_python(
            broker.bootstrap_for("SASL_SSL"),
            "erin-topic",
            3,
            erin,
            prefix=f"erin-{broker.broker_id}",
        )
    # Our own format, read by Kafka's ConfigCommand.
    add_scram_user(connect, "frank", "frank-secret", iterations=4096)
    described = _tool(classpath, CONFIG_COMMAND, *zk_args, "--entity-name", "frank", "--describe")
    assert described.returncode == 0, described.stdout + described.stderr
    assert "Configs for user-principal 'frank' are SCRAM-SHA-512=salt=" in described.stdout
    assert "iterations=4096" in described.stdout
