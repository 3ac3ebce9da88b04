"""Partition reassignment by the controller (KIP-455): the :class:`ReassignmentManager`.

Sources of reassignments: the AlterPartitionReassignments API, and the legacy
``/admin/reassign_partitions`` znode (``{"version":1,"partitions":[...]}``), read when it
is created and at failover; partitions are removed from the znode as they complete and
the znode is deleted when empty. An API request for a partition also listed in the
znode takes precedence and removes it from the znode.

One reassignment (RAR = target, OAR = original replicas, Kafka's
``onPartitionReassignment``):

1. AR = RAR + OAR with ``adding_replicas`` = RAR - OAR, ``removing_replicas`` = OAR - RAR
   is written to ``/brokers/topics/<topic>`` (compare-and-set, controller-fenced); when
   the target changed, replicas no longer in AR are stopped and deleted;
2. until every replica of RAR is in the ISR: the leader epoch is bumped and
   LeaderAndIsr (with the adding/removing replicas) goes to RAR + OAR; the added
   replicas become NewReplica and start fetching;
3. once RAR is in the ISR (checked on each change of the partition's state znode; the
   changes queued together are handled as one batch, see ``_complete_reassignments``):
   RAR replicas go OnlineReplica, AR = RAR in the context, a leader is elected from RAR
   if the leader is not in RAR or not live (else the leader epoch is bumped), OAR - RAR
   go OfflineReplica -> StopReplica(delete) -> NonExistentReplica, AR = RAR is written
   to ZooKeeper, and every broker gets UpdateMetadata.

Every step re-reads what it compares with, so a reassignment resumed after a controller
failover (from the adding/removing replicas in ZooKeeper), a broker restart or a
leader change continues where it stopped.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial

from kpo_broker.controller import errors
from kpo_broker.controller.context import ControllerContext, PartitionAndReplica
from kpo_broker.controller.events import ReassignmentResults
from kpo_broker.controller.leader_election import ReassignPartitionLeaderElection
from kpo_broker.controller.partition_state_machine import PartitionStateMachine
from kpo_broker.controller.reassignment_plan import (
    build_reassignment,
    is_reassignment_complete,
    validate_target_replicas,
)
from kpo_broker.controller.replica_state_machine import ReplicaStateMachine
from kpo_broker.controller.request_batch import ControllerBrokerRequestBatch
from kpo_broker.controller.states import PartitionState, ReplicaState
from kpo_broker.controller.topic_deletion import TopicDeletionManager
from kpo_broker.controller.watches import ControllerWatches
from kpo_broker.zk.client import KafkaZkClient
from kpo_broker.zk.errors import ControllerMovedError
from kpo_broker.zk.model import NO_LEADER, LeaderIsrAndControllerEpoch, ReplicaAssignment
from kpo_kafka.topic_partition import TopicPartition

_log = logging.getLogger("kpo_broker.controller")

#: Compare-and-set attempts on one znode before a reassignment step gives up.
MAX_CAS_ATTEMPTS = 10


class ReassignmentManager:
    """Runs the active controller's partition reassignments (see module docstring).

    Called on the controller's event thread only, while the controller is active (the
    controller checks that before delegating). Its state lives in the context
    (``partitions_being_reassigned``, the full replica assignments).

    Args:
        context: the controller's context.
        zk: reads and fenced writes of assignments, partition states and
            ``/admin/reassign_partitions``.
        batch: collects the LeaderAndIsr requests of the flow.
        partition_state_machine: elects the leader from RAR.
        replica_state_machine: moves added and removed replicas.
        topic_deletion_manager: keeps the topic from being deleted while it moves.
        watches: watches the state znodes of the partitions being reassigned.
        send_update_metadata: sends UpdateMetadata (broker ids, partitions) once a
            reassignment completes (the controller's ``send_update_metadata_request``).
    """

    def __init__(
        self,
        context: ControllerContext,
        zk: KafkaZkClient,
        batch: ControllerBrokerRequestBatch,
        partition_state_machine: PartitionStateMachine,
        replica_state_machine: ReplicaStateMachine,
        topic_deletion_manager: TopicDeletionManager,
        watches: ControllerWatches,
        *,
        send_update_metadata: Callable[[Iterable[int], Iterable[TopicPartition]], None],
    ) -> None:
        self._context = context
        self._zk = zk
        self._batch = batch
        self._partition_state_machine = partition_state_machine
        self._replica_state_machine = replica_state_machine
        self._topic_deletion_manager = topic_deletion_manager
        self._watches = watches
        self._send_update_metadata = send_update_metadata

    # --- API and znode entry points -------------------------------------------------------

    def alter_partition_reassignments(
        self, reassignments: Mapping[TopicPartition, Sequence[int] | None]
    ) -> ReassignmentResults:
        """Validate and start (or change, or cancel) reassignments (AlterPartitionReassignments).

        Args:
            reassignments: partition -> target replicas (RAR), or None to cancel.

        Returns:
            partition -> (error code, message); invalid partitions get their error and
            are left unchanged.

        Raises:
            ControllerMovedError: a ZooKeeper write was fenced.
        """
        results, to_start = self._build_reassignments(reassignments)
        self._remove_from_zk_reassignment(lambda tp, _: tp in to_start)
        results.update(self._advance(to_start))
        return results

    def list_partition_reassignments(
        self, partitions: Iterable[TopicPartition] | None
    ) -> dict[TopicPartition, ReplicaAssignment]:
        """Return the running reassignments (ListPartitionReassignments).

        Args:
            partitions: the partitions to look at, or None for all.

        Returns:
            partition -> assignment (AR, adding, removing replicas) of those being
            reassigned, in partition order.
        """
        ctx = self._context
        wanted = ctx.partitions_being_reassigned if partitions is None else partitions
        listed: dict[TopicPartition, ReplicaAssignment] = {}
        for tp in sorted(wanted):
            assignment = ctx.partition_full_replica_assignment(tp)
            if assignment is not None and assignment.is_being_reassigned:
                listed[tp] = assignment
        return listed

    def start_zk_partition_reassignments(self) -> set[TopicPartition]:
        """Start the reassignments listed in ``/admin/reassign_partitions``.

        Partitions that cannot be reassigned are logged and removed from the znode.

        Returns:
            the partitions whose reassignment started (or completed at once).

        Raises:
            ControllerMovedError: a ZooKeeper write was fenced.
        """
        requested = self._zk.get_partition_reassignment()
        if not requested:
            return set()
        results, to_start = self._build_reassignments(dict(requested))
        results.update(self._advance(to_start))
        failed = {tp for tp, (code, _) in results.items() if code != errors.NONE}
        if failed:
            _log.warning(
                "reassignments of %s from the znode failed: %s",
                sorted(str(tp) for tp in failed),
                {str(tp): results[tp] for tp in sorted(failed)},
            )
            self._remove_from_zk_reassignment(lambda tp, _: tp in failed)
        return set(results) - failed

    def on_partition_isr_changes(self, partitions: Iterable[TopicPartition]) -> None:
        """Complete the reassignments of ``partitions`` whose RAR all joined the ISR.

        Kafka's ``processPartitionReassignmentIsrChange``, for every partition whose state
        znode changed since the last call at once (the controller drains the queued
        :class:`~kpo_broker.controller.events.PartitionReassignmentIsrChange` events):
        one ``multiRead`` of their states, then :meth:`_complete_reassignments`.
        Partitions not being reassigned are ignored.

        Raises:
            ControllerMovedError: a ZooKeeper write was fenced.
        """
        ctx = self._context
        candidates: dict[TopicPartition, ReplicaAssignment] = {}
        for tp in sorted(set(partitions)):
            if tp not in ctx.partitions_being_reassigned:
                continue
            assignment = ctx.partition_full_replica_assignment(tp)
            if assignment is not None:
                candidates[tp] = assignment
        moving = [tp for tp, a in candidates.items() if a.is_being_reassigned]
        states = self._zk.get_partition_states(moving) if moving else {}
        complete = {
            tp: a
            for tp, a in candidates.items()
            if is_reassignment_complete(a, _isr(states.get(tp)))
        }
        results = self._complete_reassignments(complete, states)
        failed = {str(tp): r for tp, r in sorted(results.items()) if r[0] != errors.NONE}
        if failed:
            _log.error("could not complete the reassignments of %s", failed)

    def initialize_partition_reassignments(self) -> None:
        """Resume reassignments at failover: the znode's, then those found in AR (KIP-455)."""
        started = self.start_zk_partition_reassignments()
        self.maybe_resume_reassignments(lambda tp, _: tp not in started)

    def maybe_resume_reassignments(
        self, should_resume: Callable[[TopicPartition, ReplicaAssignment], bool]
    ) -> None:
        """Run the flow again for running reassignments selected by ``should_resume``.

        Used at failover and when brokers hosting target replicas (re)start.
        """
        ctx = self._context
        resumed: dict[TopicPartition, ReplicaAssignment] = {}
        for tp in sorted(ctx.partitions_being_reassigned):
            assignment = ctx.partition_full_replica_assignment(tp)
            if assignment is not None and should_resume(tp, assignment):
                resumed[tp] = assignment
        results = self._advance(resumed)
        failed = {str(tp): r for tp, r in sorted(results.items()) if r[0] != errors.NONE}
        if failed:
            _log.error("could not resume the reassignments of %s", failed)

    # --- the flow -------------------------------------------------------------------------

    def _advance(
        self, reassignments: Mapping[TopicPartition, ReplicaAssignment]
    ) -> ReassignmentResults:
        """Advance many partitions at once (``on_partition_reassignment`` for each, batched).

        The same steps as for one partition, with the ZooKeeper work and the requests of
        all of them together: one assignment write per topic (step 1), one ``multiRead``
        of the partition states, the leader epoch bumps in fenced multis and one
        LeaderAndIsr batch (step 2); partitions whose RAR is already in the ISR complete
        together (step 3, :meth:`_complete_reassignments`). Kafka's controller runs
        ``onPartitionReassignment`` partition after partition, each with its own
        ZooKeeper round trips and request batch; done that way here, one
        AlterPartitionReassignments of 2,000 partitions kept the controller's event
        thread busy for minutes.

        Returns:
            partition -> (error code, message): ``NONE`` when its reassignment started or
            completed; a failed partition leaves the others going.

        Raises:
            ControllerMovedError: a ZooKeeper write was fenced.
        """
        results: ReassignmentResults = {}
        if not reassignments:
            return results
        self._topic_deletion_manager.mark_topic_ineligible_for_deletion(
            {tp.topic for tp in reassignments}, "reassignment in progress"
        )
        updated, failed = _per_topic(reassignments, self._update_current_reassignments)
        results.update(failed)
        moving = [tp for tp, a in updated.items() if a.is_being_reassigned]
        states = self._zk.get_partition_states(moving) if moving else {}
        to_start: dict[TopicPartition, ReplicaAssignment] = {}
        complete: dict[TopicPartition, ReplicaAssignment] = {}
        for tp, assignment in updated.items():
            if is_reassignment_complete(assignment, _isr(states.get(tp))):
                complete[tp] = assignment
            else:
                to_start[tp] = assignment
        results.update(self._complete_reassignments(complete, states))
        if to_start:
            results.update(self._start_reassignments(to_start, states))
        return results

    def _start_reassignments(
        self,
        reassignments: Mapping[TopicPartition, ReplicaAssignment],
        states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch],
    ) -> ReassignmentResults:
        """Step 2 for partitions whose RAR is not all in the ISR yet, together.

        Args:
            reassignments: partition -> its AR (OAR + RAR) as written in step 1.
            states: their state znodes as just read (a missing one fails the partition).
        """
        results: ReassignmentResults = {}
        bumped = self._bump_leader_epochs(reassignments, states)
        for tp in reassignments:
            if tp not in bumped:
                results[tp] = (
                    errors.StateChangeFailedError.error_code,
                    f"cannot bump the leader epoch of {tp}",
                )
        if not bumped:
            return results
        for tp in bumped:
            _log.debug(
                "reassignment of %s to %s started", tp, list(reassignments[tp].target_replicas)
            )
        _log.info("reassignments of %d partitions started (%s)", len(bumped), _sample(bumped))
        started = {tp: reassignments[tp] for tp in bumped}
        failure = _outcome(started, partial(self._send_leader_and_isr, started, bumped))
        if failure is None:
            failure = _outcome(started, partial(self._start_new_replicas, started))
        results.update(failure or {tp: (errors.NONE, None) for tp in started})
        return results

    def _complete_reassignments(
        self,
        reassignments: Mapping[TopicPartition, ReplicaAssignment],
        states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch],
    ) -> ReassignmentResults:
        """Step 3 for partitions whose RAR is all in the ISR, together.

        Kafka's ``onPartitionReassignment`` B1-B6 for each, with the work of all of them
        batched: the RAR replicas go OnlineReplica in one state change, the leaders to
        keep get their epochs bumped in fenced multis and one LeaderAndIsr batch, the
        others are elected in one partition state change, the OAR - RAR replicas are
        stopped in one pass, AR = RAR is written once per topic, the partitions leave
        ``/admin/reassign_partitions`` in one write, and every broker gets one
        UpdateMetadata naming them all. As in Kafka, a leader epoch that cannot be bumped
        or a leader that cannot be elected is logged and the completion goes on.

        Args:
            reassignments: partition -> its AR (OAR + RAR, or RAR alone).
            states: partition states already read (others are read when needed).

        Returns:
            partition -> (error code, message): ``NONE`` once its AR = RAR is written; a
            topic whose assignment write fails leaves its partitions being reassigned
            (the next change of their state retries).

        Raises:
            ControllerMovedError: a ZooKeeper write was fenced.
        """
        ctx = self._context
        if not reassignments:
            return {}
        self._replica_state_machine.handle_state_changes(
            [r for tp, a in reassignments.items() for r in _replicas(tp, a.adding_replicas)],
            ReplicaState.ONLINE_REPLICA,
        )
        completed = {tp: ReplicaAssignment(a.target_replicas) for tp, a in reassignments.items()}
        for tp, assignment in completed.items():
            ctx.update_partition_full_replica_assignment(tp, assignment)
        self._move_leaders_if_required(completed, states)
        self._stop_replicas(
            [r for tp, a in reassignments.items() for r in _replicas(tp, a.removing_replicas)]
        )
        written, results = _per_topic(completed, self._write_partition_assignments)
        if not written:
            return results
        for tp in written:
            self._watches.unwatch_reassignment_isr(tp)
            ctx.partitions_being_reassigned.discard(tp)
        self._remove_from_zk_reassignment(
            lambda p, replicas: (
                (done := written.get(p)) is not None and tuple(replicas) == done.replicas
            )
        )
        self._send_update_metadata(ctx.live_or_shutting_down_broker_ids, list(written))
        self._topic_deletion_manager.resume_deletion_for_topics({tp.topic for tp in written})
        for tp, assignment in written.items():
            _log.debug("reassignment of %s to %s completed", tp, list(assignment.replicas))
            results[tp] = (errors.NONE, None)
        _log.info("reassignments of %d partitions completed (%s)", len(written), _sample(written))
        return results

    def _update_current_reassignments(
        self, topic: str, reassignments: Mapping[TopicPartition, ReplicaAssignment]
    ) -> None:
        """Write the new ARs of partitions of ``topic`` (one write); stop unneeded replicas.

        Replicas that a changed target no longer has are stopped and deleted.

        Raises:
            StateChangeFailedError: the topic vanished or the write kept conflicting.
            ControllerMovedError: the write was fenced.
        """
        ctx = self._context
        previous = {tp: ctx.partition_full_replica_assignment(tp) for tp in reassignments}
        changed = {tp: a for tp, a in reassignments.items() if previous[tp] != a}
        if changed:
            self._write_partition_assignments(topic, changed)
            unneeded: list[PartitionAndReplica] = []
            for tp, assignment in changed.items():
                ctx.update_partition_full_replica_assignment(tp, assignment)
                current = previous[tp]
                if current is not None:
                    unneeded.extend(
                        _replicas(tp, (r for r in current.replicas if r not in assignment.replicas))
                    )
            self._stop_replicas(unneeded)
        self._watches.watch_reassignment_isrs(reassignments)
        ctx.partitions_being_reassigned.update(reassignments)

    def _start_new_replicas(
        self, reassignments: Mapping[TopicPartition, ReplicaAssignment]
    ) -> None:
        """Move the added replicas that have no state yet to NewReplica (they start fetching)."""
        ctx = self._context
        new = [
            r
            for tp, assignment in reassignments.items()
            for r in _replicas(tp, assignment.adding_replicas)
            if ctx.replica_state(r) in (None, ReplicaState.NON_EXISTENT_REPLICA)
        ]
        if new:
            self._replica_state_machine.handle_state_changes(new, ReplicaState.NEW_REPLICA)

    def _move_leaders_if_required(
        self,
        completed: Mapping[TopicPartition, ReplicaAssignment],
        states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch],
    ) -> None:
        """Elect a leader from RAR unless the live leader is in RAR (then bump its epoch).

        Kafka's ``moveReassignedPartitionLeaderIfRequired``, for many partitions: the
        epochs to bump in fenced multis (from ``states``, reading those missing) and one
        LeaderAndIsr batch, the elections in one partition state change. Failures are
        logged (Kafka's ``updateLeaderEpochAndSendRequest`` does the same).
        """
        ctx = self._context
        keep: dict[TopicPartition, ReplicaAssignment] = {}
        elect: list[TopicPartition] = []
        for tp, assignment in completed.items():
            leader = ctx.partition_leader(tp)
            if (
                leader is not None
                and leader != NO_LEADER
                and leader in assignment.replicas
                and ctx.is_replica_online(leader, tp)
            ):
                keep[tp] = assignment
            else:
                elect.append(tp)
        if keep:
            missing = [tp for tp in keep if tp not in states]
            known = {**states, **self._zk.get_partition_states(missing)} if missing else states
            bumped = self._bump_leader_epochs(keep, known)
            for tp in sorted(set(keep) - set(bumped)):
                _log.error(
                    "cannot bump the leader epoch of %s to send its replicas %s",
                    tp,
                    list(keep[tp].replicas),
                )
            if bumped:
                self._send_leader_and_isr({tp: keep[tp] for tp in bumped}, bumped)
        if elect:
            results = self._partition_state_machine.handle_state_changes(
                elect, PartitionState.ONLINE_PARTITION, ReassignPartitionLeaderElection()
            )
            for tp, outcome in sorted(results.items()):
                if isinstance(outcome, Exception):
                    _log.error(
                        "no leader from %s for %s: %s", list(completed[tp].replicas), tp, outcome
                    )

    def _stop_replicas(self, replicas: list[PartitionAndReplica]) -> None:
        """OfflineReplica -> StopReplica(delete) -> NonExistentReplica for ``replicas``."""
        if not replicas:
            return
        rsm = self._replica_state_machine
        rsm.handle_state_changes(replicas, ReplicaState.OFFLINE_REPLICA)
        rsm.handle_state_changes(replicas, ReplicaState.REPLICA_DELETION_STARTED)
        rsm.handle_state_changes(replicas, ReplicaState.REPLICA_DELETION_SUCCESSFUL)
        rsm.handle_state_changes(replicas, ReplicaState.NON_EXISTENT_REPLICA)

    # --- ZooKeeper writes and requests ----------------------------------------------------

    def _send_leader_and_isr(
        self,
        assignments: Mapping[TopicPartition, ReplicaAssignment],
        leaderships: Mapping[TopicPartition, LeaderIsrAndControllerEpoch],
    ) -> None:
        """Send LeaderAndIsr of each partition to the live replicas of its AR, in one batch.

        The adding replicas get it with ``is_new`` (Kafka's
        ``updateLeaderEpochAndSendRequest``).
        """
        ctx = self._context
        live = ctx.live_or_shutting_down_broker_ids
        self._batch.new_batch()
        try:
            for tp, leadership in leaderships.items():
                assignment = assignments[tp]
                original = [r for r in assignment.original_replicas if r in live]
                adding = [r for r in assignment.adding_replicas if r in live]
                self._batch.add_leader_and_isr_request_for_brokers(
                    original, tp, leadership, assignment, is_new=False
                )
                self._batch.add_leader_and_isr_request_for_brokers(
                    adding, tp, leadership, assignment, is_new=True
                )
            self._batch.send_requests_to_brokers(ctx.epoch)
        except Exception:
            self._batch.clear()
            raise

    def _bump_leader_epochs(
        self,
        partitions: Iterable[TopicPartition],
        states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch],
    ) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
        """Bump the leader epochs of ``partitions`` from ``states`` in fenced multis.

        Each write is a compare-and-set on the state read; a partition whose state changed
        meanwhile is retried alone (:meth:`_bump_leader_epoch`).

        Returns:
            partition -> its new state (also cached), for those bumped; without a state
            znode, or with one written by a newer controller, a partition is left out.

        Raises:
            ControllerMovedError: the fence failed.
        """
        ctx = self._context
        wanted = {
            tp: state.leader_and_isr.with_new_leader(
                state.leader_and_isr.leader, state.leader_and_isr.isr
            )
            for tp in partitions
            if (state := states.get(tp)) is not None and state.controller_epoch <= ctx.epoch
        }
        if not wanted:
            return {}
        written = self._zk.update_leader_and_isr(
            wanted, ctx.epoch, controller_epoch_zk_version=ctx.epoch_zk_version
        )
        bumped: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        for tp, lai in written.written.items():
            bumped[tp] = LeaderIsrAndControllerEpoch(lai, ctx.epoch)
            ctx.put_partition_leadership(tp, bumped[tp])
        for tp in sorted(written.version_conflicts):
            if (again := self._bump_leader_epoch(tp)) is not None:
                bumped[tp] = again
        return bumped

    def _bump_leader_epoch(self, tp: TopicPartition) -> LeaderIsrAndControllerEpoch | None:
        """Rewrite ``tp``'s state with leader epoch + 1 (compare-and-set, fenced).

        Returns:
            the new state (also cached), or None without a state znode or when a newer
            controller wrote it.
        """
        ctx = self._context
        for _ in range(MAX_CAS_ATTEMPTS):
            state = self._zk.get_partition_states([tp]).get(tp)
            if state is None or state.controller_epoch > ctx.epoch:
                return None
            lai = state.leader_and_isr
            written = self._zk.update_leader_and_isr(
                {tp: lai.with_new_leader(lai.leader, lai.isr)},
                ctx.epoch,
                controller_epoch_zk_version=ctx.epoch_zk_version,
            )
            if tp in written.written:
                leadership = LeaderIsrAndControllerEpoch(written.written[tp], ctx.epoch)
                ctx.put_partition_leadership(tp, leadership)
                return leadership
            if tp in written.missing:
                return None
        return None

    def _write_partition_assignments(
        self, topic: str, assignments: Mapping[TopicPartition, ReplicaAssignment]
    ) -> None:
        """Write assignments of partitions of ``topic`` into its znode in one CAS (fenced).

        Raises:
            StateChangeFailedError: the topic vanished or the writes kept conflicting.
            ControllerMovedError: the write was fenced.
        """
        for _ in range(MAX_CAS_ATTEMPTS):
            current = self._zk.get_replica_assignments([topic]).get(topic)
            if current is None:
                raise errors.StateChangeFailedError(f"topic {topic} does not exist")
            merged = {**current.partitions, **{tp.partition: a for tp, a in assignments.items()}}
            version = self._zk.set_replica_assignment(
                topic,
                merged,
                current.zk_version,
                topic_id=current.topic_id,
                controller_epoch_zk_version=self._context.epoch_zk_version,
            )
            if version is not None:
                return
        partitions = sorted(str(tp) for tp in assignments)
        raise errors.StateChangeFailedError(f"could not write the assignment of {partitions}")

    def _remove_from_zk_reassignment(
        self, should_remove: Callable[[TopicPartition, Sequence[int]], bool]
    ) -> None:
        """Drop matching partitions from ``/admin/reassign_partitions``; delete it when empty."""
        current = self._zk.get_partition_reassignment()
        if not current:
            return
        remaining = {tp: r for tp, r in current.items() if not should_remove(tp, r)}
        if len(remaining) == len(current):
            return
        fence = self._context.epoch_zk_version
        if remaining:
            self._zk.set_partition_reassignment(remaining, controller_epoch_zk_version=fence)
        else:
            self._zk.delete_partition_reassignment(controller_epoch_zk_version=fence)

    # --- helpers --------------------------------------------------------------------------

    def _build_reassignments(
        self, requested: Mapping[TopicPartition, Sequence[int] | None]
    ) -> tuple[ReassignmentResults, dict[TopicPartition, ReplicaAssignment]]:
        """Validate requests; return (errors, partition -> assignment to reach)."""
        ctx = self._context
        results: ReassignmentResults = {}
        to_start: dict[TopicPartition, ReplicaAssignment] = {}
        for tp, target in sorted(requested.items()):
            current = ctx.partition_full_replica_assignment(tp)
            error = validate_target_replicas(
                current,
                target,
                ctx.live_broker_ids,
                topic_being_deleted=self._topic_deletion_manager.is_topic_queued_up_for_deletion(
                    tp.topic
                ),
            )
            if error is not None or current is None:
                results[tp] = error or (errors.UNKNOWN_TOPIC_OR_PARTITION, None)
                continue
            built = build_reassignment(current, target)
            if built is None:
                results[tp] = (
                    errors.NO_REASSIGNMENT_IN_PROGRESS,
                    "No reassignment is in progress for this partition.",
                )
            else:
                to_start[tp] = built
        return results, to_start


