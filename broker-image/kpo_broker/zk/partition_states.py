"""Partition state znodes (LeaderAndIsr), written in batches by the controller.

``/brokers/topics/<t>/partitions/<p>/state`` holds the leader, leader epoch, ISR and the
controller epoch; its znode version is the partition epoch. The controller writes many
of them at once (topic creation, broker failure): each partition is one multi
``[check /controller_epoch version, create|set state]`` so that a stale controller is
fenced and each partition succeeds or conflicts on its own, and the multis are
pipelined so 10K partitions cost a few round trips, not 10K (seed 001 §F). The leader
of a partition updates the ISR with a compare-and-set on the same znode (seed 001 §9).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, ZookeeperError

from kpo_broker.zk import paths
from kpo_broker.zk.data import decode_partition_state, encode_partition_state
from kpo_broker.zk.errors import ZkOperationError
from kpo_broker.zk.model import (
    INITIAL_PARTITION_EPOCH,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    TopicPartition,
)
from kpo_broker.zk.ops import CreateOp, SetDataOp, multi_error
from kpo_broker.zk.session import ZkSession


@dataclass
class PartitionStateWriteResult:
    """Per-partition outcome of a batched partition state write.

    Attributes:
        written: partitions written -> their LeaderAndIsr with the new partition epoch.
        version_conflicts: partitions whose state znode version did not match (for a
            create: the state znode already exists); the caller re-reads and retries.
        missing: partitions whose znode (or topic) does not exist.
    """

    written: dict[TopicPartition, LeaderAndIsr] = field(default_factory=dict)
    version_conflicts: set[TopicPartition] = field(default_factory=set)
    missing: set[TopicPartition] = field(default_factory=set)


def _state_path(tp: TopicPartition) -> str:
    return paths.partition_state_path(tp.topic, tp.partition)


class PartitionStateZk(ZkSession):
    """Batched reads and fenced writes of partition state znodes."""

    def create_partition_states(
        self,
        states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch],
        *,
        controller_epoch_zk_version: int,
    ) -> PartitionStateWriteResult:
        """Create the state znodes of new partitions (NewPartition -> OnlinePartition).

        Creates ``/brokers/topics/<t>/partitions`` per topic, then per partition one
        fenced multi creating ``partitions/<p>`` and ``partitions/<p>/state``, pipelined.

        Raises:
            ControllerMovedError: the controller epoch znode version is not
                ``controller_epoch_zk_version``.
            ZkConnectionLossError: the session failed.
        """
        fence = controller_epoch_zk_version
        result = PartitionStateWriteResult()
        topics = sorted({tp.topic for tp in states})
        parents = [paths.topic_partitions_path(t) for t in topics]
        created = self._run([(p, self._multi_request([CreateOp(p)], fence)) for p in parents])
        missing_topics: set[str] = set()
        for topic, path, outcome in zip(topics, parents, created, strict=True):
            error = multi_error(self._multi_results(outcome, True, path))
            if isinstance(error, NoNodeError):
                missing_topics.add(topic)
            elif error is not None and not isinstance(error, NodeExistsError):
                raise ZkOperationError(path, type(error).__name__)
        result.missing = {tp for tp in states if tp.topic in missing_topics}
        pending = sorted(tp for tp in states if tp.topic not in missing_topics)

        def ops(tp: TopicPartition, with_parent: bool) -> list[CreateOp]:
            state = CreateOp(_state_path(tp), encode_partition_state(states[tp]))
            parent = CreateOp(paths.partition_path(tp.topic, tp.partition))
            return [parent, state] if with_parent else [state]

        for with_parent in (True, False):
            requests = [
                (_state_path(tp), self._multi_request(ops(tp, with_parent), fence))
                for tp in pending
            ]
            retry: list[TopicPartition] = []
            for tp, outcome in zip(pending, self._run(requests), strict=True):
                results = self._multi_results(outcome, True, _state_path(tp))
                error = multi_error(results)
                if error is None:
                    lai = states[tp].leader_and_isr
                    result.written[tp] = lai.with_partition_epoch(INITIAL_PARTITION_EPOCH)
                elif with_parent and isinstance(results[0], NodeExistsError):
                    retry.append(tp)  # partitions/<p> exists: create the state alone
                elif isinstance(error, NodeExistsError):
                    result.version_conflicts.add(tp)
                elif isinstance(error, NoNodeError):
                    result.missing.add(tp)
                else:
                    raise ZkOperationError(_state_path(tp), type(error).__name__)
            pending = retry
        return result

    def update_leader_and_isr(
        self,
        leader_and_isrs: Mapping[TopicPartition, LeaderAndIsr],
        controller_epoch: int,
        *,
        controller_epoch_zk_version: int,
    ) -> PartitionStateWriteResult:
        """Write new LeaderAndIsr states of many partitions (controller side), pipelined.

        Each value's ``partition_epoch`` is the state znode version the write expects
        (Kafka's ``LeaderAndIsr.zkVersion``): each partition is a compare-and-set.

        Args:
            leader_and_isrs: partition -> its new leader, leader epoch and ISR.
            controller_epoch: this controller's epoch, stored in each state znode.
            controller_epoch_zk_version: the controller's fence.

        Raises:
            ControllerMovedError: the fence failed.
            ZkConnectionLossError: the session failed.
        """
        result = PartitionStateWriteResult()
        partitions = sorted(leader_and_isrs)
        requests = []
        for tp in partitions:
            lai = leader_and_isrs[tp]
            data = encode_partition_state(LeaderIsrAndControllerEpoch(lai, controller_epoch))
            op = SetDataOp(_state_path(tp), data, lai.partition_epoch)
            requests.append((op.path, self._multi_request([op], controller_epoch_zk_version)))
        for tp, outcome in zip(partitions, self._run(requests), strict=True):
            results = self._multi_results(outcome, True, _state_path(tp))
            error = multi_error(results)
            if error is None:
                result.written[tp] = leader_and_isrs[tp].with_partition_epoch(results[0].version)
            elif isinstance(error, BadVersionError):
                result.version_conflicts.add(tp)
            elif isinstance(error, NoNodeError):
                result.missing.add(tp)
            else:
                raise ZkOperationError(_state_path(tp), type(error).__name__)
        return result

    def get_partition_states(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
        """Read many partition states, pipelined; partitions without a state are left out.

        Raises:
            ZkConnectionLossError: the session failed.
            MalformedZNodeDataError: a state znode is not Kafka's format.
        """
        ordered = sorted(set(partitions))
        requests = [self._request("get_async", p) for p in map(_state_path, ordered)]
        states: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        for tp, outcome in zip(ordered, self._run(requests), strict=True):
            if isinstance(outcome, NoNodeError):
                continue
            if isinstance(outcome, ZookeeperError):
                raise ZkOperationError(_state_path(tp), type(outcome).__name__)
            data, stat = outcome
            states[tp] = decode_partition_state(data, stat.version)
        return states

    def update_isr(
        self,
        tp: TopicPartition,
        leader_and_isr: LeaderAndIsr,
        controller_epoch: int,
        expected_partition_epoch: int,
    ) -> int | None:
        """Write a partition's new ISR as its leader (broker side), compare-and-set.

        The leader shrinks or expands the ISR (seed 001 §9 ``maybe_change_ISR``); the
        write fails when the controller changed the state meanwhile (seed 001 "how to
        handle multiple leaders"). A conflict whose current content is exactly the
        intended state counts as a success (the response to our own write was lost).

        Args:
            tp: the partition.
            leader_and_isr: the new state (same leader and leader epoch, new ISR).
            controller_epoch: the controller epoch of the last LeaderAndIsr received.
            expected_partition_epoch: the state znode version the leader knows.

        Returns:
            the new partition epoch, or None on a version conflict (the caller drops
            the update and waits for the controller's LeaderAndIsr).

        Raises:
            ZkConnectionLossError: the session failed.
        """
        path = _state_path(tp)
        wanted = LeaderIsrAndControllerEpoch(leader_and_isr, controller_epoch)
        data = encode_partition_state(wanted)
        outcome = self._call("set_async", path, data, expected_partition_epoch)
        if isinstance(outcome, BadVersionError):
            current = self.get_partition_states([tp]).get(tp)
            if current is None:
                return None
            same = LeaderIsrAndControllerEpoch(
                leader_and_isr.with_partition_epoch(current.leader_and_isr.partition_epoch),
                controller_epoch,
            )
            return current.leader_and_isr.partition_epoch if current == same else None
        if isinstance(outcome, NoNodeError):
            return None
        if isinstance(outcome, ZookeeperError):
            raise ZkOperationError(path, type(outcome).__name__)
        return int(outcome.version)
