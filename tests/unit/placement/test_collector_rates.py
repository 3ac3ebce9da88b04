"""Load rates from scrapes, the metrics sources with in-memory HTTP, capacities, collection."""

from __future__ import annotations

import json
import urllib.parse
from pathlib import Path

import pytest

from kpo_placement.collector import (
    BrokerCapacity,
    Capacities,
    CapacityConfigError,
    capacities_from_data,
    collect_snapshot,
    load_capacities,
    parse_quantity,
)
from kpo_placement.load_rates import (
    BrokerMetrics,
    MetricsFormatError,
    Scrape,
    combine_brokers,
    load_sample_rows,
    parse_exposition,
    rates_between,
)
from kpo_placement.metrics_sources import (
    MetricsUnavailableError,
    endpoint_urls,
    load_sampler,
    query_prometheus,
    scrape_brokers,
)
from kpo_placement.snapshot import read_snapshot, write_snapshot
from tests.unit.operator.fake_kafka import FakeKafkaAdmin


def page(leo: dict[int, int], size: dict[int, int], bytes_in: int, bytes_out: int) -> str:
    """A broker metrics page for topic t with the given per-partition gauges."""
    lines = [
        "# HELP kafka_server_brokertopicmetrics_bytesin_total Bytes produced.",
        "# TYPE kafka_server_brokertopicmetrics_bytesin_total counter",
        f"kafka_server_brokertopicmetrics_bytesin_total {bytes_in * 10}",
        f'kafka_server_brokertopicmetrics_bytesin_total{{topic="t"}} {bytes_in}',
        "# HELP kafka_server_brokertopicmetrics_bytesout_total Bytes fetched.",
        "# TYPE kafka_server_brokertopicmetrics_bytesout_total counter",
        f'kafka_server_brokertopicmetrics_bytesout_total{{topic="t"}} {bytes_out}',
        "# HELP kafka_log_log_logendoffset Log end offset (LEO).",
        "# TYPE kafka_log_log_logendoffset gauge",
    ]
    lines += [
        f'kafka_log_log_logendoffset{{topic="t",partition="{p}"}} {v}' for p, v in leo.items()
    ]
    lines += ["# HELP kafka_log_log_size Log size in bytes.", "# TYPE kafka_log_log_size gauge"]
    lines += [f'kafka_log_log_size{{topic="t",partition="{p}"}} {v}' for p, v in size.items()]
    lines += ["# TYPE kafka_log_log_numlogsegments gauge"]
    lines += ['kafka_log_log_numlogsegments{topic="t",partition="0"} 3']
    return "\n".join(lines) + "\n"


def test_parse_exposition_keeps_the_load_metrics_and_skips_the_broker_total() -> None:
    parsed = parse_exposition(page({0: 5, 1: 7}, {0: 500, 1: 700}, 1200, 3000))
    assert parsed.log_end_offsets == {("t", 0): 5.0, ("t", 1): 7.0}
    assert parsed.log_sizes == {("t", 0): 500.0, ("t", 1): 700.0}
    assert parsed.topic_bytes_in == {"t": 1200.0}
    assert parsed.topic_bytes_out == {"t": 3000.0}


def test_parse_exposition_refuses_garbage_and_missing_labels() -> None:
    with pytest.raises(MetricsFormatError):
        parse_exposition("kafka_log_log_size{topic= 1\n")
    with pytest.raises(MetricsFormatError, match="needs labels topic and an integer partition"):
        parse_exposition('kafka_log_log_size{topic="t"} 1\n')


def test_combine_reads_gauges_on_the_leader_and_sums_topic_counters() -> None:
    leader = BrokerMetrics({("t", 0): 100.0}, {("t", 0): 9000.0}, {"t": 50.0}, {"t": 10.0})
    follower = BrokerMetrics({("t", 0): 90.0, ("t", 1): 4.0}, {("t", 0): 8000.0}, {"t": 5.0}, {})
    other = BrokerMetrics({("t", 1): 6.0}, {}, {}, {})
    scrape = combine_brokers(7, {2: follower, 1: leader, 3: other}, {("t", 0): 1, ("t", 1): 9})
    # t-0 from its leader 1 although follower 2 came first; t-1's leader 9 was not
    # scraped, so the largest value wins
    assert scrape.log_end_offsets == {("t", 0): 100.0, ("t", 1): 6.0}
    assert scrape.log_sizes == {("t", 0): 9000.0}
    assert scrape.topic_bytes_in == {"t": 55.0}
    assert scrape.topic_bytes_out == {"t": 10.0}


