"""Topic and broker configs on the real fleet: accepted means applied.

One 3-broker cluster for the module; each test uses its own topics and puts back every
cluster-wide dynamic config it sets. Each applied config is shown by its effect, seen by
real clients (kafka-python, confluent-kafka) or on the brokers' disks: recompressed
batches in the segment files, segments deleted after a dynamic ``log.retention.ms``,
NOT_ENOUGH_REPLICAS, INVALID_TIMESTAMP, MESSAGE_TOO_LARGE, fsyncs moving the recovery
point, connections refused by a dynamic ``max.connections.per.ip.overrides``, an
unclean election allowed by a topic override, topic ids, DeleteRecords on every replica.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException, TopicCollection
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)
from kafka import KafkaProducer
from kafka.errors import (
    InvalidTimestampError,
    MessageSizeTooLargeError,
    NotEnoughReplicasError,
)
from kafka.protocol.admin import IncrementalAlterConfigsRequest
from kazoo.client import KazooClient

from kpo_broker.log.checkpoints import OffsetCheckpointFile
from kpo_broker.log.records import iter_batches
from kpo_broker.protocol.client import BrokerClient
from kpo_devenv import ZooKeeperServer
from kpo_devenv.apache_kafka import java_command, kafka_classpath
from kpo_devenv.kafka_cluster import KafkaCluster
from kpo_devenv.tools import pinned_version
from kpo_kafka.topic_partition import TopicPartition
from tests.integration.broker.conftest import wait_cluster_ready, wait_for
from tests.integration.broker.server.helpers import consume_all, create_topic, leaders, zk_client

pytestmark = pytest.mark.integration

_Resource = IncrementalAlterConfigsRequest.AlterConfigsResource
_Alterable = _Resource.AlterableConfig
CHECK_MS = 300
"""Retention checks and recovery-point / log-start-offset checkpoints, ms."""


@pytest.fixture(scope="module")
def cluster(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KafkaCluster]:
    chroot = f"configs-{uuid.uuid4().hex[:8]}"
    fleet = KafkaCluster(
        tmp_path_factory.mktemp(chroot),
        f"{zookeeper.connect_string}/{chroot}",
        3,
        {
            "auto.create.topics.enable": "false",
            "replica.fetch.wait.max.ms": "100",
            "log.retention.check.interval.ms": str(CHECK_MS),
            "log.flush.offset.checkpoint.interval.ms": str(CHECK_MS),
            "log.flush.start.offset.checkpoint.interval.ms": str(CHECK_MS),
            "replica.lag.time.max.ms": "3000",
        },
    )
    try:
        fleet.start()
        wait_cluster_ready(fleet)
        yield fleet
    finally:
        fleet.stop()


def admin(cluster: KafkaCluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.bootstrap_servers})


def alter(
    cluster: KafkaCluster,
    resource_type: ResourceType,
    name: str,
    sets: dict[str, str] | None = None,
    deletes: tuple[str, ...] = (),
) -> None:
    """IncrementalAlterConfigs through librdkafka; raise the broker's error if refused.

    librdkafka cannot name the cluster default (an empty broker name): that goes through
    kafka-python's admin client.
    """
    if resource_type == ResourceType.BROKER and name == "":
        alter_cluster_default(cluster, sets or {}, deletes)
        return
    entries = [
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
        for k, v in (sets or {}).items()
    ] + [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in deletes]
    resource = ConfigResource(resource_type, name, incremental_configs=entries)
    client = admin(cluster)  # kept referenced until the futures are done
    for future in client.incremental_alter_configs([resource]).values():
        future.result(timeout=30)


def alter_cluster_default(
    cluster: KafkaCluster, sets: dict[str, str], deletes: tuple[str, ...]
) -> None:
    """IncrementalAlterConfigs v1 on the cluster default (resource BROKER, name "")."""
    entries = [_Alterable(name=k, config_operation=0, value=v) for k, v in sets.items()] + [
        _Alterable(name=k, config_operation=1, value=None) for k in deletes
    ]
    request = IncrementalAlterConfigsRequest(
        resources=[_Resource(resource_type=4, resource_name="", configs=entries)],
        validate_only=False,
    )

    async def send() -> Any:
        client = BrokerClient("127.0.0.1", cluster.brokers[0].port, "tests", 30000)
        try:
            return await client.send(request, 1)
        finally:
            await client.close()

    (response,) = asyncio.run(send()).responses
    assert response.error_code == 0, response.error_message


def describe(cluster: KafkaCluster, resource_type: ResourceType, name: str) -> dict[str, Any]:
    client = admin(cluster)
    (future,) = client.describe_configs([ConfigResource(resource_type, name)]).values()
    return dict(future.result(timeout=30))


def producer(cluster: KafkaCluster, **settings: Any) -> KafkaProducer:
    return KafkaProducer(
        bootstrap_servers=cluster.bootstrap_servers,
        request_timeout_ms=10000,
        retries=0,
        enable_idempotence=False,
        **settings,
    )


def segment_batches(cluster: KafkaCluster, broker: int, topic: str, partition: int) -> list[Any]:
    """Batch headers of every ``.log`` file of the partition on ``broker``'s disk."""
    directory = cluster.brokers[broker].log_dir / f"{topic}-{partition}"
    headers = []
    for path in sorted(directory.glob("*.log")):
        headers += [h for h, _ in iter_batches(path.read_bytes())]
    return headers


