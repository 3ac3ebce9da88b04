"""Log compaction on real broker processes, with kafka-python producers and librdkafka consumers.

A ``cleanup.policy=compact`` topic with overwrites and tombstones compacts to the latest
value per key at its original offset; replicas added later by reassignment fetch the
compacted log; the result survives a restart and a kill -9 in the middle of a cleaning;
tombstones go after ``delete.retention.ms``; records without a key are refused.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer
from confluent_kafka import TopicPartition as CkTopicPartition
from kafka import KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType
from kafka.errors import InvalidRecordError

from kpo_broker.log.records import iter_batches
from kpo_devenv.kafka_cluster import KafkaCluster
from tests.integration.broker.conftest import ClusterFactory, admin_client, wait_for
from tests.integration.broker.server.helpers import create_topic, describe, leaders

pytestmark = pytest.mark.integration

TOPIC = "keyed"
CLEANER_PROPS = {"log.cleaner.backoff.ms": "200"}
COMPACT_CONFIGS = {
    "cleanup.policy": "compact",
    "segment.bytes": "2048",
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": "1000",
}

Entry = tuple[int, bytes | None, bytes | None]  # offset, key, value


def read_partition(cluster: KafkaCluster, topic: str, timeout_s: float = 30) -> list[Entry]:
    """Every record of ``<topic>-0`` up to its high watermark, read with librdkafka."""
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": "unused",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    try:
        _low, high = consumer.get_watermark_offsets(CkTopicPartition(topic, 0), timeout=10)
        consumer.assign([CkTopicPartition(topic, 0, OFFSET_BEGINNING)])
        entries: list[Entry] = []
        deadline = time.monotonic() + timeout_s
        while (not entries or entries[-1][0] < high - 1) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None or message.error():
                continue
            entries.append((message.offset(), message.key(), message.value()))
        assert entries and entries[-1][0] == high - 1, f"read {len(entries)} records to {high}"
        return entries
    finally:
        consumer.close()


def on_disk(log_dir: Path, topic: str) -> list[Entry]:
    """Every record in the ``.log`` files of a replica's partition directory."""
    from kafka.record.default_records import DefaultRecordBatch

    entries: list[Entry] = []
    for segment in sorted((log_dir / f"{topic}-0").glob("*.log")):
        for _header, batch in iter_batches(segment.read_bytes()):
            for record in DefaultRecordBatch(bytes(batch)):
                entries.append((record.offset, record.key, record.value))
    return entries


def latest_by_key(entries: list[Entry]) -> dict[bytes | None, Entry]:
    """Key -> its latest entry."""
    return {entry[1]: entry for entry in entries}


def produce(producer: KafkaProducer, records: list[tuple[bytes, bytes | None]]) -> list[Entry]:
    """Send keyed records to partition 0 (batched by the producer); return their offsets."""
    futures = [
        (producer.send(TOPIC, key=key, value=value, partition=0), key, value)
        for key, value in records
    ]
    return [(future.get(30).offset, key, value) for future, key, value in futures]


def padding(tag: str, count: int = 40) -> list[tuple[bytes, bytes | None]]:
    """Records of new keys that push earlier ones out of the active segment.

    Their values are random, so they take their size in the log even when compressed.
    """
    return [(f"pad-{tag}-{i}".encode(), os.urandom(200)) for i in range(count)]


def compacted(cluster: KafkaCluster, expected: dict[bytes | None, Entry]) -> bool:
    """Whether the partition holds each key once, with its expected latest entry.

    A tombstone may already be gone: once its delete horizon has passed, every replica's
    own cleaner removes it.
    """
    entries = read_partition(cluster, TOPIC)
    found = latest_by_key(entries)
    return (
        len(entries) == len(found)
        and set(found) <= set(expected)
        and all(
            found[key] == entry if key in found else entry[2] is None
            for key, entry in expected.items()
        )
    )


def live(entries: list[Entry]) -> list[Entry]:
    """The entries that are not tombstones."""
    return [entry for entry in entries if entry[2] is not None]


