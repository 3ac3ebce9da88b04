"""Incremental fetch sessions on the serving broker (KIP-227).

Kafka's ``kafka.server.FetchSession``, ``FetchSessionCache`` and ``FetchManager``: a full
fetch (session epoch 0) may open a session caching the partitions it named; the client's
later incremental fetches (epoch 1, 2, ...) name only the partitions whose fetch position
changed, plus the ones to forget (``forgotten_topics_data``), and the response carries only
the partitions with news (records, a moved high watermark or log start offset, an error).
An idle follower's fetch then names no partition and gets none back.

The pieces, as in Kafka:

- :class:`FetchSessionCache` holds at most ``max.incremental.fetch.session.cache.slots``
  sessions. When full, a new session evicts a stale one (unused for
  ``min.incremental.fetch.session.eviction.ms``), else the least valuable session it may
  evict: followers' sessions (privileged) are evictable only by privileged sessions until
  they are older than the eviction time, and a smaller session yields to a larger one.
- :class:`FetchManager` turns a request into a fetch context: :class:`SessionlessFetchContext`
  (no session), :class:`FullFetchContext` (creates a session when the response is built),
  :class:`IncrementalFetchContext` (the session's partitions, updated by the request) or
  :class:`SessionErrorContext` (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH).
- A context lists the partitions to read (:meth:`FetchContext.partitions`) and builds the
  response from the results (:meth:`FetchContext.response`).

Pure logic: no I/O, and the clock is passed in. Topic ids are not used: the broker serves
Fetch up to v12, which names topics.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from kafka import errors as kafka_errors

from kpo_broker.server.fetch import FetchPartition, FetchPartitionResult
from kpo_broker.server.fetch_metadata import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    FetchMetadata,
    next_epoch,
)
from kpo_broker.server.replica_manager import now_ms
from kpo_kafka.topic_partition import TopicPartition

#: FETCH_SESSION_ID_NOT_FOUND: an incremental fetch named an unknown session.
FETCH_SESSION_ID_NOT_FOUND = int(kafka_errors.FetchSessionIdNotFoundError.errno)
#: INVALID_FETCH_SESSION_EPOCH: an incremental fetch's epoch is not the session's next one.
INVALID_FETCH_SESSION_EPOCH = int(kafka_errors.InvalidFetchSessionEpochError.errno)
_INT_MAX = 2**31 - 1


@dataclass
class CachedPartition:
    """A partition of a session: the last request parameters and what was last answered.

    Kafka's ``CachedPartition``.

    Attributes:
        request: the fetch parameters the client last sent for the partition.
        high_watermark: the HW last answered (-1: unknown, or the last answer was an error).
        log_start_offset: the leader's log start offset last answered (-1: unknown).
    """

    request: FetchPartition
    high_watermark: int = -1
    log_start_offset: int = -1

    def must_respond(self, result: FetchPartitionResult, update: bool) -> bool:
        """Whether ``result`` must be in an incremental response; optionally remember it.

        Kafka's ``CachedPartition.maybeUpdateResponseData``: records, a changed HW (the
        broker serves the last stable offset as the HW) or log start offset, and errors
        are sent. An error resets the cached HW to -1 so the partition is sent again once
        the error clears.

        Args:
            result: the partition's fetch result.
            update: store the answered HW and log start offset (the response is final).
        """
        respond = result.records is not None and bool(result.records.slices)
        if self.high_watermark != result.high_watermark:
            respond = True
            if update:
                self.high_watermark = result.high_watermark
        if self.log_start_offset != result.log_start_offset:
            respond = True
            if update:
                self.log_start_offset = result.log_start_offset
        if result.error_code != 0:
            respond = True
            if update:
                self.high_watermark = -1
        return respond


@dataclass
class FetchSession:
    """One cached session (Kafka's ``FetchSession``).

    Attributes:
        id: the session id (never INVALID_SESSION_ID).
        privileged: opened by a follower (replica fetch); harder to evict.
        partitions: the session's partitions in fetch order (a partition that returned
            records moves to the end, so the response size limit rotates over them).
        creation_ms: when the session was created, ms.
        last_used_ms: when it was last used, ms.
        epoch: the epoch the next incremental fetch must carry.
        cached_size: the partition count the cache last saw (-1: not in the cache).
        evictable_by_privileged: a privileged new session may evict this one (as of the
            last touch: unprivileged, or older than the eviction time).
        evictable_by_all: any new session may evict it (older than the eviction time).
    """

    id: int
    privileged: bool
    partitions: dict[TopicPartition, CachedPartition]
    creation_ms: int
    last_used_ms: int
    epoch: int
    cached_size: int = -1
    evictable_by_privileged: bool = False
    evictable_by_all: bool = False

    def eviction_key(self) -> tuple[bool, int, int]:
        """Rank the session for eviction: (privileged, size, id), smallest first."""
        return (self.privileged, self.cached_size, self.id)

    def update(
        self, fetch_data: dict[TopicPartition, FetchPartition], to_forget: list[TopicPartition]
    ) -> tuple[list[TopicPartition], list[TopicPartition], list[TopicPartition]]:
        """Apply an incremental request: new parameters, new partitions, forgotten ones.

        Kafka's ``FetchSession.update``.

        Returns:
            (added, updated, removed) partitions.
        """
        added: list[TopicPartition] = []
        updated: list[TopicPartition] = []
        removed: list[TopicPartition] = []
        for tp, request in fetch_data.items():
            cached = self.partitions.get(tp)
            if cached is None:
                self.partitions[tp] = CachedPartition(request)
                added.append(tp)
            else:
                cached.request = request
                updated.append(tp)
        for tp in to_forget:
            if self.partitions.pop(tp, None) is not None:
                removed.append(tp)
        return added, updated, removed


class FetchSessionCache:
    """The broker's fetch sessions (Kafka's ``FetchSessionCacheShard``, one shard).

    Args:
        max_entries: ``max.incremental.fetch.session.cache.slots`` (0: no sessions).
        eviction_ms: ``min.incremental.fetch.session.eviction.ms``.
        rng: source of new session ids (a seeded one in tests).
    """

    def __init__(
        self, max_entries: int, eviction_ms: int, rng: random.Random | None = None
    ) -> None:
        self.max_entries = max_entries
        self.eviction_ms = eviction_ms
        self._rng = rng or random.Random()
        self._sessions: dict[int, FetchSession] = {}
        self._num_partitions = 0
        #: Sessions evicted so far (Kafka's IncrementalFetchSessionEvictionsPerSec).
        self.evictions = 0

    def get(self, session_id: int) -> FetchSession | None:
        """Return the session with this id, or None."""
        return self._sessions.get(session_id)

    @property
    def size(self) -> int:
        """Cached sessions (Kafka's NumIncrementalFetchSessions)."""
        return len(self._sessions)

    @property
    def total_partitions(self) -> int:
        """Partitions over every session (Kafka's NumIncrementalFetchPartitionsCached)."""
        return self._num_partitions

    def _new_session_id(self) -> int:
        while True:
            session_id = self._rng.randint(1, _INT_MAX - 1)
            if session_id not in self._sessions:
                return session_id

    def maybe_create_session(
        self,
        now_ms: int,
        privileged: bool,
        size: int,
        create_partitions: Callable[[], dict[TopicPartition, CachedPartition]],
    ) -> int:
        """Cache a new session if there is room or a session may be evicted for it.

        Kafka's ``FetchSessionCacheShard.maybeCreateSession``.

        Args:
            now_ms: the time now, ms.
            privileged: the session is a follower's.
            size: its partition count.
            create_partitions: builds its partitions (called only when it is cached).

        Returns:
            The new session's id (its epoch is 1), or INVALID_SESSION_ID when none was made.
        """
        if len(self._sessions) >= self.max_entries and not self._try_evict(
            privileged, (privileged, size, 0), now_ms
        ):
            return INVALID_SESSION_ID
        session = FetchSession(
            id=self._new_session_id(),
            privileged=privileged,
            partitions=create_partitions(),
            creation_ms=now_ms,
            last_used_ms=now_ms,
            epoch=next_epoch(INITIAL_EPOCH),
        )
        self._sessions[session.id] = session
        self.touch(session, now_ms)
        return session.id

    def _try_evict(self, privileged: bool, key: tuple[bool, int, int], now_ms: int) -> bool:
        """Evict a stale session, else the least valuable evictable one worth less than key.

        Kafka's ``tryEvict``: the least recently used session goes if unused for longer
        than the eviction time; otherwise the smallest (privileged, size, id) among the
        sessions evictable by this kind of session goes if it is smaller than ``key``.
        """
        if not self._sessions:
            return False
        lru = min(self._sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now_ms - lru.last_used_ms > self.eviction_ms:
            self.remove(lru.id)
            self.evictions += 1
            return True
        candidates = [
            s
            for s in self._sessions.values()
            if (s.evictable_by_privileged if privileged else s.evictable_by_all)
        ]
        if not candidates:
            return False
        victim = min(candidates, key=FetchSession.eviction_key)
        if key < victim.eviction_key():
            return False
        self.remove(victim.id)
        self.evictions += 1
        return True

    def remove(self, session_id: int) -> FetchSession | None:
        """Drop a session; returns it, or None if it was not cached."""
        session = self._sessions.pop(session_id, None)
        if session is not None:
            self._num_partitions -= max(session.cached_size, 0)
            session.cached_size = -1
        return session

    def touch(self, session: FetchSession, now_ms: int) -> None:
        """Mark a session used now and re-rank it for eviction (Kafka's ``touch``)."""
        session.last_used_ms = now_ms
        if session.cached_size != -1:
            self._num_partitions -= session.cached_size
        session.cached_size = len(session.partitions)
        self._num_partitions += session.cached_size
        old = now_ms - session.creation_ms > self.eviction_ms
        session.evictable_by_privileged = not session.privileged or old
        session.evictable_by_all = old


@dataclass
class SessionResponse:
    """The session part of a Fetch response.

    Attributes:
        error_code: the response's top-level error code.
        session_id: the session the response belongs to (INVALID_SESSION_ID: none).
        partitions: the partition results to send, in fetch order.
    """

    error_code: int
    session_id: int
    partitions: dict[TopicPartition, FetchPartitionResult] = field(default_factory=dict)


class FetchContext:
    """What one Fetch request reads and how its response is built (Kafka's ``FetchContext``)."""

    def partitions(self) -> list[FetchPartition]:
        """List the partitions to read, in order."""
        raise NotImplementedError

    def response(self, results: dict[TopicPartition, FetchPartitionResult]) -> SessionResponse:
        """Build the response from the read results (keyed as :meth:`partitions`)."""
        raise NotImplementedError


class SessionErrorContext(FetchContext):
    """A session error: nothing is read, the response is the error alone."""

    def __init__(self, error_code: int) -> None:
        self.error_code = error_code

    def partitions(self) -> list[FetchPartition]:
        """None: the request's partitions are unknown without its session."""
        return []

    def response(self, results: dict[TopicPartition, FetchPartitionResult]) -> SessionResponse:
        """Answer the error with no session and no partitions."""
        return SessionResponse(self.error_code, INVALID_SESSION_ID)


class SessionlessFetchContext(FetchContext):
    """A fetch without a session: the request's partitions, all answered."""

    def __init__(self, fetch_data: dict[TopicPartition, FetchPartition]) -> None:
        self.fetch_data = fetch_data

    def partitions(self) -> list[FetchPartition]:
        """List the request's partitions."""
        return list(self.fetch_data.values())

    def response(self, results: dict[TopicPartition, FetchPartitionResult]) -> SessionResponse:
        """Every result, session id 0."""
        return SessionResponse(0, INVALID_SESSION_ID, results)


class FullFetchContext(FetchContext):
    """A full fetch that opens a session when the cache takes it (Kafka's ``FullFetchContext``).

    Args:
        cache: the session cache.
        fetch_data: the request's partitions.
        privileged: the fetch is a follower's.
        clock: the time now, ms.
    """

    def __init__(
        self,
        cache: FetchSessionCache,
        fetch_data: dict[TopicPartition, FetchPartition],
        privileged: bool,
        clock: Callable[[], int],
    ) -> None:
        self.cache = cache
        self.fetch_data = fetch_data
        self.privileged = privileged
        self.clock = clock

    def partitions(self) -> list[FetchPartition]:
        """List the request's partitions."""
        return list(self.fetch_data.values())

    def response(self, results: dict[TopicPartition, FetchPartitionResult]) -> SessionResponse:
        """Every result; the session id of a new session caching them, or 0."""

        def create() -> dict[TopicPartition, CachedPartition]:
            return {
                tp: CachedPartition(self.fetch_data[tp], r.high_watermark, r.log_start_offset)
                for tp, r in results.items()
                if tp in self.fetch_data
            }

        session_id = self.cache.maybe_create_session(
            self.clock(), self.privileged, len(results), create
        )
        return SessionResponse(0, session_id, results)


class IncrementalFetchContext(FetchContext):
    """An incremental fetch of a cached session (Kafka's ``IncrementalFetchContext``).

    Args:
        request_epoch: the request's session epoch.
        session: the session, already updated by the request (its epoch advanced).
    """

    def __init__(self, request_epoch: int, session: FetchSession) -> None:
        self.request_epoch = request_epoch
        self.session = session

    def partitions(self) -> list[FetchPartition]:
        """Every partition of the session, with its cached parameters."""
        return [cached.request for cached in self.session.partitions.values()]

    def response(self, results: dict[TopicPartition, FetchPartitionResult]) -> SessionResponse:
        """Keep the results with news; INVALID_FETCH_SESSION_EPOCH if another request intervened.

        A partition that returned records moves to the end of the session's order.
        """
        session = self.session
        if session.epoch != next_epoch(self.request_epoch):
            # Another request used the session while this one waited (a duplicate).
            return SessionResponse(INVALID_FETCH_SESSION_EPOCH, session.id)
        changed: dict[TopicPartition, FetchPartitionResult] = {}
        for tp, result in results.items():
            cached = session.partitions.get(tp)
            if cached is None:  # forgotten by a later request meanwhile
                continue
            if cached.must_respond(result, update=True):
                changed[tp] = result
                if result.records is not None and result.records.slices:
                    del session.partitions[tp]
                    session.partitions[tp] = cached
        return SessionResponse(0, session.id, changed)


class FetchManager:
    """Creates the fetch context of each Fetch request (Kafka's ``FetchManager``).

    Args:
        cache: the session cache.
        clock: the time now, ms.
    """

    def __init__(self, cache: FetchSessionCache, clock: Callable[[], int]) -> None:
        self.cache = cache
        self.clock = clock

    def new_context(
        self,
        metadata: FetchMetadata,
        is_follower: bool,
        fetch_data: dict[TopicPartition, FetchPartition],
        to_forget: list[TopicPartition],
    ) -> FetchContext:
        """Create the context of a request (Kafka's ``FetchManager.newContext``).

        A full fetch closes the session it names; with FINAL_EPOCH it stays sessionless,
        with INITIAL_EPOCH it may open a new session. An incremental fetch must name a
        cached session (else FETCH_SESSION_ID_NOT_FOUND) at its current epoch (else
        INVALID_FETCH_SESSION_EPOCH); a session left without partitions is closed and the
        fetch served sessionless.

        Args:
            metadata: the request's session id and epoch.
            is_follower: a replica fetch (its session is privileged).
            fetch_data: the partitions the request names.
            to_forget: the partitions it asks to drop from its session.
        """
        if metadata.is_full:
            if metadata.session_id != INVALID_SESSION_ID:
                self.cache.remove(metadata.session_id)
            if metadata.epoch == FINAL_EPOCH:
                return SessionlessFetchContext(fetch_data)
            return FullFetchContext(self.cache, fetch_data, is_follower, self.clock)
        session = self.cache.get(metadata.session_id)
        if session is None:
            return SessionErrorContext(FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != metadata.epoch:
            return SessionErrorContext(INVALID_FETCH_SESSION_EPOCH)
        session.update(fetch_data, to_forget)
        if not session.partitions:
            self.cache.remove(session.id)
            return SessionlessFetchContext(fetch_data)
        self.cache.touch(session, self.clock())
        session.epoch = next_epoch(session.epoch)
        return IncrementalFetchContext(metadata.epoch, session)


#: Kafka's ``KafkaServer.MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS`` (a constant, not a config).
MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS = 120000


def new_fetch_manager(cache_slots: int) -> FetchManager:
    """Create the broker's fetch manager over a cache of ``cache_slots`` sessions.

    Args:
        cache_slots: ``max.incremental.fetch.session.cache.slots`` (0: every fetch is
            served sessionless).
    """
    cache = FetchSessionCache(cache_slots, MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS)
    return FetchManager(cache, now_ms)