def checkpoint(cluster: KafkaCluster, broker: int, name: str) -> dict[TopicPartition, int]:
    path = cluster.brokers[broker].log_dir / name
    return OffsetCheckpointFile(path).read() if path.exists() else {}


# --- compression.type ---------------------------------------------------------------------


def test_compression_type_recompresses_on_the_leader(cluster: KafkaCluster) -> None:
    create_topic(cluster, "zipped", partitions=1, rf=3, configs={"compression.type": "gzip"})
    sender = producer(cluster, compression_type=None, linger_ms=20, acks="all")
    sent: list[bytes] = []

    def send(count: int) -> None:
        for _ in range(count):
            sent.append(f"record-{len(sent)}".encode() * 20)
            sender.send("zipped", sent[-1], partition=0)
        sender.flush()

    send(100)
    leader = leaders(cluster, "zipped")[0]
    assert {h.compression_type for h in segment_batches(cluster, leader, "zipped", 0)} == {1}
    # a change of an existing topic reaches its existing logs: lz4 from then on
    alter(cluster, ResourceType.TOPIC, "zipped", {"compression.type": "lz4"})

    def last_batch_is_lz4() -> bool:
        send(10)
        return segment_batches(cluster, leader, "zipped", 0)[-1].compression_type == 3

    wait_for(last_batch_is_lz4, 60, "lz4 batches")
    sender.close()
    assert consume_all(cluster, "zipped", 1, len(sent))[0] == sent
    on_leader = [h.compression_type for h in segment_batches(cluster, leader, "zipped", 0)]
    assert on_leader == sorted(on_leader) and set(on_leader) == {1, 3}  # gzip, then lz4
    for broker in cluster.brokers:  # followers store the leader's batches as they are
        wait_for(
            lambda b=broker: (
                [h.compression_type for h in segment_batches(cluster, b, "zipped", 0)] == on_leader
            ),
            30,
            f"replica on broker {broker}",
        )


# --- dynamic broker configs ---------------------------------------------------------------


