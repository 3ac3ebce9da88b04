"""Fixtures for the operator's tests on real parts.

``stack`` gives each test a fresh namespace on the session's real kube-apiserver,
a fresh cluster of real broker processes on the session's real ZooKeeper, and
the operator as a real process (``python -m kpo_operator``) watching that
namespace; tests drive it with ``kubectl`` as a user would.

``flavored_stack`` does the same on the cluster a test is parameterized with
(:data:`FLAVORS`): our brokers, Apache Kafka 3.9 in ZooKeeper mode (a fresh cluster),
or Apache Kafka 4.x in KRaft mode (one cluster shared by the package's tests, cleaned
between tests: topics deleted, throttle configs removed).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kafka import KafkaProducer

from kpo_devenv import ZooKeeperServer
from kpo_devenv.apache_kafka import ApacheKafkaCluster, kafka_classpath
from kpo_devenv.apache_kraft import KraftKafkaCluster, jmx_exporter_option
from kpo_devenv.controlplane import ControlPlane
from kpo_devenv.kafka_cluster import KafkaCluster
from kpo_devenv.net import free_port
from kpo_devenv.operator_process import OperatorProcess
from kpo_devenv.tools import pinned_version, tools_dir
from kpo_kafka.admin import KafkaPythonAdmin
from kpo_kafka.admin_types import ConfigResource
from tests.conftest import REPO_ROOT
from tests.integration.broker.conftest import (
    ClusterFactory,
    admin_client,
    kafka_cluster_factory,
    wait_cluster_ready,
    wait_for,
)

__all__ = ["kafka_cluster_factory"]


@dataclass
class Stack:
    """One test's cluster, namespace and operator."""

    cluster: KafkaCluster
    plane: ControlPlane
    namespace: str
    operator: OperatorProcess

    def kubectl(self, *args: str, input_text: str | None = None, check: bool = True) -> str:
        result = self.plane.kubectl("-n", self.namespace, *args, input_text=input_text, check=check)
        return result.stdout if result.returncode == 0 or check else result.stderr

    def apply(self, manifest: dict[str, Any]) -> None:
        self.kubectl("apply", "-f", "-", input_text=yaml.safe_dump(manifest))

    def get(self, plural: str, name: str) -> dict[str, Any]:
        found: dict[str, Any] = json.loads(self.kubectl("get", plural, name, "-o", "json"))
        return found

    def exists(self, plural: str, name: str) -> bool:
        out = self.plane.kubectl(
            "-n",
            self.namespace,
            "get",
            plural,
            name,
            "--ignore-not-found",
            "-o",
            "name",
            check=False,
        )
        return bool(out.stdout.strip())

    def status(self, name: str) -> dict[str, Any]:
        status: dict[str, Any] = self.get("partitionreassignments", name).get("status") or {}
        return status

    def wait_phase(self, name: str, phase: str, timeout_s: float = 90) -> dict[str, Any]:
        """Wait until ``status.phase`` is ``phase``; returns the status then."""
        return self._wait_status(
            name, f"phase {phase}", lambda s: s.get("phase") == phase, timeout_s
        )

    def wait_submitted(self, name: str, timeout_s: float = 60) -> dict[str, Any]:
        """Wait until the object is Moving with every partition submitted to Kafka.

        Phase Moving is written ahead of the submission (targets Pending, then throttles,
        then AlterPartitionReassignments), so it alone does not mean Kafka has the move.
        """

        def submitted(status: dict[str, Any]) -> bool:
            parts = status.get("partitions") or []
            pending = [p for p in parts if p.get("state") == "Pending"]
            return status.get("phase") == "Moving" and bool(parts) and not pending

        return self._wait_status(name, "every partition submitted", submitted, timeout_s)

    def _wait_status(
        self,
        name: str,
        what: str,
        done: Callable[[dict[str, Any]], bool],
        timeout_s: float,
    ) -> dict[str, Any]:
        seen: dict[str, Any] = {}

        def reached() -> bool:
            seen.clear()
            seen.update(self.status(name))
            return done(seen)

        try:
            wait_for(reached, timeout_s, f"{name} {what}")
        except AssertionError as exc:
            raise AssertionError(
                f"{exc}; last status: {json.dumps(seen)[:2000]}\n"
                f"operator log:\n{self.operator.log_tail(40)}"
            ) from exc
        return self.status(name)

    def events(self, name: str) -> list[dict[str, Any]]:
        listed = json.loads(
            self.kubectl(
                "get", "events", "--field-selector", f"involvedObject.name={name}", "-o", "json"
            )
        )
        items: list[dict[str, Any]] = listed["items"]
        return items


