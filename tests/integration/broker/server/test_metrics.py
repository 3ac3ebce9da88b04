"""Prometheus metrics (``metrics.port``) scraped from a real 3-broker cluster."""

from __future__ import annotations

import urllib.request

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from kpo_devenv.kafka_cluster import KafkaCluster
from tests.integration.broker.conftest import ClusterFactory, admin_client, wait_for
from tests.integration.broker.server.helpers import consume_all, create_topic, leaders

pytestmark = pytest.mark.integration

TOPIC = "orders"
PARTITIONS = 3
RECORDS_PER_PARTITION = 100
VALUE = b"v" * 1000

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture
def cluster(kafka_cluster_factory: ClusterFactory) -> KafkaCluster:
    return kafka_cluster_factory(3, {"replica.lag.time.max.ms": "3000"}, metrics=True)


def scrape(cluster: KafkaCluster, broker_id: int) -> Samples:
    url = cluster.brokers[broker_id].metrics_url
    assert url is not None
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.status == 200
        text = response.read().decode()
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def total(cluster: KafkaCluster, name: str, **labels: str) -> float:
    """Sum of one sample over every running broker."""
    return sum(
        value(scrape(cluster, i), name, **labels)
        for i, broker in cluster.brokers.items()
        if broker.is_running()
    )


def fully_replicated(cluster: KafkaCluster) -> bool:
    for broker_id in cluster.brokers:
        samples = scrape(cluster, broker_id)
        for p in range(PARTITIONS):
            leo = value(samples, "kafka_log_log_logendoffset", topic=TOPIC, partition=str(p))
            if leo != RECORDS_PER_PARTITION:
                return False
    return True


