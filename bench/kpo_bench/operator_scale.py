"""``--only operator-scale``: the operator with many PartitionReassignments on one cluster.

The operator at scale. One run starts ZooKeeper, three kpo brokers (with
``metrics.port``), etcd + kube-apiserver with the CRDs and the operator as a process
(``python -m kpo_operator``, ``KPO_POLL_INTERVAL_S`` = ``poll_interval_s``, metrics on
``KPO_METRICS_PORT``). It creates ``objects x partitions`` partitions on brokers [0, 1]
(topics of at most 100 partitions), writes ``bytes_per_partition`` to each, then applies
``objects`` PartitionReassignments at once (one ``kubectl apply``), each moving its
``partitions`` partitions to [2, 1] at ``replicationRate`` = ``replication_rate`` (the
brokers' shared throttle, KIP-73; the bytes are sized so that the moves last about
:data:`MOVE_S` seconds, so every object keeps moving), and measures:

- **apply -> Submitted**, per object: from ``kubectl apply`` returning until the object's
  status is Moving with no Pending partition (every partition handed to Kafka), seen
  through a watch on the objects (median, 95th percentile, max);
- during a ``window_s`` window once all are submitted and moving:
  **kube-apiserver requests/s** (``apiserver_request_total`` of kube-apiserver's
  ``/metrics``, every client; the bench itself only holds its watch open), **Kafka Admin
  requests/s** as the brokers counted them (``kafka_network_requestmetrics_requests_total``
  of the Admin API requests the operator sends: Metadata, DescribeCluster,
  ListPartitionReassignments, DescribeLogDirs, DescribeConfigs, ...), and, when the
  operator serves them, its own counters (:mod:`kpo_operator.metrics`) and the time
  between two steps of one object (``kpo_operator_step_interval_seconds``: how often a
  status is refreshed, against the poll interval);
- **operator CPU per step**: the process's user + system CPU seconds in the window
  (``/proc/<pid>/stat``) over the reconcile steps it took in the window (the count of
  ``kpo_operator_reconcile_seconds``), and the load average at the window's start and end
  (the machine is shared: CPU per step says more than wall time);
- **status age per object**: seen through the watch, the longest time in the window during
  which an object's status did not change (a gap between two changes, or from the last
  change to the window's end): the largest over the objects and their 95th percentile;
- **CPU of the other parts** in the window: kube-apiserver, etcd and each broker (CPU
  seconds per second, ``/proc/<pid>/stat``): on a 2-core machine they share the cores with
  the operator, and a starved API server bounds how many statuses a second it writes;
- **operator RSS** (``VmRSS`` of the process, the largest seen) ;
- **one object's latency with the others moving**: a probe object (one empty partition,
  unthrottled) applied in the window: apply -> first ``status.phase`` and -> Completed.

``profile`` records the operator with py-spy during the window (collapsed stacks in
``WORKDIR/operator-profile.txt``; py-spy must be installed beside the interpreter or on
``PATH``). ``operator_pythonpath`` runs another version of the operator (e.g. an older checkout's
``operator`` and ``kafka-client`` folders) for a before/after comparison on one machine.
Nothing is compared with a target; the JSON goes to ``WORKDIR/operator-scale.json``.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml
from kafka import KafkaProducer
from prometheus_client.parser import text_string_to_metric_families

from kpo_bench.admin import admin_session, create_topic, wait_for_brokers
from kpo_bench.machine import process_cpu_seconds
from kpo_bench.operator_latency import CRDS_DIR, NAMESPACE
from kpo_devenv.controlplane import ControlPlane
from kpo_devenv.kafka_cluster import KafkaCluster
from kpo_devenv.net import free_port
from kpo_devenv.operator_process import OperatorProcess
from kpo_devenv.zookeeper import ZooKeeperServer

#: The Admin API requests the operator sends (Kafka's request names, as the brokers count).
ADMIN_REQUESTS = (
    "Metadata",
    "DescribeCluster",
    "ListPartitionReassignments",
    "AlterPartitionReassignments",
    "DescribeLogDirs",
    "DescribeConfigs",
    "IncrementalAlterConfigs",
    "AlterReplicaLogDirs",
    "ElectLeaders",
)
TOPIC_PARTITIONS = 100
#: The moves are sized to last this long at the throttle (setup plus the window, and more).
MOVE_S = 400
#: Replica fetches of at most 64 KiB: the throttle is checked before each fetch (KIP-73), so
#: a 10 MiB fetch (Kafka's default response size) would copy minutes' worth of 64 KiB/s.
SMALL_FETCHES = {"replica.fetch.max.bytes": "16384", "replica.fetch.response.max.bytes": "65536"}
POLL_S = 0.2


@dataclass
class OperatorScale:
    """What one run measured (seconds, requests per second, bytes).

    Attributes:
        objects: PartitionReassignments applied at once.
        partitions: Partitions per object.
        poll_interval_s: The operator's poll interval.
        operator: ``this checkout`` or the ``operator_pythonpath`` it ran from.
        submitted_s: Per object, ``kubectl apply`` -> every partition submitted.
        window_s: Length of the steady-state window.
        moving: Objects Moving at the end of the window.
        apiserver_rps: kube-apiserver requests/s in the window (every client), by resource.
        admin_rps: Admin API requests/s the brokers received in the window, by request.
        operator_counters: The operator's own counters in the window (if served), per s.
        step_interval: Quantiles of the operator's time between two steps of one object.
        rss_bytes: Largest operator RSS seen.
        steps: Reconcile steps of PartitionReassignments in the window.
        cpu_s: Operator CPU seconds (user + system) in the window.
        load_average: 1-minute load average at the window's start and end.
        component_cpu: CPU seconds per second in the window of kube-apiserver, etcd and
            each broker (``broker-<id>``).
        status_age_s: Per object, the longest the status stayed unchanged in the window.
        within_poll: Share of the window's step intervals at most 1.25 x the poll interval.
        probe_first_status_s: Probe: apply -> first status.
        probe_completed_s: Probe: apply -> Completed.
    """

    objects: int
    partitions: int
    poll_interval_s: float
    operator: str
    submitted_s: list[float] = field(default_factory=list)
    window_s: float = 0.0
    moving: int = 0
    apiserver_rps: dict[str, float] = field(default_factory=dict)
    admin_rps: dict[str, float] = field(default_factory=dict)
    operator_counters: dict[str, float] = field(default_factory=dict)
    step_interval: dict[str, float] = field(default_factory=dict)
    rss_bytes: int = 0
    steps: float = 0.0
    cpu_s: float = 0.0
    load_average: list[float] = field(default_factory=list)
    component_cpu: dict[str, float] = field(default_factory=dict)
    status_age_s: dict[str, float] = field(default_factory=dict)
    within_poll: float | None = None
    probe_first_status_s: float | None = None
    probe_completed_s: float | None = None

    def summary(self) -> list[str]:
        """Return printable lines."""
        lines = [
            f"operator: {self.operator}; {self.objects} objects x {self.partitions} partitions, "
            f"poll interval {self.poll_interval_s:g} s"
        ]
        if self.submitted_s:
            ordered = sorted(self.submitted_s)
            p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
            lines.append(
                f"apply -> Submitted: median {statistics.median(ordered):.1f} s, "
                f"p95 {p95:.1f} s, max {ordered[-1]:.1f} s ({len(ordered)} objects)"
            )
        total_api = sum(self.apiserver_rps.values())
        total_admin = sum(self.admin_rps.values())
        lines.append(
            f"window {self.window_s:.0f} s, {self.moving} objects Moving at its end: "
            f"kube-apiserver {total_api:.1f} req/s, Kafka Admin {total_admin:.1f} req/s "
            f"({total_admin / max(self.objects, 1) * self.poll_interval_s:.2f} per object "
            "per poll interval)"
        )
        lines.append(
            "  apiserver by resource: "
            + ", ".join(f"{k} {v:.1f}" for k, v in sorted(self.apiserver_rps.items()) if v)
        )
        lines.append(
            "  Admin by request: "
            + ", ".join(f"{k} {v:.1f}" for k, v in sorted(self.admin_rps.items()) if v)
        )
        if self.step_interval:
            lines.append(
                "  step interval of one object: "
                + ", ".join(f"{k} {v:.2f} s" for k, v in self.step_interval.items())
                + (
                    f"; {self.within_poll:.0%} within 1.25 x the poll interval"
                    if self.within_poll is not None
                    else ""
                )
            )
        if self.steps:
            lines.append(
                f"  operator: {self.steps / max(self.window_s, 1e-9):.1f} steps/s, "
                f"{self.cpu_s / max(self.window_s, 1e-9):.2f} CPU s/s, "
                f"{self.cpu_s / self.steps * 1000:.1f} ms CPU per step; load average "
                + " -> ".join(f"{x:.1f}" for x in self.load_average)
            )
        if self.component_cpu:
            lines.append(
                "  CPU s/s of the other parts: "
                + ", ".join(f"{k} {v:.2f}" for k, v in self.component_cpu.items())
            )
        if self.status_age_s:
            ages = sorted(self.status_age_s.values())
            p95 = ages[min(len(ages) - 1, int(0.95 * len(ages)))]
            lines.append(
                f"  status unchanged at most, per object: median {statistics.median(ages):.1f} s, "
                f"p95 {p95:.1f} s, max {ages[-1]:.1f} s"
            )
        lines.append(f"operator RSS: {self.rss_bytes / 2**20:.0f} MiB")
        if self.probe_first_status_s is not None:
            done = self.probe_completed_s
            lines.append(
                f"probe with {self.objects} others moving: first status "
                f"{self.probe_first_status_s:.2f} s, Completed "
                + (f"{done:.2f} s" if done is not None else "not within the window")
            )
        return lines


class _Watch:
    """A watch on the namespace's PartitionReassignments, recording when each is submitted."""

    def __init__(self, kubeconfig: Path) -> None:
        from kubernetes import client, config, watch

        self._api = client.CustomObjectsApi(
            config.new_client_from_config(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]
        )
        self._watch = watch.Watch()  # type: ignore[no-untyped-call]
        self.statuses: dict[str, dict[str, Any]] = {}
        self.submitted_at: dict[str, float] = {}
        self.first_status_at: dict[str, float] = {}
        self.changed_at: dict[str, list[float]] = {}
        self._thread = threading.Thread(target=self._run, name="pr-watch", daemon=True)
        self._stopped = False

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopped = True
        self._watch.stop()  # type: ignore[no-untyped-call]

    def _run(self) -> None:
        while not self._stopped:
            try:
                for event in self._watch.stream(  # type: ignore[no-untyped-call]
                    self._api.list_namespaced_custom_object,
                    "kpo.dev",
                    "v1alpha1",
                    NAMESPACE,
                    "partitionreassignments",
                    timeout_seconds=300,
                ):
                    self._seen(event["object"], time.monotonic())
                    if self._stopped:
                        return
            except Exception:  # a dropped watch: start again
                time.sleep(0.5)

    def _seen(self, obj: dict[str, Any], at: float) -> None:
        name = obj["metadata"]["name"]
        status = obj.get("status") or {}
        if status and status != self.statuses.get(name):
            self.changed_at.setdefault(name, []).append(at)
        self.statuses[name] = status
        if status.get("phase") and name not in self.first_status_at:
            self.first_status_at[name] = at
        if name not in self.submitted_at and _submitted(status):
            self.submitted_at[name] = at


