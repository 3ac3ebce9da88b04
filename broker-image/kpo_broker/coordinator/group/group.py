"""A classic group's membership, state and committed offsets (Kafka's ``GroupMetadata``).

Pure logic on the broker's event loop (no I/O, no locks: every mutation happens
between two awaits). The coordinator drives it; the metadata manager persists it.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription

from kpo_broker.coordinator.group.errors import Errors
from kpo_broker.coordinator.group.member import (
    JoinedMember,
    JoinResult,
    MemberMetadata,
    SyncResult,
)
from kpo_broker.coordinator.group.records import GroupRecord, MemberRecord, OffsetAndMetadata
from kpo_broker.coordinator.group.states import GroupState, can_rebalance, check_transition
from kpo_kafka.topic_partition import TopicPartition

log = logging.getLogger(__name__)

#: Protocol type of Kafka consumers (Kafka's ``ConsumerProtocol.PROTOCOL_TYPE``).
CONSUMER_PROTOCOL_TYPE = "consumer"


def now_ms() -> int:
    """Wall-clock time, ms."""
    return int(time.time() * 1000)


@dataclass(frozen=True)
class CommittedOffset:
    """A committed offset with the log offset of the batch that stored it.

    Kafka's ``CommitRecordMetadataAndOffset``: the batch offset decides which of two
    commits of one partition is the newer when the log is replayed. None means the
    commit is not in the log yet.
    """

    appended_batch_offset: int | None
    offset: OffsetAndMetadata


def subscribed_topics(metadata: bytes) -> set[str]:
    """Return the topics in a consumer's subscription (ConsumerProtocol, parsed with its v0 prefix).

    Raises:
        ValueError: the bytes are not a consumer subscription.
    """
    try:
        subscription = ConsumerProtocolSubscription.decode(bytes(metadata))
    except Exception as exc:
        raise ValueError(f"not a consumer subscription: {exc}") from exc
    return set(subscription.topics or ())


class GroupMetadata:
    """One group.

    Args:
        group_id: the group id.
        state: the initial state (Empty for a new group; Empty or Stable when loaded).
        clock: wall-clock time in ms (state timestamps).
    """

    def __init__(
        self,
        group_id: str,
        state: GroupState = GroupState.EMPTY,
        clock: Callable[[], int] = now_ms,
    ) -> None:
        self.group_id = group_id
        self.state = state
        self._clock = clock
        self.current_state_timestamp: int | None = clock()
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.generation_id = 0
        self.leader_id: str | None = None
        self.members: dict[str, MemberMetadata] = {}
        self.static_members: dict[str, str] = {}
        self.pending_members: set[str] = set()
        self.pending_sync_members: set[str] = set()
        self.num_members_awaiting_join = 0
        self.supported_protocols: dict[str, int] = {}
        self.offsets: dict[TopicPartition, CommittedOffset] = {}
        self.pending_offset_commits: dict[TopicPartition, OffsetAndMetadata] = {}
        self.subscribed_topics: set[str] | None = None
        self.new_member_added = False

    # ------------------------------------------------------------ state
    def is_state(self, state: GroupState) -> bool:
        """Whether the group is in ``state``."""
        return self.state is state

    def transition_to(self, target: GroupState) -> None:
        """Enter ``target``, stamping the time.

        Raises:
            IllegalGroupStateTransitionError: not allowed by the state table.
        """
        check_transition(self.group_id, self.state, target)
        self.state = target
        self.current_state_timestamp = self._clock()

    @property
    def can_rebalance(self) -> bool:
        """Whether a rebalance may start from the current state."""
        return can_rebalance(self.state)

    # ------------------------------------------------------------ members
    def has(self, member_id: str) -> bool:
        """Whether ``member_id`` is a member."""
        return member_id in self.members

    def get(self, member_id: str) -> MemberMetadata:
        """Return the member ``member_id``.

        Raises:
            KeyError: not a member.
        """
        return self.members[member_id]

    @property
    def size(self) -> int:
        """The number of members."""
        return len(self.members)

    def is_leader(self, member_id: str) -> bool:
        """Whether ``member_id`` is the group's leader."""
        return self.leader_id == member_id

    @property
    def is_consumer_group(self) -> bool:
        """Whether the group's protocol type is ``consumer``."""
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    def add(self, member: MemberMetadata, callback: Callable[[JoinResult], None] | None) -> None:
        """Add ``member``, parking its JoinGroup on ``callback`` (None: not parked).

        Raises:
            ValueError: its ``group.instance.id`` already belongs to another member.
        """
        if member.group_instance_id is not None:
            if member.group_instance_id in self.static_members:
                raise ValueError(
                    f"static member {member.group_instance_id} is already in group {self.group_id}"
                )
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self._count_protocols(member, 1)
        member.awaiting_join = callback
        if member.is_awaiting_join:
            self.num_members_awaiting_join += 1
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> None:
        """Remove a member (or pending member); a new leader is picked if it led."""
        member = self.members.pop(member_id, None)
        if member is not None:
            self._count_protocols(member, -1)
            if member.is_awaiting_join:
                self.num_members_awaiting_join -= 1
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_members.discard(member_id)
        self.pending_sync_members.discard(member_id)

    def _count_protocols(self, member: MemberMetadata, delta: int) -> None:
        for name, _ in member.supported_protocols:
            self.supported_protocols[name] = self.supported_protocols.get(name, 0) + delta

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep a leader that rejoined, else elect any rejoined member.

        Returns:
            False when the group has no leader or no member rejoined.
        """
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.is_awaiting_join:
            return True
        for member_id, member in self.members.items():
            if member.is_awaiting_join:
                log.info(
                    "group %s: leader %s did not rejoin in time; %s leads",
                    self.group_id,
                    self.leader_id,
                    member_id,
                )
                self.leader_id = member_id
                return True
        return False

    def replace_static_member(
        self, group_instance_id: str, old_member_id: str, new_member_id: str
    ) -> MemberMetadata:
        """Give a static member a new member id, fencing requests parked under the old one.

        Raises:
            KeyError: ``old_member_id`` is not a member.
        """
        member = self.members.pop(old_member_id)
        self.maybe_invoke_join_callback(
            member, JoinResult(old_member_id, error=Errors.FENCED_INSTANCE_ID)
        )
        self.maybe_invoke_sync_callback(member, SyncResult(error=Errors.FENCED_INSTANCE_ID))
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.is_leader(old_member_id):
            self.leader_id = new_member_id
        self.static_members[group_instance_id] = new_member_id
        return member

    def add_pending_member(self, member_id: str) -> None:
        """Remember a member id handed out with MEMBER_ID_REQUIRED (KIP-394)."""
        if self.has(member_id):
            raise ValueError(f"{member_id} is already a member of {self.group_id}")
        self.pending_members.add(member_id)

    def is_pending_member(self, member_id: str) -> bool:
        """Whether ``member_id`` was handed out but has not joined yet."""
        return member_id in self.pending_members

    @property
    def has_all_members_joined(self) -> bool:
        """Every member parked a JoinGroup and no pending member is outstanding."""
        return len(self.members) == self.num_members_awaiting_join and not self.pending_members

    def not_yet_rejoined_members(self) -> list[MemberMetadata]:
        """Members that have not sent a JoinGroup in this rebalance."""
        return [m for m in self.members.values() if not m.is_awaiting_join]

    @property
    def rebalance_timeout_ms(self) -> int:
        """The largest rebalance timeout of the members (0 without members)."""
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def generate_member_id(self, client_id: str, group_instance_id: str | None) -> str:
        """Return a new member id: ``<group.instance.id or client.id>-<uuid>`` (as Kafka)."""
        prefix = group_instance_id if group_instance_id is not None else client_id
        return f"{prefix}-{uuid.uuid4()}"

    def update_member(
        self,
        member: MemberMetadata,
        protocols: list[tuple[str, bytes]],
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        callback: Callable[[JoinResult], None] | None,
    ) -> None:
        """Replace a member's protocols and timeouts; park its JoinGroup on ``callback``."""
        self._count_protocols(member, -1)
        member.supported_protocols = list(protocols)
        self._count_protocols(member, 1)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if callback is not None and not member.is_awaiting_join:
            self.num_members_awaiting_join += 1
        elif callback is None and member.is_awaiting_join:
            self.num_members_awaiting_join -= 1
        member.awaiting_join = callback

    def maybe_invoke_join_callback(self, member: MemberMetadata, result: JoinResult) -> None:
        """Answer the member's parked JoinGroup with ``result``, if one is parked."""
        callback = member.awaiting_join
        if callback is None:
            return
        member.awaiting_join = None
        self.num_members_awaiting_join -= 1
        callback(result)

    def maybe_invoke_sync_callback(self, member: MemberMetadata, result: SyncResult) -> bool:
        """Answer the member's parked SyncGroup with ``result``; return whether one was parked."""
        callback = member.awaiting_sync
        if callback is None:
            return False
        member.awaiting_sync = None
        callback(result)
        return True

    # ------------------------------------------------------------ protocols
    def candidate_protocols(self) -> set[str]:
        """Protocols every member supports."""
        n = len(self.members)
        return {name for name, count in self.supported_protocols.items() if count == n}

    def select_protocol(self) -> str:
        """Pick the next generation's protocol: each member votes for its favourite candidate.

        Raises:
            ValueError: the group has no members.
        """
        if not self.members:
            raise ValueError(f"cannot select a protocol for empty group {self.group_id}")
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = member.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        return max(votes, key=lambda name: votes[name])

    def supports_protocols(self, protocol_type: str, protocols: set[str]) -> bool:
        """Whether a member with ``protocol_type`` and ``protocols`` may join.

        An empty group takes any non-empty type and protocol list; otherwise the type
        must match and one protocol must be supported by every member.
        """
        if self.is_state(GroupState.EMPTY):
            return bool(protocol_type) and bool(protocols)
        return self.protocol_type == protocol_type and any(
            self.supported_protocols.get(p, 0) == len(self.members) for p in protocols
        )

    def compute_subscribed_topics(self) -> set[str] | None:
        """Return the topics the consumer members subscribe to; None when not known."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return set()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        try:
            for member in self.members.values():
                topics |= subscribed_topics(member.metadata(self.protocol_name))
        except (ValueError, KeyError) as exc:
            log.warning("group %s: cannot read the subscriptions: %s", self.group_id, exc)
            return None
        return topics

    def is_subscribed_to_topic(self, topic: str) -> bool:
        """Whether the group consumes ``topic`` (True when that is not known)."""
        return self.subscribed_topics is None or topic in self.subscribed_topics

    def init_next_generation(self) -> None:
        """Start the next generation: CompletingRebalance with members, else Empty."""
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.EMPTY)
        self.pending_sync_members.clear()

    def current_member_metadata(self) -> tuple[JoinedMember, ...]:
        """Every member's metadata for the selected protocol (the leader's JoinGroup answer).

        Raises:
            ValueError: the group is Dead or PreparingRebalance (no protocol yet).
        """
        if self.state in (GroupState.DEAD, GroupState.PREPARING_REBALANCE) or (
            self.protocol_name is None
        ):
            raise ValueError(f"group {self.group_id} has no member metadata in {self.state.value}")
        return tuple(
            JoinedMember(m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
            for m in self.members.values()
        )

    def to_record(self, assignment: dict[str, bytes]) -> GroupRecord:
        """Return the group metadata record for ``assignment`` (member id -> assignment).

        Raises:
            ValueError: a member has no assignment or the group has no protocol.
        """
        members = []
        for m in self.members.values():
            if self.protocol_name is None:
                raise ValueError(f"group {self.group_id} has members but no protocol")
            if m.member_id not in assignment:
                raise ValueError(f"member {m.member_id} of {self.group_id} has no assignment")
            members.append(
                MemberRecord(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout_ms=m.rebalance_timeout_ms,
                    session_timeout_ms=m.session_timeout_ms,
                    subscription=m.metadata(self.protocol_name),
                    assignment=assignment[m.member_id],
                )
            )
        return GroupRecord(
            protocol_type=self.protocol_type or "",
            generation=self.generation_id,
            protocol=self.protocol_name,
            leader=self.leader_id,
            current_state_timestamp=(
                -1 if self.current_state_timestamp is None else self.current_state_timestamp
            ),
            members=tuple(members),
        )

    @classmethod
    def from_record(
        cls, group_id: str, record: GroupRecord, clock: Callable[[], int] = now_ms
    ) -> GroupMetadata:
        """Rebuild a loaded group: Stable with members, Empty without (Kafka's ``loadGroup``)."""
        group = cls(group_id, GroupState.STABLE if record.members else GroupState.EMPTY, clock)
        group.generation_id = record.generation
        group.protocol_type = record.protocol_type or None
        group.protocol_name = record.protocol
        group.leader_id = record.leader
        group.current_state_timestamp = (
            None if record.current_state_timestamp == -1 else record.current_state_timestamp
        )
        for m in record.members:
            member = MemberMetadata(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                session_timeout_ms=m.session_timeout_ms,
                protocol_type=record.protocol_type,
                supported_protocols=[(record.protocol or "", m.subscription)],
                assignment=m.assignment,
            )
            group.add(member, None)
        group.leader_id = record.leader if record.leader in group.members else group.leader_id
        group.subscribed_topics = group.compute_subscribed_topics()
        return group

    # ------------------------------------------------------------ offsets
    def initialize_offsets(self, offsets: dict[TopicPartition, CommittedOffset]) -> None:
        """Add the offsets read from the log."""
        self.offsets.update(offsets)

    def prepare_offset_commit(self, offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
        """Mark commits as being written (they are not answered by OffsetFetch as stable)."""
        self.pending_offset_commits.update(offsets)

    def on_offset_commit_append(self, tp: TopicPartition, committed: CommittedOffset) -> None:
        """Make a replicated commit the partition's offset, unless a newer one is."""
        if tp in self.pending_offset_commits:
            current = self.offsets.get(tp)
            if (
                current is None
                or current.appended_batch_offset is None
                or (
                    committed.appended_batch_offset is not None
                    and current.appended_batch_offset < committed.appended_batch_offset
                )
            ):
                self.offsets[tp] = committed
        if self.pending_offset_commits.get(tp) == committed.offset:
            del self.pending_offset_commits[tp]

    def fail_pending_offset_write(self, tp: TopicPartition, offset: OffsetAndMetadata) -> None:
        """Forget a commit whose write failed."""
        if self.pending_offset_commits.get(tp) == offset:
            del self.pending_offset_commits[tp]

    def has_pending_offset_commits(self, tp: TopicPartition) -> bool:
        """Whether a commit of ``tp`` is being written."""
        return tp in self.pending_offset_commits

    def offset(self, tp: TopicPartition) -> OffsetAndMetadata | None:
        """Return the committed offset of ``tp``, or None."""
        committed = self.offsets.get(tp)
        return committed.offset if committed is not None else None

    @property
    def has_offsets(self) -> bool:
        """Whether any offset is committed or being committed."""
        return bool(self.offsets or self.pending_offset_commits)

    def remove_offsets(
        self, tps: Iterable[TopicPartition]
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """Drop the offsets of ``tps``; return those that existed."""
        removed = {}
        for tp in tps:
            self.pending_offset_commits.pop(tp, None)
            committed = self.offsets.pop(tp, None)
            if committed is not None:
                removed[tp] = committed.offset
        return removed

    def remove_all_offsets(self) -> dict[TopicPartition, OffsetAndMetadata]:
        """Drop every offset; return them."""
        return self.remove_offsets(list(self.offsets))

    def remove_expired_offsets(
        self, now: int, retention_ms: int
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """Drop and return the offsets past ``offsets.retention.minutes`` (KIP-211).

        An Empty group's offsets expire ``retention_ms`` after it became Empty; a Stable
        consumer group's offsets of topics it no longer subscribes to expire
        ``retention_ms`` after their commit; a group used only for offsets (no protocol
        type) expires each offset ``retention_ms`` after its commit. An offset with an
        explicit expire timestamp (OffsetCommit v2-v4) expires then. Offsets being
        written never expire.
        """

        def expired(base: Callable[[CommittedOffset], int], keep: set[str]) -> list[TopicPartition]:
            out = []
            for tp, committed in self.offsets.items():
                if tp.topic in keep or tp in self.pending_offset_commits:
                    continue
                expire_at = committed.offset.expire_timestamp
                if expire_at is not None:
                    if now >= expire_at:
                        out.append(tp)
                elif now - base(committed) >= retention_ms:
                    out.append(tp)
            return out

        if self.protocol_type is not None and self.is_state(GroupState.EMPTY):
            state_ts = self.current_state_timestamp
            chosen = expired(
                lambda c: state_ts if state_ts is not None else c.offset.commit_timestamp, set()
            )
        elif (
            self.protocol_type == CONSUMER_PROTOCOL_TYPE
            and self.subscribed_topics is not None
            and self.is_state(GroupState.STABLE)
        ):
            chosen = expired(lambda c: c.offset.commit_timestamp, self.subscribed_topics)
        elif self.protocol_type is None:
            chosen = expired(lambda c: c.offset.commit_timestamp, set())
        else:
            chosen = []
        return {tp: self.offsets.pop(tp).offset for tp in chosen}

    def __repr__(self) -> str:
        return (
            f"GroupMetadata(group_id={self.group_id!r}, generation={self.generation_id}, "
            f"protocol_type={self.protocol_type!r}, state={self.state.value}, "
            f"members={list(self.members)})"
        )
