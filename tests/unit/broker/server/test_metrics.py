"""The broker's Prometheus metrics: hot-path counters, the collector and the HTTP endpoint."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kafka.protocol.consumer import FetchRequest
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from kpo_broker.controller.context import ControllerContext
from kpo_broker.controller.states import PartitionState as ControllerPartitionState
from kpo_broker.log.config import LogConfig
from kpo_broker.log.manager import LogManager
from kpo_broker.server import fetch, produce
from kpo_broker.server.fetch import FetchPartition, FetchPartitionResult
from kpo_broker.server.fetch_session import FetchSessionCache, FullFetchContext
from kpo_broker.server.metrics import (
    REQUEST_TIME_BUCKETS_S,
    AuthenticationStats,
    BrokerState,
    BrokerTopicStats,
    RequestStats,
)
from kpo_broker.server.metrics_collector import BrokerMetricsCollector, controller_gauges
from kpo_broker.server.metrics_http import MetricsHttpServer, MetricsServerError, new_registry
from kpo_broker.server.partition import IsrChange, LeaderAndIsrState, Partition
from kpo_broker.server.replica_manager import ReplicaManager
from kpo_broker.server.replication_quota import ReplicationQuotaManager
from kpo_kafka.topic_partition import TopicPartition
from tests.unit.broker.log.batches import make_value_batch

NOW_MS = 1_700_000_000_000
CONFIG = LogConfig(segment_bytes=1 << 20, max_message_bytes=4000, file_delete_delay_ms=0)
ORDERS_0 = TopicPartition("orders", 0)  # led here, ISR = replicas
ORDERS_1 = TopicPartition("orders", 1)  # led here, follower 1 out of the ISR
AUDIT_0 = TopicPartition("audit", 0)  # followed here (leader 1)

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


class NoIsrWrites:
    async def write_isr(
        self, tp: TopicPartition, partition: Partition, change: IsrChange
    ) -> int | None:
        raise AssertionError("no ISR change expected")


def parse(text: str) -> Samples:
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def scrape(registry: CollectorRegistry) -> Samples:
    return parse(generate_latest(registry).decode())


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, frozenset(labels.items()))]


def registry_of(collector: BrokerMetricsCollector) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return registry


# ------------------------------------------------------------------ counters


def test_topic_stats_count_per_topic_and_broker_wide() -> None:
    stats = BrokerTopicStats()
    stats.record_produce("a", 100, 3)
    stats.record_produce("b", 50, 1)
    stats.record_rejected("a", 7)
    stats.record_fetch("a", 40, from_follower=False)
    stats.record_fetch("a", 60, from_follower=True)
    stats.record_replication_in("b", 25)
    a, b = stats.topic("a"), stats.topic("b")
    assert (a.bytes_in, a.messages_in, a.bytes_rejected) == (100, 3, 7)
    assert (a.bytes_out, a.replication_bytes_out, a.replication_bytes_in) == (40, 60, 0)
    assert (b.bytes_in, b.messages_in, b.replication_bytes_in) == (50, 1, 25)
    total = stats.all_topics
    assert (total.bytes_in, total.messages_in, total.bytes_rejected) == (150, 4, 7)
    assert (total.bytes_out, total.replication_bytes_out, total.replication_bytes_in) == (
        40,
        60,
        25,
    )
    stats.remove_topic("a")
    assert set(stats.topics()) == {"b"}
    assert stats.all_topics.bytes_in == 150  # broker-wide totals never go down


def test_authentication_outcomes_are_counted_per_listener() -> None:
    stats = AuthenticationStats()
    for listener, success in (("SSL", True), ("SSL", False), ("SSL", False), ("SASL_SSL", True)):
        stats.record(listener, success)
    samples = scrape(registry_of(BrokerMetricsCollector(lambda: None, RequestStats(), stats)))
    prefix = "kafka_server_socket_server_metrics_"
    assert value(samples, prefix + "successful_authentication_total", listener="SSL") == 1
    assert value(samples, prefix + "failed_authentication_total", listener="SSL") == 2
    assert value(samples, prefix + "successful_authentication_total", listener="SASL_SSL") == 1
    assert value(samples, prefix + "failed_authentication_total", listener="SASL_SSL") == 0


def test_request_names_follow_kafka_and_split_fetch_by_replica_id() -> None:
    stats = RequestStats()
    assert stats.request_name(0, None) == "Produce"
    assert stats.request_name(3, None) == "Metadata"
    assert stats.request_name(4, None) == "LeaderAndIsr"
    consumer = FetchRequest(replica_id=-1)
    follower = FetchRequest(replica_id=2)
    assert stats.request_name(1, consumer) == "FetchConsumer"
    assert stats.request_name(1, follower) == "FetchFollower"


def test_request_times_land_in_le_buckets() -> None:
    stats = RequestStats()
    stats.record(0, 9, None, 0.001)  # exactly a bound: counted in that bucket
    stats.record(0, 9, None, 0.0011)
    stats.record(0, 8, None, 100.0)  # over the last bound: only +Inf
    stats.record(3, 12, None, 0.0001)
    assert stats.counts() == {("Produce", 9): 2, ("Produce", 8): 1, ("Metadata", 12): 1}
    produce_times = stats.times()["Produce"]
    assert produce_times.count == 3
    assert produce_times.sum_s == pytest.approx(100.0021)
    index = REQUEST_TIME_BUCKETS_S.index(0.001)
    assert produce_times.bucket_counts[index] == 1
    assert produce_times.bucket_counts[index + 1] == 1
    assert produce_times.bucket_counts[-1] == 1


# --------------------------------------------------- a real replica manager


@pytest.fixture
def replica_manager(tmp_path: Path) -> Iterator[ReplicaManager]:
    manager = LogManager([tmp_path / "d0"], CONFIG)
    manager.startup(NOW_MS)
    rm = ReplicaManager(0, manager, NoIsrWrites())
    results = rm.become_leader_or_follower(
        1,
        {
            ORDERS_0: LeaderAndIsrState(1, 0, 1, (0, 1), 0, (0, 1)),
            ORDERS_1: LeaderAndIsrState(1, 0, 1, (0,), 0, (0, 1)),
            AUDIT_0: LeaderAndIsrState(1, 1, 1, (1, 0), 0, (1, 0)),
        },
    )
    assert all(r.error_code == 0 for r in results.values())
    yield rm
    manager.shutdown()


def _produce(rm: ReplicaManager, entries: dict[TopicPartition, bytes]) -> dict[int, int]:
    results = asyncio.run(produce.append_records(rm, entries, 1, 1000, lambda _topic: 1))
    return {tp[1]: r.error_code for tp, r in results.items()}


def _fetch(rm: ReplicaManager, replica_id: int, tp: TopicPartition) -> int:
    results = asyncio.run(
        fetch.fetch_messages(rm, replica_id, 0, 1, 1 << 20, [fetch.FetchPartition(tp, 0, 1 << 20)])
    )
    data = results[tp].records
    return data.size_in_bytes if data is not None else 0


def test_produce_and_fetch_count_bytes_and_messages(replica_manager: ReplicaManager) -> None:
    rm = replica_manager
    small = make_value_batch(5, 20)
    too_large = make_value_batch(2, 3000)
    assert _produce(rm, {ORDERS_0: small, ORDERS_1: small}) == {0: 0, 1: 0}
    assert _produce(rm, {ORDERS_1: too_large}) == {1: 10}  # MESSAGE_TOO_LARGE
    stats = rm.topic_stats
    orders = stats.topic("orders")
    assert (orders.bytes_in, orders.messages_in) == (2 * len(small), 10)
    assert orders.bytes_rejected == len(too_large)
    # ORDERS_1's HW is its LEO (ISR = leader only): a consumer reads it all.
    assert _fetch(rm, -1, ORDERS_1) == len(small)
    # A follower reads up to the LEO.
    assert _fetch(rm, 1, ORDERS_0) == len(small)
    assert (orders.bytes_out, orders.replication_bytes_out) == (len(small), len(small))
    assert stats.all_topics.bytes_out == len(small)


def test_deleting_the_last_partition_of_a_topic_drops_its_counters(
    replica_manager: ReplicaManager,
) -> None:
    rm = replica_manager
    _produce(rm, {ORDERS_0: make_value_batch(1), ORDERS_1: make_value_batch(1)})
    rm.stop_replicas(1, [(ORDERS_0, True)])
    assert "orders" in rm.topic_stats.topics()  # ORDERS_1 is still hosted
    rm.stop_replicas(1, [(ORDERS_1, True)])
    assert "orders" not in rm.topic_stats.topics()
    assert rm.topic_stats.all_topics.messages_in == 2


@dataclass
class Controller:
    """A controller component as the collector sees it (a plain object)."""

    is_active: bool
    context: ControllerContext


def test_collector_reads_logs_partitions_and_counters(replica_manager: ReplicaManager) -> None:
    rm = replica_manager
    batch = make_value_batch(4, 30)
    _produce(rm, {ORDERS_0: batch, ORDERS_1: batch})
    _produce(rm, {ORDERS_1: batch})
    now = [0.0]
    leader_quota = ReplicationQuotaManager(1000, 2, 1, clock=lambda: now[0])
    leader_quota.record(3000)
    state = BrokerState(
        logs=rm.log_manager.all_logs(),
        partitions=list(rm.partitions.values()),
        topic_stats=rm.topic_stats,
        min_insync_replicas=lambda topic: 2 if topic == "orders" else 1,
        leader_quota=leader_quota,
        follower_quota=ReplicationQuotaManager(),
        fetcher_lags=[3, 11],
    )
    requests = RequestStats()
    requests.record(0, 9, None, 0.002)
    samples = scrape(registry_of(BrokerMetricsCollector(lambda: state, requests)))

    assert value(samples, "kafka_log_log_size", topic="orders", partition="1") == 2 * len(batch)
    assert value(samples, "kafka_log_log_logendoffset", topic="orders", partition="1") == 8
    assert value(samples, "kafka_log_log_logstartoffset", topic="orders", partition="1") == 0
    assert value(samples, "kafka_log_log_size", topic="audit", partition="0") == 0
    assert value(samples, "kafka_log_log_numlogsegments", topic="orders", partition="0") == 1

    topic_metric = "kafka_server_brokertopicmetrics_"
    assert value(samples, topic_metric + "bytesin_total") == 3 * len(batch)
    assert value(samples, topic_metric + "bytesin_total", topic="orders") == 3 * len(batch)
    assert value(samples, topic_metric + "messagesin_total", topic="orders") == 12
    assert value(samples, topic_metric + "messagesin_total") == 12
    assert value(samples, topic_metric + "bytesout_total") == 0
    assert value(samples, topic_metric + "replicationbytesin_total") == 0

    rm_metric = "kafka_server_replicamanager_"
    assert value(samples, rm_metric + "partitioncount") == 3
    assert value(samples, rm_metric + "leadercount") == 2
    assert value(samples, rm_metric + "underreplicatedpartitions") == 1
    assert value(samples, rm_metric + "underminisrpartitioncount") == 1
    assert value(samples, rm_metric + "atminisrpartitioncount") == 1
    assert value(samples, "kafka_cluster_partition_underreplicated", topic="orders", partition="1")
    assert not value(
        samples, "kafka_cluster_partition_underreplicated", topic="orders", partition="0"
    )
    isr_count = "kafka_cluster_partition_insyncreplicascount"
    assert value(samples, isr_count, topic="orders", partition="0") == 2
    assert value(samples, isr_count, topic="audit", partition="0") == 0  # not the leader

    assert value(samples, "kafka_controller_kafkacontroller_activecontrollercount") == 0
    assert value(samples, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0

    assert value(samples, "kafka_server_leaderreplication_throttled_bytes_total") == 3000
    assert value(samples, "kafka_server_leaderreplication_byte_rate") == pytest.approx(3000 / 1)
    assert value(samples, "kafka_server_followerreplication_throttled_bytes_total") == 0
    assert value(samples, "kafka_server_replicafetchermanager_maxlag", clientId="Replica") == 11

    request_metric = "kafka_network_requestmetrics_"
    assert value(samples, request_metric + "requests_total", request="Produce", version="9") == 1
    hist = request_metric + "totaltime_seconds"
    assert value(samples, hist + "_count", request="Produce") == 1
    assert value(samples, hist + "_sum", request="Produce") == pytest.approx(0.002)
    assert value(samples, hist + "_bucket", request="Produce", le="0.001") == 0
    assert value(samples, hist + "_bucket", request="Produce", le="0.0025") == 1
    assert value(samples, hist + "_bucket", request="Produce", le="+Inf") == 1


def test_a_reassignment_adding_a_replica_is_not_under_replicated(
    replica_manager: ReplicaManager,
) -> None:
    rm = replica_manager
    # Reassignment of orders-0 from [0, 1] to [0, 1, 2]: 2 is adding, not yet in the ISR.
    rm.become_leader_or_follower(
        1, {ORDERS_0: LeaderAndIsrState(1, 0, 2, (0, 1), 1, (0, 1, 2), adding_replicas=(2,))}
    )
    state = BrokerState(logs=[], partitions=[rm.partitions[ORDERS_0]], topic_stats=rm.topic_stats)
    samples = scrape(registry_of(BrokerMetricsCollector(lambda: state, RequestStats())))
    assert value(samples, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert (
        value(samples, "kafka_cluster_partition_replicascount", topic="orders", partition="0") == 2
    )


def test_controller_gauges_count_offline_partitions_on_the_active_controller_only() -> None:
    context = ControllerContext()
    context.all_topics = {"orders", "doomed"}
    context.partition_states = {
        TopicPartition("orders", 0): ControllerPartitionState.ONLINE_PARTITION,
        TopicPartition("orders", 1): ControllerPartitionState.OFFLINE_PARTITION,
        TopicPartition("doomed", 0): ControllerPartitionState.OFFLINE_PARTITION,
    }
    context.topics_with_deletion_started = {"doomed"}
    assert controller_gauges(Controller(True, context)) == {
        "activecontrollercount": 1,
        "offlinepartitionscount": 1,
        "globaltopiccount": 2,
        "globalpartitioncount": 3,
    }
    assert set(controller_gauges(Controller(False, context)).values()) == {0}
    assert set(controller_gauges(None).values()) == {0}


def test_a_stopped_broker_exposes_only_request_metrics() -> None:
    requests = RequestStats()
    requests.record(3, 12, None, 0.01)
    samples = scrape(registry_of(BrokerMetricsCollector(lambda: None, requests)))
    names = {name for name, _labels in samples}
    assert "kafka_network_requestmetrics_requests_total" in names
    assert not any(name.startswith("kafka_server_replicamanager") for name in names)


# ------------------------------------------------------------------ HTTP


async def _http(port: int, request: bytes) -> tuple[str, dict[str, str], bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    await writer.drain()
    raw = await reader.read()
    writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return lines[0], headers, body


def test_http_endpoint_serves_metrics_and_stops() -> None:
    requests = RequestStats()
    requests.record(0, 9, None, 0.003)
    registry = new_registry(lambda: None, requests)

    async def scenario() -> None:
        server = MetricsHttpServer(registry, "127.0.0.1", 0)
        port = await server.start()
        status, headers, body = await _http(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        assert status == "HTTP/1.1 200 OK"
        assert headers["Content-Type"].startswith("text/plain; version=0.0.4")
        assert int(headers["Content-Length"]) == len(body)
        samples = parse(body.decode())
        assert (
            value(
                samples,
                "kafka_network_requestmetrics_requests_total",
                request="Produce",
                version="9",
            )
            == 1
        )
        assert any(name.startswith("process_") for name, _labels in samples)
        status, headers, body = await _http(port, b"HEAD /metrics?x=1 HTTP/1.1\r\n\r\n")
        assert (status, body) == ("HTTP/1.1 200 OK", b"")
        assert int(headers["Content-Length"]) > 0
        status, _, _ = await _http(port, b"GET / HTTP/1.1\r\n\r\n")
        assert status == "HTTP/1.1 404 Not Found"
        status, _, _ = await _http(port, b"POST /metrics HTTP/1.1\r\n\r\n")
        assert status == "HTTP/1.1 405 Method Not Allowed"
        status, _, _ = await _http(port, b"nonsense\r\n\r\n")
        assert status == "HTTP/1.1 400 Bad Request"
        idle_reader, idle_writer = await asyncio.open_connection("127.0.0.1", port)
        await server.stop()
        assert await idle_reader.read() == b""  # an open connection is closed
        idle_writer.close()
        with pytest.raises(OSError):
            await asyncio.open_connection("127.0.0.1", port)
        await server.stop()  # idempotent

    asyncio.run(scenario())


def test_http_endpoint_reports_a_port_in_use() -> None:
    async def scenario() -> None:
        first = MetricsHttpServer(new_registry(lambda: None, RequestStats()), "127.0.0.1", 0)
        port = await first.start()
        try:
            second = MetricsHttpServer(
                new_registry(lambda: None, RequestStats()), "127.0.0.1", port
            )
            with pytest.raises(MetricsServerError, match="cannot serve metrics"):
                await second.start()
        finally:
            await first.stop()

    asyncio.run(scenario())


def test_offline_replicas_and_log_dirs_are_counted(replica_manager: ReplicaManager) -> None:
    """Kafka's ``OfflineReplicaCount`` and ``OfflineLogDirectoryCount`` gauges."""
    rm = replica_manager
    rm.become_leader_or_follower(1, {ORDERS_0: LeaderAndIsrState(1, 0, 2, (0, 1), 1, (0, 1))})
    log_dir = rm.partitions[ORDERS_0].log.dir.parent
    offline = rm.handle_log_dir_failure(log_dir)
    assert ORDERS_0 in offline
    state = BrokerState(
        logs=[],
        partitions=list(rm.partitions.values()),
        topic_stats=rm.topic_stats,
        offline_replica_count=len(rm.offline_partitions),
        offline_log_dir_count=1,
    )
    samples = scrape(registry_of(BrokerMetricsCollector(lambda: state, RequestStats())))
    assert value(samples, "kafka_server_replicamanager_offlinereplicacount") == len(offline)
    assert value(samples, "kafka_log_logmanager_offlinelogdirectorycount") == 1
    assert value(samples, "kafka_server_replicamanager_partitioncount") == 0


def test_fetch_session_cache_gauges(replica_manager: ReplicaManager) -> None:
    """Kafka's FetchSessionCache MBeans: sessions, cached partitions, evictions (KIP-227)."""
    cache = FetchSessionCache(1, 0)
    tps = [ORDERS_0, ORDERS_1]
    for follower in (False, True):  # the follower's session evicts the consumer's
        context = FullFetchContext(
            cache, {tp: FetchPartition(tp, 0, 1024) for tp in tps}, follower, lambda: 1000
        )
        context.response({tp: FetchPartitionResult(0, 0, 0) for tp in tps})
    state = BrokerState(
        logs=[], partitions=[], topic_stats=replica_manager.topic_stats, fetch_sessions=cache
    )
    samples = scrape(registry_of(BrokerMetricsCollector(lambda: state, RequestStats())))
    prefix = "kafka_server_fetchsessioncache_"
    assert value(samples, prefix + "numincrementalfetchsessions") == 1
    assert value(samples, prefix + "numincrementalfetchpartitionscached") == 2
    assert value(samples, prefix + "incrementalfetchsessionevictions_total") == 1
