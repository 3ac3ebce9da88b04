"""Inter-broker APIs: round trips at every declared version, and the documented byte layouts."""

from __future__ import annotations

import struct
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kpo_broker.protocol.framing import decode_request, decode_response
from kpo_broker.protocol.interbroker import (
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    LeaderAndIsrLiveLeader,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    LeaderAndIsrTopicState,
    RemainingPartition,
    StopReplicaPartitionState,
    StopReplicaRequest,
    StopReplicaResponse,
    StopReplicaTopicState,
    UpdateMetadataBroker,
    UpdateMetadataEndpoint,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
    UpdateMetadataTopicState,
)
from tests.unit.broker.protocol.schema_strategies import messages, plain

# (class, api key, first version, last version, first flexible version)
DECLARED = [
    (LeaderAndIsrRequest, 4, 0, 4, 4),
    (LeaderAndIsrResponse, 4, 0, 4, 4),
    (StopReplicaRequest, 5, 0, 3, 2),
    (StopReplicaResponse, 5, 0, 3, 2),
    (UpdateMetadataRequest, 6, 0, 7, 6),
    (UpdateMetadataResponse, 6, 0, 7, 6),
    (ControlledShutdownRequest, 7, 1, 3, 3),
    (ControlledShutdownResponse, 7, 1, 3, 3),
]
ALL_VERSIONS = [(cls, v) for cls, _, lo, hi, _ in DECLARED for v in range(lo, hi + 1)]
SUPPORTED = {4: (0, 4), 5: (0, 3), 6: (0, 7), 7: (1, 3)}


@pytest.mark.parametrize(("cls", "api_key", "lo", "hi", "flexible_from"), DECLARED)
def test_schema_metadata(cls: Any, api_key: int, lo: int, hi: int, flexible_from: int) -> None:
    assert api_key == cls.API_KEY
    assert cls.valid_versions == (lo, hi)
    assert [cls.flexible_version_q(v) for v in range(lo, hi + 1)] == [
        v >= flexible_from for v in range(lo, hi + 1)
    ]


@pytest.mark.parametrize(("cls", "version"), ALL_VERSIONS, ids=lambda x: getattr(x, "name", x))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_round_trip_every_version(cls: Any, version: int, data: st.DataObject) -> None:
    message = data.draw(messages(cls, version))
    encoded = bytes(message.encode(version=version))
    decoded = cls.decode(encoded, version=version)
    assert plain(decoded, cls.fields, version) == plain(message, cls.fields, version)


@pytest.mark.parametrize(
    ("cls", "version"),
    [(c, v) for c, v in ALL_VERSIONS if c.is_request()],
    ids=lambda x: getattr(x, "name", x),
)
@settings(max_examples=10, deadline=None)
@given(data=st.data(), correlation_id=st.integers(0, 2**31 - 1))
def test_framed_requests_decode_and_re_encode(
    cls: Any, version: int, data: st.DataObject, correlation_id: int
) -> None:
    message = data.draw(messages(cls, version))
    body = bytes(message.encode(version=version))
    message.with_header(correlation_id=correlation_id, client_id="controller-1")
    frame = bytes(message.encode(version=version, header=True, framed=True))
    decoded = decode_request(frame[4:], SUPPORTED)
    assert (decoded.api_key, decoded.api_version) == (cls.API_KEY, version)
    assert (decoded.correlation_id, decoded.client_id) == (correlation_id, "controller-1")
    assert plain(decoded.body, cls.fields, version) == plain(message, cls.fields, version)
    assert bytes(decoded.body.encode(version=version)) == body


@pytest.mark.parametrize(
    ("cls", "version"),
    [(c, v) for c, v in ALL_VERSIONS if not c.is_request()],
    ids=lambda x: getattr(x, "name", x),
)
@settings(max_examples=10, deadline=None)
@given(data=st.data(), correlation_id=st.integers(0, 2**31 - 1))
def test_framed_responses_decode_strictly(
    cls: Any, version: int, data: st.DataObject, correlation_id: int
) -> None:
    message = data.draw(messages(cls, version))
    message.with_header(correlation_id=correlation_id)
    # The version was set at construction: kafka-python's version setter fails on
    # a response that carries a header.
    frame = bytes(message.encode(header=True, framed=True))
    got_id, decoded = decode_response(frame[4:], cls, version)
    assert got_id == correlation_id
    assert plain(decoded, cls.fields, version) == plain(message, cls.fields, version)


