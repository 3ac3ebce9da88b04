"""One partition replica on this broker: leader or follower state, ISR and high watermark.

Pure logic over a :class:`~kpo_broker.log.log.Log`: no ZooKeeper or network I/O here.
An ISR change is returned to the caller as an :class:`IsrChange` proposal; the replica
manager writes it to ZooKeeper (compare-and-set on the partition state znode) and then
calls :meth:`Partition.apply_isr_change`. This mirrors Kafka's ``Partition``
(``updateFollowerFetchState``, ``maybeIncrementLeaderHW``, ``maybeExpandIsr``,
``maybeShrinkIsr``): the leader keeps a view of every follower's LEO, updated from the
fetch offset of each replica fetch; the leader's HW is the minimum LEO of the ISR; a
follower's HW is min(its LEO, the leader's HW); an ISR member that has not caught up
within ``replica.lag.time.max.ms`` is removed, and a follower that reaches the HW is
added back.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from kpo_broker.log.errors import OffsetOutOfRangeError
from kpo_broker.log.info import LogAppendInfo
from kpo_broker.log.log import Log
from kpo_broker.server.errors import (
    FencedLeaderEpochError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    UnknownLeaderEpochError,
)

#: Unknown log end offset of a remote replica (no fetch seen yet).
UNKNOWN_OFFSET = -1


@dataclass(frozen=True)
class LeaderAndIsrState:
    """The state the controller sent for this partition in a LeaderAndIsr request.

    Kafka's ``LeaderAndIsrPartitionState`` as ``Partition.makeLeader`` and
    ``makeFollower`` take it, decoded from the wire struct of the same name
    (:data:`kpo_broker.protocol.interbroker.LeaderAndIsrPartitionState`) into typed fields.

    Attributes:
        controller_epoch: epoch of the controller that decided this state.
        leader: broker id of the leader.
        leader_epoch: bumped at every leader change (and on reassignment completion).
        isr: in-sync replica broker ids.
        partition_epoch: version of the ZooKeeper state znode (Kafka's ``zkVersion``),
            used for compare-and-set ISR updates.
        replicas: assigned replicas (AR), preferred leader first.
        adding_replicas: replicas being added by a reassignment (RAR - OAR).
        removing_replicas: replicas being removed by a reassignment (OAR - RAR).
        is_new: the partition was just created.
    """

    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    is_new: bool = False


@dataclass
class RemoteReplica:
    """The leader's view of one follower (Kafka's ``Replica``).

    Attributes:
        broker_id: the follower's broker id.
        log_end_offset: its LEO as learnt from its last fetch offset (-1 unknown).
        last_caught_up_time_ms: last time its fetch reached the leader's LEO as of an
            earlier fetch; drives the ``replica.lag.time.max.ms`` ISR shrink.
        last_fetch_leader_log_end_offset: leader LEO when the previous fetch was served.
        last_fetch_time_ms: time the previous fetch was served.
        log_start_offset: its log start offset as sent in its last fetch (-1 unknown),
            for the low watermark of DeleteRecords (KIP-107).
    """

    broker_id: int
    log_end_offset: int = UNKNOWN_OFFSET
    last_caught_up_time_ms: int = 0
    last_fetch_leader_log_end_offset: int = UNKNOWN_OFFSET
    last_fetch_time_ms: int = 0
    log_start_offset: int = UNKNOWN_OFFSET

    def update_fetch_state(
        self, fetch_offset: int, leader_log_end_offset: int, now_ms: int
    ) -> None:
        """Record a follower fetch at ``fetch_offset`` (its LEO), given the leader LEO then.

        The follower counts as caught up at ``now_ms`` when it fetched at the leader's
        LEO; otherwise, when it reached the LEO the leader had at its previous fetch,
        it was caught up as of that previous fetch (Kafka's two-step rule).
        """
        if fetch_offset >= leader_log_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, now_ms)
        elif fetch_offset >= self.last_fetch_leader_log_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, self.last_fetch_time_ms)
        self.log_end_offset = fetch_offset
        self.last_fetch_leader_log_end_offset = leader_log_end_offset
        self.last_fetch_time_ms = now_ms


@dataclass(frozen=True)
class IsrChange:
    """A proposed ISR for a partition this broker leads, to be written to ZooKeeper.

    Attributes:
        leader_epoch: the leader epoch it was computed under (unchanged by ISR updates).
        isr: the new ISR.
        expected_partition_epoch: the state znode version it must replace (CAS).
    """

    leader_epoch: int
    isr: tuple[int, ...]
    expected_partition_epoch: int


@dataclass
class Partition:
    """A partition replica hosted by this broker, leader or follower.

    Args:
        topic: topic name.
        partition: partition index.
        local_broker_id: this broker's ``broker.id``.
        log: the local replica's log.
        high_watermark: the HW (from the ``replication-offset-checkpoint`` on start).

    ``leadership`` counts the times this broker became the partition's leader (from
    follower or new); it does not change when the leader stays under a newer leader
    epoch. A produce request waiting for acks=all completes with NOT_LEADER_OR_FOLLOWER
    only when it changed (Kafka's ``DelayedProduce``).

    The HW advances over the :attr:`maximal_isr`, not only the committed ``isr``: a
    follower whose addition is being written (or whose write's outcome is unknown) may
    already be in the ISR ZooKeeper holds, and the controller may elect it; so the leader
    acknowledges no record that follower lacks (Kafka's ``PartitionState.maximalIsr``,
    KIP-497).
    """

    topic: str
    partition: int
    local_broker_id: int
    log: Log
    high_watermark: int = 0
    controller_epoch: int = -1
    leader_id: int | None = None
    leader_epoch: int = -1
    partition_epoch: int = -1
    isr: tuple[int, ...] = ()
    replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    remote_replicas: dict[int, RemoteReplica] = field(default_factory=dict)
    pending_isr: IsrChange | None = None
    unconfirmed_isr_additions: frozenset[int] = frozenset()
    leadership: int = 0

    def __post_init__(self) -> None:
        self.high_watermark = min(
            max(self.high_watermark, self.log.log_start_offset), self.log.log_end_offset
        )

    # ----------------------------------------------------------------- roles
    @property
    def is_leader(self) -> bool:
        """Whether this broker is the partition's leader."""
        return self.leader_id == self.local_broker_id

    @property
    def log_end_offset(self) -> int:
        """The local replica's LEO."""
        return self.log.log_end_offset

    def _apply_state(self, state: LeaderAndIsrState) -> None:
        self.controller_epoch = state.controller_epoch
        self.leader_id = state.leader
        self.leader_epoch = state.leader_epoch
        self.partition_epoch = state.partition_epoch
        self.isr = tuple(state.isr)
        self.replicas = tuple(state.replicas)
        self.adding_replicas = tuple(state.adding_replicas)
        self.removing_replicas = tuple(state.removing_replicas)
        self.pending_isr = None
        self.unconfirmed_isr_additions = frozenset()

    def make_leader(self, state: LeaderAndIsrState, now_ms: int) -> bool:
        """Become (or stay) leader under ``state``; return True if this is a new leader epoch.

        The new leader epoch starts at the local LEO in the leader epoch cache (KIP-101);
        every follower's state is reset: unknown LEO, ISR members considered caught up now.
        Becoming leader (not staying leader under a newer epoch, as after the controller
        removed a dead follower from the ISR) starts a new :attr:`leadership`.
        """
        if not self.is_leader:
            self.leadership += 1
        is_new_epoch = state.leader_epoch > self.leader_epoch or not self.is_leader
        self._apply_state(state)
        if is_new_epoch:
            self.log.leader_epoch_cache.assign(state.leader_epoch, self.log.log_end_offset)
            self.remote_replicas = {
                r: RemoteReplica(r, last_caught_up_time_ms=now_ms if r in self.isr else 0)
                for r in state.replicas
                if r != self.local_broker_id
            }
        else:
            for r in state.replicas:
                if r != self.local_broker_id and r not in self.remote_replicas:
                    self.remote_replicas[r] = RemoteReplica(r)
            for r in list(self.remote_replicas):
                if r not in state.replicas:
                    del self.remote_replicas[r]
        self.maybe_increment_high_watermark()
        return is_new_epoch

    def make_follower(self, state: LeaderAndIsrState) -> bool:
        """Become (or stay) a follower under ``state``; return True if the leader changed."""
        leader_changed = self.leader_id != state.leader or state.leader_epoch > self.leader_epoch
        self._apply_state(state)
        self.remote_replicas = {}
        return leader_changed

    # ---------------------------------------------------------------- epochs
    def check_leader_epoch(self, requested_epoch: int) -> None:
        """Validate a request's ``current_leader_epoch`` (KIP-320); -1 skips the check.

        Raises:
            FencedLeaderEpochError: the request's epoch is older than ours.
            UnknownLeaderEpochError: the request's epoch is newer than ours.
        """
        if requested_epoch < 0:
            return
        if requested_epoch < self.leader_epoch:
            raise FencedLeaderEpochError(f"{self.topic}-{self.partition}: {requested_epoch}")
        if requested_epoch > self.leader_epoch:
            raise UnknownLeaderEpochError(f"{self.topic}-{self.partition}: epoch {requested_epoch}")

    def require_leader(self, requested_epoch: int = -1) -> None:
        """Raise unless this broker leads the partition at ``requested_epoch`` (-1: any).

        Raises:
            NotLeaderOrFollowerError: this broker is not the leader.
            FencedLeaderEpochError, UnknownLeaderEpochError: see :meth:`check_leader_epoch`.
        """
        self.check_leader_epoch(requested_epoch)
        if not self.is_leader:
            raise NotLeaderOrFollowerError(f"{self.topic}-{self.partition}")

    # ---------------------------------------------------------------- writes
    def append_records_to_leader(
        self, records: bytes, required_acks: int, min_insync_replicas: int, now_ms: int
    ) -> LogAppendInfo:
        """Append a produce request's records as leader.

        Args:
            records: v2 record batches as sent by the producer.
            required_acks: 0, 1 or -1 (all).
            min_insync_replicas: the topic's ``min.insync.replicas``.
            now_ms: wall clock, ms.

        Raises:
            NotLeaderOrFollowerError: this broker does not lead the partition.
            NotEnoughReplicasError: acks=all and ISR size < ``min.insync.replicas``.
            kpo_broker.log errors: invalid records (corrupt, too large).
        """
        self.require_leader()
        if required_acks == -1 and len(self.isr) < min_insync_replicas:
            raise NotEnoughReplicasError(
                f"{self.topic}-{self.partition}: ISR {list(self.isr)} is smaller than "
                f"min.insync.replicas={min_insync_replicas}"
            )
        info = self.log.append_as_leader(records, self.leader_epoch, now_ms)
        self.maybe_increment_high_watermark()
        return info

    def append_records_as_follower(self, records: bytes, leader_high_watermark: int) -> None:
        """Append records fetched from the leader and move the HW to min(LEO, leader HW)."""
        if records:
            self.log.append_as_follower(records)
        self.update_follower_high_watermark(leader_high_watermark)

    def update_follower_high_watermark(self, leader_high_watermark: int) -> None:
        """Set a follower's HW to min(its LEO, the leader's HW).

        As Kafka's ``ReplicaFetcherThread.processPartitionData``.
        """
        new_hw = min(self.log.log_end_offset, leader_high_watermark)
        if new_hw > self.high_watermark:
            self.high_watermark = new_hw

    # ---------------------------------------------------------- ISR and HW
    def update_follower_fetch_state(
        self, follower_id: int, fetch_offset: int, now_ms: int, log_start_offset: int = -1
    ) -> bool:
        """Record a replica fetch from ``follower_id`` at ``fetch_offset``.

        Args:
            follower_id: the fetching replica.
            fetch_offset: its fetch offset (its LEO).
            now_ms: wall clock, ms.
            log_start_offset: its log start offset from the request (Fetch v5+), -1 unknown.

        Returns:
            True if the HW or the low watermark increased (delayed produces, fetches and
            DeleteRecords may complete).

        Raises:
            NotLeaderOrFollowerError: not leader, or the fetcher is not an assigned replica.
        """
        self.require_leader()
        replica = self.remote_replicas.get(follower_id)
        if replica is None:
            raise NotLeaderOrFollowerError(
                f"{self.topic}-{self.partition}: broker {follower_id} is not a replica"
            )
        replica.update_fetch_state(fetch_offset, self.log.log_end_offset, now_ms)
        start_moved = log_start_offset > replica.log_start_offset
        if log_start_offset >= 0:
            replica.log_start_offset = log_start_offset
        return self.maybe_increment_high_watermark() or start_moved

    def low_watermark(self, alive: Callable[[int], bool]) -> int:
        """Return the smallest log start offset of the live replicas (Kafka's lowWatermarkIfLeader).

        The leader's own, and each follower's as sent in its fetches (-1 while unknown)
        whose broker is alive.

        Raises:
            NotLeaderOrFollowerError: this broker does not lead the partition.
        """
        self.require_leader()
        low = self.log.log_start_offset
        for replica in self.remote_replicas.values():
            if alive(replica.broker_id) and replica.log_start_offset < low:
                low = replica.log_start_offset
        return low

    def delete_records_on_leader(self, offset: int) -> int:
        """Raise the log start offset to ``offset`` (-1: the HW) as leader; return the offset.

        Kafka's ``Partition.deleteRecordsOnLeader`` (KIP-107); the segments below it go at
        the next retention pass, followers follow through their fetches.

        Raises:
            NotLeaderOrFollowerError: this broker does not lead the partition.
            OffsetOutOfRangeError: ``offset`` is negative (but -1) or above the HW.
        """
        self.require_leader()
        requested = self.high_watermark if offset == -1 else offset
        if requested < 0:
            raise OffsetOutOfRangeError(
                f"The offset {offset} for partition {self.topic}-{self.partition} is not valid"
            )
        self.log.maybe_increment_log_start_offset(requested, self.high_watermark)
        return requested

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        """The committed ISR plus the followers that may be in it already.

        Those are the additions of the ISR change being written (``pending_isr``) and
        those of a write whose outcome is unknown (``unconfirmed_isr_additions``, kept until
        a later compare-and-set succeeds or the controller's next LeaderAndIsr). A shrink
        being written removes no one here until it is committed (Kafka's ``maximalIsr``).
        """
        extra = set(self.unconfirmed_isr_additions)
        if self.pending_isr is not None:
            extra.update(self.pending_isr.isr)
        return self.isr + tuple(sorted(b for b in extra if b not in self.isr))

    def maybe_increment_high_watermark(self) -> bool:
        """Advance the leader's HW to the minimum LEO across the maximal ISR.

        Returns:
            True if the HW moved. Kafka's ``Partition.maybeIncrementLeaderHW`` over
            ``maximalIsr``: a follower being added to the ISR holds the HW back as a
            member does, so no acks=all record is acknowledged that a leader the
            controller elects from the ZooKeeper ISR could lack.
        """
        if not self.is_leader:
            return False
        offsets = [self.log.log_end_offset]
        for broker_id in self.maximal_isr:
            if broker_id == self.local_broker_id:
                continue
            replica = self.remote_replicas.get(broker_id)
            offsets.append(replica.log_end_offset if replica else UNKNOWN_OFFSET)
        new_hw = min(offsets)
        if new_hw > self.high_watermark:
            self.high_watermark = new_hw
            return True
        return False

    def propose_isr_expansion(self, follower_id: int) -> IsrChange | None:
        """Propose adding ``follower_id`` to the ISR once its LEO reaches the HW.

        A follower joins when it is an assigned replica, not in the ISR, its LEO is at
        least the HW, and it has reached the current leader epoch's start offset.
        """
        if not self.is_leader or self.pending_isr is not None or follower_id in self.isr:
            return None
        replica = self.remote_replicas.get(follower_id)
        if replica is None or replica.log_end_offset < self.high_watermark:
            return None
        epoch_start = self.log.leader_epoch_cache.start_offset_of(self.leader_epoch)
        if epoch_start is not None and replica.log_end_offset < epoch_start:
            return None
        return self._propose((*self.isr, follower_id))

    def propose_isr_shrink(self, now_ms: int, replica_lag_time_max_ms: int) -> IsrChange | None:
        """Propose removing ISR members that have not caught up for ``replica.lag.time.max.ms``."""
        if not self.is_leader or self.pending_isr is not None:
            return None
        lagging = {
            r
            for r in self.isr
            if r != self.local_broker_id
            and (
                (replica := self.remote_replicas.get(r)) is None
                or now_ms - replica.last_caught_up_time_ms > replica_lag_time_max_ms
            )
        }
        if not lagging:
            return None
        return self._propose(tuple(r for r in self.isr if r not in lagging))

    def _propose(self, isr: tuple[int, ...]) -> IsrChange:
        change = IsrChange(self.leader_epoch, isr, self.partition_epoch)
        self.pending_isr = change
        return change

    def apply_isr_change(
        self, change: IsrChange, new_partition_epoch: int | None, *, unknown: bool = False
    ) -> bool:
        """Apply the outcome of writing ``change`` to ZooKeeper.

        Args:
            change: the proposal returned by a ``propose_*`` method.
            new_partition_epoch: the state znode's new version, or None when it was not
                written: the compare-and-set failed (the controller changed the state; the
                next LeaderAndIsr request brings it), or the write's outcome is unknown.
            unknown: the write failed without an answer (connection loss, a timeout): it
                may have been applied, so the followers it added keep counting for the HW
                (:attr:`maximal_isr`) until a later write succeeds or a LeaderAndIsr
                arrives.

        Returns:
            True if the HW increased. An outcome that arrives after a LeaderAndIsr
            replaced the state (``pending_isr`` is no longer ``change``) is ignored: the
            controller's state is newer than anything this write could say (Kafka's
            ``Partition.handleAlterPartitionUpdate`` checks the proposed state likewise).
        """
        if self.pending_isr is not change:
            return False
        self.pending_isr = None
        if change.leader_epoch != self.leader_epoch:
            return False
        if new_partition_epoch is None:
            if unknown:
                added = {b for b in change.isr if b not in self.isr}
                self.unconfirmed_isr_additions = self.unconfirmed_isr_additions | added
            return self.maybe_increment_high_watermark()
        # The compare-and-set on the version this change expected succeeded, so no
        # earlier write of unknown outcome was applied (it would have moved the version).
        self.unconfirmed_isr_additions = frozenset()
        self.isr = change.isr
        self.partition_epoch = new_partition_epoch
        return self.maybe_increment_high_watermark()
