"""The znode JSON codecs against the documents Kafka 2.x writes."""

import base64
import json

import pytest

from kpo_broker.zk import data
from kpo_broker.zk.data import ConfigChange
from kpo_broker.zk.errors import MalformedZNodeDataError
from kpo_broker.zk.model import (
    BrokerRegistration,
    EndPoint,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
)
from kpo_kafka.topic_partition import TopicPartition

# --- broker registration ---------------------------------------------------------------


def test_broker_registration_is_kafkas_version_5_document() -> None:
    registration = BrokerRegistration(
        id=1,
        endpoints=(
            EndPoint("INTERNAL", "10.0.0.1", 9093, "SSL"),
            EndPoint("PLAINTEXT", "broker1", 9092, "PLAINTEXT"),
        ),
        rack="rack-a",
        jmx_port=9999,
    )
    encoded = data.encode_broker_registration(registration, timestamp_ms=1_600_000_000_123)
    assert json.loads(encoded) == {
        "listener_security_protocol_map": {"INTERNAL": "SSL", "PLAINTEXT": "PLAINTEXT"},
        "endpoints": ["INTERNAL://10.0.0.1:9093", "PLAINTEXT://broker1:9092"],
        "rack": "rack-a",
        "jmx_port": 9999,
        "host": "broker1",
        "port": 9092,
        "timestamp": "1600000000123",
        "features": {},
        "version": 5,
    }
    assert b" " not in encoded  # compact, as Jackson writes it


def test_broker_registration_without_plaintext_or_rack() -> None:
    registration = BrokerRegistration(2, (EndPoint("SSL", "h", 9094, "SSL"),))
    document = json.loads(data.encode_broker_registration(registration, 5))
    assert document["host"] is None
    assert document["port"] == -1
    assert "rack" not in document


def test_broker_registration_round_trip_keeps_epoch_from_czxid() -> None:
    registration = BrokerRegistration(
        3, (EndPoint("PLAINTEXT", "::1", 9092), EndPoint("SASL", "h", 1, "SASL_SSL")), "r"
    )
    encoded = data.encode_broker_registration(registration, 7)
    assert b"PLAINTEXT://[::1]:9092" in encoded
    decoded = data.decode_broker_registration(3, encoded, epoch=4294967301)
    assert decoded == BrokerRegistration(
        3,
        (EndPoint("PLAINTEXT", "::1", 9092), EndPoint("SASL", "h", 1, "SASL_SSL")),
        "r",
        epoch=4294967301,
    )


def test_decode_broker_registration_written_by_kafka() -> None:
    kafka_v4 = (
        b'{"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT","REPLICATION":"SSL"},'
        b'"endpoints":["PLAINTEXT://kafka-0.kafka:9092","REPLICATION://kafka-0.kafka:9093"],'
        b'"rack":"eu-west-1a","jmx_port":-1,"host":"kafka-0.kafka","timestamp":"1557916113345",'
        b'"port":9092,"version":4}'
    )
    decoded = data.decode_broker_registration(0, kafka_v4, epoch=21)
    assert decoded.rack == "eu-west-1a"
    assert decoded.endpoints == (
        EndPoint("PLAINTEXT", "kafka-0.kafka", 9092, "PLAINTEXT"),
        EndPoint("REPLICATION", "kafka-0.kafka", 9093, "SSL"),
    )
    assert decoded.endpoint("REPLICATION") == EndPoint("REPLICATION", "kafka-0.kafka", 9093, "SSL")
    assert decoded.endpoint("EXTERNAL") is None


def test_decode_broker_registration_versions_1_and_2() -> None:
    v1 = b'{"jmx_port":-1,"timestamp":"1","host":"old","version":1,"port":9092}'
    assert data.decode_broker_registration(5, v1, 1).endpoints == (
        EndPoint("PLAINTEXT", "old", 9092, "PLAINTEXT"),
    )
    v2 = b'{"jmx_port":-1,"timestamp":"1","endpoints":["SSL://h:9093"],"host":null,"version":2,"port":-1}'
    assert data.decode_broker_registration(5, v2, 1).endpoints == (
        EndPoint("SSL", "h", 9093, "SSL"),
    )


@pytest.mark.parametrize(
    "raw",
    [
        b"not json",
        b"[1, 2]",
        b'{"endpoints":["PLAINTEXT://h:1"]}',
        b'{"version":"5","endpoints":[]}',
        b'{"version":5,"endpoints":["h:9092"]}',
        b'{"version":5,"endpoints":["CUSTOM://h:9092"]}',
        b'{"version":5,"endpoints":"PLAINTEXT://h:1"}',
        b'{"version":5,"endpoints":[],"rack":7}',
        b"\xff\xfe",
    ],
)
def test_malformed_broker_registration(raw: bytes) -> None:
    with pytest.raises(MalformedZNodeDataError, match="broker registration"):
        data.decode_broker_registration(1, raw, 1)


# --- topic assignment ------------------------------------------------------------------