def _string(value: str) -> bytes:
    raw = value.encode()
    return struct.pack(">h", len(raw)) + raw


def _compact_string(value: str) -> bytes:
    raw = value.encode()
    return bytes([len(raw) + 1]) + raw


def _int32s(values: list[int]) -> bytes:
    return struct.pack(f">i{len(values)}i", len(values), *values)


def _compact_int32s(values: list[int]) -> bytes:
    return bytes([len(values) + 1]) + struct.pack(f">{len(values)}i", *values)


def test_leader_and_isr_v3_layout() -> None:
    """v3: controller_id, controller_epoch, broker_epoch, topic_states, live_leaders (KIP-455)."""
    partition = LeaderAndIsrPartitionState(
        partition_index=2,
        controller_epoch=7,
        leader=1,
        leader_epoch=4,
        isr=[1, 2],
        zk_version=9,
        replicas=[1, 2, 3],
        adding_replicas=[3],
        removing_replicas=[],
        is_new=True,
    )
    request = LeaderAndIsrRequest(
        version=3,
        controller_id=1,
        controller_epoch=7,
        broker_epoch=100,
        topic_states=[LeaderAndIsrTopicState(topic_name="t", partition_states=[partition])],
        live_leaders=[LeaderAndIsrLiveLeader(broker_id=1, host_name="h1", port=9092)],
    )
    expected = (
        struct.pack(">iiq", 1, 7, 100)
        + struct.pack(">i", 1)
        + _string("t")
        + struct.pack(">i", 1)
        + struct.pack(">iiii", 2, 7, 1, 4)
        + _int32s([1, 2])
        + struct.pack(">i", 9)
        + _int32s([1, 2, 3])
        + _int32s([3])
        + _int32s([])
        + b"\x01"
        + struct.pack(">i", 1)
        + struct.pack(">i", 1)
        + _string("h1")
        + struct.pack(">i", 9092)
    )
    assert bytes(request.encode(version=3)) == expected
    decoded = LeaderAndIsrRequest.decode(expected, version=3)
    state = decoded.topic_states[0].partition_states[0]
    assert (state.leader, state.leader_epoch, state.isr, state.zk_version) == (1, 4, [1, 2], 9)
    assert (state.adding_replicas, state.removing_replicas, state.is_new) == ([3], [], True)


def test_leader_and_isr_v4_is_flexible() -> None:
    partition = LeaderAndIsrPartitionState(
        partition_index=0,
        controller_epoch=1,
        leader=2,
        leader_epoch=0,
        isr=[2],
        zk_version=0,
        replicas=[2],
        adding_replicas=[],
        removing_replicas=[],
        is_new=False,
    )
    request = LeaderAndIsrRequest(
        version=4,
        controller_id=2,
        controller_epoch=1,
        broker_epoch=5,
        topic_states=[LeaderAndIsrTopicState(topic_name="a", partition_states=[partition])],
        live_leaders=[],
    )
    expected = (
        struct.pack(">iiq", 2, 1, 5)
        + b"\x02"
        + _compact_string("a")
        + b"\x02"
        + struct.pack(">iiii", 0, 1, 2, 0)
        + _compact_int32s([2])
        + struct.pack(">i", 0)
        + _compact_int32s([2])
        + _compact_int32s([])
        + _compact_int32s([])
        + b"\x00"  # is_new
        + b"\x00"  # partition state tagged fields
        + b"\x00"  # topic state tagged fields
        + b"\x01"  # live_leaders: empty compact array
        + b"\x00"  # request tagged fields
    )
    assert bytes(request.encode(version=4)) == expected


def test_stop_replica_v3_carries_delete_and_leader_epoch_per_partition() -> None:
    request = StopReplicaRequest(
        version=3,
        controller_id=0,
        controller_epoch=3,
        broker_epoch=42,
        topic_states=[
            StopReplicaTopicState(
                topic_name="gone",
                partition_states=[
                    StopReplicaPartitionState(
                        partition_index=1, leader_epoch=-2, delete_partition=True
                    )
                ],
            )
        ],
    )
    expected = (
        struct.pack(">iiq", 0, 3, 42)
        + b"\x02"
        + _compact_string("gone")
        + b"\x02"
        + struct.pack(">ii", 1, -2)
        + b"\x01\x00"  # delete_partition, partition tagged fields
        + b"\x00\x00"  # topic tagged fields, request tagged fields
    )
    assert bytes(request.encode(version=3)) == expected
    decoded = StopReplicaRequest.decode(expected, version=3)
    state = decoded.topic_states[0].partition_states[0]
    assert (state.partition_index, state.leader_epoch, state.delete_partition) == (1, -2, True)


