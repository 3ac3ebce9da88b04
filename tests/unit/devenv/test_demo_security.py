"""The demo's secured fleet settings (Kafka's names), without brokers."""

from __future__ import annotations

from pathlib import Path

from kpo_broker.security.acl import AclOperation, ResourceType
from kpo_devenv.demo_security import DEMO_USER, OPERATOR_USER, DemoSecurity
from kpo_kafka.client_config import SecurityProtocol, client_security_from_env


def test_brokers_serve_clients_with_scram_and_each_other_with_mutual_tls(tmp_path: Path) -> None:
    security = DemoSecurity.create(tmp_path, "orders", "orders-readers")
    props = security.broker_properties(1, tmp_path / "broker-1", 3)
    assert props["inter.broker.listener.name"] == "INTERNAL"
    assert props["listener.name.internal.ssl.client.auth"] == "required"
    assert props["listener.name.client.sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
    jaas = props["listener.name.client.scram-sha-512.sasl.jaas.config"]
    assert jaas.endswith("ScramLoginModule required;")
    assert props["authorizer.class.name"] == "kafka.security.authorizer.AclAuthorizer"
    assert props["super.users"] == ";".join(f"User:CN=broker-{i},O=kpo" for i in range(3))
    assert props["zookeeper.set.acl"] == "true"
    # Every file the broker reads lives in its own folder (a container mounts only that).
    for key in (
        "ssl.keystore.location",
        "ssl.truststore.location",
        "zookeeper.ssl.keystore.location",
        "zookeeper.ssl.truststore.location",
    ):
        assert Path(props[key]).is_relative_to(tmp_path / "broker-1")
    assert props["zookeeper.ssl.client.enable"] == "true"
    assert props["zookeeper.clientCnxnSocket"] == "org.apache.zookeeper.ClientCnxnSocketNetty"
    keystore = Path(props["ssl.keystore.location"]).read_text()
    assert "PRIVATE KEY" in keystore and "CERTIFICATE" in keystore
    env = security.broker_env(tmp_path / "broker-1")
    jaas_file = Path(env["KAFKA_OPTS"].split("=", 1)[1])
    assert jaas_file.parent == tmp_path / "broker-1"
    assert security.zookeeper_password in jaas_file.read_text()


def test_the_operator_gets_only_what_its_calls_need(tmp_path: Path) -> None:
    security = DemoSecurity.create(tmp_path, "orders", "orders-readers")
    operator = {
        (g.resource_type, g.name): set(g.operations) for g in security.grants[OPERATOR_USER]
    }
    assert operator == {
        (ResourceType.CLUSTER, "kafka-cluster"): {
            AclOperation.DESCRIBE,
            AclOperation.ALTER,
            AclOperation.DESCRIBE_CONFIGS,
            AclOperation.ALTER_CONFIGS,
        },
        (ResourceType.TOPIC, "orders"): {
            AclOperation.DESCRIBE,
            AclOperation.DESCRIBE_CONFIGS,
            AclOperation.ALTER_CONFIGS,
        },
    }
    clients = {(g.resource_type, g.name) for g in security.grants[DEMO_USER]}
    assert clients == {
        (ResourceType.TOPIC, "orders"),
        (ResourceType.GROUP, "orders-readers"),
        (ResourceType.CLUSTER, "kafka-cluster"),
    }
    assert security.summary()[1].startswith(
        "User:kpo-operator: Describe, Alter, DescribeConfigs, AlterConfigs on Cluster:kafka-cluster"
    )


def test_the_operator_reads_its_settings_as_the_chart_gives_them(tmp_path: Path) -> None:
    security = DemoSecurity.create(tmp_path, "orders", "orders-readers")
    env = security.operator_env(tmp_path / "operator")
    assert set(env) == {
        "KPO_KAFKA_CLIENT_CONFIG",
        "KPO_KAFKA_SASL_USERNAME",
        "KPO_KAFKA_SASL_PASSWORD_FILE",
    }
    config = Path(env["KPO_KAFKA_CLIENT_CONFIG"]).read_text()
    assert security.passwords[OPERATOR_USER] not in config  # the password is a file only
    read = client_security_from_env(env)
    assert read.protocol is SecurityProtocol.SASL_SSL
    assert read.username == OPERATOR_USER and read.password is not None
    assert read.password.reveal() == security.passwords[OPERATOR_USER]
    assert read.describe() == "SASL_SSL, SCRAM-SHA-512 as kpo-operator, no client cert"
    tool = security.tool_properties(tmp_path / "tool.properties").read_text()
    assert 'username="kpo-demo"' in tool and "SASL_SSL" in tool


def test_zookeeper_is_reached_over_tls_with_files_in_its_own_folder(tmp_path: Path) -> None:
    security = DemoSecurity.create(tmp_path, "orders", "orders-readers")
    tls = security.zookeeper_tls(tmp_path / "zookeeper")
    settings = tls.settings()
    assert settings["ssl.clientAuth"] == "need"
    for key in ("ssl.keyStore.location", "ssl.trustStore.location"):
        assert Path(settings[key]).is_relative_to(tmp_path / "zookeeper")
    assert tls.probe_keystore == security.setup_keystore
    zk = security.zk_security
    assert zk.tls is not None and zk.tls.client_auth and zk.username == "kafka"
    assert zk.summary() == "TLS (TLSv1.2), client certificate, SASL DIGEST-MD5 as kafka, znode ACLs"
