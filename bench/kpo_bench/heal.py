"""``--only heal``: a broker killed for good, healed by a BalancingPolicy, on both systems.

Method (the same on each system, one system after the other, sizes in
:class:`kpo_bench.settings.HealWorkload`): one ZooKeeper server and one real control plane
(etcd + kube-apiserver with the project's CRDs) serve both runs. For each system a cluster
of ``brokers`` brokers starts on its own ZooKeeper chroot with the bench's broker settings
(``zookeeper.session.timeout.ms`` 6 s: a killed broker leaves DescribeCluster within
about 6 s of the kill on both). Topic :data:`HEAL_TOPIC` gets ``partitions`` partitions at RF
``replication_factor``, spread round robin so that every broker holds as many replicas, and
``records`` records of ``record_size`` bytes from ``ProducerPerformance`` (acks=all). Then
the operator starts as a process (``python -m kpo_operator``, ``KPO_POLICY_INTERVAL_S`` =
``policy_interval_s``) watching a namespace of the system's own, and a BalancingPolicy is
applied there: ``detectors.brokerFailure.threshold`` = ``threshold_s`` and
``budget.replicationRate`` = ``replication_rate``. Once the policy has checked the cluster
with every broker live, a broker that is not the controller is killed with SIGKILL and not
restarted. From the kill (times in s, on the bench's monotonic clock):

- **deregistered**: DescribeCluster no longer lists the broker (the session timeout);
- **detected**: the policy's status first shows the anomaly ``BrokerFailure/<broker>``
  (a watch on the policy), i.e. the first check after the broker left;
- **Fixing**: the anomaly first shows ``Fixing``: its threshold has passed and the fix,
  a PartitionReassignment, is written. The threshold counts from the first check that saw
  the anomaly, so this is detection + threshold + up to one check interval;
- **RF restored**: Metadata shows every partition of the topic with
  ``replication_factor`` replicas, all live, and ISR = replicas (polled every
  :data:`POLL_S`);
- **Fixed**: the anomaly first shows ``Fixed`` (details only).

**Bytes copied** are the log sizes (DescribeLogDirs) of the replicas that exist after the
heal on brokers that did not hold them before the kill. The **effective rate** is bytes
copied over the time from Fixing to RF restored: it includes the operator's submission of
the fix and the last replicas joining the ISR; the budget is meant to bound it (KIP-73
throttles of ``replicationRate`` divided by the brokers receiving replicas).

The operator is kpo's on both systems: the comparison is of the brokers under the same
policy (detection through the session timeout, the copy under a throttle, the ISR join),
and of the operator against each. Everything measured is in the system's details.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console

from kpo_bench.admin import (
    BenchTimeoutError,
    admin_session,
    create_topic,
    fully_replicated,
    wait_for,
    wait_for_brokers,
    wait_for_partitions,
)
from kpo_bench.clusters import Cluster
from kpo_bench.failover import pick_victim
from kpo_bench.java_tools import JavaTools, run_producer_perf
from kpo_bench.machine import load_average
from kpo_bench.results import (
    HEAL_BUDGET,
    HEAL_DETECTED,
    HEAL_FIXING,
    HEAL_METRICS,
    HEAL_MOVED,
    HEAL_RATE,
    HEAL_RESTORED,
    HEAL_THRESHOLD,
    MetricSpec,
    SystemResult,
)
from kpo_bench.settings import MIB, HealWorkload
from kpo_devenv.controlplane import ControlPlane
from kpo_devenv.operator_process import OperatorProcess
from kpo_devenv.zookeeper import ZooKeeperServer
from kpo_kafka.admin import KafkaAdmin
from kpo_kafka.admin_types import KafkaAdminError, PartitionInfo

CRDS_DIR = Path(__file__).resolve().parents[2] / "crds"
HEAL_TOPIC = "bench-heal"
POLICY = "heal"
#: Seconds between two Metadata polls after the kill.
POLL_S = 0.2
#: Longest wait for the anomaly's ``Fixed`` once the replication factor is restored, s.
FIXED_WAIT_S = 120.0
#: Longest wait for the policy's first check with every broker live, s.
FIRST_CHECK_S = 120.0
#: The anomaly states as the policy's status spells them.
WAITING, FIXING, FIXED, FAILED = "Waiting", "Fixing", "Fixed", "Failed"
#: The resources whose finalizers are dropped once the operator is stopped.
OWNED_PLURALS = ("partitionreassignments", "balancingpolicies")

ClusterFactory = Callable[[Path, str], Cluster]
"""Makes one system's cluster of ``brokers`` brokers from (its workdir, its ZooKeeper connect)."""


