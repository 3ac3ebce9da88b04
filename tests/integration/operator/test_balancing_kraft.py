"""BalancingPolicy on Apache Kafka 4.x in KRaft mode: a node killed for good is healed.

Four combined broker+controller nodes (``KraftKafkaCluster``: every node is a voter of the
metadata quorum) in racks ``a, b, c, a``: with one node killed the three others are still a
majority of the four voters, and three live brokers on three racks can hold every
partition's three replicas again. The cluster is secured as test_secured_kafka.py secures
it: ``SASL_SSL`` with SCRAM-SHA-512 for clients, ``SSL`` with client certificates between
the nodes and on the controller listener, ``StandardAuthorizer`` refusing whatever no ACL
allows. The operator runs as a process, as the SCRAM user ``kpo-operator`` with exactly the
ACLs docs/operations/kafka-acls.md lists, granted with Kafka's own ``kafka-acls``.

A killed node stops heartbeating; the active controller fences it after
``broker.session.timeout.ms`` and DescribeCluster (KIP-1073) lists it as fenced, which the
policy's broker-failure detector reads. Records are produced with acks=all before the kill
and read back after the heal.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaTopicPartition

from kpo_devenv import ControlPlane
from kpo_devenv.apache_kafka import (
    KafkaSecurity,
    client_properties,
    kafka_classpath,
    write_properties,
)
from kpo_devenv.apache_kraft import KraftKafkaCluster
from kpo_devenv.operator_process import OperatorProcess
from kpo_devenv.pki import generate_kafka_pki
from kpo_devenv.tools import pinned_version
from kpo_kafka.admin import KafkaPythonAdmin
from kpo_kafka.client_config import ClientSecurity, client_security_from_env
from tests.integration.broker.conftest import wait_for
from tests.integration.operator.conftest import APACHE_PROPERTIES, Stack
from tests.integration.operator.test_secured_kafka import (
    CLUSTER_OPERATIONS,
    TOPIC_OPERATIONS,
    acl_args,
)

pytestmark = pytest.mark.integration

RACKS = ["a", "b", "c", "a"]
"""``broker.rack`` of nodes 0..3."""
KILLED = 0
TOPIC = "payments"
PARTITIONS = 6
RECORD = 16 * 1024
TOTAL_BYTES = 6 * 1024 * 1024
ADMIN_PASSWORD = "admin-Pw-2c81d"
OPERATOR_USER = "kpo-operator"
OPERATOR_PASSWORD = "op-Secret-6a0f3b"
OPERATOR_ACLS: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    (CLUSTER_OPERATIONS, ("--cluster",)),
    (TOPIC_OPERATIONS, ("--topic", "*")),
)
"""The operator's ACLs, as docs/operations/kafka-acls.md lists them: operations, resource."""
POLICY = "heal"
ANOMALY = f"BrokerFailure/{KILLED}"


@dataclass
class SecuredKraft:
    """The test's secured KRaft cluster and the super user's client settings."""

    cluster: KraftKafkaCluster
    security: KafkaSecurity
    workdir: Path
    admin: ClientSecurity

    @property
    def bootstrap(self) -> str:
        """The running nodes' ``SASL_SSL`` listeners."""
        return self.cluster.bootstrap_for("SASL_SSL")

    def admin_client(self) -> KafkaPythonAdmin:
        """An Admin API client of the super user ``admin``."""
        return KafkaPythonAdmin(self.bootstrap, "kpo-test", 15000, self.admin)


@pytest.fixture
def secured_kraft(tmp_path: Path) -> Iterator[SecuredKraft]:
    """Four secured combined nodes in racks :data:`RACKS`; the operator's ACLs granted."""
    workdir = tmp_path / "kraft"
    pki = generate_kafka_pki(workdir / "pki")
    security = KafkaSecurity(
        pki,
        listeners=("SASL_SSL", "SSL"),
        ssl_client_auth=True,
        scram_users={"admin": ADMIN_PASSWORD, OPERATOR_USER: OPERATOR_PASSWORD},
        super_users=("User:admin",),
    )
    cluster = KraftKafkaCluster(
        workdir / "kafka",
        kafka_classpath(pinned_version("KAFKA4_VERSION")),
        len(RACKS),
        APACHE_PROPERTIES,
        security=security,
    )
    for node_id, rack in enumerate(RACKS):
        cluster.nodes[node_id].properties["broker.rack"] = rack
    admin_config = write_properties(
        workdir / "admin.properties", client_properties(security, "SASL_SSL", user="admin")
    )
    try:
        cluster.start()
        found = SecuredKraft(cluster, security, workdir, client_security_from_env({}, admin_config))

        def ready() -> bool:
            admin = found.admin_client()
            try:
                info = admin.describe_cluster()
            finally:
                admin.close()
            return info.brokers == dict(enumerate(RACKS)) and info.controller_id is not None

        wait_for(ready, 240, "four registered brokers with their racks and a controller")
        for operations, resource in OPERATOR_ACLS:
            cluster.acls(admin_config, *acl_args([f"User:{OPERATOR_USER}"], operations, *resource))
        yield found
    finally:
        cluster.stop()


