"""Consumer groups on real brokers with real clients (kafka-python, confluent-kafka).

One 3-broker cluster is shared by the tests of this module (each uses its own group
and topic); ``__consumer_offsets`` has 6 partitions with 3 replicas, sessions are short.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import InvalidTopicError
from kafka.protocol.producer import ProduceRequest
from kafka.structs import OffsetAndMetadata

from kpo_broker.coordinator.group.records import build_batch, partition_for
from kpo_broker.log.records import iter_batches
from kpo_broker.protocol.client import BrokerClient
from kpo_devenv import ZooKeeperServer
from kpo_devenv.apache_kafka import java_command, kafka_classpath
from kpo_devenv.kafka_cluster import KafkaCluster
from kpo_devenv.process import ManagedProcess
from kpo_devenv.tools import pinned_version
from tests.integration.broker.conftest import admin_client, wait_cluster_ready, wait_for
from tests.integration.broker.server.helpers import create_topic, leaders, zk_client

pytestmark = pytest.mark.integration

OFFSETS_PARTITIONS = 6
GROUP_PROPERTIES = {
    "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS),
    "offsets.topic.replication.factor": "3",
    "group.initial.rebalance.delay.ms": "200",
    "group.min.session.timeout.ms": "1000",
    "offsets.commit.timeout.ms": "5000",
    "offsets.topic.compression.codec": "1",  # gzip: every load and Kafka's formatter decompress
}
MEMBER_SCRIPT = Path(__file__).with_name("group_member.py")
REPO_ROOT = Path(__file__).resolve().parents[4]
CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
CONSUMER_GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
OFFSETS_FORMATTER = "org.apache.kafka.tools.consumer.OffsetsMessageFormatter"
CONSUMER_PERFORMANCE = "org.apache.kafka.tools.ConsumerPerformance"


def kafka_tool(main_class: str, args: list[str], timeout_s: float = 120) -> str:
    """Run one of Apache Kafka's own tools (3.9 jars); return its stdout, fail on exit != 0.

    ConsumerGroupCommand gets ``--timeout 30000`` (its admin calls default to 5 s, short
    for a JVM starting on a loaded machine).
    """
    if main_class == CONSUMER_GROUP_COMMAND:
        args = [*args, "--timeout", "30000"]
    argv = java_command(kafka_classpath(pinned_version("KAFKA_VERSION")), 256, main_class, args)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)
    output = f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert done.returncode == 0, f"{main_class} {args} exited {done.returncode}:\n{output}"
    return done.stdout


@pytest.fixture(scope="module")
def cluster(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KafkaCluster]:
    """Three brokers with a small, fully replicated ``__consumer_offsets``."""
    chroot = f"groups-{uuid.uuid4().hex[:8]}"
    kafka = KafkaCluster(
        tmp_path_factory.mktemp(chroot), f"{zookeeper.connect_string}/{chroot}", 3, GROUP_PROPERTIES
    )
    kafka.start()
    try:
        wait_cluster_ready(kafka)
        yield kafka
    finally:
        kafka.stop()


def produce(cluster: KafkaCluster, topic: str, partitions: int, per_partition: int) -> None:
    """Send ``per_partition`` records to every partition (acks=all)."""
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all", linger_ms=5)
    try:
        for i in range(per_partition):
            for p in range(partitions):
                producer.send(topic, value=f"{p}-{i}".encode(), partition=p)
        producer.flush(timeout=60)
    finally:
        producer.close(timeout=10)


def produce_raw(port: int, topic: str, partition: int) -> Any:
    """Send one Produce (acks=1) of one keyed record; return the partition's answer."""
    _topic = ProduceRequest.TopicProduceData
    _partition = _topic.PartitionProduceData

    async def send() -> Any:
        client = BrokerClient("127.0.0.1", port, "raw-producer", 30000)
        try:
            request = ProduceRequest(
                transactional_id=None,
                acks=1,
                timeout_ms=10000,
                topic_data=[
                    _topic(
                        name=topic,
                        partition_data=[_partition(partition, build_batch([(b"k", b"v")]))],
                    )
                ],
            )
            response = await client.send(request, 9)
        finally:
            await client.close()
        return response.responses[0].partition_responses[0]

    return asyncio.run(send())


def end_offsets(cluster: KafkaCluster, topic: str, partitions: int) -> dict[int, int]:
    """The log end offset of every partition."""
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        return {tp.partition: o for tp, o in consumer.end_offsets(tps).items()}
    finally:
        consumer.close()