def scrape(
    ts: int, leo: dict[int, float], size: dict[int, float], bin_: float | None, bout: float | None
) -> Scrape:
    return Scrape(
        ts,
        {("t", p): v for p, v in leo.items()},
        {("t", p): v for p, v in size.items()},
        {} if bin_ is None else {"t": bin_},
        {} if bout is None else {"t": bout},
    )


def test_rates_split_topic_counters_by_records_produced() -> None:
    before = scrape(10_000, {0: 100, 1: 100}, {0: 1000, 1: 1000}, 50_000, 1_000)
    # 10 s later: partition 0 got 30 records, partition 1 got 10; 8000 bytes produced to
    # the topic, 4000 fetched by consumers
    after = scrape(20_000, {0: 130, 1: 110}, {0: 7000, 1: 3000}, 58_000, 5_000)
    rows = rates_between(before, after)
    assert [(r["topic"], r["partition"], r["timestamp_ms"]) for r in rows] == [
        ("t", 0, 20_000),
        ("t", 1, 20_000),
    ]
    assert [r["messages_in_per_s"] for r in rows] == [3.0, 1.0]
    assert [r["bytes_in_per_s"] for r in rows] == [600.0, 200.0]
    assert [r["bytes_out_per_s"] for r in rows] == [300.0, 100.0]


def test_counter_reset_and_missing_counters() -> None:
    before = scrape(0, {0: 10}, {0: 1000}, 90_000, None)
    # the broker restarted: the counter fell to 2000, which is the interval's increase
    after = scrape(2_000, {0: 12}, {0: 1500}, 2_000, None)
    (row,) = rates_between(before, after)
    assert row["bytes_in_per_s"] == 1000.0
    assert row["bytes_out_per_s"] == 0.0
    # without the topic counter the log-size growth is the produce rate
    (row,) = rates_between(scrape(0, {0: 10}, {0: 1000}, None, None), after)
    assert row["bytes_in_per_s"] == 250.0


def test_idle_partitions_and_retention_give_zero_not_negative() -> None:
    before = scrape(0, {0: 10, 1: 5}, {0: 5000, 1: 100}, 100, 0)
    after = scrape(1_000, {0: 10, 1: 5}, {0: 1000, 1: 100}, 100, 0)
    assert all(
        r["bytes_in_per_s"] == r["messages_in_per_s"] == r["bytes_out_per_s"] == 0.0
        for r in rates_between(before, after)
    )


def test_load_sample_rows_pairs_successive_scrapes_in_time_order() -> None:
    scrapes = [
        scrape(2_000, {0: 30}, {0: 300}, None, None),
        scrape(0, {0: 10}, {0: 100}, None, None),
        scrape(1_000, {0: 20}, {0: 200}, None, None),
        scrape(1_000, {0: 99}, {0: 999}, None, None),  # same instant: dropped
    ]
    rows = load_sample_rows(scrapes)
    assert [(r["timestamp_ms"], r["messages_in_per_s"], r["bytes_in_per_s"]) for r in rows] == [
        (1_000, 10.0, 100.0),
        (2_000, 10.0, 100.0),
    ]
    with pytest.raises(ValueError, match="increasing time order"):
        rates_between(scrapes[0], scrapes[1])