def test_dynamic_log_retention_ms_deletes_segments_of_topics_without_override(
    cluster: KafkaCluster,
) -> None:
    create_topic(cluster, "aging", partitions=1, rf=3, configs={"segment.bytes": "2048"})
    create_topic(
        cluster,
        "kept",
        partitions=1,
        rf=3,
        configs={"segment.bytes": "2048", "retention.ms": "-1"},
    )
    sender = producer(cluster, acks="all", batch_size=1000)  # batches below segment.bytes
    old = int(time.time() * 1000) - 60000
    for _ in range(100):
        sender.send("aging", b"x" * 200, partition=0, timestamp_ms=old)
        sender.send("kept", b"x" * 200, partition=0, timestamp_ms=old)
    sender.flush()
    sender.close()
    assert len(list((cluster.brokers[0].log_dir / "aging-0").glob("*.log"))) > 3
    try:
        alter(cluster, ResourceType.BROKER, "", {"log.retention.ms": "10000"})
        entry = describe(cluster, ResourceType.TOPIC, "aging")["retention.ms"]
        assert (entry.value, entry.source) == ("10000", 3)  # DYNAMIC_DEFAULT_BROKER_CONFIG

        def start_offset(broker: int, topic: str) -> int:
            start = checkpoint(cluster, broker, "log-start-offset-checkpoint")
            return start.get(TopicPartition(topic, 0), 0)

        for broker in cluster.brokers:
            wait_for(lambda b=broker: start_offset(b, "aging") > 0, 30, f"retention on {broker}")
        time.sleep(3 * CHECK_MS / 1000)
        assert all(start_offset(b, "kept") == 0 for b in cluster.brokers)
    finally:
        alter(cluster, ResourceType.BROKER, "", deletes=("log.retention.ms",))
    entry = describe(cluster, ResourceType.TOPIC, "aging")["retention.ms"]
    assert (entry.value, entry.source) == (str(7 * 24 * 3_600_000), 5)  # back to the default


def test_dynamic_message_max_bytes_applies_to_topics_without_override(
    cluster: KafkaCluster,
) -> None:
    create_topic(cluster, "small", partitions=1, rf=1)
    sender = producer(cluster, max_request_size=10_000_000)
    try:
        sender.send("small", b"y" * 20_000, partition=0).get(timeout=30)
        alter(cluster, ResourceType.BROKER, "", {"message.max.bytes": "10000"})
        assert describe(cluster, ResourceType.TOPIC, "small")["max.message.bytes"].value == "10000"

        def refused() -> bool:
            try:
                sender.send("small", b"y" * 20_000, partition=0).get(timeout=30)
            except MessageSizeTooLargeError:
                return True
            return False

        wait_for(refused, 30, "MESSAGE_TOO_LARGE")
    finally:
        alter(cluster, ResourceType.BROKER, "", deletes=("message.max.bytes",))
        sender.close()


def test_dynamic_connection_limit_override_refuses_that_address(cluster: KafkaCluster) -> None:
    port = cluster.brokers[0].port

    def connection_survives() -> bool:
        with socket.create_connection(("127.0.0.1", port), 5, ("127.0.0.2", 0)) as conn:
            conn.settimeout(1.0)
            try:
                return conn.recv(1) != b""  # closed at accept: EOF at once
            except TimeoutError:
                return True

    assert connection_survives()
    try:
        alter(
            cluster, ResourceType.BROKER, "0", {"max.connections.per.ip.overrides": "127.0.0.2:0"}
        )
        entry = describe(cluster, ResourceType.BROKER, "0")["max.connections.per.ip.overrides"]
        assert (entry.value, entry.source) == ("127.0.0.2:0", 2)  # DYNAMIC_BROKER_CONFIG
        wait_for(lambda: not connection_survives(), 30, "127.0.0.2 refused")
    finally:
        alter(cluster, ResourceType.BROKER, "0", deletes=("max.connections.per.ip.overrides",))
    wait_for(connection_survives, 30, "127.0.0.2 accepted again")


def test_refused_broker_configs_name_kafkas_error(cluster: KafkaCluster) -> None:
    for sets in ({"broker.id": "7"}, {"log.retention.hours": "1"}, {"log.retention.ms": "x"}):
        with pytest.raises(KafkaException) as caught:
            alter(cluster, ResourceType.BROKER, "0", sets)
        assert caught.value.args[0].name() == "INVALID_CONFIG", sets
    with pytest.raises(KafkaException) as caught:
        alter(cluster, ResourceType.TOPIC, "no-such-topic", {"retention.ms": "1"})
    assert caught.value.args[0].name() == "UNKNOWN_TOPIC_OR_PART"


