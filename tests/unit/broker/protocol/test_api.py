"""The api table: every served api, codec version ranges, supported-range checks."""

from __future__ import annotations

import pytest
from kafka.protocol.api_key import ApiKey

from kpo_broker.protocol.api import (
    APIS,
    UnknownApiError,
    UnsupportedRangeError,
    api_spec,
    api_versions_response,
    validate_supported,
)

EXPECTED = {
    "ApiVersions", "Metadata", "Produce", "Fetch", "ListOffsets", "OffsetForLeaderEpoch",
    "CreateTopics", "DeleteTopics", "CreatePartitions", "DescribeConfigs",
    "IncrementalAlterConfigs", "AlterConfigs", "DescribeCluster", "ElectLeaders",
    "AlterPartitionReassignments", "ListPartitionReassignments", "DescribeLogDirs",
    "AlterReplicaLogDirs", "FindCoordinator", "LeaderAndIsr", "StopReplica",
    "UpdateMetadata", "ControlledShutdown", "AlterPartition", "InitProducerId",
    "SaslHandshake", "SaslAuthenticate", "DescribeUserScramCredentials",
    "AlterUserScramCredentials",
    "JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup", "OffsetCommit", "OffsetFetch",
    "ListGroups", "DescribeGroups", "DeleteGroups", "OffsetDelete",
    "DeleteRecords",
    "DescribeAcls", "CreateAcls", "DeleteAcls",
}  # fmt: skip


def test_table_covers_the_broker_apis_with_kafka_keys() -> None:
    assert {spec.name for spec in APIS.values()} == EXPECTED
    for api_key, spec in APIS.items():
        assert ApiKey(api_key).name == spec.name
        assert spec.request.API_KEY == spec.response.API_KEY == api_key
        assert spec.request.is_request() and not spec.response.is_request()


def test_codec_versions_and_flexibility() -> None:
    assert api_spec(18).codec_versions == (0, 4)
    assert api_spec(7).codec_versions == (1, 3)
    assert api_spec(4).request_is_flexible(4) and not api_spec(4).request_is_flexible(3)
    assert api_spec(3).request_is_flexible(9) and not api_spec(3).request_is_flexible(8)
    with pytest.raises(UnknownApiError):
        api_spec(27)


def test_validate_supported() -> None:
    assert validate_supported({3: (0, 12), 4: (0, 4)}) == {3: (0, 12), 4: (0, 4)}
    with pytest.raises(UnknownApiError):
        validate_supported({27: (0, 1)})
    with pytest.raises(UnsupportedRangeError, match="OffsetCommit"):
        validate_supported({8: (0, 1)})
    with pytest.raises(UnsupportedRangeError, match="LeaderAndIsr"):
        validate_supported({4: (0, 5)})
    with pytest.raises(UnsupportedRangeError):
        validate_supported({7: (0, 3)})
    with pytest.raises(UnsupportedRangeError):
        validate_supported({3: (5, 4)})


def test_api_versions_response_lists_sorted_ranges() -> None:
    response = api_versions_response({18: (0, 4), 3: (0, 12)}, throttle_time_ms=5)
    assert [(k.api_key, k.min_version, k.max_version) for k in response.api_keys] == [
        (3, 0, 12),
        (18, 0, 4),
    ]
    assert (response.error_code, response.throttle_time_ms) == (0, 5)
    error = api_versions_response({18: (0, 4), 3: (0, 12)}, error_code=35)
    assert [k.api_key for k in error.api_keys] == [18]
