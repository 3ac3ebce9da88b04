"""Produce and consume throughput (Java load generators against a running cluster)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

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


@dataclass(frozen=True)
class Transport:
    """How the load generators connect: a listener and the client settings it needs.

    Attributes:
        listener: the listener name; None: the cluster's first listener (PLAINTEXT).
        client_config: a Java client properties file (``--producer.config``, and
            KpoConsumePerf's config file), e.g. ``SASL_SSL`` with SCRAM; None: none.
        suffix: appended to the topic names, so each transport writes and reads its own.
    """

    listener: str | None = None
    client_config: Path | None = None
    suffix: str = ""

    def bootstrap(self, cluster: Cluster) -> str:
        """Return ``host:port,...`` of the running brokers' listener."""
        if self.listener is None:
            return cluster.bootstrap_servers
        return cluster.bootstrap_servers_for(self.listener)

    def topic(self, name: str) -> str:
        """Return this transport's topic of ``name``."""
        return name + self.suffix


#: The cluster's first listener, without client settings.
PLAINTEXT = Transport()


def measure_produce(
    cluster: Cluster, tools: JavaTools, workload: Workload, transport: Transport = PLAINTEXT
) -> Measured:
    """Create :data:`PRODUCE_TOPIC` (RF 3, min ISR 2) and fill it with ProducerPerformance.

    Every record is ``workload.record_size`` bytes, sent with ``workload.producer_props``
    (acks=all, batched). First ``workload.warmup_records`` go, untimed, to
    :data:`WARMUP_TOPIC`, so that JVM brokers are measured with compiled (JIT) code.
    The value is ProducerPerformance's records/s times the record size, in MiB/s of
    payload. With a ``transport`` the producer connects to its listener with its settings
    and writes that transport's topics (created, as always, over the first listener).

    Raises:
        kpo_bench.java_tools.JavaToolError: the producer failed.
        kpo_bench.admin.BenchTimeoutError: the topic did not become ready.
    """
    bootstrap = transport.bootstrap(cluster)
    warmup_topic, produce_topic = transport.topic(WARMUP_TOPIC), transport.topic(PRODUCE_TOPIC)
    with admin_session(cluster.bootstrap_servers) as admin:
        for topic in (warmup_topic, produce_topic):
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
        warmup_topic,
        workload.warmup_records,
        workload.record_size,
        workload.producer_props,
        workload.tool_timeout_s(workload.warmup_records * workload.record_size),
        transport.client_config,
    )
    summary = run_producer_perf(
        tools,
        bootstrap,
        produce_topic,
        workload.produce_records,
        workload.record_size,
        workload.producer_props,
        workload.tool_timeout_s(workload.produce_bytes),
        transport.client_config,
    )
    value = summary.bytes_per_s(workload.record_size) / MIB
    details = {
        "producer": asdict(summary),
        "payload_bytes": workload.produce_bytes,
        "warmup_producer": asdict(warmup),
    }
    return Measured(value, details)


def measure_consume(
    cluster: Cluster, tools: JavaTools, workload: Workload, transport: Transport = PLAINTEXT
) -> Measured:
    """Read :data:`PRODUCE_TOPIC` from the start with KpoConsumePerf (group-less consumer).

    :data:`WARMUP_TOPIC` is read first, untimed. The value is record payload bytes over
    the time from the first poll to the last record, in MiB/s. Run after
    :func:`measure_produce` with the same ``transport``.

    Raises:
        kpo_bench.java_tools.JavaToolError: the consumer failed or timed out.
        EmptyTopicError: the topic held no records.
    """
    bootstrap = transport.bootstrap(cluster)
    config = transport.client_config
    warmup_bytes = workload.warmup_records * workload.record_size
    warmup = run_consumer_perf(
        tools,
        bootstrap,
        transport.topic(WARMUP_TOPIC),
        workload.tool_timeout_s(warmup_bytes),
        config,
    )
    topic = transport.topic(PRODUCE_TOPIC)
    summary = run_consumer_perf(
        tools, bootstrap, topic, workload.tool_timeout_s(workload.produce_bytes), config
    )
    if summary.records == 0:
        raise EmptyTopicError(f"{topic} held no records to consume")
    details = {"consumer": asdict(summary), "warmup_consumer": asdict(warmup)}
    return Measured(summary.bytes_per_s / MIB, details)
