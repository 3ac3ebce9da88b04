"""The records of ``__consumer_offsets``: keys, values and the group's partition (pure logic).

As Kafka's ``GroupMetadataManager`` companion object: an offset commit is keyed by
(group, topic, partition) with key version 1 and its value written at version 3
(version 1 when the commit carries an explicit expire timestamp, OffsetCommit v2-v4
``retention_time_ms``); a group's metadata is keyed by the group id with key version
2 and its value written at version 3. A record without a value (tombstone) deletes
the key. Every key and value starts with its int16 version, followed by the schema
of that version (:mod:`kpo_broker.coordinator.group.schemas`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from kafka.protocol.api_data import ApiData
from kafka.record.default_records import DefaultRecordBatchBuilder

_SCHEMAS = "kpo_broker.coordinator.group.schemas"

#: Name of the internal topic (Kafka's ``Topic.GROUP_METADATA_TOPIC_NAME``).
GROUP_METADATA_TOPIC_NAME = "__consumer_offsets"
#: Kafka's internal topics (``Topic.isInternal``): written only by their coordinators and
#: hidden from consumers by default.
INTERNAL_TOPICS = frozenset({GROUP_METADATA_TOPIC_NAME, "__transaction_state"})
#: Key version of offset commits written by this broker (OffsetCommitKey's highest).
OFFSET_COMMIT_KEY_VERSION = 1
#: Key version of group metadata (GroupMetadataKey's only version).
GROUP_METADATA_KEY_VERSION = 2
#: Value versions written, as Kafka 3.9 writes them (highest non-flexible).
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_METADATA_VALUE_VERSION = 3
#: ``leaderEpoch`` of a commit that carries none.
NO_LEADER_EPOCH = -1


class OffsetCommitKey(ApiData, load_json=_SCHEMAS):  # type: ignore[misc,call-arg]
    """Key of an offset commit: ``group``, ``topic``, ``partition``."""


class OffsetCommitValue(ApiData, load_json=_SCHEMAS):  # type: ignore[misc,call-arg]
    """Value of an offset commit: ``offset``, ``leader_epoch``, ``metadata``, timestamps."""


class GroupMetadataKey(ApiData, load_json=_SCHEMAS):  # type: ignore[misc,call-arg]
    """Key of a group's metadata: ``group``."""


class GroupMetadataValue(ApiData, load_json=_SCHEMAS):  # type: ignore[misc,call-arg]
    """Value of a group's metadata: generation, protocol, leader and ``members``."""


_MemberMetadata = GroupMetadataValue.MemberMetadata


class RecordFormatError(ValueError):
    """A key or value of ``__consumer_offsets`` that cannot be decoded."""


