"""The group coordinator of Kafka's classic group protocol (Kafka's ``GroupCoordinator``).

Members find the coordinator (FindCoordinator), join (JoinGroup: a rebalance parks
every JoinGroup until all known members have joined or the rebalance timeout
passes), receive the generation, member id, leader and selected protocol, then
SyncGroup: the leader sends the assignment computed by its client-side assignor,
which the coordinator stores in ``__consumer_offsets`` and relays to every member.
Members then Heartbeat within ``session.timeout.ms``, commit offsets and leave
(LeaveGroup). The broker never reads an assignment, so range, round-robin, sticky
and cooperative-sticky assignors all work; it only picks a protocol every member
supports (each member votes for its favourite).

Kafka's purgatories become timers on the broker's event loop:

- heartbeat: one per member, ``session.timeout.ms`` (5 min for a member that joined
  but has not yet received its id; ``session.timeout.ms`` for a member id handed out
  with MEMBER_ID_REQUIRED); on expiry a member not alive is removed;
- join: one per rebalancing group, ``max(rebalance.timeout.ms)`` of its members, or
  ``group.initial.rebalance.delay.ms`` steps (at most the rebalance timeout) for an
  Empty group's first rebalance; it completes early once every member rejoined;
- sync: one per generation, the rebalance timeout: members that never sent SyncGroup
  are removed and the group rebalances.

Static members (``group.instance.id``, KIP-345) keep their place across restarts: a
rejoin with a new member id replaces the old one without a rebalance when the group
is Stable and the protocol stays, and they are not removed for failing to rejoin.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kpo_broker.coordinator.group.errors import Errors
from kpo_broker.coordinator.group.group import GroupMetadata
from kpo_broker.coordinator.group.group_metrics import (
    GroupCoordinatorCounters,
    group_metadata_gauges,
)
from kpo_broker.coordinator.group.member import (
    UNKNOWN_MEMBER_ID,
    JoinCallback,
    JoinResult,
    MemberMetadata,
    SyncCallback,
    SyncResult,
)
from kpo_broker.coordinator.group.metadata_manager import FetchedOffset, GroupMetadataManager
from kpo_broker.coordinator.group.records import GROUP_METADATA_TOPIC_NAME, OffsetAndMetadata
from kpo_broker.coordinator.group.states import GroupState
from kpo_kafka.topic_partition import TopicPartition

if TYPE_CHECKING:
    from kpo_broker.config import BrokerConfig

log = logging.getLogger(__name__)

#: How long a new member may take to receive its JoinGroup answer, ms (Kafka: 5 min).
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000

_S = GroupState


@dataclass(frozen=True)
class GroupConfig:
    """Group limits (Kafka's ``GroupConfig``).

    Attributes:
        min_session_timeout_ms: ``group.min.session.timeout.ms``.
        max_session_timeout_ms: ``group.max.session.timeout.ms``.
        max_size: ``group.max.size``.
        initial_rebalance_delay_ms: ``group.initial.rebalance.delay.ms``.
    """

    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    max_size: int = 2**31 - 1
    initial_rebalance_delay_ms: int = 3000

    @classmethod
    def from_broker_config(cls, config: BrokerConfig) -> GroupConfig:
        """Read the limits from a :class:`~kpo_broker.config.BrokerConfig`."""
        return cls(
            min_session_timeout_ms=config.group_min_session_timeout_ms,
            max_session_timeout_ms=config.group_max_session_timeout_ms,
            max_size=config.group_max_size,
            initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
        )


@dataclass(frozen=True)
class MemberIdentity:
    """A member leaving in a LeaveGroup request (v3+ batches several)."""

    member_id: str
    group_instance_id: str | None = None
    reason: str | None = None


@dataclass(frozen=True)
class LeaveResult:
    """LeaveGroup's answer: a top-level error and one error per leaving member."""

    error: int
    members: tuple[tuple[MemberIdentity, int], ...] = ()


@dataclass(frozen=True)
class MemberSummary:
    """One member as DescribeGroups shows it."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupSummary:
    """DescribeGroups' view of a group (Kafka's ``GroupSummary``)."""

    state: str
    protocol_type: str
    protocol: str
    members: tuple[MemberSummary, ...] = ()


@dataclass(frozen=True)
class GroupOverview:
    """ListGroups' view of a group."""

    group_id: str
    protocol_type: str
    state: str
    group_type: str = "classic"


#: The answer about a group that does not exist (Kafka's ``DeadGroup``).
DEAD_GROUP = GroupSummary(_S.DEAD.value, "", "")
#: The answer when the group's state is not available (Kafka's ``EmptyGroup``).
NO_GROUP = GroupSummary("", "", "")


@dataclass
class _JoinTimer:
    handle: asyncio.TimerHandle | None
    initial: bool
    configured_delay_ms: int = 0
    delay_ms: int = 0
    remaining_ms: int = 0


@dataclass
class _SyncTimer:
    handle: asyncio.TimerHandle | None
    generation: int


@dataclass
class _Timers:
    heartbeats: dict[tuple[str, str], asyncio.TimerHandle] = field(default_factory=dict)
    joins: dict[str, _JoinTimer] = field(default_factory=dict)
    syncs: dict[str, _SyncTimer] = field(default_factory=dict)


