"""KafkaPythonAdmin against real brokers: topic creation, metadata, a throttled reassignment,
configs, log dir sizes, preferred leader election and intra-broker log dir moves."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaProducer

from kpo_devenv import ZooKeeperServer
from kpo_devenv.apache_kraft import KraftKafkaCluster
from kpo_devenv.kafka_cluster import KafkaCluster
from kpo_kafka.admin import KafkaPythonAdmin
from kpo_kafka.admin_types import (
    ERROR_LOG_DIR_NOT_FOUND,
    ERROR_NO_REASSIGNMENT_IN_PROGRESS,
    ERROR_UNKNOWN_TOPIC_OR_PARTITION,
    ConfigResource,
    KafkaRequestError,
    KafkaUnavailableError,
)
from tests.integration.broker.conftest import ClusterFactory, wait_cluster_ready, wait_for
from tests.integration.broker.server.helpers import create_topic

pytestmark = pytest.mark.integration

RATE = "65536"  # bytes/s
BACKLOG = 512 * 1024  # bytes: about 8 s at RATE
THROTTLE_RATES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
LEADER_LIST = "leader.replication.throttled.replicas"
FOLLOWER_LIST = "follower.replication.throttled.replicas"


def produce(cluster: KafkaCluster, topic: str, total_bytes: int) -> None:
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all", linger_ms=5)
    try:
        value = b"v" * 8192
        for _ in range(total_bytes // len(value)):
            producer.send(topic, value, partition=0)
        producer.flush(60)
    finally:
        producer.close()


@pytest.fixture
def admin_factory() -> Iterator[list[KafkaPythonAdmin]]:
    made: list[KafkaPythonAdmin] = []
    yield made
    for admin in made:
        admin.close()


def connect(cluster: KafkaCluster, made: list[KafkaPythonAdmin]) -> KafkaPythonAdmin:
    admin = KafkaPythonAdmin(cluster.bootstrap_servers, "kpo-test", request_timeout_ms=10000)
    made.append(admin)
    return admin


def test_throttled_reassignment_is_listed_tracked_and_completes(
    kafka_cluster_factory: ClusterFactory, admin_factory: list[KafkaPythonAdmin]
) -> None:
    cluster = kafka_cluster_factory(
        3,
        {"replica.fetch.max.bytes": "65536", "replication.quota.window.num": "2"},
        racks=["r0", "r1", "r2"],
    )
    admin = connect(cluster, admin_factory)
    info = admin.describe_cluster()
    assert info.brokers == {0: "r0", 1: "r1", 2: "r2"}
    assert info.controller_id in (0, 1, 2)

    create_topic(cluster, "moving", assignment={0: [0, 1]})
    described = admin.describe_topics(["moving", "absent"])
    assert set(described) == {"moving"}
    part = described["moving"][0]
    assert part.replicas == (0, 1) and part.leader == 0
    wait_for(lambda: set(admin.describe_topics(["moving"])["moving"][0].isr) == {0, 1}, 30, "ISR")
    assert "moving" in admin.describe_topics()
    produce(cluster, "moving", BACKLOG)

    throttles: dict[ConfigResource, dict[str, str | None]] = {
        ConfigResource.broker(b): dict.fromkeys(THROTTLE_RATES, RATE) for b in (0, 1, 2)
    }
    throttles[ConfigResource.topic("moving")] = {LEADER_LIST: "0:0,0:1", FOLLOWER_LIST: "0:2"}
    assert admin.incremental_alter_configs(throttles) == dict.fromkeys(throttles)
    keys = [*THROTTLE_RATES, LEADER_LIST, FOLLOWER_LIST]
    assert admin.describe_configs([0, 1, 2], ["moving"], keys) == throttles

    tp = ("moving", 0)
    assert admin.alter_partition_reassignments({tp: [2, 1]}) == {tp: None}
    listed = admin.list_partition_reassignments()
    assert set(listed) == {tp}
    assert listed[tp].adding == (2,) and listed[tp].removing == (0,)
    assert set(listed[tp].replicas) == {0, 1, 2} and listed[tp].target == (2, 1)
    assert admin.list_partition_reassignments([tp]) == listed
    assert admin.list_partition_reassignments([("moving", 5)]) == {}

    sizes = admin.describe_log_dirs(topics=["moving"])
    leader_size = sizes[(0, "moving", 0)].size_bytes
    assert leader_size >= BACKLOG
    assert sizes[(2, "moving", 0)].size_bytes < leader_size
    assert sizes[(2, "moving", 0)].future is None
    assert str(cluster.brokers[2].log_dir) == sizes[(2, "moving", 0)].log_dir

    removal = {r: dict.fromkeys(entries) for r, entries in throttles.items()}
    assert admin.incremental_alter_configs(removal) == dict.fromkeys(throttles)
    assert admin.describe_configs([0, 1, 2], ["moving"], keys) == {r: {} for r in throttles}
    wait_for(lambda: admin.list_partition_reassignments() == {}, 30, "reassignment done")

    def moved() -> bool:
        now = admin.describe_topics(["moving"])["moving"][0]
        return now.replicas == (2, 1) and set(now.isr) == {1, 2} and now.leader in (1, 2)

    wait_for(moved, 30, "replicas [2, 1] in sync")
    wait_for(
        lambda: (
            admin.describe_log_dirs([2], ["moving"])[(2, "moving", 0)].size_bytes == leader_size
        ),
        30,
        "new replica complete",
    )

    cancel = admin.alter_partition_reassignments({tp: None})
    assert cancel[tp] is not None and cancel[tp].code == ERROR_NO_REASSIGNMENT_IN_PROGRESS
    unknown = admin.alter_partition_reassignments({("absent", 0): [0]})
    assert unknown[("absent", 0)] is not None
    assert unknown[("absent", 0)].code == ERROR_UNKNOWN_TOPIC_OR_PARTITION
    with pytest.raises(ValueError):
        admin.alter_partition_reassignments({tp: []})


def test_preferred_leader_election_after_reordering_replicas(
    kafka_cluster_factory: ClusterFactory, admin_factory: list[KafkaPythonAdmin]
) -> None:
    cluster = kafka_cluster_factory(3, {"auto.leader.rebalance.enable": "false"})
    admin = connect(cluster, admin_factory)
    create_topic(cluster, "prefs", assignment={0: [0, 1, 2]})
    wait_for(lambda: len(admin.describe_topics(["prefs"])["prefs"][0].isr) == 3, 30, "full ISR")
    tp = ("prefs", 0)
    assert admin.alter_partition_reassignments({tp: [1, 0, 2]}) == {tp: None}
    wait_for(
        lambda: admin.describe_topics(["prefs"])["prefs"][0].replicas == (1, 0, 2), 30, "reorder"
    )
    assert admin.describe_topics(["prefs"])["prefs"][0].leader == 0

    assert admin.elect_preferred_leaders([tp]) == {tp: None}
    wait_for(lambda: admin.describe_topics(["prefs"])["prefs"][0].leader == 1, 30, "leader 1")
    assert admin.elect_preferred_leaders([tp]) == {tp: None}  # ELECTION_NOT_NEEDED
    missing = admin.elect_preferred_leaders([("prefs", 9)])[("prefs", 9)]
    assert missing is not None and missing.code == ERROR_UNKNOWN_TOPIC_OR_PARTITION


def test_replica_moves_to_another_log_dir(
    zookeeper: ZooKeeperServer, tmp_path: Path, admin_factory: list[KafkaPythonAdmin]
) -> None:
    chroot = f"kafka-{uuid.uuid4().hex[:8]}"
    cluster = KafkaCluster(
        tmp_path / chroot, f"{zookeeper.connect_string}/{chroot}", 1, log_dir_count=2
    )
    try:
        cluster.start()
        wait_cluster_ready(cluster)
        admin = connect(cluster, admin_factory)
        create_topic(cluster, "dirs", partitions=1, rf=1)
        produce(cluster, "dirs", 64 * 1024)
        before = admin.describe_log_dirs([0], ["dirs"])[(0, "dirs", 0)]
        [target] = [str(d) for d in cluster.brokers[0].log_dirs if str(d) != before.log_dir]

        key = (0, "dirs", 0)
        bad = admin.alter_replica_log_dirs({key: "/no/such/dir"})[key]
        assert bad is not None and bad.code == ERROR_LOG_DIR_NOT_FOUND
        assert admin.alter_replica_log_dirs({key: target}) == {key: None}
        wait_for(lambda: admin.describe_log_dirs([0], ["dirs"])[key].log_dir == target, 30, "moved")
        after = admin.describe_log_dirs([0], ["dirs"])[key]
        assert after.future is None and after.size_bytes == before.size_bytes
    finally:
        cluster.stop()


def test_unreachable_cluster_is_unavailable(admin_factory: list[KafkaPythonAdmin]) -> None:
    admin = KafkaPythonAdmin("127.0.0.1:1", request_timeout_ms=1000)
    admin_factory.append(admin)
    with pytest.raises(KafkaUnavailableError):
        admin.describe_cluster()


def test_create_topic_with_an_assignment_or_counts_and_configs(
    kafka_cluster_factory: ClusterFactory, admin_factory: list[KafkaPythonAdmin]
) -> None:
    cluster = kafka_cluster_factory(2)
    admin = connect(cluster, admin_factory)
    admin.create_topic(
        "placed",
        assignment={0: [1, 0], 1: [0, 1]},
        configs={"min.insync.replicas": "2"},
        wait_for_metadata=True,
    )
    described = admin.describe_topics(["placed"])["placed"]
    assert {p: info.replicas for p, info in described.items()} == {0: (1, 0), 1: (0, 1)}
    configs = admin.describe_configs(topics=["placed"])[ConfigResource.topic("placed")]
    assert configs == {"min.insync.replicas": "2"}
    admin.create_topic("counted", partitions=3, replication_factor=2, wait_for_metadata=True)
    counted = admin.describe_topics(["counted"])["counted"]
    assert sorted(counted) == [0, 1, 2]
    assert {len(info.replicas) for info in counted.values()} == {2}
    with pytest.raises(KafkaRequestError, match="CreateTopics"):
        admin.create_topic("placed", partitions=1, replication_factor=1)


def test_the_controller_on_kraft_is_the_metadata_quorum_leader(
    shared_kraft: KraftKafkaCluster, admin_factory: list[KafkaPythonAdmin]
) -> None:
    """KRaft brokers answer DescribeCluster with a random live broker as the controller; the
    active controller is the metadata quorum's leader (DescribeQuorum)."""
    admin = connect(shared_kraft, admin_factory)
    raw = KafkaAdminClient(bootstrap_servers=shared_kraft.bootstrap_servers, client_id="kpo-test")
    try:
        leader = raw.describe_metadata_quorum()["topics"][0]["partitions"][0]["leader_id"]
    finally:
        raw.close()
    assert {admin.describe_cluster().controller_id for _ in range(8)} == {leader}
    name = f"kraft-{uuid.uuid4().hex[:8]}"
    admin.create_topic(name, assignment={0: [0, 1], 1: [1, 2], 2: [2, 0]}, wait_for_metadata=True)
    # Once created, every live broker's Metadata lists it with leaders: one round, no wait.
    admin.wait_for_topics({name: 3}, timeout_ms=1)
