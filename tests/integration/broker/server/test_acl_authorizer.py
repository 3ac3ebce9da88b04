"""Kafka's ZooKeeper-based ACL authorizer on a real broker fleet (ZooKeeper, broker processes).

One secured 2-broker cluster is shared by the module (the tests use distinct topics,
groups and principals): ``authorizer.class.name=kafka.security.authorizer.AclAuthorizer``
with ``super.users=User:admin``, a SASL_PLAINTEXT listener (SCRAM-SHA-512, also the
inter-broker listener, so the controller and the replica fetchers act as ``User:admin``),
an SSL listener with mutual TLS (``ssl.principal.mapping.rules`` maps ``CN=dave`` to
``User:dave``) and a PLAINTEXT listener (``User:ANONYMOUS``).

Apache Kafka's own ``kafka-acls`` (AclCommand) manages ACLs over SASL, and — run with
``--authorizer-properties zookeeper.connect=...`` — Kafka's own AclAuthorizer reads the
znodes our brokers wrote and writes znodes our brokers follow. kafka-python and
confluent-kafka act as allowed and refused principals for each API family.
"""

from __future__ import annotations

import json
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import KafkaError
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    ConfigResource,
    ConfigResourceType,
    NewPartitions,
    NewTopic,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from kafka.errors import (
    ClusterAuthorizationFailedError,
    InvalidRequestError,
    TopicAuthorizationFailedError,
)
from kafka.errors import (
    KafkaError as KafkaError_,
)
from kafka.protocol.admin import DescribeAclsRequest
from prometheus_client.parser import text_string_to_metric_families

from kpo_devenv import ZooKeeperServer
from kpo_devenv.apache_kafka import (
    KafkaToolError,
    run_kafka_tool,
    write_properties,
)
from kpo_devenv.kafka_cluster import KafkaCluster
from kpo_devenv.kafka_security import add_scram_user, broker_ssl_properties
from kpo_devenv.pki import KafkaPki, generate_kafka_pki
from kpo_kafka.admin import KafkaPythonAdmin
from kpo_kafka.client_config import ClientSecurity, SaslMechanism, Secret, SecurityProtocol
from tests.integration.broker.conftest import ClusterFactory, wait_cluster_ready, wait_for
from tests.integration.broker.server.helpers import zk_client
from tests.integration.broker.server.security_helpers import (
    SCRAM_JAAS,
    kafka_python_tls,
)

ACL_COMMAND = "kafka.admin.AclCommand"
CONFIG_COMMAND = "kafka.admin.ConfigCommand"
PASSWORDS = {
    "admin": "admin-secret",
    "alice": "alice-secret",
    "bob": "bob-secret",
    "carol": "carol-secret",
    "ops": "ops-secret",
}
AUTHORIZER = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"}


@dataclass
class Secured:
    """The module's cluster and what tests need to reach it."""

    cluster: KafkaCluster
    zookeeper_connect: str
    pki: KafkaPki
    workdir: Path

    @property
    def sasl(self) -> str:
        return self.cluster.bootstrap_servers_for("SASL_PLAINTEXT")

    def settings(self, user: str) -> dict[str, Any]:
        """kafka-python settings of ``user`` over SASL_PLAINTEXT with SCRAM-SHA-512."""
        return {
            "bootstrap_servers": self.sasl,
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_plain_username": user,
            "sasl_plain_password": PASSWORDS[user],
        }

    def confluent(self, user: str) -> dict[str, Any]:
        """librdkafka settings of ``user``."""
        return {
            "bootstrap.servers": self.sasl,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": user,
            "sasl.password": PASSWORDS[user],
        }

    def admin(self, user: str) -> KafkaAdminClient:
        return KafkaAdminClient(request_timeout_ms=15000, client_id=user, **self.settings(user))

    def command_config(self, user: str) -> Path:
        """A Java client properties file of ``user`` (``--command-config``)."""
        return write_properties(
            self.workdir / f"{user}.properties",
            {
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.jaas.config": SCRAM_JAAS.format(u=user, p=PASSWORDS[user]),
            },
        )


