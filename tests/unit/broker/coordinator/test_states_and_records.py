"""The group state table and the ``__consumer_offsets`` record formats."""

from __future__ import annotations

import pytest

from kpo_broker.coordinator.group.records import (
    GroupKey,
    GroupRecord,
    MemberRecord,
    OffsetAndMetadata,
    OffsetKey,
    UnknownKey,
    build_batch,
    group_metadata_key,
    group_metadata_value,
    java_string_hash,
    offset_commit_key,
    offset_commit_value,
    partition_for,
    read_group_value,
    read_key,
    read_offset_value,
)
from kpo_broker.coordinator.group.states import (
    GroupState,
    IllegalGroupStateTransitionError,
    can_rebalance,
    check_transition,
    is_valid_transition,
)

S = GroupState


@pytest.mark.parametrize(
    ("current", "target", "valid"),
    [
        (S.EMPTY, S.PREPARING_REBALANCE, True),
        (S.STABLE, S.PREPARING_REBALANCE, True),
        (S.COMPLETING_REBALANCE, S.PREPARING_REBALANCE, True),
        (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE, True),
        (S.PREPARING_REBALANCE, S.EMPTY, True),
        (S.COMPLETING_REBALANCE, S.STABLE, True),
        (S.STABLE, S.DEAD, True),
        (S.DEAD, S.DEAD, True),
        (S.EMPTY, S.STABLE, False),
        (S.STABLE, S.COMPLETING_REBALANCE, False),
        (S.DEAD, S.EMPTY, False),
        (S.PREPARING_REBALANCE, S.PREPARING_REBALANCE, False),
    ],
)
def test_transition_table_is_kafkas(current: GroupState, target: GroupState, valid: bool) -> None:
    assert is_valid_transition(current, target) is valid


def test_illegal_transition_names_the_states() -> None:
    with pytest.raises(
        IllegalGroupStateTransitionError, match="CompletingRebalance to move to Stable; it is Empty"
    ):
        check_transition("g", S.EMPTY, S.STABLE)
    assert can_rebalance(S.STABLE) and not can_rebalance(S.PREPARING_REBALANCE)


@pytest.mark.parametrize(
    ("text", "expected"),
    # Values of Java's "text".hashCode() (checked with jshell), UTF-16 surrogates included.
    [
        ("", 0),
        ("a", 97),
        ("abc", 96354),
        ("my-group", -1906497762),
        ("console-consumer-1", 35782224),
        ("\u00e9\u20ac\U0001f600", 16752006),
    ],
)
def test_java_string_hash(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected


def test_partition_for_uses_kafkas_abs_and_modulo() -> None:
    assert partition_for("abc", 50) == 96354 % 50
    assert partition_for("my-group", 50) == 1906497762 % 50
    # "polygenelubricants".hashCode() == Integer.MIN_VALUE: Utils.abs gives 0.
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert partition_for("polygenelubricants", 7) == 0
    with pytest.raises(ValueError):
        partition_for("g", 0)


def test_offset_commit_key_and_value_bytes_are_kafkas() -> None:
    key = offset_commit_key("g", "t", 3)
    # int16 version 1, then group, topic (int16-length strings) and int32 partition.
    assert key == b"\x00\x01" + b"\x00\x01g" + b"\x00\x01t" + b"\x00\x00\x00\x03"
    assert read_key(key) == OffsetKey("g", "t", 3)
    value = offset_commit_value(OffsetAndMetadata(42, 7, "meta", 1000))
    assert value == (
        b"\x00\x03"
        + (42).to_bytes(8, "big")
        + (7).to_bytes(4, "big")
        + b"\x00\x04meta"
        + (1000).to_bytes(8, "big")
    )
    assert read_offset_value(value) == OffsetAndMetadata(42, 7, "meta", 1000)


def test_offset_value_with_expiry_is_version_1() -> None:
    value = offset_commit_value(OffsetAndMetadata(5, None, "", 10, expire_timestamp=99))
    assert value[:2] == b"\x00\x01"
    assert read_offset_value(value) == OffsetAndMetadata(5, None, "", 10, 99)


def test_group_metadata_round_trip() -> None:
    record = GroupRecord(
        protocol_type="consumer",
        generation=4,
        protocol="range",
        leader="m-1",
        current_state_timestamp=123,
        members=(
            MemberRecord("m-1", None, "c1", "/127.0.0.1", 30000, 10000, b"sub", b"asg"),
            MemberRecord("m-2", "static-2", "c2", "/127.0.0.2", 30000, 10000, b"s2", b""),
        ),
    )
    key = group_metadata_key("g")
    assert key == b"\x00\x02\x00\x01g"
    assert read_key(key) == GroupKey("g")
    value = group_metadata_value(record)
    assert value[:2] == b"\x00\x03"
    assert read_group_value(value) == record
    empty = GroupRecord("consumer", 5, None, None, 9)
    assert read_group_value(group_metadata_value(empty)) == empty


def test_unknown_key_version_is_reported() -> None:
    assert read_key(b"\x00\x09\x00\x00") == UnknownKey(9)


def test_build_batch_holds_keys_values_and_tombstones() -> None:
    from kafka.record.default_records import DefaultRecordBatch

    data = build_batch([(b"k1", b"v1"), (b"k2", None)], 77)
    records = [(r.offset, r.key, r.value, r.timestamp) for r in DefaultRecordBatch(data)]
    assert records == [(0, b"k1", b"v1", 77), (1, b"k2", None, 77)]


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_build_batch_compresses_with_offsets_topic_compression_codec(codec: int) -> None:
    from kafka.record.default_records import DefaultRecordBatch

    data = build_batch([(b"k", b"v" * 200)], 5, codec)
    batch = DefaultRecordBatch(data)
    assert batch.compression_type == codec
    assert [(r.key, r.value) for r in batch] == [(b"k", b"v" * 200)]
