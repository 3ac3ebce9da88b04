"""The chart's rendered pods, run: brokers, the operator with the chart's RBAC, the helm test.

kwok marks pods Running without running them; this module runs what the chart
renders instead (see :mod:`tests.integration.charts.local_pods`). The release is
installed with ``helm install --no-hooks`` into the real control plane (ServiceAccounts,
Roles, ConfigMaps, Secrets); then the broker StatefulSet's pods run from their rendered
init container, command and environment against a real ZooKeeper that requires SASL
(the brokers' password in a Secret given as ``security.zookeeper.existingSecret``), the
security bootstrap hook Job's pod creates the SCRAM users through the brokers' mutual-TLS
listener, the operator's Deployment pod runs with a token of the chart's ServiceAccount
(so its Role is what allows or refuses each call) and its SCRAM user over SASL_SSL, and the
``helm test`` pod's script produces and consumes through them. Each pod gets its own
ports, as a pod IP would give it; the broker certificates name 127.0.0.1
(``security.tls.extraIpAddresses``). An unauthenticated client gets nothing.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import ssl
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import KafkaError
from kazoo.client import KazooClient

from kpo_broker.zk.client import KafkaZkClient
from kpo_broker.zk.security import ZkClientSecurity
from kpo_devenv import ControlPlane
from kpo_devenv.net import LOOPBACK, free_port
from kpo_devenv.process import ManagedProcess
from kpo_devenv.zookeeper import ZooKeeperServer
from kpo_kafka.topic_partition import TopicPartition as KpoTopicPartition
from tests.integration.broker.conftest import wait_for
from tests.integration.charts.local_pods import LocalPod, Manifest, statefulset_pod
from tests.unit.charts.helm import CHART, helm

pytestmark = pytest.mark.integration

RELEASE = "kpo-local"
NAMESPACE = "kpo-local-pods"
RACKS = ["rack-a", "rack-b", "rack-c"]
TOPIC = "orders"
ZK_PASSWORD = "zk-secret-of-the-brokers"
ZK_SECRET = "zk-sasl"
ZK_SECURITY = ZkClientSecurity("kafka", ZK_PASSWORD, set_acl=True)


@dataclass
class Release:
    """The installed release and its pods running as processes."""

    plane: ControlPlane
    objects: list[Manifest]
    hooks: list[Manifest]
    brokers: list[ManagedProcess]
    broker_pods: list[LocalPod]
    init_output: list[str]
    operator: ManagedProcess
    bootstrap: str
    root: Path
    zk_connect: str
    bootstrap_output: str
    internal: str = ""

    def find(self, kind: str, suffix: str) -> Manifest:
        (found,) = [
            o
            for o in self.objects + self.hooks
            if o["kind"] == kind and o["metadata"]["name"].endswith(suffix)
        ]
        return found

    def user_password(self, component: str) -> str:
        (secret,) = [
            o
            for o in self.objects
            if o["kind"] == "Secret" and o["metadata"]["name"].endswith(f"-user-{component}")
        ]
        return base64.b64decode(secret["data"]["password"]).decode()

    def client(self, component: str = "operator") -> dict[str, Any]:
        """kafka-python settings of a chart user: SASL_SSL with SCRAM, trusting the fleet's CA."""
        (tls,) = [
            o
            for o in self.objects
            if o["kind"] == "Secret" and o["metadata"]["name"].endswith("-broker-tls")
        ]
        context = ssl.create_default_context(
            cadata=base64.b64decode(tls["data"]["ca.crt"]).decode()
        )
        return {
            "security_protocol": "SASL_SSL",
            "ssl_context": context,
            "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_plain_username": {"operator": "kpo-operator", "test": "kpo-helm-test"}[component],
            "sasl_plain_password": self.user_password(component),
        }

    def super_client(self) -> dict[str, Any]:
        """kafka-python settings of the brokers' own identity (a super user): mutual TLS.

        For the test's own set-up (topics and records of an application), which none of the
        chart's least-privilege users may do; use with :attr:`internal`.
        """
        (tls,) = [
            o
            for o in self.objects
            if o["kind"] == "Secret" and o["metadata"]["name"].endswith("-broker-tls")
        ]
        folder = self.root / "super-user"
        folder.mkdir(exist_ok=True)
        files = {}
        for key in ("ca.crt", "broker-0.crt", "broker-0.key"):
            files[key] = folder / key
            files[key].write_bytes(base64.b64decode(tls["data"][key]))
        files["broker-0.key"].chmod(0o600)
        context = ssl.create_default_context(cafile=str(files["ca.crt"]))
        context.check_hostname = False
        context.load_cert_chain(str(files["broker-0.crt"]), str(files["broker-0.key"]))
        return {"security_protocol": "SSL", "ssl_context": context}

    def status(self, name: str) -> dict[str, Any]:
        out = self.plane.kubectl(
            "get", "partitionreassignment", name, "-n", NAMESPACE, "-o", "json"
        ).stdout
        status: dict[str, Any] = json.loads(out).get("status") or {}
        return status


