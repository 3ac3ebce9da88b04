"""Incremental fetch sessions (KIP-227): the broker's cache and contexts, the fetcher's handler.

Pure logic, as Kafka's ``FetchSessionTest`` and ``FetchSessionHandlerTest`` exercise it: no
broker, the clock is a variable.
"""

from __future__ import annotations

import random
from typing import Any, cast

import pytest

from kpo_broker.log.filerecords import FileSlice
from kpo_broker.log.info import FetchDataInfo
from kpo_broker.server.fetch import FetchPartition, FetchPartitionResult
from kpo_broker.server.fetch_metadata import (
    FINAL_EPOCH,
    INITIAL,
    INVALID_SESSION_ID,
    SESSIONLESS,
    FetchMetadata,
    next_epoch,
)
from kpo_broker.server.fetch_session import (
    FETCH_SESSION_ID_NOT_FOUND,
    INVALID_FETCH_SESSION_EPOCH,
    CachedPartition,
    FetchManager,
    FetchSessionCache,
    FullFetchContext,
    IncrementalFetchContext,
    SessionErrorContext,
    SessionlessFetchContext,
)
from kpo_broker.server.fetch_session_handler import FetchSessionHandler, PartitionData
from kpo_kafka.topic_partition import TopicPartition

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)
EVICTION_MS = 120_000


class Clock:
    """A settable clock in ms."""

    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


def request(tp: TopicPartition, offset: int = 0, epoch: int = 1) -> FetchPartition:
    return FetchPartition(tp, offset, 1 << 20, epoch, 0)


def result(hw: int = 10, lso: int = 0, records: int = 0, error: int = 0) -> FetchPartitionResult:
    data = None
    if records:
        data = FetchDataInfo(0, (FileSlice(cast(Any, None), 0, records),))
    if error:
        return FetchPartitionResult(error)
    return FetchPartitionResult(0, hw, lso, data)


def manager(slots: int = 10, clock: Clock | None = None) -> FetchManager:
    return FetchManager(FetchSessionCache(slots, EVICTION_MS, random.Random(7)), clock or Clock())


def open_session(fm: FetchManager, tps: list[TopicPartition], follower: bool = True) -> int:
    """A full fetch of ``tps`` answered HW 10 each; returns the new session id."""
    context = fm.new_context(INITIAL, follower, {tp: request(tp) for tp in tps}, [])
    assert isinstance(context, FullFetchContext)
    response = context.response({tp: result() for tp in tps})
    assert response.error_code == 0 and set(response.partitions) == set(tps)
    return response.session_id


def test_next_epoch_counts_up_wraps_to_one_and_keeps_final() -> None:
    assert next_epoch(0) == 1
    assert next_epoch(41) == 42
    assert next_epoch(2**31 - 1) == 1
    assert next_epoch(FINAL_EPOCH) == FINAL_EPOCH


def test_fetch_metadata_transitions() -> None:
    assert INITIAL.is_full and SESSIONLESS.is_full
    first = FetchMetadata.new_incremental(123)
    assert first == FetchMetadata(123, 1) and not first.is_full
    assert first.next_incremental() == FetchMetadata(123, 2)
    assert first.next_close_existing() == FetchMetadata(123, FINAL_EPOCH)
    assert first.next_close_existing_attempt_new() == FetchMetadata(123, 0)


def test_a_full_fetch_opens_a_session_caching_its_partitions() -> None:
    fm = manager()
    session_id = open_session(fm, [A0, A1, B0])
    assert session_id != INVALID_SESSION_ID
    session = fm.cache.get(session_id)
    assert session is not None and session.epoch == 1 and session.privileged
    assert list(session.partitions) == [A0, A1, B0]
    assert session.partitions[A0] == CachedPartition(request(A0), 10, 0)
    assert (fm.cache.size, fm.cache.total_partitions) == (1, 3)