def _secured_properties(extra: dict[str, str] | None = None) -> dict[str, str]:
    return {
        **AUTHORIZER,
        "super.users": "User:admin",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": SCRAM_JAAS.format(
            u="admin", p=PASSWORDS["admin"]
        ),
        "listener.name.ssl.ssl.client.auth": "required",
        "ssl.principal.mapping.rules": "RULE:^CN=([a-z]+)$/$1/L,DEFAULT",
        "offsets.topic.replication.factor": "2",
        **(extra or {}),
    }


_LISTENERS = {"PLAINTEXT": "PLAINTEXT", "SASL_PLAINTEXT": "SASL_PLAINTEXT", "SSL": "SSL"}


@pytest.fixture(scope="module")
def secured(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Secured]:
    workdir = tmp_path_factory.mktemp("acl")
    chroot = f"acl-{uuid.uuid4().hex[:8]}"
    connect = f"{zookeeper.connect_string}/{chroot}"
    for user, password in PASSWORDS.items():
        add_scram_user(connect, user, password)
    pki = generate_kafka_pki(workdir / "pki")
    cluster = KafkaCluster(
        workdir / chroot,
        connect,
        2,
        _secured_properties(),
        metrics=True,
        listeners=_LISTENERS,
        broker_properties=lambda broker_id: broker_ssl_properties(pki, broker_id),
    )
    cluster.start()
    try:
        wait_cluster_ready(cluster)
        yield Secured(cluster, connect, pki, workdir)
    finally:
        cluster.stop()


def _acl(
    principal: str,
    operation: ACLOperation,
    resource_type: ResourceType,
    name: str,
    pattern_type: ACLResourcePatternType = ACLResourcePatternType.LITERAL,
    permission: ACLPermissionType = ACLPermissionType.ALLOW,
) -> ACL:
    return ACL(
        principal=principal,
        host="*",
        operation=operation,
        permission_type=permission,
        resource_pattern=ResourcePattern(resource_type, name, pattern_type),
    )


def _running(secured: Secured) -> list[int]:
    return [i for i, broker in secured.cluster.brokers.items() if broker.is_running()]


def _acls_on(admin: KafkaAdminClient, broker: int) -> set[ACL]:
    """Every ACL in ``broker``'s own authorizer cache, which answers its DescribeAcls."""
    request = DescribeAclsRequest(
        resource_type_filter=ResourceType.ANY,
        resource_name_filter=None,
        pattern_type_filter=ACLResourcePatternType.ANY,
        principal_filter=None,
        host_filter=None,
        operation=ACLOperation.ANY,
        permission_type=ACLPermissionType.ANY,
    )
    response = admin._manager.run(admin._manager.send, request, broker)
    found, _ = admin._convert_describe_acls_response_to_acls(response)
    return set(found)


def _grant(secured: Secured, *acls: ACL) -> None:
    """Create ACLs as the super user; wait until every running broker's authorizer has them.

    The broker that takes CreateAcls writes them to ZooKeeper; each other broker follows
    the change notification, so each is asked (DescribeAcls sent to it) in turn.
    """
    admin = secured.admin("admin")
    try:
        result = admin.create_acls(list(acls))
        assert not result["failed"], result
        wait_for(
            lambda: all(set(acls) <= _acls_on(admin, b) for b in _running(secured)),
            30,
            "the ACLs on every broker",
        )
    finally:
        admin.close()


def _create_topic(secured: Secured, name: str, assignments: dict[int, list[int]]) -> None:
    """Create ``name``; wait until every running broker's Metadata has a leader for each
    partition (:meth:`~kpo_kafka.admin.KafkaPythonAdmin.wait_for_topics`)."""
    admin = secured.admin("admin")
    try:
        admin.create_topics(
            [NewTopic(name, replica_assignments=assignments)],
            timeout_ms=20000,
        )
    finally:
        admin.close()
    security = ClientSecurity(
        protocol=SecurityProtocol.SASL_PLAINTEXT,
        sasl_mechanism=SaslMechanism.SCRAM_SHA_512,
        username="admin",
        password=Secret(PASSWORDS["admin"]),
    )
    waiter = KafkaPythonAdmin(secured.sasl, "admin", 10000, security)
    try:
        waiter.wait_for_topics({name: len(assignments)}, 30000, _running(secured))
    finally:
        waiter.close()


