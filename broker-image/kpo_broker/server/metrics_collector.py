"""The broker's Prometheus collector: every metric, built when ``/metrics`` is scraped.

Pure logic over read-only views of the broker (the Protocols and :class:`BrokerState`
of :mod:`kpo_broker.server.metrics`), so that nothing
is kept up to date on the request path for gauges: log sizes and offsets, partition,
leader and ISR counts, controller state, quota byte rates and fetcher lag are read
from the live objects at each scrape. Counters come from
:class:`~kpo_broker.server.metrics.BrokerTopicStats` and
:class:`~kpo_broker.server.metrics.RequestStats`.

Names follow what Prometheus' JMX exporter makes of Kafka's MBeans with its Kafka
rules (``kafka.server<type=BrokerTopicMetrics, name=BytesInPerSec, topic=t><>Count``
becomes ``kafka_server_brokertopicmetrics_bytesin_total{topic="t"}``); a broker-wide
total is the same family without the ``topic`` label. ``docs/reference/metrics.md``
lists every metric with its type, labels, unit and MBean.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from kpo_broker.controller.states import PartitionState
from kpo_broker.security.authorizer import AuthorizationStats
from kpo_broker.server.metrics import (
    REQUEST_TIME_BUCKETS_S,
    AuthenticationStats,
    BrokerState,
    BrokerTopicStats,
    ControllerView,
    FetchSessionCacheView,
    GroupCoordinatorView,
    LogCleanerView,
    LogView,
    PartitionView,
    RequestStats,
    TopicCounters,
)

#: (family name without ``_total``, :class:`TopicCounters` field, help text).
_TOPIC_COUNTERS: tuple[tuple[str, str, str], ...] = (
    ("bytesin", "bytes_in", "Bytes appended by produce requests."),
    ("bytesout", "bytes_out", "Bytes returned to consumer fetches."),
    ("messagesin", "messages_in", "Records appended by produce requests."),
    ("bytesrejected", "bytes_rejected", "Produced bytes refused as too large."),
    ("replicationbytesin", "replication_bytes_in", "Bytes a follower appended from leaders."),
    ("replicationbytesout", "replication_bytes_out", "Bytes returned to follower fetches."),
)

#: The ``le`` label of each request time bucket.
_BUCKET_LABELS = (*(repr(bound) for bound in REQUEST_TIME_BUCKETS_S), "+Inf")

_TOPIC_PREFIX = "kafka_server_brokertopicmetrics_"
_REPLICA_MANAGER = "kafka_server_replicamanager_"
_CONTROLLER = "kafka_controller_kafkacontroller_"


def _topic_counter_families(stats: BrokerTopicStats) -> Iterator[Metric]:
    topics = sorted(stats.topics().items())
    for suffix, attribute, help_text in _TOPIC_COUNTERS:
        family = CounterMetricFamily(_TOPIC_PREFIX + suffix, help_text, labels=["topic"])
        family.add_metric([], _count(stats.all_topics, attribute))
        for topic, counters in topics:
            family.add_metric([topic], _count(counters, attribute))
        yield family


def _count(counters: TopicCounters, attribute: str) -> int:
    value: int = getattr(counters, attribute)
    return value


def _log_families(logs: Sequence[LogView]) -> Iterator[Metric]:
    labels = ["topic", "partition"]
    size = GaugeMetricFamily("kafka_log_log_size", "Log size in bytes.", labels=labels)
    start = GaugeMetricFamily("kafka_log_log_logstartoffset", "Log start offset.", labels=labels)
    end = GaugeMetricFamily("kafka_log_log_logendoffset", "Log end offset (LEO).", labels=labels)
    segments = GaugeMetricFamily(
        "kafka_log_log_numlogsegments", "Number of log segments.", labels=labels
    )
    for log in logs:
        key = [log.topic, str(log.partition)]
        size.add_metric(key, log.size_in_bytes)
        start.add_metric(key, log.log_start_offset)
        end.add_metric(key, log.log_end_offset)
        segments.add_metric(key, len(log.segments))
    yield from (size, start, end, segments)


@dataclass
class _ReplicaCounts:
    partitions: int = 0
    leaders: int = 0
    under_replicated: int = 0
    under_min_isr: int = 0
    at_min_isr: int = 0


def _replication_factor(partition: PartitionView) -> int:
    """Kafka's replication factor during a reassignment: the replicas not being added."""
    if not partition.adding_replicas:
        return len(partition.replicas)
    return len(set(partition.replicas) - set(partition.adding_replicas))