def test_topic_assignment_is_kafkas_version_3_document() -> None:
    encoded = data.encode_topic_assignment(
        {1: ReplicaAssignment((2, 3)), 0: ReplicaAssignment((1, 2))}, "AAAAAAAAAAAAAAAAAAAAAQ"
    )
    assert encoded == (
        b'{"version":3,"topic_id":"AAAAAAAAAAAAAAAAAAAAAQ","partitions":{"0":[1,2],"1":[2,3]},'
        b'"adding_replicas":{},"removing_replicas":{}}'
    )
    assert data.decode_topic_id(encoded) == "AAAAAAAAAAAAAAAAAAAAAQ"
    assert data.decode_topic_id(b'{"version":2,"partitions":{}}') is None


def test_new_topic_ids_are_kafka_uuid_strings() -> None:
    ids = {data.new_topic_id() for _ in range(200)}
    assert len(ids) == 200
    for topic_id in ids:
        assert len(topic_id) == 22 and not topic_id.startswith("-")
        assert len(base64.urlsafe_b64decode(topic_id + "==")) == 16


def test_topic_assignment_during_reassignment_round_trips() -> None:
    moving = ReplicaAssignment.from_original_and_target(original=(1, 2, 3), target=(4, 2, 5))
    assignment = {0: moving, 1: ReplicaAssignment((3, 1, 2))}
    encoded = data.encode_topic_assignment(assignment)
    assert json.loads(encoded) == {
        "version": 3,
        "partitions": {"0": [4, 2, 5, 1, 3], "1": [3, 1, 2]},
        "adding_replicas": {"0": [4, 5]},
        "removing_replicas": {"0": [1, 3]},
    }
    assert data.decode_topic_assignment(encoded) == assignment


def test_decode_topic_assignment_version_1() -> None:
    assert data.decode_topic_assignment(b'{"version":1,"partitions":{"1":[0],"0":[2,0]}}') == {
        0: ReplicaAssignment((2, 0)),
        1: ReplicaAssignment((0,)),
    }


def test_decode_topic_assignment_with_topic_id() -> None:
    raw = (
        b'{"version":3,"topic_id":"q8tQZ5v2Sn2n7uMb1qzw9A","partitions":{"0":[1]},'
        b'"adding_replicas":{},"removing_replicas":{}}'
    )
    assert data.decode_topic_assignment(raw) == {0: ReplicaAssignment((1,))}


@pytest.mark.parametrize(
    "raw",
    [
        b'{"version":2}',
        b'{"version":2,"partitions":{"x":[1]}}',
        b'{"version":2,"partitions":{"0":[1,"2"]}}',
        b'{"version":2,"partitions":{"0":[true]}}',
        b'{"version":2,"partitions":[]}',
        b'{"version":2,"partitions":{"0":[1]},"adding_replicas":[]}',
    ],
)
def test_malformed_topic_assignment(raw: bytes) -> None:
    with pytest.raises(MalformedZNodeDataError, match="topic assignment"):
        data.decode_topic_assignment(raw)


# --- partition state, controller ---------------------------------------------------------


def test_partition_state_is_kafkas_document() -> None:
    state = LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 0, (1, 2), partition_epoch=9), 3)
    encoded = data.encode_partition_state(state)
    assert encoded == b'{"controller_epoch":3,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2]}'
    assert data.decode_partition_state(encoded, partition_epoch=9) == state


def test_decode_partition_state_takes_partition_epoch_from_the_znode_version() -> None:
    raw = b'{"controller_epoch":12,"leader":-1,"version":1,"leader_epoch":7,"isr":[2]}'
    decoded = data.decode_partition_state(raw, partition_epoch=41)
    assert decoded.leader_and_isr == LeaderAndIsr(-1, 7, (2,), 41)
    assert decoded.controller_epoch == 12


@pytest.mark.parametrize(
    "raw",
    [
        b'{"controller_epoch":1,"version":1,"leader_epoch":0,"isr":[1]}',
        b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":1}',
        b'{"leader":1,"version":1,"leader_epoch":0,"isr":[1]}',
        b'{"controller_epoch":1,"leader":1.5,"version":1,"leader_epoch":0,"isr":[1]}',
    ],
)
def test_malformed_partition_state(raw: bytes) -> None:
    with pytest.raises(MalformedZNodeDataError, match="partition state"):
        data.decode_partition_state(raw, 0)


def test_controller_znode() -> None:
    encoded = data.encode_controller(2, 1_700_000_000_000)
    assert json.loads(encoded) == {"version": 1, "brokerid": 2, "timestamp": "1700000000000"}
    assert data.decode_controller(encoded) == 2
    with pytest.raises(MalformedZNodeDataError):
        data.decode_controller(b'{"version":1}')


def test_controller_epoch_znode_is_a_decimal_string() -> None:
    assert data.encode_controller_epoch(17) == b"17"
    assert data.decode_controller_epoch(b"17") == 17
    with pytest.raises(MalformedZNodeDataError):
        data.decode_controller_epoch(b"{}")


