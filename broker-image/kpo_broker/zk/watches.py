"""ZooKeeper watches for the controller and the brokers, delivered as bare events.

Callbacks receive only a :class:`ZkWatchEvent` (which znode, what happened), never the
data: as in Kafka's controller, the callback just enqueues the event and the event
thread re-reads ZooKeeper (seed 001 §G lists the listeners). Watches are kazoo's
``ChildrenWatch``/``DataWatch`` recipes, which re-arm themselves after each trigger and
after a reconnection (a change missed while disconnected is reported then).
Callbacks run on kazoo's threads and must not block.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from kpo_broker.zk import paths
from kpo_broker.zk.session import ZkSession


class ZkWatchEventType(enum.Enum):
    """What happened to a watched znode (Kafka's change handler methods)."""

    CHILDREN_CHANGED = "children_changed"
    CREATED = "created"
    DELETED = "deleted"
    DATA_CHANGED = "data_changed"


@dataclass(frozen=True)
class ZkWatchEvent:
    """A watch notification.

    Attributes:
        path: the watched znode, relative to the chroot.
        type: what happened.
    """

    path: str
    type: ZkWatchEventType


#: A watch callback: gets the event only; enqueue it and return.
WatchCallback = Callable[[ZkWatchEvent], None]


class ZkWatch:
    """Handle of a registered watch; :meth:`cancel` stops the deliveries.

    Args:
        path: the watched znode.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._cancelled = threading.Event()

    def cancel(self) -> None:
        """Stop delivering events (kazoo drops the watch at its next trigger)."""
        self._cancelled.set()

    @property
    def active(self) -> bool:
        """Whether events are still delivered."""
        return not self._cancelled.is_set()


class WatchZk(ZkSession):
    """Registration of children and data watches on Kafka's znodes."""

    def watch_children(self, path: str, callback: WatchCallback) -> ZkWatch:
        """Call ``callback`` with CHILDREN_CHANGED each time ``path``'s children change.

        ``path`` is created if missing (a children watch needs an existing znode); the
        watch ends if the znode is deleted.

        Raises:
            ZkConnectionLossError: the session failed.
        """
        self._ensure_paths([path])
        handle = ZkWatch(path)
        initial = [True]

        def on_children(children: list[str], event: Any) -> bool | None:
            if not handle.active:
                return False
            if initial[0]:
                initial[0] = False
                return None
            callback(ZkWatchEvent(path, ZkWatchEventType.CHILDREN_CHANGED))
            return None

        ChildrenWatch(self._zk, path, on_children, send_event=True)
        return handle

    def watch_data(self, path: str, callback: WatchCallback) -> ZkWatch:
        """Call ``callback`` when ``path`` is created, deleted or its data changes.

        The znode need not exist.

        Raises:
            ZkConnectionLossError: the session failed.
        """
        handle = ZkWatch(path)
        existed: list[bool | None] = [None]

        def on_data(data: bytes | None, stat: Any, event: Any) -> bool | None:
            if not handle.active:
                return False
            exists, before = stat is not None, existed[0]
            existed[0] = exists
            if before is None:
                return None
            if not exists:
                kind = ZkWatchEventType.DELETED
            elif not before:
                kind = ZkWatchEventType.CREATED
            else:
                kind = ZkWatchEventType.DATA_CHANGED
            callback(ZkWatchEvent(path, kind))
            return None

        DataWatch(self._zk, path, on_data)
        return handle

    def watch_broker_ids(self, callback: WatchCallback) -> ZkWatch:
        """Watch ``/brokers/ids`` children: brokers joining or failing (BrokerChangeListener)."""
        return self.watch_children(paths.BROKER_IDS, callback)

    def watch_topics(self, callback: WatchCallback) -> ZkWatch:
        """Watch ``/brokers/topics`` children: topics created or deleted (TopicChangeListener)."""
        return self.watch_children(paths.BROKER_TOPICS, callback)

    def watch_topic_assignment(self, topic: str, callback: WatchCallback) -> ZkWatch:
        """Watch ``/brokers/topics/<topic>``: partitions added or AR changed (AddPartitions)."""
        return self.watch_data(paths.topic_path(topic), callback)

    def watch_topic_deletions(self, callback: WatchCallback) -> ZkWatch:
        """Watch ``/admin/delete_topics`` children: topics queued for deletion."""
        return self.watch_children(paths.ADMIN_DELETE_TOPICS, callback)

    def watch_isr_change_notifications(self, callback: WatchCallback) -> ZkWatch:
        """Watch ``/isr_change_notification`` children: leaders announcing ISR changes."""
        return self.watch_children(paths.ISR_CHANGE_NOTIFICATION, callback)

    def watch_partition_reassignment(self, callback: WatchCallback) -> ZkWatch:
        """Watch ``/admin/reassign_partitions`` (PartitionReassignedListener, seed 000 §4.2)."""
        return self.watch_data(paths.ADMIN_REASSIGN_PARTITIONS, callback)

    def watch_preferred_replica_election(self, callback: WatchCallback) -> ZkWatch:
        """Watch ``/admin/preferred_replica_election`` (PreferredReplicaElectionListener)."""
        return self.watch_data(paths.ADMIN_PREFERRED_REPLICA_ELECTION, callback)

    def watch_controller(self, callback: WatchCallback) -> ZkWatch:
        """Watch ``/controller``: brokers re-elect when it is deleted (controller failover)."""
        return self.watch_data(paths.CONTROLLER, callback)

    def watch_config_changes(self, callback: WatchCallback) -> ZkWatch:
        """Watch ``/config/changes`` children: dynamic config change notifications."""
        return self.watch_children(paths.CONFIG_CHANGES, callback)
