"""``python -m kpo_placement``: the placement job's command line (typer).

* ``collect``: snapshot a live cluster into a directory (:mod:`kpo_placement.collector`);
* ``synthesize``: write a synthetic snapshot (:mod:`kpo_placement.synthetic`);
* ``plan``: plan from a snapshot directory, or from a live cluster with
  ``--bootstrap-server`` (collected first into ``<out>/snapshot``), and write the
  manifests, report and chart (:mod:`kpo_placement.job`). Dry run by default; ``--apply``
  creates the objects in Kubernetes, suspended unless ``--run-now``.

The report goes to stdout, notes and errors to stderr. Exit codes: 0 success, 1 the job
failed (cluster, Spark, planner, Kubernetes), 2 bad input (options, snapshot, capacities).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, cast

import typer

from kpo_kafka.admin_types import KafkaAdminError
from kpo_kafka.client_config import ClientConfigError, client_security_from_env
from kpo_kafka.manifests import ManifestError
from kpo_placement.aggregate import AggregateOptions, Statistic, spark_session
from kpo_placement.collector import (
    BrokerCapacity,
    CapacityConfigError,
    collect_snapshot,
    load_capacities,
    parse_quantity,
)
from kpo_placement.job import JobOptions, Scorer, apply_plan, run_plan
from kpo_placement.manifests import ApplyError, manifests_yaml
from kpo_placement.metrics_sources import MetricsUnavailableError, load_sampler
from kpo_placement.model import ModelError
from kpo_placement.planner import MODES, InvalidOptionsError, Mode, PlanError, PlanOptions
from kpo_placement.snapshot import SnapshotError, read_snapshot, write_snapshot
from kpo_placement.waves import WaveError

app = typer.Typer(
    name="kpo-placement",
    help="Snapshot a Kafka cluster, plan a balanced placement in Spark, and emit "
    "PartitionReassignment waves.",
    no_args_is_help=True,
    add_completion=False,
)


class OptionError(ValueError):
    """A command-line option has a value the job cannot use; the message names it."""


_INPUT_ERRORS = (
    ClientConfigError,
    OptionError,
    InvalidOptionsError,
    SnapshotError,
    CapacityConfigError,
    ManifestError,
    ModelError,
    WaveError,
)
_JOB_ERRORS = (KafkaAdminError, MetricsUnavailableError, PlanError, ApplyError, OSError)


def note(message: str) -> None:
    """Print a progress note on stderr."""
    typer.echo(message, err=True)


@contextmanager
def _exit_on_errors() -> Iterator[None]:
    """Turn the job's named errors into a message on stderr and exit code 1 or 2."""
    try:
        yield
    except _INPUT_ERRORS as exc:  # InvalidOptionsError is a PlanError too: check it first
        note(f"error: {exc}")
        raise typer.Exit(2) from exc
    except _JOB_ERRORS as exc:
        note(f"error: {exc}")
        raise typer.Exit(1) from exc


def _broker_list(text: str | None) -> tuple[int, ...]:
    if not text:
        return ()
    try:
        return tuple(int(b) for b in text.split(",") if b.strip())
    except ValueError as exc:
        raise OptionError(f"--brokers: {text!r} is not a comma-separated id list") from exc


def _url_map(items: list[str]) -> dict[int, str]:
    urls: dict[int, str] = {}
    for item in items:
        broker, sep, url = item.partition("=")
        if not sep or not broker.strip().isdigit():
            raise OptionError(f"--metrics-url: {item!r} is not ID=URL")
        urls[int(broker)] = url
    return urls


CommandConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--command-config",
        help="Kafka client properties (TLS, SASL) as Kafka's tools take them; default: the "
        "KPO_KAFKA_CLIENT_CONFIG and KPO_KAFKA_* variables, else PLAINTEXT.",
    ),
]
BootstrapOpt = Annotated[
    str | None, typer.Option("--bootstrap-server", help="Kafka host:port list (live cluster).")
]
CapacitiesOpt = Annotated[
    Path | None,
    typer.Option(help="YAML capacities file: default + per-broker disk/network capacities."),
]
DiskOpt = Annotated[str, typer.Option(help="Default disk capacity per broker (bytes, 500Gi).")]
NetInOpt = Annotated[str, typer.Option(help="Default network-in capacity, bytes/s (125M).")]
NetOutOpt = Annotated[str, typer.Option(help="Default network-out capacity, bytes/s (125M).")]
TemplateOpt = Annotated[
    str | None,
    typer.Option(help="Broker metrics URL with {id}, e.g. http://kafka-{id}:9308/metrics."),
]
UrlsOpt = Annotated[
    list[str], typer.Option("--metrics-url", help="ID=URL of one broker's metrics.")
]
PromOpt = Annotated[
    str | None, typer.Option(help="Prometheus server URL; load is read from its query API.")
]
ScrapesOpt = Annotated[int, typer.Option(help="Scrapes of the broker metrics (>= 2).")]
IntervalOpt = Annotated[float, typer.Option(help="Seconds between scrapes.")]
WindowOpt = Annotated[float, typer.Option(help="Prometheus: seconds of history to read.")]


def _collect(
    out: Path,
    bootstrap: str,
    capacities: Path | None,
    defaults: tuple[str, str, str],
    sources: tuple[str | None, list[str], str | None],
    scrapes: int,
    interval: float,
    window: float,
    command_config: Path | None = None,
) -> Path:
    """Collect a live snapshot into ``out``; return ``out``.

    The Kafka client's TLS/SASL settings come from ``command_config`` and the
    ``KPO_KAFKA_*`` variables (:func:`kpo_kafka.client_config.client_security_from_env`).
    """
    from kpo_kafka.admin import KafkaPythonAdmin

    security = client_security_from_env(None, command_config)

    default = BrokerCapacity(
        parse_quantity(defaults[0], "--disk-capacity"),
        parse_quantity(defaults[1], "--net-in-capacity"),
        parse_quantity(defaults[2], "--net-out-capacity"),
    )
    caps = load_capacities(capacities, default)
    template, urls, prometheus = sources
    sampler = load_sampler(
        template=template,
        urls=_url_map(urls),
        prometheus_url=prometheus,
        count=scrapes,
        interval_s=interval,
        window_s=window,
    )
    if sampler is None:
        note("no metrics source given: load samples left empty (every rate is 0)")
    admin = KafkaPythonAdmin(bootstrap, client_id="kpo-placement", security=security)
    try:
        snapshot = collect_snapshot(admin, caps, sampler)
    finally:
        admin.close()
    write_snapshot(out, snapshot)
    note(
        f"snapshot: {snapshot.brokers.num_rows} brokers, {snapshot.partitions.num_rows} "
        f"partitions, {snapshot.load_samples.num_rows} load samples -> {out}"
    )
    return out


@app.command()
def collect(
    out: Annotated[Path, typer.Option(help="Snapshot directory to write.")],
    bootstrap_server: Annotated[str, typer.Option(help="Kafka host:port list.")],
    capacities: CapacitiesOpt = None,
    disk_capacity: DiskOpt = "1000Gi",
    net_in_capacity: NetInOpt = "125M",
    net_out_capacity: NetOutOpt = "125M",
    metrics_url_template: TemplateOpt = None,
    metrics_url: UrlsOpt = [],  # noqa: B006 - typer reads the default
    prometheus_url: PromOpt = None,
    scrapes: ScrapesOpt = 3,
    scrape_interval: IntervalOpt = 10.0,
    window: WindowOpt = 300.0,
    command_config: CommandConfigOpt = None,
) -> None:
    """Snapshot a live cluster (Metadata, DescribeLogDirs, metrics) into a directory."""
    with _exit_on_errors():
        _collect(
            out,
            bootstrap_server,
            capacities,
            (disk_capacity, net_in_capacity, net_out_capacity),
            (metrics_url_template, metrics_url, prometheus_url),
            scrapes,
            scrape_interval,
            window,
            command_config,
        )