@pytest.fixture
def policy_stack(
    secured_kraft: SecuredKraft, control_plane: ControlPlane, tmp_path: Path
) -> Iterator[Stack]:
    """A namespace and the operator watching it, as ``kpo-operator`` over ``SASL_SSL``."""
    secret = tmp_path / "operator-secret"
    secret.mkdir()
    ca = secret / "ca.crt"
    ca.write_text(secured_kraft.security.pki.ca.cert.read_text())
    password = secret / "password"
    password.write_text(OPERATOR_PASSWORD + "\n")
    for path in (ca, password):
        path.chmod(0o400)
    config = write_properties(
        tmp_path / "client.properties",
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(ca),
        },
    )
    env = {
        "KPO_KAFKA_CLIENT_CONFIG": str(config),
        "KPO_KAFKA_SASL_USERNAME": OPERATOR_USER,
        "KPO_KAFKA_SASL_PASSWORD_FILE": str(password),
        "KPO_POLICY_INTERVAL_S": "2",
    }
    namespace = f"t-{uuid.uuid4().hex[:8]}"
    control_plane.kubectl("create", "namespace", namespace)
    process = OperatorProcess(
        tmp_path / "operator",
        control_plane.kubeconfig,
        secured_kraft.bootstrap,
        [namespace],
        env=env,
    )
    try:
        process.start(timeout_s=120)
        yield Stack(secured_kraft.cluster, control_plane, namespace, process)
    finally:
        process.stop(timeout_s=10)
        control_plane.drop_finalizers(namespace)
        control_plane.kubectl("delete", "namespace", namespace, "--wait=false", check=False)


