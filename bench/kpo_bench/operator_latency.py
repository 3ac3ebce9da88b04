"""``--only operator``: reconcile latency of one PartitionReassignment while 50 others move.

The operator must reconcile objects concurrently, so that one object's
slow Admin API calls (DescribeLogDirs over many partitions, a throttle sync) do not delay
another's. The benchmark starts ZooKeeper, three kpo brokers, etcd + kube-apiserver with
the project's CRDs and the operator as a process (``python -m kpo_operator``), all on
this machine. It creates topic ``load`` with ``background`` partitions on brokers [0, 1],
writes ``bytes_per_partition`` to each, and applies one PartitionReassignment per
partition moving it to [2, 1] at a replication throttle low enough that they all keep
moving for the whole measurement (KIP-73: the throttle is per broker and shared). Once
every background object has been submitted to Kafka, it applies ``probes`` probe objects
one after another, each moving an empty single-partition topic from [0, 1] to [2, 1]
unthrottled, and times, from ``kubectl apply`` returning:

- **first status**: until the object has a ``status.phase`` (its first reconcile step);
- **completed**: until ``status.phase`` is ``Completed``.

Both are polled through the API server every 50 ms, so they are upper bounds within
about 50 ms plus one ``kubectl get``. Nothing is compared with a target: the numbers are
printed (and written as JSON) to compare two versions of the operator on the same machine.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml
from kafka import KafkaProducer

from kpo_bench.admin import admin_session, create_topic, wait_for_brokers
from kpo_devenv.controlplane import ControlPlane
from kpo_devenv.kafka_cluster import KafkaCluster
from kpo_devenv.operator_process import OperatorProcess
from kpo_devenv.zookeeper import ZooKeeperServer

CRDS_DIR = Path(__file__).resolve().parents[2] / "crds"
NAMESPACE = "bench"
LOAD_TOPIC = "load"
RECORD_BYTES = 16 * 1024
POLL_S = 0.05


@dataclass
class OperatorLatency:
    """What one run measured; seconds.

    Attributes:
        background: Number of background objects applied before the probes.
        moving_before: How many of them were Moving when the first probe was applied.
        still_moving: How many of them were still Moving after the last probe.
        setup_s: From applying the background objects until all were submitted.
        first_status_s: Per probe, apply -> first ``status.phase``.
        completed_s: Per probe, apply -> ``Completed``.
    """

    background: int
    moving_before: int = 0
    still_moving: int = 0
    setup_s: float = 0.0
    first_status_s: list[float] = field(default_factory=list)
    completed_s: list[float] = field(default_factory=list)

    def summary(self) -> list[str]:
        """Return printable lines: median and max of each measure."""
        lines = [
            f"background objects: {self.background}, all submitted in {self.setup_s:.1f}s, "
            f"{self.moving_before} Moving at the first probe, "
            f"{self.still_moving} after the last"
        ]
        for name, values in (
            ("first status", self.first_status_s),
            ("completed", self.completed_s),
        ):
            if values:
                lines.append(
                    f"probe {name}: median {statistics.median(values):.2f}s, "
                    f"max {max(values):.2f}s over {len(values)} probes "
                    f"({', '.join(f'{v:.2f}' for v in values)})"
                )
        return lines


def _wait(probe: Callable[[], bool], timeout_s: float, what: str) -> float:
    """Poll ``probe`` every :data:`POLL_S` until true; return the seconds it took.

    Raises:
        TimeoutError: Still false after ``timeout_s``.
    """
    start = time.monotonic()
    while not probe():
        if time.monotonic() - start > timeout_s:
            raise TimeoutError(f"{what} not reached in {timeout_s}s")
        time.sleep(POLL_S)
    return time.monotonic() - start


def _reassignment(name: str, topic: str, partition: int, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kpo.dev/v1alpha1",
        "kind": "PartitionReassignment",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "partitions": [{"topic": topic, "partition": partition, "replicas": [2, 1]}],
            **spec,
        },
    }


class _Bench:
    def __init__(self, plane: ControlPlane, cluster: KafkaCluster) -> None:
        self.plane = plane
        self.cluster = cluster

    def apply(self, objects: list[dict[str, Any]]) -> None:
        text = yaml.safe_dump_all(objects)
        self.plane.kubectl("-n", NAMESPACE, "apply", "-f", "-", input_text=text)

    def statuses(self) -> dict[str, dict[str, Any]]:
        out = self.plane.kubectl("-n", NAMESPACE, "get", "partitionreassignments", "-o", "json")
        items = json.loads(out.stdout)["items"]
        return {i["metadata"]["name"]: i.get("status") or {} for i in items}

    def moving(self) -> int:
        """How many background objects are Moving."""
        found = self.statuses().items()
        return sum(s.get("phase") == "Moving" for n, s in found if n.startswith("load-"))

    def status(self, name: str) -> dict[str, Any]:
        out = self.plane.kubectl(
            "-n", NAMESPACE, "get", "partitionreassignments", name, "-o", "json"
        )
        status: dict[str, Any] = json.loads(out.stdout).get("status") or {}
        return status

    def probe(self, name: str) -> tuple[float, float]:
        """Apply probe ``name`` (topic ``name``); seconds to its first status and to Completed."""
        self.apply([_reassignment(name, name, 0)])
        begin = time.monotonic()
        _wait(lambda: bool(self.status(name).get("phase")), 600, f"{name} first status")
        first = time.monotonic() - begin
        _wait(lambda: self.status(name).get("phase") == "Completed", 600, f"{name} Completed")
        return first, time.monotonic() - begin

    def create_topics(self, topics: dict[str, int]) -> None:
        """Create each topic (name -> partition count) on brokers [0, 1], once all are up."""
        with admin_session(self.cluster.bootstrap_servers) as admin:
            wait_for_brokers(admin, set(self.cluster.brokers))
            for name, partitions in topics.items():
                create_topic(admin, name, assignment=[[0, 1]] * partitions)

    def produce(self, topic: str, partitions: int, bytes_per_partition: int) -> None:
        producer = KafkaProducer(
            bootstrap_servers=self.cluster.bootstrap_servers,
            acks="all",
            linger_ms=20,
            batch_size=512 * 1024,
            max_request_size=2 * 1024 * 1024,
        )
        try:
            value = b"x" * RECORD_BYTES
            for _ in range(max(1, bytes_per_partition // RECORD_BYTES)):
                for partition in range(partitions):
                    producer.send(topic, value, partition=partition)
            producer.flush(300)
        finally:
            producer.close()


def run_operator_latency(
    workdir: Path,
    background: int = 50,
    probes: int = 10,
    bytes_per_partition: int = 2 * 1024 * 1024,
    replication_rate: int = 1000,
    poll_interval_s: float = 1.0,
    operator_pythonpath: str | None = None,
) -> OperatorLatency:
    """Run the benchmark described in the module docstring.

    Args:
        workdir: Scratch folder (ZooKeeper, brokers, control plane, operator log).
        background: Number of throttled background objects, one partition each.
        probes: Number of probe objects, applied one after another.
        bytes_per_partition: Bytes written to each background partition.
        replication_rate: ``spec.throttle.replicationRate`` of the background objects, bytes/s.
        poll_interval_s: The operator's ``KPO_POLL_INTERVAL_S`` (its progress timer).
        operator_pythonpath: ``PYTHONPATH`` of the operator process (another version of
            it, for a before/after comparison); ``None``: this checkout's.

    Raises:
        TimeoutError: A stage did not finish in time.
    """
    result = OperatorLatency(background)
    zookeeper = ZooKeeperServer(workdir / "zookeeper")
    plane = ControlPlane(workdir / "control-plane", crds_dir=CRDS_DIR)
    cluster = KafkaCluster(workdir / "kafka", f"{zookeeper.connect_string}/bench", 3)
    operator: OperatorProcess | None = None
    zookeeper.start()
    try:
        plane.start()
        cluster.start()
        plane.kubectl("create", "namespace", NAMESPACE)
        bench = _Bench(plane, cluster)
        bench.create_topics({LOAD_TOPIC: background} | {f"probe-{i}": 1 for i in range(probes)})
        bench.produce(LOAD_TOPIC, background, bytes_per_partition)
        operator = OperatorProcess(
            workdir / "operator",
            plane.kubeconfig,
            cluster.bootstrap_servers,
            [NAMESPACE],
            poll_interval_s=poll_interval_s,
            env={"PYTHONPATH": operator_pythonpath} if operator_pythonpath else None,
        )
        operator.start()
        throttle = {"replicationRate": replication_rate}
        start = time.monotonic()
        bench.apply(
            [
                _reassignment(f"load-{p}", LOAD_TOPIC, p, throttle=throttle)
                for p in range(background)
            ]
        )

        def all_submitted() -> bool:
            found = bench.statuses()
            return len(found) == background and all(
                s.get("phase") == "Completed"
                or (
                    s.get("phase") == "Moving"
                    and s.get("partitions")
                    and all(e.get("state") != "Pending" for e in s["partitions"])
                )
                for s in found.values()
            )

        _wait(all_submitted, 1800, "every background object submitted")
        result.setup_s = time.monotonic() - start
        result.moving_before = bench.moving()
        for i in range(probes):
            first, done = bench.probe(f"probe-{i}")
            result.first_status_s.append(first)
            result.completed_s.append(done)
        result.still_moving = bench.moving()
    finally:
        if operator is not None:
            operator.stop(timeout_s=10)
            _drop_finalizers(plane)
        cluster.stop()
        plane.stop()
        zookeeper.stop()
    return result


def _drop_finalizers(plane: ControlPlane) -> None:
    """Let the objects go without an operator (the control plane is stopped next anyway)."""
    try:
        plane.drop_finalizers(NAMESPACE, ("partitionreassignments",))
    except subprocess.TimeoutExpired:
        return


def save(result: OperatorLatency, path: Path) -> None:
    """Write ``result`` as JSON to ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(asdict(result), indent=2) + "\n")
