"""The chart's broker pods, run as podman containers of the built image.

``helm template`` renders the chart; each broker pod of its StatefulSet runs here as the
kubelet would run it (see :mod:`tests.integration.containers.pod_containers`): the init
container writes ``server.properties`` with the rack, then the broker container starts
with the rendered command, environment, mounts, security context (uid 10001, read-only
root filesystem, no capabilities) and becomes ready by its readiness probe, against the
session's real ZooKeeper. A broker killed with ``podman kill`` and started again on the
same volume rejoins the ISR with its data; ``podman stop`` (SIGTERM, as the kubelet sends
it) is a controlled shutdown within the chart's ``terminationGracePeriodSeconds``. The
placement CronJob's pod runs its plan (local Spark) in the placement image against them.
"""

from __future__ import annotations

import random
import socket
import subprocess
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

from kpo_broker.zk.client import KafkaZkClient
from kpo_devenv.net import LOOPBACK, free_port
from kpo_devenv.runner import ContainerProcess, ContainerRunner
from kpo_devenv.zookeeper import ZooKeeperServer
from kpo_kafka.topic_partition import TopicPartition as KpoTopicPartition
from tests.integration.broker.conftest import wait_for
from tests.integration.charts.local_pods import LocalPod, Manifest, statefulset_pod
from tests.integration.containers import pod_containers as pc
from tests.integration.containers.conftest import IMAGES
from tests.unit.charts.helm import CHART, helm

pytestmark = [pytest.mark.integration, pytest.mark.timeout(3000)]

NAMESPACE = "kpo-containers"
RACKS = ["rack-a", "rack-b", "rack-c"]
METRICS_PORT = 9404


@dataclass
class Fleet:
    """The broker pods of the rendered chart, each running in a container."""

    statefulset: Manifest
    pods: list[LocalPod]
    containers: list[ContainerProcess]
    ports: list[dict[int, int]]
    init_output: list[str]
    label: str
    zk_connect: str
    objects: list[Manifest]
    root: Path

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{LOOPBACK}:{p[self.kafka_port]}" for p in self.ports)

    @property
    def kafka_port(self) -> int:
        (port,) = [p["containerPort"] for p in self.main(0)["ports"] if p["name"] == "kafka"]
        return int(port)

    def main(self, ordinal: int) -> Manifest:
        return pc.main_container(self.pods[ordinal])

    def start(self, ordinal: int) -> ContainerProcess:
        """Start (or start again) the broker container of pod ``ordinal``; wait for readiness."""
        process = pc.container_process(self.pods[ordinal], self.label)
        process.start()
        main = self.main(ordinal)
        pc.wait_probe(main["readinessProbe"], main, self.ports[ordinal], process)
        if ordinal < len(self.containers):
            self.containers[ordinal] = process
        else:
            self.containers.append(process)
        return process

    @property
    def grace_s(self) -> int:
        return int(self.statefulset["spec"]["template"]["spec"]["terminationGracePeriodSeconds"])

    def data(self, ordinal: int) -> Path:
        """The broker's claim (``/var/lib/kafka`` in the container) on the host."""
        return self.pods[ordinal].paths["/var/lib/kafka"]


def _image_values(image: str) -> dict[str, str]:
    repository, tag = image.rsplit(":", 1)
    return {"repository": repository, "tag": tag}


def _metrics_url_template() -> str:
    """``http://127.0.0.1:<a><id><b>/metrics`` with ports free for broker ids 0..2.

    Pods share the host network here, so each broker's metrics port must differ, and the
    placement job finds them through the chart's ``placement.metricsUrlTemplate``.
    """
    while True:
        a, b = random.randint(20, 59), random.randint(10, 99)
        ports = [int(f"{a}{i}{b}") for i in range(3)]
        if all(_bindable(port) for port in ports):
            return f"http://{LOOPBACK}:{a}{{id}}{b}/metrics"


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind((LOOPBACK, port))
        except OSError:
            return False
    return True


def _render(
    zk_connect: str, root: Path, images: dict[str, str], bootstrap: str, template: str
) -> list[Manifest]:
    values = {
        "zookeeper": {"enabled": False, "externalConnect": zk_connect},
        # The secured pods (certificates, SCRAM users, ZooKeeper SASL) run in
        # tests/integration/charts/test_chart_processes.py; here the images and the pods'
        # container settings are under test, on the development switch.
        "security": {"plaintext": True},
        "operator": {"bootstrapServers": bootstrap},
        "broker": {
            "replicas": 3,
            "rack": {"source": "static", "racks": RACKS},
            "terminationGracePeriodSeconds": 60,
        },
        "metrics": {"port": METRICS_PORT},
        "image": _image_values(images["kpo"]),
        "placement": {
            "image": _image_values(images["placement"]),
            "metricsUrlTemplate": template,
            "sparkMaster": "local[1]",
        },
    }
    path = root / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    done = helm("template", "kpo", str(CHART), "--namespace", NAMESPACE, "-f", str(path))
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