class HealError(RuntimeError):
    """The policy did not heal the cluster (its anomaly failed, or a step timed out)."""


def namespace_of(system: str) -> str:
    """Return the namespace of one system's operator and policy."""
    return f"bench-heal-{system}"


def spread_assignment(brokers: Sequence[int], partitions: int, rf: int) -> list[list[int]]:
    """Return replica lists placing partition ``p`` on ``rf`` consecutive brokers from ``p``.

    Round robin over the sorted ``brokers``: every broker leads ``partitions / len(brokers)``
    partitions and holds ``partitions * rf / len(brokers)`` replicas (when they divide).

    Raises:
        ValueError: fewer brokers than ``rf``, or ``rf`` below 1.
    """
    ordered = sorted(brokers)
    if rf < 1 or len(ordered) < rf:
        raise ValueError(f"RF {rf} needs at least {rf} brokers, got {len(ordered)}")
    n = len(ordered)
    return [[ordered[(p + i) % n] for i in range(rf)] for p in range(partitions)]


def policy_manifest(workload: HealWorkload, namespace: str) -> dict[str, Any]:
    """Return the BalancingPolicy of the run: the broker failure detector and the budget."""
    return {
        "apiVersion": "kpo.dev/v1alpha1",
        "kind": "BalancingPolicy",
        "metadata": {"name": POLICY, "namespace": namespace},
        "spec": {
            "detectors": {"brokerFailure": {"threshold": f"{workload.threshold_s}s"}},
            "budget": {"replicationRate": workload.replication_rate},
        },
    }


def rf_restored(
    partitions: Mapping[int, PartitionInfo], count: int, rf: int, live: Collection[int]
) -> bool:
    """Whether partitions ``0..count-1`` all have ``rf`` live replicas, a leader and ISR = replicas.

    Args:
        partitions: partition -> its Metadata.
        count: the topic's partition count.
        rf: the replication factor to be restored.
        live: the brokers still running.
    """
    for p in range(count):
        state = partitions.get(p)
        if state is None or len(state.replicas) != rf or not set(state.replicas) <= set(live):
            return False
        if not fully_replicated(state):
            return False
    return True


def copied_bytes(
    before: Mapping[int, Sequence[int]],
    after: Mapping[int, Sequence[int]],
    sizes: Mapping[tuple[int, int], int],
) -> dict[int, int]:
    """Return broker -> bytes of the replicas it gained: in ``after``, not in ``before``.

    Args:
        before: partition -> replicas before the kill.
        after: partition -> replicas once the replication factor is restored.
        sizes: ``(broker, partition)`` -> the replica's log size, bytes (a replica not
            listed counts 0).
    """
    out: dict[int, int] = {}
    for p, replicas in after.items():
        for broker in set(replicas) - set(before.get(p, ())):
            out[broker] = out.get(broker, 0) + sizes.get((broker, p), 0)
    return out


@dataclass
class HealTimeline:
    """When things happened, on the monotonic clock, s.

    Attributes:
        killed: just before the SIGKILL.
        deregistered: DescribeCluster first without the broker, or None if not seen.
        states: anomaly state -> when the watch first saw it (``Waiting``, ``Fixing``...).
        detected: when the watch first saw the anomaly, in any state, or None.
        restored: the poll that found the replication factor restored, or None.
    """

    killed: float
    deregistered: float | None = None
    states: dict[str, float] = field(default_factory=dict)
    detected: float | None = None
    restored: float | None = None

    def after_kill(self, instant: float | None) -> float | None:
        """Return ``instant - killed``, s, or None."""
        return None if instant is None else instant - self.killed

    def as_json(self) -> dict[str, float | None]:
        """Return each milestone as s after the kill (None when not seen)."""
        out = {
            "deregistered": self.after_kill(self.deregistered),
            "detected": self.after_kill(self.detected),
            "restored": self.after_kill(self.restored),
        }
        for state, at in sorted(self.states.items(), key=lambda item: item[1]):
            out[state] = self.after_kill(at)
        return out