@app.command()
def synthesize(
    out: Annotated[Path, typer.Option(help="Snapshot directory to write.")],
    brokers: Annotated[int, typer.Option(help="Brokers in all.")] = 6,
    racks: Annotated[int, typer.Option(help="Racks (0: no broker.rack).")] = 3,
    partitions: Annotated[int, typer.Option(help="Partitions in all.")] = 200,
    rf: Annotated[int, typer.Option(help="Replication factor.")] = 3,
    empty_brokers: Annotated[int, typer.Option(help="Alive brokers holding nothing.")] = 0,
    dead_brokers: Annotated[int, typer.Option(help="Dead brokers holding replicas.")] = 0,
    samples: Annotated[int, typer.Option(help="Load samples per partition.")] = 12,
    noise: Annotated[float, typer.Option(help="Sigma of the lognormal sample noise.")] = 0.25,
    seed: Annotated[int, typer.Option(help="Seed of every draw.")] = 0,
) -> None:
    """Write a synthetic snapshot (skewed placement, lognormal sizes and rates)."""
    from kpo_placement.synthetic import SyntheticSpec, SyntheticSpecError, synthetic_cluster
    from kpo_placement.synthetic_snapshot import snapshot_from_model

    with _exit_on_errors():
        try:
            spec = SyntheticSpec(
                brokers=brokers,
                racks=racks,
                partitions=partitions,
                rf=rf,
                empty_brokers=empty_brokers,
                dead_brokers=dead_brokers,
                seed=seed,
            )
            model = synthetic_cluster(spec)
        except SyntheticSpecError as exc:
            raise OptionError(str(exc)) from exc
        taken = int(time.time() * 1000)
        snapshot = snapshot_from_model(
            model, taken_at_ms=taken, samples=samples, noise=noise, seed=seed
        )
        write_snapshot(out, snapshot)
        note(f"synthetic snapshot: {brokers} brokers, {partitions} partitions -> {out}")


def _kube_client(kubeconfig: Path | None) -> Any:
    from kubernetes import client
    from kubernetes import config as kube_config

    config: Any = kube_config  # the kubernetes package has no type hints
    if kubeconfig is None:
        try:
            config.load_incluster_config()
            return client.ApiClient()
        except kube_config.ConfigException:
            return config.new_client_from_config()
    return config.new_client_from_config(config_file=str(kubeconfig))


