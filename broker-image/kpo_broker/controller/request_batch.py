"""ControllerBrokerRequestBatch: the requests one controller event sends to the brokers.

While the controller processes one event, the state machines *add* LeaderAndIsr,
UpdateMetadata and StopReplica entries per broker; at the end of the state change the
batch builds one request of each kind per broker and hands them to a
:class:`RequestSender` (the channel manager) in the order LeaderAndIsr, UpdateMetadata,
StopReplica, as Kafka's ``AbstractControllerBrokerRequestBatch`` does. Each request
carries the controller id, the controller epoch and the receiving broker's epoch
(KIP-380), so brokers reject requests of stale controllers (a deposed controller or
leader cannot act on an older epoch). Building is pure: entries are snapshots of the
:class:`ControllerContext` taken when added.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from kpo_broker.controller.context import ControllerContext
from kpo_broker.controller.errors import RequestBatchNotEmptyError
from kpo_broker.protocol.interbroker import (
    LeaderAndIsrLiveLeader,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrTopicState,
    StopReplicaPartitionState,
    StopReplicaRequest,
    StopReplicaTopicState,
    UpdateMetadataBroker,
    UpdateMetadataEndpoint,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
    UpdateMetadataTopicState,
)
from kpo_broker.zk.data import topic_id_to_uuid
from kpo_broker.zk.model import LEADER_DURING_DELETE, LeaderIsrAndControllerEpoch, ReplicaAssignment
from kpo_kafka.topic_partition import TopicPartition

_log = logging.getLogger(__name__)

#: StopReplica leader epoch when the controller knows none (KIP-570 ``NoEpoch``).
NO_EPOCH = -1
#: StopReplica leader epoch of a partition being deleted (KIP-570 ``EpochDuringDelete``).
EPOCH_DURING_DELETE = -2
#: Kafka's security protocol ids, as sent in UpdateMetadata endpoints.
SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}

#: Called with a decoded response.
ResponseCallback = Callable[[Any], None]
#: Called with (broker id, StopReplica response, partitions the request deleted).
StopReplicaResponseHandler = Callable[[int, Any, frozenset[TopicPartition]], None]
#: Called with (broker id, LeaderAndIsr response).
LeaderAndIsrResponseHandler = Callable[[int, Any], None]


@dataclass(frozen=True)
class RequestVersions:
    """Versions the controller sends its requests at.

    Only the topic-grouped shapes are built: LeaderAndIsr v2-v4, UpdateMetadata v5-v7,
    StopReplica v3 (KIP-570), i.e. what Kafka 2.6+ brokers accept.

    Raises:
        ValueError: a version outside those ranges.
    """

    leader_and_isr: int = 4
    update_metadata: int = 7
    stop_replica: int = 3

    def __post_init__(self) -> None:
        for name, value, lo, hi in (
            ("LeaderAndIsr", self.leader_and_isr, 2, 4),
            ("UpdateMetadata", self.update_metadata, 5, 7),
            ("StopReplica", self.stop_replica, 3, 3),
        ):
            if not lo <= value <= hi:
                raise ValueError(f"{name} v{value} is not supported (v{lo}-v{hi})")


class RequestSender(Protocol):
    """Where a batch's requests go: the controller's channel manager."""

    def send_request(
        self,
        broker_id: int,
        request: Any,
        api_version: int,
        callback: ResponseCallback | None = None,
    ) -> None:
        """Queue ``request`` for ``broker_id``; ``callback`` gets its response. Never blocks."""
        ...


@dataclass(frozen=True)
class _LeaderAndIsrEntry:
    leadership: LeaderIsrAndControllerEpoch
    assignment: ReplicaAssignment
    is_new: bool


@dataclass(frozen=True)
class _MetadataEntry:
    leadership: LeaderIsrAndControllerEpoch
    leader: int
    replicas: tuple[int, ...]
    offline_replicas: tuple[int, ...]


class ControllerBrokerRequestBatch:
    """Per-broker LeaderAndIsr / UpdateMetadata / StopReplica entries of one state change.

    Args:
        context: the controller's context (live brokers, epochs, leadership).
        sender: receives the built requests.
        controller_id: this broker's id.
        listener_name: the inter-broker listener (``inter.broker.listener.name``), whose
            endpoints are sent as LeaderAndIsr ``live_leaders``.
        versions: request versions.
        on_stop_replica_response: called as ``(broker_id, response, deleted)`` for each
            StopReplica response of a request that deletes partitions (topic deletion);
            ``deleted`` is the set of partitions the request asked to delete.
        on_leader_and_isr_response: called as ``(broker_id, response)`` for each
            LeaderAndIsr response (Kafka's ``LeaderAndIsrResponseReceived``: the
            KAFKA_STORAGE_ERROR answers name the replicas in offline log dirs).
    """

    def __init__(
        self,
        context: ControllerContext,
        sender: RequestSender,
        *,
        controller_id: int,
        listener_name: str,
        versions: RequestVersions | None = None,
        on_stop_replica_response: StopReplicaResponseHandler | None = None,
        on_leader_and_isr_response: LeaderAndIsrResponseHandler | None = None,
    ) -> None:
        self._context = context
        self.sender = sender
        self._controller_id = controller_id
        self._listener_name = listener_name
        self._versions = versions or RequestVersions()
        self._on_stop_replica_response = on_stop_replica_response
        self._on_leader_and_isr_response = on_leader_and_isr_response
        self._leader_and_isr: dict[int, dict[TopicPartition, _LeaderAndIsrEntry]] = defaultdict(
            dict
        )
        self._stop_replica: dict[int, dict[TopicPartition, bool]] = defaultdict(dict)
        self._metadata_brokers: set[int] = set()
        self._metadata_partitions: dict[TopicPartition, _MetadataEntry] = {}

    @property
    def is_empty(self) -> bool:
        """Whether nothing was added since the last send or clear."""
        return not (
            self._leader_and_isr
            or self._stop_replica
            or self._metadata_brokers
            or self._metadata_partitions
        )

    def new_batch(self) -> None:
        """Start a batch.

        Raises:
            RequestBatchNotEmptyError: the previous batch was neither sent nor cleared.
        """
        if not self.is_empty:
            raise RequestBatchNotEmptyError(
                "controller request batch not empty: "
                f"LeaderAndIsr to {sorted(self._leader_and_isr)}, "
                f"StopReplica to {sorted(self._stop_replica)}, "
                f"UpdateMetadata to {sorted(self._metadata_brokers)}"
            )

    def clear(self) -> None:
        """Drop everything added (after a failed state change)."""
        self._leader_and_isr.clear()
        self._stop_replica.clear()
        self._metadata_brokers.clear()
        self._metadata_partitions.clear()

    def add_leader_and_isr_request_for_brokers(
        self,
        broker_ids: Iterable[int],
        tp: TopicPartition,
        leadership: LeaderIsrAndControllerEpoch,
        assignment: ReplicaAssignment,
        is_new: bool,
    ) -> None:
        """Tell ``broker_ids`` the leader and ISR of ``tp``; UpdateMetadata for it to all brokers.

        Args:
            broker_ids: replicas to inform; negative ids are ignored.
            tp: the partition.
            leadership: its LeaderAndIsr and the controller epoch that wrote it.
            assignment: AR with the adding/removing replicas (LeaderAndIsr v3+).
            is_new: the replica is being created (NewReplica); kept once set in a batch.
        """
        for broker_id in broker_ids:
            if broker_id < 0:
                continue
            previous = self._leader_and_isr[broker_id].get(tp)
            self._leader_and_isr[broker_id][tp] = _LeaderAndIsrEntry(
                leadership, assignment, is_new or (previous is not None and previous.is_new)
            )
        self.add_update_metadata_request_for_brokers(
            self._context.live_or_shutting_down_broker_ids, [tp]
        )

    def add_stop_replica_request_for_brokers(
        self, broker_ids: Iterable[int], tp: TopicPartition, delete_partition: bool
    ) -> None:
        """Tell ``broker_ids`` to stop their replica of ``tp``, deleting its log if asked.

        A partition added twice for a broker is deleted if either addition asked so.
        """
        for broker_id in broker_ids:
            if broker_id < 0:
                continue
            previous = self._stop_replica[broker_id].get(tp, False)
            self._stop_replica[broker_id][tp] = previous or delete_partition

    def add_update_metadata_request_for_brokers(
        self, broker_ids: Iterable[int], partitions: Iterable[TopicPartition]
    ) -> None:
        """Send ``broker_ids`` an UpdateMetadata with the live brokers and ``partitions``' states.

        Partitions without leadership are left out; partitions of topics queued for
        deletion are sent with leader -2 (``LeaderDuringDelete``) so brokers stop serving
        them. With no partitions the request still carries the live brokers.
        """
        self._metadata_brokers |= {b for b in broker_ids if b >= 0}
        for tp in partitions:
            leadership = self._context.partition_leadership(tp)
            if leadership is None:
                continue
            replicas = self._context.partition_replica_assignment(tp)
            offline = tuple(r for r in replicas if not self._context.is_replica_online(r, tp))
            leader = leadership.leader_and_isr.leader
            if self._context.is_topic_queued_up_for_deletion(tp.topic):
                leader = LEADER_DURING_DELETE
            self._metadata_partitions[tp] = _MetadataEntry(leadership, leader, replicas, offline)

    def send_requests_to_brokers(self, controller_epoch: int) -> None:
        """Build and send every request of the batch, then clear it.

        Args:
            controller_epoch: this controller's epoch, put in every request.
        """
        try:
            for broker_id, entries in sorted(self._leader_and_isr.items()):
                if entries:
                    request = self.leader_and_isr_request(broker_id, entries, controller_epoch)
                    self.sender.send_request(
                        broker_id,
                        request,
                        self._versions.leader_and_isr,
                        self._leader_and_isr_callback(broker_id),
                    )
            if self._metadata_brokers:
                # The states and live brokers are the same for every broker (Kafka builds
                # them once per batch too); only the broker epoch differs.
                shared = self._update_metadata_content()
                for broker_id in sorted(self._metadata_brokers):
                    request = self.update_metadata_request(broker_id, controller_epoch, shared)
                    self.sender.send_request(broker_id, request, self._versions.update_metadata)
            for broker_id, stops in sorted(self._stop_replica.items()):
                if stops:
                    request = self.stop_replica_request(broker_id, stops, controller_epoch)
                    deleted = frozenset(tp for tp, delete in stops.items() if delete)
                    callback = self._stop_replica_callback(broker_id, deleted) if deleted else None
                    self.sender.send_request(
                        broker_id, request, self._versions.stop_replica, callback
                    )
        finally:
            self.clear()

    # --- request builders ---------------------------------------------------------------

    def _broker_epoch(self, broker_id: int) -> int:
        epoch = self._context.broker_epoch(broker_id)
        return -1 if epoch is None else epoch

    def leader_and_isr_request(
        self,
        broker_id: int,
        entries: Mapping[TopicPartition, _LeaderAndIsrEntry],
        controller_epoch: int,
    ) -> Any:
        """Build the LeaderAndIsr request (v2+ shape) for ``broker_id``."""
        by_topic: dict[str, list[Any]] = defaultdict(list)
        leaders: set[int] = set()
        for tp, entry in sorted(entries.items()):
            lai = entry.leadership.leader_and_isr
            leaders.add(lai.leader)
            by_topic[tp.topic].append(
                LeaderAndIsrPartitionState(
                    partition_index=tp.partition,
                    controller_epoch=entry.leadership.controller_epoch,
                    leader=lai.leader,
                    leader_epoch=lai.leader_epoch,
                    isr=list(lai.isr),
                    zk_version=lai.partition_epoch,
                    replicas=list(entry.assignment.replicas),
                    adding_replicas=list(entry.assignment.adding_replicas),
                    removing_replicas=list(entry.assignment.removing_replicas),
                    is_new=entry.is_new,
                )
            )
        live_leaders = []
        for leader_id in sorted(leaders):
            broker = self._context.live_broker(leader_id)
            endpoint = None if broker is None else broker.endpoint(self._listener_name)
            if endpoint is not None:
                live_leaders.append(
                    LeaderAndIsrLiveLeader(
                        broker_id=leader_id, host_name=endpoint.host, port=endpoint.port
                    )
                )
        return LeaderAndIsrRequest(
            controller_id=self._controller_id,
            controller_epoch=controller_epoch,
            broker_epoch=self._broker_epoch(broker_id),
            topic_states=[
                LeaderAndIsrTopicState(topic_name=topic, partition_states=states)
                for topic, states in sorted(by_topic.items())
            ],
            live_leaders=live_leaders,
        )

    def update_metadata_request(
        self,
        broker_id: int,
        controller_epoch: int,
        content: tuple[list[Any], list[Any]] | None = None,
    ) -> Any:
        """Build the UpdateMetadata request (v5+ shape) for ``broker_id``.

        Args:
            broker_id: the receiving broker (its epoch goes in the request).
            controller_epoch: this controller's epoch.
            content: the batch's topic states and live brokers, when already built
                (:meth:`_update_metadata_content`, shared by every broker's request).
        """
        topic_states, live_brokers = self._update_metadata_content() if content is None else content
        return UpdateMetadataRequest(
            controller_id=self._controller_id,
            controller_epoch=controller_epoch,
            broker_epoch=self._broker_epoch(broker_id),
            topic_states=topic_states,
            live_brokers=live_brokers,
        )

    def _update_metadata_content(self) -> tuple[list[Any], list[Any]]:
        """Return the UpdateMetadata topic states and live brokers of this batch."""
        by_topic: dict[str, list[Any]] = defaultdict(list)
        for tp, entry in sorted(self._metadata_partitions.items()):
            lai = entry.leadership.leader_and_isr
            by_topic[tp.topic].append(
                UpdateMetadataPartitionState(
                    partition_index=tp.partition,
                    controller_epoch=entry.leadership.controller_epoch,
                    leader=entry.leader,
                    leader_epoch=lai.leader_epoch,
                    isr=list(lai.isr),
                    zk_version=lai.partition_epoch,
                    replicas=list(entry.replicas),
                    offline_replicas=list(entry.offline_replicas),
                )
            )
        live_brokers = [
            UpdateMetadataBroker(
                id=broker.id,
                endpoints=[
                    UpdateMetadataEndpoint(
                        port=e.port,
                        host=e.host,
                        listener=e.listener_name,
                        security_protocol=SECURITY_PROTOCOL_IDS.get(e.security_protocol, 0),
                    )
                    for e in broker.endpoints
                ],
                rack=broker.rack,
            )
            for broker in self._context.live_or_shutting_down_brokers
        ]
        topic_states = [
            UpdateMetadataTopicState(
                topic_name=topic,
                topic_id=topic_id_to_uuid(self._context.topic_ids.get(topic)),
                partition_states=states,
            )
            for topic, states in sorted(by_topic.items())
        ]
        return topic_states, live_brokers

    def stop_replica_request(
        self, broker_id: int, stops: Mapping[TopicPartition, bool], controller_epoch: int
    ) -> Any:
        """Build the StopReplica request (v3 shape, KIP-570 leader epochs) for ``broker_id``."""
        by_topic: dict[str, list[Any]] = defaultdict(list)
        for tp, delete in sorted(stops.items()):
            if delete:
                leader_epoch = EPOCH_DURING_DELETE
            else:
                leadership = self._context.partition_leadership(tp)
                leader_epoch = (
                    NO_EPOCH if leadership is None else leadership.leader_and_isr.leader_epoch
                )
            by_topic[tp.topic].append(
                StopReplicaPartitionState(
                    partition_index=tp.partition, leader_epoch=leader_epoch, delete_partition=delete
                )
            )
        return StopReplicaRequest(
            controller_id=self._controller_id,
            controller_epoch=controller_epoch,
            broker_epoch=self._broker_epoch(broker_id),
            topic_states=[
                StopReplicaTopicState(topic_name=topic, partition_states=states)
                for topic, states in sorted(by_topic.items())
            ],
        )

    def _leader_and_isr_callback(self, broker_id: int) -> ResponseCallback | None:
        handler = self._on_leader_and_isr_response
        if handler is None:
            return None
        return lambda response: handler(broker_id, response)

    def _stop_replica_callback(
        self, broker_id: int, deleted: frozenset[TopicPartition]
    ) -> ResponseCallback | None:
        handler = self._on_stop_replica_response
        if handler is None:
            return None
        return lambda response: handler(broker_id, response, deleted)