def heal_values(
    timeline: HealTimeline, copied: int | None, workload: HealWorkload
) -> dict[MetricSpec, float | None]:
    """Return each heal metric's value (None: not measured) from a run's timeline.

    The effective rate is ``copied`` bytes over Fixing -> RF restored, in MiB/s; it is None
    without both instants, with a non-positive interval or without ``copied``.
    """
    fixing = timeline.states.get(FIXING)
    rate = None
    if copied is not None and fixing is not None and timeline.restored is not None:
        took = timeline.restored - fixing
        rate = copied / MIB / took if took > 0 else None
    return {
        HEAL_THRESHOLD: float(workload.threshold_s),
        HEAL_DETECTED: timeline.after_kill(timeline.detected),
        HEAL_FIXING: timeline.after_kill(fixing),
        HEAL_RESTORED: timeline.after_kill(timeline.restored),
        HEAL_MOVED: None if copied is None else copied / MIB,
        HEAL_BUDGET: workload.replication_rate / MIB,
        HEAL_RATE: rate,
    }


def anomaly_of(status: Mapping[str, Any], anomaly_id: str) -> dict[str, Any] | None:
    """Return ``status.anomalies[]``'s entry ``anomaly_id``, or None."""
    for entry in status.get("anomalies") or []:
        if entry.get("id") == anomaly_id:
            return dict(entry)
    return None


class PolicyWatch:
    """A watch on one BalancingPolicy: its last status and when an anomaly's states appear.

    Args:
        kubeconfig: the control plane's kubeconfig.
        namespace: the policy's namespace.
    """

    def __init__(self, kubeconfig: Path, namespace: str) -> None:
        from kubernetes import client, config, watch

        self._api = client.CustomObjectsApi(
            config.new_client_from_config(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]
        )
        self._watch = watch.Watch()  # type: ignore[no-untyped-call]
        self._namespace = namespace
        self._lock = threading.Lock()
        self._status: dict[str, Any] = {}
        self._anomaly_id: str | None = None
        self._first_seen: float | None = None
        self._states: dict[str, float] = {}
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="policy-watch", daemon=True)

    def start(self) -> None:
        """Start watching in a background thread."""
        self._thread.start()

    def stop(self) -> None:
        """Stop watching."""
        self._stopped = True
        self._watch.stop()  # type: ignore[no-untyped-call]

    def follow(self, anomaly_id: str) -> None:
        """Record from now on when anomaly ``anomaly_id`` appears and each state it takes."""
        with self._lock:
            self._anomaly_id = anomaly_id

    @property
    def status(self) -> dict[str, Any]:
        """The policy's last status seen (a copy)."""
        with self._lock:
            return json.loads(json.dumps(self._status))  # type: ignore[no-any-return]

    def anomaly(self) -> dict[str, Any] | None:
        """Return the followed anomaly as last seen, or None."""
        with self._lock:
            anomaly_id = self._anomaly_id
        return None if anomaly_id is None else anomaly_of(self.status, anomaly_id)

    def seen(self) -> tuple[float | None, dict[str, float]]:
        """Return when the followed anomaly first appeared and when each state first did."""
        with self._lock:
            return self._first_seen, dict(self._states)

    def _run(self) -> None:
        while not self._stopped:
            try:
                for event in self._watch.stream(  # type: ignore[no-untyped-call]
                    self._api.list_namespaced_custom_object,
                    "kpo.dev",
                    "v1alpha1",
                    self._namespace,
                    "balancingpolicies",
                    field_selector=f"metadata.name={POLICY}",
                    timeout_seconds=300,
                ):
                    self._seen(event["object"].get("status") or {}, time.monotonic())
                    if self._stopped:
                        return
            except Exception:  # a dropped watch: start again
                time.sleep(0.5)

    def _seen(self, status: dict[str, Any], at: float) -> None:
        with self._lock:
            self._status = status
            if self._anomaly_id is None:
                return
            entry = anomaly_of(status, self._anomaly_id)
            if entry is None:
                return
            if self._first_seen is None:
                self._first_seen = at
            state = entry.get("state")
            if state and state not in self._states:
                self._states[state] = at


