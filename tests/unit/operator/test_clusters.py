"""Several Kafka clusters from one operator: connections, per-cluster runtimes, statuses.

Two fake clusters stand for two separate broker fleets; the operator's runtime is the
real one (registry, scoped stores, writers, reconcilers), with in-memory Secrets.
"""

from __future__ import annotations

from typing import Any

import pytest

from kpo_kafka.admin import KafkaAdmin
from kpo_kafka.admin_types import KafkaUnavailableError
from kpo_kafka.security import SecurityProtocol
from kpo_operator.admin_pool import KafkaAdminPool
from kpo_operator.cluster_status import ClusterInUse
from kpo_operator.connections import (
    CLUSTER_NOT_FOUND,
    INVALID_CONFIG,
    SECRET_NOT_FOUND,
    ClusterKey,
    ClusterUnavailable,
    Connection,
    SecretError,
    cluster_key_of,
    resolve_connection,
)
from kpo_operator.resources import KAFKA_CLUSTER, PARTITION_REASSIGNMENT, TOPIC_REPLICA_QUOTA
from kpo_operator.runtime import OperatorRuntime, RetryLater
from kpo_operator.settings import OperatorSettings
from kpo_operator.throttle_ledger import LEDGER_KEY, ThrottleLedgerStore, ledger_key
from tests.unit.operator.fake_kafka import FakeKafkaAdmin
from tests.unit.operator.fake_store import FakeObjectStore, MemoryLedgerStore
from tests.unit.operator.reassignment_env import reassignment

NS = "ns"
PASSWORD = "s3cret-Pa55"
RATE = "leader.replication.throttled.rate"
REPLICAS = "leader.replication.throttled.replicas"


class MemorySecrets:
    """Secrets by (namespace, name) -> data, as the API server would hand them out."""

    def __init__(self) -> None:
        self.data: dict[tuple[str, str], dict[str, str]] = {}
        self.reads = 0

    def read(self, namespace: str, name: str, key: str) -> str:
        self.reads += 1
        found = self.data.get((namespace, name))
        if found is None:
            raise SecretError(f"Secret {namespace}/{name} not found")
        if key not in found:
            raise SecretError(f"Secret {namespace}/{name} has no key {key!r}")
        return found[key]


def kafka_cluster(name: str, servers: list[str], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kpo.dev/v1alpha1",
        "kind": "KafkaCluster",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"bootstrapServers": servers, **spec},
    }


def quota(name: str, topic: str, rate: int, cluster: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "topics": {"names": [topic]},
        "leaderReplicationThrottledRate": rate,
        "leaderReplicationThrottledReplicas": "*",
    }
    if cluster is not None:
        spec["clusterRef"] = cluster
    return {
        "apiVersion": "kpo.dev/v1alpha1",
        "kind": "TopicReplicaQuota",
        "metadata": {"name": name, "namespace": NS},
        "spec": spec,
    }


class Env:
    """An operator runtime over a default cluster and two more reachable as KafkaClusters."""

    def __init__(self) -> None:
        self.default = FakeKafkaAdmin(cluster_id="default-id")
        self.a = FakeKafkaAdmin(cluster_id="a-id", brokers={10: None, 11: None, 12: None})
        self.b = FakeKafkaAdmin(cluster_id="b-id", brokers={20: None, 21: None, 22: None})
        for kafka in (self.default, self.a, self.b):
            kafka.create_topic("t", {0: sorted(kafka.brokers)[:2]})
        self.by_server = {"a:9092": self.a, "b:9092": self.b}
        self.connections: list[Connection] = []
        self.store = FakeObjectStore()
        self.secrets = MemorySecrets()
        self.ledgers: dict[ClusterKey, MemoryLedgerStore] = {None: MemoryLedgerStore()}
        settings = OperatorSettings(bootstrap_servers=("default:9092",))
        self.runtime = OperatorRuntime(
            settings,
            admin=self.default,
            store=self.store,
            ledger_store=self.ledgers[None],
            secrets=self.secrets,
            ledger_store_for=self._ledger,
            client_for=self._client,
        )

    def _ledger(self, key: ClusterKey) -> ThrottleLedgerStore:
        return self.ledgers.setdefault(key, MemoryLedgerStore())

    def _client(self, connection: Connection) -> KafkaAdmin:
        self.connections.append(connection)
        kafka = self.by_server[connection.bootstrap_servers[0]]
        kafka.closed = False  # a reconnected client is a new client on the same cluster
        return kafka

    def quota_step(self, name: str, ref: str | None) -> None:
        self.runtime.run_on(
            TOPIC_REPLICA_QUOTA,
            NS,
            name,
            ref,
            lambda cluster: cluster.quotas.reconcile(NS, name),
        )

    def status(self, kind: Any, name: str) -> dict[str, Any]:
        return self.store.status_of(kind, NS, name)