def _produce(
    settings: dict[str, Any], topic: str, partitions: list[int], idempotent: bool = False
) -> None:
    producer = KafkaProducer(
        acks="all",
        request_timeout_ms=15000,
        max_block_ms=20000,
        enable_idempotence=idempotent,
        **settings,
    )
    try:
        for partition in partitions:
            producer.send(topic, b"record", partition=partition).get(timeout=30)
    finally:
        producer.close(timeout=10)


def _kafka_acls(classpath: str, *args: str) -> str:
    return run_kafka_tool(classpath, ACL_COMMAND, list(args), timeout_s=180)


# --------------------------------------------------------------------------- ACL management


def test_kafka_acls_adds_lists_and_removes_acls_in_kafkas_znodes(
    secured: Secured, classpath: str
) -> None:
    over_sasl = [
        "--bootstrap-server",
        secured.sasl,
        "--command-config",
        str(secured.command_config("admin")),
    ]
    _kafka_acls(
        classpath,
        *over_sasl,
        "--add",
        "--allow-principal",
        "User:alice",
        "--operation",
        "Read",
        "--topic",
        "tool-topic",
    )
    # (Each Java tool run costs a JVM start: the other changes go through kafka-python.)
    _grant(
        secured,
        _acl(
            "User:bob",
            ACLOperation.ALL,
            ResourceType.TOPIC,
            "tool-",
            ACLResourcePatternType.PREFIXED,
            ACLPermissionType.DENY,
        ),
    )
    matching = _kafka_acls(
        classpath,
        *over_sasl,
        "--list",
        "--topic",
        "tool-topic",
        "--resource-pattern-type",
        "match",
    )
    assert "principal=User:bob, host=*, operation=ALL, permissionType=DENY" in matching
    assert "principal=User:alice, host=*, operation=READ, permissionType=ALLOW" in matching

    # The znodes are Kafka's: literal and prefixed stores, with change notifications.
    zk = zk_client(secured.cluster)
    try:
        literal = zk.get_versioned_data("/kafka-acl/Topic/tool-topic")
        prefixed = zk.get_versioned_data("/kafka-acl-extended/prefixed/Topic/tool-")
        assert literal is not None and prefixed is not None
        assert json.loads(literal[0]) == {
            "version": 1,
            "acls": [
                {
                    "principal": "User:alice",
                    "permissionType": "Allow",
                    "operation": "Read",
                    "host": "*",
                }
            ],
        }
        assert json.loads(prefixed[0])["acls"][0]["permissionType"] == "Deny"
        literal_changes = [
            data
            for _, data, _ in zk.get_sequential_notifications("/kafka-acl-changes", "acl_changes_")
        ]
        extended = [
            json.loads(data)
            for _, data, _ in zk.get_sequential_notifications(
                "/kafka-acl-extended-changes", "acl_changes_"
            )
        ]
    finally:
        zk.close()
    assert b"TOPIC:tool-topic" in literal_changes
    assert {
        "version": 1,
        "resourceType": "TOPIC",
        "name": "tool-",
        "patternType": "PREFIXED",
    } in extended

    # Kafka's own AclAuthorizer (run in-process by kafka-acls) reads what we wrote ...
    through_zk = ["--authorizer-properties", f"zookeeper.connect={secured.zookeeper_connect}"]
    read_by_kafka = _kafka_acls(classpath, *through_zk, "--list", "--topic", "tool-topic")
    assert "principal=User:alice, host=*, operation=READ, permissionType=ALLOW" in read_by_kafka
    # ... and what it writes reaches every broker of ours through the notification.
    _kafka_acls(
        classpath,
        *through_zk,
        "--add",
        "--allow-principal",
        "User:carol",
        "--operation",
        "Describe",
        "--topic",
        "tool-topic",
    )

    def principals() -> set[str]:
        admin = secured.admin("admin")
        try:
            acls, _ = admin.describe_acls(
                _topic_filter("tool-topic", ACLResourcePatternType.LITERAL)
            )
        finally:
            admin.close()
        return {acl.principal for acl in acls}

    wait_for(lambda: "User:carol" in principals(), 60, "the ACL Kafka wrote")

    _kafka_acls(
        classpath,
        *over_sasl,
        "--remove",
        "--force",
        "--allow-principal",
        "User:alice",
        "--operation",
        "Read",
        "--topic",
        "tool-topic",
    )
    assert principals() == {"User:carol"}
    admin = secured.admin("admin")
    try:
        removed = admin.delete_acls(
            [
                _topic_filter("tool-topic", ACLResourcePatternType.LITERAL),
                _topic_filter("tool-", ACLResourcePatternType.PREFIXED),
            ]
        )
    finally:
        admin.close()
    assert [len(matched) for _, matched, _ in removed] == [1, 1]
    zk = zk_client(secured.cluster)
    try:
        assert zk.get_versioned_data("/kafka-acl/Topic/tool-topic") is None
        assert zk.get_versioned_data("/kafka-acl-extended/prefixed/Topic/tool-") is None
    finally:
        zk.close()
    # Only the super user (Alter on the cluster) may change ACLs.
    refused = _tool_failure(
        classpath,
        ACL_COMMAND,
        "--bootstrap-server",
        secured.sasl,
        "--command-config",
        str(secured.command_config("bob")),
        "--add",
        "--allow-principal",
        "User:bob",
        "--operation",
        "All",
        "--topic",
        "*",
    )
    assert "ClusterAuthorizationException" in refused