def _submitted(status: dict[str, Any]) -> bool:
    phase = status.get("phase")
    if phase == "Completed":
        return True
    entries = status.get("partitions") or []
    return phase == "Moving" and bool(entries) and all(e.get("state") != "Pending" for e in entries)


def _metrics(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def _scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        body: bytes = response.read()
    return body.decode()


def _sum_by(
    before: dict[tuple[str, tuple[tuple[str, str], ...]], float],
    after: dict[tuple[str, tuple[tuple[str, str], ...]], float],
    name: str,
    label: str,
    keep: Callable[[dict[str, str]], bool] = lambda _: True,
) -> dict[str, float]:
    """Sum ``after - before`` of samples ``name`` grouped by ``label``."""
    out: dict[str, float] = {}
    for (sample, labels), value in after.items():
        if sample != name:
            continue
        found = dict(labels)
        if not keep(found):
            continue
        key = found.get(label, "")
        out[key] = out.get(key, 0.0) + value - before.get((sample, labels), 0.0)
    return out


def _rss_bytes(pid: int | None) -> int:
    if pid is None:
        return 0
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return 0
    return 0


def _status_ages(
    changes: dict[str, list[float]], names: Iterable[str], began: float, ended: float
) -> dict[str, float]:
    """Per object, the longest span in ``[began, ended]`` without a status change.

    ``changes``: object -> monotonic times its status changed (as the watch saw them).
    """
    ages: dict[str, float] = {}
    for name in names:
        times = [t for t in changes.get(name, []) if began <= t <= ended]
        before = [t for t in changes.get(name, []) if t < began]
        marks = [before[-1] if before else began, *times, ended]
        ages[name] = max(b - a for a, b in itertools.pairwise(marks))
    return ages


def _within(buckets: dict[float, float], limit: float) -> float | None:
    """Share of a cumulative histogram's observations at most ``limit`` (its largest bucket)."""
    total = buckets.get(float("inf"), 0.0)
    fitting = [n for le, n in buckets.items() if le <= limit]
    if total <= 0 or not fitting:
        return None
    return max(fitting) / total


def _py_spy() -> str | None:
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.exists() else shutil.which("py-spy")


def _reassignment(name: str, parts: Iterable[tuple[str, int]], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kpo.dev/v1alpha1",
        "kind": "PartitionReassignment",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "partitions": [{"topic": t, "partition": p, "replicas": [2, 1]} for t, p in parts],
            **spec,
        },
    }