# --- topic configs with an effect -----------------------------------------------------------


def test_min_insync_replicas_refuses_acks_all(cluster: KafkaCluster) -> None:
    create_topic(cluster, "guarded", partitions=1, rf=2, configs={"min.insync.replicas": "3"})
    sender = producer(cluster, acks="all")
    try:
        with pytest.raises(NotEnoughReplicasError):
            sender.send("guarded", b"v", partition=0).get(timeout=30)
        alter(cluster, ResourceType.TOPIC, "guarded", {"min.insync.replicas": "2"})

        def accepted() -> bool:
            try:
                sender.send("guarded", b"v", partition=0).get(timeout=30)
            except NotEnoughReplicasError:
                return False
            return True

        wait_for(accepted, 30, "acks=all accepted once min.insync.replicas=2")
    finally:
        sender.close()


def test_timestamps_outside_the_topic_bounds_are_invalid(cluster: KafkaCluster) -> None:
    create_topic(
        cluster,
        "clocked",
        partitions=1,
        rf=1,
        configs={
            "message.timestamp.before.max.ms": "3600000",
            "message.timestamp.after.max.ms": "60000",
        },
    )
    sender = producer(cluster)
    now = int(time.time() * 1000)
    try:
        for stamp in (now - 2 * 3_600_000, now + 600_000):
            with pytest.raises(InvalidTimestampError):
                sender.send("clocked", b"v", partition=0, timestamp_ms=stamp).get(timeout=30)
        sender.send("clocked", b"ok", partition=0, timestamp_ms=now - 60_000).get(timeout=30)
    finally:
        sender.close()
    assert consume_all(cluster, "clocked", 1, 1)[0] == [b"ok"]


def test_flush_messages_fsyncs_and_moves_the_recovery_point(cluster: KafkaCluster) -> None:
    create_topic(cluster, "synced", partitions=1, rf=1, configs={"flush.messages": "1"})
    create_topic(cluster, "lazy", partitions=1, rf=1)
    sender = producer(cluster, acks="all")
    for i in range(20):
        sender.send("synced", b"%d" % i, partition=0)
        sender.send("lazy", b"%d" % i, partition=0)
    sender.flush()
    sender.close()
    synced_on = leaders(cluster, "synced")[0]
    lazy_on = leaders(cluster, "lazy")[0]

    def recovery_point(broker: int, topic: str) -> int:
        points = checkpoint(cluster, broker, "recovery-point-offset-checkpoint")
        return points.get(TopicPartition(topic, 0), -1)

    wait_for(lambda: recovery_point(synced_on, "synced") == 20, 30, "synced recovery point")
    wait_for(lambda: recovery_point(lazy_on, "lazy") == 0, 30, "lazy checkpointed")
    time.sleep(3 * CHECK_MS / 1000)
    assert recovery_point(lazy_on, "lazy") == 0  # nothing fsynced without flush.messages


def test_a_topic_override_allows_an_unclean_election(cluster: KafkaCluster) -> None:
    """unclean.leader.election.enable=true on the topic only: the controller honours it,
    at the election and when it is set while the partition is offline."""
    unclean = {"unclean.leader.election.enable": "true"}
    create_topic(cluster, "risky", configs=unclean, assignment={0: [1, 2]})
    create_topic(cluster, "careful", assignment={0: [1, 2]})
    cluster.brokers[2].stop()  # controlled shutdown: leaves both ISRs
    wait_for(lambda: leaders(cluster, "risky") == {0: 1}, what="broker 1 leads")
    sender = producer(cluster, acks=1)
    sender.send("risky", b"only-on-1", partition=0).get(timeout=30)
    sender.close()
    cluster.brokers[1].kill()
    cluster.brokers[2].start()
    try:
        wait_for(lambda: leaders(cluster, "risky").get(0) == 2, 60, "unclean leader 2")
        time.sleep(2)
        assert 0 not in leaders(cluster, "careful")  # offline: broker 2 is not in its ISR
        # set on the offline topic, it elects at once (Kafka's TopicUncleanLeaderElectionEnable)
        alter(cluster, ResourceType.TOPIC, "careful", unclean)
        wait_for(lambda: leaders(cluster, "careful").get(0) == 2, 60, "careful elected")
    finally:
        cluster.brokers[1].start()
        wait_cluster_ready(cluster)