def test_an_idle_incremental_fetch_reads_every_session_partition_and_answers_none() -> None:
    fm = manager()
    session_id = open_session(fm, [A0, A1, B0])
    for epoch in (1, 2, 3):
        context = fm.new_context(FetchMetadata(session_id, epoch), True, {}, [])
        assert isinstance(context, IncrementalFetchContext)
        assert [p.tp for p in context.partitions()] == [A0, A1, B0]
        response = context.response({tp: result() for tp in (A0, A1, B0)})
        assert (response.error_code, response.session_id, response.partitions) == (
            0,
            session_id,
            {},
        )


def test_an_incremental_response_carries_records_hw_and_log_start_changes_and_errors() -> None:
    fm = manager()
    tps = [A0, A1, B0, TopicPartition("c", 0)]
    session_id = open_session(fm, tps)
    context = fm.new_context(FetchMetadata(session_id, 1), True, {}, [])
    answers = {
        A0: result(hw=10, records=100),  # new data
        A1: result(hw=11),  # the HW moved
        B0: result(hw=10, lso=3),  # the log start offset moved
        tps[3]: result(hw=10),  # nothing new
    }
    response = context.response(answers)
    assert list(response.partitions) == [A0, A1, B0]
    session = fm.cache.get(session_id)
    assert session is not None
    # A partition that returned records goes to the end (fair use of max_bytes).
    assert list(session.partitions) == [A1, B0, tps[3], A0]
    # An error is sent, and the partition once more when the error clears.
    context = fm.new_context(FetchMetadata(session_id, 2), True, {}, [])
    response = context.response({A1: result(error=6), B0: result(hw=10, lso=3)})
    assert list(response.partitions) == [A1]
    context = fm.new_context(FetchMetadata(session_id, 3), True, {}, [])
    response = context.response({A1: result(hw=11), B0: result(hw=10, lso=3)})
    assert list(response.partitions) == [A1]


def test_an_incremental_fetch_updates_adds_and_forgets_partitions() -> None:
    fm = manager()
    session_id = open_session(fm, [A0, A1])
    context = fm.new_context(
        FetchMetadata(session_id, 1), True, {A0: request(A0, 5), B0: request(B0, 2)}, [A1]
    )
    assert {p.tp: p.fetch_offset for p in context.partitions()} == {A0: 5, B0: 2}
    assert fm.cache.total_partitions == 2
    # The new partition is answered (its HW is unknown to the session), A0 only if changed.
    response = context.response({A0: result(), B0: result(hw=4)})
    assert list(response.partitions) == [B0]


def test_session_errors_unknown_id_and_wrong_epoch() -> None:
    fm = manager()
    session_id = open_session(fm, [A0])
    unknown = fm.new_context(FetchMetadata(session_id + 1, 1), True, {}, [])
    assert isinstance(unknown, SessionErrorContext) and unknown.partitions() == []
    assert unknown.response({}).error_code == FETCH_SESSION_ID_NOT_FOUND
    stale = fm.new_context(FetchMetadata(session_id, 2), True, {}, [])
    assert stale.response({}).error_code == INVALID_FETCH_SESSION_EPOCH
    # The session is untouched by the errors: epoch 1 still works.
    assert isinstance(
        fm.new_context(FetchMetadata(session_id, 1), True, {}, []), (IncrementalFetchContext)
    )


def test_a_duplicate_request_that_overtook_a_waiting_fetch_fails_its_response() -> None:
    """Kafka re-checks the epoch when the response is built (a long poll may be overtaken)."""
    fm = manager()
    session_id = open_session(fm, [A0])
    first = fm.new_context(FetchMetadata(session_id, 1), True, {}, [])
    second = fm.new_context(FetchMetadata(session_id, 2), True, {}, [])
    assert second.response({A0: result()}).error_code == 0
    late = first.response({A0: result(hw=99)})
    assert (late.error_code, late.session_id, late.partitions) == (
        INVALID_FETCH_SESSION_EPOCH,
        session_id,
        {},
    )


