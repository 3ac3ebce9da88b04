"""Plain in-memory fakes for the controller's pure logic: partition state store and sender."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kpo_broker.controller.context import ControllerContext
from kpo_broker.controller.request_batch import ControllerBrokerRequestBatch, ResponseCallback
from kpo_broker.zk.configs import EntityConfig
from kpo_broker.zk.errors import ControllerMovedError
from kpo_broker.zk.model import (
    BrokerRegistration,
    EndPoint,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
)
from kpo_broker.zk.partition_states import PartitionStateWriteResult
from kpo_kafka.topic_partition import TopicPartition


def broker(broker_id: int, epoch: int = 100) -> BrokerRegistration:
    return BrokerRegistration(
        broker_id, (EndPoint("PLAINTEXT", f"host{broker_id}", 9000 + broker_id),), epoch=epoch
    )


@dataclass
class FakePartitionStates:
    """Partition state znodes in a dict, fenced by a controller epoch znode version.

    Attributes:
        states: partition -> state (its ``partition_epoch`` is the znode version).
        epoch_zk_version: the current ``/controller_epoch`` version.
        calls: names of the batched calls made, in order.
        conflict_once: partitions whose next compare-and-set conflicts (someone else
            wrote them meanwhile: their version is bumped).
    """

    states: dict[TopicPartition, LeaderIsrAndControllerEpoch] = field(default_factory=dict)
    epoch_zk_version: int = 1
    topic_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)
    conflict_once: set[TopicPartition] = field(default_factory=set)

    def _fence(self, version: int) -> None:
        if version != self.epoch_zk_version:
            raise ControllerMovedError("fenced")

    def create_partition_states(
        self,
        states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch],
        *,
        controller_epoch_zk_version: int,
    ) -> PartitionStateWriteResult:
        self.calls.append("create")
        self._fence(controller_epoch_zk_version)
        result = PartitionStateWriteResult()
        for tp, state in states.items():
            if tp in self.states:
                result.version_conflicts.add(tp)
                continue
            lai = state.leader_and_isr.with_partition_epoch(0)
            self.states[tp] = LeaderIsrAndControllerEpoch(lai, state.controller_epoch)
            result.written[tp] = lai
        return result

    def update_leader_and_isr(
        self,
        leader_and_isrs: Mapping[TopicPartition, LeaderAndIsr],
        controller_epoch: int,
        *,
        controller_epoch_zk_version: int,
    ) -> PartitionStateWriteResult:
        self.calls.append("update")
        self._fence(controller_epoch_zk_version)
        result = PartitionStateWriteResult()
        for tp, lai in leader_and_isrs.items():
            current = self.states.get(tp)
            if current is None:
                result.missing.add(tp)
                continue
            version = current.leader_and_isr.partition_epoch
            if tp in self.conflict_once:
                self.conflict_once.discard(tp)
                bumped = current.leader_and_isr.with_partition_epoch(version + 1)
                self.states[tp] = LeaderIsrAndControllerEpoch(bumped, current.controller_epoch)
                result.version_conflicts.add(tp)
            elif lai.partition_epoch != version:
                result.version_conflicts.add(tp)
            else:
                written = lai.with_partition_epoch(version + 1)
                self.states[tp] = LeaderIsrAndControllerEpoch(written, controller_epoch)
                result.written[tp] = written
        return result

    def get_partition_states(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
        self.calls.append("get")
        return {tp: self.states[tp] for tp in partitions if tp in self.states}

    def get_entity_configs(self, entity_type: str, names: Iterable[str]) -> dict[str, EntityConfig]:
        self.calls.append("configs")
        assert entity_type == "topics"
        return {n: EntityConfig(self.topic_configs.get(n, {}), None) for n in names}

    def set(
        self, tp: TopicPartition, leader: int, isr: tuple[int, ...], leader_epoch: int = 0
    ) -> None:
        """Write a state directly (as a previous controller or a leader did)."""
        self.states[tp] = LeaderIsrAndControllerEpoch(LeaderAndIsr(leader, leader_epoch, isr, 0), 1)


@dataclass(frozen=True)
class Sent:
    broker_id: int
    request: Any
    api_version: int
    callback: ResponseCallback | None


@dataclass
class FakeSender:
    """Records the requests a batch sends."""

    sent: list[Sent] = field(default_factory=list)

    def send_request(
        self,
        broker_id: int,
        request: Any,
        api_version: int,
        callback: ResponseCallback | None = None,
    ) -> None:
        self.sent.append(Sent(broker_id, request, api_version, callback))

    def of(self, name: str, broker_id: int | None = None) -> list[Sent]:
        """Sent requests of one kind (class name prefix, e.g. ``"LeaderAndIsr"``)."""
        return [
            s
            for s in self.sent
            if type(s.request).__name__.startswith(name)
            and (broker_id is None or s.broker_id == broker_id)
        ]

    def partition_states(self, name: str, broker_id: int) -> dict[TopicPartition, Any]:
        """Partition -> its state in the requests of one kind sent to ``broker_id``."""
        states: dict[TopicPartition, Any] = {}
        for sent in self.of(name, broker_id):
            for topic in sent.request.topic_states:
                for p in topic.partition_states:
                    states[TopicPartition(topic.topic_name, p.partition_index)] = p
        return states


def context_with(
    live: Iterable[int], assignments: Mapping[TopicPartition, tuple[int, ...]], epoch: int = 1
) -> ControllerContext:
    """A context with live brokers, assignments and controller epoch ``epoch`` (zk version 1)."""
    ctx = ControllerContext()
    ctx.epoch, ctx.epoch_zk_version = epoch, 1
    ctx.set_live_brokers(broker(b) for b in live)
    for tp, replicas in assignments.items():
        ctx.all_topics.add(tp.topic)
        ctx.update_partition_full_replica_assignment(tp, ReplicaAssignment(replicas))
    return ctx


def new_batch(
    ctx: ControllerContext, sender: FakeSender, **kwargs: Any
) -> ControllerBrokerRequestBatch:
    return ControllerBrokerRequestBatch(
        ctx, sender, controller_id=1, listener_name="PLAINTEXT", **kwargs
    )