def conditions(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in status.get("conditions", [])}


def throttles(kafka: FakeKafkaAdmin) -> dict[str, dict[str, str]]:
    return {f"{r.kind} {r.name}": dict(v) for r, v in kafka.configs.items() if v}


@pytest.fixture
def env() -> Env:
    return Env()


# -- connections ---------------------------------------------------------------------------


def test_cluster_key_is_the_namespace_and_the_ref() -> None:
    assert cluster_key_of(quota("q", "t", 1)) is None
    assert cluster_key_of(quota("q", "t", 1, cluster="a")) == (NS, "a")


def test_secrets_are_read_by_reference_and_only_their_digest_is_kept() -> None:
    secrets = MemorySecrets()
    secrets.data[(NS, "user")] = {"username": "kpo\n", "password": PASSWORD + "\n"}
    obj = kafka_cluster(
        "a",
        ["a:9093"],
        config={"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512"},
        secretRefs={
            "sasl.username": {"name": "user", "key": "username"},
            "sasl.password": {"name": "user", "key": "password"},
        },
        requestTimeoutMs=5000,
    )
    connection = resolve_connection(obj, secrets, 30000)
    assert connection.bootstrap_servers == ("a:9093",)
    assert connection.request_timeout_ms == 5000
    assert connection.security.protocol is SecurityProtocol.SASL_PLAINTEXT
    assert connection.security.username == "kpo"
    assert connection.security.password is not None
    assert connection.security.password.reveal() == PASSWORD
    assert PASSWORD not in repr(connection) and PASSWORD not in connection.fingerprint
    # A rotated password is a new connection; the same one is not.
    assert resolve_connection(obj, secrets, 30000).fingerprint == connection.fingerprint
    secrets.data[(NS, "user")]["password"] = "rotated"
    assert resolve_connection(obj, secrets, 30000).fingerprint != connection.fingerprint


def test_a_missing_secret_or_key_is_named_without_any_value() -> None:
    secrets = MemorySecrets()
    obj = kafka_cluster(
        "a",
        ["a:9093"],
        config={"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"},
        secretRefs={
            "sasl.username": {"name": "user", "key": "username"},
            "sasl.password": {"name": "user", "key": "password"},
        },
    )
    with pytest.raises(ClusterUnavailable) as missing:
        resolve_connection(obj, secrets, 30000)
    assert missing.value.reason == SECRET_NOT_FOUND
    assert "secretRefs.sasl.password: Secret ns/user not found" in missing.value.message
    secrets.data[(NS, "user")] = {"username": "kpo", "other": PASSWORD}
    with pytest.raises(ClusterUnavailable) as no_key:
        resolve_connection(obj, secrets, 30000)
    assert "has no key 'password'" in no_key.value.message
    assert PASSWORD not in no_key.value.message


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"bootstrapServers": ["a:0"]}, "port 0 is not in 1..65535"),
        ({"bootstrapServers": ["a:1"], "config": {"acks": "all"}}, "spec.config.acks"),
        (
            {"bootstrapServers": ["a:1"], "config": {"security.protocol": "SASL_SSL"}},
            "sasl.mechanism: GSSAPI (Kafka's default) is not supported",
        ),
        (
            {
                "bootstrapServers": ["a:1"],
                "secretRefs": {"ssl.keystore.key": {"name": "tls", "key": "tls.key"}},
            },
            "ssl.",
        ),
    ],
)
def test_a_spec_kafka_would_refuse_is_invalid_config(spec: dict[str, Any], expected: str) -> None:
    secrets = MemorySecrets()
    secrets.data[(NS, "tls")] = {"tls.key": "-----BEGIN PRIVATE KEY-----\nx\n"}
    obj = {"kind": "KafkaCluster", "metadata": {"name": "a", "namespace": NS}, "spec": spec}
    with pytest.raises(ClusterUnavailable) as refused:
        resolve_connection(obj, secrets, 30000)
    assert refused.value.reason == INVALID_CONFIG
    assert expected in refused.value.message
    assert "BEGIN PRIVATE KEY" not in refused.value.message