def committed(cluster: KafkaCluster, group: str) -> dict[TopicPartition, int]:
    """The group's committed offsets, as the admin client's OffsetFetch reports them."""
    admin = admin_client(cluster)
    try:
        return {tp: o.offset for tp, o in admin.list_group_offsets({group: None})[group].items()}
    finally:
        admin.close()


def describe_group(cluster: KafkaCluster, group: str) -> dict:  # type: ignore[type-arg]
    """DescribeGroups through the admin client (state, members, decoded assignments)."""
    admin = admin_client(cluster)
    try:
        return dict(admin.describe_groups([group])[group])
    finally:
        admin.close()


def test_offsets_topic_created_on_first_find_coordinator(cluster: KafkaCluster) -> None:
    """FindCoordinator creates ``__consumer_offsets`` (compacted); commits come back."""
    create_topic(cluster, "simple-commits", partitions=2, rf=3)
    consumer = KafkaConsumer(
        bootstrap_servers=cluster.bootstrap_servers,
        group_id="simple-group",
        enable_auto_commit=False,
        request_timeout_ms=15000,
    )
    try:
        tp = TopicPartition("simple-commits", 1)
        consumer.assign([tp])
        deadline = time.monotonic() + 60
        while True:
            try:
                consumer.commit({tp: OffsetAndMetadata(7, "meta" * 100, -1)})
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        assert consumer.committed(tp) == 7
    finally:
        consumer.close()
    offsets_leaders = leaders(cluster, "__consumer_offsets")
    assert len(offsets_leaders) == OFFSETS_PARTITIONS
    zk = zk_client(cluster)
    try:
        config = zk.get_entity_config("topics", "__consumer_offsets").config
        assignment = zk.get_replica_assignments(["__consumer_offsets"])["__consumer_offsets"]
    finally:
        zk.close()
    assert config["cleanup.policy"] == "compact"
    assert config["compression.type"] == "producer"
    assert all(len(r.replicas) == 3 for r in assignment.partitions.values())
    admin = admin_client(cluster)
    try:
        topics = admin.describe_topics(["__consumer_offsets"])
    finally:
        admin.close()
    assert topics[0]["is_internal"] is True
    assert committed(cluster, "simple-group") == {TopicPartition("simple-commits", 1): 7}
    # Clients cannot write the internal topic (only its coordinator does).
    answer = produce_raw(cluster.brokers[offsets_leaders[0]].port, "__consumer_offsets", 0)
    assert answer.error_code == InvalidTopicError.errno, answer
    # The commit is a gzip batch (offsets.topic.compression.codec=1) in the group's partition
    # (its metadata makes it compressible: a batch that would not shrink is kept as is).
    partition = partition_for("simple-group", OFFSETS_PARTITIONS)
    segment = (
        cluster.brokers[offsets_leaders[partition]].log_dir
        / f"__consumer_offsets-{partition}"
        / "00000000000000000000.log"
    )
    codecs = {header.compression_type for header, _ in iter_batches(segment.read_bytes())}
    assert codecs == {1}


class Member:
    """A group member process (``group_member.py``)."""

    def __init__(
        self,
        client: str,
        cluster: KafkaCluster,
        group: str,
        topic: str,
        out: Path,
        name: str,
        instance: str | None = None,
    ) -> None:
        self.name = name
        self.out = out
        self.process = ManagedProcess(
            name,
            [
                sys.executable,
                str(MEMBER_SCRIPT),
                client,
                cluster.bootstrap_servers,
                group,
                topic,
                str(out),
                name,
                *([instance] if instance else []),
            ],
            out / f"{name}.log",
            env={"PYTHONUNBUFFERED": "1", "PYTHONPATH": str(REPO_ROOT)},
        )
        self.process.start()

    def assignment(self) -> list[int]:
        path = self.out / f"{self.name}.assignment"
        return json.loads(path.read_text()) if path.exists() else []

    def events(self) -> list[str]:
        path = self.out / f"{self.name}.events"
        return path.read_text().splitlines() if path.exists() else []

    def records(self) -> set[tuple[int, int]]:
        return set(self._pairs("records"))

    def commits(self) -> list[tuple[int, int]]:
        """The acknowledged commits, ``(partition, offset)`` in the order they were made."""
        return self._pairs("commits")

    def _pairs(self, suffix: str) -> list[tuple[int, int]]:
        path = self.out / f"{self.name}.{suffix}"
        if not path.exists():
            return []
        out = []
        for line in path.read_text().split("\n")[:-1]:  # the last one may be half written
            parts = line.split()
            if len(parts) == 2:
                out.append((int(parts[0]), int(parts[1])))
        return out


