"""``python -m kpo_bench``: benchmark kpo's brokers against Apache Kafka on this machine.

Starts one ZooKeeper server, then for each system in turn (kpo first, then Apache
Kafka) a 3-broker cluster on its own ZooKeeper chroot, runs the same workload with
the same clients, stops it, and prints a table with the ratios. The systems never
run at the same time. The heal section (:mod:`kpo_bench.heal`; alone with ``--only heal``,
else after the broker comparison) runs clusters of its own size with a control plane and
the operator. The JSON report goes to ``--output``, and the run's record (command
line, machine, start time, duration, each metric of both systems) to a new file of
``--results-dir`` (:mod:`kpo_bench.run_record`).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from rich.console import Console

from kpo_bench.clusters import COMMON_BROKER_PROPERTIES, Cluster
from kpo_bench.controller_scale import (
    DEFAULT_CONTROLLER,
    QUICK_CONTROLLER,
    ControllerScenario,
    ControllerWorkload,
)
from kpo_bench.java_tools import JavaTools, compile_consumer
from kpo_bench.machine import machine_info
from kpo_bench.report import print_report
from kpo_bench.results import (
    BASELINE,
    CONTROLLER_METRICS,
    HEAL_METRICS,
    METRICS,
    OURS,
    SystemResult,
    compare,
    estimate_rows,
    ratio_meaning,
    report_json,
)
from kpo_bench.run_record import (
    DEFAULT_RESULTS_DIR,
    MetricLine,
    comparison_lines,
    estimate_lines,
    load_average,
    run_name,
    run_record,
    write_record,
)
from kpo_bench.runner import ONLY_CHOICES, ONLY_TLS, Step, run_system
from kpo_bench.settings import DEFAULT, DEFAULT_HEAL, QUICK, QUICK_HEAL, HealWorkload, Workload
from kpo_bench.throttle_plan import THROTTLE_BROKER_PROPERTIES, TOLERANCE
from kpo_bench.throughput import Transport
from kpo_bench.tls import TlsSetup
from kpo_devenv.apache_kafka import ApacheKafkaCluster, kafka_classpath
from kpo_devenv.kafka_cluster import KafkaCluster
from kpo_devenv.tools import VERSIONS_ENV, ToolNotFoundError, pinned_version
from kpo_devenv.zookeeper import ZooKeeperServer

PLACEMENT = "placement"
"""``--only placement``: the placement benchmark alone."""

OPERATOR = "operator"
"""``--only operator``: the operator's reconcile latency under load."""

CONTROLLER = "controller"
"""``--only controller``: the controller and brokers at scale."""

OPERATOR_SCALE = "operator-scale"
"""``--only operator-scale``: the operator with many objects on one cluster."""

HEAL = "heal"
"""``--only heal``: a broker killed for good, healed by a BalancingPolicy."""
#: ``--only operator-scale``: partitions per object unless ``--partitions`` says otherwise.
OPERATOR_SCALE_PARTITIONS = 10

#: Broker settings of both clusters: the shared ones plus the quota window the
#: throttled-reassignment experiments need (inert while no replica is throttled).
BROKER_PROPERTIES = {**COMMON_BROKER_PROPERTIES, **THROTTLE_BROKER_PROPERTIES}


class SettingsError(ValueError):
    """A command-line setting is unusable (e.g. no Kafka version is pinned)."""


def pinned_kafka_version(path: Path = VERSIONS_ENV) -> str:
    """Return ``KAFKA_VERSION`` from ``tools/versions.env``.

    Raises:
        SettingsError: the file or the key is missing.
    """
    try:
        return pinned_version("KAFKA_VERSION", path)
    except ToolNotFoundError as exc:
        raise SettingsError(f"{exc}; pass --kafka-version") from exc


