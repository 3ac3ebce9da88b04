"""``KafkaZkClient``: the brokers' and the controller's access to ZooKeeper.

One class gathers the operations, each group in its own module over the shared
:class:`~kpo_broker.zk.session.ZkSession` (connection, pipelining, fencing):

- :mod:`~kpo_broker.zk.brokers`: broker registration and epochs, ``/brokers/seqid``,
  ``/cluster/id``;
- :mod:`~kpo_broker.zk.controller`: controller election and epoch;
- :mod:`~kpo_broker.zk.topics`: topic creation, replica assignments, deletion;
- :mod:`~kpo_broker.zk.partition_states`: batched LeaderAndIsr reads and writes;
- :mod:`~kpo_broker.zk.admin`: ISR change notifications, reassignment, preferred election;
- :mod:`~kpo_broker.zk.configs`: dynamic configs and their change notifications;
- :mod:`~kpo_broker.zk.producer_ids`: producer id blocks for idempotent producers;
- :mod:`~kpo_broker.zk.watches`: watches delivering bare events.
"""

from __future__ import annotations

from kpo_broker.zk.admin import AdminZk
from kpo_broker.zk.brokers import BrokerZk
from kpo_broker.zk.configs import ConfigZk
from kpo_broker.zk.controller import ControllerZk
from kpo_broker.zk.partition_states import PartitionStateZk
from kpo_broker.zk.producer_ids import ProducerIdZk
from kpo_broker.zk.topics import TopicZk
from kpo_broker.zk.watches import WatchZk


class KafkaZkClient(
    BrokerZk,
    ControllerZk,
    TopicZk,
    PartitionStateZk,
    AdminZk,
    ConfigZk,
    ProducerIdZk,
    WatchZk,
):
    """Kafka's ZooKeeper client, over one kazoo session.

    Args:
        connect: ``zookeeper.connect``, e.g. ``"127.0.0.1:2181/kafka"`` (the chroot is
            created on :meth:`connect` when missing).
        session_timeout_ms: ``zookeeper.session.timeout.ms`` (default 18000).
        connection_timeout_ms: ``zookeeper.connection.timeout.ms`` (default: the session
            timeout).
        max_in_flight_requests: requests pipelined before waiting for responses.

    Use :meth:`connect` and :meth:`close`, or a ``with`` block. Errors are the named
    classes of :mod:`kpo_broker.zk.errors`.
    """

    def __enter__(self) -> KafkaZkClient:
        self.connect()
        return self