def test_brokers_expose_traffic_log_and_cluster_metrics(cluster: KafkaCluster) -> None:
    create_topic(cluster, TOPIC, partitions=PARTITIONS, rf=3)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all")
    try:
        for i in range(RECORDS_PER_PARTITION * PARTITIONS):
            producer.send(TOPIC, value=VALUE, partition=i % PARTITIONS)
        producer.flush(60)
    finally:
        producer.close()
    wait_for(lambda: fully_replicated(cluster), 60, "every replica at the LEO")

    scrapes = {i: scrape(cluster, i) for i in cluster.brokers}
    sizes = {
        p: {
            i: value(s, "kafka_log_log_size", topic=TOPIC, partition=str(p))
            for i, s in scrapes.items()
        }
        for p in range(PARTITIONS)
    }
    for p, by_broker in sizes.items():
        assert len(set(by_broker.values())) == 1, f"replicas of partition {p} differ: {by_broker}"
        assert by_broker[0] > RECORDS_PER_PARTITION * len(VALUE)
    log_bytes = sum(by_broker[0] for by_broker in sizes.values())
    for samples in scrapes.values():
        for p in range(PARTITIONS):
            start = value(samples, "kafka_log_log_logstartoffset", topic=TOPIC, partition=str(p))
            assert start == 0

    def summed(name: str, **labels: str) -> float:
        return sum(value(s, name, **labels) for s in scrapes.values())

    topic_metric = "kafka_server_brokertopicmetrics_"
    # Leaders append the produced batches unchanged: bytes in = bytes in the logs.
    assert summed(topic_metric + "bytesin_total", topic=TOPIC) == log_bytes
    assert summed(topic_metric + "bytesin_total") == log_bytes
    assert summed(topic_metric + "messagesin_total", topic=TOPIC) == PARTITIONS * 100
    # Two followers per partition copy every byte.
    assert summed(topic_metric + "replicationbytesin_total", topic=TOPIC) == 2 * log_bytes
    assert summed(topic_metric + "replicationbytesout_total") >= 2 * log_bytes
    assert summed(topic_metric + "bytesrejected_total") == 0

    rm_metric = "kafka_server_replicamanager_"
    led = leaders(cluster, TOPIC)
    for broker_id, samples in scrapes.items():
        expected_leaders = sum(1 for leader in led.values() if leader == broker_id)
        assert value(samples, rm_metric + "leadercount") == expected_leaders
        assert value(samples, rm_metric + "partitioncount") == PARTITIONS
        assert value(samples, rm_metric + "underreplicatedpartitions") == 0
    assert summed(rm_metric + "leadercount") == PARTITIONS

    admin = admin_client(cluster)
    try:
        controller_id = admin.describe_cluster()["controller_id"]
    finally:
        admin.close()
    active = "kafka_controller_kafkacontroller_activecontrollercount"
    assert summed(active) == 1
    assert value(scrapes[controller_id], active) == 1
    assert value(scrapes[controller_id], "kafka_controller_kafkacontroller_globaltopiccount") == 1
    assert summed("kafka_controller_kafkacontroller_offlinepartitionscount") == 0

    requests = "kafka_network_requestmetrics_requests_total"
    produce_requests = sum(
        v
        for s in scrapes.values()
        for (name, labels), v in s.items()
        if name == requests and ("request", "Produce") in labels
    )
    assert produce_requests >= 1
    follower_fetches = sum(
        v
        for s in scrapes.values()
        for (name, labels), v in s.items()
        if name == "kafka_network_requestmetrics_totaltime_seconds_count"
        and ("request", "FetchFollower") in labels
    )
    assert follower_fetches > 0

    consume_all(cluster, TOPIC, PARTITIONS, PARTITIONS * RECORDS_PER_PARTITION)
    assert total(cluster, topic_metric + "bytesout_total", topic=TOPIC) >= log_bytes

    # Kill a broker that is not the controller: the partitions it followed or led lose
    # a replica from their ISR, so their (new) leaders report them under-replicated.
    victim = next(i for i in sorted(cluster.brokers) if i != controller_id)
    cluster.brokers[victim].kill()
    wait_for(
        lambda: total(cluster, rm_metric + "underreplicatedpartitions") > 0,
        60,
        "under-replicated partitions after the kill",
    )
    wait_for(
        lambda: (
            total(cluster, rm_metric + "underreplicatedpartitions") == PARTITIONS
            and total(cluster, rm_metric + "leadercount") == PARTITIONS
        ),
        60,
        "every partition led by a live broker and under-replicated",
    )
    under = [
        p
        for i, broker in cluster.brokers.items()
        if broker.is_running()
        for p in range(PARTITIONS)
        if value(
            scrape(cluster, i),
            "kafka_cluster_partition_underreplicated",
            topic=TOPIC,
            partition=str(p),
        )
        == 1
    ]
    assert sorted(under) == list(range(PARTITIONS))
    assert total(cluster, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0


GROUP_METRICS = "kafka_coordinator_group_groupmetadatamanager_"
COORDINATOR_METRICS = "kafka_server_group_coordinator_metrics_"


def test_group_coordinator_metrics_follow_a_group_through_its_states(
    kafka_cluster_factory: ClusterFactory,
) -> None:
    """Kafka's GroupMetadataManager gauges and group-coordinator-metrics counters."""
    cluster = kafka_cluster_factory(
        3,
        {
            "offsets.topic.num.partitions": "3",
            "group.initial.rebalance.delay.ms": "0",
            "group.min.session.timeout.ms": "1000",
        },
        metrics=True,
    )
    create_topic(cluster, "metered", partitions=2, rf=3)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all")
    try:
        for i in range(10):
            producer.send("metered", value=VALUE, partition=i % 2)
        producer.flush(60)
    finally:
        producer.close()
    consumer = KafkaConsumer(
        bootstrap_servers=cluster.bootstrap_servers,
        group_id="metered-group",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=6000,
        request_timeout_ms=15000,
    )
    consumer.subscribe(["metered"])
    try:
        read: list[object] = []

        def committed_everything() -> bool:
            for records in consumer.poll(timeout_ms=500).values():
                read.extend(records)
            if len(read) < 10:
                return False
            consumer.commit()
            return True

        wait_for(committed_everything, 90, "the group reading and committing 10 records")

        def gauges() -> dict[str, float]:
            names = ("numgroups", "numoffsets", "numgroupsstable", "numgroupsempty")
            found = {n: total(cluster, GROUP_METRICS + n) for n in names}
            found["rebalances"] = total(
                cluster, COORDINATOR_METRICS + "group_completed_rebalance_total"
            )
            found["deletions"] = total(cluster, COORDINATOR_METRICS + "offset_deletion_total")
            for name in (
                "numgroupspreparingrebalance",
                "numgroupscompletingrebalance",
                "numgroupsdead",
            ):
                found[name] = total(cluster, GROUP_METRICS + name)
            return found

        stable = {"numgroups": 1, "numoffsets": 2, "numgroupsstable": 1, "numgroupsempty": 0}
        wait_for(lambda: {k: gauges()[k] for k in stable} == stable, 30, f"gauges {stable}")
        now = gauges()
        assert now["rebalances"] >= 1, now
        assert now["numgroupspreparingrebalance"] == now["numgroupscompletingrebalance"] == 0
    finally:
        consumer.close()  # LeaveGroup: the group is Empty, its offsets stay
    empty = {"numgroups": 1, "numoffsets": 2, "numgroupsstable": 0, "numgroupsempty": 1}
    wait_for(lambda: {k: gauges()[k] for k in empty} == empty, 30, f"gauges {empty}")
    admin = admin_client(cluster)
    try:
        deleted = admin.delete_group_offsets(
            "metered-group", [TopicPartition("metered", 0), TopicPartition("metered", 1)]
        )
    finally:
        admin.close()
    assert all(error.errno == 0 for error in deleted.values()), deleted
    after = gauges()
    assert after["numoffsets"] == 0 and after["deletions"] == 2, after