@dataclass
class _Run:
    """One system's run: what it needs and what it found."""

    cluster: Cluster
    plane: ControlPlane
    tools: JavaTools
    workload: HealWorkload
    producer_props: Mapping[str, str]
    namespace: str
    workdir: Path
    details: dict[str, Any] = field(default_factory=dict)


def _assignment(admin: KafkaAdmin, partitions: int) -> dict[int, list[int]]:
    described = admin.describe_topics([HEAL_TOPIC]).get(HEAL_TOPIC, {})
    return {p: list(described[p].replicas) for p in range(partitions) if p in described}


def _sizes(admin: KafkaAdmin, brokers: Collection[int]) -> dict[tuple[int, int], int]:
    found = admin.describe_log_dirs(brokers=sorted(brokers), topics=[HEAL_TOPIC])
    return {
        (broker, partition): info.size_bytes
        for (broker, topic, partition), info in found.items()
        if topic == HEAL_TOPIC and not info.is_future
    }


def _fill(run: _Run) -> None:
    """Create the topic, write the records, wait until every ISR is full."""
    workload, cluster = run.workload, run.cluster
    with admin_session(cluster.bootstrap_servers) as admin:
        wait_for_brokers(admin, set(cluster.brokers))
        assignment = spread_assignment(
            list(cluster.brokers), workload.partitions, workload.replication_factor
        )
        create_topic(admin, HEAL_TOPIC, assignment=assignment)
        began = time.monotonic()
        summary = run_producer_perf(
            run.tools,
            cluster.bootstrap_servers,
            HEAL_TOPIC,
            workload.records,
            workload.record_size,
            run.producer_props,
            300.0 + workload.payload_bytes / MIB,
        )
        wait_for_partitions(admin, {HEAL_TOPIC: workload.partitions}, fully_replicated, 300)
        run.details["produce"] = {
            "records": summary.records,
            "mib_s": summary.bytes_per_s(workload.record_size) / MIB,
            "took_s": time.monotonic() - began,
        }


def _policy_ready(watch: PolicyWatch, brokers: Collection[int]) -> bool | None:
    """Whether the policy has checked the cluster and seen every broker live."""
    status = watch.status
    live = set((status.get("brokers") or {}).get("live") or ())
    return True if status.get("lastCheckTime") and set(brokers) <= live else None


def _wait_restored(
    run: _Run, victim: int, timeline: HealTimeline, watch: PolicyWatch, deadline: float
) -> None:
    """Poll Metadata until the replication factor is restored; fill in ``timeline``.

    Raises:
        HealError: the anomaly failed, or the RF was not restored before ``deadline``.
    """
    workload, cluster = run.workload, run.cluster
    live = [b for b in cluster.brokers if b != victim]
    with admin_session(cluster.bootstrap_servers) as admin:
        while True:
            now = time.monotonic()
            try:
                if timeline.deregistered is None and victim not in admin.describe_cluster().brokers:
                    timeline.deregistered = now
                described = admin.describe_topics([HEAL_TOPIC]).get(HEAL_TOPIC, {})
                if rf_restored(described, workload.partitions, workload.replication_factor, live):
                    timeline.restored = now
                    return
            except KafkaAdminError:
                pass  # a broker gone mid-request: ask again
            anomaly = watch.anomaly() or {}
            if anomaly.get("state") == FAILED:
                raise HealError(f"anomaly Failed: {anomaly.get('message')}")
            if now > deadline:
                raise HealError(
                    f"RF not restored {now - timeline.killed:.0f} s after the kill; "
                    f"anomaly: {json.dumps(anomaly)[:600]}"
                )
            time.sleep(POLL_S)


