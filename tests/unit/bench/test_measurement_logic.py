from pathlib import Path

import pytest

from kpo_bench.catch_up import POLL_INTERVAL_S, CatchUpTimeline, partition_log_bytes
from kpo_bench.cli import _cluster_factories, build_parser, workload_from
from kpo_bench.failover import first_ack_after, pick_victim
from kpo_bench.results import BASELINE, OURS
from kpo_bench.settings import DEFAULT, MIB, QUICK
from kpo_devenv.apache_kafka import ApacheKafkaCluster
from kpo_devenv.kafka_cluster import KafkaCluster
from kpo_devenv.tools import read_env_value


def test_first_ack_after_ignores_records_sent_before_the_kill() -> None:
    # (sent, acked): the first record was in flight at the kill (t=10) and acked at
    # 10.01 by the old leader; it must not count as the failover's end.
    acks = [(9.99, 10.01), (10.5, 16.2), (10.2, 16.1), (16.3, 16.4)]
    assert first_ack_after(acks, 10.0) == 16.1
    assert first_ack_after(acks[:1], 10.0) is None
    assert first_ack_after([], 10.0) is None


def test_pick_victim_avoids_the_controller() -> None:
    assert pick_victim([0, 1, 2], controller=0) == 1
    assert pick_victim([2, 1, 0], controller=1) == 0
    assert pick_victim([0, 1, 2], controller=-1) == 0
    with pytest.raises(ValueError):
        pick_victim([3], controller=3)


def test_partition_log_bytes_sums_log_segments_only(tmp_path: Path) -> None:
    assert partition_log_bytes(tmp_path, "t", 0) == 0
    folder = tmp_path / "t-0"
    folder.mkdir()
    (folder / "00000000000000000000.log").write_bytes(b"a" * 100)
    (folder / "00000000000000000042.log").write_bytes(b"b" * 20)
    (folder / "00000000000000000000.index").write_bytes(b"c" * 1000)
    (tmp_path / "t-1").mkdir()
    (tmp_path / "t-1" / "00000000000000000000.log").write_bytes(b"d" * 7)
    assert partition_log_bytes(tmp_path, "t", 0) == 120
    assert partition_log_bytes(tmp_path, "t", 1) == 7


def test_catch_up_rate_counts_from_first_to_last_byte() -> None:
    timeline = CatchUpTimeline(
        leader_bytes=500 * MIB,
        started=100.0,
        listening=101.0,
        first_byte=102.0,
        caught_up=107.0,
        in_isr=107.5,
    )
    assert timeline.transfer_s == pytest.approx(5.0)
    assert timeline.mib_per_s == pytest.approx(100.0)
    data = timeline.as_json()
    assert data["first_byte_s"] == pytest.approx(2.0)
    assert data["caught_up_s"] == pytest.approx(7.0)
    assert data["in_isr_s"] == pytest.approx(7.5)


def test_catch_up_rate_is_bounded_by_the_poll_interval() -> None:
    timeline = CatchUpTimeline(MIB, 0.0, 0.0, 1.0, 1.0, None)
    assert timeline.transfer_s == POLL_INTERVAL_S
    assert timeline.as_json()["in_isr_s"] is None


def test_read_env_value() -> None:
    text = "# pinned\nKAFKA_VERSION=3.9.1\n\nETCD_VERSION=v3\nKAFKA_VERSION='3.9.2'\n"
    assert read_env_value(text, "KAFKA_VERSION") == "3.9.2"
    assert read_env_value(text, "HELM_VERSION") is None


def test_default_workload_has_the_benchmark_sizes() -> None:
    assert DEFAULT.record_size == 1024
    assert DEFAULT.catch_up_bytes >= 500 * 1000 * 1000
    assert DEFAULT.producer_props["acks"] == "all"
    assert QUICK.catch_up_bytes < DEFAULT.catch_up_bytes


def test_workload_from_arguments() -> None:
    parser = build_parser()
    assert workload_from(parser.parse_args([])) == DEFAULT
    assert workload_from(parser.parse_args(["--quick"])) == QUICK
    custom = workload_from(parser.parse_args(["--quick", "--produce-records", "7"]))
    assert custom.produce_records == 7
    assert custom.catch_up_records == QUICK.catch_up_records


def test_each_system_gets_its_own_cluster_on_its_own_chroot(tmp_path: Path) -> None:
    properties = {"num.partitions": "3"}
    factories = _cluster_factories(None, "/nowhere/*", properties)
    assert list(factories) == [OURS, BASELINE]  # kpo runs first
    ours = factories[OURS](tmp_path / OURS, "127.0.0.1:2181/kpo")
    theirs = factories[BASELINE](tmp_path / BASELINE, "127.0.0.1:2181/apache-kafka")
    assert isinstance(ours, KafkaCluster) and not isinstance(ours, ApacheKafkaCluster)
    assert isinstance(theirs, ApacheKafkaCluster)
    for cluster, chroot in ((ours, "/kpo"), (theirs, "/apache-kafka")):
        assert sorted(cluster.brokers) == [0, 1, 2]
        for broker in cluster.brokers.values():
            assert broker.properties["num.partitions"] == "3"
            assert broker.properties["zookeeper.connect"] == f"127.0.0.1:2181{chroot}"
