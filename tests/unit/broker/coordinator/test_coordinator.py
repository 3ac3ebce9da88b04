"""The group coordinator's join, sync, heartbeat and leave logic on an event loop.

The metadata manager's log writes are replaced by an in-memory store (the writes
themselves are covered by the integration tests on real brokers).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from kpo_broker.coordinator.group.coordinator import GroupConfig, GroupCoordinator, MemberIdentity
from kpo_broker.coordinator.group.errors import Errors
from kpo_broker.coordinator.group.group import GroupMetadata
from kpo_broker.coordinator.group.member import JoinResult, SyncResult
from kpo_broker.coordinator.group.metadata_manager import GroupMetadataManager, OffsetConfig
from kpo_broker.coordinator.group.records import OffsetAndMetadata
from kpo_broker.coordinator.group.states import GroupState
from kpo_kafka.topic_partition import TopicPartition


class InMemoryManager(GroupMetadataManager):
    """Keeps what would be appended to ``__consumer_offsets`` in lists."""

    def __init__(self) -> None:
        no_replicas = SimpleNamespace(get_partition=lambda _tp: None)
        super().__init__(0, OffsetConfig(num_partitions=1), no_replicas, lambda _t: 1, lambda: 1)  # type: ignore[arg-type]
        self.owned_partitions.add(0)
        self.stored_groups: list[tuple[str, int, dict[str, bytes]]] = []

    async def store_group(self, group: GroupMetadata, assignment: dict[str, bytes]) -> int:
        self.stored_groups.append((group.group_id, group.generation_id, dict(assignment)))
        return Errors.NONE

    async def store_offsets(
        self, group: GroupMetadata, offsets: dict[TopicPartition, OffsetAndMetadata]
    ) -> dict[TopicPartition, int]:
        group.prepare_offset_commit(offsets)
        from kpo_broker.coordinator.group.group import CommittedOffset

        for tp, o in offsets.items():
            group.on_offset_commit_append(tp, CommittedOffset(len(group.offsets), o))
        return {tp: 0 for tp in offsets}


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    try:
        yield loop
    finally:
        loop.close()


def make(config: GroupConfig | None = None) -> tuple[GroupCoordinator, InMemoryManager]:
    manager = InMemoryManager()
    coordinator = GroupCoordinator(
        0, config or GroupConfig(min_session_timeout_ms=10, initial_rebalance_delay_ms=50), manager
    )
    coordinator.startup(enable_expiration=False)
    return coordinator, manager


def join(
    c: GroupCoordinator,
    member_id: str = "",
    protocols: list[tuple[str, bytes]] | None = None,
    instance: str | None = None,
    session_ms: int = 1000,
    rebalance_ms: int = 2000,
    v4: bool = True,
) -> asyncio.Future[JoinResult]:
    future: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
    c.handle_join_group(
        "g",
        member_id,
        instance,
        v4 and instance is None,
        True,
        "client",
        "/127.0.0.1",
        rebalance_ms,
        session_ms,
        "consumer",
        protocols or [("range", b"r")],
        lambda r: future.done() or future.set_result(r),
    )
    return future


def sync(
    c: GroupCoordinator, member_id: str, generation: int, assignment: dict[str, bytes] | None = None
) -> asyncio.Future[SyncResult]:
    future: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
    c.handle_sync_group(
        "g",
        generation,
        member_id,
        "consumer",
        None,
        None,
        assignment or {},
        lambda r: future.done() or future.set_result(r),
    )
    return future


async def join_two(c: GroupCoordinator) -> tuple[JoinResult, JoinResult]:
    first = await join(c)
    assert first.error == Errors.MEMBER_ID_REQUIRED
    second = await join(c)
    a, b = join(c, first.member_id), join(c, second.member_id)
    return await asyncio.wait_for(a, 2), await asyncio.wait_for(b, 2)


async def stable_two(c: GroupCoordinator) -> tuple[JoinResult, JoinResult]:
    """Join two members and sync generation 1; their (leader, follower) join results."""
    a, b = await join_two(c)
    leader = a if a.leader_id == a.member_id else b
    other = b if leader is a else a
    await sync(c, leader.member_id, 1, {leader.member_id: b"L", other.member_id: b"O"})
    await sync(c, other.member_id, 1)
    return leader, other


def test_two_members_join_sync_and_get_their_assignments(loop: asyncio.AbstractEventLoop) -> None:
    async def scenario() -> None:
        c, manager = make()
        a, b = await join_two(c)
        assert a.error == b.error == 0 and a.generation_id == b.generation_id == 1
        assert a.protocol_name == "range" and a.leader_id == b.leader_id
        leader, follower = (a, b) if a.leader_id == a.member_id else (b, a)
        assert {m.member_id for m in leader.members} == {a.member_id, b.member_id}
        assert follower.members == ()
        follower_sync = sync(c, follower.member_id, 1)
        await asyncio.sleep(0.01)
        assert not follower_sync.done()  # parked until the leader's assignment is stored
        leader_sync = sync(
            c, leader.member_id, 1, {leader.member_id: b"L", follower.member_id: b"F"}
        )
        assert (await leader_sync).assignment == b"L"
        assert (await follower_sync).assignment == b"F"
        group = manager.get_group("g")
        assert group is not None and group.is_state(GroupState.STABLE)
        assert manager.stored_groups[-1][1:] == (
            1,
            {leader.member_id: b"L", follower.member_id: b"F"},
        )
        assert c.handle_heartbeat("g", follower.member_id, None, 1) == 0
        assert c.handle_heartbeat("g", follower.member_id, None, 0) == Errors.ILLEGAL_GENERATION
        assert c.handle_heartbeat("g", "nobody", None, 1) == Errors.UNKNOWN_MEMBER_ID
        await c.shutdown()

    loop.run_until_complete(scenario())


def test_common_protocol_is_chosen_by_votes(loop: asyncio.AbstractEventLoop) -> None:
    async def scenario() -> None:
        c, _manager = make(GroupConfig(min_session_timeout_ms=10, initial_rebalance_delay_ms=30))
        prefs = [
            [("cooperative-sticky", b"1"), ("range", b"1")],
            [("roundrobin", b"2"), ("range", b"2"), ("cooperative-sticky", b"2")],
            [("cooperative-sticky", b"3"), ("range", b"3")],
        ]
        futures = [join(c, protocols=p, v4=False) for p in prefs]
        results = [await asyncio.wait_for(f, 2) for f in futures]
        assert {r.protocol_name for r in results} == {"cooperative-sticky"}
        # A member supporting none of the group's protocols is refused.
        refused = await join(c, protocols=[("other", b"")], v4=False)
        assert refused.error == Errors.INCONSISTENT_GROUP_PROTOCOL
        await c.shutdown()

    loop.run_until_complete(scenario())


def test_session_timeout_removes_a_silent_member_and_rebalances(
    loop: asyncio.AbstractEventLoop,
) -> None:
    async def scenario() -> None:
        c, manager = make()
        leader, other = await stable_two(c)
        group = manager.get_group("g")
        assert group is not None
        # The leader heartbeats; the other member stays silent past its session.
        for _ in range(15):
            await asyncio.sleep(0.1)
            error = c.handle_heartbeat("g", leader.member_id, None, group.generation_id)
            if error == Errors.REBALANCE_IN_PROGRESS:
                break
        assert error == Errors.REBALANCE_IN_PROGRESS
        assert not group.has(other.member_id)
        rejoined = await asyncio.wait_for(join(c, leader.member_id), 2)
        assert rejoined.generation_id == 2 and [m.member_id for m in rejoined.members] == [
            leader.member_id
        ]
        await c.shutdown()

    loop.run_until_complete(scenario())


def test_leave_group_rebalances_and_last_leave_empties_the_group(
    loop: asyncio.AbstractEventLoop,
) -> None:
    async def scenario() -> None:
        c, manager = make()
        a, b = await join_two(c)
        result = c.handle_leave_group("g", [MemberIdentity(a.member_id), MemberIdentity("x")])
        assert result.error == 0
        assert [code for _, code in result.members] == [0, Errors.UNKNOWN_MEMBER_ID]
        group = manager.get_group("g")
        assert group is not None and group.is_state(GroupState.PREPARING_REBALANCE)
        again = await asyncio.wait_for(join(c, b.member_id), 2)
        assert again.generation_id == 2 and again.leader_id == b.member_id
        c.handle_leave_group("g", [MemberIdentity(b.member_id)])
        await asyncio.sleep(0.01)
        # b was parked in no request: the rebalance completes at its timeout with no member.
        await asyncio.sleep(2.2)
        assert group.is_state(GroupState.EMPTY) and group.generation_id == 3
        await c.shutdown()

    loop.run_until_complete(scenario())


def test_static_member_rejoins_without_rebalance(loop: asyncio.AbstractEventLoop) -> None:
    async def scenario() -> None:
        c, manager = make()
        first = await asyncio.wait_for(join(c, instance="i-1"), 2)
        assert first.error == 0 and first.member_id.startswith("i-1-")
        await sync(c, first.member_id, 1, {first.member_id: b"A"})
        # Restarted: joins with no member id but the same group.instance.id.
        again = await asyncio.wait_for(join(c, instance="i-1"), 2)
        assert again.error == 0 and again.member_id != first.member_id
        assert again.generation_id == 1 and again.skip_assignment
        group = manager.get_group("g")
        assert group is not None and group.is_state(GroupState.STABLE)
        fenced = c.handle_heartbeat("g", first.member_id, "i-1", 1)
        assert fenced == Errors.FENCED_INSTANCE_ID
        assert c.handle_heartbeat("g", again.member_id, "i-1", 1) == 0
        await c.shutdown()

    loop.run_until_complete(scenario())


def test_offsets_commit_rules(loop: asyncio.AbstractEventLoop) -> None:
    async def scenario() -> None:
        c, _manager = make()
        tp = TopicPartition("t", 0)
        # A group that does not exist takes commits of generation -1 (simple consumers).
        result = await c.handle_commit_offsets("simple", "", None, -1, {tp: OffsetAndMetadata(5)})
        assert result == {tp: 0}
        err, fetched = c.handle_fetch_offsets("simple", False, [tp, TopicPartition("t", 1)])
        assert err == 0 and fetched[tp].offset == 5 and fetched[TopicPartition("t", 1)].offset == -1
        # ...but not commits of a generation it never had.
        result = await c.handle_commit_offsets("other", "m", None, 3, {tp: OffsetAndMetadata(1)})
        assert result == {tp: Errors.ILLEGAL_GENERATION}
        assert c.validate_group_status("") == Errors.INVALID_GROUP_ID
        assert c.handle_delete_groups(["simple", "missing"]) == {
            "simple": 0,
            "missing": Errors.GROUP_ID_NOT_FOUND,
        }
        await c.shutdown()

    loop.run_until_complete(scenario())


def test_group_max_size_and_session_timeout_bounds(loop: asyncio.AbstractEventLoop) -> None:
    async def scenario() -> None:
        c, _manager = make(
            GroupConfig(
                min_session_timeout_ms=500,
                max_session_timeout_ms=5000,
                max_size=1,
                initial_rebalance_delay_ms=30,
            )
        )
        too_short = await join(c, session_ms=100, v4=False)
        assert too_short.error == Errors.INVALID_SESSION_TIMEOUT
        too_long = await join(c, session_ms=6000, v4=False)
        assert too_long.error == Errors.INVALID_SESSION_TIMEOUT
        first = await asyncio.wait_for(join(c, v4=False), 2)
        assert first.error == 0
        second = await join(c, v4=False)
        assert second.error == Errors.GROUP_MAX_SIZE_REACHED and second.member_id == ""
        await c.shutdown()

    loop.run_until_complete(scenario())


# The join phase's timing (Kafka's InitialDelayedJoin and DelayedJoin). The delays are long
# enough that a loaded machine's late timers stay far from the next bound; lower bounds are
# exact (a timer never fires early), upper bounds are the next step a wrong timer would take.
DELAY_S = 1.0


async def _member_id(c: GroupCoordinator) -> str:
    first = await join(c)
    assert first.error == Errors.MEMBER_ID_REQUIRED  # KIP-394: answered at once
    return first.member_id


def test_initial_delay_answers_a_lone_member_once_the_delay_has_passed(
    loop: asyncio.AbstractEventLoop,
) -> None:
    """An Empty group waits ``group.initial.rebalance.delay.ms`` once, not a step more."""

    async def scenario() -> None:
        c, _manager = make(
            GroupConfig(min_session_timeout_ms=10, initial_rebalance_delay_ms=int(DELAY_S * 1000))
        )
        member_id = await _member_id(c)
        start = loop.time()
        result = await asyncio.wait_for(join(c, member_id, rebalance_ms=60000), 10)
        elapsed = loop.time() - start
        assert result.error == 0 and result.generation_id == 1
        assert DELAY_S <= elapsed + 0.01 < 2 * DELAY_S, elapsed
        await c.shutdown()

    loop.run_until_complete(scenario())


def test_initial_delay_is_extended_by_a_member_joining_during_it(
    loop: asyncio.AbstractEventLoop,
) -> None:
    """A member added during the delay extends it by one more delay (InitialDelayedJoin)."""

    async def scenario() -> None:
        c, _manager = make(
            GroupConfig(min_session_timeout_ms=10, initial_rebalance_delay_ms=int(DELAY_S * 1000))
        )
        a_id, b_id = await _member_id(c), await _member_id(c)
        start = loop.time()
        a = join(c, a_id, rebalance_ms=60000)
        await asyncio.sleep(DELAY_S / 4)
        b = join(c, b_id, rebalance_ms=60000)
        results = [await asyncio.wait_for(f, 10) for f in (a, b)]
        elapsed = loop.time() - start
        assert [r.generation_id for r in results] == [1, 1]
        assert {m.member_id for r in results for m in r.members} == {a_id, b_id}
        assert 2 * DELAY_S <= elapsed + 0.01 < 3 * DELAY_S, elapsed
        await c.shutdown()

    loop.run_until_complete(scenario())


def test_initial_delay_extension_stops_at_the_rebalance_timeout(
    loop: asyncio.AbstractEventLoop,
) -> None:
    """The extension is min(delay, rebalance timeout - delay): the join ends at the timeout."""

    async def scenario() -> None:
        c, _manager = make(
            GroupConfig(min_session_timeout_ms=10, initial_rebalance_delay_ms=int(DELAY_S * 1000))
        )
        rebalance_ms = int(DELAY_S * 1300)
        a_id, b_id = await _member_id(c), await _member_id(c)
        start = loop.time()
        a = join(c, a_id, rebalance_ms=rebalance_ms)
        b = join(c, b_id, rebalance_ms=rebalance_ms)
        results = [await asyncio.wait_for(f, 10) for f in (a, b)]
        elapsed = loop.time() - start
        assert [r.generation_id for r in results] == [1, 1]
        assert rebalance_ms / 1000 <= elapsed + 0.01 < 2 * DELAY_S, elapsed
        await c.shutdown()

    loop.run_until_complete(scenario())


def test_rebalance_of_a_stable_group_completes_when_every_member_has_rejoined(
    loop: asyncio.AbstractEventLoop,
) -> None:
    """A DelayedJoin completes on the last member's JoinGroup, not at the rebalance timeout."""

    async def scenario() -> None:
        c, manager = make()
        leader, other = await stable_two(c)
        start = loop.time()
        # New metadata from one member: a rebalance with a 60 s rebalance timeout.
        b_again = join(c, other.member_id, [("range", b"new")], rebalance_ms=60000)
        await asyncio.sleep(0.05)
        group = manager.get_group("g")
        assert group is not None and group.is_state(GroupState.PREPARING_REBALANCE)
        assert not b_again.done()
        a_again = join(c, leader.member_id, rebalance_ms=60000)
        results = [await asyncio.wait_for(f, 5) for f in (a_again, b_again)]
        assert [r.generation_id for r in results] == [2, 2]
        assert loop.time() - start < 5
        await c.shutdown()

    loop.run_until_complete(scenario())