def test_keyed_topic_compacts_replicates_and_survives_restart(
    kafka_cluster_factory: ClusterFactory,
) -> None:
    cluster = kafka_cluster_factory(3, CLEANER_PROPS)
    create_topic(cluster, TOPIC, configs=COMPACT_CONFIGS, assignment={0: [0]})
    # batches of several records, lz4-compressed: the cleaner rewrites them with lz4
    producer = KafkaProducer(
        bootstrap_servers=cluster.bootstrap_servers,
        acks="all",
        linger_ms=20,
        compression_type="lz4",
    )
    sent: list[Entry] = []
    for round_ in range(10):
        sent += produce(producer, [(b"k%d" % k, b"v%d-%d" % (k, round_) * 5) for k in range(20)])
    sent += produce(producer, [(b"k%d" % k, None) for k in range(5)])  # tombstones
    sent += produce(producer, padding("a"))
    expected = latest_by_key(sent)
    wait_for(lambda: compacted(cluster, expected), 60, "the compacted log")
    assert len(expected) == 60 and len(sent) == 245

    with pytest.raises(InvalidRecordError):
        producer.send(TOPIC, value=b"no key", partition=0).get(30)
    admin = admin_client(cluster)
    try:
        bad = ConfigResource(ConfigResourceType.TOPIC, TOPIC, {"cleanup.policy": "compact,shred"})
        result = admin.alter_configs([bad], incremental=True, raise_on_unknown=False)
        assert "InvalidConfigurationError" in str(next(iter(result.values()))[TOPIC])
    finally:
        admin.close()

    # replicas added by reassignment fetch the compacted log from the start
    tp = TopicPartition(TOPIC, 0)
    admin = admin_client(cluster)
    try:
        admin.alter_partition_reassignments({tp: [0, 1, 2]})
    finally:
        admin.close()
    wait_for(
        lambda: sorted(describe(cluster, TOPIC)[0]["isr_nodes"]) == [0, 1, 2], 60, "ISR 0, 1, 2"
    )
    leader_copy = on_disk(cluster.brokers[0].log_dir, TOPIC)
    assert latest_by_key(leader_copy) == expected and len(leader_copy) == len(expected)
    for follower in (1, 2):
        wait_for(
            lambda f=follower: (
                live(on_disk(cluster.brokers[f].log_dir, TOPIC)) == live(leader_copy)
            ),
            30,
            f"broker {follower}'s compacted copy",
        )
        assert len(on_disk(cluster.brokers[follower].log_dir, TOPIC)) <= len(leader_copy)

    # a restart keeps the compacted log; the new leader serves the same records
    cluster.brokers[0].stop()
    cluster.brokers[0].start()
    wait_for(lambda: compacted(cluster, expected), 60, "the compacted log after a restart")

    # tombstones are removed by a cleaning after delete.retention.ms
    time.sleep(1.2)
    producer.close()
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all")
    sent += produce(producer, padding("b"))
    producer.close()
    expected = {k: e for k, e in latest_by_key(sent).items() if e[2] is not None}
    wait_for(lambda: compacted(cluster, expected), 60, "tombstones removed")

    def replica_without_tombstones(broker_id: int) -> bool:
        replica = on_disk(cluster.brokers[broker_id].log_dir, TOPIC)
        return live(replica) == replica and latest_by_key(replica) == expected

    for broker_id in (0, 1, 2):  # every replica dropped them
        wait_for(
            lambda b=broker_id: replica_without_tombstones(b),
            60,
            f"broker {broker_id}'s replica without tombstones",
        )
    for broker in cluster.brokers.values():
        checkpoint = broker.log_dir / "cleaner-offset-checkpoint"
        assert checkpoint.exists()