@pytest.fixture(scope="module")
def fleet(
    images: dict[str, str], zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Fleet]:
    """The rendered broker StatefulSet's three pods running in containers."""
    root = tmp_path_factory.mktemp("chart-containers")
    zk_connect = f"{zookeeper.connect_string}/containers-{uuid.uuid4().hex[:8]}"
    ports = [free_port() for _ in range(3)]
    bootstrap = ",".join(f"{LOOPBACK}:{port}" for port in ports)
    template = _metrics_url_template()
    objects = _render(zk_connect, root, images, bootstrap, template)
    (statefulset,) = [o for o in objects if o["kind"] == "StatefulSet"]
    label = f"kpo-chart-{uuid.uuid4().hex[:6]}"
    cleanup = ContainerRunner(images={}, prefix=label)
    fleet = Fleet(statefulset, [], [], [], [], label, zk_connect, objects, root)
    try:
        for ordinal, port in enumerate(ports):
            metrics = int(template.split(":")[2].split("/")[0].replace("{id}", str(ordinal)))
            listener = f"PLAINTEXT://{LOOPBACK}:{port}"
            pod = statefulset_pod(
                statefulset,
                ordinal,
                objects,
                root,
                NAMESPACE,
                overrides={
                    "KAFKA_LISTENERS": listener,
                    "KAFKA_ADVERTISED_LISTENERS": listener,
                    "KAFKA_METRICS_PORT": str(metrics),
                },
                in_place=True,
            )
            fleet.pods.append(pod)
            kafka_port = next(
                p["containerPort"] for p in pc.main_container(pod)["ports"] if p["name"] == "kafka"
            )
            fleet.ports.append({kafka_port: port, METRICS_PORT: metrics})
            fleet.init_output += pc.run_init_containers(pod, label)
            fleet.start(ordinal)
        wait_for(lambda: len(_cluster(fleet)["brokers"]) == 3, 90, "3 brokers registered")
        yield fleet
    finally:
        for process in fleet.containers:
            process.stop(timeout_s=30)
        cleanup.remove_all()


def _admin(fleet: Fleet) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=fleet.bootstrap, request_timeout_ms=10000)


def _cluster(fleet: Fleet) -> dict[str, Any]:
    admin = _admin(fleet)
    try:
        return dict(admin.describe_cluster())
    finally:
        admin.close()


def _partition(fleet: Fleet, topic: str, partition: int) -> dict[str, Any]:
    admin = _admin(fleet)
    try:
        (described,) = admin.describe_topics([topic])
    finally:
        admin.close()
    (found,) = [p for p in described["partitions"] if p["partition_index"] == partition]
    return dict(found)


def _create(fleet: Fleet, topic: str, replicas: list[int]) -> None:
    admin = _admin(fleet)
    try:
        admin.create_topics([NewTopic(topic, replica_assignments={0: replicas})])
    finally:
        admin.close()
    wait_for(lambda: _partition(fleet, topic, 0)["leader_id"] == replicas[0], 60, "a leader")


def _produce(fleet: Fleet, topic: str, values: list[bytes]) -> None:
    producer = KafkaProducer(bootstrap_servers=fleet.bootstrap, acks="all", linger_ms=10)
    try:
        for value in values:
            producer.send(topic, value, partition=0)
        producer.flush(60)
    finally:
        producer.close(timeout=10)


def _meta_properties(fleet: Fleet, ordinal: int) -> dict[str, str]:
    text = (fleet.data(ordinal) / "data" / "meta.properties").read_text()
    pairs = [line.split("=", 1) for line in text.splitlines() if "=" in line]
    return {k.strip(): v.strip() for k, v in pairs if not k.startswith("#")}


