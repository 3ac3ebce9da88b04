"""Brokers authenticating to a SASL-enforcing ZooKeeper and protecting their znodes.

Debian's ZooKeeper runs with SASL DIGEST-MD5 users in its JAAS ``Server`` section and
``enforce.auth.enabled=true``; three brokers log in as ``kafka`` from the JAAS file that
``KAFKA_OPTS`` names, with ``zookeeper.set.acl=true``. The znodes they create carry
Kafka's ACLs (read back with kazoo): all for ``sasl:kafka`` plus world read, except under
``/config/users`` and ``/config/brokers``. Another ZooKeeper user may read the open ones
only, and write nothing; an unauthenticated client gets nothing from the enforcing server
and, from a server that does not enforce SASL, only the world-readable znodes. The fleet
still creates topics, replicates, serves clients and reassigns partitions (through the
Admin API and through the legacy ``/admin/reassign_partitions`` znode written by a tool
holding the brokers' credentials, as ``kafka-reassign-partitions --zookeeper`` would).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewTopic
from kazoo.client import KazooClient
from kazoo.exceptions import (
    AuthFailedError,
    ConnectionLoss,
    NoAuthError,
    SessionClosedRequireSaslError,
)
from kazoo.handlers.threading import KazooTimeoutError

from kpo_broker.zk.client import KafkaZkClient
from kpo_broker.zk.security import ZkClientSecurity, default_acls
from kpo_devenv import ZooKeeperServer
from kpo_devenv.kafka_cluster import BrokerProcess, KafkaCluster
from kpo_devenv.kafka_security import add_scram_user, zookeeper_client_jaas
from kpo_devenv.process import ProcessStartError
from tests.integration.broker.conftest import admin_client, wait_cluster_ready, wait_for
from tests.integration.broker.server.helpers import consume_all, create_topic, describe
from tests.integration.broker.server.security_helpers import produce_and_consume_kafka_python

pytestmark = pytest.mark.integration

ZK_USERS = {"kafka": "kafka-zk-secret", "other": "other-zk-secret"}
BROKERS = ZkClientSecurity("kafka", ZK_USERS["kafka"], set_acl=True)
CHROOT = "/kafka"

#: (permissions, scheme, id) of Kafka's ACLs for znodes created by ``sasl:kafka``.
OPEN = {(31, "sasl", "kafka"), (1, "world", "anyone")}
SENSITIVE = {(31, "sasl", "kafka")}


def _kazoo(zookeeper: ZooKeeperServer, user: str | None, password: str | None = None) -> Any:
    options = None
    if user is not None:
        options = {"mechanism": "DIGEST-MD5", "username": user, "password": password}
    client = KazooClient(hosts=zookeeper.connect_string, timeout=10, sasl_options=options)
    client.start(timeout=15)
    return client


def _acls(client: Any, path: str) -> set[tuple[int, str, str]]:
    acls, _ = client.get_acls(path)
    return {(acl.perms, acl.id.scheme, acl.id.id) for acl in acls}


@pytest.fixture(scope="module")
def sasl_zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    with ZooKeeperServer(tmp_path_factory.mktemp("zk-sasl"), sasl_users=ZK_USERS) as server:
        yield server


@pytest.fixture(scope="module")
def kafka_opts(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("jaas") / "kafka_jaas.conf"
    return zookeeper_client_jaas(path, "kafka", ZK_USERS["kafka"])


@pytest.fixture(scope="module")
def secured(
    sasl_zookeeper: ZooKeeperServer, kafka_opts: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KafkaCluster]:
    connect = f"{sasl_zookeeper.connect_string}{CHROOT}"
    # A user created before the brokers start, as `kafka-configs --zookeeper` does.
    add_scram_user(connect, "alice", "alice-secret", zk_security=BROKERS)
    cluster = KafkaCluster(
        tmp_path_factory.mktemp("secured"),
        connect,
        3,
        {"zookeeper.set.acl": "true"},
        env={"KAFKA_OPTS": kafka_opts},
    )
    cluster.start()
    try:
        wait_cluster_ready(cluster)
        create_topic(cluster, "acl-topic", partitions=2, rf=3)
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def brokers_zk(sasl_zookeeper: ZooKeeperServer) -> Iterator[Any]:
    client = _kazoo(sasl_zookeeper, "kafka", ZK_USERS["kafka"])
    yield client
    client.stop()
    client.close()


def test_znodes_carry_kafkas_default_acls(secured: KafkaCluster, brokers_zk: Any) -> None:
    changes = brokers_zk.get_children(f"{CHROOT}/config/changes")
    assert changes, "the SCRAM user's change notification"
    open_paths = [
        "",  # the chroot
        "/brokers",
        "/brokers/ids",
        "/brokers/ids/0",  # ephemeral registration
        "/brokers/topics/acl-topic",
        "/brokers/topics/acl-topic/partitions/1/state",  # created in a controller multi
        "/brokers/seqid",
        "/config",
        "/config/topics/acl-topic",
        f"/config/changes/{changes[0]}",  # sequential
        "/controller",
        "/controller_epoch",
        "/cluster/id",
        "/admin/delete_topics",
        "/latest_producer_id_block",
    ]
    for path in open_paths:
        assert _acls(brokers_zk, CHROOT + path) == OPEN, path
    for path in ("/config/users", "/config/users/alice", "/config/brokers"):
        assert _acls(brokers_zk, CHROOT + path) == SENSITIVE, path


def test_another_zookeeper_user_reads_open_znodes_and_writes_nothing(
    secured: KafkaCluster, sasl_zookeeper: ZooKeeperServer
) -> None:
    other = _kazoo(sasl_zookeeper, "other", ZK_USERS["other"])
    try:
        assert json.loads(other.get(f"{CHROOT}/brokers/ids/0")[0])["port"] > 0
        assert "acl-topic" in other.get_children(f"{CHROOT}/brokers/topics")
        for read in (
            lambda: other.get(f"{CHROOT}/config/users/alice"),
            lambda: other.get_children(f"{CHROOT}/config/users"),
        ):
            with pytest.raises(NoAuthError):
                read()
        for write in (
            lambda: other.create(f"{CHROOT}/brokers/topics/evil", b"{}"),
            lambda: other.set(f"{CHROOT}/controller_epoch", b"999"),
            lambda: other.set(f"{CHROOT}/brokers/topics/acl-topic", b"{}"),
            lambda: other.delete(f"{CHROOT}/brokers/ids/0"),
            lambda: other.create(f"{CHROOT}/admin/delete_topics/acl-topic"),
            lambda: other.create(f"{CHROOT}/admin/reassign_partitions", b"{}"),
            lambda: other.create(f"{CHROOT}/config/users/mallory", b"{}"),
        ):
            with pytest.raises(NoAuthError):
                write()
    finally:
        other.stop()
        other.close()
    assert len(describe(secured, "acl-topic")) == 2  # the attempts changed nothing


# Kazoo's connection thread ends with the server's refusal, which pytest reports as a warning.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_enforcing_zookeeper_refuses_unauthenticated_and_wrong_credentials(
    sasl_zookeeper: ZooKeeperServer,
) -> None:
    for user, password in ((None, None), ("kafka", "wrong"), ("nobody", "x")):
        client = KazooClient(
            hosts=sasl_zookeeper.connect_string,
            timeout=10,
            sasl_options=(
                None
                if user is None
                else {"mechanism": "DIGEST-MD5", "username": user, "password": password}
            ),
        )
        try:
            client.start(timeout=15)
        except KazooTimeoutError:
            # The server answered the SASL exchange with an error (not a dropped socket):
            # kazoo's connection loop ends on it and the session never opens.
            continue
        try:
            with pytest.raises((SessionClosedRequireSaslError, ConnectionLoss, AuthFailedError)):
                client.get_children_async(CHROOT).get(timeout=10)
        finally:
            client.stop()
            client.close()


def test_fleet_creates_replicates_serves_and_reassigns(
    secured: KafkaCluster, brokers_zk: Any
) -> None:
    create_topic(secured, "moved", assignment={0: [0, 1], 1: [1, 2]})
    produce_and_consume_kafka_python(secured.bootstrap_servers, "moved", 50, {})
    admin = admin_client(secured)
    try:
        result = admin.alter_partition_reassignments({TopicPartition("moved", 0): [1, 2]})
        assert dict(result) == {TopicPartition("moved", 0): None}
    finally:
        admin.close()

    def on(partition: int, replicas: list[int]) -> bool:
        meta = describe(secured, "moved")[partition]
        return meta["replica_nodes"] == replicas and sorted(meta["isr_nodes"]) == sorted(replicas)

    wait_for(lambda: on(0, [1, 2]), 60, "moved-0 on [1, 2] (Admin API)")
    # The legacy znode, written by a tool holding the brokers' ZooKeeper credentials.
    path = f"{CHROOT}/admin/reassign_partitions"
    data = {"version": 1, "partitions": [{"topic": "moved", "partition": 1, "replicas": [2, 0]}]}
    brokers_zk.create(
        path, json.dumps(data).encode(), acl=default_acls(True, "/admin/reassign_partitions")
    )
    wait_for(lambda: on(1, [2, 0]), 60, "moved-1 on [2, 0] (legacy znode)")
    wait_for(lambda: brokers_zk.exists(path) is None, 30, "the controller deleting the znode")
    assert _acls(brokers_zk, f"{CHROOT}/brokers/topics/moved") == OPEN
    # Config changes and topic deletion: /config/changes and /admin/delete_topics.
    admin = admin_client(secured)
    try:
        admin.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, "acl-topic", {"retention.ms": "3600000"})]
        )
        admin.create_topics([NewTopic("doomed", 1, 2)])
        wait_for(lambda: brokers_zk.exists(f"{CHROOT}/brokers/topics/doomed") is not None, 30)
        admin.delete_topics(["doomed"])
    finally:
        admin.close()
    wait_for(
        lambda: brokers_zk.exists(f"{CHROOT}/brokers/topics/doomed") is None, 60, "doomed deleted"
    )
    config = json.loads(brokers_zk.get(f"{CHROOT}/config/topics/acl-topic")[0])
    assert config["config"]["retention.ms"] == "3600000"
    records = consume_all(secured, "moved", 1, 50)
    assert [r for r in records[0] if r.startswith(b"kp-")] == [
        f"kp-{i}".encode() for i in range(50)
    ]


def test_broker_without_or_with_wrong_zookeeper_credentials_does_not_start(
    sasl_zookeeper: ZooKeeperServer, tmp_path: Path
) -> None:
    connect = f"{sasl_zookeeper.connect_string}{CHROOT}"
    unauthenticated = BrokerProcess(7, tmp_path / "no-jaas", connect, {"zookeeper.set.acl": "true"})
    with pytest.raises(ProcessStartError, match=r"zookeeper\.set\.acl is true, but"):
        unauthenticated.start(timeout_s=60)
    wrong = zookeeper_client_jaas(tmp_path / "wrong_jaas.conf", "kafka", "not-the-password")
    misconfigured = BrokerProcess(
        8, tmp_path / "wrong", connect, {"zookeeper.set.acl": "true"}, env={"KAFKA_OPTS": wrong}
    )
    with pytest.raises(ProcessStartError, match="SASL authentication to ZooKeeper as 'kafka'"):
        misconfigured.start(timeout_s=60)
    log = (tmp_path / "wrong" / "broker.log").read_text()
    assert "not-the-password" not in log


def test_a_non_enforcing_zookeeper_serves_world_readable_znodes_to_anyone(
    tmp_path: Path,
) -> None:
    with ZooKeeperServer(tmp_path / "zk", sasl_users=ZK_USERS, enforce_sasl=False) as server:
        zk = KafkaZkClient(f"{server.connect_string}{CHROOT}", security=BROKERS)
        zk.connect()
        try:
            zk.set_entity_config("users", "bob", {"SCRAM-SHA-512": "salt=x"})
            zk.set_entity_config("topics", "t", {"retention.ms": "1000"})
        finally:
            zk.close()
        anyone = _kazoo(server, None)
        try:
            assert anyone.get_children(f"{CHROOT}/config/topics") == ["t"]
            assert json.loads(anyone.get(f"{CHROOT}/config/topics/t")[0])["config"] == {
                "retention.ms": "1000"
            }
            with pytest.raises(NoAuthError):
                anyone.get(f"{CHROOT}/config/users/bob")
            with pytest.raises(NoAuthError):
                anyone.create(f"{CHROOT}/brokers/topics/evil", b"{}")
            with pytest.raises(NoAuthError):
                anyone.set(f"{CHROOT}/config/topics/t", b"{}")
        finally:
            anyone.stop()
            anyone.close()