def test_kill_as_cleaning_starts_loses_nothing(kafka_cluster_factory: ClusterFactory) -> None:
    # The cleaner looks once at start-up, then backs off for 15 s: the whole log is produced
    # meanwhile and the broker is killed -9 as soon as the cleaning starts. A cleaning of this
    # log takes milliseconds here, so where the kill lands (before, inside or after the
    # .cleaned/.swap steps) is not controlled; every crash point of the swap is covered
    # deterministically by tests/unit/broker/log (a crash at each of its steps).
    cluster = kafka_cluster_factory(1, {**CLEANER_PROPS, "log.cleaner.backoff.ms": "15000"})
    create_topic(cluster, TOPIC, configs=COMPACT_CONFIGS, assignment={0: [0]})
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all")
    sent: list[Entry] = []
    for round_ in range(30):
        sent += produce(producer, [(b"k%d" % k, b"%d" % round_ * 40) for k in range(30)])
    producer.close()
    expected = latest_by_key(sent)
    broker = cluster.brokers[0]
    broker_log = broker.workdir / "broker.log"
    partition_dir = broker.log_dir / f"{TOPIC}-0"
    wait_for(lambda: f"cleaning {TOPIC}-0" in broker_log.read_text(), 60, "a cleaning started")
    broker.kill()
    leftovers = [p.name for p in partition_dir.iterdir() if p.name.endswith((".cleaned", ".swap"))]
    broker.start()
    wait_for(lambda: leaders(cluster, TOPIC).get(0) == 0, 60, "broker 0 leading again")
    entries = read_partition(cluster, TOPIC)
    found = latest_by_key(entries)
    # every key's latest value is there at its offset, whatever the crash interrupted
    assert {k: found[k] for k in expected} == expected, leftovers
    wait_for(lambda: len(read_partition(cluster, TOPIC)) < len(sent) // 2, 90, "cleaning resumed")
    assert latest_by_key(read_partition(cluster, TOPIC)) == found


def test_dynamic_log_cleaner_configs_reconfigure_the_running_cleaner(
    kafka_cluster_factory: ClusterFactory,
) -> None:
    """``kafka-configs --alter`` of ``log.cleaner.*`` restarts the cleaner with the new settings.

    The cleaner looks once at start-up, then backs off for 10 minutes: nothing produced
    afterwards is cleaned until ``log.cleaner.backoff.ms=200`` (and 2 threads) reach it
    (Kafka's ``LogCleaner.reconfigure``).
    """
    from tests.integration.broker.server.test_topic_and_broker_configs import (
        configs_tool,
        described,
    )

    cluster = kafka_cluster_factory(1, {"log.cleaner.backoff.ms": "600000"})
    broker_log = cluster.brokers[0].workdir / "broker.log"
    wait_for(lambda: "log cleaner started with 1 thread" in broker_log.read_text(), 30, "cleaner")
    create_topic(cluster, TOPIC, configs=COMPACT_CONFIGS, assignment={0: [0]})
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all")
    sent: list[Entry] = []
    for round_ in range(5):
        sent += produce(producer, [(b"k%d" % k, b"v%d-%d" % (k, round_) * 5) for k in range(20)])
    sent += produce(producer, padding("a"))
    producer.close()
    expected = latest_by_key(sent)
    time.sleep(3)  # the cleaner would have compacted it by now with a short backoff
    assert len(read_partition(cluster, TOPIC)) == len(sent) == 140

    configs_tool(
        cluster,
        "--entity-type", "brokers", "--entity-name", "0", "--alter",
        "--add-config", "log.cleaner.backoff.ms=200,log.cleaner.threads=2",
    )  # fmt: skip
    wait_for(lambda: compacted(cluster, expected), 60, "the log compacted after the change")
    assert len(expected) == 60
    assert "log cleaner started with 2 thread(s)" in broker_log.read_text()
    shown = described(
        configs_tool(
            cluster, "--entity-type", "brokers", "--entity-name", "0", "--describe", "--all"
        )
    )
    assert shown["log.cleaner.threads"].startswith("2"), shown["log.cleaner.threads"]
    assert "DYNAMIC_BROKER_CONFIG:log.cleaner.threads=2" in shown["log.cleaner.threads"]
    # Kafka's bounds: at most double the current count.
    refused = configs_tool(
        cluster,
        "--entity-type", "brokers", "--entity-name", "0", "--alter",
        "--add-config", "log.cleaner.threads=5",
        ok=False,
    )  # fmt: skip
    assert "more than double the current value 2" in refused, refused
