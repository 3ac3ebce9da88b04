"""Topic creation, replica assignments and topic deletion znodes on real ZooKeeper."""

import pytest
from kazoo.client import KazooClient

from kpo_broker.zk.client import KafkaZkClient
from kpo_broker.zk.errors import TopicAlreadyExistsError
from kpo_broker.zk.model import LeaderAndIsr, LeaderIsrAndControllerEpoch, ReplicaAssignment
from kpo_devenv import ZooKeeperServer
from kpo_kafka.topic_partition import TopicPartition

pytestmark = pytest.mark.integration


def test_create_topic_writes_config_and_assignment_in_kafkas_format(
    zookeeper: ZooKeeperServer, zk_connect: str, zk_client: KafkaZkClient
) -> None:
    zk_client.create_topic("orders", {0: [1, 2], 1: [2, 3]}, {"cleanup.policy": "compact"})
    raw = KazooClient(hosts=zk_connect)
    raw.start(timeout=15)
    try:
        topic, topic_stat = raw.get("/brokers/topics/orders")
        config, config_stat = raw.get("/config/topics/orders")
    finally:
        raw.stop()
        raw.close()
    topic_id = zk_client.get_replica_assignments(["orders"])["orders"].topic_id
    assert topic_id is not None and len(topic_id) == 22  # KIP-516, Kafka's Uuid string
    assert topic == (
        b'{"version":3,"topic_id":"' + topic_id.encode() + b'","partitions":{"0":[1,2],"1":[2,3]},'
        b'"adding_replicas":{},"removing_replicas":{}}'
    )
    assert config == b'{"version":1,"config":{"cleanup.policy":"compact"}}'
    assert config_stat.czxid < topic_stat.czxid  # the config is written first
    assert zk_client.get_all_topics() == {"orders"}


def test_existing_topic_is_refused(zk_client: KafkaZkClient) -> None:
    zk_client.create_topic("t", {0: [1]}, {})
    with pytest.raises(TopicAlreadyExistsError):
        zk_client.create_topic("t", {0: [2]}, {"retention.ms": "1"})
    assert zk_client.get_replica_assignments(["t"])["t"].partitions == {0: ReplicaAssignment((1,))}
    assert zk_client.get_entity_config("topics", "t").config == {}


def test_replica_assignments_are_read_in_one_batch(zk_client: KafkaZkClient) -> None:
    for i in range(20):
        zk_client.create_topic(f"topic-{i}", {0: [i % 3], 1: [(i + 1) % 3]}, {})
    before = zk_client.stats
    assignments = zk_client.get_replica_assignments([f"topic-{i}" for i in range(20)] + ["nope"])
    assert zk_client.stats.round_trips - before.round_trips == 1
    assert sorted(assignments) == sorted(f"topic-{i}" for i in range(20))
    assert assignments["topic-4"].partitions == {
        0: ReplicaAssignment((1,)),
        1: ReplicaAssignment((2,)),
    }
    assert assignments["topic-4"].zk_version == 0


def test_set_replica_assignment_is_a_compare_and_set(zk_client: KafkaZkClient) -> None:
    zk_client.create_topic("moving", {0: [1, 2, 3]}, {})
    read = zk_client.get_replica_assignments(["moving"])["moving"]
    reassigning = {0: read.partitions[0].reassign_to([4, 5, 6])}
    tid = read.topic_id
    assert tid is not None and len(tid) == 22
    assert (
        zk_client.set_replica_assignment("moving", reassigning, read.zk_version, topic_id=tid) == 1
    )
    assert (
        zk_client.set_replica_assignment("moving", reassigning, read.zk_version, topic_id=tid)
        is None
    )
    epoch = zk_client.try_elect_controller(1)
    assert epoch is not None
    done = {0: ReplicaAssignment((4, 5, 6))}
    assert (
        zk_client.set_replica_assignment(
            "moving", done, 1, topic_id=tid, controller_epoch_zk_version=epoch.zk_version
        )
        == 2
    )
    assert (
        zk_client.set_replica_assignment(
            "moving", done, 1, topic_id=tid, controller_epoch_zk_version=epoch.zk_version
        )
        is None
    )
    current = zk_client.get_replica_assignments(["moving"])["moving"]
    assert current.partitions == done
    assert current.zk_version == 2
    assert current.topic_id == tid  # the topic id survives every rewrite (KIP-516)
    assert zk_client.set_replica_assignment("gone", done, 0, topic_id=None) is None


def test_topic_deletion_removes_all_topic_znodes(zk_client: KafkaZkClient) -> None:
    epoch = zk_client.try_elect_controller(1)
    assert epoch is not None
    zk_client.create_topic("doomed", {p: [1, 2] for p in range(5)}, {"retention.ms": "10"})
    zk_client.create_topic("kept", {0: [1]}, {})
    zk_client.create_partition_states(
        {
            TopicPartition("doomed", p): LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 0, (1, 2)), 1)
            for p in range(5)
        },
        controller_epoch_zk_version=epoch.zk_version,
    )
    zk_client.mark_topics_for_deletion(["doomed", "doomed"])
    zk_client.mark_topics_for_deletion(["doomed"])  # already queued: no error
    assert zk_client.get_topics_marked_for_deletion() == {"doomed"}
    zk_client.delete_topic_znodes(["doomed"], controller_epoch_zk_version=epoch.zk_version)
    with pytest.raises(TopicAlreadyExistsError, match="marked for deletion"):
        zk_client.create_topic("doomed", {0: [2]}, {})

    zk_client.remove_topic_deletion_markers(
        ["doomed"], controller_epoch_zk_version=epoch.zk_version
    )
    assert zk_client.get_all_topics() == {"kept"}
    assert zk_client.get_topics_marked_for_deletion() == set()
    assert zk_client.get_partition_states([TopicPartition("doomed", 0)]) == {}
    assert zk_client.get_entity_config("topics", "doomed").zk_version is None
    # Deleting again is harmless, and the topic can be created afresh.
    zk_client.delete_topic_znodes(["doomed"], controller_epoch_zk_version=epoch.zk_version)
    zk_client.create_topic("doomed", {0: [2]}, {})
    assert zk_client.get_replica_assignments(["doomed"])["doomed"].zk_version == 0
