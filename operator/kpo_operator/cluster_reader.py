"""One cluster read shared by every object of a Kafka cluster (I/O edge, batching).

Each reconcile step of a PartitionReassignment needs the cluster as it is now: DescribeCluster,
ListPartitionReassignments, Metadata of its topics and DescribeLogDirs of their replicas
(:func:`~kpo_operator.cluster.read_cluster`). Read per object, that is four requests and
more (one DescribeLogDirs per broker) per object per poll interval, so the Admin API load
grows with the number of objects. :class:`SharedClusterReader` reads once for all of them:

- a read younger than ``max_age_s`` that covers the topics asked for (and the replica
  sizes, if asked) is shared: the step's snapshot is composed from it
  (:func:`~kpo_operator.cluster.compose_snapshot`) without a request;
- a read older than that is still shared, up to ``serve_stale_s``, while a newer read
  covering the same topics is in flight (stale while refreshing): waiting for it made
  every worker thread wait for the brokers' answer, so steps per second were bounded by
  the read's latency (workers / latency), not by the operator's CPU;
- otherwise a caller waits for a read in flight that covers its topics, or reads: the
  union of the topics asked for in the last :data:`INTEREST_READS` read intervals (or
  ``serve_stale_s``, if longer) when no other such *wide* read is in flight; else it
  shares the last read up to ``serve_stale_s`` (the wide read in flight refreshes it),
  and reads only its own topics when that read does not cover them (a topic new to the
  reader; a slow read of other objects' topics never holds a step up). A read
  of one caller's topics never replaces a wider shared read it does not cover: under
  load, when reads overlapped, each step then read its own topics and the wide read was
  never made again (about one read per step instead of one per ``max_age_s``);
- :meth:`SharedClusterReader.invalidate` (after an AlterPartitionReassignments of the
  operator) makes the next read fresh: a step never decides on a view from before its
  own object's submission. A read in flight when invalidated is not shared afterwards.

Metadata of every topic (which brokers an acceptance drains, KIP-1066 cordons) is shared
the same way (:meth:`SharedClusterReader.every_topic`): one request per ``max_age_s`` for
all acceptances, not one per acceptance.

So Kafka is asked about ``1 / max_age_s`` times a second whatever the number of objects;
each answer grows with the partitions of the objects still moving, as one object's did.
Log dir paths (asked only for ``logDirs`` moves) are read per call.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from kpo_kafka.admin import KafkaAdmin
from kpo_kafka.admin_types import (
    ClusterInfo,
    PartitionInfo,
    Reassignment,
    ReplicaDirInfo,
    ReplicaKey,
)
from kpo_kafka.topic_partition import TopicPartition
from kpo_operator.cluster import (
    ClusterSnapshot,
    compose_snapshot,
    read_cluster,
    replica_hosts,
    topic_states,
)
from kpo_operator.cordons import replica_counts

#: A topic asked for within this many read intervals is included in every shared read.
INTEREST_READS = 4


@dataclass(frozen=True)
class _Read:
    """The Admin API answers of one shared read, indexed by topic.

    A step composes its snapshot from its own topics' entries only: the whole cluster's
    in-flight partitions and replicas (every object's) would make each step cost as
    much as all the objects' partitions together.

    Attributes:
        in_flight: topic -> its partitions in flight (ListPartitionReassignments).
        replicas: topic -> its replicas' log dirs and sizes (DescribeLogDirs).
    """

    at: float
    generation: int
    topics: frozenset[str]
    sized: bool
    cluster: ClusterInfo
    in_flight: dict[str, dict[TopicPartition, Reassignment]]
    described: dict[str, dict[int, PartitionInfo]]
    replicas: dict[str, dict[ReplicaKey, ReplicaDirInfo]]
    states: dict[str, dict[int, PartitionInfo]] = field(default_factory=dict)

    def states_of(self, topics: Collection[str]) -> dict[str, dict[int, PartitionInfo]]:
        """:func:`~kpo_operator.cluster.topic_states` of ``topics``, built once per read.

        Every step sharing this read takes the same (never changed) per-topic states;
        two steps building one topic at once build equal ones (harmless).
        """
        found: dict[str, dict[int, PartitionInfo]] = {}
        for topic in topics:
            if (built := self.states.get(topic)) is None:
                partitions = self.described.get(topic)
                if partitions is None:
                    continue
                built = topic_states(topic, partitions, self.in_flight.get(topic, {}))
                self.states[topic] = built
            found[topic] = built
        return found


@dataclass
class _Pending:
    """A read in flight that callers wanting some of its topics wait for."""

    topics: frozenset[str]
    sized: bool
    generation: int
    wide: bool = True
    done: threading.Event = field(default_factory=threading.Event)
    result: _Read | None = None


@dataclass(frozen=True)
class EveryTopic:
    """Metadata of every topic of the cluster, shared by the steps that need it.

    Attributes:
        at: When it was read (monotonic seconds).
        generation: The reader's generation then (an invalidate makes it stale).
        topics: topic -> partition -> :class:`PartitionInfo` (Metadata).
        counts: broker id -> partitions with a replica on it
            (:func:`~kpo_operator.cordons.replica_counts`).
    """

    at: float
    generation: int
    topics: dict[str, dict[int, PartitionInfo]]
    counts: dict[int, int]


class SharedClusterReader:
    """Cluster snapshots for many objects of one Kafka cluster from one read per interval.

    Args:
        admin: The cluster's Admin API client (used from several threads).
        max_age_s: How old a shared read may be, seconds; ``<= 0`` reads per call (no
            sharing, :func:`~kpo_operator.cluster.read_cluster`).
        clock: Monotonic seconds.
        observe: Called with ``"fresh"`` or ``"shared"`` for each snapshot (metrics).
        serve_stale_s: How old a shared read may be while a newer one covering it is in
            flight, seconds (default ``4 * max_age_s``); older, callers wait for the new one.

    Errors: ``KafkaAdminError`` of the reads propagates to the caller whose read failed;
    callers waiting for it read again themselves.
    """

    def __init__(
        self,
        admin: KafkaAdmin,
        max_age_s: float,
        clock: Callable[[], float] = time.monotonic,
        observe: Callable[[str], None] | None = None,
        serve_stale_s: float | None = None,
    ) -> None:
        self.admin = admin
        self.max_age_s = max_age_s
        self.serve_stale_s = 4 * max_age_s if serve_stale_s is None else serve_stale_s
        self.clock = clock
        self._observe = observe or (lambda _: None)
        self._lock = threading.Lock()
        self._generation = 0
        self._last: _Read | None = None
        self._pending: list[_Pending] = []
        self._interest: dict[str, float] = {}
        self._every: EveryTopic | None = None
        self._every_lock = threading.Lock()  # one Metadata of every topic at a time

    def every_topic(self) -> EveryTopic:
        """Metadata of every topic, read at most once per ``max_age_s`` for all callers.

        Callers arriving while it is read wait for that read and share it (its age counts
        from when they asked: under load a read may take longer than ``max_age_s``, and
        each waiting caller reading again would serialise one read per caller); an
        :meth:`invalidate` makes the next call read again. With ``max_age_s <= 0`` every
        call reads.

        Raises:
            KafkaAdminError: The read failed.
        """
        asked = self.clock()
        with self._every_lock:
            with self._lock:
                found, generation, now = self._every, self._generation, self.clock()
            if (
                found is not None
                and found.generation == generation
                and min(now, asked) - found.at < self.max_age_s
            ):
                self._observe("shared")
                return found
            topics = self.admin.describe_topics(None)
            found = EveryTopic(now, generation, topics, replica_counts(topics))
            with self._lock:
                self._every = found
            self._observe("fresh")
            return found

    def invalidate(self) -> None:
        """Forget the shared read: the next snapshot comes from a new read."""
        with self._lock:
            self._generation += 1
            self._last = None

    def read(
        self,
        topics: Collection[str],
        *,
        replica_sizes: bool = False,
        log_dirs_of: Collection[int] = (),
    ) -> ClusterSnapshot:
        """Return a snapshot of ``topics``, as :func:`~kpo_operator.cluster.read_cluster`.

        Raises:
            KafkaAdminError: The read failed (``KafkaUnavailableError``: retry later).
        """
        if self.max_age_s <= 0:
            self._observe("fresh")
            return read_cluster(
                self.admin, topics, replica_sizes=replica_sizes, log_dirs_of=log_dirs_of
            )
        wanted = frozenset(topics)
        last = self._shared_or_own(wanted, replica_sizes)
        described = {t: last.described[t] for t in wanted if t in last.described}
        live_dirs = sorted({b for b in log_dirs_of if b in last.cluster.brokers})
        log_dirs = self.admin.log_dir_paths(live_dirs) if live_dirs else {}
        in_flight: dict[TopicPartition, Reassignment] = {}
        replicas: dict[ReplicaKey, ReplicaDirInfo] = {}
        for topic in described:
            in_flight.update(last.in_flight.get(topic, {}))
            if replica_sizes:
                replicas.update(last.replicas.get(topic, {}))
        states = last.states_of(described)
        return compose_snapshot(last.cluster, in_flight, described, replicas, log_dirs, states)

    def _shared_or_own(self, wanted: frozenset[str], sized: bool) -> _Read:
        """Return a usable shared read, the in-flight read covering ``wanted``, or a new one.

        A new read covers every recent interest when no other read is in flight, else
        only ``wanted`` (so a slow read of other topics never holds this caller up).
        """
        with self._lock:
            now = self.clock()
            for topic in wanted:
                self._interest[topic] = now
            if (last := self._usable(wanted, sized, now)) is not None:
                self._observe("shared")
                return last
            covering = next(
                (
                    p
                    for p in self._pending
                    if p.generation == self._generation
                    and wanted <= p.topics
                    and (p.sized or not sized)
                ),
                None,
            )
            if covering is not None and (
                stale := self._usable(wanted, sized, now, self.serve_stale_s)
            ):
                self._observe("shared")
                return stale  # a newer read is on its way; this step need not wait for it
            if covering is None:
                # Reads of an older generation (before an invalidate) do not count: with
                # them still in flight, each caller read only its own topics, every step
                # after a submission one more read of the already slow brokers. Nor do
                # reads of one caller's topics: with those in flight (they overlap under
                # load), no wide read was made again and every step read for itself.
                wide = not any(p.generation == self._generation and p.wide for p in self._pending)
                if not wide and (stale := self._usable(wanted, sized, now, self.serve_stale_s)):
                    self._observe("shared")
                    return stale  # the wide read in flight refreshes it
                if wide:
                    # Steps come once per poll interval, or slower under load: a topic
                    # stays of interest as long as its read may be served stale, else
                    # each read covered only the last few objects and the others read
                    # for themselves, several reads at once on already slow brokers.
                    horizon = now - max(INTEREST_READS * self.max_age_s, self.serve_stale_s)
                    self._interest = {t: at for t, at in self._interest.items() if at >= horizon}
                    topics = frozenset(self._interest) | wanted
                    sized = sized or (self._last is not None and self._last.sized)
                else:
                    topics = wanted
                mine = _Pending(topics, sized, self._generation, wide)
                self._pending.append(mine)
        if covering is not None:
            covering.done.wait()
            if covering.result is not None:
                self._observe("shared")
                return covering.result
            return self._shared_or_own(wanted, sized)  # its read failed: try again
        try:
            mine.result = self._read_now(mine)
        finally:
            with self._lock:
                self._pending.remove(mine)
            mine.done.set()
        self._observe("fresh")
        return mine.result

    def _usable(
        self, wanted: frozenset[str], sized: bool, now: float, max_age_s: float | None = None
    ) -> _Read | None:
        """Return the last read if it covers ``wanted`` (and sizes), is current and young enough."""
        last = self._last
        if (
            last is None
            or last.generation != self._generation
            or now - last.at >= (self.max_age_s if max_age_s is None else max_age_s)
            or not wanted <= last.topics
            or (sized and not last.sized)
        ):
            return None
        return last

    def _read_now(self, pending: _Pending) -> _Read:
        """Read ``pending``'s topics; share the read unless a wider one is fresh."""
        started = self.clock()
        cluster = self.admin.describe_cluster()
        in_flight = self.admin.list_partition_reassignments()
        topics = pending.topics
        described = self.admin.describe_topics(sorted(topics)) if topics else {}
        replicas: dict[ReplicaKey, ReplicaDirInfo] = {}
        if pending.sized and described:
            hosts = replica_hosts(described, in_flight) & set(cluster.brokers)
            if hosts:
                replicas = self.admin.describe_log_dirs(sorted(hosts), sorted(described))
        in_flight_of: dict[str, dict[TopicPartition, Reassignment]] = {}
        for tp, reassignment in in_flight.items():
            in_flight_of.setdefault(tp[0], {})[tp] = reassignment
        replicas_of: dict[str, dict[ReplicaKey, ReplicaDirInfo]] = {}
        for key, info in replicas.items():
            replicas_of.setdefault(key[1], {})[key] = info
        read = _Read(
            started,
            pending.generation,
            topics,
            pending.sized,
            cluster,
            in_flight_of,
            described,
            replicas_of,
        )
        with self._lock:
            last = self._last
            covers = topics >= last.topics and (pending.sized or not last.sized) if last else True
            if pending.generation == self._generation and (
                last is None
                or last.generation != pending.generation
                or covers
                or (pending.wide and started - last.at >= self.max_age_s)
            ):
                self._last = read
        return read