def _topic_filter(
    name: str, pattern_type: ACLResourcePatternType = ACLResourcePatternType.MATCH
) -> ACLFilter:
    return ACLFilter(
        principal=None,
        host=None,
        operation=ACLOperation.ANY,
        permission_type=ACLPermissionType.ANY,
        resource_pattern=ResourcePatternFilter(ResourceType.TOPIC, name, pattern_type),
    )


def _tool_failure(classpath: str, main_class: str, *args: str) -> str:
    """Run a Kafka tool expected to fail; return its output."""
    try:
        output = run_kafka_tool(classpath, main_class, list(args), timeout_s=180)
    except KafkaToolError as exc:
        return str(exc)
    return output


def test_acl_apis_answer_with_kafkas_errors(secured: Secured) -> None:
    admin = secured.admin("admin")
    try:
        bad = _acl("User:x", ACLOperation.READ, ResourceType.CLUSTER, "not-the-cluster")
        result = admin.create_acls([bad])
        assert len(result["failed"]) == 1
        assert result["failed"] == [InvalidRequestError]
        described = admin.describe_acls(
            ACLFilter(
                principal=None,
                host=None,
                operation=ACLOperation.ANY,
                permission_type=ACLPermissionType.ANY,
                resource_pattern=ResourcePatternFilter(
                    ResourceType.TOPIC, "nothing-here", ACLResourcePatternType.ANY
                ),
            )
        )
        assert described[0] == []
    finally:
        admin.close()
    bob = secured.admin("bob")
    try:
        with pytest.raises(ClusterAuthorizationFailedError):
            bob.describe_acls(
                ACLFilter(
                    principal=None,
                    host=None,
                    operation=ACLOperation.ANY,
                    permission_type=ACLPermissionType.ANY,
                    resource_pattern=ResourcePatternFilter(
                        ResourceType.ANY, None, ACLResourcePatternType.ANY
                    ),
                )
            )
    finally:
        bob.close()


# --------------------------------------------------------------------------- data plane


