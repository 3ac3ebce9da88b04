"""The table of Kafka APIs the broker may serve: api key -> request and response classes.

Every class is a kafka-python ``ApiMessage`` built from a JSON schema (the
inter-broker ones from :mod:`kpo_broker.protocol.interbroker`). This module
does not choose which versions a broker advertises: callers pass a
``Mapping[int, tuple[int, int]]`` (api key -> (min, max) version), checked by
:func:`validate_supported` against the versions each codec can encode
(:attr:`ApiSpec.codec_versions`, the schema's ``validVersions``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kafka.protocol.admin import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirsResponse,
    CreateAclsRequest,
    CreateAclsResponse,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from kafka.protocol.admin.users import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)
from kafka.protocol.consumer import (
    FetchRequest,
    FetchResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)
from kafka.protocol.consumer.group import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafka.protocol.metadata import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    MetadataRequest,
    MetadataResponse,
)
from kafka.protocol.producer import (
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProduceRequest,
    ProduceResponse,
)
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from kpo_broker.protocol.interbroker import (
    AlterPartitionRequest,
    AlterPartitionResponse,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)

__all__ = [
    "APIS",
    "API_VERSIONS_KEY",
    "ApiSpec",
    "UnknownApiError",
    "UnsupportedRangeError",
    "api_spec",
    "api_versions_response",
    "validate_supported",
]

API_VERSIONS_KEY = 18
"""Api key of ApiVersions, the one api Kafka answers at any requested version (KIP-511)."""


@dataclass(frozen=True)
class ApiSpec:
    """One Kafka API: its key and kafka-python message classes.

    Attributes:
        api_key: Kafka's api key (int16).
        name: Kafka's api name, such as ``"LeaderAndIsr"``.
        request: the ``ApiMessage`` subclass of the request.
        response: the ``ApiMessage`` subclass of the response.
    """

    api_key: int
    name: str
    request: Any
    response: Any

    @property
    def codec_versions(self) -> tuple[int, int]:
        """The (min, max) versions both schemas declare in ``validVersions``."""
        req_lo, req_hi = self.request.valid_versions
        resp_lo, resp_hi = self.response.valid_versions
        return max(req_lo, resp_lo), min(req_hi, resp_hi)

    def request_is_flexible(self, version: int) -> bool:
        """Whether ``version`` of the request uses the flexible encoding (request header v2)."""
        return bool(self.request.flexible_version_q(version))


def _spec(request: Any, response: Any) -> ApiSpec:
    name = str(request.name)
    return ApiSpec(int(request.API_KEY), name.removesuffix("Request"), request, response)


APIS: Mapping[int, ApiSpec] = {
    spec.api_key: spec
    for spec in (
        _spec(ProduceRequest, ProduceResponse),
        _spec(InitProducerIdRequest, InitProducerIdResponse),
        _spec(FetchRequest, FetchResponse),
        _spec(ListOffsetsRequest, ListOffsetsResponse),
        _spec(MetadataRequest, MetadataResponse),
        _spec(LeaderAndIsrRequest, LeaderAndIsrResponse),
        _spec(StopReplicaRequest, StopReplicaResponse),
        _spec(UpdateMetadataRequest, UpdateMetadataResponse),
        _spec(ControlledShutdownRequest, ControlledShutdownResponse),
        _spec(AlterPartitionRequest, AlterPartitionResponse),
        _spec(FindCoordinatorRequest, FindCoordinatorResponse),
        _spec(ApiVersionsRequest, ApiVersionsResponse),
        _spec(CreateTopicsRequest, CreateTopicsResponse),
        _spec(DeleteTopicsRequest, DeleteTopicsResponse),
        _spec(OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse),
        _spec(DescribeConfigsRequest, DescribeConfigsResponse),
        _spec(AlterConfigsRequest, AlterConfigsResponse),
        _spec(AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse),
        _spec(DescribeLogDirsRequest, DescribeLogDirsResponse),
        _spec(CreatePartitionsRequest, CreatePartitionsResponse),
        _spec(ElectLeadersRequest, ElectLeadersResponse),
        _spec(IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse),
        _spec(AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse),
        _spec(ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse),
        _spec(DescribeClusterRequest, DescribeClusterResponse),
        _spec(DeleteRecordsRequest, DeleteRecordsResponse),
        _spec(SaslHandshakeRequest, SaslHandshakeResponse),
        _spec(SaslAuthenticateRequest, SaslAuthenticateResponse),
        _spec(DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse),
        _spec(AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse),
        _spec(OffsetCommitRequest, OffsetCommitResponse),
        _spec(OffsetFetchRequest, OffsetFetchResponse),
        _spec(JoinGroupRequest, JoinGroupResponse),
        _spec(HeartbeatRequest, HeartbeatResponse),
        _spec(LeaveGroupRequest, LeaveGroupResponse),
        _spec(SyncGroupRequest, SyncGroupResponse),
        _spec(DescribeGroupsRequest, DescribeGroupsResponse),
        _spec(ListGroupsRequest, ListGroupsResponse),
        _spec(DeleteGroupsRequest, DeleteGroupsResponse),
        _spec(OffsetDeleteRequest, OffsetDeleteResponse),
        _spec(DescribeAclsRequest, DescribeAclsResponse),
        _spec(CreateAclsRequest, CreateAclsResponse),
        _spec(DeleteAclsRequest, DeleteAclsResponse),
    )
}
"""Every api the broker may serve, by api key."""


class UnknownApiError(LookupError):
    """An api key that is not in :data:`APIS`."""


class UnsupportedRangeError(ValueError):
    """A supported-versions range that the codecs cannot honour."""


def api_spec(api_key: int) -> ApiSpec:
    """Return the :class:`ApiSpec` of ``api_key``.

    Raises:
        UnknownApiError: the key is not in :data:`APIS`.
    """
    try:
        return APIS[api_key]
    except KeyError:
        raise UnknownApiError(f"api key {api_key} is not served") from None


def validate_supported(supported: Mapping[int, tuple[int, int]]) -> dict[int, tuple[int, int]]:
    """Check a broker's advertised versions against the codecs and return a copy.

    Args:
        supported: api key -> (min, max) versions the broker advertises.

    Returns:
        A plain dict with the same entries.

    Raises:
        UnknownApiError: an api key is not in :data:`APIS`.
        UnsupportedRangeError: min > max, or the range leaves the schema's ``validVersions``.
    """
    checked: dict[int, tuple[int, int]] = {}
    for api_key, (lo, hi) in supported.items():
        spec = api_spec(api_key)
        codec_lo, codec_hi = spec.codec_versions
        if not codec_lo <= lo <= hi <= codec_hi:
            raise UnsupportedRangeError(
                f"{spec.name} versions {lo}-{hi} outside the codec's {codec_lo}-{codec_hi}"
            )
        checked[api_key] = (lo, hi)
    return checked


def api_versions_response(
    supported: Mapping[int, tuple[int, int]], *, error_code: int = 0, throttle_time_ms: int = 0
) -> Any:
    """Build the ApiVersionsResponse body listing ``supported``, sorted by api key.

    With ``error_code`` 35 (UNSUPPORTED_VERSION) only the ApiVersions entry is
    listed, as Kafka does so that the client can retry with a version it
    understands (KIP-511). The result has no version set: the caller encodes it
    at the request's version (v0 for the unsupported-version answer).

    Args:
        supported: api key -> (min, max) versions the broker advertises.
        error_code: the top-level Kafka error code.
        throttle_time_ms: quota throttle time, in ms (v1+).

    Returns:
        A ``kafka.protocol.metadata.ApiVersionsResponse``.
    """
    keys = sorted(supported)
    if error_code == 35:
        keys = [k for k in keys if k == API_VERSIONS_KEY]
    entry = ApiVersionsResponse.ApiVersion
    return ApiVersionsResponse(
        error_code=error_code,
        api_keys=[
            entry(api_key=k, min_version=supported[k][0], max_version=supported[k][1]) for k in keys
        ],
        throttle_time_ms=throttle_time_ms,
    )