def test_group_of_three_rebalances_after_a_leave_and_a_crash(
    cluster: KafkaCluster, tmp_path: Path
) -> None:
    """Three members (librdkafka and kafka-python) share 12 partitions; one leaves, one dies."""
    topic, group, partitions = "group-orders", "orders-group", 12
    create_topic(cluster, topic, partitions=partitions, rf=3)
    produce(cluster, topic, partitions, 20)
    members = [
        Member("confluent", cluster, group, topic, tmp_path, "leaving"),
        Member("kafka-python", cluster, group, topic, tmp_path, "staying"),
        Member("confluent", cluster, group, topic, tmp_path, "crashing"),
    ]
    try:

        def balanced() -> bool:
            owned = [m.assignment() for m in members]
            flat = [p for a in owned for p in a]
            return all(owned) and sorted(flat) == list(range(partitions))

        wait_for(balanced, 90, "3 members owning the 12 partitions exactly once")
        described = describe_group(cluster, group)
        assert described["group_state"] == "Stable"
        assert len(described["members"]) == 3
        broker_view = sorted(
            tp.partition if hasattr(tp, "partition") else tp[1]
            for member in described["members"]
            for topic_assignment in [member["member_assignment"]]
            for tp in _assigned_partitions(topic_assignment)
        )
        assert broker_view == list(range(partitions))

        members[0].process.stop(timeout_s=30)  # LeaveGroup
        assert (tmp_path / "leaving.closed").exists()
        members[2].process.kill()  # no LeaveGroup: found dead by its session timeout
        killed_at = time.monotonic()

        def staying_owns_all() -> bool:
            return members[1].assignment() == list(range(partitions))

        wait_for(staying_owns_all, 60, "the remaining member owning every partition")
        rebalance_s = time.monotonic() - killed_at
        print(f"group rebalanced {rebalance_s:.1f} s after a leave and a kill -9")
        # Session timeout (4 s) + the rebalance, with margin for a loaded machine.
        assert rebalance_s < 30, rebalance_s
        produce(cluster, topic, partitions, 20)
        ends = end_offsets(cluster, topic, partitions)
        expected = {(p, o) for p, end in ends.items() for o in range(end)}

        def all_committed() -> bool:
            offsets = committed(cluster, group)
            return all(offsets.get(TopicPartition(topic, p)) == ends[p] for p in range(partitions))

        wait_for(all_committed, 90, "every record committed")
        seen = set().union(*(m.records() for m in members))
        missing = expected - seen
        assert not missing, sorted(missing)[:20]
        described = describe_group(cluster, group)
        assert described["group_state"] == "Stable" and len(described["members"]) == 1
    finally:
        for member in members:
            member.process.stop(timeout_s=20)


def test_static_member_restart_keeps_the_assignment(cluster: KafkaCluster, tmp_path: Path) -> None:
    """KIP-345: a static member killed and restarted within its session causes no rebalance."""
    topic, group, partitions = "static-orders", "static-group", 4
    create_topic(cluster, topic, partitions=partitions, rf=3)
    steady = Member("confluent", cluster, group, topic, tmp_path, "steady", "instance-a")
    bouncing = Member("confluent", cluster, group, topic, tmp_path, "bouncing", "instance-b")
    try:
        wait_for(
            lambda: (
                sorted(steady.assignment() + bouncing.assignment()) == list(range(partitions))
                and bool(steady.assignment())
                and bool(bouncing.assignment())
            ),
            90,
            "two static members sharing the partitions",
        )
        before = describe_group(cluster, group)
        steady_events = steady.events()
        bouncing_owned = bouncing.assignment()
        bouncing.process.kill()
        bouncing = Member("confluent", cluster, group, topic, tmp_path, "bouncing", "instance-b")
        wait_for(
            lambda: bouncing.assignment() == bouncing_owned, 60, "the restarted member's partitions"
        )
        time.sleep(5)  # longer than the session timeout: a rebalance would have happened
        assert steady.events() == steady_events  # no revoke, no new assignment
        after = describe_group(cluster, group)
        assert after["group_state"] == "Stable"
        assert {m["group_instance_id"] for m in after["members"]} == {"instance-a", "instance-b"}
        old_ids = {m["member_id"] for m in before["members"]}
        new_ids = {m["member_id"] for m in after["members"]}
        assert len(old_ids & new_ids) == 1  # the bounced member got a new member id
    finally:
        steady.process.stop(timeout_s=20)
        bouncing.process.stop(timeout_s=20)