def test_produce_and_consume_with_a_group_per_principal(secured: Secured) -> None:
    _create_topic(secured, "orders", {0: [0, 1]})
    _grant(
        secured,
        _acl("User:alice", ACLOperation.WRITE, ResourceType.TOPIC, "orders"),
        _acl("User:alice", ACLOperation.READ, ResourceType.TOPIC, "orders"),
        _acl("User:alice", ACLOperation.READ, ResourceType.GROUP, "orders-group"),
        _acl("User:bob", ACLOperation.READ, ResourceType.TOPIC, "orders"),
    )
    # Idempotent: InitProducerId is allowed by Write on some topic (authorizeByResourceType).
    _produce(secured.settings("alice"), "orders", [0, 0, 0], idempotent=True)
    # librdkafka consumes with a group: FindCoordinator, JoinGroup, SyncGroup, OffsetCommit.
    consumer = ConfluentConsumer(
        {
            **secured.confluent("alice"),
            "group.id": "orders-group",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe(["orders"])
        got: list[bytes] = []

        def consumed() -> bool:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.append(message.value())
            return len(got) >= 3

        wait_for(consumed, 60, "alice's records over librdkafka")
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    # kafka-python as bob: no Write on the topic, no Read on the group.
    with pytest.raises(TopicAuthorizationFailedError):
        _produce(secured.settings("bob"), "orders", [0])
    # Idempotent without Write anywhere nor IdempotentWrite: InitProducerId is refused.
    with pytest.raises(KafkaError_, match="ClusterAuthorizationFailed"):
        _produce(secured.settings("bob"), "orders", [0], idempotent=True)
    errors: list[int] = []
    bob = ConfluentConsumer(
        {
            **secured.confluent("bob"),
            "group.id": "orders-group",
            "auto.offset.reset": "earliest",
            "error_cb": lambda e: errors.append(e.code()),
        }
    )
    try:
        bob.subscribe(["orders"])

        def refused() -> bool:
            message = bob.poll(0.5)
            if message is not None and message.error() is not None:
                errors.append(message.error().code())
            return KafkaError.GROUP_AUTHORIZATION_FAILED in errors

        wait_for(refused, 60, "GROUP_AUTHORIZATION_FAILED for bob")
    finally:
        bob.close()
    # Without a group, bob may read the topic (Read on it), as kafka-python shows.
    reader = KafkaConsumer(consumer_timeout_ms=1000, **secured.settings("bob"))
    try:
        tp = TopicPartition("orders", 0)
        reader.assign([tp])
        reader.seek_to_beginning(tp)
        records: list[Any] = []
        wait_for(
            lambda: (
                bool(records.extend(r for rs in reader.poll(500).values() for r in rs))
                or len(records) >= 3
            ),
            60,
            "bob's assigned read",
        )
    finally:
        reader.close()


def test_metadata_hides_topics_the_principal_may_not_describe(secured: Secured) -> None:
    _create_topic(secured, "hidden-orders", {0: [0, 1]})
    _grant(
        secured,
        _acl("User:alice", ACLOperation.DESCRIBE, ResourceType.TOPIC, "hidden-orders"),
        _acl(
            "User:dave",
            ACLOperation.READ,
            ResourceType.TOPIC,
            "hidden-",
            ACLResourcePatternType.PREFIXED,
        ),
    )
    alice, bob = secured.admin("alice"), secured.admin("bob")
    try:
        assert "hidden-orders" in alice.list_topics()
        assert "hidden-orders" not in bob.list_topics()
    finally:
        alice.close()
        bob.close()
    # Unauthenticated clients (User:ANONYMOUS on PLAINTEXT) see no topic at all.
    anonymous = KafkaAdminClient(
        bootstrap_servers=secured.cluster.bootstrap_servers_for("PLAINTEXT"), client_id="anon"
    )
    try:
        assert anonymous.list_topics() == []
    finally:
        anonymous.close()
    # Mutual TLS: CN=dave maps to User:dave, whose prefixed Read implies Describe.
    dave = KafkaConsumer(
        bootstrap_servers=secured.cluster.bootstrap_servers_for("SSL"),
        security_protocol="SSL",
        **kafka_python_tls(secured.pki, secured.pki.client("dave")),
    )
    try:
        assert "hidden-orders" in dave.topics()
    finally:
        dave.close()
    # librdkafka asking for the topic by name as bob: refused, not disclosed.
    from confluent_kafka.admin import AdminClient

    metadata = AdminClient(secured.confluent("bob")).list_topics("hidden-orders", timeout=20)
    error = metadata.topics["hidden-orders"].error
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


# --------------------------------------------------------------------------- admin APIs


def test_topic_creation_and_configs(secured: Secured) -> None:
    _grant(
        secured,
        _acl(
            "User:carol",
            ACLOperation.CREATE,
            ResourceType.TOPIC,
            "carol-",
            ACLResourcePatternType.PREFIXED,
        ),
        _acl(
            "User:carol",
            ACLOperation.ALTER_CONFIGS,
            ResourceType.TOPIC,
            "carol-",
            ACLResourcePatternType.PREFIXED,
        ),
        _acl(
            "User:carol",
            ACLOperation.ALTER,
            ResourceType.TOPIC,
            "carol-",
            ACLResourcePatternType.PREFIXED,
        ),
    )
    carol = secured.admin("carol")
    try:
        carol.create_topics([NewTopic("carol-a", 1, 2)], timeout_ms=20000)
        with pytest.raises(TopicAuthorizationFailedError):
            carol.create_topics([NewTopic("not-carols", 1, 2)], timeout_ms=20000)
        wait_for(lambda: "carol-a" in carol.list_topics(), 30, "carol-a")
        altered = carol.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, "carol-a", configs={"retention.ms": "60000"})]
        )
        assert altered == {"topic": {"carol-a": "OK"}}
        described = carol.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, "carol-a")]
        )  # DescribeConfigs implied by AlterConfigs
        assert "retention.ms" in str(described)
        carol.create_partitions({"carol-a": NewPartitions(2)})
        refused = carol.alter_configs(
            [ConfigResource(ConfigResourceType.BROKER, "0", configs={"log.cleaner.threads": "2"})],
            raise_on_unknown=False,
        )
        assert "ClusterAuthorizationFailedError" in refused["broker"]["0"]
    finally:
        carol.close()
    bob = secured.admin("bob")
    try:
        refused = bob.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, "carol-a", configs={"retention.ms": "1"})],
            raise_on_unknown=False,
        )
        assert "TopicAuthorizationFailedError" in refused["topic"]["carol-a"]
        with pytest.raises(TopicAuthorizationFailedError):
            bob.delete_topics(["carol-a"], timeout_ms=20000)
    finally:
        bob.close()