def test_broker_containers_run_as_the_chart_renders_them(fleet: Fleet) -> None:
    assert fleet.init_output == [f"broker.rack={rack}\n" for rack in RACKS]
    brokers = {b["broker_id"]: b["rack"] for b in _cluster(fleet)["brokers"]}
    assert brokers == {0: "rack-a", 1: "rack-b", 2: "rack-c"}
    process = fleet.containers[0]
    config = pc.inspect(process.container)
    assert config["Config"]["User"] == "10001:10001"
    assert config["HostConfig"]["ReadonlyRootfs"] is True
    assert config["Config"]["Image"].endswith(fleet.main(0)["image"]) or fleet.main(0)[
        "image"
    ] in str(config["ImageName"])
    # The root filesystem refuses writes; the chart's volumes take them.
    write = subprocess.run(
        ["podman", "exec", process.container, "python", "-c", "open('/opt/kpo/x', 'w')"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert write.returncode != 0 and "Read-only file system" in write.stderr, write.stderr
    who = subprocess.run(
        ["podman", "exec", process.container, "id", "-u"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert who.stdout.strip() == "10001"
    assert (fleet.data(0) / "data").is_dir()  # log.dirs as rendered, on the claim's volume
    assert _meta_properties(fleet, 0)["broker.id"] == "0"
    liveness = fleet.main(0)["livenessProbe"]
    assert pc.probe_passes(liveness, fleet.main(0), fleet.ports[0], process)


def test_killed_broker_container_rejoins_the_isr_with_its_data(fleet: Fleet) -> None:
    topic = "kill-restart"
    _create(fleet, topic, [0, 1, 2])
    first = [b"before-%05d" % i * 64 for i in range(300)]
    _produce(fleet, topic, first)
    meta_before = _meta_properties(fleet, 1)
    assert meta_before["broker.id"] == "1"
    fleet.containers[1].kill()
    assert not fleet.containers[1].is_running()
    wait_for(lambda: 1 not in _partition(fleet, topic, 0)["isr_nodes"], 60, "broker 1 out of ISR")
    second = [b"during-%05d" % i * 64 for i in range(300)]
    _produce(fleet, topic, second)
    fleet.start(1)  # a new container on the same volume
    wait_for(
        lambda: sorted(_partition(fleet, topic, 0)["isr_nodes"]) == [0, 1, 2],
        120,
        "broker 1 back in the ISR",
    )
    assert _meta_properties(fleet, 1) == meta_before
    segments = list((fleet.data(1) / "data" / f"{topic}-0").glob("*.log"))
    assert sum(s.stat().st_size for s in segments) >= sum(map(len, first + second))
    consumer = KafkaConsumer(
        bootstrap_servers=fleet.bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=10000
    )
    try:
        consumer.assign([TopicPartition(topic, 0)])
        read = [m.value for m in consumer]
    finally:
        consumer.close()
    assert read == first + second


def test_placement_cronjob_pod_plans_in_its_image(fleet: Fleet) -> None:
    _create(fleet, "placement-input", [0, 1])
    _produce(fleet, "placement-input", [b"x" * 1024] * 200)
    (cronjob,) = [o for o in fleet.objects if o["kind"] == "CronJob"]
    template = cronjob["spec"]["jobTemplate"]["spec"]["template"]
    pod = LocalPod(
        "placement",
        template["spec"],
        fleet.objects,
        fleet.root / "placement",
        labels=template["metadata"].get("labels", {}),
        namespace=NAMESPACE,
        in_place=True,
    )
    container = pc.main_container(pod)
    assert container["image"] == IMAGES["placement"]  # the placement image, not the broker's
    done = subprocess.run(
        pc.run_argv(pod, container, f"{fleet.label}-placement", fleet.label),
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert "written under /tmp/kpo-plan" in done.stderr, done.stderr[-2000:]
    written = pod.paths["/tmp"] / "kpo-plan"
    assert (written / "snapshot").is_dir(), sorted(p.name for p in written.iterdir())


def test_podman_stop_is_a_controlled_shutdown_within_the_grace_period(fleet: Fleet) -> None:
    topic = "stop-moves-leader"
    _create(fleet, topic, [2, 1])
    process = fleet.containers[2]
    started = time.monotonic()
    process.stop()  # podman stop -t terminationGracePeriodSeconds: SIGTERM, SIGKILL after it
    elapsed = time.monotonic() - started
    assert process.returncode == 0, process.log_tail()
    assert elapsed < fleet.grace_s, f"stopped in {elapsed:.1f} s, grace {fleet.grace_s} s"
    assert "controlled shutdown succeeded" in process.log_path.read_text()
    tp = KpoTopicPartition(topic, 0)
    with KafkaZkClient(fleet.zk_connect) as zk:
        assert zk.get_partition_states([tp])[tp].leader_and_isr.leader == 1
