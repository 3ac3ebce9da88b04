"""Parse what the Java load generators print (pure logic).

* ``org.apache.kafka.tools.ProducerPerformance`` (kafka-tools) ends with a summary
  line: ``N records sent, R records/sec (M MB/sec), A ms avg latency, X ms max
  latency, P50 ms 50th, ...``; earlier progress lines lack the percentiles.
* ``KpoConsumePerf`` (``java/KpoConsumePerf.java`` in this package) prints one line
  ``records=N bytes=B elapsed_ms=T``.
* ``org.apache.kafka.tools.ConsumerPerformance`` (kafka-tools, consuming through a group)
  prints an optional header and one line of ten comma-separated columns
  (:class:`ConsumerPerformanceSummary`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_PRODUCER_SUMMARY = re.compile(
    r"(?P<records>\d+) records sent, (?P<rate>[\d.]+) records/sec \((?P<mib>[\d.]+) MB/sec\), "
    r"(?P<avg>[\d.]+) ms avg latency, (?P<max>[\d.]+) ms max latency, (?P<p50>\d+) ms 50th, "
    r"(?P<p95>\d+) ms 95th, (?P<p99>\d+) ms 99th"
)
_CONSUMER_SUMMARY = re.compile(
    r"records=(?P<records>\d+) bytes=(?P<bytes>\d+) elapsed_ms=(?P<ms>\d+)"
)


class PerfOutputError(ValueError):
    """The tool's output has no summary line (it failed or was cut short)."""


def _last_summary(pattern: re.Pattern[str], text: str, tool: str) -> re.Match[str]:
    """Return the last match of ``pattern`` (``tool``'s summary line) in ``text``.

    Raises:
        PerfOutputError: no match; the message quotes the end of ``text``.
    """
    matches = list(pattern.finditer(text))
    if not matches:
        raise PerfOutputError(f"no {tool} summary in output: {text[-500:]!r}")
    return matches[-1]


@dataclass(frozen=True)
class ProducerSummary:
    """The summary of one ProducerPerformance run.

    Attributes:
        records: records acknowledged.
        records_per_s: records per second over the whole run.
        avg_latency_ms: mean send-to-ack latency, ms.
        max_latency_ms: largest latency, ms.
        p50_ms: median latency, ms.
        p99_ms: 99th percentile latency, ms.
    """

    records: int
    records_per_s: float
    avg_latency_ms: float
    max_latency_ms: float
    p50_ms: int
    p99_ms: int

    def bytes_per_s(self, record_size: int) -> float:
        """Return the payload throughput in bytes/s for records of ``record_size`` bytes."""
        return self.records_per_s * record_size


@dataclass(frozen=True)
class ConsumerSummary:
    """The summary of one KpoConsumePerf run.

    Attributes:
        records: records consumed.
        bytes: payload bytes consumed (record values).
        elapsed_ms: time from the first poll to the last record, ms.
    """

    records: int
    bytes: int
    elapsed_ms: int

    @property
    def bytes_per_s(self) -> float:
        """Payload throughput in bytes/s (``bytes`` over ``elapsed_ms``, at least 1 ms)."""
        return self.bytes * 1000.0 / max(self.elapsed_ms, 1)


def parse_producer_output(text: str) -> ProducerSummary:
    """Return the last summary line of ProducerPerformance's stdout.

    Raises:
        PerfOutputError: no summary line in ``text``.
    """
    m = _last_summary(_PRODUCER_SUMMARY, text, "ProducerPerformance")
    return ProducerSummary(
        records=int(m["records"]),
        records_per_s=float(m["rate"]),
        avg_latency_ms=float(m["avg"]),
        max_latency_ms=float(m["max"]),
        p50_ms=int(m["p50"]),
        p99_ms=int(m["p99"]),
    )


def parse_consumer_output(text: str) -> ConsumerSummary:
    """Return the summary line of KpoConsumePerf's stdout.

    Raises:
        PerfOutputError: no summary line in ``text``.
    """
    m = _last_summary(_CONSUMER_SUMMARY, text, "KpoConsumePerf")
    return ConsumerSummary(int(m["records"]), int(m["bytes"]), int(m["ms"]))


_DATE = r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}:\d{3}"
_NUMBER = r"-?[\d.]+(?:E-?\d+)?|NaN|Infinity"
_CONSUMER_PERFORMANCE = re.compile(
    rf"^(?P<start>{_DATE}), (?P<end>{_DATE}), (?P<mib>{_NUMBER}), (?P<mib_s>{_NUMBER}), "
    rf"(?P<records>\d+), (?P<records_s>{_NUMBER}), (?P<rebalance_ms>-?\d+), "
    rf"(?P<fetch_ms>-?\d+), (?P<fetch_mib_s>{_NUMBER}), (?P<fetch_records_s>{_NUMBER})\s*$",
    re.MULTILINE,
)


@dataclass(frozen=True)
class ConsumerPerformanceSummary:
    """The summary line of Kafka's ``org.apache.kafka.tools.ConsumerPerformance``.

    Its columns (without ``--show-detailed-stats``): ``start.time, end.time,
    data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms,
    fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec``; its "MB" are MiB (bytes / 1024²) of
    record keys and values.

    Attributes:
        records: records consumed.
        mib: MiB consumed.
        mib_per_s: MiB/s over the whole run, the group join included.
        rebalance_ms: time the consumer spent joining its group before the first records, ms.
        fetch_ms: time spent fetching (the run minus the rebalance), ms.
        fetch_mib_per_s: MiB/s over ``fetch_ms``.
    """

    records: int
    mib: float
    mib_per_s: float
    rebalance_ms: int
    fetch_ms: int
    fetch_mib_per_s: float


def parse_consumer_performance(text: str) -> ConsumerPerformanceSummary:
    """Return the last summary line of ConsumerPerformance's stdout (header or not).

    Raises:
        PerfOutputError: no summary line in ``text``.
    """
    m = _last_summary(_CONSUMER_PERFORMANCE, text, "ConsumerPerformance")
    return ConsumerPerformanceSummary(
        records=int(m["records"]),
        mib=float(m["mib"]),
        mib_per_s=float(m["mib_s"]),
        rebalance_ms=int(m["rebalance_ms"]),
        fetch_ms=int(m["fetch_ms"]),
        fetch_mib_per_s=float(m["fetch_mib_s"]),
    )
