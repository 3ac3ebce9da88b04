from pathlib import Path
from typing import Any

import pytest
import yaml

from kpo_kafka.specs import PartitionReassignmentSpec, SpecError, TopicReplicaQuotaSpec

EXAMPLES = Path(__file__).resolve().parents[3] / "crds" / "examples"


def _examples(prefix: str) -> list[dict[str, Any]]:
    return [yaml.safe_load(p.read_text()) for p in sorted(EXAMPLES.glob(f"{prefix}-*.yaml"))]


@pytest.mark.parametrize("obj", _examples("partitionreassignment"))
def test_reassignment_examples_parse(obj: dict[str, Any]) -> None:
    spec = PartitionReassignmentSpec.from_object(obj)
    assert [p.key for p in spec.partitions] == [
        (p["topic"], p["partition"]) for p in obj["spec"]["partitions"]
    ]
    assert spec.suspend == obj["spec"].get("suspend", False)


@pytest.mark.parametrize("obj", _examples("topicreplicaquota"))
def test_quota_examples_parse(obj: dict[str, Any]) -> None:
    spec = TopicReplicaQuotaSpec.from_object(obj)
    assert spec.leader_replication_throttled_rate == obj["spec"]["leaderReplicationThrottledRate"]


def test_reassignment_fields_and_defaults() -> None:
    spec = PartitionReassignmentSpec.from_object(
        {
            "partitions": [
                {"topic": "t", "partition": 1, "replicas": [2, 1], "logDirs": ["/d", "any"]}
            ],
            "throttle": {"replicationRate": 10},
        }
    )
    target = spec.partitions[0]
    assert (target.key, target.replicas, target.log_dirs) == (("t", 1), [2, 1], ["/d", "any"])
    assert spec.throttle is not None and spec.throttle.replication_rate == 10
    assert spec.throttle.log_dir_move_rate is None
    assert (spec.preferred_leader_election, spec.cancel, spec.suspend) == (False, False, False)


def test_logdirs_length_mismatch_is_left_to_validation() -> None:
    spec = PartitionReassignmentSpec.from_object(
        {"partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2], "logDirs": ["any"]}]}
    )
    assert spec.partitions[0].log_dirs == ["any"]


P = {"topic": "t", "partition": 0, "replicas": [1]}


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ({}, "spec.partitions"),
        ({"partitions": []}, "spec.partitions"),
        ({"partitions": [{**P, "partition": -1}]}, "spec.partitions[0].partition"),
        ({"partitions": [{**P, "replicas": []}]}, "spec.partitions[0].replicas"),
        ({"partitions": [{**P, "topic": "bad topic"}]}, "spec.partitions[0].topic"),
        ({"partitions": [{**P, "logDirs": ["rel/dir"]}]}, "spec.partitions[0].logDirs[0]"),
        ({"partitions": [P], "throttle": {}}, "replicationRate, logDirMoveRate or both"),
        ({"partitions": [P], "throttle": {"replicationRate": 0}}, "replicationRate"),
        ({"partitions": [P], "unknown": 1}, "spec.unknown"),
        ({"partitions": [{**P, "partition": "0"}]}, "spec.partitions[0].partition"),
    ],
)
def test_reassignment_errors_name_the_field(spec: dict[str, Any], needle: str) -> None:
    with pytest.raises(SpecError) as info:
        PartitionReassignmentSpec.from_object({"spec": spec})
    assert info.value.kind == "PartitionReassignment"
    assert any(needle in line for line in info.value.errors), info.value.errors


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ({"topics": {}, "leaderReplicationThrottledRate": 1}, "exactly one"),
        ({"topics": {"all": True, "names": ["a"]}, "leaderReplicationThrottledRate": 1}, "one"),
        ({"topics": {"all": False}, "leaderReplicationThrottledRate": 1}, "exactly one"),
        ({"topics": {"all": True}}, "at least one"),
        ({"topics": {"all": True}, "leaderReplicationThrottledReplicas": "0:1"}, '"*"'),
        ({"topics": {"names": ["a"]}, "followerReplicationThrottledReplicas": "0-1"}, "spec."),
        ({"topics": {"names": ["a"]}, "brokers": [], "leaderReplicationThrottledRate": 1}, "b"),
    ],
)
def test_quota_errors(spec: dict[str, Any], needle: str) -> None:
    with pytest.raises(SpecError) as info:
        TopicReplicaQuotaSpec.from_object({"spec": spec})
    assert info.value.kind == "TopicReplicaQuota"
    assert needle in str(info.value)


def test_spec_must_be_a_mapping() -> None:
    with pytest.raises(SpecError, match="must be an object"):
        TopicReplicaQuotaSpec.from_object({"spec": ["x"]})


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ("99999999999999999999:1", "String should match pattern"),
        ("2147483648:1", "partition 2147483648 is above 2147483647"),
        ("0:1,1:2147483648", "broker id 2147483648 is above 2147483647"),
    ],
)
def test_quota_replica_ids_are_java_ints(value: str, needle: str) -> None:
    """Kafka reads partition and broker ids of a throttled replica list as Java ints."""
    for field in ("leaderReplicationThrottledReplicas", "followerReplicationThrottledReplicas"):
        with pytest.raises(SpecError) as info:
            TopicReplicaQuotaSpec.from_object({"spec": {"topics": {"names": ["a"]}, field: value}})
        assert any(line.startswith(f"spec.{field}: ") for line in info.value.errors)
        assert needle in str(info.value), info.value.errors


def test_quota_replica_ids_up_to_the_largest_java_int_are_accepted() -> None:
    spec = TopicReplicaQuotaSpec.from_object(
        {"spec": {"topics": {"names": ["a"]}, "leaderReplicationThrottledReplicas": "2147483647:0"}}
    )
    assert spec.leader_replication_throttled_replicas == "2147483647:0"