def test_scrape_brokers_reads_each_broker_count_times() -> None:
    clock = {"now": 1_000_000}
    state: dict[str, int] = {}

    def fetch(url: str, timeout_s: float) -> str:
        if "broker-1" in url:
            raise OSError("connection refused")
        n = state[url] = state.get(url, 0) + 1
        return page({0: 10 * n}, {0: 1000 * n}, 1000 * n, 0)

    def sleep(seconds: float) -> None:
        clock["now"] += int(seconds * 1000)

    urls = endpoint_urls([0, 1], "http://broker-{id}:9308/metrics")
    assert urls == {0: "http://broker-0:9308/metrics", 1: "http://broker-1:9308/metrics"}
    got = scrape_brokers(
        urls,
        {("t", 0): 0},
        count=3,
        interval_s=5,
        fetch=fetch,
        clock_ms=lambda: clock["now"],
        sleep=sleep,
    )
    assert [s.timestamp_ms for s in got] == [1_000_000, 1_005_000, 1_010_000]
    rows = load_sample_rows(got)
    assert [r["bytes_in_per_s"] for r in rows] == [200.0, 200.0]
    assert [r["messages_in_per_s"] for r in rows] == [2.0, 2.0]

    def down(url: str, timeout_s: float) -> str:
        raise OSError("no route")

    with pytest.raises(MetricsUnavailableError, match="broker-0:9308/metrics: no route"):
        scrape_brokers(urls, {}, count=2, interval_s=1, fetch=down, sleep=lambda s: None)
    with pytest.raises(ValueError, match="at least 2 scrapes"):
        scrape_brokers(urls, {}, count=1)


def test_query_prometheus_reads_the_counters_at_each_instant() -> None:
    asked: list[tuple[str, float]] = []

    def fetch(url: str, timeout_s: float) -> str:
        query = urllib.parse.parse_qs(urllib.parse.urlparse(url).query)
        at = float(query["time"][0])
        promql = query["query"][0]
        asked.append((promql, at))
        step = (at - 940.0) / 30.0  # 0, 1, 2 at the three instants
        if "logendoffset" in promql:
            result = [
                {"metric": {"topic": "t", "partition": "0"}, "value": [at, str(100 + 60 * step)]}
            ]
        elif "log_size" in promql:
            result = [{"metric": {"topic": "t", "partition": "0"}, "value": [at, str(6000 * step)]}]
        elif "bytesin" in promql:
            result = [{"metric": {"topic": "t"}, "value": [at, str(30_000 * step)]}]
        else:
            result = [{"metric": {"topic": "t"}, "value": [at, str(60_000 * step)]}]
        return json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}})

    scrapes = query_prometheus("http://prom:9090/", 60, count=3, now_ms=1_000_000, fetch=fetch)
    assert [s.timestamp_ms for s in scrapes] == [940_000, 970_000, 1_000_000]
    assert all(
        url_q.startswith(("max by (topic, partition)", "sum by (topic)")) for url_q, _ in asked
    )
    rows = load_sample_rows(scrapes)
    assert [r["bytes_in_per_s"] for r in rows] == [1000.0, 1000.0]
    assert [r["bytes_out_per_s"] for r in rows] == [2000.0, 2000.0]
    assert [r["messages_in_per_s"] for r in rows] == [2.0, 2.0]

    def failing(url: str, timeout_s: float) -> str:
        return json.dumps({"status": "error", "error": "parse error at char 3"})

    with pytest.raises(MetricsUnavailableError, match="parse error at char 3"):
        query_prometheus("http://prom:9090", 60, fetch=failing)


def test_quantities_and_capacity_documents(tmp_path: Path) -> None:
    assert parse_quantity(42, "x") == 42
    assert parse_quantity("500Gi", "x") == 500 * 2**30
    assert parse_quantity("125M", "x") == 125_000_000
    assert parse_quantity("1.5Ki", "x") == 1536
    with pytest.raises(CapacityConfigError, match="disk: '12 parsecs' is not a quantity"):
        parse_quantity("12 parsecs", "disk")
    with pytest.raises(CapacityConfigError, match="x: must not be negative"):
        parse_quantity(-1, "x")
    path = tmp_path / "capacities.yaml"
    path.write_text(
        "default:\n  disk_bytes: 100Gi\n  net_in_bytes_per_s: 10M\n"
        "brokers:\n  2:\n    disk_bytes: 200Gi\n"
    )
    caps = load_capacities(path)
    assert caps.of(0) == BrokerCapacity(100 * 2**30, 10_000_000, 125_000_000)
    assert caps.of(2) == BrokerCapacity(200 * 2**30, 10_000_000, 125_000_000)
    assert load_capacities(None) == Capacities()
    with pytest.raises(CapacityConfigError, match=r"brokers.1.cpu: unknown key"):
        capacities_from_data({"brokers": {1: {"cpu": 4}}})
    with pytest.raises(CapacityConfigError, match=r"brokers\.b1: not a broker id"):
        capacities_from_data({"brokers": {"b1": {}}})
    path.write_text("default: [")
    with pytest.raises(CapacityConfigError, match="not valid YAML"):
        load_capacities(path)


