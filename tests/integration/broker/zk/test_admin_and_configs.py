"""ISR change notifications, reassignment and election znodes, dynamic configs."""

from collections.abc import Callable

import pytest
from kazoo.client import KazooClient
from kazoo.security import make_digest_acl

from kpo_broker.zk.client import KafkaZkClient
from kpo_broker.zk.data import ConfigChange
from kpo_broker.zk.errors import (
    ControllerMovedError,
    PreferredReplicaElectionInProgressError,
    ReassignmentInProgressError,
    ZkOperationError,
)
from kpo_kafka.topic_partition import TopicPartition

pytestmark = pytest.mark.integration


def test_isr_change_notifications_round_trip(new_client: Callable[..., KafkaZkClient]) -> None:
    broker, controller = new_client(), new_client()
    epoch = controller.try_elect_controller(0)
    assert epoch is not None
    first = broker.propagate_isr_change([TopicPartition("a", 0), TopicPartition("a", 1)])
    second = broker.propagate_isr_change([TopicPartition("b", 3)])
    assert first.startswith("isr_change_")
    names = controller.get_isr_change_notifications()
    assert names == [first, second]
    assert controller.get_isr_change_notification_partitions([*names, "isr_change_9999999999"]) == {
        TopicPartition("a", 0),
        TopicPartition("a", 1),
        TopicPartition("b", 3),
    }
    with pytest.raises(ControllerMovedError):
        controller.delete_isr_change_notifications(names, controller_epoch_zk_version=0)
    controller.delete_isr_change_notifications(names, controller_epoch_zk_version=epoch.zk_version)
    assert controller.get_isr_change_notifications() == []


def test_partition_reassignment_znode(zk_client: KafkaZkClient) -> None:
    epoch = zk_client.try_elect_controller(0)
    assert epoch is not None
    assert zk_client.get_partition_reassignment() == {}
    target = {TopicPartition("t", 0): [4, 5], TopicPartition("t", 1): [5, 6]}
    zk_client.create_partition_reassignment(target)
    with pytest.raises(ReassignmentInProgressError):
        zk_client.create_partition_reassignment({TopicPartition("u", 0): [1]})
    assert zk_client.get_partition_reassignment() == {
        TopicPartition("t", 0): (4, 5),
        TopicPartition("t", 1): (5, 6),
    }
    # Partition 0 completed: the controller rewrites the rest, then deletes the znode.
    zk_client.set_partition_reassignment(
        {TopicPartition("t", 1): [5, 6]}, controller_epoch_zk_version=epoch.zk_version
    )
    assert zk_client.get_partition_reassignment() == {TopicPartition("t", 1): (5, 6)}
    zk_client.delete_partition_reassignment(controller_epoch_zk_version=epoch.zk_version)
    assert zk_client.get_partition_reassignment() == {}
    zk_client.set_partition_reassignment(
        {TopicPartition("t", 2): [1]}, controller_epoch_zk_version=epoch.zk_version
    )
    assert zk_client.get_partition_reassignment() == {TopicPartition("t", 2): (1,)}


def test_preferred_replica_election_znode(zk_client: KafkaZkClient) -> None:
    epoch = zk_client.try_elect_controller(0)
    assert epoch is not None
    zk_client.create_preferred_replica_election([TopicPartition("t", 0)])
    with pytest.raises(PreferredReplicaElectionInProgressError):
        zk_client.create_preferred_replica_election([TopicPartition("t", 1)])
    assert zk_client.get_preferred_replica_election() == {TopicPartition("t", 0)}
    zk_client.delete_preferred_replica_election(controller_epoch_zk_version=epoch.zk_version)
    assert zk_client.get_preferred_replica_election() == set()


def test_config_writes_come_with_change_notifications(zk_client: KafkaZkClient) -> None:
    assert zk_client.get_entity_config("topics", "t").config == {}
    version = zk_client.set_entity_config("topics", "t", {"retention.ms": "1000"})
    assert version == 0
    assert zk_client.set_entity_config("brokers", "<default>", {"log.retention.ms": "5"}) == 0
    assert zk_client.set_entity_config("topics", "t", {"retention.ms": "2000"}) == 1

    changes = zk_client.get_config_changes()
    assert [change for _, change in changes] == [
        ConfigChange("topics", "t"),
        ConfigChange("brokers", "<default>"),
        ConfigChange("topics", "t"),
    ]
    seqs = [seq for seq, _ in changes]
    assert seqs == sorted(seqs)
    assert zk_client.get_config_changes(since_seq=seqs[1]) == [changes[2]]

    configs = zk_client.get_entity_configs("topics", ["t", "u"])
    assert configs["t"].config == {"retention.ms": "2000"}
    assert configs["t"].zk_version == 1
    assert configs["u"].zk_version is None
    assert zk_client.get_entity_config("brokers", "<default>").config == {"log.retention.ms": "5"}

    zk_client.delete_config_changes(up_to_seq=seqs[1])
    assert zk_client.get_config_changes() == [changes[2]]


def test_config_compare_and_set_leaves_no_notification_on_conflict(
    zk_client: KafkaZkClient,
) -> None:
    zk_client.set_entity_config("topics", "t", {"a": "1"})
    read = zk_client.get_entity_config("topics", "t")
    assert read.zk_version == 0
    assert zk_client.set_entity_config("topics", "t", {"a": "2"}, read.zk_version) == 1
    notifications = len(zk_client.get_config_changes())
    assert zk_client.set_entity_config("topics", "t", {"a": "3"}, read.zk_version) is None
    assert zk_client.set_entity_config("topics", "new", {"a": "3"}, expected_version=0) is None
    assert len(zk_client.get_config_changes()) == notifications
    assert zk_client.get_entity_config("topics", "t").config == {"a": "2"}


def test_a_refused_read_raises_zk_operation_error_naming_the_znode_and_reason(
    zk_connect: str, zk_client: KafkaZkClient
) -> None:
    """NoAuth on a config znode: ZkOperationError (not a crash), as for any refused request."""
    other = KazooClient(hosts=zk_connect, auth_data=[("digest", "someone:pw")], timeout=10)
    other.start(timeout=15)
    try:
        other.create(
            "/config/users/carol",
            b'{"version":1,"config":{}}',
            acl=[make_digest_acl("someone", "pw", all=True)],
            makepath=True,
        )
    finally:
        other.stop()
        other.close()
    with pytest.raises(ZkOperationError) as refused:
        zk_client.get_entity_config("users", "carol")
    assert (refused.value.path, refused.value.reason) == ("/config/users/carol", "NoAuthError")
    assert zk_client.get_entity_names("users") == {"carol"}  # the listing is not protected


def test_a_malformed_config_change_notification_is_skipped_not_blocking(
    zk_connect: str, zk_client: KafkaZkClient
) -> None:
    zk_client.set_entity_config("topics", "before", {"retention.ms": "1"})
    raw = KazooClient(hosts=zk_connect, timeout=10)
    raw.start(timeout=15)
    try:
        raw.create("/config/changes/config_change_", b"not json", sequence=True)
        raw.create("/config/changes/config_change_", b'{"version":2}', sequence=True)
    finally:
        raw.stop()
        raw.close()
    zk_client.set_entity_config("topics", "after", {"retention.ms": "2"})
    changes = [change for _, change in zk_client.get_config_changes()]
    assert changes == [ConfigChange("topics", "before"), ConfigChange("topics", "after")]