def _produce(secured: SecuredKraft) -> dict[int, str]:
    """Produce :data:`TOTAL_BYTES` over the partitions with acks=all; a digest per partition."""
    producer = KafkaProducer(
        bootstrap_servers=secured.bootstrap,
        acks="all",
        linger_ms=20,
        batch_size=512 * 1024,
        max_request_size=2 * 1024 * 1024,
        **secured.admin.kafka_python_kwargs(),
    )
    digests = {p: hashlib.sha256() for p in range(PARTITIONS)}
    try:
        for i in range(TOTAL_BYTES // RECORD):
            partition = i % PARTITIONS
            value = i.to_bytes(8, "big") * (RECORD // 8)
            digests[partition].update(value)
            producer.send(TOPIC, value, partition=partition)
        producer.flush(120)
    finally:
        producer.close()
    return {p: d.hexdigest() for p, d in digests.items()}


def _consume(secured: SecuredKraft) -> dict[int, str]:
    """Read every partition from offset 0 (no group); a digest per partition."""
    consumer = KafkaConsumer(
        bootstrap_servers=secured.bootstrap,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        request_timeout_ms=15000,
        **secured.admin.kafka_python_kwargs(),
    )
    consumer.assign([KafkaTopicPartition(TOPIC, p) for p in range(PARTITIONS)])
    got: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    expected = TOTAL_BYTES // RECORD

    def done() -> bool:
        for records in consumer.poll(timeout_ms=500).values():
            for record in records:
                got[record.partition].append(record.value)
        return sum(len(v) for v in got.values()) >= expected

    try:
        wait_for(done, 120, f"{expected} records of {TOPIC}")
    finally:
        consumer.close()
    return {p: hashlib.sha256(b"".join(v)).hexdigest() for p, v in got.items()}


def _policy_status(stack: Stack) -> dict[str, Any]:
    found: dict[str, Any] = stack.get("balancingpolicies", POLICY).get("status") or {}
    return found


def _anomaly(stack: Stack) -> dict[str, Any]:
    for entry in _policy_status(stack).get("anomalies") or []:
        if entry.get("id") == ANOMALY:
            found: dict[str, Any] = entry
            return found
    return {}


def _wait_anomaly(stack: Stack, states: set[str], timeout_s: float) -> dict[str, Any]:
    """Wait until the anomaly is in one of ``states``; return it then."""
    seen: dict[str, Any] = {}

    def reached() -> bool:
        seen.clear()
        seen.update(_anomaly(stack))
        return seen.get("state") in states

    try:
        wait_for(reached, timeout_s, f"{ANOMALY} {' or '.join(sorted(states))}")
    except AssertionError as exc:
        raise AssertionError(
            f"{exc}; last: {json.dumps(seen)}; status: {json.dumps(_policy_status(stack))[:1500]}"
            f"\noperator log:\n{stack.operator.log_tail(60)}"
        ) from exc
    return dict(seen)


@pytest.mark.timeout(1200)
def test_kraft_node_killed_for_good_is_healed_over_sasl_with_racks_and_data_intact(
    secured_kraft: SecuredKraft, policy_stack: Stack
) -> None:
    stack = policy_stack
    # Every partition on three racks: nodes 1 (b) and 2 (c), and one of 0 and 3 (rack a).
    assignment = {
        p: [[KILLED, 1, 2], [1, 2, 3], [2, KILLED, 1], [3, 1, 2], [1, 2, KILLED], [2, 3, 1]][p]
        for p in range(PARTITIONS)
    }
    admin = secured_kraft.admin_client()
    try:
        admin.create_topic(TOPIC, assignment=assignment, wait_for_metadata=True)
    finally:
        admin.close()
    digests = _produce(secured_kraft)
    stack.apply(
        {
            "apiVersion": "kpo.dev/v1alpha1",
            "kind": "BalancingPolicy",
            "metadata": {"name": POLICY},
            "spec": {
                "detectors": {"brokerFailure": {"threshold": "15s"}},
                "budget": {"replicationRate": 2 * 1024 * 1024},
            },
        }
    )
    wait_for(lambda: bool(_policy_status(stack).get("lastCheckTime")), 90, "the first check")
    assert _policy_status(stack)["brokers"]["live"] == [0, 1, 2, 3]
    secured_kraft.cluster.nodes[KILLED].kill()
    killed_at = time.monotonic()

    # Fenced once its session times out, then the threshold holds the fix.
    waiting = _wait_anomaly(stack, {"Waiting"}, 90)
    assert waiting["waitingFor"] == "Threshold", waiting
    assert f"broker {KILLED} fenced" in waiting["message"], waiting
    assert waiting["partitions"] == 3, waiting
    checked_from = stack.operator.log_path.stat().st_size  # the node is fenced from here on
    moving = _wait_anomaly(stack, {"Fixing", "Fixed"}, 120)
    assert time.monotonic() - killed_at >= 15
    [fix] = moving["fixes"]
    pr = stack.get("partitionreassignments", fix)
    assert pr["metadata"]["labels"]["kpo.dev/balancing-policy"] == POLICY
    assert pr["metadata"]["ownerReferences"][0]["kind"] == "BalancingPolicy"
    targets = {p["partition"]: p["replicas"] for p in pr["spec"]["partitions"]}
    # The killed node's replica is replaced in place by the only other node of rack a.
    assert targets == {
        p: [3 if b == KILLED else b for b in replicas]
        for p, replicas in assignment.items()
        if KILLED in replicas
    }, targets
    fixed = _wait_anomaly(stack, {"Fixed"}, 300)
    assert fixed["message"] == "its fixes completed", fixed
    completed = stack.status(fix)
    assert completed["phase"] == "Completed", completed
    assert "preferred leaders elected" in completed["message"], completed

    admin = secured_kraft.admin_client()
    try:
        described = admin.describe_topics([TOPIC])[TOPIC]
        # ElectLeaders answered once the controller committed; a broker's Metadata follows.
        wait_for(
            lambda: all(
                i.leader == i.replicas[0] for i in admin.describe_topics([TOPIC])[TOPIC].values()
            ),
            30,
            "the preferred replicas leading",
        )
    finally:
        admin.close()
    racks = dict(enumerate(RACKS))
    for partition, info in described.items():
        replicas, isr = list(info.replicas), list(info.isr)
        assert KILLED not in replicas, (partition, replicas)
        assert len(replicas) == 3 and sorted(isr) == sorted(replicas), (partition, replicas, isr)
        assert len({racks[b] for b in replicas}) == 3, (partition, replicas)
    assert _consume(secured_kraft) == digests

    reasons = [e["reason"] for e in stack.events(POLICY)]
    for reason in ("AnomalyWaiting", "AnomalyFixing", "AnomalyFixed"):
        assert reason in reasons, reasons
    status = _policy_status(stack)
    assert status["brokers"]["live"] == [1, 2, 3], status["brokers"]
    assert not status["brokers"].get("absent"), status["brokers"]
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True", status["conditions"]
    log = stack.operator.log_path.read_text()
    assert OPERATOR_PASSWORD not in log and ADMIN_PASSWORD not in log
    # Until the node is fenced a check fails (DescribeLogDirs cannot reach it); once it is,
    # every check and every step of the fix succeeds.
    with stack.operator.log_path.open("rb") as file:
        file.seek(checked_from)
        later = file.read().decode()
    failures = [line for line in later.splitlines() if "failed temporarily" in line]
    assert not failures, failures