def test_update_metadata_v5_layout_with_endpoints_rack_and_offline_replicas() -> None:
    request = UpdateMetadataRequest(
        version=5,
        controller_id=1,
        controller_epoch=2,
        broker_epoch=3,
        topic_states=[
            UpdateMetadataTopicState(
                topic_name="t",
                partition_states=[
                    UpdateMetadataPartitionState(
                        partition_index=0,
                        controller_epoch=2,
                        leader=1,
                        leader_epoch=6,
                        isr=[1],
                        zk_version=8,
                        replicas=[1, 2],
                        offline_replicas=[2],
                    )
                ],
            )
        ],
        live_brokers=[
            UpdateMetadataBroker(
                id=1,
                endpoints=[
                    UpdateMetadataEndpoint(
                        port=9092, host="b1", listener="PLAINTEXT", security_protocol=0
                    )
                ],
                rack=None,
            )
        ],
    )
    expected = (
        struct.pack(">iiq", 1, 2, 3)
        + struct.pack(">i", 1)
        + _string("t")
        + struct.pack(">i", 1)
        + struct.pack(">iiii", 0, 2, 1, 6)
        + _int32s([1])
        + struct.pack(">i", 8)
        + _int32s([1, 2])
        + _int32s([2])
        + struct.pack(">i", 1)
        + struct.pack(">i", 1)
        + struct.pack(">i", 1)
        + struct.pack(">i", 9092)
        + _string("b1")
        + _string("PLAINTEXT")
        + struct.pack(">h", 0)
        + struct.pack(">h", -1)  # null rack
    )
    assert bytes(request.encode(version=5)) == expected


def test_update_metadata_v6_round_trips_rack() -> None:
    broker = UpdateMetadataBroker(
        id=3,
        endpoints=[UpdateMetadataEndpoint(port=1, host="h", listener="L", security_protocol=0)],
        rack="r1",
    )
    request = UpdateMetadataRequest(
        version=6,
        controller_id=1,
        controller_epoch=1,
        broker_epoch=1,
        topic_states=[],
        live_brokers=[broker],
    )
    decoded = UpdateMetadataRequest.decode(request.encode(version=6), version=6)
    assert decoded.live_brokers[0].rack == "r1"
    assert decoded.live_brokers[0].endpoints[0].listener == "L"


def test_update_metadata_v7_carries_topic_ids() -> None:
    topic_id = uuid.UUID(bytes=bytes(range(16)))
    request = UpdateMetadataRequest(
        version=7,
        controller_id=1,
        controller_epoch=1,
        broker_epoch=1,
        topic_states=[
            UpdateMetadataTopicState(topic_name="t", topic_id=topic_id, partition_states=[])
        ],
        live_brokers=[],
    )
    decoded = UpdateMetadataRequest.decode(request.encode(version=7), version=7)
    assert decoded.topic_states[0].topic_id == topic_id
    assert len(request.encode(version=7)) == len(request.encode(version=6)) + 16


@pytest.mark.parametrize("version", [1, 2, 3])
def test_controlled_shutdown_layouts(version: int) -> None:
    request = ControlledShutdownRequest(version=version, broker_id=5, broker_epoch=77)
    expected = {1: struct.pack(">i", 5), 2: struct.pack(">iq", 5, 77)}.get(
        version, struct.pack(">iq", 5, 77) + b"\x00"
    )
    assert bytes(request.encode(version=version)) == expected

    response = ControlledShutdownResponse(
        version=version,
        error_code=0,
        remaining_partitions=[RemainingPartition(topic_name="t", partition_index=4)],
    )
    if version < 3:
        body = struct.pack(">hi", 0, 1) + _string("t") + struct.pack(">i", 4)
    else:
        body = struct.pack(">h", 0) + b"\x02" + _compact_string("t") + struct.pack(">i", 4)
        body += b"\x00\x00"
    assert bytes(response.encode(version=version)) == body
    decoded = ControlledShutdownResponse.decode(body, version=version)
    assert [(p.topic_name, p.partition_index) for p in decoded.remaining_partitions] == [("t", 4)]


def test_defaults_follow_the_schema() -> None:
    request = ControlledShutdownRequest(version=2, broker_id=1)
    assert request.broker_epoch == -1
    state = StopReplicaPartitionState(partition_index=0, delete_partition=False)
    assert state.leader_epoch == -1