def test_java_librdkafka_and_kafka_python_members_share_a_group(
    cluster: KafkaCluster, tmp_path: Path
) -> None:
    """Members whose clients offer different assignors: the one all support is chosen.

    Kafka's Java consumer offers range and cooperative-sticky, librdkafka and kafka-python
    range and roundrobin: the coordinator picks range and relays the leader's assignment.
    """
    topic, group, partitions = "mixed-orders", "mixed-group", 6
    create_topic(cluster, topic, partitions=partitions, rf=3)
    java = ManagedProcess(
        "java-member",
        java_command(
            kafka_classpath(pinned_version("KAFKA_VERSION")),
            256,
            CONSOLE_CONSUMER,
            [
                "--bootstrap-server",
                cluster.bootstrap_servers,
                "--topic",
                topic,
                "--group",
                group,
                "--consumer-property",
                "session.timeout.ms=6000",
            ],
        ),
        tmp_path / "java-member.log",
    )
    java.start()
    members = [
        Member("confluent", cluster, group, topic, tmp_path, "librdkafka"),
        Member("kafka-python", cluster, group, topic, tmp_path, "python"),
    ]
    try:

        def three_members_cover_all() -> bool:
            described = describe_group(cluster, group)
            owned = sorted(
                tp.partition
                for member in described["members"]
                for tp in _assigned_partitions(member["member_assignment"])
            )
            python_owned = [p for m in members for p in m.assignment()]
            return (
                described["group_state"] == "Stable"
                and len(described["members"]) == 3
                and owned == list(range(partitions))
                and all(m.assignment() for m in members)
                and len(python_owned) < partitions  # the Java member owns some too
            )

        wait_for(three_members_cover_all, 120, "Java, librdkafka and kafka-python members")
        described = describe_group(cluster, group)
        assert described["protocol_type"] == "consumer"
        assert described["protocol_data"] == "range"
        clients = {m["client_id"] for m in described["members"]}
        assert any(c.startswith("console-consumer") for c in clients), clients
    finally:
        for member in members:
            member.process.stop(timeout_s=20)
        java.stop(timeout_s=20)


def _assigned_partitions(assignment: object) -> list[TopicPartition]:
    """Partitions of a decoded ConsumerProtocolAssignment (as kafka-python returns it)."""
    out: list[TopicPartition] = []
    if assignment is None:
        return out
    items = (
        assignment.get("assigned_partitions")
        if isinstance(assignment, dict)
        else getattr(assignment, "assigned_partitions", None)
    )
    for entry in items or ():
        topic = entry["topic"] if isinstance(entry, dict) else entry.topic
        parts = entry["partitions"] if isinstance(entry, dict) else entry.partitions
        out.extend(TopicPartition(topic, p) for p in parts)
    return out


def json_objects(text: str) -> list[dict]:  # type: ignore[type-arg]
    """The JSON objects written one after another (Kafka's ApiMessageFormatter adds no newline)."""
    decoder = json.JSONDecoder()
    out, position = [], 0
    while (start := text.find("{", position)) >= 0:
        obj, position = decoder.raw_decode(text, start)
        out.append(obj)
    return out


