"""Where load counters come from: the brokers' ``/metrics`` pages, or a Prometheus server.

Both sources yield :class:`~kpo_placement.load_rates.Scrape` values; turning them into
per-partition rates is :mod:`kpo_placement.load_rates`' job.

* :func:`scrape_brokers` reads every broker's Prometheus endpoint ``count`` times,
  ``interval_s`` apart (the brokers' ``kpo.metrics.port``; Apache Kafka brokers behind the
  JMX exporter expose the same names).
* :func:`query_prometheus` asks a Prometheus server's instant-query API
  (``GET /api/v1/query?query=...&time=...``) for the same counters at ``count`` instants
  spread over the past ``window_s`` seconds, so no waiting is needed. Prometheus does not
  know which broker leads a partition, so per-partition gauges are reduced with ``max``
  (the leader's LEO is the largest), topic counters with ``sum``.
"""

from __future__ import annotations

import json
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

from kpo_kafka.topic_partition import TopicPartition
from kpo_placement.load_rates import (
    LOG_END_OFFSET,
    LOG_SIZE,
    TOPIC_BYTES_IN,
    TOPIC_BYTES_OUT,
    BrokerMetrics,
    MetricsFormatError,
    Scrape,
    combine_brokers,
    parse_exposition,
    samples_by_name,
)

LoadSampler = Callable[[Mapping[TopicPartition, int]], list[Scrape]]
"""Given partition -> leader id (Metadata), return scrapes in time order."""
Fetch = Callable[[str, float], str]
"""``fetch(url, timeout_s) -> body``; raises ``OSError`` when the URL cannot be read."""


class MetricsUnavailableError(RuntimeError):
    """No load counters could be read (every broker endpoint or the Prometheus server failed)."""


def http_get(url: str, timeout_s: float) -> str:
    """GET ``url`` and return the body as text (UTF-8).

    Raises:
        OSError: Connection failure, timeout or an HTTP error status.
    """
    with urllib.request.urlopen(url, timeout=timeout_s) as response:
        body: bytes = response.read()
    return body.decode("utf-8")


def endpoint_urls(broker_ids: list[int], template: str) -> dict[int, str]:
    """Expand a URL template with ``{id}`` for each broker id.

    Example: ``http://kafka-{id}.kafka:9308/metrics`` (a StatefulSet's pods).
    """
    return {b: template.format(id=b) for b in broker_ids}


def fetch_broker_metrics(
    urls: Mapping[int, str], timeout_s: float = 5.0, fetch: Fetch = http_get
) -> tuple[dict[int, BrokerMetrics], dict[int, str]]:
    """Read each broker's metrics page once.

    Returns:
        ``(metrics, failures)``: broker id -> parsed metrics for the pages read, and broker
        id -> reason for those that failed (unreachable or unparsable).
    """
    metrics: dict[int, BrokerMetrics] = {}
    failures: dict[int, str] = {}
    for broker_id, url in sorted(urls.items()):
        try:
            metrics[broker_id] = parse_exposition(fetch(url, timeout_s))
        except (OSError, MetricsFormatError) as exc:
            failures[broker_id] = f"{url}: {exc}"
    return metrics, failures


def scrape_brokers(
    urls: Mapping[int, str],
    leaders: Mapping[TopicPartition, int],
    count: int = 2,
    interval_s: float = 10.0,
    timeout_s: float = 5.0,
    fetch: Fetch = http_get,
    clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    sleep: Callable[[float], None] = time.sleep,
) -> list[Scrape]:
    """Scrape every broker ``count`` times, ``interval_s`` seconds apart.

    Args:
        urls: Broker id -> metrics URL.
        leaders: Partition -> leader broker id (Metadata), to read gauges on the leader.
        count: Scrape rounds (>= 2 for one rate sample per partition).
        interval_s: Seconds between the starts of two rounds.
        timeout_s: Per-request timeout, seconds.
        fetch: The HTTP getter (tests pass an in-memory one).
        clock_ms: Wall clock in ms since the epoch.
        sleep: Sleeps for seconds.

    Returns:
        One :class:`Scrape` per round in which at least one broker answered.

    Raises:
        ValueError: ``count`` < 2 or ``interval_s`` <= 0.
        MetricsUnavailableError: No broker answered in any round.
    """
    if count < 2 or interval_s <= 0:
        raise ValueError("need at least 2 scrapes, a positive interval apart")
    scrapes: list[Scrape] = []
    reasons: dict[int, str] = {}
    for round_number in range(count):
        if round_number:
            sleep(interval_s)
        started = clock_ms()
        metrics, failures = fetch_broker_metrics(urls, timeout_s, fetch)
        reasons.update(failures)
        if metrics:
            scrapes.append(combine_brokers(started, metrics, leaders))
    if not scrapes:
        detail = "; ".join(reasons[b] for b in sorted(reasons)) or "no endpoint given"
        raise MetricsUnavailableError(f"no broker metrics could be read: {detail}")
    return scrapes