def _partition_families(state: BrokerState, counts: _ReplicaCounts) -> Iterator[Metric]:
    labels = ["topic", "partition"]
    under = GaugeMetricFamily(
        "kafka_cluster_partition_underreplicated",
        "1 when led here and the ISR is smaller than the replication factor.",
        labels=labels,
    )
    under_min = GaugeMetricFamily(
        "kafka_cluster_partition_underminisr",
        "1 when led here and the ISR is smaller than min.insync.replicas.",
        labels=labels,
    )
    isr_count = GaugeMetricFamily(
        "kafka_cluster_partition_insyncreplicascount",
        "ISR size when led here, else 0.",
        labels=labels,
    )
    replicas_count = GaugeMetricFamily(
        "kafka_cluster_partition_replicascount",
        "Replication factor when led here, else 0.",
        labels=labels,
    )
    for partition in state.partitions:
        key = [partition.topic, str(partition.partition)]
        counts.partitions += 1
        leader = partition.is_leader
        rf = _replication_factor(partition) if leader else 0
        isr = len(partition.isr) if leader else 0
        is_under = leader and isr < rf
        min_isr = state.min_insync_replicas(partition.topic) if leader else 0
        is_under_min = leader and isr < min_isr
        counts.leaders += leader
        counts.under_replicated += is_under
        counts.under_min_isr += is_under_min
        counts.at_min_isr += leader and isr == min_isr
        under.add_metric(key, int(is_under))
        under_min.add_metric(key, int(is_under_min))
        isr_count.add_metric(key, isr)
        replicas_count.add_metric(key, rf)
    yield from (under, under_min, isr_count, replicas_count)


def _log_dir_failure_families(state: BrokerState) -> Iterator[Metric]:
    yield GaugeMetricFamily(
        _REPLICA_MANAGER + "offlinereplicacount",
        "Partition replicas hosted here whose log dir is offline.",
        value=state.offline_replica_count,
    )
    yield GaugeMetricFamily(
        "kafka_log_logmanager_offlinelogdirectorycount",
        "Log dirs taken offline by an I/O error.",
        value=state.offline_log_dir_count,
    )


def _replica_manager_families(counts: _ReplicaCounts) -> Iterator[Metric]:
    for name, help_text, value in (
        ("partitioncount", "Partition replicas hosted here.", counts.partitions),
        ("leadercount", "Partitions led here.", counts.leaders),
        (
            "underreplicatedpartitions",
            "Partitions led here whose ISR is smaller than the replication factor.",
            counts.under_replicated,
        ),
        (
            "underminisrpartitioncount",
            "Partitions led here whose ISR is smaller than min.insync.replicas.",
            counts.under_min_isr,
        ),
        (
            "atminisrpartitioncount",
            "Partitions led here whose ISR size equals min.insync.replicas.",
            counts.at_min_isr,
        ),
    ):
        yield GaugeMetricFamily(_REPLICA_MANAGER + name, help_text, value=value)


def controller_gauges(controller: ControllerView | None) -> dict[str, int]:
    """Kafka's ``KafkaController`` gauges; all 0 except on the active controller.

    Returns:
        ``activecontrollercount`` (1 on the active controller), ``offlinepartitionscount``
        (partitions in OfflinePartition state, topics being deleted excluded),
        ``globaltopiccount`` and ``globalpartitioncount`` (partitions the partition
        state machine tracks).
    """
    gauges = {
        "activecontrollercount": 0,
        "offlinepartitionscount": 0,
        "globaltopiccount": 0,
        "globalpartitioncount": 0,
    }
    if controller is None or not controller.is_active:
        return gauges
    context = controller.context
    # Copies first: the controller's event thread changes these while we read them.
    states = dict(context.partition_states)
    deleting = set(context.topics_with_deletion_started)
    gauges["activecontrollercount"] = 1
    gauges["offlinepartitionscount"] = sum(
        1
        for tp, state in states.items()
        if state is PartitionState.OFFLINE_PARTITION and tp[0] not in deleting
    )
    gauges["globaltopiccount"] = len(context.all_topics)
    gauges["globalpartitioncount"] = len(states)
    return gauges


