from typing import Any

import pytest

from kpo_broker.controller.errors import RequestBatchNotEmptyError
from kpo_broker.controller.request_batch import RequestVersions
from kpo_broker.protocol.interbroker import (
    LeaderAndIsrRequest,
    StopReplicaPartitionError,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataRequest,
)
from kpo_broker.zk.model import LeaderAndIsr, LeaderIsrAndControllerEpoch
from kpo_kafka.topic_partition import TopicPartition

from .fakes import FakeSender, context_with, new_batch

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def leadership(leader: int, isr: tuple[int, ...], epoch: int = 3) -> LeaderIsrAndControllerEpoch:
    return LeaderIsrAndControllerEpoch(LeaderAndIsr(leader, epoch, isr, 7), 2)


def roundtrip(request: Any, cls: Any, version: int) -> Any:
    return cls.decode(request.encode(version=version), version=version)


def test_leader_and_isr_is_grouped_per_broker_and_topic_with_update_metadata_to_all() -> None:
    ctx = context_with([1, 2, 3], {A0: (1, 2), A1: (2, 3), B0: (2,)}, epoch=5)
    for tp, li in {
        A0: leadership(1, (1, 2)),
        A1: leadership(2, (2, 3)),
        B0: leadership(2, (2,)),
    }.items():
        ctx.put_partition_leadership(tp, li)
    sender = FakeSender()
    batch = new_batch(ctx, sender)
    batch.new_batch()
    for tp in (A0, A1, B0):
        li = ctx.partition_leadership(tp)
        assignment = ctx.partition_full_replica_assignment(tp)
        assert li is not None and assignment is not None
        batch.add_leader_and_isr_request_for_brokers(
            assignment.replicas, tp, li, assignment, tp == B0
        )
    batch.send_requests_to_brokers(5)

    assert batch.is_empty
    kinds = [type(s.request).__name__ for s in sender.sent]
    # LeaderAndIsr first, then UpdateMetadata, each one request per broker.
    assert kinds == ["LeaderAndIsrRequest"] * 3 + ["UpdateMetadataRequest"] * 3
    to_2 = sender.of("LeaderAndIsr", 2)
    assert len(to_2) == 1
    request = roundtrip(to_2[0].request, LeaderAndIsrRequest, 4)
    assert (request.controller_id, request.controller_epoch, request.broker_epoch) == (1, 5, 100)
    assert [t.topic_name for t in request.topic_states] == ["a", "b"]
    states = sender.partition_states("LeaderAndIsr", 2)
    assert set(states) == {A0, A1, B0}
    assert (states[A1].leader, states[A1].leader_epoch, states[A1].isr) == (2, 3, [2, 3])
    assert (states[A1].zk_version, states[A1].controller_epoch, states[A1].replicas) == (
        7,
        2,
        [2, 3],
    )
    assert [states[tp].is_new for tp in (A0, A1, B0)] == [False, False, True]
    assert sorted(leader.broker_id for leader in request.live_leaders) == [1, 2]
    assert {(leader.host_name, leader.port) for leader in request.live_leaders} == {
        ("host1", 9001),
        ("host2", 9002),
    }
    for broker_id in (1, 2, 3):
        assert set(sender.partition_states("UpdateMetadata", broker_id)) == {A0, A1, B0}


def test_update_metadata_marks_deleted_topics_and_offline_replicas() -> None:
    ctx = context_with([1, 2], {A0: (1, 2, 3), B0: (1,)})
    ctx.put_partition_leadership(A0, leadership(1, (1, 2)))
    ctx.put_partition_leadership(B0, leadership(1, (1,)))
    ctx.queue_topic_deletion(["b"])
    sender = FakeSender()
    batch = new_batch(ctx, sender)
    batch.add_update_metadata_request_for_brokers([1, 2, -1], [A0, B0, A1])
    batch.send_requests_to_brokers(1)

    assert [s.broker_id for s in sender.sent] == [1, 2]
    request = roundtrip(sender.sent[0].request, UpdateMetadataRequest, 6)
    assert [b.id for b in request.live_brokers] == [1, 2]
    endpoint = request.live_brokers[1].endpoints[0]
    assert (endpoint.host, endpoint.port, endpoint.listener, endpoint.security_protocol) == (
        "host2",
        9002,
        "PLAINTEXT",
        0,
    )
    states = sender.partition_states("UpdateMetadata", 1)
    assert set(states) == {A0, B0}  # A1 has no leadership: left out
    assert states[A0].offline_replicas == [3]
    assert states[B0].leader == -2  # LeaderDuringDelete


def test_stop_replica_leader_epochs_and_delete_flag() -> None:
    ctx = context_with([1, 2], {A0: (1, 2), A1: (1, 2)})
    ctx.put_partition_leadership(A0, leadership(1, (1, 2), epoch=4))
    sender = FakeSender()
    responses: list[tuple[int, Any, frozenset[TopicPartition]]] = []
    batch = new_batch(ctx, sender, on_stop_replica_response=lambda *a: responses.append(a))
    batch.add_stop_replica_request_for_brokers([2], A0, delete_partition=False)
    batch.add_stop_replica_request_for_brokers([2], A1, delete_partition=True)
    batch.add_stop_replica_request_for_brokers([2], A1, delete_partition=False)  # delete wins
    batch.add_stop_replica_request_for_brokers([1], A0, delete_partition=False)
    batch.send_requests_to_brokers(1)

    to_2 = sender.of("StopReplica", 2)[0]
    request = roundtrip(to_2.request, StopReplicaRequest, 3)
    entries = {
        p.partition_index: (p.leader_epoch, p.delete_partition)
        for p in request.topic_states[0].partition_states
    }
    assert entries == {0: (4, False), 1: (-2, True)}
    assert sender.of("StopReplica", 1)[0].callback is None  # nothing deleted: no callback

    response = StopReplicaResponse(
        error_code=0,
        partition_errors=[
            StopReplicaPartitionError(topic_name="a", partition_index=1, error_code=0)
        ],
    )
    assert to_2.callback is not None
    to_2.callback(response)
    assert responses == [(2, response, frozenset({A1}))]


def test_new_batch_refuses_a_pending_batch_and_clear_empties_it() -> None:
    ctx = context_with([1], {A0: (1,)})
    batch = new_batch(ctx, FakeSender())
    batch.add_update_metadata_request_for_brokers([1], [])
    with pytest.raises(RequestBatchNotEmptyError):
        batch.new_batch()
    batch.clear()
    batch.new_batch()
    assert batch.is_empty


def test_update_metadata_without_partitions_still_lists_live_brokers() -> None:
    ctx = context_with([1, 2], {})
    sender = FakeSender()
    batch = new_batch(ctx, sender)
    batch.add_update_metadata_request_for_brokers([2], [])
    batch.send_requests_to_brokers(1)
    request = roundtrip(sender.sent[0].request, UpdateMetadataRequest, 6)
    assert request.topic_states == []
    assert [b.id for b in request.live_brokers] == [1, 2]


@pytest.mark.parametrize(
    "kwargs", [{"leader_and_isr": 1}, {"update_metadata": 4}, {"stop_replica": 2}]
)
def test_request_versions_without_grouped_shapes_are_refused(kwargs: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        RequestVersions(**kwargs)