def _layout(objects: int, partitions: int) -> list[list[tuple[str, int]]]:
    """Partitions of each object: consecutive runs over topics of 100 partitions."""
    flat = [
        (f"scale-{i // TOPIC_PARTITIONS}", i % TOPIC_PARTITIONS)
        for i in range(objects * partitions)
    ]
    return [flat[o * partitions : (o + 1) * partitions] for o in range(objects)]


def _quantiles(buckets: dict[float, float]) -> dict[str, float]:
    """p50/p95/max-bucket of a cumulative histogram (upper bounds -> counts)."""
    total = buckets.get(float("inf"), 0.0)
    if total <= 0:
        return {}
    out: dict[str, float] = {"count": total}
    for name, q in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99)):
        out[name] = next(le for le, n in sorted(buckets.items()) if n >= q * total)
    return out


def run_operator_scale(
    workdir: Path,
    objects: int = 200,
    partitions: int = 10,
    bytes_per_partition: int | None = None,
    replication_rate: int = 64 * 1024,
    poll_interval_s: float = 1.0,
    window_s: float = 30.0,
    operator_pythonpath: str | None = None,
    profile: bool = False,
) -> OperatorScale:
    """Run the benchmark described in the module docstring.

    Args:
        workdir: Scratch folder.
        objects: PartitionReassignments applied at once.
        partitions: Partitions per object (the CRD allows up to 2,000).
        bytes_per_partition: Bytes written to each partition before the moves (default:
            enough for :data:`MOVE_S` seconds at ``replication_rate``, at least 16 KiB).
        replication_rate: ``spec.throttle.replicationRate``, bytes/s (shared per broker).
        poll_interval_s: ``KPO_POLL_INTERVAL_S``.
        window_s: Length of the steady-state window, s.
        operator_pythonpath: ``PYTHONPATH`` for the operator process (another version).
        profile: Record the operator with py-spy during the window.

    Raises:
        TimeoutError: The objects were not all submitted within 30 minutes.
        FileNotFoundError: ``profile`` without py-spy.
    """
    result = OperatorScale(
        objects, partitions, poll_interval_s, operator_pythonpath or "this checkout"
    )
    layout = _layout(objects, partitions)
    if bytes_per_partition is None:
        bytes_per_partition = max(16 * 1024, replication_rate * MOVE_S // (objects * partitions))
    topics = sorted({t for parts in layout for t, _ in parts})
    zookeeper = ZooKeeperServer(workdir / "zookeeper")
    plane = ControlPlane(workdir / "control-plane", crds_dir=CRDS_DIR)
    cluster = KafkaCluster(
        workdir / "kafka",
        f"{zookeeper.connect_string}/scale",
        3,
        properties=SMALL_FETCHES,
        metrics=True,
    )
    operator: OperatorProcess | None = None
    watch: _Watch | None = None
    zookeeper.start()
    try:
        plane.start()
        cluster.start()
        plane.kubectl("create", "namespace", NAMESPACE)
        with admin_session(cluster.bootstrap_servers) as admin:
            wait_for_brokers(admin, set(cluster.brokers))
            for topic in topics:
                count = sum(1 for parts in layout for t, _ in parts if t == topic)
                create_topic(admin, topic, assignment=[[0, 1]] * count)
            create_topic(admin, "scale-probe", assignment=[[0, 1]])
        _produce(cluster.bootstrap_servers, layout, bytes_per_partition)
        metrics_port = free_port()
        env = {"KPO_METRICS_PORT": str(metrics_port)}
        if operator_pythonpath:
            env["PYTHONPATH"] = operator_pythonpath
        operator = OperatorProcess(
            workdir / "operator",
            plane.kubeconfig,
            cluster.bootstrap_servers,
            [NAMESPACE],
            poll_interval_s=poll_interval_s,
            env=env,
        )
        operator.start()
        watch = _Watch(plane.kubeconfig)
        watch.start()
        throttle = {"replicationRate": replication_rate}
        documents = [
            _reassignment(f"scale-{o}", parts, throttle=throttle) for o, parts in enumerate(layout)
        ]
        plane.kubectl("-n", NAMESPACE, "apply", "-f", "-", input_text=yaml.safe_dump_all(documents))
        applied = time.monotonic()
        names = [d["metadata"]["name"] for d in documents]
        deadline = applied + 1800
        while len([n for n in names if n in watch.submitted_at]) < len(names):
            result.rss_bytes = max(result.rss_bytes, _rss_bytes(operator.process.pid))
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{len(watch.submitted_at)} of {len(names)} objects submitted in 30 min"
                )
            time.sleep(POLL_S)
        result.submitted_s = [watch.submitted_at[n] - applied for n in names]
        spy = _py_spy() if profile else None
        if profile and spy is None:
            raise FileNotFoundError("py-spy is not installed")
        _window(
            result,
            plane,
            cluster,
            operator,
            watch,
            metrics_port,
            window_s,
            profile_to=(spy, workdir / "operator-profile.txt") if spy else None,
        )
    finally:
        if watch is not None:
            watch.stop()
        if operator is not None:
            operator.stop(timeout_s=10)
            with contextlib.suppress(Exception):  # the control plane is stopped next anyway
                plane.drop_finalizers(NAMESPACE, ("partitionreassignments",))
        cluster.stop()
        plane.stop()
        zookeeper.stop()
    return result


