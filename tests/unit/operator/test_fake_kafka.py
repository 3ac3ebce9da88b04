"""The in-memory FakeKafkaAdmin behaves as Kafka's Admin API does for the operator's calls."""

from __future__ import annotations

import pytest

from kpo_kafka.admin import KafkaAdmin
from kpo_kafka.admin_types import (
    ERROR_INVALID_REPLICA_ASSIGNMENT,
    ERROR_LOG_DIR_NOT_FOUND,
    ERROR_NO_REASSIGNMENT_IN_PROGRESS,
    ERROR_UNKNOWN_TOPIC_OR_PARTITION,
    ConfigResource,
    KafkaUnavailableError,
    PartitionInfo,
    Reassignment,
)
from tests.unit.operator.fake_kafka import FakeKafkaAdmin

TP = ("t", 0)


@pytest.fixture
def kafka() -> FakeKafkaAdmin:
    fake = FakeKafkaAdmin(brokers={0: "a", 1: "b", 2: "c", 3: None})
    fake.create_topic("t", {0: [0, 1], 1: [1, 2]})
    return fake


def test_implements_the_interface(kafka: FakeKafkaAdmin) -> None:
    assert isinstance(kafka, KafkaAdmin)
    assert kafka.describe_cluster().brokers == {0: "a", 1: "b", 2: "c", 3: None}
    assert kafka.describe_topics(["t", "missing"]) == {
        "t": {0: PartitionInfo((0, 1), (0, 1), 0), 1: PartitionInfo((1, 2), (1, 2), 1)}
    }


def test_reassignment_progresses_only_when_the_test_advances_it(kafka: FakeKafkaAdmin) -> None:
    assert kafka.alter_partition_reassignments({TP: [2, 1]}) == {TP: None}
    assert kafka.list_partition_reassignments() == {TP: Reassignment((2, 1, 0), (2,), (0,))}
    assert kafka.describe_topics(["t"])["t"][0] == PartitionInfo((2, 1, 0), (0, 1), 0)
    assert kafka.describe_log_dirs([2])[(2, "t", 0)].size_bytes == 0

    kafka.catch_up(TP, 2)
    assert kafka.list_partition_reassignments() == {}
    assert kafka.describe_topics(["t"])["t"][0] == PartitionInfo((2, 1), (1, 2), 2)
    assert (0, "t", 0) not in kafka.describe_log_dirs()


def test_new_target_keeps_the_original_replicas_and_cancel_reverts(kafka: FakeKafkaAdmin) -> None:
    kafka.alter_partition_reassignments({TP: [2, 1]})
    kafka.alter_partition_reassignments({TP: [3, 1]})
    assert kafka.list_partition_reassignments([TP]) == {TP: Reassignment((3, 1, 0), (3,), (0,))}
    assert (2, "t", 0) not in kafka.describe_log_dirs()

    assert kafka.alter_partition_reassignments({TP: None}) == {TP: None}
    assert kafka.describe_topics(["t"])["t"][0] == PartitionInfo((0, 1), (0, 1), 0)
    again = kafka.alter_partition_reassignments({TP: None})[TP]
    assert again is not None and again.code == ERROR_NO_REASSIGNMENT_IN_PROGRESS


def test_invalid_reassignments_change_nothing(kafka: FakeKafkaAdmin) -> None:
    answer = kafka.alter_partition_reassignments({TP: [0, 0], ("t", 1): [7], ("x", 0): [0]})
    codes = {tp: e.code if e else 0 for tp, e in answer.items()}
    assert codes == {
        TP: ERROR_INVALID_REPLICA_ASSIGNMENT,
        ("t", 1): ERROR_INVALID_REPLICA_ASSIGNMENT,
        ("x", 0): ERROR_UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert kafka.list_partition_reassignments() == {}
    with pytest.raises(ValueError):
        kafka.alter_partition_reassignments({TP: []})


def test_configs_are_stored_and_deleted(kafka: FakeKafkaAdmin) -> None:
    broker, topic = ConfigResource.broker(0), ConfigResource.topic("t")
    changes: dict[ConfigResource, dict[str, str | None]] = {
        broker: {"leader.replication.throttled.rate": "100"},
        topic: {"leader.replication.throttled.replicas": "0:0"},
    }
    assert kafka.incremental_alter_configs(changes) == {broker: None, topic: None}
    assert kafka.describe_configs([0, 1], ["t"], ["leader.replication.throttled.rate"]) == {
        broker: {"leader.replication.throttled.rate": "100"},
        ConfigResource.broker(1): {},
        topic: {},
    }
    kafka.incremental_alter_configs({broker: {"leader.replication.throttled.rate": None}})
    assert kafka.describe_configs([0]) == {broker: {}}
    missing = kafka.incremental_alter_configs({ConfigResource.topic("x"): {"a": "b"}})
    assert missing[ConfigResource.topic("x")] is not None


def test_log_dir_sizes_moves_and_election(kafka: FakeKafkaAdmin) -> None:
    kafka.set_size(0, "t", 0, 4096)
    key = (0, "t", 0)
    assert kafka.describe_log_dirs([0], ["t"])[key].size_bytes == 4096
    bad = kafka.alter_replica_log_dirs({key: "/elsewhere"})[key]
    assert bad is not None and bad.code == ERROR_LOG_DIR_NOT_FOUND
    target = kafka.log_dirs_of(0)[1]
    assert kafka.alter_replica_log_dirs({key: target}) == {key: None}
    future = kafka.describe_log_dirs([0])[key].future
    assert future is not None and future.log_dir == target and future.is_future
    kafka.finish_log_dir_moves()
    assert kafka.describe_log_dirs([0])[key].log_dir == target

    kafka.alter_partition_reassignments({TP: [1, 0]})
    assert kafka.describe_topics(["t"])["t"][0].leader == 0
    assert kafka.elect_preferred_leaders([TP]) == {TP: None}
    assert kafka.describe_topics(["t"])["t"][0].leader == 1


def test_injected_failure_and_call_log(kafka: FakeKafkaAdmin) -> None:
    kafka.fail_next.append(KafkaUnavailableError("down"))
    with pytest.raises(KafkaUnavailableError):
        kafka.list_partition_reassignments()
    assert kafka.list_partition_reassignments() == {}
    assert [c for c, _ in kafka.calls] == ["list_partition_reassignments"] * 2
    kafka.close()
    with pytest.raises(AssertionError):
        kafka.describe_cluster()