def _fix_statuses(run: _Run, names: Sequence[str]) -> dict[str, Any]:
    """Return each fix's status without its per-partition entries."""
    out: dict[str, Any] = {}
    for name in names:
        found = run.plane.kubectl(
            "-n", run.namespace, "get", "partitionreassignments", name, "-o", "json", check=False
        )
        if found.returncode != 0:
            out[name] = {"error": found.stderr.strip()[:300]}
            continue
        status = json.loads(found.stdout).get("status") or {}
        out[name] = {k: v for k, v in status.items() if k not in ("partitions", "conditions")}
    return out


def measure_heal(run: _Run, console: Console, label: str) -> tuple[HealTimeline, int]:
    """Fill the topic, start the operator and the policy, kill a broker, time the heal.

    Returns:
        the timeline and the bytes copied to new replicas.

    Raises:
        HealError: the policy did not heal the cluster in time.
        kpo_bench.admin.BenchTimeoutError: a set-up step did not finish in time.
        kpo_bench.java_tools.JavaToolError: the producer failed.
    """
    workload, cluster, plane = run.workload, run.cluster, run.plane
    console.print(f"{label}: writing {workload.payload_bytes / MIB:.0f} MiB to {HEAL_TOPIC}")
    _fill(run)
    plane.kubectl("create", "namespace", run.namespace)
    operator = OperatorProcess(
        run.workdir / "operator",
        plane.kubeconfig,
        cluster.bootstrap_servers,
        [run.namespace],
        env={"KPO_POLICY_INTERVAL_S": f"{workload.policy_interval_s:g}"},
    )
    watch = PolicyWatch(plane.kubeconfig, run.namespace)
    operator.start()
    watch.start()
    try:
        plane.kubectl(
            "apply",
            "-f",
            "-",
            input_text=yaml.safe_dump(policy_manifest(workload, run.namespace)),
        )
        wait_for(
            lambda: _policy_ready(watch, cluster.brokers),
            FIRST_CHECK_S,
            "the policy's first check with every broker live",
            0.2,
        )
        with admin_session(cluster.bootstrap_servers) as admin:
            controller = admin.describe_cluster().controller_id
            victim = pick_victim(list(cluster.brokers), controller)
            before = _assignment(admin, workload.partitions)
        held = sorted(p for p, replicas in before.items() if victim in replicas)
        run.details.update(victim=victim, controller=controller, partitions_on_victim=len(held))
        watch.follow(f"BrokerFailure/{victim}")
        console.print(f"{label}: kill -9 of broker {victim} ({len(held)} partitions on it)")
        timeline = HealTimeline(killed=time.monotonic())
        cluster.brokers[victim].kill()
        try:
            _wait_restored(
                run,
                victim,
                timeline,
                watch,
                timeline.killed + workload.threshold_s + workload.timeout_s,
            )
            with contextlib.suppress(BenchTimeoutError):  # then reported as not seen
                wait_for(lambda: True if FIXED in watch.seen()[1] else None, FIXED_WAIT_S, FIXED)
        finally:
            timeline.detected, timeline.states = watch.seen()
            anomaly = watch.anomaly() or {}
            run.details.update(
                timeline_s=timeline.as_json(),
                anomaly=anomaly,
                budget=watch.status.get("budget"),
                fixes=_fix_statuses(run, anomaly.get("fixes") or []),
            )
        live = [b for b in cluster.brokers if b != victim]
        with admin_session(cluster.bootstrap_servers) as admin:
            after = _assignment(admin, workload.partitions)
            sizes = _sizes(admin, live)
        per_broker = copied_bytes(before, after, sizes)
        copied = sum(per_broker.values())
        run.details.update(
            assignment_before={str(p): r for p, r in before.items()},
            assignment_after={str(p): r for p, r in after.items()},
            copied_bytes=copied,
            copied_bytes_per_broker={str(b): n for b, n in sorted(per_broker.items())},
            planned_bytes=anomaly.get("plannedBytes"),
        )
        return timeline, copied
    except BaseException:
        run.details["operator_log_tail"] = operator.log_tail(30)
        raise
    finally:
        watch.stop()
        operator.stop(timeout_s=10)
        with contextlib.suppress(subprocess.TimeoutExpired):  # the plane is stopped next anyway
            plane.drop_finalizers(run.namespace, OWNED_PLURALS)