# --- topic ids (KIP-516) and DeleteRecords (KIP-107) ----------------------------------------


def test_topic_ids_are_stored_and_answered(cluster: KafkaCluster) -> None:
    create_topic(cluster, "identified", partitions=2, rf=2)
    zk = zk_client(cluster)
    raw = KazooClient(hosts=cluster.zookeeper_connect)
    raw.start(timeout=30)
    try:
        stored = zk.get_replica_assignments(["identified"])["identified"].topic_id
        # a topic written by an older Kafka (version 2, no id) gets one from the controller
        raw.create(
            "/brokers/topics/legacy",
            json.dumps({"version": 2, "partitions": {"0": [0, 1]}}).encode(),
        )
        wait_for(
            lambda: zk.get_replica_assignments(["legacy"])["legacy"].topic_id is not None,
            30,
            "legacy topic id",
        )
        legacy = zk.get_replica_assignments(["legacy"])["legacy"].topic_id
    finally:
        raw.stop()
        raw.close()
        zk.close()
    assert stored is not None and len(stored) == 22
    client = admin(cluster)

    def topic_id(name: str) -> str:
        futures = client.describe_topics(TopicCollection([name]))
        # librdkafka prints ids in standard base64; Kafka's Uuid.toString is URL-safe
        text = str(futures[name].result(timeout=30).topic_id)
        return text.replace("+", "-").replace("/", "_")

    assert topic_id("identified") == stored
    wait_for(lambda: topic_id("legacy") == legacy, 30, "legacy id in metadata")


def test_delete_records_advances_every_replica(cluster: KafkaCluster) -> None:
    create_topic(cluster, "trimmed", partitions=1, rf=3)
    sender = producer(cluster, acks="all")
    for i in range(100):
        sender.send("trimmed", b"%d" % i, partition=0)
    sender.flush()
    sender.close()
    client = admin(cluster)
    (future,) = client.delete_records([CkTopicPartition("trimmed", 0, 40)]).values()
    deleted = future.result(timeout=30)
    assert deleted.low_watermark == 40
    for broker in cluster.brokers:
        wait_for(
            lambda b=broker: (
                checkpoint(cluster, b, "log-start-offset-checkpoint").get(
                    TopicPartition("trimmed", 0)
                )
                == 40
            ),
            30,
            f"log start offset on broker {broker}",
        )
    assert consume_all(cluster, "trimmed", 1, 60)[0][0] == b"40"
    with pytest.raises(KafkaException) as caught:
        (future,) = client.delete_records([CkTopicPartition("trimmed", 0, 101)]).values()
        future.result(timeout=30)
    assert caught.value.args[0].name() == "OFFSET_OUT_OF_RANGE"
    (future,) = client.delete_records([CkTopicPartition("trimmed", 0, -1)]).values()
    assert future.result(timeout=30).low_watermark == 100


# --- Apache Kafka 3.9's own tools -------------------------------------------------------------

CONFIG_COMMAND = "kafka.admin.ConfigCommand"
TOPIC_COMMAND = "org.apache.kafka.tools.TopicCommand"
DELETE_RECORDS_COMMAND = "org.apache.kafka.tools.DeleteRecordsCommand"


