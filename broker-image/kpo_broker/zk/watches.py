"""ZooKeeper watches for the controller and the brokers, delivered as bare events.

Callbacks receive only a :class:`ZkWatchEvent` (which znode, what happened), never the
data: as in Kafka's controller, the callback just enqueues the event and the event
thread re-reads ZooKeeper (Kafka's ``ZNodeChangeHandler`` and
``ZNodeChildChangeHandler``: BrokerChange, TopicChange, TopicDeletion, PartitionModifications,
PartitionReassignment, PreferredReplicaElection, IsrChangeNotification...). Children
watches are kazoo's ``ChildrenWatch`` recipe, which re-arms itself after each trigger and
after a reconnection (a change missed while disconnected is reported then);
:func:`children_watcher` turns its calls into events. Data watches are raw ``exists``
watches kept by :class:`~kpo_broker.zk.data_watches.DataWatchSet`, with the same
guarantees. Callbacks run on kazoo's threads and must not block.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


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


def children_watcher(
    handle: ZkWatch, callback: WatchCallback
) -> Callable[[list[str], Any], bool | None]:
    """Return the function a ``ChildrenWatch`` recipe calls, delivering CHILDREN_CHANGED.

    The recipe's first call (when it is installed) is not a change and delivers nothing;
    each later call delivers one event. Once ``handle`` is cancelled the function returns
    False, which ends the recipe.
    """
    initial = [True]

    def on_children(children: list[str], event: Any) -> bool | None:
        if not handle.active:
            return False
        if initial[0]:
            initial[0] = False
            return None
        callback(ZkWatchEvent(handle.path, ZkWatchEventType.CHILDREN_CHANGED))
        return None

    return on_children