def test_ledger_keys_are_per_cluster_and_bounded() -> None:
    assert ledger_key(None) == LEDGER_KEY
    assert ledger_key(("ns", "a")) == "ledger.ns.a.json"
    long = ledger_key(("n" * 63, "x" * 253))
    assert len(long) <= 253 and long.startswith("ledger.") and long.endswith(".json")


def test_pool_reconnect_closes_idle_clients_now_and_busy_ones_after_their_call() -> None:
    made: list[FakeKafkaAdmin] = []

    def connect() -> KafkaAdmin:
        made.append(FakeKafkaAdmin())
        return made[-1]

    pool = KafkaAdminPool(connect, 2)
    pool.describe_cluster()
    first = made[0]
    with pool._borrow() as busy:  # a call in flight during the reconnect
        assert busy is first
        pool.reconnect(connect)
        assert not first.closed
    assert first.closed
    pool.describe_cluster()
    assert len(made) == 2 and not made[1].closed


# -- one runtime per cluster --------------------------------------------------------------


def test_quotas_on_two_clusters_write_only_their_own_cluster(env: Env) -> None:
    env.store.apply(kafka_cluster("a", ["a:9092"]))
    env.store.apply(kafka_cluster("b", ["b:9092"]))
    env.store.apply(quota("qa", "t", 1000, cluster="a"))
    env.store.apply(quota("qb", "t", 2000, cluster="b"))
    env.store.apply(quota("qd", "t", 3000))
    env.quota_step("qa", "a")
    env.quota_step("qb", "b")
    env.quota_step("qd", None)
    assert throttles(env.a) == {
        "broker 10": {RATE: "1000"},
        "broker 11": {RATE: "1000"},
        "broker 12": {RATE: "1000"},
        "topic t": {REPLICAS: "*"},
    }
    assert throttles(env.b) == {
        "broker 20": {RATE: "2000"},
        "broker 21": {RATE: "2000"},
        "broker 22": {RATE: "2000"},
        "topic t": {REPLICAS: "*"},
    }
    assert throttles(env.default) == {
        "broker 0": {RATE: "3000"},
        "broker 1": {RATE: "3000"},
        "broker 2": {RATE: "3000"},
        "topic t": {REPLICAS: "*"},
    }
    # Each cluster's ledger holds only what was written there.
    assert set(env.ledgers[(NS, "a")].ledger.brokers) == {10, 11, 12}
    assert env.ledgers[(NS, "a")].ledger.cluster_id == "a-id"
    assert set(env.ledgers[None].ledger.brokers) == {0, 1, 2}
    assert conditions(env.status(TOPIC_REPLICA_QUOTA, "qa"))["Ready"]["message"] == (
        "applied on 3 brokers and 1 topics"
    )
    # Deleting the quota of A removes its throttles from A and touches nothing else.
    env.store.delete(TOPIC_REPLICA_QUOTA, NS, "qa")
    calls_b = len(env.b.calls)
    assert env.runtime.run_on(
        TOPIC_REPLICA_QUOTA, NS, "qa", "a", lambda c: c.quotas.finalize(NS, "qa")
    )
    assert throttles(env.a) == {}
    assert len(env.b.calls) == calls_b
    assert throttles(env.b)["broker 20"] == {RATE: "2000"}


def test_reassignments_on_two_clusters_do_not_see_each_other(env: Env) -> None:
    env.store.apply(kafka_cluster("a", ["a:9092"]))
    env.store.apply(reassignment("ra", [("t", 0, [12, 11])], clusterRef="a"))
    env.store.apply(reassignment("rd", [("t", 0, [2, 1])]))
    a = env.runtime.run_on(
        PARTITION_REASSIGNMENT, NS, "ra", "a", lambda c: c.reassignments.reconcile(NS, "ra")
    )
    d = env.runtime.run_on(
        PARTITION_REASSIGNMENT, NS, "rd", None, lambda c: c.reassignments.reconcile(NS, "rd")
    )
    assert (a, d) == ("Moving", "Moving")
    assert env.a.partitions[("t", 0)].target == [12, 11]
    assert env.default.partitions[("t", 0)].target == [2, 1]
    assert env.b.calls == []