@app.command()
def plan(
    snapshot: Annotated[
        Path | None, typer.Argument(help="Snapshot directory (or use --bootstrap-server).")
    ] = None,
    out: Annotated[Path, typer.Option(help="Output directory.")] = Path("kpo-plan"),
    mode: Annotated[str, typer.Option(help="rebalance|add-brokers|remove-brokers|leaders")] = (
        "rebalance"
    ),
    brokers: Annotated[
        str | None, typer.Option(help="Broker ids to add or remove (comma-separated).")
    ] = None,
    throttle: Annotated[int, typer.Option(help="Replication throttle, bytes/s (0: none).")] = 50
    * 2**20,
    max_moves_per_broker: Annotated[
        int, typer.Option(help="Copies a broker sends or receives per wave (0: no cap).")
    ] = 5,
    max_bytes_per_wave: Annotated[
        str | None, typer.Option(help="Bytes copied per wave at most (e.g. 100Gi).")
    ] = None,
    max_replicas_per_broker: Annotated[int | None, typer.Option(help="Replica cap.")] = None,
    disk_threshold: Annotated[float, typer.Option(help="Max disk use fraction.")] = 0.8,
    tolerance: Annotated[float, typer.Option(help="Balance tolerance (max/mean).")] = 1.05,
    statistic: Annotated[str, typer.Option(help="Load statistic: percentile|mean.")] = (
        "percentile"
    ),
    percentile: Annotated[float, typer.Option(help="The percentile, in (0, 1].")] = 0.95,
    load_window: Annotated[
        float | None, typer.Option(help="Seconds of samples to use (default: all).")
    ] = None,
    scorer: Annotated[str, typer.Option(help="Candidate scoring: numpy|spark.")] = "numpy",
    master: Annotated[
        str | None, typer.Option(help="Spark master (default local[*] or spark-submit's).")
    ] = None,
    spark_conf: Annotated[list[str], typer.Option(help="Spark setting KEY=VALUE.")] = [],  # noqa: B006
    name: Annotated[
        str | None, typer.Option(help="Plan name (default from snapshot time).")
    ] = None,
    namespace: Annotated[str | None, typer.Option(help="Namespace of the objects.")] = None,
    apply: Annotated[bool, typer.Option(help="Create the objects in Kubernetes.")] = False,
    run_now: Annotated[bool, typer.Option(help="Do not suspend the created objects.")] = False,
    kubeconfig: Annotated[Path | None, typer.Option(help="Kubeconfig for --apply.")] = None,
    print_manifests: Annotated[bool, typer.Option(help="Also print the YAML.")] = False,
    seed: Annotated[int, typer.Option(help="Seed recorded with the plan.")] = 0,
    bootstrap_server: BootstrapOpt = None,
    command_config: CommandConfigOpt = None,
    capacities: CapacitiesOpt = None,
    disk_capacity: DiskOpt = "1000Gi",
    net_in_capacity: NetInOpt = "125M",
    net_out_capacity: NetOutOpt = "125M",
    metrics_url_template: TemplateOpt = None,
    metrics_url: UrlsOpt = [],  # noqa: B006
    prometheus_url: PromOpt = None,
    scrapes: ScrapesOpt = 3,
    scrape_interval: IntervalOpt = 10.0,
    window: WindowOpt = 300.0,
) -> None:
    """Plan a placement from a snapshot (or a live cluster); write manifests and a report."""
    if (snapshot is None) == (bootstrap_server is None):
        note("error: give a snapshot directory or --bootstrap-server (one of them)")
        raise typer.Exit(2)
    with _exit_on_errors():
        chosen = _broker_list(brokers)
        options = PlanOptions(
            mode=_mode(mode),
            brokers_to_add=chosen if mode == "add-brokers" else (),
            brokers_to_remove=chosen if mode == "remove-brokers" else (),
            max_replicas_per_broker=max_replicas_per_broker,
            disk_threshold=disk_threshold,
            balance_tolerance=tolerance,
            seed=seed,
        )
        chosen_statistic = _statistic(statistic)
        try:
            aggregate = AggregateOptions(load_window, percentile, chosen_statistic)
        except ValueError as exc:
            raise OptionError(f"load statistic: {exc}") from exc
        job = JobOptions(
            out=out,
            name=name,
            namespace=namespace,
            throttle=throttle or None,
            max_moves_per_broker=max_moves_per_broker or None,
            max_bytes_per_wave=(
                None
                if max_bytes_per_wave is None
                else parse_quantity(max_bytes_per_wave, "--max-bytes-per-wave") or None
            ),
            run_now=run_now,
            scorer=_scorer(scorer),
            aggregate=aggregate,
        )
        conf = dict(item.split("=", 1) for item in spark_conf if "=" in item)
        if bootstrap_server is not None:
            snapshot = _collect(
                out / "snapshot",
                bootstrap_server,
                capacities,
                (disk_capacity, net_in_capacity, net_out_capacity),
                (metrics_url_template, metrics_url, prometheus_url),
                scrapes,
                scrape_interval,
                window,
                command_config,
            )
        source = snapshot or out / "snapshot"
        read_snapshot(source)  # fail on a bad snapshot before Spark starts
        spark = spark_session(master, conf)
        try:
            result = run_plan(spark, source, options, job)
        finally:
            spark.stop()
        typer.echo(result.report_text)
        if print_manifests and result.manifests:
            typer.echo(manifests_yaml(result.manifests))
        note(f"plan {result.name}: {len(result.manifests)} object(s) written under {out}")
        if apply and result.manifests:
            created = apply_plan(result, _kube_client(kubeconfig), namespace or "default")
            state = "running" if run_now else "suspended"
            note(f"created ({state}): {', '.join(created)}")


def _choice(text: str, option: str, allowed: tuple[str, ...]) -> str:
    if text not in allowed:
        raise OptionError(f"{option}: {text!r} is not one of {', '.join(allowed)}")
    return text


def _mode(text: str) -> Mode:
    return cast(Mode, _choice(text, "--mode", MODES))


def _statistic(text: str) -> Statistic:
    return cast(Statistic, _choice(text, "--statistic", ("percentile", "mean")))


def _scorer(text: str) -> Scorer:
    return cast(Scorer, _choice(text, "--scorer", ("numpy", "spark")))


def main() -> None:
    """Run the command line (``python -m kpo_placement``)."""
    app()
