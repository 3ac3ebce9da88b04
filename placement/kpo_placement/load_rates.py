"""Per-partition load rates from successive metric scrapes (pure logic, no I/O).

Kafka exports byte rates per *topic* (``BrokerTopicMetrics`` ``BytesInPerSec`` /
``BytesOutPerSec``, counted by the broker that leads the partition), not per partition.
Per partition it exports the log gauges ``Log.LogEndOffset`` and ``Log.Size``. In
Prometheus form (the JMX-exporter naming the brokers follow) these are:

========================================================= ================= ========
metric                                                    labels            kind
========================================================= ================= ========
``kafka_log_log_logendoffset``                            topic, partition  gauge
``kafka_log_log_size`` (bytes)                            topic, partition  gauge
``kafka_server_brokertopicmetrics_bytesin_total`` (B)     topic             counter
``kafka_server_brokertopicmetrics_bytesout_total`` (B)    topic             counter
========================================================= ================= ========

A :class:`Scrape` holds, at one instant, the leader's log-end offset (LEO) and log size of
each partition and each topic's byte counters summed over the brokers. Between two scrapes
``a`` and ``b`` (``dt`` seconds apart) the rates of partition ``p`` of topic ``t`` are:

* ``messages_in_per_s = max(LEO_b - LEO_a, 0) / dt`` (the LEO advances by one per record);
* ``bytes_in_per_s``: the topic's produce rate (counter delta / ``dt``) split between the
  topic's partitions in proportion to their ``messages_in_per_s`` (in proportion to their
  log-size growth when no record count moved, equally when neither moved). Without the topic
  counter, the partition's own log-size growth ``max(size_b - size_a, 0) / dt`` is used
  (retention deleting a segment then hides that interval's growth);
* ``bytes_out_per_s``: the topic's consume rate split in proportion to ``bytes_in_per_s``
  (equally when nothing was produced), 0 without the topic counter.

A counter that went down was reset (broker restart) and its new value is the delta, as in
Prometheus's ``rate()``. Rates are bytes/s and records/s; timestamps are ms since the epoch.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from kpo_kafka.topic_partition import TopicPartition

LOG_END_OFFSET = "kafka_log_log_logendoffset"
"""Gauge: log-end offset of a partition's log on one broker (labels topic, partition)."""
LOG_SIZE = "kafka_log_log_size"
"""Gauge: bytes of a partition's log on one broker (labels topic, partition)."""
TOPIC_BYTES_IN = "kafka_server_brokertopicmetrics_bytesin_total"
"""Counter: bytes produced to a topic's partitions led by one broker (label topic)."""
TOPIC_BYTES_OUT = "kafka_server_brokertopicmetrics_bytesout_total"
"""Counter: bytes fetched by consumers from a topic's partitions on one broker (label topic)."""


class MetricsFormatError(ValueError):
    """A metrics text is not in the Prometheus exposition format, or a label is malformed."""


@dataclass(frozen=True)
class BrokerMetrics:
    """The samples of one broker's metrics page that the load model uses.

    Attributes:
        log_end_offsets: ``(topic, partition)`` -> LEO of the replica on that broker.
        log_sizes: ``(topic, partition)`` -> replica log size, bytes.
        topic_bytes_in: topic -> produce counter, bytes.
        topic_bytes_out: topic -> consume counter, bytes.
    """

    log_end_offsets: dict[TopicPartition, float] = field(default_factory=dict)
    log_sizes: dict[TopicPartition, float] = field(default_factory=dict)
    topic_bytes_in: dict[str, float] = field(default_factory=dict)
    topic_bytes_out: dict[str, float] = field(default_factory=dict)


def _partition_key(labels: Mapping[str, str], name: str) -> TopicPartition:
    try:
        return TopicPartition(labels["topic"], int(labels["partition"]))
    except (KeyError, ValueError) as exc:
        raise MetricsFormatError(f"{name}: needs labels topic and an integer partition") from exc


def samples_by_name(
    series: Iterable[tuple[str, Mapping[str, str], float]],
) -> BrokerMetrics:
    """Keep the load-model metrics among ``(name, labels, value)`` series.

    Series of other names are ignored. Gauges of one partition seen under several label
    sets (e.g. a current and a future log during a KIP-113 move) keep the largest value;
    topic counters under several label sets add up.

    Raises:
        MetricsFormatError: A kept series lacks its ``topic``/``partition`` label.
    """
    out = BrokerMetrics()
    for name, labels, value in series:
        if name in (LOG_END_OFFSET, LOG_SIZE):
            key = _partition_key(labels, name)
            target = out.log_end_offsets if name == LOG_END_OFFSET else out.log_sizes
            target[key] = max(target.get(key, value), value)
        elif name in (TOPIC_BYTES_IN, TOPIC_BYTES_OUT):
            if "topic" not in labels:  # the broker-wide total has no topic label
                continue
            totals = out.topic_bytes_in if name == TOPIC_BYTES_IN else out.topic_bytes_out
            totals[labels["topic"]] = totals.get(labels["topic"], 0.0) + value
    return out


def parse_exposition(text: str) -> BrokerMetrics:
    """Parse one broker's ``/metrics`` page (Prometheus text format 0.0.4).

    Raises:
        MetricsFormatError: The text cannot be parsed.
    """
    try:
        series = [
            (s.name, s.labels, float(s.value))
            for family in text_string_to_metric_families(text)
            for s in family.samples
        ]
    except (ValueError, TypeError, IndexError) as exc:
        raise MetricsFormatError(f"not Prometheus text format: {exc}") from exc
    return samples_by_name(series)


