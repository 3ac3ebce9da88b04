"""Incremental fetch sessions (KIP-227) on real brokers, with real clients.

- An idle follower's incremental fetches name no partition: seen from the leader as the
  bytes it receives per FetchFollower request (``ss``'s TCP counters of its listener) and
  as Kafka's FetchSessionCache gauges; a produce with acks=all still replicates.
- The session protocol on the wire: a full fetch opens a session, incremental fetches
  carry only changes, a stale epoch is INVALID_FETCH_SESSION_EPOCH, and after the broker
  restarts the session is FETCH_SESSION_ID_NOT_FOUND until a full fetch opens a new one.
- Kafka's own console consumer (Java, which uses fetch sessions) and confluent-kafka
  consume everything across a leader restart.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from kafka import KafkaProducer
from kafka.protocol.consumer import FetchRequest
from prometheus_client.parser import text_string_to_metric_families

from kpo_broker.protocol.client import BrokerClient
from kpo_devenv.apache_kafka import java_command
from kpo_devenv.kafka_cluster import KafkaCluster
from tests.integration.broker.conftest import ClusterFactory, wait_cluster_ready, wait_for
from tests.integration.broker.server.helpers import create_topic, describe, leaders

pytestmark = pytest.mark.integration

SESSIONS = "kafka_server_fetchsessioncache_numincrementalfetchsessions"
CACHED = "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached"
FETCH_SESSION_ID_NOT_FOUND = 70
INVALID_FETCH_SESSION_EPOCH = 71
CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"


def metric(cluster: KafkaCluster, broker_id: int, name: str, **labels: str) -> float:
    """Sum of the samples ``name`` (matching ``labels``) on one broker's ``/metrics``."""
    url = cluster.brokers[broker_id].metrics_url
    assert url is not None
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    found = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and labels.items() <= sample.labels.items():
                found += sample.value
    return found