def reassignment(name: str, partitions: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    """A PartitionReassignment manifest."""
    return {
        "apiVersion": "kpo.dev/v1alpha1",
        "kind": "PartitionReassignment",
        "metadata": {"name": name},
        "spec": {"partitions": partitions, **spec},
    }


THROTTLE_KEYS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
LIST_KEYS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")
RECORD = 16 * 1024  # bytes per record


def produce(cluster: KafkaCluster, topic: str, partitions: int, total_bytes: int) -> dict[int, str]:
    """Produce ``total_bytes`` over ``partitions`` with acks=all; return a digest per partition."""
    producer = KafkaProducer(
        bootstrap_servers=cluster.bootstrap_servers,
        acks="all",
        linger_ms=20,
        batch_size=512 * 1024,
        max_request_size=2 * 1024 * 1024,
    )
    digests = {p: hashlib.sha256() for p in range(partitions)}
    try:
        for i in range(total_bytes // RECORD):
            partition = i % partitions
            value = i.to_bytes(8, "big") * (RECORD // 8)
            digests[partition].update(value)
            producer.send(topic, value, partition=partition)
        producer.flush(120)
    finally:
        producer.close()
    return {p: d.hexdigest() for p, d in digests.items()}


def throttle_configs(cluster: KafkaCluster, topic: str) -> dict[ConfigResource, dict[str, str]]:
    admin = KafkaPythonAdmin(cluster.bootstrap_servers, "kpo-test", request_timeout_ms=10000)
    try:
        found = admin.describe_configs(
            brokers=sorted(cluster.brokers), topics=[topic], keys=THROTTLE_KEYS + LIST_KEYS
        )
    finally:
        admin.close()
    return {r: v for r, v in found.items() if v}


StackFactory = Callable[..., Stack]


class _Operators:
    """Operators started by one test, each watching a namespace of its own; stopped together."""

    def __init__(self, control_plane: ControlPlane, workdir: Path) -> None:
        self.control_plane = control_plane
        self.workdir = workdir
        self.processes: list[OperatorProcess] = []
        self.namespaces: list[str] = []

    def start(self, cluster: KafkaCluster, **operator: Any) -> Stack:
        """Create a namespace, start an operator on ``cluster`` watching it; the stack."""
        namespace = f"t-{uuid.uuid4().hex[:8]}"
        self.control_plane.kubectl("create", "namespace", namespace)
        self.namespaces.append(namespace)
        process = OperatorProcess(
            self.workdir / f"operator-{namespace}",
            self.control_plane.kubeconfig,
            cluster.bootstrap_servers,
            [namespace],
            **operator,
        )
        self.processes.append(process)
        process.start()
        return Stack(cluster, self.control_plane, namespace, process)

    def stop(self) -> None:
        """Stop every operator, then delete the namespaces without waiting."""
        for process in self.processes:
            process.stop(timeout_s=10)
        for namespace in self.namespaces:  # finalizers would hold a namespace without the operator
            self.control_plane.drop_finalizers(namespace)
            self.control_plane.kubectl(
                "delete", "namespace", namespace, "--wait=false", check=False
            )


@pytest.fixture
def stack_factory(
    control_plane: ControlPlane, kafka_cluster_factory: ClusterFactory, tmp_path: Path
) -> Iterator[StackFactory]:
    """Make stacks (brokers + namespace + operator); everything is stopped after the test."""
    operators = _Operators(control_plane, tmp_path)

    def make(
        size: int = 3,
        properties: dict[str, str] | None = None,
        log_dir_count: int = 1,
        metrics: bool = False,
        racks: list[str] | None = None,
        **operator: Any,
    ) -> Stack:
        cluster = kafka_cluster_factory(
            size, properties, racks, log_dir_count=log_dir_count, metrics=metrics
        )
        return operators.start(cluster, **operator)

    try:
        yield make
    finally:
        operators.stop()


@pytest.fixture
def stack(stack_factory: StackFactory) -> Stack:
    """A 3-broker cluster, a namespace and an operator watching it."""
    return stack_factory()


#: The clusters a test can be parameterized with (``@pytest.mark.parametrize("flavor", ...)``).
KPO = "kpo"
KAFKA3_ZK = "kafka3-zk"
KAFKA4_KRAFT = "kafka4-kraft"
FLAVORS = (KPO, KAFKA3_ZK, KAFKA4_KRAFT)

#: Every Apache Kafka cluster of these tests: no auto-created topics, quick follower fetches.
APACHE_PROPERTIES = {"auto.create.topics.enable": "false", "replica.fetch.wait.max.ms": "100"}
#: The shared KRaft cluster's quota window: 2 samples of 1 s (see test_reassignment.py).
SHARED_KRAFT_PROPERTIES = {**APACHE_PROPERTIES, "replication.quota.window.num": "2"}
ALTER_LOG_DIRS_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"
CORDONED_LOG_DIRS = "cordoned.log.dirs"  # KIP-1066, Kafka 4.3+


JMX_RULES = REPO_ROOT / "deploy" / "jmx-exporter" / "kafka-kpo-rules.yaml"


def start_kraft(
    workdir: Path, properties: Mapping[str, str], jmx_exporter: bool = False
) -> KraftKafkaCluster:
    """Start a 3-node Apache Kafka 4.x KRaft cluster and wait until every broker is registered.

    With ``jmx_exporter``, each node runs the Prometheus JMX exporter's agent with
    ``deploy/jmx-exporter/kafka-kpo-rules.yaml``; ``nodes[i].metrics_url`` is its page.
    """
    ports = {i: free_port() for i in range(3)}
    options = None
    if jmx_exporter:
        version = pinned_version("JMX_EXPORTER_VERSION")
        agent = tools_dir() / f"jmx-exporter-{version}" / f"jmx_prometheus_javaagent-{version}.jar"
        assert agent.exists(), f"{agent} missing: run tools/install-jmx-exporter.sh"
        options = lambda i: [jmx_exporter_option(agent, ports[i], JMX_RULES)]  # noqa: E731
    cluster = KraftKafkaCluster(
        workdir,
        kafka_classpath(pinned_version("KAFKA4_VERSION")),
        3,
        properties,
        jvm_options=options,
    )
    if jmx_exporter:
        for i, node in cluster.nodes.items():
            node.metrics_port = ports[i]
    cluster.start()
    try:
        wait_cluster_ready(cluster, 120)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def start_zookeeper_kafka(
    zookeeper: ZooKeeperServer, workdir: Path, properties: Mapping[str, str]
) -> ApacheKafkaCluster:
    """Start a 3-broker Apache Kafka 3.9 (ZooKeeper mode) on a fresh chroot; wait until ready."""
    chroot = f"apache-{uuid.uuid4().hex[:8]}"
    cluster = ApacheKafkaCluster(
        workdir / chroot,
        f"{zookeeper.connect_string}/{chroot}",
        kafka_classpath(pinned_version("KAFKA_VERSION")),
        3,
        properties,
    )
    cluster.start()
    try:
        wait_cluster_ready(cluster, 120)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def clean_cluster(cluster: KafkaCluster) -> None:
    """Leave a shared cluster as new: cancel moves, delete every topic, remove throttle configs
    and cordons.

    Raises:
        AssertionError: a reassignment or a topic did not go.
    """
    admin = KafkaPythonAdmin(cluster.bootstrap_servers, "kpo-test", request_timeout_ms=15000)
    try:
        in_flight = list(admin.list_partition_reassignments())
        if in_flight:  # left by a failed test
            admin.alter_partition_reassignments(dict.fromkeys(in_flight))
            wait_for(lambda: not list(admin.list_partition_reassignments()), 30, "no move")
        keys = (*THROTTLE_KEYS, ALTER_LOG_DIRS_RATE, CORDONED_LOG_DIRS)
        found = admin.describe_configs(brokers=sorted(cluster.brokers), keys=keys)
        removals = {r: {k: None for k in v} for r, v in found.items() if v}
        if removals:
            admin.incremental_alter_configs(removals)
    finally:
        admin.close()
    raw = admin_client(cluster)
    try:
        topics = [t for t in raw.list_topics() if not t.startswith("__")]
        if topics:
            raw.delete_topics(topics, timeout_ms=30000)
        wait_for(
            lambda: not [t for t in raw.list_topics() if not t.startswith("__")],
            30,
            "every topic deleted",
        )
    finally:
        raw.close()


@pytest.fixture(scope="package")
def shared_kraft(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KraftKafkaCluster]:
    """One Apache Kafka 4.x KRaft cluster (3 combined nodes) for the package's tests."""
    cluster = start_kraft(tmp_path_factory.mktemp("kraft"), SHARED_KRAFT_PROPERTIES)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="package")
def default_kraft(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KraftKafkaCluster]:
    """One Apache Kafka 4.x KRaft cluster with Kafka's default quota window (11 x 1 s) for
    the package's tests that need it (other tools' throttles, the ETA, the placement job
    reading the JMX exporter every node runs); cleaned by them."""
    cluster = start_kraft(
        tmp_path_factory.mktemp("kraft-default"), APACHE_PROPERTIES, jmx_exporter=True
    )
    try:
        yield cluster
    finally:
        cluster.stop()


FlavoredStack = Callable[..., Stack]


@pytest.fixture
def flavored_stack(
    request: pytest.FixtureRequest,
    stack_factory: StackFactory,
    control_plane: ControlPlane,
    tmp_path: Path,
) -> Iterator[FlavoredStack]:
    """Make a stack on the cluster of a flavor (:data:`FLAVORS`).

    ``make(flavor, properties=None, **operator)``: ``kpo`` as :func:`stack_factory`;
    ``kafka3-zk`` starts a fresh Apache Kafka 3.9 with ``properties``; ``kafka4-kraft``
    uses the package's shared KRaft cluster, whose properties must include ``properties``
    (it is cleaned after the test).
    """
    operators = _Operators(control_plane, tmp_path)
    own: list[KafkaCluster] = []
    shared: list[KafkaCluster] = []

    def make(flavor: str, properties: dict[str, str] | None = None, **operator: Any) -> Stack:
        if flavor == KPO:
            return stack_factory(properties=properties, **operator)
        cluster: KafkaCluster
        if flavor == KAFKA3_ZK:
            zookeeper = request.getfixturevalue("zookeeper")
            props = {**APACHE_PROPERTIES, **(properties or {})}
            cluster = start_zookeeper_kafka(zookeeper, tmp_path, props)
            own.append(cluster)
        elif flavor == KAFKA4_KRAFT:
            cluster = request.getfixturevalue("shared_kraft")
            wanted = dict(properties or {})
            assert wanted.items() <= SHARED_KRAFT_PROPERTIES.items(), (
                f"the shared KRaft cluster runs with {SHARED_KRAFT_PROPERTIES}, not {wanted}"
            )
            shared.append(cluster)
        else:
            raise ValueError(f"unknown flavor {flavor!r}; one of {FLAVORS}")
        return operators.start(cluster, **operator)

    try:
        yield make
    finally:
        operators.stop()
        for cluster in own:
            cluster.stop()
        for cluster in shared:
            clean_cluster(cluster)