def test_cluster_id_znode_has_a_string_version() -> None:
    encoded = data.encode_cluster_id("Xd7ZqVBhSJ-7-tXwGkC7bA")
    assert json.loads(encoded) == {"version": "1", "id": "Xd7ZqVBhSJ-7-tXwGkC7bA"}
    assert data.decode_cluster_id(encoded) == "Xd7ZqVBhSJ-7-tXwGkC7bA"
    with pytest.raises(MalformedZNodeDataError):
        data.decode_cluster_id(b'{"version":"1","id":5}')


# --- admin and notification znodes --------------------------------------------------------


def test_partition_reassignment_document() -> None:
    reassignment = {TopicPartition("b", 0): (3, 1), TopicPartition("a", 2): (1, 2)}
    encoded = data.encode_partition_reassignment(reassignment)
    assert json.loads(encoded) == {
        "version": 1,
        "partitions": [
            {"topic": "a", "partition": 2, "replicas": [1, 2]},
            {"topic": "b", "partition": 0, "replicas": [3, 1]},
        ],
    }
    assert data.decode_partition_reassignment(encoded) == reassignment


def test_reassignment_tool_file_with_log_dirs_is_read() -> None:
    raw = (
        b'{"version":1,"partitions":[{"topic":"test","partition":2,"replicas":[2,1],'
        b'"log_dirs":["any","any"]}]}'
    )
    assert data.decode_partition_reassignment(raw) == {TopicPartition("test", 2): (2, 1)}


def test_isr_change_notification_document() -> None:
    partitions = {TopicPartition("t", 1), TopicPartition("t", 0)}
    encoded = data.encode_isr_change_notification(partitions)
    assert encoded == (
        b'{"version":1,"partitions":[{"topic":"t","partition":0},{"topic":"t","partition":1}]}'
    )
    assert data.decode_isr_change_notification(encoded) == partitions


def test_preferred_replica_election_document() -> None:
    partitions = {TopicPartition("x", 3)}
    encoded = data.encode_preferred_replica_election(partitions)
    assert json.loads(encoded) == {"version": 1, "partitions": [{"topic": "x", "partition": 3}]}
    assert data.decode_preferred_replica_election(encoded) == partitions


@pytest.mark.parametrize(
    "raw",
    [
        b'{"version":1}',
        b'{"version":1,"partitions":{}}',
        b'{"version":1,"partitions":[{"topic":"t"}]}',
        b'{"version":1,"partitions":[{"topic":1,"partition":0}]}',
        b'{"version":1,"partitions":[3]}',
    ],
)
def test_malformed_partition_lists(raw: bytes) -> None:
    with pytest.raises(MalformedZNodeDataError):
        data.decode_isr_change_notification(raw)
    with pytest.raises(MalformedZNodeDataError):
        data.decode_preferred_replica_election(raw)


# --- configs -------------------------------------------------------------------------


def test_entity_config_document() -> None:
    encoded = data.encode_entity_config({"retention.ms": "1000", "cleanup.policy": "compact"})
    assert encoded == b'{"version":1,"config":{"cleanup.policy":"compact","retention.ms":"1000"}}'
    assert data.decode_entity_config(encoded) == {
        "retention.ms": "1000",
        "cleanup.policy": "compact",
    }
    assert data.decode_entity_config(b'{"version":1,"config":{}}') == {}


def test_entity_config_without_overrides_is_kafkas_empty_document() -> None:
    """Deleting every override rewrites the znode as Kafka's AdminZkClient does (kept)."""
    assert data.encode_entity_config({}) == b'{"version":1,"config":{}}'


def test_entity_config_values_must_be_strings() -> None:
    with pytest.raises(MalformedZNodeDataError, match="entity config"):
        data.decode_entity_config(b'{"version":1,"config":{"retention.ms":1000}}')


def test_config_change_notification_versions() -> None:
    encoded = data.encode_config_change_notification(ConfigChange("topics", "orders"))
    assert encoded == b'{"version":2,"entity_path":"topics/orders"}'
    assert data.decode_config_change_notification(encoded) == ConfigChange("topics", "orders")
    assert data.decode_config_change_notification(
        b'{"version":2,"entity_path":"brokers/<default>"}'
    ) == ConfigChange("brokers", "<default>")
    assert data.decode_config_change_notification(
        b'{"version":1,"entity_type":"topics","entity_name":"t"}'
    ) == ConfigChange("topics", "t")
    with pytest.raises(MalformedZNodeDataError):
        data.decode_config_change_notification(b'{"version":2,"entity_path":"topics"}')


def test_log_dir_event_notification_document() -> None:
    """Kafka's ``LogDirEventNotificationSequenceZNode``: version 1, broker, event 1."""
    encoded = data.encode_log_dir_event_notification(3)
    assert encoded == b'{"version":1,"broker":3,"event":1}'
    assert data.decode_log_dir_event_notification(encoded) == 3
    with pytest.raises(MalformedZNodeDataError):
        data.decode_log_dir_event_notification(b'{"version":1,"event":1}')