def kafka_tool(cluster: KafkaCluster, main_class: str, *args: str, ok: bool = True) -> str:
    """Run one of Kafka's command-line tools against the fleet; return stdout (+ stderr)."""
    argv = java_command(
        kafka_classpath(pinned_version("KAFKA_VERSION")),
        256,
        main_class,
        ["--bootstrap-server", cluster.bootstrap_servers, *args],
    )
    done = subprocess.run(argv, capture_output=True, text=True, timeout=180, check=False)
    output = done.stdout + done.stderr
    if ok:
        assert done.returncode == 0, f"{main_class} {args}: {output}"
    return output


def configs_tool(cluster: KafkaCluster, *args: str, ok: bool = True) -> str:
    return kafka_tool(cluster, CONFIG_COMMAND, *args, ok=ok)


def described(output: str) -> dict[str, str]:
    """``name=value sensitive=... synonyms={...}`` lines of ``kafka-configs --describe``."""
    found = {}
    for line in output.splitlines():
        match = re.match(r"^\s+([^=\s]+)=(.*) sensitive=(?:true|false) synonyms=\{(.*)\}$", line)
        if match:
            found[match.group(1)] = f"{match.group(2)} {{{match.group(3)}}}"
    return found


def test_kafka_configs_describes_alters_and_deletes_dynamic_broker_configs(
    cluster: KafkaCluster,
) -> None:
    broker = ["--entity-type", "brokers", "--entity-name", "1"]
    default = ["--entity-type", "brokers", "--entity-default"]
    rates = {
        "leader.replication.throttled.rate": "1048576",
        "follower.replication.throttled.rate": "2097152",
        "replica.alter.log.dirs.io.max.bytes.per.second": "3145728",
        "log.retention.ms": "86400000",
        "log.flush.interval.messages": "100000",
        "max.connections.per.ip": "1000",
        "num.io.threads": "12",
    }
    added = ",".join(f"{k}={v}" for k, v in rates.items())
    try:
        assert "Completed updating config for broker 1." in configs_tool(
            cluster, *broker, "--alter", "--add-config", added
        )
        dynamic = described(configs_tool(cluster, *broker, "--describe"))
        for name, value in rates.items():
            assert dynamic[name].startswith(f"{value} {{DYNAMIC_BROKER_CONFIG:{name}={value}"), (
                name,
                dynamic,
            )
        configs_tool(cluster, *default, "--alter", "--add-config", "log.retention.ms=172800000")
        everything = described(configs_tool(cluster, *broker, "--describe", "--all"))
        assert everything["log.retention.ms"] == (
            "86400000 {DYNAMIC_BROKER_CONFIG:log.retention.ms=86400000, "
            "DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=172800000, "
            "DEFAULT_CONFIG:log.retention.hours=168}"
        )
        assert everything["log.retention.hours"] == ("168 {DEFAULT_CONFIG:log.retention.hours=168}")
        assert everything["advertised.listeners"].startswith("PLAINTEXT://")
        assert re.match(r"^\S+:\S+(,\S+:\S+)* \{", everything["listener.security.protocol.map"])
        assert not any("Endpoint(" in v or "SecurityProtocol" in v for v in everything.values())
        assert everything["broker.id"] == (
            "1 {STATIC_BROKER_CONFIG:broker.id=1, DEFAULT_CONFIG:broker.id=-1}"
        )
        # the topic defaults follow: a topic without override inherits the broker's
        create_topic(cluster, "inheriting", partitions=1, rf=1)
        topic = described(
            configs_tool(
                cluster,
                "--entity-type",
                "topics",
                "--entity-name",
                "inheriting",
                "--describe",
                "--all",
            )
        )
        # described by whichever broker answers: its own dynamic config, then the default
        assert "DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=172800000" in topic["retention.ms"]
        assert topic["retention.ms"].endswith("DEFAULT_CONFIG:log.retention.hours=168}")
        # delete, including replica.alter.log.dirs.io.max.bytes.per.second
        configs_tool(cluster, *broker, "--alter", "--delete-config", ",".join(rates))
        assert described(configs_tool(cluster, *broker, "--describe")) == {}
        refused = configs_tool(cluster, *broker, "--alter", "--add-config", "broker.id=9", ok=False)
        assert "Cannot update these configs dynamically" in refused
        unknown = configs_tool(
            cluster,
            "--entity-type",
            "topics",
            "--entity-name",
            "inheriting",
            "--alter",
            "--add-config",
            "flush.message=1",
            ok=False,
        )
        assert "Unknown topic config name: flush.message" in unknown
    finally:
        configs_tool(cluster, *default, "--alter", "--delete-config", "log.retention.ms", ok=False)
        leftovers = described(configs_tool(cluster, *broker, "--describe"))
        if leftovers:
            configs_tool(cluster, *broker, "--alter", "--delete-config", ",".join(leftovers))
    assert described(configs_tool(cluster, *default, "--describe")) == {}