@dataclass(frozen=True)
class Scrape:
    """The cluster's load counters at one instant (see the module docstring).

    Attributes:
        timestamp_ms: When the values were read, ms since the epoch.
        log_end_offsets: ``(topic, partition)`` -> the leader's LEO.
        log_sizes: ``(topic, partition)`` -> the leader's log size, bytes.
        topic_bytes_in: topic -> produce counter summed over brokers, bytes.
        topic_bytes_out: topic -> consume counter summed over brokers, bytes.
    """

    timestamp_ms: int
    log_end_offsets: dict[TopicPartition, float]
    log_sizes: dict[TopicPartition, float]
    topic_bytes_in: dict[str, float]
    topic_bytes_out: dict[str, float]


def _leader_or_max(
    attribute: str, per_broker: Mapping[int, BrokerMetrics], leaders: Mapping[TopicPartition, int]
) -> dict[TopicPartition, float]:
    merged: dict[TopicPartition, float] = {}
    from_leader: set[TopicPartition] = set()
    for broker_id, metrics in per_broker.items():
        values: dict[TopicPartition, float] = getattr(metrics, attribute)
        for key, value in values.items():
            if leaders.get(key) == broker_id:
                merged[key] = value
                from_leader.add(key)
            elif key not in from_leader:
                merged[key] = max(merged.get(key, value), value)
    return merged


def combine_brokers(
    timestamp_ms: int,
    per_broker: Mapping[int, BrokerMetrics],
    leaders: Mapping[TopicPartition, int],
) -> Scrape:
    """Merge the brokers' pages of one scrape round into a :class:`Scrape`.

    Per-partition gauges are taken from the partition's leader (``leaders``: partition ->
    broker id, Metadata); when the leader's page lacks them, the largest value reported by
    any broker (followers never exceed the leader's LEO). Topic counters are summed.
    """
    offsets = _leader_or_max("log_end_offsets", per_broker, leaders)
    sizes = _leader_or_max("log_sizes", per_broker, leaders)
    totals_in: dict[str, float] = defaultdict(float)
    totals_out: dict[str, float] = defaultdict(float)
    for metrics in per_broker.values():
        for topic, value in metrics.topic_bytes_in.items():
            totals_in[topic] += value
        for topic, value in metrics.topic_bytes_out.items():
            totals_out[topic] += value
    return Scrape(timestamp_ms, offsets, sizes, dict(totals_in), dict(totals_out))


def _counter_delta(before: float, after: float) -> float:
    """Increase of a counter; a decrease means a reset, and the new value is the increase."""
    return after - before if after >= before else after


def _split(total: float, weights: Mapping[TopicPartition, float]) -> dict[TopicPartition, float]:
    """Split ``total`` between the keys of ``weights`` in proportion (equally if all zero)."""
    mass = sum(weights.values())
    if mass > 0:
        return {k: total * w / mass for k, w in weights.items()}
    return {k: total / len(weights) for k in weights}


def rates_between(before: Scrape, after: Scrape) -> list[dict[str, Any]]:
    """Per-partition rates over the interval between two scrapes (module docstring rules).

    Returns:
        One ``load_samples.parquet`` row per partition present in both scrapes, stamped
        with ``after.timestamp_ms``, sorted by topic and partition.

    Raises:
        ValueError: ``after`` is not later than ``before``.
    """
    dt = (after.timestamp_ms - before.timestamp_ms) / 1000.0
    if dt <= 0:
        raise ValueError("scrapes must be in increasing time order")
    keys = sorted(
        k
        for k in set(after.log_end_offsets) | set(after.log_sizes)
        if k in before.log_end_offsets or k in before.log_sizes
    )
    messages = {
        k: max(after.log_end_offsets.get(k, 0.0) - before.log_end_offsets.get(k, 0.0), 0.0) / dt
        for k in keys
    }
    growth = {
        k: max(after.log_sizes.get(k, 0.0) - before.log_sizes.get(k, 0.0), 0.0) / dt for k in keys
    }
    by_topic: dict[str, list[TopicPartition]] = defaultdict(list)
    for key in keys:
        by_topic[key[0]].append(key)
    rows: list[dict[str, Any]] = []
    for topic, members in sorted(by_topic.items()):
        if topic in before.topic_bytes_in and topic in after.topic_bytes_in:
            produced = _counter_delta(before.topic_bytes_in[topic], after.topic_bytes_in[topic])
            weights = {k: messages[k] for k in members}
            if not any(weights.values()):
                weights = {k: growth[k] for k in members}
            bytes_in = _split(produced / dt, weights)
        else:
            bytes_in = {k: growth[k] for k in members}
        bytes_out = dict.fromkeys(members, 0.0)
        if topic in before.topic_bytes_out and topic in after.topic_bytes_out:
            consumed = _counter_delta(before.topic_bytes_out[topic], after.topic_bytes_out[topic])
            bytes_out = _split(consumed / dt, bytes_in)
        rows.extend(
            {
                "timestamp_ms": after.timestamp_ms,
                "topic": key[0],
                "partition": key[1],
                "bytes_in_per_s": bytes_in[key],
                "bytes_out_per_s": bytes_out[key],
                "messages_in_per_s": messages[key],
            }
            for key in members
        )
    return rows


def load_sample_rows(scrapes: Sequence[Scrape]) -> list[dict[str, Any]]:
    """Return the ``load_samples.parquet`` rows of each pair of successive scrapes.

    N scrapes give N-1 samples per partition; scrapes are sorted by time first and a scrape
    at the same instant as the previous one is dropped.
    """
    ordered: list[Scrape] = []
    for scrape in sorted(scrapes, key=lambda s: s.timestamp_ms):
        if not ordered or scrape.timestamp_ms > ordered[-1].timestamp_ms:
            ordered.append(scrape)
    rows: list[dict[str, Any]] = []
    for before, after in pairwise(ordered):
        rows.extend(rates_between(before, after))
    return rows