def test_final_epoch_closes_the_session_and_fetches_sessionless() -> None:
    fm = manager()
    session_id = open_session(fm, [A0])
    context = fm.new_context(FetchMetadata(session_id, FINAL_EPOCH), True, {A0: request(A0)}, [])
    assert isinstance(context, SessionlessFetchContext)
    response = context.response({A0: result()})
    assert (response.session_id, list(response.partitions)) == (INVALID_SESSION_ID, [A0])
    assert fm.cache.size == 0 and fm.cache.total_partitions == 0


def test_a_full_fetch_naming_a_session_replaces_it() -> None:
    fm = manager()
    old = open_session(fm, [A0])
    context = fm.new_context(FetchMetadata(old, 0), True, {A1: request(A1)}, [])
    new = context.response({A1: result()}).session_id
    assert fm.cache.get(old) is None and new not in (old, INVALID_SESSION_ID)
    assert fm.cache.size == 1


def test_forgetting_every_partition_closes_the_session() -> None:
    fm = manager()
    session_id = open_session(fm, [A0, A1])
    context = fm.new_context(FetchMetadata(session_id, 1), True, {}, [A0, A1])
    assert isinstance(context, SessionlessFetchContext)
    assert context.response({}).session_id == INVALID_SESSION_ID
    assert fm.cache.size == 0


def test_no_slots_no_sessions() -> None:
    fm = manager(slots=0)
    assert open_session(fm, [A0]) == INVALID_SESSION_ID


def test_a_full_cache_evicts_a_stale_session_first() -> None:
    clock = Clock()
    fm = manager(slots=2, clock=clock)
    stale = open_session(fm, [A0, A1, B0])
    clock.ms += 1000
    fresh = open_session(fm, [A0])
    clock.ms += EVICTION_MS  # `stale` unused for longer than the eviction time
    fm.new_context(FetchMetadata(fresh, 1), True, {}, []).response({A0: result()})
    newcomer = open_session(fm, [A0], follower=False)
    assert newcomer != INVALID_SESSION_ID
    assert fm.cache.get(stale) is None and fm.cache.get(fresh) is not None
    assert fm.cache.evictions == 1


def test_a_consumer_cannot_evict_a_young_follower_session() -> None:
    clock = Clock()
    fm = manager(slots=1, clock=clock)
    follower = open_session(fm, [A0])
    assert open_session(fm, [A0, A1, B0], follower=False) == INVALID_SESSION_ID
    # A consumer's session is evictable by a follower's at once.
    fm2 = manager(slots=1, clock=clock)
    consumer = open_session(fm2, [A0, A1, B0], follower=False)
    assert open_session(fm2, [A0]) != INVALID_SESSION_ID
    assert fm2.cache.get(consumer) is None
    assert fm.cache.get(follower) is not None


def test_old_sessions_yield_to_larger_ones_of_the_same_privilege() -> None:
    clock = Clock()
    fm = manager(slots=1, clock=clock)
    small = open_session(fm, [A0], follower=False)
    clock.ms += EVICTION_MS + 1
    fm.new_context(FetchMetadata(small, 1), False, {}, []).response({A0: result()})
    # Used just now, so not stale; older than the eviction time, so evictable by all.
    assert open_session(fm, [A0], follower=False) == INVALID_SESSION_ID  # not bigger
    bigger = open_session(fm, [A0, A1], follower=False)
    assert bigger != INVALID_SESSION_ID and fm.cache.get(small) is None


def data(offset: int, epoch: int = 1) -> PartitionData:
    return PartitionData(offset, 0, 1 << 20, epoch)


