"""The ZooKeeper watches of the active controller, turned into controller events.

The controller's ZooKeeper listeners; each one here only enqueues an event (the event
thread re-reads ZooKeeper), as Kafka's ``ZNodeChangeHandler``s do:

=================================== =====================================
znode                               event
=================================== =====================================
``/brokers/ids`` children           :class:`BrokerChange`
``/brokers/ids/<id>``               :class:`BrokerModifications`
``/brokers/topics`` children        :class:`TopicChange`
``/brokers/topics/<topic>``         :class:`PartitionModifications`
``/admin/delete_topics`` children   :class:`TopicDeletion`
``/isr_change_notification`` child. :class:`IsrChangeNotification`
``/log_dir_event_notification`` ch. :class:`LogDirEventNotification`
``/admin/preferred_replica_election`` :class:`PreferredReplicaElectionZNode`
``/admin/reassign_partitions``      :class:`ZkPartitionReassignment` (creation)
``.../partitions/<p>/state``        :class:`PartitionReassignmentIsrChange`
=================================== =====================================

The state znode watches exist only for partitions being reassigned (Kafka's
``PartitionReassignmentIsrChangeHandler``): the controller completes a reassignment as
soon as every target replica is in the ISR.

They are registered at failover *before* the controller reads ZooKeeper (so no change
is missed) and cancelled at resignation. The ``/controller`` watch every broker keeps
is not here: it lives as long as the controller object.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from kpo_broker.controller.events import (
    BrokerChange,
    BrokerModifications,
    ControllerEvent,
    IsrChangeNotification,
    LogDirEventNotification,
    PartitionModifications,
    PartitionReassignmentIsrChange,
    PreferredReplicaElectionZNode,
    TopicChange,
    TopicDeletion,
    ZkPartitionReassignment,
)
from kpo_broker.zk import paths
from kpo_broker.zk.watches import WatchCallback, ZkWatch, ZkWatchEvent, ZkWatchEventType
from kpo_kafka.topic_partition import TopicPartition


class WatchRegistrar(Protocol):
    """Watch registration of ``KafkaZkClient``."""

    def watch_children(self, path: str, callback: WatchCallback) -> ZkWatch:
        """Watch a znode's children."""
        ...

    def watch_data_many(self, watched: Sequence[tuple[str, WatchCallback]]) -> list[ZkWatch]:
        """Watch many znodes' existence and data, installed together."""
        ...


class ControllerWatches:
    """The active controller's watches (see module docstring).

    Args:
        zk: registers the watches.
        put: enqueues an event (``ControllerEventManager.put``); called on kazoo threads.
    """

    def __init__(self, zk: WatchRegistrar, put: Callable[[ControllerEvent], None]) -> None:
        self._zk = zk
        self._put = put
        self._watches: dict[str, ZkWatch] = {}

    def _enqueue(self, event: ControllerEvent) -> WatchCallback:
        """Return a watch callback that enqueues ``event`` whatever happened."""
        return lambda _: self._put(event)

    def _children(self, path: str, event: ControllerEvent) -> None:
        if path not in self._watches:
            self._watches[path] = self._zk.watch_children(path, self._enqueue(event))

    def _data(self, path: str, on_event: WatchCallback) -> None:
        self._data_many({path: on_event})

    def _data_many(self, watched: dict[str, WatchCallback]) -> None:
        """Watch the znodes not watched yet, installed in one pipelined batch."""
        wanted = {path: cb for path, cb in watched.items() if path not in self._watches}
        if wanted:
            handles = self._zk.watch_data_many(list(wanted.items()))
            self._watches.update(zip(wanted, handles, strict=True))

    def register_failover_watches(self) -> None:
        """Watch brokers, topics, deletions, ISR and log dir notifications, preferred elections."""
        self._children(paths.BROKER_IDS, BrokerChange())
        self._children(paths.BROKER_TOPICS, TopicChange())
        self._children(paths.ADMIN_DELETE_TOPICS, TopicDeletion())
        self._children(paths.ISR_CHANGE_NOTIFICATION, IsrChangeNotification())
        self._children(paths.LOG_DIR_EVENT_NOTIFICATION, LogDirEventNotification())

        def on_election(event: ZkWatchEvent) -> None:
            if event.type is not ZkWatchEventType.DELETED:
                self._put(PreferredReplicaElectionZNode())

        self._data(paths.ADMIN_PREFERRED_REPLICA_ELECTION, on_election)

        def on_reassignment(event: ZkWatchEvent) -> None:
            if event.type is ZkWatchEventType.CREATED:
                self._put(ZkPartitionReassignment())

        self._data(paths.ADMIN_REASSIGN_PARTITIONS, on_reassignment)

    def watch_reassignment_isrs(self, tps: Iterable[TopicPartition]) -> None:
        """Watch the state znodes of partitions being reassigned (ISR changes), together.

        Installed in one pipelined batch (``watch_data_many``); those already watched
        are skipped.
        """
        wanted: dict[str, WatchCallback] = {}
        for tp in tps:
            path = paths.partition_state_path(tp.topic, tp.partition)
            if path not in self._watches and path not in wanted:
                wanted[path] = self._on_state_change(PartitionReassignmentIsrChange(tp))
        self._data_many(wanted)

    def _on_state_change(self, event: ControllerEvent) -> WatchCallback:
        """Return a watch callback that enqueues ``event`` unless the znode was deleted."""

        def callback(watch_event: ZkWatchEvent) -> None:
            if watch_event.type is not ZkWatchEventType.DELETED:
                self._put(event)

        return callback

    def unwatch_reassignment_isr(self, tp: TopicPartition) -> None:
        """Stop watching the state znode of a partition whose reassignment ended."""
        self._cancel(paths.partition_state_path(tp.topic, tp.partition))

    def watch_topics(self, topics: Iterable[str]) -> None:
        """Watch the assignment znodes of ``topics`` (partition additions), together."""
        self._data_many(
            {
                paths.topic_path(topic): self._enqueue(PartitionModifications(topic))
                for topic in topics
            }
        )

    def unwatch_topic(self, topic: str) -> None:
        """Stop watching a deleted topic's assignment."""
        self._cancel(paths.topic_path(topic))

    def watch_brokers(self, broker_ids: Iterable[int]) -> None:
        """Watch the registration znodes of ``broker_ids`` (endpoint changes), together."""
        self._data_many(
            {paths.broker_path(b): self._on_data_change(BrokerModifications(b)) for b in broker_ids}
        )

    def _on_data_change(self, event: ControllerEvent) -> WatchCallback:
        """Return a watch callback that enqueues ``event`` when the data changed."""

        def callback(watch_event: ZkWatchEvent) -> None:
            if watch_event.type is ZkWatchEventType.DATA_CHANGED:
                self._put(event)

        return callback

    def unwatch_brokers(self, broker_ids: Iterable[int]) -> None:
        """Stop watching the registrations of dead brokers."""
        for broker_id in broker_ids:
            self._cancel(paths.broker_path(broker_id))

    def _cancel(self, path: str) -> None:
        watch = self._watches.pop(path, None)
        if watch is not None:
            watch.cancel()

    def cancel_all(self) -> None:
        """Cancel every watch (resignation)."""
        for watch in self._watches.values():
            watch.cancel()
        self._watches.clear()