class GroupCoordinator:
    """Answers the group APIs for the groups whose offsets partition this broker leads.

    Args:
        broker_id: this broker's id.
        config: the group limits.
        manager: the group cache and its persistence.

    Attributes:
        counters: Kafka's ``group-coordinator-metrics`` counts (see :meth:`metrics`).
    """

    def __init__(self, broker_id: int, config: GroupConfig, manager: GroupMetadataManager) -> None:
        self.broker_id = broker_id
        self.config = config
        self.manager = manager
        self.counters = GroupCoordinatorCounters()
        self.active = False
        self._timers = _Timers()
        self._tasks: set[asyncio.Task[None]] = set()
        self._expiry_task: asyncio.Task[None] | None = None

    def metrics(self) -> tuple[dict[str, int], dict[str, int]]:
        """Return Kafka's ``GroupMetadataManager`` gauges and ``group-coordinator-metrics`` counts.

        See :mod:`kpo_broker.coordinator.group.group_metrics` for the names.
        """
        groups = list(self.manager.groups.values())  # a copy: the loop changes the dict
        return group_metadata_gauges(groups), self.counters.counts()

    # ------------------------------------------------------------ lifecycle
    def startup(self, enable_expiration: bool = True) -> None:
        """Start answering; expire offsets every ``offsets.retention.check.interval.ms``."""
        self.active = True
        if enable_expiration:
            self._expiry_task = asyncio.get_running_loop().create_task(
                self._expire_offsets_forever(), name="offsets-expiry"
            )

    async def _expire_offsets_forever(self) -> None:
        interval = self.manager.config.retention_check_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                self.counters.offset_expirations += self.manager.cleanup_expired_offsets()
            except Exception:
                log.exception("offset expiration failed")

    async def shutdown(self) -> None:
        """Stop answering, cancel every timer and background write."""
        self.active = False
        if self._expiry_task is not None:
            self._expiry_task.cancel()
        for handle in self._timers.heartbeats.values():
            handle.cancel()
        for join in self._timers.joins.values():
            if join.handle is not None:
                join.handle.cancel()
        for sync in self._timers.syncs.values():
            if sync.handle is not None:
                sync.handle.cancel()
        self._timers = _Timers()
        for task in list(self._tasks):
            task.cancel()
        await self.manager.shutdown()

    def _spawn(self, coro: Awaitable[None], name: str) -> None:
        task = asyncio.ensure_future(coro)
        task.set_name(name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def partition_for(self, group_id: str) -> int:
        """Return the ``__consumer_offsets`` partition of ``group_id``."""
        return self.manager.partition_for(group_id)

    # ------------------------------------------------------------ validation
    def validate_group_status(
        self, group_id: str | None, allow_empty_id: bool = False
    ) -> int | None:
        """Kafka's ``validateGroupStatus``: the error for a request about ``group_id``, or None.

        Args:
            group_id: the request's group id.
            allow_empty_id: "" is a valid id (OffsetCommit, OffsetFetch, DescribeGroups,
                DeleteGroups, for compatibility); other APIs need a non-empty id.
        """
        if group_id is None or (not group_id and not allow_empty_id):
            return Errors.INVALID_GROUP_ID
        if not self.active:
            return Errors.COORDINATOR_NOT_AVAILABLE
        if self.manager.is_group_loading(group_id):
            return Errors.COORDINATOR_LOAD_IN_PROGRESS
        if not self.manager.is_group_local(group_id):
            return Errors.NOT_COORDINATOR
        return None

    @staticmethod
    def _validate_current_member(
        group: GroupMetadata, member_id: str, group_instance_id: str | None, operation: str
    ) -> int | None:
        if group_instance_id is not None:
            current = group.static_members.get(group_instance_id)
            if current is None:
                return Errors.UNKNOWN_MEMBER_ID
            if current != member_id:
                log.info(
                    "group %s: %s of member %s fenced by static member %s (%s)",
                    group.group_id,
                    operation,
                    member_id,
                    current,
                    group_instance_id,
                )
                return Errors.FENCED_INSTANCE_ID
            return None
        if not group.has(member_id):
            return Errors.UNKNOWN_MEMBER_ID
        return None

    # ------------------------------------------------------------ JoinGroup
    def _accept_joining_member(self, group: GroupMetadata, member_id: str) -> bool:
        if group.state in (_S.EMPTY, _S.DEAD):
            return True
        if group.is_state(_S.PREPARING_REBALANCE):
            return (
                group.has(member_id) and group.get(member_id).is_awaiting_join
            ) or group.num_members_awaiting_join < self.config.max_size
        return group.has(member_id) or group.size < self.config.max_size

    def handle_join_group(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        require_known_member_id: bool,
        support_skipping_assignment: bool,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: Sequence[tuple[str, bytes]],
        callback: JoinCallback,
        reason: str | None = None,
    ) -> None:
        """Handle a JoinGroup; ``callback`` is called once with the answer (maybe later)."""
        error = self.validate_group_status(group_id)
        if error is not None:
            callback(JoinResult(member_id, error=error))
            return
        if not (
            self.config.min_session_timeout_ms
            <= session_timeout_ms
            <= self.config.max_session_timeout_ms
        ):
            callback(JoinResult(member_id, error=Errors.INVALID_SESSION_TIMEOUT))
            return
        is_unknown = member_id == UNKNOWN_MEMBER_ID
        group = self.manager.get_or_create_group(group_id, is_unknown)
        if group is None:
            callback(JoinResult(member_id, error=Errors.UNKNOWN_MEMBER_ID))
            return
        why = reason or "not provided"
        protocol_list = list(protocols)
        if not self._accept_joining_member(group, member_id):
            group.remove(member_id)
            self._cancel_heartbeat(group, member_id)
            callback(JoinResult(UNKNOWN_MEMBER_ID, error=Errors.GROUP_MAX_SIZE_REACHED))
        elif is_unknown:
            self._new_member_join(
                group,
                group_instance_id,
                require_known_member_id,
                support_skipping_assignment,
                client_id,
                client_host,
                rebalance_timeout_ms,
                session_timeout_ms,
                protocol_type,
                protocol_list,
                callback,
                why,
            )
        else:
            self._current_member_join(
                group,
                member_id,
                group_instance_id,
                client_id,
                client_host,
                rebalance_timeout_ms,
                session_timeout_ms,
                protocol_type,
                protocol_list,
                callback,
                why,
            )
        if group.is_state(_S.PREPARING_REBALANCE):
            self._check_join(group)

    def _new_member_join(
        self,
        group: GroupMetadata,
        group_instance_id: str | None,
        require_known_member_id: bool,
        support_skipping_assignment: bool,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        callback: JoinCallback,
        reason: str,
    ) -> None:
        if group.is_state(_S.DEAD):
            callback(JoinResult(UNKNOWN_MEMBER_ID, error=Errors.COORDINATOR_NOT_AVAILABLE))
            return
        if not group.supports_protocols(protocol_type, {name for name, _ in protocols}):
            callback(JoinResult(UNKNOWN_MEMBER_ID, error=Errors.INCONSISTENT_GROUP_PROTOCOL))
            return
        new_member_id = group.generate_member_id(client_id, group_instance_id)
        if group_instance_id is not None:
            old_member_id = group.static_members.get(group_instance_id)
            if old_member_id is not None:
                log.info(
                    "group %s: static member %s rejoins in %s; %s replaces %s",
                    group.group_id,
                    group_instance_id,
                    group.state.value,
                    new_member_id,
                    old_member_id,
                )
                self._update_static_member_and_rebalance(
                    group,
                    old_member_id,
                    new_member_id,
                    group_instance_id,
                    protocols,
                    rebalance_timeout_ms,
                    session_timeout_ms,
                    callback,
                    reason,
                    support_skipping_assignment,
                )
                return
            self._add_member_and_rebalance(
                rebalance_timeout_ms,
                session_timeout_ms,
                new_member_id,
                group_instance_id,
                client_id,
                client_host,
                protocol_type,
                protocols,
                group,
                callback,
                reason,
            )
        elif require_known_member_id:
            log.info(
                "group %s: new member %s must rejoin with its id (KIP-394)",
                group.group_id,
                new_member_id,
            )
            group.add_pending_member(new_member_id)
            self._schedule_heartbeat(group, new_member_id, session_timeout_ms, pending=True)
            callback(JoinResult(new_member_id, error=Errors.MEMBER_ID_REQUIRED))
        else:
            self._add_member_and_rebalance(
                rebalance_timeout_ms,
                session_timeout_ms,
                new_member_id,
                None,
                client_id,
                client_host,
                protocol_type,
                protocols,
                group,
                callback,
                reason,
            )

    def _current_member_join(
        self,
        group: GroupMetadata,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        callback: JoinCallback,
        reason: str,
    ) -> None:
        if group.is_state(_S.DEAD):
            callback(JoinResult(member_id, error=Errors.COORDINATOR_NOT_AVAILABLE))
            return
        if not group.supports_protocols(protocol_type, {name for name, _ in protocols}):
            callback(JoinResult(member_id, error=Errors.INCONSISTENT_GROUP_PROTOCOL))
            return
        if group.is_pending_member(member_id):
            if group_instance_id is not None:
                callback(JoinResult(member_id, error=Errors.INVALID_REQUEST))
                return
            self._add_member_and_rebalance(
                rebalance_timeout_ms,
                session_timeout_ms,
                member_id,
                None,
                client_id,
                client_host,
                protocol_type,
                protocols,
                group,
                callback,
                reason,
            )
            return
        error = self._validate_current_member(group, member_id, group_instance_id, "join-group")
        if error is not None:
            callback(JoinResult(member_id, error=error))
            return
        member = group.get(member_id)
        state = group.state
        if state is _S.PREPARING_REBALANCE:
            self._update_member_and_rebalance(
                group,
                member,
                protocols,
                rebalance_timeout_ms,
                session_timeout_ms,
                callback,
                f"member {member_id} joining during PreparingRebalance; client reason: {reason}",
            )
        elif state is _S.COMPLETING_REBALANCE:
            if member.matches(protocols):
                callback(self._join_result(group, member_id))
            else:
                self._update_member_and_rebalance(
                    group,
                    member,
                    protocols,
                    rebalance_timeout_ms,
                    session_timeout_ms,
                    callback,
                    f"member {member_id} changed its metadata; client reason: {reason}",
                )
        elif state is _S.STABLE:
            if group.is_leader(member_id):
                self._update_member_and_rebalance(
                    group,
                    member,
                    protocols,
                    rebalance_timeout_ms,
                    session_timeout_ms,
                    callback,
                    f"leader {member_id} rejoining a Stable group; client reason: {reason}",
                )
            elif not member.matches(protocols):
                self._update_member_and_rebalance(
                    group,
                    member,
                    protocols,
                    rebalance_timeout_ms,
                    session_timeout_ms,
                    callback,
                    f"member {member_id} changed its metadata; client reason: {reason}",
                )
            else:
                callback(self._join_result(group, member_id, with_members=False))
        else:
            log.warning(
                "group %s: member %s rejoins in unexpected state %s",
                group.group_id,
                member_id,
                state.value,
            )
            callback(JoinResult(member_id, error=Errors.UNKNOWN_MEMBER_ID))

    @staticmethod
    def _join_result(
        group: GroupMetadata,
        member_id: str,
        with_members: bool = True,
        leader_id: str | None = None,
        skip_assignment: bool = False,
    ) -> JoinResult:
        members = (
            group.current_member_metadata() if with_members and group.is_leader(member_id) else ()
        )
        return JoinResult(
            member_id=member_id,
            error=Errors.NONE,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader_id=(leader_id if leader_id is not None else group.leader_id) or "",
            members=members,
            skip_assignment=skip_assignment,
        )

    def _add_member_and_rebalance(
        self,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        group: GroupMetadata,
        callback: JoinCallback,
        reason: str,
    ) -> None:
        member = MemberMetadata(
            member_id=member_id,
            group_instance_id=group_instance_id,
            client_id=client_id,
            client_host=client_host,
            rebalance_timeout_ms=rebalance_timeout_ms,
            session_timeout_ms=session_timeout_ms,
            protocol_type=protocol_type,
            supported_protocols=list(protocols),
            is_new=True,
        )
        if group.is_state(_S.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member, callback)
        # A new member cannot heartbeat before it has its id; its JoinGroup may be
        # retried by a client that gave up, so it expires if it does not come back.
        self._complete_and_schedule_next_expiration(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(
            group,
            f"adding new member {member_id} with group instance id {group_instance_id}; "
            f"client reason: {reason}",
        )

    def _update_static_member_and_rebalance(
        self,
        group: GroupMetadata,
        old_member_id: str,
        new_member_id: str,
        group_instance_id: str,
        protocols: list[tuple[str, bytes]],
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        callback: JoinCallback,
        reason: str,
        support_skipping_assignment: bool,
    ) -> None:
        current_leader = group.leader_id
        self._cancel_heartbeat(group, old_member_id)
        member = group.replace_static_member(group_instance_id, old_member_id, new_member_id)
        self._complete_and_schedule_next_heartbeat(group, member)
        old_protocols = list(member.supported_protocols)
        old_rebalance_timeout = member.rebalance_timeout_ms
        old_session_timeout = member.session_timeout_ms
        group.update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms, callback)
        if group.is_state(_S.STABLE):
            if group.protocol_name == group.select_protocol():
                assignment = {m.member_id: m.assignment for m in group.members.values()}

                async def store_and_answer() -> None:
                    error = await self.manager.store_group(group, assignment)
                    if error != Errors.NONE:
                        log.warning(
                            "group %s: static member %s not persisted: error %d",
                            group.group_id,
                            group_instance_id,
                            error,
                        )
                        group.update_member(
                            member, old_protocols, old_rebalance_timeout, old_session_timeout, None
                        )
                        old = group.replace_static_member(
                            group_instance_id, new_member_id, old_member_id
                        )
                        self._complete_and_schedule_next_heartbeat(group, old)
                        callback(
                            JoinResult(
                                UNKNOWN_MEMBER_ID,
                                error=error,
                                generation_id=group.generation_id,
                                protocol_type=group.protocol_type,
                                protocol_name=group.protocol_name,
                                leader_id=current_leader or "",
                            )
                        )
                    elif support_skipping_assignment:
                        is_leader = group.is_leader(new_member_id)
                        group.maybe_invoke_join_callback(
                            member,
                            self._join_result(
                                group,
                                new_member_id,
                                with_members=is_leader,
                                skip_assignment=is_leader,
                            ),
                        )
                    else:
                        group.maybe_invoke_join_callback(
                            member,
                            self._join_result(
                                group, new_member_id, with_members=False, leader_id=current_leader
                            ),
                        )

                self._spawn(store_and_answer(), f"static-join-{group.group_id}")
            else:
                self._maybe_prepare_rebalance(
                    group,
                    f"static member {group_instance_id} rejoined with another protocol; "
                    f"client reason: {reason}",
                )
        elif group.is_state(_S.COMPLETING_REBALANCE):
            self._prepare_rebalance(
                group,
                f"static member {group_instance_id} rejoined with a new member id; "
                f"client reason: {reason}",
            )

    def _update_member_and_rebalance(
        self,
        group: GroupMetadata,
        member: MemberMetadata,
        protocols: list[tuple[str, bytes]],
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        callback: JoinCallback,
        reason: str,
    ) -> None:
        group.update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms, callback)
        self._maybe_prepare_rebalance(group, reason)

    def _maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.can_rebalance:
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.is_state(_S.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, Errors.REBALANCE_IN_PROGRESS)
        self._remove_sync_expiration(group)
        was_empty = group.is_state(_S.EMPTY)
        group.transition_to(_S.PREPARING_REBALANCE)
        log.info(
            "group %s: preparing to rebalance from generation %d (%s-%d); reason: %s",
            group.group_id,
            group.generation_id,
            GROUP_METADATA_TOPIC_NAME,
            self.partition_for(group.group_id),
            reason,
        )
        self._cancel_join(group)
        if was_empty:
            delay = self.config.initial_rebalance_delay_ms
            self._schedule_join(
                group,
                _JoinTimer(
                    None,
                    initial=True,
                    configured_delay_ms=delay,
                    delay_ms=delay,
                    remaining_ms=max(group.rebalance_timeout_ms - delay, 0),
                ),
            )
        else:
            self._schedule_join(
                group, _JoinTimer(None, initial=False, delay_ms=group.rebalance_timeout_ms)
            )
            self._check_join(group)

    # ------------------------------------------------------------ join timer
    def _schedule_join(self, group: GroupMetadata, timer: _JoinTimer) -> None:
        loop = asyncio.get_running_loop()
        timer.handle = loop.call_later(timer.delay_ms / 1000, self._on_join_timer, group, timer)
        self._timers.joins[group.group_id] = timer

    def _cancel_join(self, group: GroupMetadata) -> None:
        timer = self._timers.joins.pop(group.group_id, None)
        if timer is not None and timer.handle is not None:
            timer.handle.cancel()

    def _check_join(self, group: GroupMetadata) -> None:
        """Complete the rebalance's join phase early when every member has joined."""
        timer = self._timers.joins.get(group.group_id)
        if timer is None or timer.initial or not group.has_all_members_joined:
            return
        self._cancel_join(group)
        self._on_complete_join(group)

    def _on_join_timer(self, group: GroupMetadata, timer: _JoinTimer) -> None:
        if self._timers.joins.get(group.group_id) is not timer:
            return
        del self._timers.joins[group.group_id]
        try:
            if timer.initial and group.new_member_added and timer.remaining_ms != 0:
                group.new_member_added = False
                delay = min(timer.configured_delay_ms, timer.remaining_ms)
                remaining = max(timer.remaining_ms - timer.delay_ms, 0)
                self._schedule_join(
                    group,
                    _JoinTimer(
                        None,
                        initial=True,
                        configured_delay_ms=timer.configured_delay_ms,
                        delay_ms=delay,
                        remaining_ms=remaining,
                    ),
                )
                return
            self._on_complete_join(group)
        except Exception:
            log.exception("group %s: completing the join phase failed", group.group_id)

    def _on_complete_join(self, group: GroupMetadata) -> None:
        for failed in [m for m in group.not_yet_rejoined_members() if not m.is_static]:
            log.info(
                "group %s: removing member %s, which did not rejoin",
                group.group_id,
                failed.member_id,
            )
            group.remove(failed.member_id)
            self._cancel_heartbeat(group, failed.member_id)
        if group.is_state(_S.DEAD):
            log.info("group %s is dead; skipping the rebalance", group.group_id)
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            log.error("group %s: no member rejoined; waiting again", group.group_id)
            self._schedule_join(
                group, _JoinTimer(None, initial=False, delay_ms=group.rebalance_timeout_ms)
            )
            return
        group.init_next_generation()
        if group.is_state(_S.EMPTY):
            log.info(
                "group %s with generation %d is now empty", group.group_id, group.generation_id
            )

            async def store_empty() -> None:
                error = await self.manager.store_group(group, {})
                if error != Errors.NONE:
                    log.warning(
                        "group %s: empty metadata not stored: error %d", group.group_id, error
                    )

            self._spawn(store_empty(), f"store-empty-{group.group_id}")
            return
        log.info(
            "group %s: generation %d with %d members (%s-%d)",
            group.group_id,
            group.generation_id,
            group.size,
            GROUP_METADATA_TOPIC_NAME,
            self.partition_for(group.group_id),
        )
        for member in list(group.members.values()):
            group.maybe_invoke_join_callback(member, self._join_result(group, member.member_id))
            self._complete_and_schedule_next_heartbeat(group, member)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        self._schedule_pending_sync(group)

    # ------------------------------------------------------------ sync timer
    def _schedule_pending_sync(self, group: GroupMetadata) -> None:
        self._remove_sync_timer(group)
        timer = _SyncTimer(None, group.generation_id)
        timer.handle = asyncio.get_running_loop().call_later(
            group.rebalance_timeout_ms / 1000, self._on_sync_timer, group, timer
        )
        self._timers.syncs[group.group_id] = timer

    def _remove_sync_timer(self, group: GroupMetadata) -> None:
        timer = self._timers.syncs.pop(group.group_id, None)
        if timer is not None and timer.handle is not None:
            timer.handle.cancel()

    def _maybe_complete_sync_expiration(self, group: GroupMetadata) -> None:
        timer = self._timers.syncs.get(group.group_id)
        if timer is None:
            return
        if (
            timer.generation != group.generation_id
            or group.state in (_S.DEAD, _S.EMPTY, _S.PREPARING_REBALANCE)
            or not group.pending_sync_members
        ):
            self._remove_sync_timer(group)

    def _remove_sync_expiration(self, group: GroupMetadata) -> None:
        group.pending_sync_members.clear()
        self._maybe_complete_sync_expiration(group)

    def _remove_pending_sync_member(self, group: GroupMetadata, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        self._maybe_complete_sync_expiration(group)

    def _on_sync_timer(self, group: GroupMetadata, timer: _SyncTimer) -> None:
        if self._timers.syncs.get(group.group_id) is not timer:
            return
        del self._timers.syncs[group.group_id]
        if timer.generation != group.generation_id or group.state not in (
            _S.COMPLETING_REBALANCE,
            _S.STABLE,
        ):
            return
        if not group.pending_sync_members:
            return
        try:
            self._expire_pending_sync(group)
        except Exception:
            log.exception("group %s: sync expiration failed", group.group_id)

    def _expire_pending_sync(self, group: GroupMetadata) -> None:
        missing = set(group.pending_sync_members)
        for member_id in missing:
            group.remove(member_id)
            self._cancel_heartbeat(group, member_id)
        log.info(
            "group %s: removed members that never sent SyncGroup: %s",
            group.group_id,
            sorted(missing),
        )
        self._prepare_rebalance(group, f"removing {sorted(missing)} on pending sync expiration")

    # ------------------------------------------------------------ heartbeat timers
    def _complete_and_schedule_next_heartbeat(
        self, group: GroupMetadata, member: MemberMetadata
    ) -> None:
        self._complete_and_schedule_next_expiration(group, member, member.session_timeout_ms)

    def _complete_and_schedule_next_expiration(
        self, group: GroupMetadata, member: MemberMetadata, timeout_ms: int
    ) -> None:
        self._cancel_heartbeat(group, member.member_id)
        member.heartbeat_satisfied = False
        self._schedule_heartbeat(group, member.member_id, timeout_ms, pending=False)

    def _schedule_heartbeat(
        self, group: GroupMetadata, member_id: str, timeout_ms: int, pending: bool
    ) -> None:
        key = (group.group_id, member_id)
        old = self._timers.heartbeats.pop(key, None)
        if old is not None:
            old.cancel()
        handle = asyncio.get_running_loop().call_later(
            timeout_ms / 1000, self._on_heartbeat_timer, group, member_id, pending, key
        )
        self._timers.heartbeats[key] = handle

    def _cancel_heartbeat(self, group: GroupMetadata, member_id: str) -> None:
        handle = self._timers.heartbeats.pop((group.group_id, member_id), None)
        if handle is not None:
            handle.cancel()

    def _on_heartbeat_timer(
        self, group: GroupMetadata, member_id: str, pending: bool, key: tuple[str, str]
    ) -> None:
        self._timers.heartbeats.pop(key, None)
        try:
            self._on_expire_heartbeat(group, member_id, pending)
        except Exception:
            log.exception("group %s: heartbeat expiration of %s failed", group.group_id, member_id)

    def _on_expire_heartbeat(self, group: GroupMetadata, member_id: str, pending: bool) -> None:
        if group.is_state(_S.DEAD):
            return
        if pending:
            if group.is_pending_member(member_id):
                log.info("group %s: pending member %s expired", group.group_id, member_id)
                self._remove_pending_member_and_update_group(group, member_id)
            return
        member = group.members.get(member_id)
        if member is None:
            return
        if not member.has_satisfied_heartbeat():
            log.info(
                "group %s: member %s failed (session timeout); removing it",
                group.group_id,
                member_id,
            )
            self._remove_member_and_update_group(
                group, member, f"removing member {member_id} on heartbeat expiration"
            )
        elif not member.is_new:
            # Parked in JoinGroup or SyncGroup: alive; the rebalance reschedules it.
            pass

    def _remove_member_and_update_group(
        self, group: GroupMetadata, member: MemberMetadata, reason: str
    ) -> None:
        group.maybe_invoke_join_callback(
            member, JoinResult(UNKNOWN_MEMBER_ID, error=Errors.UNKNOWN_MEMBER_ID)
        )
        group.remove(member.member_id)
        self._cancel_heartbeat(group, member.member_id)
        if group.state in (_S.STABLE, _S.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, reason)
        elif group.is_state(_S.PREPARING_REBALANCE):
            self._check_join(group)

    def _remove_pending_member_and_update_group(self, group: GroupMetadata, member_id: str) -> None:
        group.remove(member_id)
        self._cancel_heartbeat(group, member_id)
        if group.is_state(_S.PREPARING_REBALANCE):
            self._check_join(group)

    # ------------------------------------------------------------ SyncGroup
    def handle_sync_group(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        protocol_type: str | None,
        protocol_name: str | None,
        group_instance_id: str | None,
        assignment: dict[str, bytes],
        callback: SyncCallback,
    ) -> None:
        """Handle a SyncGroup; ``callback`` is called once with the answer (maybe later)."""
        error = self.validate_group_status(group_id)
        if error == Errors.COORDINATOR_LOAD_IN_PROGRESS:
            # The rebalance's state was lost with the old coordinator: rejoin.
            callback(SyncResult(error=Errors.REBALANCE_IN_PROGRESS))
            return
        if error is not None:
            callback(SyncResult(error=error))
            return
        group = self.manager.get_group(group_id)
        if group is None:
            callback(SyncResult(error=Errors.UNKNOWN_MEMBER_ID))
            return
        if group.is_state(_S.DEAD):
            callback(SyncResult(error=Errors.COORDINATOR_NOT_AVAILABLE))
            return
        error = self._validate_current_member(group, member_id, group_instance_id, "sync-group")
        if error is None:
            if generation_id != group.generation_id:
                error = Errors.ILLEGAL_GENERATION
            elif (protocol_type is not None and group.protocol_type != protocol_type) or (
                protocol_name is not None and group.protocol_name != protocol_name
            ):
                error = Errors.INCONSISTENT_GROUP_PROTOCOL
        if error is not None:
            callback(SyncResult(error=error))
            return
        state = group.state
        if state is _S.EMPTY:
            callback(SyncResult(error=Errors.UNKNOWN_MEMBER_ID))
        elif state is _S.PREPARING_REBALANCE:
            callback(SyncResult(error=Errors.REBALANCE_IN_PROGRESS))
        elif state is _S.COMPLETING_REBALANCE:
            group.get(member_id).awaiting_sync = callback
            self._remove_pending_sync_member(group, member_id)
            if group.is_leader(member_id):
                log.info(
                    "group %s: assignment from leader %s for generation %d (%d members, %d static)",
                    group.group_id,
                    member_id,
                    group.generation_id,
                    group.size,
                    len(group.static_members),
                )
                full = {m: assignment.get(m, b"") for m in group.members}
                missing = [m for m in group.members if m not in assignment]
                if missing:
                    log.warning(
                        "group %s: empty assignment for members %s in generation %d",
                        group.group_id,
                        missing,
                        group.generation_id,
                    )
                self._spawn(
                    self._store_assignment(group, generation_id, member_id, full),
                    f"store-group-{group.group_id}",
                )
        elif state is _S.STABLE:
            self._remove_pending_sync_member(group, member_id)
            member = group.get(member_id)
            callback(
                SyncResult(Errors.NONE, group.protocol_type, group.protocol_name, member.assignment)
            )
            self._complete_and_schedule_next_heartbeat(group, member)

    async def _store_assignment(
        self, group: GroupMetadata, generation_id: int, member_id: str, assignment: dict[str, bytes]
    ) -> None:
        error = await self.manager.store_group(group, assignment)
        if not (group.is_state(_S.COMPLETING_REBALANCE) and group.generation_id == generation_id):
            return
        if error != Errors.NONE:
            self._reset_and_propagate_assignment_error(group, error)
            self._maybe_prepare_rebalance(
                group, f"error {error} storing the assignment of member {member_id}"
            )
        else:
            for member in group.members.values():
                member.assignment = assignment.get(member.member_id, b"")
            self._propagate_assignment(group, Errors.NONE)
            group.transition_to(_S.STABLE)
            self.counters.completed_rebalances += 1

    def _reset_and_propagate_assignment_error(self, group: GroupMetadata, error: int) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: GroupMetadata, error: int) -> None:
        ok = error == Errors.NONE
        for member in list(group.members.values()):
            result = SyncResult(
                error,
                group.protocol_type if ok else None,
                group.protocol_name if ok else None,
                member.assignment,
            )
            if group.maybe_invoke_sync_callback(member, result):
                self._complete_and_schedule_next_heartbeat(group, member)

    # ------------------------------------------------------------ Heartbeat / LeaveGroup
    def handle_heartbeat(
        self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int
    ) -> int:
        """Handle a Heartbeat; return its error code."""
        error = self.validate_group_status(group_id)
        if error == Errors.COORDINATOR_LOAD_IN_PROGRESS:
            return Errors.NONE  # the group is loading: answer blindly, as Kafka does
        if error is not None:
            return error
        group = self.manager.get_group(group_id)
        if group is None:
            return Errors.UNKNOWN_MEMBER_ID
        if group.is_state(_S.DEAD):
            return Errors.COORDINATOR_NOT_AVAILABLE
        error = self._validate_current_member(group, member_id, group_instance_id, "heartbeat")
        if error is not None:
            return error
        if generation_id != group.generation_id:
            return Errors.ILLEGAL_GENERATION
        if group.is_state(_S.EMPTY):
            return Errors.UNKNOWN_MEMBER_ID
        self._complete_and_schedule_next_heartbeat(group, group.get(member_id))
        if group.is_state(_S.PREPARING_REBALANCE):
            return Errors.REBALANCE_IN_PROGRESS
        return Errors.NONE

    def handle_leave_group(self, group_id: str, leaving: Sequence[MemberIdentity]) -> LeaveResult:
        """Handle a LeaveGroup of one or more members (by member id or group instance id)."""
        error = self.validate_group_status(group_id)
        if error is not None:
            return LeaveResult(error)
        group = self.manager.get_group(group_id)
        if group is None:
            return LeaveResult(
                Errors.NONE, tuple((m, int(Errors.UNKNOWN_MEMBER_ID)) for m in leaving)
            )
        if group.is_state(_S.DEAD):
            return LeaveResult(Errors.COORDINATOR_NOT_AVAILABLE)
        results: list[tuple[MemberIdentity, int]] = []
        for leaver in leaving:
            if leaver.member_id == UNKNOWN_MEMBER_ID:
                current = (
                    group.static_members.get(leaver.group_instance_id)
                    if leaver.group_instance_id is not None
                    else None
                )
                if current is None:
                    results.append((leaver, Errors.UNKNOWN_MEMBER_ID))
                else:
                    self._remove_current_member(group, current, leaver.reason)
                    results.append((leaver, Errors.NONE))
            elif group.is_pending_member(leaver.member_id):
                self._remove_pending_member_and_update_group(group, leaver.member_id)
                log.info("group %s: pending member %s left", group_id, leaver.member_id)
                results.append((leaver, Errors.NONE))
            else:
                err = self._validate_current_member(
                    group, leaver.member_id, leaver.group_instance_id, "leave-group"
                )
                if err is None:
                    self._remove_current_member(group, leaver.member_id, leaver.reason)
                    err = Errors.NONE
                results.append((leaver, err))
        return LeaveResult(Errors.NONE, tuple(results))

    def _remove_current_member(
        self, group: GroupMetadata, member_id: str, reason: str | None
    ) -> None:
        member = group.get(member_id)
        why = reason or "not provided"
        self._remove_member_and_update_group(
            group, member, f"removing member {member_id} on LeaveGroup; client reason: {why}"
        )
        log.info(
            "group %s: member %s left (LeaveGroup); client reason: %s",
            group.group_id,
            member_id,
            why,
        )

    # ------------------------------------------------------------ offsets
    async def handle_commit_offsets(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: dict[TopicPartition, OffsetAndMetadata],
    ) -> dict[TopicPartition, int]:
        """Handle an OffsetCommit; return each partition's error once the commit settled."""
        error = self.validate_group_status(group_id, allow_empty_id=True)
        if error is not None:
            return {tp: error for tp in offsets}
        group = self.manager.get_group(group_id)
        if group is None:
            if generation_id >= 0:
                return {tp: int(Errors.ILLEGAL_GENERATION) for tp in offsets}
            # A consumer without group management (or an admin tool) stores offsets only.
            group = self.manager.add_group(GroupMetadata(group_id))
        error = self._validate_offset_commit(group, generation_id, member_id, group_instance_id)
        if error is not None:
            return {tp: error for tp in offsets}
        if group.state in (_S.STABLE, _S.PREPARING_REBALANCE) and group.has(member_id):
            self._complete_and_schedule_next_heartbeat(group, group.get(member_id))
        elif group.is_state(_S.COMPLETING_REBALANCE):
            return {tp: int(Errors.REBALANCE_IN_PROGRESS) for tp in offsets}
        return await self.manager.store_offsets(group, offsets)

    def _validate_offset_commit(
        self,
        group: GroupMetadata,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
    ) -> int | None:
        if group.is_state(_S.DEAD):
            return Errors.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and group.is_state(_S.EMPTY):
            return None
        if generation_id >= 0 or member_id != UNKNOWN_MEMBER_ID or group_instance_id is not None:
            error = self._validate_current_member(
                group, member_id, group_instance_id, "offset-commit"
            )
            if error is not None:
                return error
            if generation_id != group.generation_id:
                return Errors.ILLEGAL_GENERATION
            return None
        if not group.is_state(_S.EMPTY):
            return Errors.UNKNOWN_MEMBER_ID
        return None

    def handle_fetch_offsets(
        self, group_id: str, require_stable: bool, partitions: list[TopicPartition] | None
    ) -> tuple[int, dict[TopicPartition, FetchedOffset]]:
        """Handle one group of an OffsetFetch; None partitions means every committed one."""
        error = self.validate_group_status(group_id, allow_empty_id=True)
        if error is not None:
            return error, {}
        return Errors.NONE, self.manager.get_offsets(group_id, require_stable, partitions)

    # ------------------------------------------------------------ admin
    def handle_list_groups(
        self, states: set[str], types: set[str]
    ) -> tuple[int, list[GroupOverview]]:
        """Every group cached here, filtered by state and type names (case-insensitive)."""
        if not self.active:
            return Errors.COORDINATOR_NOT_AVAILABLE, []
        error = Errors.COORDINATOR_LOAD_IN_PROGRESS if self.manager.is_loading else Errors.NONE
        wanted_states = {s.lower() for s in states}
        wanted_types = {t.lower() for t in types}
        if wanted_types and "classic" not in wanted_types:
            return error, []
        groups = [
            GroupOverview(g.group_id, g.protocol_type or "", g.state.value)
            for g in self.manager.groups.values()
            if not wanted_states or g.state.value.lower() in wanted_states
        ]
        return error, groups

    def handle_describe_group(self, group_id: str) -> tuple[int, GroupSummary]:
        """Describe ``group_id``: its state, protocol and members."""
        error = self.validate_group_status(group_id, allow_empty_id=True)
        if error is not None:
            return error, NO_GROUP
        group = self.manager.get_group(group_id)
        if group is None:
            return Errors.NONE, DEAD_GROUP
        if group.is_state(_S.STABLE) and group.protocol_name is not None:
            protocol = group.protocol_name
            members = tuple(
                MemberSummary(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.metadata(protocol),
                    m.assignment,
                )
                for m in group.members.values()
            )
            return Errors.NONE, GroupSummary(
                group.state.value, group.protocol_type or "", protocol, members
            )
        members = tuple(
            MemberSummary(m.member_id, m.group_instance_id, m.client_id, m.client_host, b"", b"")
            for m in group.members.values()
        )
        return Errors.NONE, GroupSummary(group.state.value, group.protocol_type or "", "", members)

    def handle_delete_groups(self, group_ids: Sequence[str]) -> dict[str, int]:
        """Delete Empty groups and their offsets; NON_EMPTY_GROUP for groups with members."""
        errors: dict[str, int] = {}
        eligible: list[GroupMetadata] = []
        for group_id in dict.fromkeys(group_ids):
            error = self.validate_group_status(group_id, allow_empty_id=True)
            if error is not None:
                errors[group_id] = error
                continue
            group = self.manager.get_group(group_id)
            if group is None or group.is_state(_S.DEAD):
                errors[group_id] = (
                    Errors.GROUP_ID_NOT_FOUND
                    if self.manager.group_not_exists(group_id)
                    else Errors.NOT_COORDINATOR
                )
            elif group.is_state(_S.EMPTY):
                group.transition_to(_S.DEAD)
                eligible.append(group)
            else:
                errors[group_id] = Errors.NON_EMPTY_GROUP
        if eligible:
            removed = self.manager.cleanup_group_metadata(
                eligible, lambda g: g.remove_all_offsets()
            )
            for group in eligible:
                errors[group.group_id] = Errors.NONE
            log.info("deleted groups %s (%d offsets)", [g.group_id for g in eligible], removed)
        return errors

    def handle_delete_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition]
    ) -> tuple[int, dict[TopicPartition, int]]:
        """Delete committed offsets (OffsetDelete, KIP-496).

        An Empty group loses any offsets; a consumer group with members only those of
        topics it does not subscribe to (GROUP_SUBSCRIBED_TO_TOPIC for the others);
        other non-empty groups answer NON_EMPTY_GROUP.
        """
        error = self.validate_group_status(group_id)
        if error is not None:
            return error, {}
        group = self.manager.get_group(group_id)
        if group is None or group.is_state(_S.DEAD):
            return (
                Errors.GROUP_ID_NOT_FOUND
                if self.manager.group_not_exists(group_id)
                else Errors.NOT_COORDINATOR
            ), {}
        results: dict[TopicPartition, int] = {}
        if group.is_state(_S.EMPTY):
            eligible = list(partitions)
        elif group.is_consumer_group:
            eligible = [tp for tp in partitions if not group.is_subscribed_to_topic(tp.topic)]
            results = {
                tp: int(Errors.GROUP_SUBSCRIBED_TO_TOPIC)
                for tp in partitions
                if group.is_subscribed_to_topic(tp.topic)
            }
        else:
            return Errors.NON_EMPTY_GROUP, {}
        if eligible:
            self.counters.offset_deletions += self.manager.cleanup_group_metadata(
                [group], lambda g: g.remove_offsets(eligible)
            )
            results.update({tp: int(Errors.NONE) for tp in eligible})
        return Errors.NONE, results

    def handle_deleted_partitions(self, partitions: Sequence[TopicPartition]) -> None:
        """Drop the committed offsets of deleted partitions from every group."""
        removed = self.manager.cleanup_group_metadata(
            list(self.manager.groups.values()), lambda g: g.remove_offsets(partitions)
        )
        if removed:
            log.info("removed %d offsets of deleted partitions", removed)

    # ------------------------------------------------------------ leadership
    def on_election(self, partition: int, epoch: int) -> None:
        """Load the groups of ``__consumer_offsets-<partition>``, now led here."""
        log.info("elected group coordinator of partition %d in epoch %d", partition, epoch)
        self.manager.schedule_load(partition, epoch, self._on_group_loaded)

    def on_resignation(self, partition: int, epoch: int | None) -> None:
        """Drop the groups of ``__consumer_offsets-<partition>``, no longer led here."""
        log.info("resigned as group coordinator of partition %d in epoch %s", partition, epoch)
        self.manager.schedule_unload(partition, epoch, self._on_group_unloaded)

    def _on_group_loaded(self, group: GroupMetadata) -> None:
        log.info("loaded group %s with generation %d", group.group_id, group.generation_id)
        if group.size > self.config.max_size:
            self._prepare_rebalance(
                group, f"freshly loaded group has more than {self.config.max_size} members"
            )
        for member in list(group.members.values()):
            self._complete_and_schedule_next_heartbeat(group, member)

    def _on_group_unloaded(self, group: GroupMetadata) -> None:
        log.info("unloading group %s with generation %d", group.group_id, group.generation_id)
        previous = group.state
        group.transition_to(_S.DEAD)
        if previous is _S.PREPARING_REBALANCE:
            for member in list(group.members.values()):
                group.maybe_invoke_join_callback(
                    member, JoinResult(member.member_id, error=Errors.NOT_COORDINATOR)
                )
            self._cancel_join(group)
        elif previous in (_S.STABLE, _S.COMPLETING_REBALANCE):
            for member in list(group.members.values()):
                group.maybe_invoke_sync_callback(member, SyncResult(error=Errors.NOT_COORDINATOR))
        for member_id in list(group.members) + list(group.pending_members):
            self._cancel_heartbeat(group, member_id)
        self._cancel_join(group)
        self._remove_sync_expiration(group)