def test_kafka_configs_sets_every_topic_config(cluster: KafkaCluster) -> None:
    create_topic(cluster, "tooled", partitions=1, rf=1)
    values = {
        "compression.type": "zstd",
        "compression.zstd.level": "5",
        "flush.messages": "1000",
        "flush.ms": "60000",
        "segment.jitter.ms": "1000",
        "segment.index.bytes": "1048576",
        "file.delete.delay.ms": "1000",
        "preallocate": "true",
        "message.downconversion.enable": "false",
        "message.timestamp.before.max.ms": "86400000",
        "message.timestamp.after.max.ms": "3600000",
        "local.retention.ms": "-2",
        "max.message.bytes": "2000000",
    }
    entity = ["--entity-type", "topics", "--entity-name", "tooled"]
    configs_tool(
        cluster, *entity, "--alter", "--add-config", ",".join(f"{k}={v}" for k, v in values.items())
    )
    shown = described(configs_tool(cluster, *entity, "--describe"))
    for name, value in values.items():
        assert shown[name].startswith(f"{value} {{DYNAMIC_TOPIC_CONFIG:{name}={value}"), shown
    refused = configs_tool(
        cluster, *entity, "--alter", "--add-config", "remote.storage.enable=true", ok=False
    )
    assert "Tiered Storage functionality is disabled" in refused
    configs_tool(cluster, *entity, "--alter", "--delete-config", ",".join(values))
    assert described(configs_tool(cluster, *entity, "--describe")) == {}


def test_kafka_topics_describe_shows_the_topic_id(cluster: KafkaCluster) -> None:
    create_topic(cluster, "shown", partitions=2, rf=2)
    zk = zk_client(cluster)
    try:
        stored = zk.get_replica_assignments(["shown"])["shown"].topic_id
    finally:
        zk.close()
    output = kafka_tool(cluster, TOPIC_COMMAND, "--describe", "--topic", "shown")
    assert f"TopicId: {stored}" in output, output


def test_kafka_delete_records_advances_the_low_watermark_on_every_replica(
    cluster: KafkaCluster, tmp_path: Path
) -> None:
    create_topic(cluster, "purged", partitions=2, rf=3)
    sender = producer(cluster, acks="all")
    for i in range(50):
        sender.send("purged", b"%d" % i, partition=i % 2)
    sender.flush()
    sender.close()
    plan = tmp_path / "offsets.json"
    plan.write_text(
        json.dumps(
            {
                "partitions": [
                    {"topic": "purged", "partition": 0, "offset": 10},
                    {"topic": "purged", "partition": 1, "offset": -1},
                ],
                "version": 1,
            }
        )
    )
    output = kafka_tool(cluster, DELETE_RECORDS_COMMAND, "--offset-json-file", str(plan))
    assert "partition: purged-0\tlow_watermark: 10" in output, output
    assert "partition: purged-1\tlow_watermark: 25" in output, output
    for broker in cluster.brokers:
        for partition, start in ((0, 10), (1, 25)):
            wait_for(
                lambda b=broker, p=partition, s=start: (
                    checkpoint(cluster, b, "log-start-offset-checkpoint").get(
                        TopicPartition("purged", p)
                    )
                    == s
                ),
                30,
                f"purged-{partition} on broker {broker}",
            )