def bytes_received_on(port: int) -> int:
    """Bytes the kernel received on every established connection to local ``port``."""
    out = subprocess.run(
        ["ss", "-tinH", "state", "established", f"( sport = :{port} )"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return sum(int(n) for n in re.findall(r"bytes_received:(\d+)", out))


def produce(cluster: KafkaCluster, topic: str, values: list[bytes], partition: int) -> None:
    producer = KafkaProducer(
        bootstrap_servers=cluster.bootstrap_servers, acks="all", request_timeout_ms=15000
    )
    try:
        for future in [producer.send(topic, v, partition=partition) for v in values]:
            future.get(30)
    finally:
        producer.close()


def test_idle_follower_fetches_name_no_partitions(kafka_cluster_factory: ClusterFactory) -> None:
    cluster = kafka_cluster_factory(2, {"replica.fetch.wait.max.ms": "200"}, metrics=True)
    partitions = 200
    create_topic(cluster, "idle", assignment={p: [0, 1] for p in range(partitions)})
    wait_for(
        lambda: all(p["isr_nodes"] == [0, 1] for p in describe(cluster, "idle")),
        60,
        "both replicas in sync",
    )
    # The follower's session on the leader caches every partition it follows.
    wait_for(lambda: metric(cluster, 0, CACHED) == partitions, 30, "the follower's session")
    assert metric(cluster, 0, SESSIONS) == 1

    fetches = "kafka_network_requestmetrics_requests_total"
    port = cluster.brokers[0].port
    count_before = metric(cluster, 0, fetches, request="FetchFollower")
    bytes_before = bytes_received_on(port)
    time.sleep(5)
    count = metric(cluster, 0, fetches, request="FetchFollower") - count_before
    received = bytes_received_on(port) - bytes_before
    assert count >= 5, count
    # A sessionless fetch of 200 partitions is over 200 x 28 bytes; an incremental one
    # naming none is its header and fixed fields.
    assert received / count < 120, (received, count)

    # Replication goes on: acks=all needs the follower (in the ISR) to fetch the record,
    # which the incremental response carries and the next incremental fetch acknowledges.
    produce(cluster, "idle", [b"x"], partition=7)
    leo = "kafka_log_log_logendoffset"
    wait_for(lambda: metric(cluster, 1, leo, topic="idle", partition="7") == 1, 30, "replica")
    assert all(p["isr_nodes"] == [0, 1] for p in describe(cluster, "idle"))
    assert metric(cluster, 0, SESSIONS) == 1


async def _fetch(
    port: int,
    session: tuple[int, int],
    offsets: dict[int, int],
    forgotten: tuple[int, ...] = (),
    max_wait_ms: int = 100,
) -> Any:
    """One consumer Fetch v11 of topic ``s`` on its own connection."""
    client = BrokerClient("127.0.0.1", port, client_id="fetch-session-test")
    await client.connect()
    partitions = [
        FetchRequest.FetchTopic.FetchPartition(
            partition=p,
            current_leader_epoch=-1,
            fetch_offset=offset,
            log_start_offset=-1,
            partition_max_bytes=1 << 20,
        )
        for p, offset in offsets.items()
    ]
    request = FetchRequest(
        replica_id=-1,
        max_wait_ms=max_wait_ms,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=session[0],
        session_epoch=session[1],
        topics=[FetchRequest.FetchTopic(topic="s", partitions=partitions)] if partitions else [],
        forgotten_topics_data=(
            [FetchRequest.ForgottenTopic(topic="s", partitions=list(forgotten))]
            if forgotten
            else []
        ),
        rack_id="",
    )
    try:
        return await client.send(request, 11)
    finally:
        await client.close()


def _answered(response: Any) -> dict[int, int]:
    """Partition -> HW of the partitions a Fetch response holds."""
    return {p.partition_index: p.high_watermark for t in response.responses for p in t.partitions}


def test_session_protocol_epochs_errors_and_a_restart(
    kafka_cluster_factory: ClusterFactory,
) -> None:
    cluster = kafka_cluster_factory(1, metrics=True)
    create_topic(cluster, "s", partitions=3, rf=1)
    produce(cluster, "s", [b"a"] * 5, partition=0)
    port = cluster.brokers[0].port

    full = asyncio.run(_fetch(port, (0, 0), {0: 0, 1: 0, 2: 0}))
    assert full.error_code == 0 and full.session_id != 0
    assert _answered(full) == {0: 5, 1: 0, 2: 0}
    sid = full.session_id
    assert metric(cluster, 0, SESSIONS) == 1 and metric(cluster, 0, CACHED) == 3

    # Epoch 1: partition 0 moves to its end; nothing changed, nothing answered.
    idle = asyncio.run(_fetch(port, (sid, 1), {0: 5}))
    assert (idle.error_code, idle.session_id, _answered(idle)) == (0, sid, {})
    stale = asyncio.run(_fetch(port, (sid, 1), {}))
    assert (stale.error_code, stale.session_id) == (INVALID_FETCH_SESSION_EPOCH, 0)
    # Epoch 2: a record on partition 1 comes back alone (it is still fetched from 0).
    produce(cluster, "s", [b"b"], partition=1)
    news = asyncio.run(_fetch(port, (sid, 2), {}))
    assert (news.error_code, _answered(news)) == (0, {1: 1})
    # Epoch 3 forgets partition 2.
    asyncio.run(_fetch(port, (sid, 3), {}, forgotten=(2,)))
    assert metric(cluster, 0, CACHED) == 2

    cluster.brokers[0].stop()
    cluster.brokers[0].start()
    wait_cluster_ready(cluster)
    wait_for(lambda: len(leaders(cluster, "s")) == 3, 30, "partitions led again")
    lost = asyncio.run(_fetch(port, (sid, 4), {}))
    assert (lost.error_code, lost.session_id, _answered(lost)) == (
        FETCH_SESSION_ID_NOT_FOUND,
        0,
        {},
    )
    again = asyncio.run(_fetch(port, (0, 0), {0: 5, 1: 1}))
    assert again.error_code == 0 and again.session_id not in (0, sid)
    assert _answered(again) == {0: 5, 1: 1}
    # FINAL_EPOCH closes the session and is answered sessionless, in full.
    final = asyncio.run(_fetch(port, (again.session_id, -1), {0: 0}))
    assert (final.error_code, final.session_id, _answered(final)) == (0, 0, {0: 5})
    assert metric(cluster, 0, SESSIONS) == 0


def test_java_and_confluent_consumers_read_across_sessions_and_a_leader_restart(
    kafka_cluster_factory: ClusterFactory, classpath: str, tmp_path: Path
) -> None:
    cluster = kafka_cluster_factory(2, {"offsets.topic.replication.factor": "1"}, metrics=True)
    create_topic(cluster, "events", assignment={p: [0] for p in range(4)})
    first = [f"a{i}".encode() for i in range(100)]
    for p in range(4):
        produce(cluster, "events", first[p::4], partition=p)

    log4j = tmp_path / "log4j.properties"
    log4j.write_text(
        "log4j.rootLogger=WARN, stderr\n"
        "log4j.appender.stderr=org.apache.log4j.ConsoleAppender\n"
        "log4j.appender.stderr.Target=System.err\n"
        "log4j.appender.stderr.layout=org.apache.log4j.PatternLayout\n"
        "log4j.appender.stderr.layout.ConversionPattern=%p %c: %m%n\n"
        "log4j.logger.org.apache.kafka.clients.FetchSessionHandler=DEBUG\n"
    )
    out, err = tmp_path / "consumer.out", tmp_path / "consumer.err"
    argv = java_command(
        classpath,
        256,
        CONSOLE_CONSUMER,
        [
            "--bootstrap-server",
            cluster.bootstrap_servers,
            "--topic",
            "events",
            "--from-beginning",
            "--max-messages",
            "200",
            "--timeout-ms",
            "120000",
        ],
        [f"-Dlog4j.configuration=file:{log4j}"],
    )
    with out.open("w") as stdout, err.open("w") as stderr:
        consumer = subprocess.Popen(argv, stdout=stdout, stderr=stderr)
        try:

            def lines() -> list[str]:
                return out.read_text().splitlines()

            wait_for(lambda: len(lines()) == 100, 120, "the first 100 records")
            # The Java consumer fetches in an incremental session on broker 0.
            assert metric(cluster, 0, SESSIONS) >= 1
            created = err.read_text().count("created a new incremental fetch session")
            assert created >= 1

            cluster.brokers[0].stop()
            cluster.brokers[0].start()
            wait_cluster_ready(cluster)
            wait_for(lambda: len(leaders(cluster, "events")) == 4, 60, "partitions led again")
            second = [f"b{i}".encode() for i in range(100)]
            for p in range(4):
                produce(cluster, "events", second[p::4], partition=p)
            assert consumer.wait(180) == 0, err.read_text()[-3000:]
        finally:
            if consumer.poll() is None:
                consumer.kill()
                consumer.wait()
    assert sorted(lines()) == sorted(v.decode() for v in first + second)
    # After the restart the consumer's session was gone; it fetched in full and opened
    # a new one on the restarted broker.
    log = err.read_text()
    assert log.count("created a new incremental fetch session") > created, log[-3000:]

    # librdkafka fetches sessionless; it reads the same records.
    confluent = ConfluentConsumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": "fetch-sessions",
            "enable.auto.commit": False,
        }
    )
    try:
        confluent.assign([ConfluentTopicPartition("events", p, 0) for p in range(4)])
        values: list[bytes] = []

        def consumed_all() -> bool:
            message = confluent.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value())
            return len(values) == 200

        wait_for(consumed_all, 60, "200 records")
    finally:
        confluent.close()
    assert sorted(values) == sorted(first + second)
