"""The Java load generators, run against either system with ``java -cp``.

Produce load is Kafka's own ``org.apache.kafka.tools.ProducerPerformance``
(kafka-tools). Consume load is :file:`java/KpoConsumePerf.java`, compiled here with
``javac`` against kafka-clients: a group-less ``assign()`` consumer reading every partition
from the log start, the same on both systems. Consume load through a consumer group is
Kafka's own ``org.apache.kafka.tools.ConsumerPerformance`` with ``--group``.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kpo_bench.perf_output import (
    ConsumerPerformanceSummary,
    ConsumerSummary,
    ProducerSummary,
    parse_consumer_output,
    parse_consumer_performance,
    parse_producer_output,
)
from kpo_devenv.apache_kafka import java_command

PRODUCER_PERFORMANCE = "org.apache.kafka.tools.ProducerPerformance"
CONSUMER_PERFORMANCE = "org.apache.kafka.tools.ConsumerPerformance"
CONSUMER_MAIN = "KpoConsumePerf"
CONSUMER_SOURCE = Path(__file__).with_name("java") / f"{CONSUMER_MAIN}.java"


class JavaToolError(RuntimeError):
    """A Java tool could not be built or exited with an error (the message has its output)."""


@dataclass(frozen=True)
class JavaTools:
    """Where the load generators come from.

    Attributes:
        kafka_classpath: ``<libs>/*`` of the installed Kafka.
        classes_dir: folder holding the compiled ``KpoConsumePerf.class``.
        heap_mb: heap of each tool JVM, MiB.
    """

    kafka_classpath: str
    classes_dir: Path
    heap_mb: int = 512


def compile_consumer(kafka_classpath: str, classes_dir: Path) -> JavaTools:
    """Compile ``KpoConsumePerf.java`` into ``classes_dir``.

    Raises:
        JavaToolError: no ``javac`` on ``PATH`` (install a JDK, e.g. Debian's
            ``default-jdk-headless``) or the compilation failed.
    """
    javac = shutil.which("javac")
    if javac is None:
        raise JavaToolError("javac not found: install a JDK (apt-get install default-jdk-headless)")
    classes_dir.mkdir(parents=True, exist_ok=True)
    argv = [javac, "-nowarn", "-cp", kafka_classpath, "-d", str(classes_dir), str(CONSUMER_SOURCE)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    if done.returncode != 0:
        raise JavaToolError(f"javac failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return JavaTools(kafka_classpath, classes_dir)


def _run(argv: list[str], timeout_s: float, what: str) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as exc:
        raise JavaToolError(f"{what} did not finish within {timeout_s:.0f} s") from exc
    if done.returncode != 0:
        raise JavaToolError(
            f"{what} exited with {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
        )
    return done.stdout


def run_producer_perf(
    tools: JavaTools,
    bootstrap_servers: str,
    topic: str,
    records: int,
    record_size: int,
    producer_props: Mapping[str, str],
    timeout_s: float,
    client_config: Path | None = None,
) -> ProducerSummary:
    """Send ``records`` records of ``record_size`` bytes to ``topic`` as fast as acks allow.

    Args:
        tools: the Java tools.
        bootstrap_servers: ``host:port,...``.
        topic: an existing topic (records spread over its partitions).
        records: number of records.
        record_size: value size, bytes.
        producer_props: producer configs (``acks``, ``batch.size``, ``linger.ms``...).
        timeout_s: kill the tool after this many seconds.
        client_config: a client properties file (``--producer.config``), e.g. the
            ``SASL_SSL`` settings; ``producer_props`` win over it.

    Raises:
        JavaToolError: the tool failed or timed out.
        kpo_bench.perf_output.PerfOutputError: it printed no summary.
    """
    props = [f"bootstrap.servers={bootstrap_servers}"]
    props += [f"{k}={v}" for k, v in producer_props.items()]
    args = ["--topic", topic, "--num-records", str(records), "--record-size", str(record_size)]
    args += ["--throughput", "-1", "--producer-props", *props]
    if client_config is not None:
        args += ["--producer.config", str(client_config)]
    argv = java_command(tools.kafka_classpath, tools.heap_mb, PRODUCER_PERFORMANCE, args)
    return parse_producer_output(_run(argv, timeout_s, "ProducerPerformance"))


def run_consumer_perf(
    tools: JavaTools,
    bootstrap_servers: str,
    topic: str,
    timeout_s: float,
    client_config: Path | None = None,
) -> ConsumerSummary:
    """Read every record of ``topic`` from the start with KpoConsumePerf.

    ``client_config`` is a client properties file (e.g. the ``SASL_SSL`` settings).

    Raises:
        JavaToolError: the tool failed or timed out.
        kpo_bench.perf_output.PerfOutputError: it printed no summary.
    """
    classpath = f"{tools.classes_dir}:{tools.kafka_classpath}"
    args = [bootstrap_servers, topic, str(int(timeout_s))]
    args += [str(client_config)] if client_config is not None else []
    argv = java_command(classpath, tools.heap_mb, CONSUMER_MAIN, args)
    return parse_consumer_output(_run(argv, timeout_s + 60, "KpoConsumePerf"))


def run_consumer_performance(
    tools: JavaTools,
    bootstrap_servers: str,
    topic: str,
    group: str,
    records: int,
    timeout_s: float,
) -> ConsumerPerformanceSummary:
    """Read ``records`` records of ``topic`` through ``group`` with Kafka's ConsumerPerformance.

    The group is new, so the consumer starts at the log start (``auto.offset.reset`` is
    ``earliest`` in the tool). ``--timeout 60000``: the tool gives up after 60 s without a
    record (its default, 10 s, is short for a group join on a loaded machine).

    Raises:
        JavaToolError: the tool failed or timed out.
        kpo_bench.perf_output.PerfOutputError: it printed no summary.
    """
    args = ["--bootstrap-server", bootstrap_servers, "--topic", topic, "--group", group]
    args += ["--messages", str(records), "--timeout", "60000"]
    argv = java_command(tools.kafka_classpath, tools.heap_mb, CONSUMER_PERFORMANCE, args)
    return parse_consumer_performance(_run(argv, timeout_s, "ConsumerPerformance"))