PROMETHEUS_QUERIES = {
    LOG_END_OFFSET: f"max by (topic, partition) ({LOG_END_OFFSET})",
    LOG_SIZE: f"max by (topic, partition) ({LOG_SIZE})",
    TOPIC_BYTES_IN: f"sum by (topic) ({TOPIC_BYTES_IN})",
    TOPIC_BYTES_OUT: f"sum by (topic) ({TOPIC_BYTES_OUT})",
}
"""Metric name -> the PromQL instant query that reads it cluster-wide."""


def _vector(body: str, query: str) -> list[tuple[dict[str, str], float]]:
    """Decode an instant-query answer of ``resultType`` ``vector``."""
    try:
        answer: Any = json.loads(body)
        if answer.get("status") != "success":
            raise MetricsUnavailableError(f"{query}: {answer.get('error', 'query failed')}")
        data = answer["data"]
        if data["resultType"] != "vector":
            raise MetricsUnavailableError(f"{query}: expected a vector, got {data['resultType']}")
        return [(dict(r["metric"]), float(r["value"][1])) for r in data["result"]]
    except (json.JSONDecodeError, KeyError, TypeError, IndexError, ValueError) as exc:
        if isinstance(exc, MetricsUnavailableError):
            raise
        raise MetricsUnavailableError(f"{query}: malformed answer: {exc}") from exc


def query_prometheus(
    base_url: str,
    window_s: float,
    count: int = 5,
    now_ms: int | None = None,
    timeout_s: float = 10.0,
    fetch: Fetch = http_get,
) -> list[Scrape]:
    """Read the load counters at ``count`` instants evenly spread over the last ``window_s``.

    Args:
        base_url: The Prometheus server, e.g. ``http://prometheus:9090``.
        window_s: Length of the window ending now, seconds.
        count: Instants (>= 2); the first is ``now - window_s``, the last ``now``.
        now_ms: End of the window, ms since the epoch (default: now).
        timeout_s: Per-request timeout, seconds.
        fetch: The HTTP getter (tests pass an in-memory one).

    Returns:
        One :class:`Scrape` per instant (gauges reduced with ``max``, counters with ``sum``).

    Raises:
        ValueError: ``count`` < 2 or ``window_s`` <= 0.
        MetricsUnavailableError: The server cannot be reached or answers with an error.
    """
    if count < 2 or window_s <= 0:
        raise ValueError("need at least 2 instants over a positive window")
    end_ms = int(time.time() * 1000) if now_ms is None else now_ms
    step_ms = int(window_s * 1000) / (count - 1)
    scrapes: list[Scrape] = []
    for i in range(count):
        at_ms = int(end_ms - window_s * 1000 + i * step_ms)
        series: list[tuple[str, dict[str, str], float]] = []
        for name, query in PROMETHEUS_QUERIES.items():
            params = urllib.parse.urlencode({"query": query, "time": f"{at_ms / 1000:.3f}"})
            url = f"{base_url.rstrip('/')}/api/v1/query?{params}"
            try:
                body = fetch(url, timeout_s)
            except OSError as exc:
                raise MetricsUnavailableError(f"Prometheus at {base_url}: {exc}") from exc
            series.extend((name, labels, value) for labels, value in _vector(body, query))
        metrics = samples_by_name(series)
        scrapes.append(combine_brokers(at_ms, {-1: metrics}, {}))
    return scrapes


def load_sampler(
    *,
    template: str | None = None,
    urls: Mapping[int, str] | None = None,
    prometheus_url: str | None = None,
    count: int = 3,
    interval_s: float = 10.0,
    window_s: float = 300.0,
    fetch: Fetch = http_get,
    sleep: Callable[[float], None] = time.sleep,
) -> LoadSampler | None:
    """Return the sampler of the configured source, ``None`` when none is configured.

    Prometheus wins when ``prometheus_url`` is given (``count`` instants over
    ``window_s``); else the brokers' pages are scraped ``count`` times ``interval_s``
    apart: ``template`` (with ``{id}``) expanded for every broker that leads a partition
    (only leaders count produce and consume bytes), then ``urls`` (broker id -> URL) on top.
    ``fetch`` and ``sleep`` are for tests.
    """
    if prometheus_url:
        server = prometheus_url

        def from_prometheus(leaders: Mapping[TopicPartition, int]) -> list[Scrape]:
            return query_prometheus(server, window_s, count=count, fetch=fetch)

        return from_prometheus
    if not template and not urls:
        return None
    explicit = dict(urls or {})

    def from_brokers(leaders: Mapping[TopicPartition, int]) -> list[Scrape]:
        mapping = endpoint_urls(sorted(set(leaders.values())), template) if template else {}
        mapping.update(explicit)
        return scrape_brokers(mapping, leaders, count, interval_s, fetch=fetch, sleep=sleep)

    return from_brokers