def _scrape_all(
    plane: ControlPlane, cluster: KafkaCluster, metrics_port: int
) -> tuple[dict[Any, float], dict[Any, float], dict[Any, float]]:
    api = _metrics(plane.apiserver.get("/metrics", timeout_s=20).decode())
    brokers: dict[Any, float] = {}
    for broker in cluster.brokers.values():
        for key, value in _metrics(
            _scrape(f"http://127.0.0.1:{broker.metrics_port}/metrics")
        ).items():
            brokers[key] = brokers.get(key, 0.0) + value
    try:
        own = _metrics(_scrape(f"http://127.0.0.1:{metrics_port}/metrics"))
    except OSError:  # an operator version without metrics
        own = {}
    return api, brokers, own


def _window(
    result: OperatorScale,
    plane: ControlPlane,
    cluster: KafkaCluster,
    operator: OperatorProcess,
    watch: _Watch,
    metrics_port: int,
    window_s: float,
    profile_to: tuple[str, Path] | None = None,
) -> None:
    """Measure the steady-state window and the probe inside it (and profile it)."""
    pid = operator.process.pid
    parts = {"kube-apiserver": plane.apiserver.process.pid, "etcd": plane.etcd.process.pid}
    parts.update({f"broker-{b}": broker.process.pid for b, broker in cluster.brokers.items()})
    spy: subprocess.Popen[bytes] | None = None
    if profile_to is not None:
        command = [profile_to[0], "record", "--pid", str(pid), "--format", "raw", "--rate", "50"]
        command += ["--duration", str(int(window_s)), "--output", str(profile_to[1])]
        spy = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    api0, brokers0, own0 = _scrape_all(plane, cluster, metrics_port)
    began = time.monotonic()
    cpu0 = process_cpu_seconds(pid)
    parts0 = {name: process_cpu_seconds(p) for name, p in parts.items()}
    result.load_average = [os.getloadavg()[0]]
    probe = _reassignment("scale-probe", [("scale-probe", 0)])
    plane.kubectl("-n", NAMESPACE, "apply", "-f", "-", input_text=yaml.safe_dump_all([probe]))
    probe_applied = time.monotonic()
    while time.monotonic() - began < window_s:
        result.rss_bytes = max(result.rss_bytes, _rss_bytes(operator.process.pid))
        if result.probe_first_status_s is None and "scale-probe" in watch.first_status_at:
            result.probe_first_status_s = watch.first_status_at["scale-probe"] - probe_applied
        status = watch.statuses.get("scale-probe") or {}
        if result.probe_completed_s is None and status.get("phase") == "Completed":
            result.probe_completed_s = time.monotonic() - probe_applied
        time.sleep(POLL_S)
    cpu1 = process_cpu_seconds(pid)
    parts1 = {name: process_cpu_seconds(p) for name, p in parts.items()}
    ended = time.monotonic()
    api1, brokers1, own1 = _scrape_all(plane, cluster, metrics_port)
    result.load_average.append(os.getloadavg()[0])
    result.cpu_s = cpu1 - cpu0
    names = [n for n in watch.statuses if n != "scale-probe"]
    result.status_age_s = _status_ages(watch.changed_at, names, began, ended)
    if spy is not None:
        try:
            spy.wait(timeout=60)
        except subprocess.TimeoutExpired:
            spy.kill()
            spy.wait()
    elapsed = ended - began
    result.window_s = elapsed
    result.component_cpu = {n: (parts1[n] - parts0[n]) / elapsed for n in parts}
    result.moving = sum(
        1 for n, s in watch.statuses.items() if n != "scale-probe" and s.get("phase") == "Moving"
    )
    per_s = 1.0 / elapsed

    def rate(values: dict[str, float]) -> dict[str, float]:
        return {k: v * per_s for k, v in values.items() if v}

    result.apiserver_rps = rate(_sum_by(api0, api1, "apiserver_request_total", "resource"))
    result.admin_rps = rate(
        _sum_by(
            brokers0,
            brokers1,
            "kafka_network_requestmetrics_requests_total",
            "request",
            lambda labels: labels.get("request") in ADMIN_REQUESTS,
        )
    )
    counters = _sum_by(own0, own1, "kpo_operator_kafka_admin_requests_total", "api")
    counters.update(
        {
            f"kube {k}": v
            for k, v in _sum_by(
                own0, own1, "kpo_operator_kube_api_requests_total", "resource"
            ).items()
        }
    )
    counters.update(
        {
            f"cluster reads {k}": v
            for k, v in _sum_by(own0, own1, "kpo_operator_cluster_reads_total", "source").items()
        }
    )
    result.operator_counters = rate(counters)

    def pr_buckets(name: str) -> dict[float, float]:
        return {
            float(dict(labels)["le"]): value - own0.get((sample, labels), 0.0)
            for (sample, labels), value in own1.items()
            if sample == name and dict(labels).get("kind") == "partitionreassignments"
        }

    buckets = pr_buckets("kpo_operator_step_interval_seconds_bucket")
    result.step_interval = _quantiles(buckets)  # the window's intervals only
    result.within_poll = _within(buckets, 1.25 * result.poll_interval_s)
    result.steps = pr_buckets("kpo_operator_reconcile_seconds_bucket").get(float("inf"), 0.0)


def _produce(bootstrap: str, layout: list[list[tuple[str, int]]], bytes_per_partition: int) -> None:
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        acks=1,
        linger_ms=50,
        batch_size=256 * 1024,
        max_request_size=4 * 1024 * 1024,
    )
    try:
        value = b"x" * min(bytes_per_partition, 16 * 1024)
        for parts in layout:
            for topic, partition in parts:
                for _ in range(max(1, bytes_per_partition // len(value))):
                    producer.send(topic, value, partition=partition)
        producer.flush(600)
    finally:
        producer.close()


def save(result: OperatorScale, path: Path) -> None:
    """Write ``result`` as JSON to ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(asdict(result), indent=2) + "\n")