def _heal_system(
    result: SystemResult,
    cluster: Cluster,
    plane: ControlPlane,
    tools: JavaTools,
    workload: HealWorkload,
    producer_props: Mapping[str, str],
    workdir: Path,
    console: Console,
    keep_data: bool,
) -> None:
    """Run one system: start its cluster, measure, stop it; failures go to ``result.errors``."""
    label = f"[bold]{result.system}[/bold]"
    result.details["run"] = {"load_average_before": load_average()}
    run = _Run(
        cluster, plane, tools, workload, producer_props, namespace_of(result.system), workdir
    )
    result.details["heal"] = run.details
    console.print(f"{label}: starting {len(cluster.brokers)} brokers")
    try:
        cluster.start()
        timeline, copied = measure_heal(run, console, label)
        values = heal_values(timeline, copied, workload)
    except Exception as exc:  # report it and still run the other system
        values = {}
        console.print(f"{label}: [red]heal failed[/red]: {exc}")
        for metric in HEAL_METRICS:
            result.record_error(metric, exc)
    finally:
        cluster.stop()
        result.details["run"]["load_average_after"] = load_average()
        if not keep_data:
            for broker in cluster.brokers.values():
                shutil.rmtree(broker.log_dir, ignore_errors=True)
    for metric, value in values.items():
        if value is None:
            result.errors[metric.key] = "not seen (see details.heal.timeline_s)"
        else:
            result.errors.pop(metric.key, None)
            result.values[metric.key] = value
    restored = result.values.get(HEAL_RESTORED.key)
    if restored is not None:
        console.print(
            f"{label}: RF restored {restored:.1f} s after the kill "
            f"(Fixing at {result.values.get(HEAL_FIXING.key, float('nan')):.1f} s), "
            f"{result.values.get(HEAL_MOVED.key, 0.0):.0f} MiB copied at "
            f"{result.values.get(HEAL_RATE.key, float('nan')):.1f} MiB/s"
        )


def run_heal(
    workdir: Path,
    factories: Mapping[str, ClusterFactory],
    versions: Mapping[str, str],
    tools: JavaTools,
    workload: HealWorkload,
    producer_props: Mapping[str, str],
    console: Console,
    keep_data: bool = False,
) -> dict[str, SystemResult]:
    """Run the heal measurement on each system of ``factories``, in order.

    Args:
        workdir: scratch folder (ZooKeeper, control plane, each system's brokers and operator).
        factories: system -> its cluster factory (``workload.brokers`` brokers).
        versions: system -> its version string.
        tools: the Java tools (ProducerPerformance).
        workload: sizes and the policy's settings.
        producer_props: ProducerPerformance's producer configs.
        console: progress output.
        keep_data: keep the brokers' log dirs.

    Returns:
        system -> its result: values of :data:`kpo_bench.results.HEAL_METRICS` and the raw
        figures in ``details["heal"]``.

    Raises:
        kpo_devenv.process.ProcessStartError: ZooKeeper or the control plane did not start.
    """
    results: dict[str, SystemResult] = {}
    zookeeper = ZooKeeperServer(workdir / "zookeeper")
    plane = ControlPlane(workdir / "control-plane", crds_dir=CRDS_DIR)
    zookeeper.start()
    try:
        plane.start()
        for system, make_cluster in factories.items():
            result = SystemResult(system, versions[system])
            results[system] = result
            cluster = make_cluster(workdir / system, f"{zookeeper.connect_string}/heal-{system}")
            _heal_system(
                result,
                cluster,
                plane,
                tools,
                workload,
                producer_props,
                workdir / system,
                console,
                keep_data,
            )
    finally:
        plane.stop()
        zookeeper.stop()
    return results