def build_parser() -> argparse.ArgumentParser:
    """Return the command-line parser."""
    parser = argparse.ArgumentParser(prog="python -m kpo_bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="about 50 MiB instead of 500 MiB")
    parser.add_argument(
        "--systems",
        choices=["both", OURS, BASELINE],
        default="both",
        help="which systems to run (default both)",
    )
    parser.add_argument("--produce-records", type=int, help="override the produce record count")
    parser.add_argument("--catch-up-records", type=int, help="override the catch-up record count")
    parser.add_argument("--kafka-version", help="Apache Kafka version (default: versions.env)")
    parser.add_argument("--workdir", type=Path, help="scratch folder (default: a new temp dir)")
    parser.add_argument("--output", type=Path, help="JSON report (default: WORKDIR/results.json)")
    parser.add_argument(
        "--results-dir",
        type=Path,
        default=DEFAULT_RESULTS_DIR,
        help="where the run's record goes, as <UTC date>-<run>.json (default bench/results)",
    )
    parser.add_argument("--keep-data", action="store_true", help="keep the brokers' log dirs")
    parser.add_argument(
        "--quota-window-num",
        type=int,
        help=(
            "replication.quota.window.num of both clusters (default "
            f"{THROTTLE_BROKER_PROPERTIES['replication.quota.window.num']}; Kafka's own is 11)"
        ),
    )
    parser.add_argument(
        "--only",
        choices=(*ONLY_CHOICES, PLACEMENT, OPERATOR, OPERATOR_SCALE, CONTROLLER, HEAL),
        help=(
            "run only this group: 'throttle' = the throttled-reassignment experiments, "
            "'groups' = produce, then consume via a group and a group's rebalance after kill -9, "
            "'placement' = the placement planner vs Kafka's --generate and a greedy planner, "
            "'operator' = one PartitionReassignment's reconcile latency while 50 others move, "
            "'operator-scale' = many PartitionReassignments on one cluster (requests, latency), "
            "'tls' = produce and consume over PLAINTEXT and over SASL_SSL (SCRAM-SHA-512), "
            "'controller' = partition creation, controlled shutdown, start-up, kill -9 and "
            "controller failover with a broker leading N partitions, "
            "'heal' = kill -9 of a broker for good: a BalancingPolicy restores the RF"
        ),
    )
    parser.add_argument(
        "--partitions",
        type=int,
        help=(
            "--only controller: N, the partitions one broker leads and the partitions created "
            f"at each RF (default {DEFAULT_CONTROLLER.partitions:,}, "
            f"--quick {QUICK_CONTROLLER.partitions:,}); --only operator-scale: partitions per "
            f"object (default {OPERATOR_SCALE_PARTITIONS})"
        ),
    )
    parser.add_argument(
        "--placement-2m",
        action="store_true",
        help=(
            "placement: plan one cluster of 2M partitions x RF 3 on 300 brokers with NumPy "
            "scoring instead of the usual two (about 10 min of CPU; --quick: 200K partitions)"
        ),
    )
    parser.add_argument(
        "--placement-crossover",
        action="store_true",
        help=(
            "placement: score one round at growing sizes with NumPy and with Spark (local[2], "
            "then a standalone cluster of two workers) to find where Spark pays off"
        ),
    )
    parser.add_argument(
        "--objects", type=int, default=200, help="operator-scale: objects (default 200)"
    )
    parser.add_argument(
        "--poll-interval",
        type=float,
        default=1.0,
        help="operator-scale: the operator's KPO_POLL_INTERVAL_S (default 1 s)",
    )
    parser.add_argument(
        "--window", type=float, default=30.0, help="operator-scale: measured window, s (30)"
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="operator-scale: record the operator with py-spy in the window (pip install py-spy)",
    )
    parser.add_argument(
        "--operator-pythonpath",
        help="operator benches: PYTHONPATH of the operator process (another version)",
    )
    return parser


def controller_workload_from(args: argparse.Namespace) -> ControllerWorkload:
    """Return the ``--only controller`` sizes (``--quick`` and ``--partitions``).

    Raises:
        SettingsError: ``--partitions`` is not positive.
    """
    base = QUICK_CONTROLLER if args.quick else DEFAULT_CONTROLLER
    if args.partitions is None:
        return base
    if args.partitions <= 0:
        raise SettingsError(f"--partitions must be positive, got {args.partitions}")
    return ControllerWorkload(
        partitions=args.partitions,
        partitions_per_topic=base.partitions_per_topic,
        timeout_s=base.timeout_s,
        poll_interval_s=base.poll_interval_s,
    )


def heal_workload_from(args: argparse.Namespace) -> HealWorkload:
    """Return the ``heal`` section's sizes (``--quick``)."""
    return QUICK_HEAL if args.quick else DEFAULT_HEAL


def workload_from(args: argparse.Namespace) -> Workload:
    """Return the workload the arguments ask for (``--quick`` and the record overrides)."""
    base = QUICK if args.quick else DEFAULT
    return Workload(
        record_size=base.record_size,
        produce_records=args.produce_records or base.produce_records,
        produce_partitions=base.produce_partitions,
        warmup_records=base.warmup_records,
        catch_up_records=args.catch_up_records or base.catch_up_records,
        producer_props=dict(base.producer_props),
        failover_timeout_s=base.failover_timeout_s,
        catch_up_timeout_s=base.catch_up_timeout_s,
        throttle_records=base.throttle_records,
        throttle_rate_bytes_s=base.throttle_rate_bytes_s,
        throttle_timeout_s=base.throttle_timeout_s,
    )


def broker_properties(quota_window_num: int | None) -> dict[str, str]:
    """Return both clusters' broker settings, with ``--quota-window-num`` if given.

    Raises:
        SettingsError: a window count below 1.
    """
    if quota_window_num is None:
        return dict(BROKER_PROPERTIES)
    if quota_window_num < 1:
        raise SettingsError(f"--quota-window-num must be >= 1, got {quota_window_num}")
    return {**BROKER_PROPERTIES, "replication.quota.window.num": str(quota_window_num)}


def _kpo_version() -> str:
    try:
        return metadata.version("kpo")
    except metadata.PackageNotFoundError:
        return "dev"


def _run_guarded(
    result: SystemResult,
    cluster: Cluster,
    tools: JavaTools,
    workload: Workload,
    console: Console,
    keep_data: bool,
    only: str | None,
    secured: Transport | None = None,
    steps: Callable[[], list[Step]] | None = None,
) -> None:
    """Run one system; a cluster that does not start is recorded as the ``cluster`` error."""
    try:
        run_system(result, cluster, tools, workload, console, keep_data, only, secured, steps)
    except Exception as exc:  # report it and still run the other system
        result.errors["cluster"] = f"{type(exc).__name__}: {exc}"
        console.print(f"[red]{result.system}: cluster failed[/red]: {exc}")


ClusterFactory = Callable[[Path, str], Cluster]
"""Makes one system's cluster from (its workdir, its ZooKeeper connect string)."""


def _cluster_factories(
    tls: TlsSetup | None, classpath: str, properties: dict[str, str], size: int = 3
) -> dict[str, ClusterFactory]:
    """Return system name -> its cluster factory, in run order (kpo, then Apache Kafka).

    Each cluster has ``size`` brokers (3 for every section but ``heal``). With ``tls`` the
    clusters get the SASL_SSL listener too (``--only tls``, 3 brokers).
    """

    def kpo(workdir: Path, connect: str) -> Cluster:
        if tls is not None:
            return tls.kpo_cluster(workdir, connect, properties)
        return KafkaCluster(workdir, connect, size, properties)

    def apache(workdir: Path, connect: str) -> Cluster:
        if tls is not None:
            return tls.apache_cluster(workdir, connect, classpath, properties)
        return ApacheKafkaCluster(workdir, connect, classpath, size, properties)

    return {OURS: kpo, BASELINE: apache}


def _placement(args: argparse.Namespace, workdir: Path) -> list[MetricLine]:
    """Run the placement benchmark (no brokers needed), save its lines, return its metrics."""
    from kpo_bench.placement import run_placement_bench

    if args.placement_crossover:
        from kpo_bench.placement_crossover import run_crossover_bench

        workdir.mkdir(parents=True, exist_ok=True)
        lines = run_crossover_bench(workdir)
        (workdir / "placement-crossover.txt").write_text("\n".join(lines) + "\n")
        return []
    run = run_placement_bench(args.quick, large=args.placement_2m)
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "placement.txt").write_text("\n".join(run.lines) + "\n")
    return run.metrics


