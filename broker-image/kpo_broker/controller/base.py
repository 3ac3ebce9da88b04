"""State shared by the controller's event handlers, and the helpers they all use.

:class:`~kpo_broker.controller.controller.KafkaController` is assembled from this base
and one mixin per event family (brokers, topics, elections), each in its own module.
Everything here is touched only by the controller's event thread, except
:attr:`ControllerBase.is_active` (a plain read).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from kpo_broker.config import BrokerConfig
from kpo_broker.controller.channel_manager import ControllerChannelManager
from kpo_broker.controller.context import ControllerContext
from kpo_broker.controller.event_manager import ControllerEventManager
from kpo_broker.controller.partition_state_machine import PartitionStateMachine
from kpo_broker.controller.replica_state_machine import ReplicaStateMachine
from kpo_broker.controller.request_batch import ControllerBrokerRequestBatch, ResponseCallback
from kpo_broker.controller.topic_deletion import TopicDeletionManager
from kpo_broker.controller.watches import ControllerWatches
from kpo_broker.zk.client import KafkaZkClient
from kpo_broker.zk.model import TopicPartition

_log = logging.getLogger("kpo_broker.controller")

#: ``_active_controller_id`` when no controller is known.
NO_CONTROLLER = -1


class ControllerBase:
    """Attributes and helpers shared by the controller's mixins.

    Attributes:
        config: the broker's configuration.
        zk: the broker's ZooKeeper client (its session also holds the broker registration).
        context: cached cluster metadata, valid while active.
        event_manager: the event queue and thread.
        batch: the request batch the state machines fill.
        partition_state_machine: partition states.
        replica_state_machine: replica states.
        topic_deletion_manager: topic deletions.
        watches: the active controller's watches.
        channel_manager: connections to the brokers, while active.
    """

    config: BrokerConfig
    zk: KafkaZkClient
    context: ControllerContext
    event_manager: ControllerEventManager
    batch: ControllerBrokerRequestBatch
    partition_state_machine: PartitionStateMachine
    replica_state_machine: ReplicaStateMachine
    topic_deletion_manager: TopicDeletionManager
    watches: ControllerWatches
    channel_manager: ControllerChannelManager | None
    _active_controller_id: int

    @property
    def broker_id(self) -> int:
        """Return the id of the broker running this controller (``broker.id``)."""
        return self.config.broker_id

    @property
    def is_active(self) -> bool:
        """Whether this broker is the active controller; safe to read from any thread."""
        return self._active_controller_id == self.config.broker_id

    @property
    def active_controller_id(self) -> int:
        """The controller this broker knows of, or -1 (as last read from ``/controller``)."""
        return self._active_controller_id

    def send_request(
        self,
        broker_id: int,
        request: Any,
        api_version: int,
        callback: ResponseCallback | None = None,
    ) -> None:
        """Queue a request on the channel manager (the batch's :class:`RequestSender`).

        Dropped when the controller is not active (no channel manager).
        """
        channel = self.channel_manager
        if channel is None:
            _log.warning("not sending %s: the controller is not active", type(request).__name__)
            return
        channel.send_request(broker_id, request, api_version, callback)

    def send_update_metadata_request(
        self, broker_ids: Iterable[int], partitions: Iterable[TopicPartition]
    ) -> None:
        """Send UpdateMetadata (live brokers + ``partitions``' states) to ``broker_ids``.

        Errors are logged (Kafka's ``sendUpdateMetadataRequest``); nothing is written.
        """
        try:
            self.batch.new_batch()
            self.batch.add_update_metadata_request_for_brokers(broker_ids, partitions)
            self.batch.send_requests_to_brokers(self.context.epoch)
        except Exception:
            _log.exception("failed to send UpdateMetadata")
            self.batch.clear()