def test_an_unknown_cluster_ref_is_stalled_and_changes_nothing(env: Env) -> None:
    env.store.apply(quota("q", "t", 1000, cluster="nope"))
    with pytest.raises(RetryLater):
        env.quota_step("q", "nope")
    found = conditions(env.status(TOPIC_REPLICA_QUOTA, "q"))
    assert found["Ready"]["status"] == "False"
    assert found["Stalled"]["status"] == "True" and found["Stalled"]["reason"] == CLUSTER_NOT_FOUND
    assert found["Stalled"]["message"] == "KafkaCluster ns/nope not found (spec.clusterRef)"
    assert [e.reason for e in env.store.events_of("q")] == [CLUSTER_NOT_FOUND]
    with pytest.raises(RetryLater):  # the same finding again: no second Event
        env.quota_step("q", "nope")
    assert len(env.store.events_of("q")) == 1
    assert env.connections == [] and env.default.calls == []
    # Its finalizer has nothing to undo.
    env.store.delete(TOPIC_REPLICA_QUOTA, NS, "q")
    assert env.runtime.run_on(
        TOPIC_REPLICA_QUOTA, NS, "q", "nope", lambda c: False, when_missing=lambda: True
    )


def test_an_unreachable_cluster_is_reported_on_the_objects_naming_it(env: Env) -> None:
    env.store.apply(kafka_cluster("a", ["a:9092"]))
    env.store.apply(quota("qa", "t", 1000, cluster="a"))
    env.a.fail_next.append(KafkaUnavailableError("DescribeCluster: timed out"))
    with pytest.raises(RetryLater):
        env.quota_step("qa", "a")
    stalled = conditions(env.status(TOPIC_REPLICA_QUOTA, "qa"))["Stalled"]
    assert stalled["reason"] == "ClusterUnreachable"
    assert "KafkaCluster ns/a unreachable: DescribeCluster: timed out" in stalled["message"]
    env.quota_step("qa", "a")  # back: Ready again
    found = conditions(env.status(TOPIC_REPLICA_QUOTA, "qa"))
    assert found["Ready"]["status"] == "True" and found["Stalled"]["status"] == "False"


# -- KafkaCluster objects -------------------------------------------------------------------


def test_cluster_status_reports_what_the_cluster_answers(env: Env) -> None:
    env.store.apply(kafka_cluster("a", ["a:9092"]))
    env.runtime.kafka_clusters.reconcile(NS, "a")
    status = env.status(KAFKA_CLUSTER, "a")
    assert status["clusterId"] == "a-id"
    assert status["brokerCount"] == 3 and status["controllerId"] == 0
    assert status["kafkaVersion"] == "3.9"
    assert status["observedGeneration"] == 1
    found = conditions(status)
    assert (found["Reachable"]["status"], found["Ready"]["status"]) == ("True", "True")
    assert [e.reason for e in env.store.events_of("a")] == ["Connected"]


def test_cluster_with_a_missing_secret_is_not_ready_and_unknown_reachable(env: Env) -> None:
    env.store.apply(
        kafka_cluster(
            "a",
            ["a:9092"],
            config={"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"},
            secretRefs={"sasl.jaas.config": {"name": "jaas", "key": "config"}},
        )
    )
    env.runtime.kafka_clusters.reconcile(NS, "a")
    found = conditions(env.status(KAFKA_CLUSTER, "a"))
    assert found["Ready"]["reason"] == SECRET_NOT_FOUND and found["Ready"]["status"] == "False"
    assert found["Reachable"]["status"] == "Unknown"
    assert env.connections == []
    # The Secret appears: the next refresh connects.
    env.secrets.data[(NS, "jaas")] = {
        "config": f"org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="kpo" password="{PASSWORD}";'
    }
    env.runtime.kafka_clusters.reconcile(NS, "a")
    assert conditions(env.status(KAFKA_CLUSTER, "a"))["Ready"]["status"] == "True"
    assert PASSWORD not in str(env.store.objects) and PASSWORD not in str(env.store.events)