def _operator(workdir: Path, pythonpath: str | None = None) -> None:
    """Run the operator latency benchmark (kpo brokers only) and save its JSON."""
    from kpo_bench.operator_latency import run_operator_latency, save

    result = run_operator_latency(workdir, operator_pythonpath=pythonpath)
    for line in result.summary():
        print(line)
    save(result, workdir / "operator.json")


def _operator_scale(args: argparse.Namespace, workdir: Path) -> None:
    """Run the operator scale benchmark and save its JSON."""
    from kpo_bench.operator_scale import run_operator_scale, save

    result = run_operator_scale(
        workdir,
        objects=args.objects,
        partitions=args.partitions or OPERATOR_SCALE_PARTITIONS,
        poll_interval_s=args.poll_interval,
        window_s=args.window,
        operator_pythonpath=args.operator_pythonpath,
        profile=args.profile,
    )
    for line in result.summary():
        print(line)
    save(result, workdir / "operator-scale.json")


@dataclasses.dataclass
class _Section:
    """What one section measured: its metric lines, its JSON report and its exit code."""

    lines: list[MetricLine]
    report: dict[str, Any]
    code: int


def _heal(
    args: argparse.Namespace,
    console: Console,
    tools: JavaTools,
    kafka_version: str,
    properties: dict[str, str],
    producer_props: dict[str, str],
    workdir: Path,
    machine: dict[str, Any],
) -> _Section:
    """Run the heal section (:mod:`kpo_bench.heal`) on the systems ``--systems`` names."""
    from kpo_bench.heal import run_heal

    heal = heal_workload_from(args)
    console.print(f"heal: workdir {workdir}; sizes {heal.as_json()}")
    factories = {
        system: factory
        for system, factory in _cluster_factories(
            None, tools.kafka_classpath, properties, heal.brokers
        ).items()
        if args.systems in ("both", system)
    }
    versions = {OURS: _kpo_version(), BASELINE: kafka_version}
    results = run_heal(
        workdir, factories, versions, tools, heal, producer_props, console, args.keep_data
    )
    ours, baseline = results.get(OURS), results.get(BASELINE)
    settings = {
        "heal": heal.as_json(),
        "kafka_version": kafka_version,
        "broker_properties": properties,
        "only": args.only,
    }
    report = report_json(machine, settings, ours, baseline, HEAL_METRICS)
    rows = compare(ours, baseline, HEAL_METRICS)
    title = (
        f"BalancingPolicy heal after kill -9: {heal.brokers} brokers, "
        f"{heal.payload_bytes / 2**20:.0f} MiB at RF {heal.replication_factor}"
    )
    print_report(console, machine, rows, ours, baseline, with_estimates=False, title=title)
    meanings = {metric.key: ratio_meaning(metric) for metric in HEAL_METRICS}
    lines = [
        dataclasses.replace(line, ratio_meaning=meanings[line.key])
        for line in comparison_lines(rows, f"Apache Kafka {kafka_version}")
    ]
    code = 1 if any(r.errors for r in results.values()) else 0
    return _Section(lines, report, code)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; return 0 when every metric was measured on every system run, else 1.

    Without ``--only`` the broker benchmark runs first, then the heal section, then the
    placement benchmark. Either way the run's record is written to a new file of
    ``--results-dir``.
    """
    arguments = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(arguments)
    started, clock = datetime.now(UTC), time.monotonic()
    machine = machine_info()
    metrics: list[MetricLine] = []
    report: dict[str, Any] = {}
    code = _run(args, metrics, machine, report)
    record = run_record(
        name=run_name(args.only, args.quick),
        argv=arguments,
        started=started,
        duration_s=time.monotonic() - clock,
        machine=machine,
        load_average_end=load_average(),
        metrics=metrics,
        report=report,
    )
    path = write_record(args.results_dir, record, started)
    print(f"run record: {path}")
    return code


def _versions(machine: dict[str, Any], kafka_version: str | None) -> None:
    """Add the kpo and (when known) the Kafka versions to the machine facts."""
    machine["kpo"] = _kpo_version()
    if kafka_version is None:
        try:
            kafka_version = pinned_kafka_version()
        except SettingsError:
            kafka_version = None
    machine["kafka"] = kafka_version


def _run(
    args: argparse.Namespace,
    metrics: list[MetricLine],
    machine: dict[str, Any],
    report: dict[str, Any],
) -> int:
    """Run what ``args`` ask for; return the exit code.

    Each metric measured is appended to ``metrics``; the JSON report of the broker benchmark
    (:func:`kpo_bench.results.report_json`) is put in ``report``.
    """
    _versions(machine, args.kafka_version)
    if args.only == PLACEMENT:
        metrics += _placement(args, args.workdir or Path(tempfile.mkdtemp(prefix="kpo-bench-")))
        return 0
    if args.only == OPERATOR:
        _operator(
            args.workdir or Path(tempfile.mkdtemp(prefix="kpo-bench-")), args.operator_pythonpath
        )
        return 0
    if args.only == OPERATOR_SCALE:
        _operator_scale(args, args.workdir or Path(tempfile.mkdtemp(prefix="kpo-bench-")))
        return 0
    console = Console()
    workload = workload_from(args)
    kafka_version = args.kafka_version or pinned_kafka_version()
    classpath = kafka_classpath(kafka_version)  # the tools are needed for both systems
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="kpo-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    output = args.output or workdir / "results.json"
    properties = broker_properties(args.quota_window_num)
    if args.only == HEAL:
        tools = compile_consumer(classpath, workdir / "classes")
        heal = _heal(
            args,
            console,
            tools,
            kafka_version,
            properties,
            workload.producer_props,
            workdir,
            machine,
        )
        report.update(heal.report)
        _write_json(output, report)
        console.print(f"JSON report: {output}")
        metrics += heal.lines
        return heal.code
    controller = controller_workload_from(args) if args.only == CONTROLLER else None
    sizes = controller.as_json() if controller is not None else workload.as_json()
    console.print(f"workdir {workdir}; workload {sizes}")
    tools = compile_consumer(classpath, workdir / "classes")
    zookeeper = ZooKeeperServer(workdir / "zookeeper")
    only = None if controller is not None else args.only

    def scenario(cluster: Cluster) -> Callable[[], list[Step]] | None:
        if controller is None:
            return None
        return lambda: ControllerScenario(cluster, zookeeper.port, controller).steps()

    zookeeper.start()
    tls = TlsSetup(workdir) if args.only == ONLY_TLS else None
    secured = tls.transport if tls is not None else None
    results: dict[str, SystemResult] = {}
    try:
        for system, make_cluster in _cluster_factories(tls, classpath, properties).items():
            if args.systems not in ("both", system):
                continue
            version = _kpo_version() if system == OURS else kafka_version
            results[system] = SystemResult(system, version)
            cluster = make_cluster(workdir / system, f"{zookeeper.connect_string}/{system}")
            _run_guarded(
                results[system],
                cluster,
                tools,
                workload,
                console,
                args.keep_data,
                only,
                secured,
                scenario(cluster),
            )
    finally:
        zookeeper.stop()
    ours, baseline = results.get(OURS), results.get(BASELINE)
    settings = {
        "workload": sizes,
        "kafka_version": kafka_version,
        "broker_properties": properties,
        "only": args.only,
    }
    chosen = CONTROLLER_METRICS if controller is not None else METRICS
    report.update(report_json(machine, settings, ours, baseline, chosen))
    _write_json(output, report)
    rows = compare(ours, baseline, chosen)
    print_report(console, machine, rows, ours, baseline, with_estimates=controller is None)
    console.print(f"JSON report: {output}")
    kafka_label = f"Apache Kafka {kafka_version}"
    metrics += comparison_lines(rows, kafka_label)
    metrics += estimate_lines(estimate_rows(ours, baseline), TOLERANCE, kafka_label)
    ran = [r for r in (ours, baseline) if r is not None and (r.values or r.errors)]
    code = 1 if any(r.errors for r in ran) else 0
    if args.only is None:
        heal = _heal(
            args,
            console,
            tools,
            kafka_version,
            properties,
            workload.producer_props,
            workdir / HEAL,
            machine,
        )
        report[HEAL] = heal.report
        _write_json(output, report)
        metrics += heal.lines
        code = max(code, heal.code)
        metrics += _placement(args, workdir)
    return code


def _write_json(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` as indented JSON to ``path`` (its folder created)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n")