def test_apache_kafka_tools_consume_describe_reset_and_delete(cluster: KafkaCluster) -> None:
    """Kafka's ConsoleConsumer --group, ConsumerGroupCommand and ConsumerPerformance."""
    topic, group, partitions = "tools-topic", "tools-group", 3
    create_topic(cluster, topic, partitions=partitions, rf=3)
    produce(cluster, topic, partitions, 10)
    bootstrap = cluster.bootstrap_servers
    out = kafka_tool(
        CONSOLE_CONSUMER,
        [
            "--bootstrap-server",
            bootstrap,
            "--topic",
            topic,
            "--group",
            group,
            "--from-beginning",
            "--max-messages",
            "30",
            "--timeout-ms",
            "60000",
        ],
    )
    assert sorted(out.split()) == sorted(f"{p}-{i}" for p in range(partitions) for i in range(10))
    assert committed(cluster, group) == {TopicPartition(topic, p): 10 for p in range(partitions)}

    listed = kafka_tool(CONSUMER_GROUP_COMMAND, ["--bootstrap-server", bootstrap, "--list"])
    assert group in listed.split()
    described = kafka_tool(
        CONSUMER_GROUP_COMMAND, ["--bootstrap-server", bootstrap, "--describe", "--group", group]
    )
    rows = [line.split() for line in described.splitlines() if line.startswith(group)]
    # GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID
    assert sorted((r[1], int(r[2]), int(r[3]), int(r[4]), int(r[5])) for r in rows) == [
        (topic, p, 10, 10, 0) for p in range(partitions)
    ]
    reset = kafka_tool(
        CONSUMER_GROUP_COMMAND,
        [
            "--bootstrap-server",
            bootstrap,
            "--reset-offsets",
            "--group",
            group,
            "--topic",
            topic,
            "--to-offset",
            "4",
            "--execute",
        ],
    )
    assert re.search(rf"{group}\s+{topic}\s+0\s+4", reset), reset
    assert committed(cluster, group) == {TopicPartition(topic, p): 4 for p in range(partitions)}

    removed = kafka_tool(
        CONSUMER_GROUP_COMMAND,
        ["--bootstrap-server", bootstrap, "--delete-offsets", "--group", group,
         "--topic", f"{topic}:0"],
    )  # fmt: skip
    assert f"Request succeed for deleting offsets with topic {topic}:0" in removed, removed
    assert committed(cluster, group) == {TopicPartition(topic, p): 4 for p in (1, 2)}

    records = kafka_tool(
        CONSOLE_CONSUMER,
        [
            "--bootstrap-server",
            bootstrap,
            "--topic",
            "__consumer_offsets",
            "--partition",
            str(partition_for(group, OFFSETS_PARTITIONS)),
            "--offset",
            "earliest",
            "--formatter",
            OFFSETS_FORMATTER,
            "--consumer-property",
            "exclude.internal.topics=false",
            "--timeout-ms",
            "15000",
        ],
    )
    # Kafka's own formatter decodes our records: the reset commits are there, as JSON.
    decoded = json_objects(records)
    mine = [
        d for d in decoded if d.get("key") and d["key"]["data"].get("group") == group and d["value"]
    ]
    assert {(d["key"]["data"]["partition"], d["value"]["data"]["offset"]) for d in mine} >= {
        (p, 4) for p in range(partitions)
    }
    # OffsetDelete wrote a tombstone for partition 0's commit.
    assert any(
        d.get("key") and d["key"]["data"].get("group") == group and d["value"] is None
        for d in decoded
    )
    assert all(d["key"]["version"] == 1 and d["value"]["version"] == 3 for d in mine)

    perf = kafka_tool(
        CONSUMER_PERFORMANCE,
        ["--bootstrap-server", bootstrap, "--topic", topic, "--group", "perf-group",
         "--messages", "30", "--timeout", "60000", "--hide-header"],
    )  # fmt: skip
    # start.time, end.time, MB, MB/s, nMsg, ...: every record came through its own group.
    assert [int(line.split(",")[4]) for line in perf.splitlines() if line.count(",") >= 5] == [30]

    deleted = kafka_tool(
        CONSUMER_GROUP_COMMAND, ["--bootstrap-server", bootstrap, "--delete", "--group", group]
    )
    assert "successful" in deleted, deleted
    assert (
        group
        not in kafka_tool(
            CONSUMER_GROUP_COMMAND, ["--bootstrap-server", bootstrap, "--list"]
        ).split()
    )
    assert committed(cluster, group) == {}