def test_cluster_unreachable_is_reported_and_clears_the_cluster_facts(env: Env) -> None:
    env.store.apply(kafka_cluster("a", ["a:9092"]))
    env.runtime.kafka_clusters.reconcile(NS, "a")
    env.a.fail_next.append(KafkaUnavailableError("DescribeCluster: connection refused"))
    env.runtime.kafka_clusters.reconcile(NS, "a")
    status = env.status(KAFKA_CLUSTER, "a")
    found = conditions(status)
    assert found["Reachable"]["reason"] == "Unreachable" and found["Ready"]["status"] == "False"
    assert "brokerCount" not in status and "clusterId" not in status


def test_a_changed_connection_reconnects_the_same_runtime(env: Env) -> None:
    env.secrets.data[(NS, "user")] = {"password": PASSWORD}
    spec = {
        "config": {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"},
        "secretRefs": {
            "sasl.username": {"name": "user", "key": "password"},
            "sasl.password": {"name": "user", "key": "password"},
        },
    }
    env.store.apply(kafka_cluster("a", ["a:9092"], **spec))
    env.runtime.kafka_clusters.reconcile(NS, "a")
    runtime = env.runtime.clusters.known(NS, "a")
    assert runtime is not None and len(env.connections) == 1
    env.runtime.kafka_clusters.reconcile(NS, "a")  # nothing changed: same clients
    env.runtime.admin.describe_cluster()
    assert len(env.connections) == 1
    env.secrets.data[(NS, "user")] = {"password": "rotated"}  # a rotated Secret
    env.runtime.kafka_clusters.reconcile(NS, "a")
    assert env.runtime.clusters.known(NS, "a") is runtime
    assert len(env.connections) == 2
    new = env.connections[-1].security.password
    assert new is not None and new.reveal() == "rotated"


def test_a_cluster_in_use_cannot_go(env: Env) -> None:
    env.store.apply(kafka_cluster("a", ["a:9092"]))
    env.store.apply(quota("qa", "t", 1000, cluster="a"))
    env.runtime.kafka_clusters.reconcile(NS, "a")
    env.quota_step("qa", "a")
    with pytest.raises(ClusterInUse, match="TopicReplicaQuota ns/qa"):
        env.runtime.kafka_clusters.finalize(NS, "a")
    assert conditions(env.status(KAFKA_CLUSTER, "a"))["Ready"]["reason"] == "InUse"
    env.store.delete(TOPIC_REPLICA_QUOTA, NS, "qa")
    env.runtime.run_on(TOPIC_REPLICA_QUOTA, NS, "qa", "a", lambda c: c.quotas.finalize(NS, "qa"))
    assert env.ledgers[(NS, "a")].text is not None
    env.store.remove(TOPIC_REPLICA_QUOTA, NS, "qa")
    env.runtime.kafka_clusters.finalize(NS, "a")
    assert env.ledgers[(NS, "a")].text is None  # the empty ledger goes with the cluster
    assert env.runtime.clusters.known(NS, "a") is None
    assert env.a.closed
    assert throttles(env.a) == {}


def test_a_sasl_bootstrap_timeout_says_the_credentials_may_be_refused(env: Env) -> None:
    env.secrets.data[(NS, "user")] = {"password": PASSWORD}
    env.store.apply(
        kafka_cluster(
            "a",
            ["a:9092"],
            config={"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"},
            secretRefs={
                "sasl.username": {"name": "user", "key": "password"},
                "sasl.password": {"name": "user", "key": "password"},
            },
        )
    )
    env.a.fail_next.append(
        KafkaUnavailableError("connect: KafkaTimeoutError: Unable to bootstrap from a:9092")
    )
    env.runtime.kafka_clusters.reconcile(NS, "a")
    ready = conditions(env.status(KAFKA_CLUSTER, "a"))["Ready"]
    assert ready["reason"] == "Unreachable"
    assert "refused the SASL credentials" in ready["message"]
    assert PASSWORD not in ready["message"]


def test_cluster_status_lists_fenced_brokers_apart(env: Env) -> None:
    env.a.fenced = frozenset({13})  # registered with the KRaft controller, fenced (KIP-1073)
    env.store.apply(kafka_cluster("a", ["a:9092"]))
    env.runtime.kafka_clusters.reconcile(NS, "a")
    status = env.status(KAFKA_CLUSTER, "a")
    assert status["brokerCount"] == 3 and status["fencedBrokers"] == [13]
    assert "fenced (registered, not live): 13" in conditions(status)["Ready"]["message"]