def _helm(plane: ControlPlane, *args: str) -> str:
    result = helm(*args, "--namespace", NAMESPACE, "--kubeconfig", str(plane.kubeconfig))
    assert result.returncode == 0, result.stderr
    return result.stdout


def _documents(text: str) -> list[Manifest]:
    return [doc for doc in yaml.safe_load_all(text) if doc]


def _service_account_kubeconfig(plane: ControlPlane, account: str, path: Path) -> Path:
    """A kubeconfig for the control plane that authenticates as ``account`` (a bound token)."""
    token = plane.kubectl(
        "create", "token", account, "-n", NAMESPACE, "--duration=2h"
    ).stdout.strip()
    config = yaml.safe_load(Path(plane.kubeconfig).read_text())
    for user in config["users"]:
        user["user"] = {"token": token}
    path.write_text(yaml.safe_dump(config))
    return path


def _values(zookeeper: ZooKeeperServer) -> dict[str, Any]:
    return {
        "zookeeper": {
            "enabled": False,
            "externalConnect": f"{zookeeper.connect_string}/{RELEASE}-{uuid.uuid4().hex[:8]}",
        },
        "security": {
            "zookeeper": {"existingSecret": ZK_SECRET},
            "tls": {"extraIpAddresses": [LOOPBACK]},
        },
        "broker": {
            "replicas": 3,
            "rack": {"source": "static", "racks": RACKS},
            "config": {"replication.quota.window.num": "2"},
            "terminationGracePeriodSeconds": 60,
        },
        "operator": {"watchNamespaces": [NAMESPACE], "pollIntervalSeconds": 1},
    }


@pytest.fixture(scope="module")
def sasl_zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    """A ZooKeeper that requires SASL, knowing the brokers' user."""
    with ZooKeeperServer(
        tmp_path_factory.mktemp("zk-sasl"), sasl_users={"kafka": ZK_PASSWORD}
    ) as server:
        yield server