def test_cluster_operations_and_scram_users(secured: Secured, classpath: str) -> None:
    _create_topic(secured, "moving", {0: [0, 1]})
    _grant(
        secured,
        _acl("User:ops", ACLOperation.ALTER, ResourceType.CLUSTER, "kafka-cluster"),
        _acl("User:ops", ACLOperation.DESCRIBE, ResourceType.CLUSTER, "kafka-cluster"),
    )
    from kafka.admin import ScramMechanism, UserScramCredentialUpsertion

    ops = secured.admin("ops")
    try:
        ops.list_partition_reassignments()
        ops.alter_partition_reassignments({TopicPartition("moving", 0): [1, 0]})
        ops.describe_log_dirs()

        def erin_created() -> bool:
            # kafka-python sends to any broker; only the controller accepts (NOT_CONTROLLER).
            answer = ops.alter_user_scram_credentials(
                [UserScramCredentialUpsertion("erin", ScramMechanism.SCRAM_SHA_512, "erin-secret")]
            )
            return answer == {"erin": None}

        wait_for(erin_created, 30, "erin's credentials")
        assert "SCRAM_SHA_512" in str(ops.describe_user_scram_credentials(["erin"]))
    finally:
        ops.close()
    bob = secured.admin("bob")
    try:
        with pytest.raises(ClusterAuthorizationFailedError):
            bob.list_partition_reassignments()
        with pytest.raises(ClusterAuthorizationFailedError):
            bob.alter_partition_reassignments({TopicPartition("moving", 0): [0, 1]})
        election = bob.elect_leaders(0, {"moving": [0]}, raise_errors=False)
        assert election.error_code == ClusterAuthorizationFailedError.errno
        assert [
            p.error_code for r in election.replica_election_results for p in r.partition_result
        ] == [ClusterAuthorizationFailedError.errno]
        # NOT_CONTROLLER from the other broker, CLUSTER_AUTHORIZATION_FAILED from the controller.
        answer = bob.alter_user_scram_credentials(
            [UserScramCredentialUpsertion("bob", ScramMechanism.SCRAM_SHA_512, "mine-now")]
        )
        assert answer["bob"] in (
            "Cluster authorization failed.",
            "This is not the correct controller for this cluster.",
        )
        with pytest.raises(ClusterAuthorizationFailedError):
            bob.describe_user_scram_credentials()
    finally:
        bob.close()
    # Kafka's kafka-configs sends AlterUserScramCredentials to the controller.
    config_args = [
        "--bootstrap-server",
        secured.sasl,
        "--alter",
        "--add-config",
        "SCRAM-SHA-512=[password=frank-secret]",
        "--entity-type",
        "users",
        "--entity-name",
        "frank",
        "--command-config",
    ]
    refused = _tool_failure(
        classpath, CONFIG_COMMAND, *config_args, str(secured.command_config("bob"))
    )
    assert "ClusterAuthorizationException" in refused
    done = run_kafka_tool(
        classpath, CONFIG_COMMAND, [*config_args, str(secured.command_config("ops"))]
    )
    assert "Completed updating config for user frank." in done


