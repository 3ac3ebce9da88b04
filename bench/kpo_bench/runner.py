"""Run every measurement against one system: start its cluster, measure, stop, clean up."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable

from rich.console import Console

from kpo_bench.admin import admin_session, wait_for_brokers
from kpo_bench.catch_up import measure_catch_up
from kpo_bench.clusters import Cluster
from kpo_bench.failover import measure_failover
from kpo_bench.groups import measure_group_consume, measure_group_rebalance
from kpo_bench.java_tools import JavaTools
from kpo_bench.machine import load_average
from kpo_bench.results import (
    CATCH_UP,
    CONSUME,
    CONSUME_SASL_SSL,
    FAILOVER,
    GROUP_CONSUME,
    GROUP_REBALANCE,
    PRODUCE,
    PRODUCE_SASL_SSL,
    THROTTLE_METRICS,
    Measured,
    MetricSpec,
    SystemResult,
    format_deviation,
    format_value,
)
from kpo_bench.settings import Workload
from kpo_bench.throttle_experiments import measure_throttled_moves
from kpo_bench.throttle_plan import EXPERIMENTS, TOLERANCE, ThrottleExperiment
from kpo_bench.throughput import Transport, measure_consume, measure_produce

#: ``--only`` choices: the group of measurements to run instead of all of them.
ONLY_THROTTLE = "throttle"
#: The consumer group measurements (after a produce run that fills the topic they read).
ONLY_GROUPS = "groups"
#: Produce and consume over PLAINTEXT and over SASL_SSL (a cluster with both listeners).
ONLY_TLS = "tls"
ONLY_CHOICES = (ONLY_THROTTLE, ONLY_GROUPS, ONLY_TLS)

Step = tuple[MetricSpec, Callable[[], Measured]]


def _throttle_step(
    cluster: Cluster, tools: JavaTools, workload: Workload, experiment: ThrottleExperiment
) -> Callable[[], Measured]:
    return lambda: measure_throttled_moves(cluster, tools, workload, experiment)


def plan_steps(
    cluster: Cluster,
    tools: JavaTools,
    workload: Workload,
    only: str | None = None,
    secured: Transport | None = None,
) -> list[Step]:
    """Return the measurements to run, in order: all of them, or the ``only`` group.

    The throttled-reassignment experiments and the group rebalance run before the failover
    test, which kills a broker. :data:`ONLY_TLS` produces over PLAINTEXT, then over
    ``secured`` (the cluster's SASL_SSL listener), then consumes each topic the same way.

    Raises:
        ValueError: ``only`` is not one of :data:`ONLY_CHOICES`, or is :data:`ONLY_TLS`
            without ``secured``.
    """
    throttle: list[Step] = [
        (metric, _throttle_step(cluster, tools, workload, experiment))
        for metric, experiment in zip(THROTTLE_METRICS, EXPERIMENTS, strict=True)
    ]
    produce: Step = (PRODUCE, lambda: measure_produce(cluster, tools, workload))
    group_consume: Step = (GROUP_CONSUME, lambda: measure_group_consume(cluster, tools, workload))
    rebalance: Step = (GROUP_REBALANCE, lambda: measure_group_rebalance(cluster, workload))
    if only == ONLY_THROTTLE:
        return throttle
    if only == ONLY_GROUPS:
        return [produce, group_consume, rebalance]
    if only == ONLY_TLS:
        if secured is None:
            raise ValueError("--only tls needs a cluster with a SASL_SSL listener")
        return [
            produce,
            (PRODUCE_SASL_SSL, lambda: measure_produce(cluster, tools, workload, secured)),
            (CONSUME, lambda: measure_consume(cluster, tools, workload)),
            (CONSUME_SASL_SSL, lambda: measure_consume(cluster, tools, workload, secured)),
        ]
    if only is not None:
        raise ValueError(f"unknown measurement group {only!r}; choose from {ONLY_CHOICES}")
    return [
        produce,
        (CONSUME, lambda: measure_consume(cluster, tools, workload)),
        group_consume,
        (CATCH_UP, lambda: measure_catch_up(cluster, tools, workload)),
        *throttle,
        rebalance,
        (FAILOVER, lambda: measure_failover(cluster, workload)),
    ]


def run_system(
    result: SystemResult,
    cluster: Cluster,
    tools: JavaTools,
    workload: Workload,
    console: Console,
    keep_data: bool = False,
    only: str | None = None,
    secured: Transport | None = None,
    steps: Callable[[], list[Step]] | None = None,
) -> SystemResult:
    """Start ``cluster``, run the measurements of :func:`plan_steps`, then stop it.

    A failing measurement is recorded in ``result.errors`` and the next one still runs;
    the cluster is always stopped, and its log dirs deleted unless ``keep_data``.

    Args:
        result: receives the values (its ``system`` and ``version`` already set).
        cluster: a cluster of 3 brokers (ids 0, 1, 2), not started.
        tools: the Java load generators.
        workload: sizes and client settings.
        console: progress output.
        keep_data: keep the brokers' log dirs after the run.
        only: None for every measurement, or one of :data:`ONLY_CHOICES`.
        secured: the cluster's SASL_SSL listener and client settings (:data:`ONLY_TLS`).
        steps: called once the brokers are registered, returns the measurements to run
            instead of :func:`plan_steps` (``--only controller``).

    Returns:
        ``result``, filled in.

    Raises:
        kpo_devenv.process.ProcessStartError: the cluster did not start.
        kpo_bench.admin.BenchTimeoutError: the brokers did not all register.
    """
    label = f"[bold]{result.system}[/bold]"
    console.print(f"{label}: starting 3 brokers")
    result.details["run"] = {"load_average_before": load_average()}
    cluster.start()
    try:
        with admin_session(cluster.bootstrap_servers) as admin:
            wait_for_brokers(admin, set(cluster.brokers))
        planned = (
            steps() if steps is not None else plan_steps(cluster, tools, workload, only, secured)
        )
        for metric, step in planned:
            console.print(f"{label}: {metric.label} ...")
            began = time.monotonic()
            try:
                measured = step()
            except Exception as exc:  # record and go on with the next metric
                result.record_error(metric, exc)
                console.print(f"{label}: [red]{metric.label} failed[/red]: {exc}")
                continue
            result.record(metric, measured)
            took = time.monotonic() - began
            estimate = measured.details.get("estimate_s")
            versus = ""
            if isinstance(estimate, float):
                deviation = format_deviation(measured.value / estimate - 1.0, TOLERANCE)
                versus = f", estimate {estimate:.2f} s: {deviation}"
            console.print(
                f"{label}: {metric.label} = {format_value(measured.value, metric.unit)}"
                f"{versus} (step took {took:.0f} s)"
            )
    finally:
        cluster.stop()
        result.details["run"]["load_average_after"] = load_average()
        if not keep_data:
            for broker in cluster.brokers.values():
                shutil.rmtree(broker.log_dir, ignore_errors=True)
    return result