@pytest.fixture(scope="module")
def release(
    control_plane: ControlPlane,
    sasl_zookeeper: ZooKeeperServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Release]:
    """The chart installed, its broker pods and operator pod running as local processes."""
    root = tmp_path_factory.mktemp("chart-pods")
    values = root / "values.yaml"
    rendered = _values(sasl_zookeeper)
    values.write_text(yaml.safe_dump(rendered))
    control_plane.kubectl("create", "namespace", NAMESPACE)
    zk_secret: Manifest = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": ZK_SECRET, "namespace": NAMESPACE},
        "stringData": {"password": ZK_PASSWORD},
    }
    control_plane.kubectl("apply", "-f", "-", input_text=yaml.safe_dump(zk_secret))
    processes: list[ManagedProcess] = []
    try:
        # No hooks: no kube-controller-manager runs Jobs here; the hook's pod runs below.
        _helm(control_plane, "install", RELEASE, str(CHART), "-f", str(values), "--no-hooks")
        objects = [*_documents(_helm(control_plane, "get", "manifest", RELEASE)), zk_secret]
        hooks = _documents(_helm(control_plane, "get", "hooks", RELEASE))
        (statefulset,) = [
            o
            for o in objects
            if o["kind"] == "StatefulSet" and o["metadata"]["name"].endswith("broker")
        ]
        ports = [(free_port(), free_port(), free_port()) for _ in range(3)]
        pods, outputs = [], []
        for ordinal, (port, metrics_port, internal_port) in enumerate(ports):
            listener = f"CLIENT://{LOOPBACK}:{port},INTERNAL://{LOOPBACK}:{internal_port}"
            pod = statefulset_pod(
                statefulset,
                ordinal,
                objects,
                root,
                NAMESPACE,
                overrides={
                    "KAFKA_LISTENERS": listener,
                    "KAFKA_ADVERTISED_LISTENERS": listener,
                    "KAFKA_METRICS_PORT": str(metrics_port),
                },
            )
            outputs += pod.run_init_containers()
            pods.append(pod)
            processes.append(pod.start())
        bootstrap = ",".join(f"{LOOPBACK}:{port}" for port, _, _ in ports)
        internal = ",".join(f"{LOOPBACK}:{port}" for _, _, port in ports)
        (job,) = [o for o in hooks if o["kind"] == "Job"]
        bootstrap_pod = LocalPod(
            "security-bootstrap",
            job["spec"]["template"]["spec"],
            objects,
            root / "security-bootstrap",
            namespace=NAMESPACE,
            overrides={"KPO_BOOTSTRAP_SERVERS": internal, "KPO_BOOTSTRAP_TIMEOUT_S": "120"},
        )
        bootstrapper = bootstrap_pod.start()
        wait_for(lambda: not bootstrapper.is_running(), 150, "the security bootstrap Job's pod")
        assert bootstrapper.returncode == 0, bootstrapper.log_tail()
        (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
        spec = deployment["spec"]["template"]["spec"]
        kubeconfig = _service_account_kubeconfig(
            control_plane, spec["serviceAccountName"], root / "operator-kubeconfig"
        )
        operator_pod = LocalPod(
            "operator",
            spec,
            objects,
            root / "operator",
            labels=deployment["spec"]["template"]["metadata"].get("labels", {}),
            namespace=NAMESPACE,
            overrides={
                "KPO_BOOTSTRAP_SERVERS": bootstrap,
                "KPO_LIVENESS_PORT": str(free_port()),
                "KUBECONFIG": str(kubeconfig),
            },
        )
        operator = operator_pod.start()
        processes.append(operator)
        stack = Release(
            control_plane,
            objects,
            hooks,
            processes[:3],
            pods,
            outputs,
            operator,
            bootstrap,
            root,
            rendered["zookeeper"]["externalConnect"],
            bootstrapper.log_tail(),
            internal,
        )
        _wait_for_brokers(stack, 3)
        yield stack
    finally:
        for process in processes:
            process.stop(timeout_s=30)
        helm("uninstall", RELEASE, "-n", NAMESPACE, "--kubeconfig", str(control_plane.kubeconfig))
        control_plane.kubectl("delete", "namespace", NAMESPACE, "--wait=false", check=False)


def _admin(stack: Release) -> KafkaAdminClient:
    return KafkaAdminClient(
        bootstrap_servers=stack.bootstrap, request_timeout_ms=10000, **stack.client()
    )


def _cluster(stack: Release) -> dict[str, Any]:
    admin = _admin(stack)
    try:
        return dict(admin.describe_cluster())
    finally:
        admin.close()


def _wait_for_brokers(stack: Release, count: int) -> None:
    def ready() -> bool:
        try:
            return len(_cluster(stack)["brokers"]) == count
        except Exception:
            return False

    wait_for(ready, 60, f"{count} brokers registered")


def _partition(stack: Release, topic: str, partition: int) -> dict[str, Any]:
    admin = _admin(stack)
    try:
        (described,) = admin.describe_topics([topic])
    finally:
        admin.close()
    (found,) = [p for p in described["partitions"] if p["partition_index"] == partition]
    return dict(found)


def test_broker_pods_register_with_their_ordinal_ids_and_racks(release: Release) -> None:
    assert release.init_output == [f"broker.rack={rack}\n" for rack in RACKS]
    brokers = {b["broker_id"]: b["rack"] for b in _cluster(release)["brokers"]}
    assert brokers == {0: "rack-a", 1: "rack-b", 2: "rack-c"}
    data = release.broker_pods[0].paths["/var/lib/kafka"]
    assert (data / "data").is_dir()  # log.dirs as rendered, on the claim's volume


def test_bootstrap_created_the_users_and_unauthenticated_clients_get_nothing(
    release: Release,
) -> None:
    assert "SCRAM credentials of kpo-operator created" in release.bootstrap_output
    assert "security bootstrap done: 3 users" in release.bootstrap_output
    with KafkaZkClient(release.zk_connect, security=ZK_SECURITY) as zk:
        users = set(zk.get_entity_names("users"))
    assert users == {"kpo-operator", "kpo-placement", "kpo-helm-test"}
    first = release.bootstrap.split(",")[0]
    context = release.client()["ssl_context"]
    refused: list[dict[str, Any]] = [
        {},  # PLAINTEXT to the SASL_SSL listener
        {"security_protocol": "SSL", "ssl_context": context},  # TLS without SASL
        {**release.client(), "sasl_plain_password": "wrong"},
        {**release.client(), "sasl_plain_username": "nobody"},
    ]
    for settings in refused:
        with pytest.raises((KafkaError, OSError, ValueError)):
            admin = KafkaAdminClient(bootstrap_servers=first, request_timeout_ms=5000, **settings)
            try:
                admin.list_topics()
            finally:
                admin.close()
    # The brokers' znodes carry Kafka's ACLs: nobody else may write, nor read the users.
    anyone = KazooClient(
        hosts=release.zk_connect.split("/")[0],
        sasl_options={"mechanism": "DIGEST-MD5", "username": "kafka", "password": ZK_PASSWORD},
    )
    anyone.start(timeout=15)
    try:
        chroot = "/" + release.zk_connect.split("/", 1)[1]
        acls, _ = anyone.get_acls(f"{chroot}/config/users/kpo-operator")
        assert [(a.perms, a.id.scheme, a.id.id) for a in acls] == [(31, "sasl", "kafka")]
        acls, _ = anyone.get_acls(f"{chroot}/brokers/ids/0")
        assert {(a.perms, a.id.scheme, a.id.id) for a in acls} == {
            (31, "sasl", "kafka"),
            (1, "world", "anyone"),
        }
    finally:
        anyone.stop()
        anyone.close()


def test_helm_test_pod_produces_and_consumes_through_the_brokers(release: Release) -> None:
    spec = release.find("Pod", "test-produce-consume")["spec"]
    pod = LocalPod(
        "helm-test",
        spec,
        release.objects,
        release.root / "helm-test",
        namespace=NAMESPACE,
        overrides={"BOOTSTRAP": release.bootstrap},
    )
    process = pod.start()
    wait_for(lambda: not process.is_running(), 120, "the helm test pod to finish")
    assert process.returncode == 0, process.log_tail()
    assert "produced and consumed 10 records on kpo-helm-test" in process.log_tail()
    assert "connecting: SASL_SSL, SCRAM-SHA-512 as kpo-helm-test" in process.log_tail()


def test_operator_pod_with_the_charts_role_completes_a_throttled_reassignment(
    release: Release,
) -> None:
    # An application's topic and records, made as the brokers' super user: the operator's
    # user holds only the ACLs a reassignment needs (no Create, no Write).
    admin = KafkaAdminClient(
        bootstrap_servers=release.internal, request_timeout_ms=10000, **release.super_client()
    )
    try:
        admin.create_topics([NewTopic(TOPIC, replica_assignments={0: [0, 1]})])
    finally:
        admin.close()
    wait_for(lambda: _partition(release, TOPIC, 0)["leader_id"] >= 0, 30, "a leader for orders-0")
    producer = KafkaProducer(
        bootstrap_servers=release.internal, acks="all", linger_ms=20, **release.super_client()
    )
    values = [i.to_bytes(8, "big") * 2048 for i in range(256)]  # 4 MiB
    for value in values:
        producer.send(TOPIC, value, partition=0)
    producer.flush(60)
    producer.close()
    manifest = {
        "apiVersion": "kpo.dev/v1alpha1",
        "kind": "PartitionReassignment",
        "metadata": {"name": "to-rack-c", "namespace": NAMESPACE},
        "spec": {
            "partitions": [{"topic": TOPIC, "partition": 0, "replicas": [2, 1]}],
            "throttle": {"replicationRate": 2 * 1024 * 1024},
        },
    }
    release.plane.kubectl("apply", "-f", "-", input_text=yaml.safe_dump(manifest))

    def completed() -> bool:
        return release.status("to-rack-c").get("phase") in {"Completed", "Failed"}

    try:
        wait_for(completed, 120, "the reassignment to finish")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\noperator log:\n{release.operator.log_tail(40)}") from exc
    status = release.status("to-rack-c")
    assert status["phase"] == "Completed", status
    assert _partition(release, TOPIC, 0)["replica_nodes"] == [2, 1]
    moved_to = release.broker_pods[2].paths["/var/lib/kafka"] / "data" / f"{TOPIC}-0"
    assert any(moved_to.glob("*.log")), "the new replica's segments are on broker 2's claim"
    events = release.plane.kubectl(
        "get",
        "events",
        "-n",
        NAMESPACE,
        "--field-selector",
        "involvedObject.name=to-rack-c",
        "-o",
        "json",
    ).stdout
    assert {"Submitted", "Completed"} <= {e["reason"] for e in json.loads(events)["items"]}
    refused = [
        line for line in release.operator.log_path.read_text().splitlines() if "Forbidden" in line
    ]
    assert not refused, "the operator made calls its Role refuses:\n" + "\n".join(refused[:5])
    consumer = KafkaConsumer(
        bootstrap_servers=release.internal,
        auto_offset_reset="earliest",
        consumer_timeout_ms=10000,
        **release.super_client(),
    )
    consumer.assign([TopicPartition(TOPIC, 0)])
    read = [m.value for m in consumer]
    consumer.close()
    assert read == values


def test_sigterm_as_sent_by_the_prestop_hook_is_a_controlled_shutdown(release: Release) -> None:
    broker = release.brokers[2]
    assert _partition(release, TOPIC, 0)["leader_id"] == 2  # the preferred leader after the move
    grace_s = release.find("StatefulSet", "broker")["spec"]["template"]["spec"][
        "terminationGracePeriodSeconds"
    ]
    pid = broker.pid
    assert pid is not None
    started = time.monotonic()
    os.kill(pid, signal.SIGTERM)
    wait_for(lambda: not broker.is_running(), grace_s, "the broker to exit")
    assert broker.returncode == 0, broker.log_tail()
    assert time.monotonic() - started < grace_s
    # Moved before the broker left: the controller writes the new leader to ZooKeeper before
    # it answers ControlledShutdown (the brokers' metadata caches follow asynchronously).
    tp = KpoTopicPartition(TOPIC, 0)
    with KafkaZkClient(release.zk_connect, security=ZK_SECURITY) as zk:
        assert zk.get_partition_states([tp])[tp].leader_and_isr.leader == 1
