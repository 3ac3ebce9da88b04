"""The KRaft nodes' properties (Kafka's names) and cluster id, without starting Kafka."""

from __future__ import annotations

import base64
from pathlib import Path

from kpo_devenv.apache_kafka import KafkaSecurity
from kpo_devenv.apache_kraft import STANDARD_AUTHORIZER, KraftKafkaCluster, new_cluster_id
from kpo_devenv.pki import generate_kafka_pki


def test_cluster_id_is_a_kafka_uuid_string() -> None:
    found = new_cluster_id()
    assert len(found) == 22 and "=" not in found
    assert len(base64.urlsafe_b64decode(found + "==")) == 16
    assert new_cluster_id() != found
    assert not any(new_cluster_id().startswith("-") for _ in range(500))


def test_plaintext_nodes_are_combined_voters(tmp_path: Path) -> None:
    cluster = KraftKafkaCluster(tmp_path, "libs/*", 3, {"auto.create.topics.enable": "false"})
    node = cluster.nodes[1]
    props = node.properties
    assert props["process.roles"] == "broker,controller"
    assert props["node.id"] == "1" and "broker.id" not in props
    assert "zookeeper.connect" not in props
    voters = props["controller.quorum.voters"].split(",")
    assert voters == [f"{i}@127.0.0.1:{n.controller_port}" for i, n in cluster.nodes.items()]
    assert props["listeners"] == (
        f"PLAINTEXT://127.0.0.1:{node.port},CONTROLLER://127.0.0.1:{node.controller_port}"
    )
    assert props["advertised.listeners"] == f"PLAINTEXT://127.0.0.1:{node.port}"
    assert props["listener.security.protocol.map"] == "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
    assert props["controller.listener.names"] == "CONTROLLER"
    assert props["auto.create.topics.enable"] == "false"
    assert "-Dlog4j2.configurationFile=" + str(node.log4j_path) in node.process.argv


def test_secured_nodes_reach_the_quorum_with_their_certificates(tmp_path: Path) -> None:
    pki = generate_kafka_pki(tmp_path / "pki")
    security = KafkaSecurity(pki, ("SASL_SSL",), scram_users={"op": "pw"})
    cluster = KraftKafkaCluster(tmp_path / "k", "libs/*", 2, security=security)
    props = cluster.nodes[0].properties
    assert props["listener.security.protocol.map"] == "SASL_SSL:SASL_SSL,CONTROLLER:SSL"
    assert props["listener.name.controller.ssl.client.auth"] == "required"
    assert props["authorizer.class.name"] == STANDARD_AUTHORIZER
    assert props["inter.broker.listener.name"] == "SASL_SSL"
    assert "User:CN=broker-1,O=kpo" in props["super.users"].split(";")
    # Users known before the first start go into kafka-storage format --add-scram.
    cluster.add_scram_user("late", "pw2")
    assert cluster._pending_users == {"op": "pw", "broker": "broker-scram-secret", "late": "pw2"}
