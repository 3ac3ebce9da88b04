"""Group metadata: protocol votes, offsets bookkeeping and ``offsets.retention.minutes`` expiry."""

from __future__ import annotations

from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription

from kpo_broker.coordinator.group.group import CommittedOffset, GroupMetadata
from kpo_broker.coordinator.group.member import MemberMetadata
from kpo_broker.coordinator.group.records import OffsetAndMetadata
from kpo_broker.coordinator.group.states import GroupState
from kpo_kafka.topic_partition import TopicPartition

RETENTION = 1000


def subscription(*topics: str) -> bytes:
    return bytes(ConsumerProtocolSubscription(topics=list(topics), user_data=b"").encode(version=0))


def member(
    member_id: str, topics: tuple[str, ...], protocols: tuple[str, ...] = ("range",)
) -> MemberMetadata:
    return MemberMetadata(
        member_id,
        None,
        "c",
        "/h",
        1000,
        1000,
        "consumer",
        [(p, subscription(*topics)) for p in protocols],
    )


def committed(offset: int, at: int, expire: int | None = None) -> CommittedOffset:
    return CommittedOffset(offset, OffsetAndMetadata(offset, None, "", at, expire))


def test_empty_group_offsets_expire_after_retention_since_it_became_empty() -> None:
    clock = [10_000]
    group = GroupMetadata("g", GroupState.EMPTY, lambda: clock[0])
    group.protocol_type = "consumer"
    tp = TopicPartition("t", 0)
    group.initialize_offsets({tp: committed(5, at=0)})
    assert group.remove_expired_offsets(10_500, RETENTION) == {}
    assert group.remove_expired_offsets(11_000, RETENTION) == {
        tp: OffsetAndMetadata(5, None, "", 0)
    }
    assert not group.has_offsets


def test_stable_group_keeps_offsets_of_subscribed_topics() -> None:
    group = GroupMetadata("g", GroupState.EMPTY, lambda: 0)
    group.add(member("m", ("t",)), None)
    group.transition_to(GroupState.PREPARING_REBALANCE)
    group.init_next_generation()
    group.transition_to(GroupState.STABLE)
    assert group.subscribed_topics == {"t"}
    kept, gone = TopicPartition("t", 0), TopicPartition("old", 0)
    group.initialize_offsets({kept: committed(1, at=0), gone: committed(2, at=0)})
    assert set(group.remove_expired_offsets(5_000, RETENTION)) == {gone}
    assert group.offset(kept) is not None


def test_explicit_expire_timestamp_and_pending_commits() -> None:
    group = GroupMetadata("simple", GroupState.EMPTY, lambda: 0)  # no protocol type: offsets only
    a, b = TopicPartition("t", 0), TopicPartition("t", 1)
    group.initialize_offsets({a: committed(1, at=0, expire=50_000), b: committed(2, at=0)})
    group.prepare_offset_commit({b: OffsetAndMetadata(3, None, "", 1)})
    assert group.remove_expired_offsets(10_000, RETENTION) == {}
    assert set(group.remove_expired_offsets(50_000, RETENTION)) == {a}


def test_newer_commit_wins_by_log_position() -> None:
    group = GroupMetadata("g")
    tp = TopicPartition("t", 0)
    first, second = OffsetAndMetadata(10), OffsetAndMetadata(20)
    group.prepare_offset_commit({tp: first})
    group.prepare_offset_commit({tp: second})
    group.on_offset_commit_append(tp, CommittedOffset(7, second))
    group.on_offset_commit_append(tp, CommittedOffset(5, first))
    assert group.offset(tp) == second
    assert not group.has_pending_offset_commits(tp)


def test_protocol_vote_and_member_bookkeeping() -> None:
    group = GroupMetadata("g")
    group.add(member("a", ("t",), ("sticky", "range")), None)
    group.transition_to(GroupState.PREPARING_REBALANCE)
    group.add(member("b", ("t",), ("range", "sticky")), None)
    group.add(member("c", ("u",), ("sticky", "range")), None)
    assert group.candidate_protocols() == {"sticky", "range"}
    assert group.select_protocol() == "sticky"
    assert group.supports_protocols("consumer", {"range"})
    assert not group.supports_protocols("consumer", {"roundrobin"})
    assert not group.supports_protocols("connect", {"range"})
    group.remove("a")
    assert group.leader_id == "b"
    group.init_next_generation()
    assert group.is_state(GroupState.COMPLETING_REBALANCE) and group.generation_id == 1
    assert group.subscribed_topics == {"t", "u"}
    record = group.to_record({"b": b"x", "c": b"y"})
    loaded = GroupMetadata.from_record("g", record)
    assert loaded.is_state(GroupState.STABLE) and loaded.leader_id == "b"
    assert {m: loaded.get(m).assignment for m in loaded.members} == {"b": b"x", "c": b"y"}