def _controller_families(controller: ControllerView | None) -> Iterator[Metric]:
    helps = {
        "activecontrollercount": "1 on the active controller, else 0.",
        "offlinepartitionscount": "Partitions without a live leader (active controller only).",
        "globaltopiccount": "Topics in the cluster (active controller only).",
        "globalpartitioncount": "Partitions in the cluster (active controller only).",
    }
    for name, value in controller_gauges(controller).items():
        yield GaugeMetricFamily(_CONTROLLER + name, helps[name], value=value)


def _quota_families(state: BrokerState) -> Iterator[Metric]:
    for side, quota in (("leader", state.leader_quota), ("follower", state.follower_quota)):
        prefix = f"kafka_server_{side}replication_"
        total = CounterMetricFamily(
            prefix + "throttled_bytes",
            f"Bytes of {side}-side throttled replicas recorded in the replication quota.",
            value=quota.total_recorded_bytes if quota is not None else 0,
        )
        rate = GaugeMetricFamily(
            prefix + "byte_rate",
            f"Byte rate the {side} replication quota measures now, bytes/s.",
            value=quota.rate() if quota is not None else 0.0,
        )
        yield from (total, rate)


def _fetcher_families(lags: Iterable[int]) -> Iterator[Metric]:
    family = GaugeMetricFamily(
        "kafka_server_replicafetchermanager_maxlag",
        "Largest lag in messages of a partition this broker follows.",
        labels=["clientId"],
    )
    family.add_metric(["Replica"], max(lags, default=0))
    yield family


def _fetch_session_families(cache: FetchSessionCacheView | None) -> Iterator[Metric]:
    prefix = "kafka_server_fetchsessioncache_"
    yield GaugeMetricFamily(
        prefix + "numincrementalfetchsessions",
        "Incremental fetch sessions cached (KIP-227).",
        value=cache.size if cache is not None else 0,
    )
    yield GaugeMetricFamily(
        prefix + "numincrementalfetchpartitionscached",
        "Partitions over every cached incremental fetch session.",
        value=cache.total_partitions if cache is not None else 0,
    )
    yield CounterMetricFamily(
        prefix + "incrementalfetchsessionevictions",
        "Incremental fetch sessions evicted to make room for new ones.",
        value=cache.evictions if cache is not None else 0,
    )


def _request_families(stats: RequestStats) -> Iterator[Metric]:
    requests = CounterMetricFamily(
        "kafka_network_requestmetrics_requests",
        "Requests answered, by request type and version.",
        labels=["request", "version"],
    )
    for (name, version), count in sorted(stats.counts().items()):
        requests.add_metric([name, str(version)], count)
    yield requests
    times = HistogramMetricFamily(
        "kafka_network_requestmetrics_totaltime_seconds",
        "Time from a request read to its response written, seconds.",
        labels=["request"],
    )
    for name, histogram in sorted(stats.times().items()):
        cumulative = 0
        buckets: list[tuple[str, float]] = []
        for bound, count in zip(
            _BUCKET_LABELS,
            histogram.bucket_counts,
            strict=True,
        ):
            cumulative += count
            buckets.append((bound, cumulative))
        times.add_metric([name], buckets, histogram.sum_s)
    yield times


def _log_cleaner_families(cleaner: LogCleanerView | None) -> Iterator[Metric]:
    """Kafka's ``kafka.log:type=LogCleaner`` / ``type=LogCleanerManager`` gauges."""
    if cleaner is None:
        return
    families: dict[str, GaugeMetricFamily] = {}
    for mbean_type, name, tags, value in cleaner.gauges():
        family_name = f"kafka_log_{mbean_type.lower()}_{name.replace('-', '_').lower()}"
        family = families.get(family_name)
        if family is None:
            family = GaugeMetricFamily(
                family_name, f"kafka.log:type={mbean_type},name={name}", labels=sorted(tags)
            )
            families[family_name] = family
        family.add_metric([tags[k] for k in sorted(tags)], value)
    yield from families.values()