def test_the_handler_sends_a_full_fetch_then_only_changes() -> None:
    handler = FetchSessionHandler(0)
    builder = handler.new_builder()
    builder.add(A0, data(0))
    builder.add(A1, data(0))
    full = builder.build()
    assert full.metadata == INITIAL and list(full.to_send) == [A0, A1] and full.to_forget == []
    assert handler.handle_response(0, 77, [A0, A1])
    assert handler.next_metadata == FetchMetadata(77, 1)
    # Nothing changed: nothing named, both implied.
    builder = handler.new_builder()
    builder.add(A0, data(0))
    builder.add(A1, data(0))
    idle = builder.build()
    assert idle.metadata == FetchMetadata(77, 1)
    assert (idle.to_send, idle.to_forget, list(idle.session_partitions)) == ({}, [], [A0, A1])
    assert handler.handle_response(0, 77, [])
    # A0 moved, A1 is left out this round (throttled), B0 is new.
    builder = handler.new_builder()
    builder.add(A0, data(5))
    builder.add(B0, data(0))
    changed = builder.build()
    assert changed.metadata == FetchMetadata(77, 2)
    assert list(changed.to_send) == [B0, A0] and changed.to_forget == [A1]
    assert list(changed.session_partitions) == [A0, B0]
    # A response partition outside the session is a protocol problem: new session.
    assert not handler.handle_response(0, 77, [A1])
    assert handler.next_metadata == FetchMetadata(77, 0)


@pytest.mark.parametrize(
    ("error", "expected"),
    [(FETCH_SESSION_ID_NOT_FOUND, INITIAL), (INVALID_FETCH_SESSION_EPOCH, FetchMetadata(77, 0))],
)
def test_the_handler_falls_back_to_a_full_fetch_on_session_errors(
    error: int, expected: FetchMetadata
) -> None:
    handler = FetchSessionHandler(0)
    builder = handler.new_builder()
    builder.add(A0, data(0))
    builder.build()
    assert handler.handle_response(0, 77, [A0])
    builder = handler.new_builder()
    builder.add(A0, data(0))
    builder.build()
    assert not handler.handle_response(error, 0, [])
    assert handler.next_metadata == expected
    builder = handler.new_builder()
    builder.add(A0, data(0))
    assert list(builder.build().to_send) == [A0]  # full again


def test_the_handler_after_a_failed_request_or_a_sessionless_answer() -> None:
    handler = FetchSessionHandler(0)
    builder = handler.new_builder()
    builder.add(A0, data(0))
    builder.build()
    assert handler.handle_response(0, INVALID_SESSION_ID, [A0])
    assert handler.next_metadata == INITIAL  # the broker kept no session: full again
    builder = handler.new_builder()
    builder.add(A0, data(0))
    builder.build()
    assert not handler.handle_response(0, 5, [])  # a full answer omitting A0
    assert handler.next_metadata == INITIAL
    handler.next_metadata = FetchMetadata(5, 9)
    handler.handle_error()
    assert handler.next_metadata == FetchMetadata(5, 0)


def test_handler_and_manager_together_over_many_rounds() -> None:
    """The fetcher's and the broker's views stay in step; epochs advance by one."""
    fm = manager()
    handler = FetchSessionHandler(0)
    offsets = {A0: 0, A1: 0, B0: 0}
    named = []
    for round_ in range(6):
        if round_ == 3:
            offsets[A1] = 4
        builder = handler.new_builder()
        for tp, offset in offsets.items():
            builder.add(tp, data(offset))
        fetch = builder.build()
        named.append(len(fetch.to_send))
        context = fm.new_context(
            fetch.metadata,
            True,
            {
                tp: FetchPartition(tp, d.fetch_offset, d.max_bytes, 1, 0)
                for tp, d in fetch.to_send.items()
            },
            fetch.to_forget,
        )
        assert {p.tp: p.fetch_offset for p in context.partitions()} == offsets
        response = context.response({p.tp: result() for p in context.partitions()})
        assert handler.handle_response(
            response.error_code, response.session_id, list(response.partitions)
        )
    assert named == [3, 0, 0, 1, 0, 0]