def test_collect_snapshot_from_admin_api_and_sampler(tmp_path: Path) -> None:
    admin = FakeKafkaAdmin(brokers={0: "r0", 1: "r1", 2: None})
    admin.create_topic("t", {0: [0, 1], 1: [1, 3]})  # broker 3 is not registered
    admin.set_size(0, "t", 0, 4096)
    admin.set_size(1, "t", 0, 4000)
    admin.set_size(1, "t", 1, 10)
    leaders_seen: list[dict[tuple[str, int], int]] = []

    def sampler(leaders: dict[tuple[str, int], int]) -> list[Scrape]:
        leaders_seen.append(dict(leaders))
        return [
            scrape(1_000, {0: 0, 1: 0}, {0: 0, 1: 0}, 0, 0),
            scrape(3_000, {0: 20, 1: 0}, {0: 2000, 1: 0}, 2_000, 0),
        ]

    caps = Capacities(BrokerCapacity(1000, 10, 20), {1: BrokerCapacity(5000, 10, 20)})
    snapshot = collect_snapshot(admin, caps, sampler, clock_ms=lambda: 77)
    assert leaders_seen == [{("t", 0): 0, ("t", 1): 1}]
    brokers = snapshot.brokers.to_pylist()
    assert [(b["broker_id"], b["rack"], b["alive"], b["disk_capacity_bytes"]) for b in brokers] == [
        (0, "r0", True, 1000),
        (1, "r1", True, 5000),
        (2, None, True, 1000),
        (3, None, False, 1000),
    ]
    assert snapshot.partitions.to_pylist() == [
        {"topic": "t", "partition": 0, "replicas": [0, 1], "leader": 0, "isr": [0, 1]},
        {"topic": "t", "partition": 1, "replicas": [1, 3], "leader": 1, "isr": [1, 3]},
    ]
    sizes = {
        (r["broker_id"], r["partition"]): r["size_bytes"] for r in snapshot.replicas.to_pylist()
    }
    assert sizes == {(0, 0): 4096, (1, 0): 4000, (1, 1): 10}
    samples = snapshot.load_samples.to_pylist()
    assert [(s["partition"], s["bytes_in_per_s"], s["messages_in_per_s"]) for s in samples] == [
        (0, 1000.0, 10.0),
        (1, 0.0, 0.0),
    ]
    assert snapshot.metadata.taken_at_ms == 77
    assert snapshot.metadata.window_s == 2.0
    assert snapshot.metadata.source == "live"
    write_snapshot(tmp_path, snapshot)
    assert read_snapshot(tmp_path).partitions.num_rows == 2
    without = collect_snapshot(admin, caps)
    assert without.load_samples.num_rows == 0 and without.metadata.window_s == 0.0


def test_load_sampler_picks_the_configured_source() -> None:
    assert load_sampler() is None
    asked: list[str] = []

    def fetch(url: str, timeout_s: float) -> str:
        asked.append(url)
        if "/api/v1/query" in url:
            empty = {"resultType": "vector", "result": []}
            return json.dumps({"status": "success", "data": empty})
        return page({0: 1}, {0: 1}, 0, 0)

    from_brokers = load_sampler(
        template="http://kafka-{id}:9308/metrics",
        urls={7: "http://elsewhere/metrics"},
        count=2,
        fetch=fetch,
        sleep=lambda s: None,
    )
    assert from_brokers is not None
    assert len(from_brokers({("t", 0): 1, ("t", 1): 3, ("u", 0): 1})) == 2
    # the leaders' pages from the template, plus the explicit one, twice
    assert sorted(set(asked)) == [
        "http://elsewhere/metrics",
        "http://kafka-1:9308/metrics",
        "http://kafka-3:9308/metrics",
    ]
    assert len(asked) == 6
    asked.clear()
    prometheus = load_sampler(
        template="http://ignored/{id}", prometheus_url="http://prom:9090", count=2, fetch=fetch
    )
    assert prometheus is not None
    assert len(prometheus({("t", 0): 1})) == 2
    assert all(url.startswith("http://prom:9090/api/v1/query?") for url in asked)
