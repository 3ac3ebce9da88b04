"""The replica state machine: NewReplica, OnlineReplica, OfflineReplica and the deletion states.

As Kafka's ``ZkReplicaStateMachine``. Entering a state queues the requests the replica's
broker (and the partition's other replicas) must get in the
:class:`ControllerBrokerRequestBatch`:

- NewReplica: LeaderAndIsr (``is_new``) to the replica, if the partition has a leader;
- OnlineReplica: LeaderAndIsr to the replica (a restarted broker learns every replica it
  hosts, Kafka's ``onBrokerStartup``); from NewReplica the replica joins AR if it is not in it yet;
- OfflineReplica: StopReplica (no deletion) to the replica, then the replica leaves the
  ISR in ZooKeeper (leader -1 if it led; the last ISR member is kept so that a clean
  election stays possible), with LeaderAndIsr to the other live replicas (Kafka's
  ``onBrokerFailure`` shrinks the ISR of the partitions the dead broker followed);
- ReplicaDeletionStarted: StopReplica with ``delete_partition`` (topic deletion);
- NonExistentReplica: the replica leaves AR in the context.

ISR removals are batched like the partition state machine's writes: one pipelined read
and one pipelined round of fenced compare-and-set writes per attempt.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Protocol

from kpo_broker.controller.context import ControllerContext, PartitionAndReplica
from kpo_broker.controller.request_batch import ControllerBrokerRequestBatch
from kpo_broker.controller.states import ReplicaState, is_valid_transition
from kpo_broker.zk.errors import ControllerMovedError
from kpo_broker.zk.model import (
    NO_LEADER,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
)
from kpo_broker.zk.partition_states import PartitionStateWriteResult
from kpo_kafka.topic_partition import TopicPartition

_log = logging.getLogger(__name__)
_state_change_log = logging.getLogger("kpo_broker.state.change")


class ReplicaStateStore(Protocol):
    """The ZooKeeper operations the replica state machine needs (``KafkaZkClient``)."""

    def update_leader_and_isr(
        self,
        leader_and_isrs: Mapping[TopicPartition, LeaderAndIsr],
        controller_epoch: int,
        *,
        controller_epoch_zk_version: int,
    ) -> PartitionStateWriteResult:
        """Compare-and-set state znodes, fenced."""
        ...

    def get_partition_states(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
        """Read state znodes."""
        ...


class ReplicaStateMachine:
    """Applies replica state changes (see module docstring).

    Args:
        context: the controller's context (holds the replica states).
        zk: ZooKeeper access.
        batch: collects the requests of each change.
    """

    def __init__(
        self, context: ControllerContext, zk: ReplicaStateStore, batch: ControllerBrokerRequestBatch
    ) -> None:
        self._context = context
        self._zk = zk
        self._batch = batch

    def startup(self) -> None:
        """Initialise every replica's state, then bring replicas on live brokers online.

        Replicas on registered brokers start OnlineReplica, the others
        ReplicaDeletionIneligible; then the online ones get LeaderAndIsr and the offline
        ones are moved to OfflineReplica (leaving the ISRs) (controller failover).
        """
        online, offline = self._context.online_and_offline_replicas()
        for replica in online:
            self._context.replica_states[replica] = ReplicaState.ONLINE_REPLICA
        for replica in offline:
            self._context.replica_states[replica] = ReplicaState.REPLICA_DELETION_INELIGIBLE
        self.handle_state_changes(online, ReplicaState.ONLINE_REPLICA)
        self.handle_state_changes(offline, ReplicaState.OFFLINE_REPLICA)

    def shutdown(self) -> None:
        """Forget the replica states (resignation)."""
        self._context.replica_states.clear()

    def handle_state_changes(
        self, replicas: Iterable[PartitionAndReplica], target: ReplicaState
    ) -> None:
        """Move ``replicas`` to ``target`` and send the resulting requests.

        Illegal transitions and per-partition ZooKeeper failures are logged; the
        replicas concerned keep their state.

        Raises:
            ControllerMovedError: a ZooKeeper write was fenced; this controller is stale.
        """
        by_broker: dict[int, list[PartitionAndReplica]] = defaultdict(list)
        for replica in sorted(set(replicas)):
            by_broker[replica.replica].append(replica)
        if not by_broker:
            return
        self._batch.new_batch()
        try:
            for broker_id, on_broker in sorted(by_broker.items()):
                self._do_handle_state_changes(broker_id, on_broker, target)
            self._batch.send_requests_to_brokers(self._context.epoch)
            # One line per change, not per replica (each replica's is at DEBUG).
            _state_change_log.info(
                "%d replica(s) of broker(s) %s -> %s",
                sum(len(r) for r in by_broker.values()),
                sorted(by_broker),
                target.value,
            )
        except ControllerMovedError:
            self._batch.clear()
            raise
        except Exception:
            _log.exception("error moving replicas to %s", target.value)
            self._batch.clear()

    def _do_handle_state_changes(
        self, replica_id: int, replicas: list[PartitionAndReplica], target: ReplicaState
    ) -> None:
        ctx = self._context
        valid: list[PartitionAndReplica] = []
        for replica in replicas:
            current = ctx.replica_states.setdefault(replica, ReplicaState.NON_EXISTENT_REPLICA)
            if is_valid_transition(current, target):
                valid.append(replica)
            else:
                _state_change_log.error(
                    "illegal state transition of replica %s from %s to %s",
                    replica,
                    current.value,
                    target.value,
                )
        if target is ReplicaState.NEW_REPLICA:
            self._to_new(replica_id, valid)
        elif target is ReplicaState.ONLINE_REPLICA:
            self._to_online(replica_id, valid)
        elif target is ReplicaState.OFFLINE_REPLICA:
            self._to_offline(replica_id, valid)
        elif target is ReplicaState.REPLICA_DELETION_STARTED:
            for replica in valid:
                self._batch.add_stop_replica_request_for_brokers(
                    [replica_id], replica.topic_partition, delete_partition=True
                )
                self._set(replica, target)
        elif target is ReplicaState.NON_EXISTENT_REPLICA:
            for replica in valid:
                tp = replica.topic_partition
                assignment = ctx.partition_full_replica_assignment(tp)
                if assignment is not None:
                    ctx.update_partition_full_replica_assignment(
                        tp, _without_replica(assignment, replica_id)
                    )
                ctx.replica_states.pop(replica, None)
                _state_change_log.debug("replica %s -> %s", replica, target.value)
        else:  # ReplicaDeletionSuccessful, ReplicaDeletionIneligible
            for replica in valid:
                self._set(replica, target)

    def _set(self, replica: PartitionAndReplica, state: ReplicaState) -> None:
        _state_change_log.debug("replica %s -> %s", replica, state.value)
        self._context.replica_states[replica] = state

    def _leader_and_isr_to(
        self, replica_id: int, tp: TopicPartition, *, is_new: bool
    ) -> LeaderIsrAndControllerEpoch | None:
        """Queue LeaderAndIsr of ``tp`` to ``replica_id`` if ``tp`` has leadership."""
        leadership = self._context.partition_leadership(tp)
        assignment = self._context.partition_full_replica_assignment(tp)
        if leadership is not None and assignment is not None:
            self._batch.add_leader_and_isr_request_for_brokers(
                [replica_id], tp, leadership, assignment, is_new
            )
        return leadership

    def _to_new(self, replica_id: int, replicas: list[PartitionAndReplica]) -> None:
        for replica in replicas:
            tp = replica.topic_partition
            if self._context.partition_leader(tp) == replica_id:
                _state_change_log.error(
                    "replica %s cannot become NewReplica: it leads the partition", replica
                )
                continue
            self._leader_and_isr_to(replica_id, tp, is_new=True)
            self._set(replica, ReplicaState.NEW_REPLICA)

    def _to_online(self, replica_id: int, replicas: list[PartitionAndReplica]) -> None:
        ctx = self._context
        for replica in replicas:
            tp = replica.topic_partition
            if ctx.replica_states[replica] is ReplicaState.NEW_REPLICA:
                assignment = ctx.partition_full_replica_assignment(tp)
                if assignment is not None and replica_id not in assignment.replicas:
                    ctx.update_partition_full_replica_assignment(
                        tp,
                        ReplicaAssignment(
                            (*assignment.replicas, replica_id),
                            assignment.adding_replicas,
                            assignment.removing_replicas,
                        ),
                    )
            else:
                self._leader_and_isr_to(replica_id, tp, is_new=False)
            self._set(replica, ReplicaState.ONLINE_REPLICA)

    def _to_offline(self, replica_id: int, replicas: list[PartitionAndReplica]) -> None:
        ctx = self._context
        for replica in replicas:
            self._batch.add_stop_replica_request_for_brokers(
                [replica_id], replica.topic_partition, delete_partition=False
            )
        with_leadership = [
            r for r in replicas if ctx.partition_leadership(r.topic_partition) is not None
        ]
        without = [r for r in replicas if ctx.partition_leadership(r.topic_partition) is None]
        updated = self.remove_replica_from_isr(
            replica_id, [r.topic_partition for r in with_leadership]
        )
        for tp, leadership in updated.items():
            if not ctx.is_topic_queued_up_for_deletion(tp.topic):
                others = [
                    r
                    for r in ctx.partition_replica_assignment(tp)
                    if r != replica_id and ctx.is_replica_online(r, tp)
                ]
                assignment = ctx.partition_full_replica_assignment(tp)
                if assignment is not None:
                    self._batch.add_leader_and_isr_request_for_brokers(
                        others, tp, leadership, assignment, is_new=False
                    )
            self._set(PartitionAndReplica(tp, replica_id), ReplicaState.OFFLINE_REPLICA)
        for replica in without:
            self._batch.add_update_metadata_request_for_brokers(
                ctx.live_or_shutting_down_broker_ids, [replica.topic_partition]
            )
            self._set(replica, ReplicaState.OFFLINE_REPLICA)

    def remove_replica_from_isr(
        self, replica_id: int, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
        """Remove ``replica_id`` from the ISR of ``partitions`` in ZooKeeper, batched.

        A partition it led gets leader -1; the leader epoch is bumped; an ISR of one
        member is left as it is. Partitions whose ISR does not hold the replica are
        returned unchanged; conflicting writes are re-read and retried.

        Returns:
            partition -> its leadership after the change (also cached in the context);
            partitions that failed (no state znode, newer controller) are left out.

        Raises:
            ControllerMovedError: the write was fenced.
        """
        finished: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        ctx = self._context
        ordered = sorted(set(partitions))
        # First from the cached states of the partitions whose cached ISR holds the replica:
        # each write is a compare-and-set on the cached znode version, so a stale one
        # conflicts and is re-read below (saves a read per partition when the cache is
        # current). The others (no cached state, or not in the cached ISR) are read first.
        cached = {
            tp: leadership
            for tp in ordered
            if (leadership := ctx.partition_leadership(tp)) is not None
            and replica_id in leadership.leader_and_isr.isr
        }
        done, remaining = self._try_remove_from_isr(replica_id, sorted(cached), cached)
        finished.update(done)
        remaining = sorted(set(remaining) | {tp for tp in ordered if tp not in cached})
        while remaining:
            done, remaining = self._try_remove_from_isr(replica_id, remaining)
            finished.update(done)
        return finished

    def _try_remove_from_isr(
        self,
        replica_id: int,
        partitions: list[TopicPartition],
        known: Mapping[TopicPartition, LeaderIsrAndControllerEpoch] | None = None,
    ) -> tuple[dict[TopicPartition, LeaderIsrAndControllerEpoch], list[TopicPartition]]:
        """One attempt from ``known`` states (else read in ZooKeeper); (finished, to retry)."""
        ctx = self._context
        finished: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        if not partitions:
            return finished, []
        current = known if known is not None else self._zk.get_partition_states(partitions)
        to_write: dict[TopicPartition, LeaderAndIsr] = {}
        for tp in partitions:
            state = current.get(tp)
            if state is None:
                _state_change_log.error(
                    "cannot remove %s from the ISR of %s: no state", replica_id, tp
                )
            elif state.controller_epoch > ctx.epoch:
                _state_change_log.error(
                    "cannot remove %s from the ISR of %s: written by newer controller epoch %s",
                    replica_id,
                    tp,
                    state.controller_epoch,
                )
            elif replica_id not in state.leader_and_isr.isr:
                finished[tp] = state
            else:
                lai = state.leader_and_isr
                leader = NO_LEADER if lai.leader == replica_id else lai.leader
                isr = lai.isr if len(lai.isr) == 1 else tuple(r for r in lai.isr if r != replica_id)
                to_write[tp] = lai.with_new_leader(leader, isr)
        retry: list[TopicPartition] = []
        if to_write:
            written = self._zk.update_leader_and_isr(
                to_write, ctx.epoch, controller_epoch_zk_version=ctx.epoch_zk_version
            )
            for tp, lai in written.written.items():
                finished[tp] = LeaderIsrAndControllerEpoch(lai, ctx.epoch)
            for tp in written.missing:
                _state_change_log.error(
                    "cannot remove %s from the ISR of %s: vanished", replica_id, tp
                )
            retry = sorted(written.version_conflicts)
        for tp, leadership in finished.items():
            ctx.put_partition_leadership(tp, leadership)
        return finished, retry


def _without_replica(assignment: ReplicaAssignment, replica_id: int) -> ReplicaAssignment:
    """Return ``assignment`` with ``replica_id`` removed from AR and the reassignment sets."""
    return ReplicaAssignment(
        tuple(r for r in assignment.replicas if r != replica_id),
        tuple(r for r in assignment.adding_replicas if r != replica_id),
        tuple(r for r in assignment.removing_replicas if r != replica_id),
    )
