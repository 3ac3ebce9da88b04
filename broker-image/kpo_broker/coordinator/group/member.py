"""A member of a classic group (Kafka's ``MemberMetadata``) and the results it awaits."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

#: Member id of a JoinGroup from a member that has none yet.
UNKNOWN_MEMBER_ID = ""
#: Generation id of answers that carry none.
NO_GENERATION = -1


@dataclass(frozen=True)
class JoinedMember:
    """One member as the leader sees it in its JoinGroup response."""

    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True)
class JoinResult:
    """What a JoinGroup request is answered with (Kafka's ``JoinGroupResult``).

    Attributes:
        member_id: the member's id (new or existing).
        error: Kafka error code.
        generation_id: the new generation, -1 on error.
        protocol_type: the group's protocol type, None on error.
        protocol_name: the selected protocol, None on error.
        leader_id: the leader's member id, "" on error.
        members: every member with its metadata, for the leader only.
        skip_assignment: the (static) leader must not run the assignor (JoinGroup v9).
    """

    member_id: str
    error: int = 0
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    members: tuple[JoinedMember, ...] = ()
    skip_assignment: bool = False


@dataclass(frozen=True)
class SyncResult:
    """What a SyncGroup request is answered with (Kafka's ``SyncGroupResult``)."""

    error: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


JoinCallback = Callable[[JoinResult], None]
SyncCallback = Callable[[SyncResult], None]


@dataclass
class MemberMetadata:
    """One member of a group.

    Attributes:
        member_id: assigned by the coordinator (``<client.id or group.instance.id>-<uuid>``).
        group_instance_id: ``group.instance.id`` of a static member (KIP-345), else None.
        client_id: the client's ``client.id``.
        client_host: the client's address as Kafka prints it (``/127.0.0.1``).
        rebalance_timeout_ms: how long the coordinator waits for it to rejoin.
        session_timeout_ms: how long it may go without a heartbeat.
        protocol_type: e.g. ``consumer``.
        supported_protocols: (name, metadata) pairs in the member's order of preference.
        assignment: what the leader assigned it in the current generation.
        awaiting_join: answers its parked JoinGroup, None when none is parked.
        awaiting_sync: answers its parked SyncGroup, None when none is parked.
        is_new: joined but has not yet received a JoinGroup answer with its id.
        heartbeat_satisfied: a heartbeat (or other sign of life) arrived since the
            current session deadline was set.
    """

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    supported_protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    awaiting_join: JoinCallback | None = field(default=None, repr=False)
    awaiting_sync: SyncCallback | None = field(default=None, repr=False)
    is_new: bool = False
    heartbeat_satisfied: bool = False

    @property
    def is_static(self) -> bool:
        """Whether the member has a ``group.instance.id``."""
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        """Whether a JoinGroup of this member is parked."""
        return self.awaiting_join is not None

    @property
    def is_awaiting_sync(self) -> bool:
        """Whether a SyncGroup of this member is parked."""
        return self.awaiting_sync is not None

    def metadata(self, protocol: str) -> bytes:
        """Return the member's metadata for ``protocol``.

        Raises:
            KeyError: the member does not support ``protocol``.
        """
        for name, data in self.supported_protocols:
            if name == protocol:
                return data
        raise KeyError(f"member {self.member_id} does not support protocol {protocol}")

    def has_satisfied_heartbeat(self) -> bool:
        """Whether the member is alive as far as the current session deadline goes.

        A new member must heartbeat (join) in time; an existing member parked in
        JoinGroup or SyncGroup counts as alive (Kafka's ``hasSatisfiedHeartbeat``).
        """
        if self.is_new:
            return self.heartbeat_satisfied
        if self.is_awaiting_join or self.is_awaiting_sync:
            return True
        return self.heartbeat_satisfied

    def matches(self, protocols: Sequence[tuple[str, bytes]]) -> bool:
        """Whether ``protocols`` equal the member's, names, metadata and order."""
        return list(protocols) == list(self.supported_protocols)

    def vote(self, candidates: set[str]) -> str:
        """Return the member's most preferred protocol among ``candidates``.

        Raises:
            ValueError: it supports none of them.
        """
        for name, _ in self.supported_protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")