def test_refusals_are_counted_and_logged_without_secrets(secured: Secured) -> None:
    with pytest.raises(TopicAuthorizationFailedError):
        _produce(secured.settings("bob"), "orders-refused", [0])

    def denied() -> float:
        total = 0.0
        for broker in secured.cluster.brokers.values():
            assert broker.metrics_url is not None
            with urllib.request.urlopen(broker.metrics_url, timeout=10) as response:
                text = response.read().decode()
            for family in text_string_to_metric_families(text):
                for sample in family.samples:
                    if sample.name == "kafka_server_authorizer_metrics_authorization_denied_total":
                        total += sample.value
        return total

    assert denied() > 0
    logs = "".join((b.workdir / "broker.log").read_text() for b in secured.cluster.brokers.values())
    assert "Principal = User:bob is Denied Operation = " in logs
    assert "bob-secret" not in logs and "admin-secret" not in logs


# --------------------------------------------------------------------------- propagation


def test_acl_changes_reach_every_broker_and_survive_a_restart(secured: Secured) -> None:
    # One partition led by each broker: alice's writes need the ACL on both.
    _create_topic(secured, "spread", {0: [0, 1], 1: [1, 0]})
    with pytest.raises(TopicAuthorizationFailedError):
        _produce(secured.settings("alice"), "spread", [0, 1])
    admin = KafkaAdminClient(
        request_timeout_ms=15000,
        **{
            **secured.settings("admin"),
            "bootstrap_servers": secured.cluster.brokers[0].bootstrap_for("SASL_PLAINTEXT"),
        },
    )
    try:
        admin.create_acls([_acl("User:alice", ACLOperation.WRITE, ResourceType.TOPIC, "spread")])
    finally:
        admin.close()

    def alice_writes_everywhere() -> bool:
        _produce(secured.settings("alice"), "spread", [0, 1])
        return True

    wait_for(alice_writes_everywhere, 30, "alice's write ACL on both brokers")
    # Both brokers restart: the ACLs are loaded from ZooKeeper.
    secured.cluster.stop()
    secured.cluster.start()
    wait_cluster_ready(secured.cluster)
    wait_for(alice_writes_everywhere, 60, "alice's write ACL after the restart")
    with pytest.raises(TopicAuthorizationFailedError):
        _produce(secured.settings("bob"), "spread", [0])


# --------------------------------------------------------------------------- settings


def test_allow_everyone_if_no_acl_found(
    kafka_cluster_factory: ClusterFactory, zookeeper: ZooKeeperServer
) -> None:
    chroot = f"open-{uuid.uuid4().hex[:8]}"
    for user in ("admin", "alice", "bob"):
        add_scram_user(f"{zookeeper.connect_string}/{chroot}", user, PASSWORDS[user])
    cluster = kafka_cluster_factory(
        1,
        _secured_properties(
            {
                "allow.everyone.if.no.acl.found": "true",
                "offsets.topic.replication.factor": "1",
                "listener.name.ssl.ssl.client.auth": "none",
            }
        ),
        listeners={"PLAINTEXT": "PLAINTEXT", "SASL_PLAINTEXT": "SASL_PLAINTEXT"},
        chroot=chroot,
    )
    bootstrap = cluster.bootstrap_servers_for("SASL_PLAINTEXT")

    def settings(user: str) -> dict[str, Any]:
        return {
            "bootstrap_servers": bootstrap,
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_plain_username": user,
            "sasl_plain_password": PASSWORDS[user],
        }

    admin = KafkaAdminClient(request_timeout_ms=15000, **settings("admin"))
    try:
        admin.create_topics([NewTopic("open", 1, 1), NewTopic("guarded", 1, 1)], timeout_ms=20000)
        admin.create_acls([_acl("User:alice", ACLOperation.WRITE, ResourceType.TOPIC, "guarded")])
    finally:
        admin.close()
    _produce(settings("bob"), "open", [0])  # no ACL on the topic: everyone may
    _produce(settings("alice"), "guarded", [0])
    with pytest.raises(TopicAuthorizationFailedError):
        _produce(settings("bob"), "guarded", [0])


def test_other_authorizer_classes_refuse_to_start(
    kafka_cluster_factory: ClusterFactory,
) -> None:
    from kpo_devenv.process import ProcessStartError

    with pytest.raises(ProcessStartError, match=r"authorizer\.class\.name"):
        kafka_cluster_factory(
            1,
            {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"},
        )