def _group_coordinator_families(coordinator: GroupCoordinatorView | None) -> Iterator[Metric]:
    """Kafka's ``GroupMetadataManager`` gauges and ``group-coordinator-metrics`` counters.

    ``kafka.coordinator.group<type=GroupMetadataManager, name=NumGroups>`` becomes
    ``kafka_coordinator_group_groupmetadatamanager_numgroups``;
    ``kafka.server<type=group-coordinator-metrics>`` attribute ``group-completed-rebalance-count``
    becomes ``kafka_server_group_coordinator_metrics_group_completed_rebalance_total``.
    """
    if coordinator is None:
        return
    gauges, counts = coordinator.metrics()
    for name, value in gauges.items():
        yield GaugeMetricFamily(
            f"kafka_coordinator_group_groupmetadatamanager_{name.lower()}",
            f"kafka.coordinator.group:type=GroupMetadataManager,name={name}",
            value=value,
        )
    for name, count in counts.items():
        family = name.removesuffix("-count").replace("-", "_")
        yield CounterMetricFamily(
            f"kafka_server_group_coordinator_metrics_{family}",
            f"kafka.server:type=group-coordinator-metrics,{name}",
            value=count,
        )


def _authentication_families(stats: AuthenticationStats) -> Iterator[Metric]:
    counts = stats.counts()
    listeners = sorted({listener for listener, _ in counts})
    for success, name, help_text in (
        (True, "successful", "Connections that authenticated (TLS and/or SASL), by listener."),
        (False, "failed", "Connections whose authentication failed and were closed, by listener."),
    ):
        family = CounterMetricFamily(
            f"kafka_server_socket_server_metrics_{name}_authentication",
            help_text,
            labels=["listener"],
        )
        for listener in listeners:
            family.add_metric([listener], counts.get((listener, success), 0))
        yield family


def _authorization_families(stats: AuthorizationStats) -> Iterator[Metric]:
    allowed = CounterMetricFamily(
        "kafka_server_authorizer_metrics_authorization_allowed",
        "Authorization checks allowed by the ACL authorizer (authorizer-metrics).",
    )
    allowed.add_metric([], stats.allowed)
    yield allowed
    denied = CounterMetricFamily(
        "kafka_server_authorizer_metrics_authorization_denied",
        "Requested operations refused by the ACL authorizer, by resource type and operation.",
        labels=["resource_type", "operation"],
    )
    for (resource_type, operation), count in sorted(dict(stats.denied).items()):
        denied.add_metric([resource_type, operation], count)
    yield denied


class BrokerMetricsCollector(Collector):
    """Builds every broker metric from a fresh :class:`BrokerState` at each scrape.

    Args:
        state: returns the broker's state now, or None while the broker is not running
            (then only the request metrics are collected).
        request_stats: the socket server's request counters.
        authentication_stats: the socket server's authentication counters.
        authorization_stats: the ACL authorizer's counters (None: no authorizer, no metric).
    """

    def __init__(
        self,
        state: Callable[[], BrokerState | None],
        request_stats: RequestStats,
        authentication_stats: AuthenticationStats | None = None,
        authorization_stats: AuthorizationStats | None = None,
    ) -> None:
        self._state = state
        self._request_stats = request_stats
        self._authentication_stats = authentication_stats or AuthenticationStats()
        self._authorization_stats = authorization_stats

    def collect(self) -> Iterator[Metric]:
        """Yield every metric family (the :class:`Collector` interface)."""
        yield from _request_families(self._request_stats)
        yield from _authentication_families(self._authentication_stats)
        if self._authorization_stats is not None:
            yield from _authorization_families(self._authorization_stats)
        state = self._state()
        if state is None:
            return
        yield from _topic_counter_families(state.topic_stats)
        yield from _log_families(state.logs)
        counts = _ReplicaCounts()
        yield from _partition_families(state, counts)
        yield from _replica_manager_families(counts)
        yield from _log_dir_failure_families(state)
        yield from _controller_families(state.controller)
        yield from _quota_families(state)
        yield from _fetcher_families(state.fetcher_lags)
        yield from _fetch_session_families(state.fetch_sessions)
        yield from _log_cleaner_families(state.log_cleaner)
        yield from _group_coordinator_families(state.group_coordinator)