def java_string_hash(text: str) -> int:
    """Return Java's ``String.hashCode`` of ``text`` (int32, over its UTF-16 code units)."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group_id: str, partition_count: int) -> int:
    """Return the ``__consumer_offsets`` partition of ``group_id``.

    Kafka's ``Utils.abs(groupId.hashCode) % offsets.topic.num.partitions``, where
    ``Utils.abs(Integer.MIN_VALUE)`` is 0.

    Raises:
        ValueError: ``partition_count`` is not positive.
    """
    if partition_count <= 0:
        raise ValueError(f"partition count must be positive, got {partition_count}")
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % partition_count


@dataclass(frozen=True)
class OffsetAndMetadata:
    """One committed offset (Kafka's ``OffsetAndMetadata``).

    Attributes:
        offset: the committed offset (the next record to consume).
        leader_epoch: leader epoch of the last consumed record (KIP-320), None if unknown.
        metadata: the client's metadata string.
        commit_timestamp: when the coordinator received the commit, ms.
        expire_timestamp: explicit expiry (OffsetCommit v2-v4 retention), ms, or None.
    """

    offset: int
    leader_epoch: int | None = None
    metadata: str = ""
    commit_timestamp: int = 0
    expire_timestamp: int | None = None


@dataclass(frozen=True)
class MemberRecord:
    """One member in a group metadata record (GroupMetadataValue's ``MemberMetadata``)."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupRecord:
    """A group metadata record's value.

    Attributes:
        protocol_type: e.g. ``consumer``; empty for a group used only for offsets.
        generation: the generation id.
        protocol: the selected protocol, None when the group is empty.
        leader: the leader's member id, None when empty.
        current_state_timestamp: when the group entered its state, ms (-1 unknown).
        members: the members with their subscription and assignment.
    """

    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: tuple[MemberRecord, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class OffsetKey:
    """A decoded offset commit key."""

    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class GroupKey:
    """A decoded group metadata key."""

    group: str


@dataclass(frozen=True)
class UnknownKey:
    """A key of a version this broker does not know (skipped while loading, as Kafka does)."""

    version: int


def offset_commit_key(group_id: str, topic: str, partition: int) -> bytes:
    """Encode the key of an offset commit (version 1)."""
    key = OffsetCommitKey(group=group_id, topic=topic, partition=partition)
    return bytes(key.encode(version=OFFSET_COMMIT_KEY_VERSION))


def group_metadata_key(group_id: str) -> bytes:
    """Encode the key of a group's metadata (version 2)."""
    return bytes(GroupMetadataKey(group=group_id).encode(version=GROUP_METADATA_KEY_VERSION))


def offset_commit_value(offset: OffsetAndMetadata) -> bytes:
    """Encode a commit's value: version 3, or 1 when it has an explicit expire timestamp."""
    version = (
        OFFSET_COMMIT_VALUE_VERSION
        if offset.expire_timestamp is None
        else OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY
    )
    value = OffsetCommitValue(
        offset=offset.offset,
        leader_epoch=NO_LEADER_EPOCH if offset.leader_epoch is None else offset.leader_epoch,
        metadata=offset.metadata or "",
        commit_timestamp=offset.commit_timestamp,
        expire_timestamp=-1 if offset.expire_timestamp is None else offset.expire_timestamp,
    )
    return bytes(value.encode(version=version))


def group_metadata_value(group: GroupRecord) -> bytes:
    """Encode a group's metadata value (version 3)."""
    value = GroupMetadataValue(
        protocol_type=group.protocol_type,
        generation=group.generation,
        protocol=group.protocol,
        leader=group.leader,
        current_state_timestamp=group.current_state_timestamp,
        members=[
            _MemberMetadata(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout=m.rebalance_timeout_ms,
                session_timeout=m.session_timeout_ms,
                subscription=m.subscription,
                assignment=m.assignment,
            )
            for m in group.members
        ],
    )
    return bytes(value.encode(version=GROUP_METADATA_VALUE_VERSION))


def _version(data: bytes) -> int:
    if len(data) < 2:
        raise RecordFormatError(f"record of {len(data)} bytes has no version")
    return int.from_bytes(data[:2], "big", signed=True)


def read_key(data: bytes) -> OffsetKey | GroupKey | UnknownKey:
    """Decode a ``__consumer_offsets`` key by its version (Kafka's ``readMessageKey``).

    Raises:
        RecordFormatError: the bytes do not match the schema of their version.
    """
    version = _version(data)
    try:
        if 0 <= version <= OFFSET_COMMIT_KEY_VERSION:
            k = OffsetCommitKey.decode(data)
            return OffsetKey(k.group, k.topic, k.partition)
        if version == GROUP_METADATA_KEY_VERSION:
            return GroupKey(GroupMetadataKey.decode(data).group)
    except Exception as exc:
        raise RecordFormatError(f"bad key of version {version}: {exc}") from exc
    return UnknownKey(version)


def read_offset_value(data: bytes) -> OffsetAndMetadata:
    """Decode an offset commit's value (versions 0-4).

    Raises:
        RecordFormatError: unknown version or malformed bytes.
    """
    version = _version(data)
    if not 0 <= version <= 4:
        raise RecordFormatError(f"unknown offset commit value version {version}")
    try:
        v = OffsetCommitValue.decode(data)
    except Exception as exc:
        raise RecordFormatError(f"bad offset commit value: {exc}") from exc
    return OffsetAndMetadata(
        offset=v.offset,
        leader_epoch=None if v.leader_epoch in (None, NO_LEADER_EPOCH) else v.leader_epoch,
        metadata=v.metadata or "",
        commit_timestamp=v.commit_timestamp,
        expire_timestamp=None if v.expire_timestamp in (None, -1) else v.expire_timestamp,
    )


def read_group_value(data: bytes) -> GroupRecord:
    """Decode a group metadata value (versions 0-4).

    A version 0 member has no rebalance timeout; its session timeout is used, as Kafka does.

    Raises:
        RecordFormatError: unknown version or malformed bytes.
    """
    version = _version(data)
    if not 0 <= version <= 4:
        raise RecordFormatError(f"unknown group metadata value version {version}")
    try:
        v = GroupMetadataValue.decode(data)
    except Exception as exc:
        raise RecordFormatError(f"bad group metadata value: {exc}") from exc
    members = tuple(
        MemberRecord(
            member_id=m.member_id,
            group_instance_id=m.group_instance_id if version >= 3 else None,
            client_id=m.client_id,
            client_host=m.client_host,
            rebalance_timeout_ms=m.session_timeout if version == 0 else m.rebalance_timeout,
            session_timeout_ms=m.session_timeout,
            subscription=bytes(m.subscription or b""),
            assignment=bytes(m.assignment or b""),
        )
        for m in v.members or ()
    )
    return GroupRecord(
        protocol_type=v.protocol_type or "",
        generation=v.generation,
        protocol=v.protocol,
        leader=v.leader,
        current_state_timestamp=(
            -1 if version < 2 or v.current_state_timestamp is None else v.current_state_timestamp
        ),
        members=members,
    )


def build_batch(
    records: Sequence[tuple[bytes, bytes | None]],
    timestamp_ms: int | None = None,
    compression_codec: int = 0,
) -> bytes:
    """Build one v2 record batch (CreateTime) of ``(key, value)`` records.

    Offsets start at 0; the leader assigns the real ones on append. A value of None
    is a tombstone. ``compression_codec`` is ``offsets.topic.compression.codec``
    (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd); kafka-python's builder keeps a batch
    uncompressed when compressing would not make it smaller.
    """
    ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    builder = DefaultRecordBatchBuilder(2, compression_codec, False, -1, -1, -1, 1 << 30)
    for i, (key, value) in enumerate(records):
        builder.append(i, ts, key, value, [])
    return bytes(builder.build())