def _outcome(
    partitions: Iterable[TopicPartition], step: Callable[[], object]
) -> ReassignmentResults | None:
    """Run ``step`` for ``partitions``; None when it succeeded, else each one's error.

    Raises:
        ControllerMovedError: from ``step`` (this controller is no longer active).
    """
    try:
        step()
    except ControllerMovedError:
        raise
    except errors.ControllerError as exc:
        return {tp: (exc.error_code, str(exc)) for tp in partitions}
    except Exception as exc:
        _log.exception("reassignment of %s failed", sorted(str(tp) for tp in partitions))
        return {tp: (errors.UNKNOWN_SERVER_ERROR, repr(exc)) for tp in partitions}
    return None


def _per_topic(
    assignments: Mapping[TopicPartition, ReplicaAssignment],
    step: Callable[[str, Mapping[TopicPartition, ReplicaAssignment]], object],
) -> tuple[dict[TopicPartition, ReplicaAssignment], ReassignmentResults]:
    """Run ``step(topic, its partitions)`` once per topic of ``assignments``, in order.

    Returns:
        (the partitions of the topics it succeeded for, each other partition's error);
        one topic failing leaves the others going (:func:`_outcome`).

    Raises:
        ControllerMovedError: from ``step``.
    """
    by_topic: dict[str, dict[TopicPartition, ReplicaAssignment]] = {}
    for tp, assignment in sorted(assignments.items()):
        by_topic.setdefault(tp.topic, {})[tp] = assignment
    succeeded: dict[TopicPartition, ReplicaAssignment] = {}
    failed: ReassignmentResults = {}
    for topic, parts in by_topic.items():
        failure = _outcome(parts, partial(step, topic, parts))
        if failure is None:
            succeeded.update(parts)
        else:
            failed.update(failure)
    return succeeded, failed


def _replicas(tp: TopicPartition, broker_ids: Iterable[int]) -> list[PartitionAndReplica]:
    return [PartitionAndReplica(tp, r) for r in broker_ids]


def _isr(state: LeaderIsrAndControllerEpoch | None) -> Sequence[int] | None:
    """Return the ISR of a partition state read from ZooKeeper, None without one."""
    return None if state is None else state.leader_and_isr.isr


def _sample(partitions: Iterable[TopicPartition], most: int = 5) -> str:
    """Name up to ``most`` of ``partitions`` for a log line, e.g. ``t-0, t-1 and 98 more``."""
    names = sorted(str(tp) for tp in partitions)
    if len(names) <= most:
        return ", ".join(names)
    return f"{', '.join(names[:most])} and {len(names) - most} more"
