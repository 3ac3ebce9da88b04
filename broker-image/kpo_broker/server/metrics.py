"""Hot-path counters of the broker's Prometheus metrics: topic traffic and request times.

Kafka keeps these as Yammer meters and histograms (``BrokerTopicMetrics``,
``RequestMetrics``); here they are plain integers and floats, bumped once per partition
of a produce or fetch and once per request, and turned into Prometheus samples only
when ``GET /metrics`` is scraped (:mod:`kpo_broker.server.metrics_collector`). Nothing
here locks: every caller runs on the broker's event loop, and the collector runs there
too (:mod:`kpo_broker.server.metrics_http`).

The gauges (log sizes, partition and leader counts, ISR state, controller state,
quota rates) are not kept here at all: the collector reads them at scrape time from
a :class:`BrokerState`, whose read-only views (Protocols) are declared at the end of this
module. ``docs/reference/metrics.md`` lists every metric.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Mapping, Sequence, Sized
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any, Protocol

from kpo_broker.protocol.api import api_spec
from kpo_kafka.topic_partition import TopicPartition

#: Upper bounds of the request time histogram buckets, seconds (``+Inf`` is implied).
#: A fetch may wait ``max_wait_ms`` (500 ms by default) before it is answered.
REQUEST_TIME_BUCKETS_S: tuple[float, ...] = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
)

#: Api key of Fetch, whose requests Kafka counts as ``FetchConsumer`` or ``FetchFollower``.
_FETCH_API_KEY = 1


@dataclass(slots=True)
class TopicCounters:
    """Running totals of one topic (or of all topics), as Kafka's ``BrokerTopicMetrics``.

    Every field only grows while the broker runs. Byte counts are record batch bytes
    as sent on the wire (headers included), not payload bytes.

    Attributes:
        bytes_in: bytes appended by produce requests on partitions led here (BytesInPerSec).
        bytes_out: bytes returned to consumer fetches (BytesOutPerSec).
        messages_in: records appended by produce requests (MessagesInPerSec).
        bytes_rejected: bytes of produced partitions refused because a batch was over
            ``max.message.bytes`` or the append over ``segment.bytes`` (BytesRejectedPerSec).
        replication_bytes_in: bytes a follower here appended from its leader
            (ReplicationBytesInPerSec).
        replication_bytes_out: bytes returned to follower fetches (ReplicationBytesOutPerSec).
    """

    bytes_in: int = 0
    bytes_out: int = 0
    messages_in: int = 0
    bytes_rejected: int = 0
    replication_bytes_in: int = 0
    replication_bytes_out: int = 0


class BrokerTopicStats:
    """Per-topic and broker-wide traffic counters (Kafka's ``BrokerTopicStats``).

    Each ``record_*`` call adds to the topic's counters and to :attr:`all_topics`; it is
    a dictionary lookup and two additions, meant to be called once per partition of a
    request, never per record.

    Attributes:
        all_topics: the broker-wide totals (the metrics without a ``topic`` label).
    """

    def __init__(self) -> None:
        self.all_topics = TopicCounters()
        self._topics: dict[str, TopicCounters] = {}

    def topic(self, topic: str) -> TopicCounters:
        """Return ``topic``'s counters, created at zero on first use."""
        counters = self._topics.get(topic)
        if counters is None:
            counters = self._topics[topic] = TopicCounters()
        return counters

    def topics(self) -> dict[str, TopicCounters]:
        """Return a copy of topic name -> counters, for the collector."""
        return dict(self._topics)

    def remove_topic(self, topic: str) -> None:
        """Forget ``topic``'s counters (its last partition left this broker, as Kafka)."""
        self._topics.pop(topic, None)

    def record_produce(self, topic: str, num_bytes: int, num_messages: int) -> None:
        """Count one partition's successful produce append: bytes and records."""
        counters = self.topic(topic)
        counters.bytes_in += num_bytes
        counters.messages_in += num_messages
        total = self.all_topics
        total.bytes_in += num_bytes
        total.messages_in += num_messages

    def record_rejected(self, topic: str, num_bytes: int) -> None:
        """Count one partition's produced bytes refused as too large."""
        self.topic(topic).bytes_rejected += num_bytes
        self.all_topics.bytes_rejected += num_bytes

    def record_fetch(self, topic: str, num_bytes: int, from_follower: bool) -> None:
        """Count bytes returned for one partition of a fetch.

        Args:
            topic: the partition's topic.
            num_bytes: record batch bytes in the response.
            from_follower: a replica fetch (``replica_id`` >= 0): counted as
                replication bytes out, else as bytes out.
        """
        counters = self.topic(topic)
        total = self.all_topics
        if from_follower:
            counters.replication_bytes_out += num_bytes
            total.replication_bytes_out += num_bytes
        else:
            counters.bytes_out += num_bytes
            total.bytes_out += num_bytes

    def record_replication_in(self, topic: str, num_bytes: int) -> None:
        """Count bytes a follower appended from one partition of a fetch response."""
        self.topic(topic).replication_bytes_in += num_bytes
        self.all_topics.replication_bytes_in += num_bytes


@dataclass(slots=True)
class RequestTimes:
    """A histogram of one request type's total times.

    Attributes:
        bucket_counts: requests per bucket of :data:`REQUEST_TIME_BUCKETS_S`, not
            cumulative; the last slot counts requests slower than the last bound.
        sum_s: total time of all requests, seconds.
    """

    bucket_counts: list[int] = field(
        default_factory=lambda: [0] * (len(REQUEST_TIME_BUCKETS_S) + 1)
    )
    sum_s: float = 0.0

    @property
    def count(self) -> int:
        """Number of requests observed."""
        return sum(self.bucket_counts)


class RequestStats:
    """Request counts and total times by request type (Kafka's ``RequestMetrics``).

    The request type is Kafka's api name (``Produce``, ``Metadata``...), except that
    Fetch is split into ``FetchConsumer`` and ``FetchFollower`` by its ``replica_id``,
    as Kafka does. Total time runs from the whole request frame having been read to
    the response having been written (Kafka's ``TotalTimeMs``, here in seconds).
    """

    def __init__(self) -> None:
        self._counts: dict[tuple[str, int], int] = {}
        self._times: dict[str, RequestTimes] = {}
        self._names: dict[int, str] = {}

    def request_name(self, api_key: int, body: Any) -> str:
        """Return Kafka's request metric name for a request with ``api_key`` and ``body``.

        Raises:
            KeyError: ``api_key`` is not an api this broker knows.
        """
        if api_key == _FETCH_API_KEY:
            replica_id = getattr(body, "replica_id", None)
            return (
                "FetchFollower" if replica_id is not None and replica_id >= 0 else "FetchConsumer"
            )
        name = self._names.get(api_key)
        if name is None:
            name = self._names[api_key] = api_spec(api_key).name
        return name

    def record(self, api_key: int, api_version: int, body: Any, seconds: float) -> None:
        """Count one answered request and add its total time (seconds) to the histogram."""
        name = self.request_name(api_key, body)
        key = (name, api_version)
        self._counts[key] = self._counts.get(key, 0) + 1
        times = self._times.get(name)
        if times is None:
            times = self._times[name] = RequestTimes()
        times.bucket_counts[bisect_left(REQUEST_TIME_BUCKETS_S, seconds)] += 1
        times.sum_s += seconds

    def counts(self) -> dict[tuple[str, int], int]:
        """Return a copy of (request name, api version) -> requests answered."""
        return dict(self._counts)

    def times(self) -> dict[str, RequestTimes]:
        """Return request name -> its histogram (the live objects; read, do not change)."""
        return dict(self._times)


# ------------------------------------------------ what the gauges are read from


class LogCleanerView(Protocol):
    """What the collector reads of the log cleaner (``kpo_broker.log.log_cleaner.LogCleaner``)."""

    def gauges(self) -> Sequence[tuple[str, str, Mapping[str, str], float]]:
        """Return ``(MBean type, Kafka metric name, tags, value)`` of every cleaner gauge."""
        ...


class GroupCoordinatorView(Protocol):
    """What the collector reads of the group coordinator (``GroupCoordinator.metrics``)."""

    def metrics(self) -> tuple[Mapping[str, int], Mapping[str, int]]:
        """Return the ``GroupMetadataManager`` gauges and ``group-coordinator-metrics`` counts."""
        ...


class LogView(Protocol):
    """What the collector reads of a partition's log (:class:`kpo_broker.log.log.Log`)."""

    @property
    def topic(self) -> str:
        """Topic name."""
        ...

    @property
    def partition(self) -> int:
        """Partition index."""
        ...

    @property
    def log_start_offset(self) -> int:
        """First readable offset."""
        ...

    @property
    def log_end_offset(self) -> int:
        """The LEO."""
        ...

    @property
    def size_in_bytes(self) -> int:
        """Bytes of the live segments' ``.log`` files."""
        ...

    @property
    def segments(self) -> Sized:
        """The live segments."""
        ...


class PartitionView(Protocol):
    """What the collector reads of a hosted replica (``server.partition.Partition``)."""

    @property
    def topic(self) -> str:
        """Topic name."""
        ...

    @property
    def partition(self) -> int:
        """Partition index."""
        ...

    @property
    def is_leader(self) -> bool:
        """Whether this broker leads the partition."""
        ...

    @property
    def isr(self) -> tuple[int, ...]:
        """The ISR as this broker knows it."""
        ...

    @property
    def replicas(self) -> tuple[int, ...]:
        """The assigned replicas (AR), adding replicas included."""
        ...

    @property
    def adding_replicas(self) -> tuple[int, ...]:
        """Replicas a running reassignment adds (RAR - OAR)."""
        ...


class ControllerContextView(Protocol):
    """What the collector reads of the controller's :class:`ControllerContext`."""

    @property
    def all_topics(self) -> AbstractSet[str]:
        """Every topic in ``/brokers/topics``."""
        ...

    @property
    def partition_states(self) -> Mapping[TopicPartition, object]:
        """Each partition's state machine state (``controller.states.PartitionState``)."""
        ...

    @property
    def topics_with_deletion_started(self) -> AbstractSet[str]:
        """Topics whose deletion has begun (their offline partitions are not counted)."""
        ...


class ControllerView(Protocol):
    """What the collector reads of the broker's controller component."""

    @property
    def is_active(self) -> bool:
        """Whether this broker is the active controller."""
        ...

    @property
    def context(self) -> ControllerContextView:
        """The controller's cached metadata (valid while active)."""
        ...


class QuotaView(Protocol):
    """What the collector reads of a :class:`ReplicationQuotaManager` (KIP-73)."""

    @property
    def total_recorded_bytes(self) -> int:
        """Throttled bytes recorded since start."""
        ...

    def rate(self) -> float:
        """Return the byte rate the quota measures now, bytes/s."""
        ...


class FetchSessionCacheView(Protocol):
    """What the collector reads of a :class:`FetchSessionCache` (KIP-227)."""

    @property
    def size(self) -> int:
        """Sessions cached."""
        ...

    @property
    def total_partitions(self) -> int:
        """Partitions over every cached session."""
        ...

    @property
    def evictions(self) -> int:
        """Sessions evicted since start."""
        ...


@dataclass(frozen=True)
class BrokerState:
    """A broker's state as the collector sees it at one scrape.

    Attributes:
        logs: every current log on this broker (future logs of KIP-113 moves excluded).
        partitions: every hosted partition replica.
        topic_stats: the traffic counters.
        min_insync_replicas: topic name -> its ``min.insync.replicas``.
        controller: the controller component; None counts as a standby controller.
        leader_quota: the leader-side replication quota, None when there is none.
        follower_quota: the follower-side replication quota, None when there is none.
        fetcher_lags: the lag (leader HW - fetch offset, in messages) of each partition
            the replica fetchers follow, where known.
        log_cleaner: the log cleaner, None when there is none.
        group_coordinator: the consumer group coordinator, None when there is none.
        offline_replica_count: hosted partitions in offline log dirs.
        offline_log_dir_count: log dirs taken offline by an I/O error.
        fetch_sessions: the incremental fetch session cache, None when there is none.
    """

    logs: Sequence[LogView]
    partitions: Sequence[PartitionView]
    topic_stats: BrokerTopicStats
    min_insync_replicas: Callable[[str], int] = field(default=lambda _topic: 1)
    controller: ControllerView | None = None
    leader_quota: QuotaView | None = None
    follower_quota: QuotaView | None = None
    fetcher_lags: Sequence[int] = ()
    log_cleaner: LogCleanerView | None = None
    group_coordinator: GroupCoordinatorView | None = None
    offline_replica_count: int = 0
    offline_log_dir_count: int = 0
    fetch_sessions: FetchSessionCacheView | None = None


class AuthenticationStats:
    """Successful and failed authentications per listener (Kafka's ``socket-server-metrics``).

    Kafka's ``successful-authentication-total`` and ``failed-authentication-total`` of
    ``kafka.server:type=socket-server-metrics,listener=<name>``: a connection counts once,
    when its TLS handshake and SASL exchange end (PLAINTEXT connections are not counted).
    """

    def __init__(self) -> None:
        self._counts: dict[tuple[str, bool], int] = {}

    def record(self, listener: str, success: bool) -> None:
        """Count one authentication outcome on ``listener``."""
        key = (listener, success)
        self._counts[key] = self._counts.get(key, 0) + 1

    def counts(self) -> dict[tuple[str, bool], int]:
        """Return (listener, success) -> count, a copy."""
        return dict(self._counts)