def test_coordinator_moves_with_its_offsets_partition_without_a_rebalance(
    cluster: KafkaCluster,
) -> None:
    """Reassigning the group's ``__consumer_offsets`` partition moves the coordinator.

    The old leader unloads the group, the new one loads it from the log: the member keeps
    its generation (no rebalance) and every acknowledged commit is kept.
    """
    from kafka.consumer.subscription_state import ConsumerRebalanceListener

    topic, group = "moving-commits", "moving-group"
    create_topic(cluster, topic, partitions=1, rf=3)
    tp = TopicPartition(topic, 0)
    events: list[str] = []

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        def on_partitions_revoked(self, revoked: object) -> None:
            if revoked:  # kafka-python also calls it, empty, before the first join
                events.append("revoke")

        def on_partitions_assigned(self, assigned: object) -> None:
            events.append("assign")

    acknowledged = [-1]
    failures: list[str] = []
    stop = threading.Event()

    def commit_forever() -> None:
        consumer = KafkaConsumer(
            bootstrap_servers=cluster.bootstrap_servers,
            group_id=group,
            enable_auto_commit=False,
            session_timeout_ms=6000,
            heartbeat_interval_ms=500,
            request_timeout_ms=10000,
            retry_backoff_ms=100,
        )
        consumer.subscribe([topic], listener=Listener())
        offset = 0
        try:
            while not stop.is_set():
                consumer.poll(timeout_ms=50)
                if tp not in consumer.assignment():
                    continue
                try:
                    consumer.commit({tp: OffsetAndMetadata(offset + 1, "", -1)})
                    offset += 1
                    acknowledged[0] = offset
                except Exception as exc:
                    failures.append(repr(exc))
                    time.sleep(0.1)
        finally:
            consumer.close()

    worker = threading.Thread(target=commit_forever)
    worker.start()
    try:
        wait_for(lambda: acknowledged[0] >= 30, 60, "commits before the move")
        offsets_tp = TopicPartition("__consumer_offsets", partition_for(group, OFFSETS_PARTITIONS))
        before = leaders(cluster, "__consumer_offsets")[offsets_tp.partition]
        replicas = [b for b in sorted(cluster.brokers) if b != before] + [before]
        admin = admin_client(cluster)
        try:
            admin.alter_partition_reassignments({offsets_tp: replicas})
            wait_for(
                lambda: not admin.list_partition_reassignments(), 60, "the reassignment to finish"
            )

            def moved() -> bool:
                # The preferred replica leads once it is in the ISR (a loaded machine may
                # have shrunk the ISR for a while): elect until it does.
                if leaders(cluster, "__consumer_offsets").get(offsets_tp.partition) == replicas[0]:
                    return True
                admin.elect_leaders(  # 0: the preferred replica
                    0, {offsets_tp.topic: [offsets_tp.partition]}, raise_errors=False
                )
                time.sleep(0.5)
                return False

            wait_for(moved, 90, "the new coordinator")
        finally:
            admin.close()
        count = acknowledged[0]
        wait_for(lambda: acknowledged[0] >= count + 30, 60, "commits after the move")
        during = list(events)  # before close, which revokes as it leaves
    finally:
        stop.set()
        worker.join(60)
    assert committed(cluster, group) == {tp: acknowledged[0]}
    assert during == ["assign"], (during, failures[:5])


def test_commits_survive_a_coordinator_crash(cluster: KafkaCluster) -> None:
    """kill -9 of the coordinator while committing: every acknowledged commit is kept."""
    topic, group = "crash-commits", "crash-group"
    create_topic(cluster, topic, partitions=1, rf=3)
    offsets_partition = partition_for(group, OFFSETS_PARTITIONS)
    coordinator_id = leaders(cluster, "__consumer_offsets")[offsets_partition]
    consumer = KafkaConsumer(
        bootstrap_servers=cluster.bootstrap_servers,
        group_id=group,
        enable_auto_commit=False,
        request_timeout_ms=10000,
        retry_backoff_ms=100,
    )
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    acknowledged = -1
    try:
        for offset in range(1, 200):
            if offset == 40:
                cluster.brokers[coordinator_id].kill()
            deadline = time.monotonic() + 60
            while True:
                try:
                    consumer.commit({tp: OffsetAndMetadata(offset, "", -1)})
                    acknowledged = offset
                    break
                except Exception:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
            if offset > 60 and acknowledged == offset and offset >= 80:
                break
        new_leaders = leaders(cluster, "__consumer_offsets")
        new_coordinator = new_leaders[offsets_partition]
        assert new_coordinator != coordinator_id
        assert committed(cluster, group) == {tp: acknowledged}
        fresh = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, group_id=group)
        try:
            assert fresh.committed(tp) == acknowledged
        finally:
            fresh.close()
    finally:
        consumer.close()
        broker = cluster.brokers[coordinator_id]
        if not broker.is_running():
            broker.start()
            wait_cluster_ready(cluster)
