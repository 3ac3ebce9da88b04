"""Produce and consume throughput (Java load generators against a running cluster)."""

from __future__ import annotations

from dataclasses import asdict

from kpo_bench.admin import admin_session, create_topic
from kpo_bench.clusters import Cluster
from kpo_bench.java_tools import JavaTools, run_consumer_perf, run_producer_perf
from kpo_bench.results import Measured
from kpo_bench.settings import MIB, Workload

#: Topic written by the produce test and read back by the consume test.
PRODUCE_TOPIC = "bench-produce"
#: Topic of the same shape written and read once, untimed, before the tests.
WARMUP_TOPIC = "bench-warmup"


class EmptyTopicError(RuntimeError):
    """The consume test found nothing to read (the produce test failed)."""


def measure_produce(cluster: Cluster, tools: JavaTools, workload: Workload) -> Measured:
    """Create :data:`PRODUCE_TOPIC` (RF 3, min ISR 2) and fill it with ProducerPerformance.

    Every record is ``workload.record_size`` bytes, sent with ``workload.producer_props``
    (acks=all, batched). First ``workload.warmup_records`` go, untimed, to
    :data:`WARMUP_TOPIC`, so that JVM brokers are measured with compiled (JIT) code.
    The value is ProducerPerformance's records/s times the record size, in MiB/s of
    payload.

    Raises:
        kpo_bench.java_tools.JavaToolError: the producer failed.
        kpo_bench.admin.BenchTimeoutError: the topic did not become ready.
    """
    bootstrap = cluster.bootstrap_servers
    with admin_session(bootstrap) as admin:
        for topic in (WARMUP_TOPIC, PRODUCE_TOPIC):
            create_topic(
                admin,
                topic,
                partitions=workload.produce_partitions,
                replication_factor=3,
                config={"min.insync.replicas": "2"},
            )
    warmup = run_producer_perf(
        tools,
        bootstrap,
        WARMUP_TOPIC,
        workload.warmup_records,
        workload.record_size,
        workload.producer_props,
        workload.tool_timeout_s(workload.warmup_records * workload.record_size),
    )
    summary = run_producer_perf(
        tools,
        bootstrap,
        PRODUCE_TOPIC,
        workload.produce_records,
        workload.record_size,
        workload.producer_props,
        workload.tool_timeout_s(workload.produce_bytes),
    )
    value = summary.bytes_per_s(workload.record_size) / MIB
    details = {
        "producer": asdict(summary),
        "payload_bytes": workload.produce_bytes,
        "warmup_producer": asdict(warmup),
    }
    return Measured(value, details)


def measure_consume(cluster: Cluster, tools: JavaTools, workload: Workload) -> Measured:
    """Read :data:`PRODUCE_TOPIC` from the start with KpoConsumePerf (group-less consumer).

    :data:`WARMUP_TOPIC` is read first, untimed. The value is record payload bytes over
    the time from the first poll to the last record, in MiB/s. Run after
    :func:`measure_produce`.

    Raises:
        kpo_bench.java_tools.JavaToolError: the consumer failed or timed out.
        EmptyTopicError: the topic held no records.
    """
    bootstrap = cluster.bootstrap_servers
    warmup_bytes = workload.warmup_records * workload.record_size
    warmup = run_consumer_perf(
        tools, bootstrap, WARMUP_TOPIC, workload.tool_timeout_s(warmup_bytes)
    )
    summary = run_consumer_perf(
        tools, bootstrap, PRODUCE_TOPIC, workload.tool_timeout_s(workload.produce_bytes)
    )
    if summary.records == 0:
        raise EmptyTopicError(f"{PRODUCE_TOPIC} held no records to consume")
    details = {"consumer": asdict(summary), "warmup_consumer": asdict(warmup)}
    return Measured(summary.bytes_per_s / MIB, details)
