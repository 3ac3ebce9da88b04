"""``docs/reference/metrics.md``: the operator's and the brokers' Prometheus metrics, from code.

The operator's come from a fresh :class:`kpo_operator.metrics.OperatorMetrics` (its
prometheus-client metrics); the brokers' from one scrape of a
:class:`kpo_broker.server.metrics_collector.BrokerMetricsCollector` over a small stand-in
broker (one topic, one partition, one request of each kind, every optional part present), so
that every family the collector can build appears with its labels.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector, CollectorRegistry
from tools.docgen.common import code, header, table

from kpo_broker.coordinator.group.group_metrics import (
    GroupCoordinatorCounters,
    group_metadata_gauges,
)
from kpo_broker.log.log_cleaner import CleanerConfig, LogCleaner
from kpo_broker.security.authorizer import AuthorizationStats
from kpo_broker.server.metrics import (
    AuthenticationStats,
    BrokerState,
    BrokerTopicStats,
    RequestStats,
)
from kpo_broker.server.metrics_collector import BrokerMetricsCollector
from kpo_kafka.topic_partition import TopicPartition
from kpo_operator.metrics import OperatorMetrics

PAGE = "docs/reference/metrics.md"
SOURCES = (
    "operator/kpo_operator/metrics.py",
    "broker-image/kpo_broker/server/metrics_collector.py",
    "broker-image/kpo_broker/server/metrics.py",
)

_TOPIC = "orders"
_METADATA_API_KEY = 3
_FETCH_API_KEY = 1


@dataclass(frozen=True)
class Family:
    """One metric family as a scrape shows it.

    Attributes:
        name: the name of its samples (``_total`` for counters).
        type: ``counter``, ``gauge`` or ``histogram``.
        labels: its labels; in brackets when some samples lack it (a broker-wide total).
        help: its help text.
    """

    name: str
    type: str
    labels: str
    help: str


def _label_names(family: Metric) -> str:
    seen: list[str] = []
    everywhere: set[str] | None = None
    for sample in family.samples:
        names = [n for n in sample.labels if n != "le"]
        for name in names:
            if name not in seen:
                seen.append(name)
        everywhere = set(names) if everywhere is None else everywhere & set(names)
    return ", ".join(
        code(n) if everywhere is not None and n in everywhere else f"[{code(n)}]" for n in seen
    )


def families(collected: Iterable[Metric], skip: Sequence[str] = ()) -> list[Family]:
    """Return the families of a scrape, sorted by name, leaving out names starting ``skip``."""
    out = {}
    for family in collected:
        if family.name.startswith(tuple(skip)) and skip:
            continue
        name = family.name + ("_total" if family.type == "counter" else "")
        out[name] = Family(name, family.type, _label_names(family), family.documentation)
    return [out[name] for name in sorted(out)]


class _Log:
    topic = _TOPIC
    partition = 0
    log_start_offset = 0
    log_end_offset = 0
    size_in_bytes = 0
    segments: tuple[object, ...] = ()


class _Partition:
    topic = _TOPIC
    partition = 0
    is_leader = True
    isr = (0,)
    replicas = (0,)
    adding_replicas: tuple[int, ...] = ()


class _Context:
    all_topics = frozenset({_TOPIC})
    partition_states: Mapping[TopicPartition, object] = {}
    topics_with_deletion_started: frozenset[str] = frozenset()


class _Controller:
    is_active = True
    context = _Context()


class _Quota:
    total_recorded_bytes = 0

    def rate(self) -> float:
        return 0.0


class _FetchSessions:
    size = 0
    total_partitions = 0
    evictions = 0


class _GroupCoordinator:
    def metrics(self) -> tuple[dict[str, int], dict[str, int]]:
        return group_metadata_gauges([]), GroupCoordinatorCounters().counts()


class _Request:
    replica_id = -1


class _FollowerRequest:
    replica_id = 1


def broker_collector(log_dir: Path) -> Collector:
    """Return a broker collector over a stand-in broker with every optional part present."""
    topic_stats = BrokerTopicStats()
    topic_stats.record_produce(_TOPIC, 0, 0)
    requests = RequestStats()
    requests.record(_METADATA_API_KEY, 12, _Request(), 0.001)
    requests.record(_FETCH_API_KEY, 16, _FollowerRequest(), 0.001)
    authentications = AuthenticationStats()
    authentications.record("SASL_SSL", True)
    authorizations = AuthorizationStats()
    authorizations.denied[("Topic", "Read")] = 0
    cleaner = LogCleaner(CleanerConfig(), [log_dir], lambda: [], lambda _tp: None)
    state = BrokerState(
        logs=[_Log()],
        partitions=[_Partition()],
        topic_stats=topic_stats,
        controller=_Controller(),
        leader_quota=_Quota(),
        follower_quota=_Quota(),
        fetcher_lags=(0,),
        log_cleaner=cleaner,
        group_coordinator=_GroupCoordinator(),
        fetch_sessions=_FetchSessions(),
    )
    return BrokerMetricsCollector(lambda: state, requests, authentications, authorizations)


def operator_registry() -> CollectorRegistry:
    """Return a fresh operator registry with one series of each metric (so labels show)."""
    metrics = OperatorMetrics()
    for metric in vars(metrics).values():
        if isinstance(metric, MetricWrapperBase):
            names = getattr(metric, "_labelnames", ())
            if names:
                metric.labels(*names)
    return metrics.registry


def _family_table(found: Sequence[Family]) -> str:
    return table(
        ["metric", "type", "labels", "help"],
        ([code(f.name), f.type, f.labels, f.help] for f in found),
    )


def generate() -> str:
    """Return the page."""
    operator = families(operator_registry().collect(), skip=("process_",))
    broker = families(broker_collector(Path("/var/lib/kafka/data")).collect())
    text = header(
        "Metrics",
        SOURCES,
        "The operator and each broker serve Prometheus metrics (text format) at "
        "`GET /metrics`. Labels in brackets are absent from one series of the family: "
        "the broker-wide total of a per-topic family has no `topic` label.",
    )
    text += "## Operator\n\n"
    text += (
        "Served on `KPO_METRICS_PORT` (see [Operator settings](operator-settings.md)); "
        "besides these, prometheus-client's `process_*` metrics of the operator process "
        "(memory, CPU, open files).\n\n"
    )
    text += _family_table(operator)
    text += "\n## Broker\n\n"
    text += (
        "Served on the broker's `metrics.port` (bound to `metrics.host`; see "
        "[Broker configs](broker-configs.md)); `0`, the default, serves nothing. Names are "
        "those Prometheus' JMX exporter gives Kafka's MBeans with its usual Kafka rules "
        "(`kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec,topic=T` becomes "
        '`kafka_server_brokertopicmetrics_bytesin_total{topic="T"}`), so that dashboards '
        "and alerts written for Kafka work unchanged. Counters start at 0 when the broker "
        "starts; gauges are read from the broker's state at each scrape.\n\n"
    )
    text += _family_table(broker)
    return text
