"""Watches deliver bare events for the znodes the controller and brokers follow."""

import queue
import socket
from collections.abc import Callable, Iterator

import pytest
from kazoo.client import KazooClient

from kpo_broker.zk.client import KafkaZkClient
from kpo_broker.zk.model import BrokerRegistration, EndPoint
from kpo_broker.zk.session import ZkSessionState
from kpo_broker.zk.watches import ZkWatchEvent, ZkWatchEventType
from kpo_kafka.topic_partition import TopicPartition

pytestmark = pytest.mark.integration

CHILDREN = ZkWatchEventType.CHILDREN_CHANGED
WAIT_S = 15


class Events:
    """A queue that watch callbacks put events into, as the controller's event queue does."""

    def __init__(self) -> None:
        self.queue: queue.Queue[ZkWatchEvent] = queue.Queue()

    def __call__(self, event: ZkWatchEvent) -> None:
        self.queue.put(event)

    def next(self) -> ZkWatchEvent:
        return self.queue.get(timeout=WAIT_S)


def test_children_watches_fire_on_each_change(new_client: Callable[..., KafkaZkClient]) -> None:
    controller, broker = new_client(), new_client()
    events = Events()
    controller.watch_broker_ids(events)
    controller.watch_topics(events)
    controller.watch_topic_deletions(events)
    controller.watch_isr_change_notifications(events)
    controller.watch_config_changes(events)
    assert events.queue.empty()  # registration reports nothing

    broker.register_broker(BrokerRegistration(4, (EndPoint("PLAINTEXT", "h", 9092),)))
    assert events.next() == ZkWatchEvent("/brokers/ids", CHILDREN)
    broker.create_topic("t", {0: [4]}, {})
    assert events.next() == ZkWatchEvent("/brokers/topics", CHILDREN)
    broker.mark_topics_for_deletion(["t"])
    assert events.next() == ZkWatchEvent("/admin/delete_topics", CHILDREN)
    broker.propagate_isr_change([TopicPartition("t", 0)])
    assert events.next() == ZkWatchEvent("/isr_change_notification", CHILDREN)
    broker.set_entity_config("brokers", "4", {"log.retention.ms": "5"})
    assert events.next() == ZkWatchEvent("/config/changes", CHILDREN)
    # The watches re-arm: a broker failure is seen too.
    broker.close()
    assert events.next() == ZkWatchEvent("/brokers/ids", CHILDREN)


def test_data_watches_report_creation_change_and_deletion(
    new_client: Callable[..., KafkaZkClient],
) -> None:
    controller, admin = new_client(), new_client()
    epoch = controller.try_elect_controller(1)
    assert epoch is not None
    events = Events()
    controller.watch_partition_reassignment(events)
    controller.watch_preferred_replica_election(events)
    path = "/admin/reassign_partitions"

    admin.create_partition_reassignment({TopicPartition("t", 0): [1, 2]})
    assert events.next() == ZkWatchEvent(path, ZkWatchEventType.CREATED)
    controller.set_partition_reassignment(
        {TopicPartition("t", 0): [2]}, controller_epoch_zk_version=epoch.zk_version
    )
    assert events.next() == ZkWatchEvent(path, ZkWatchEventType.DATA_CHANGED)
    controller.delete_partition_reassignment(controller_epoch_zk_version=epoch.zk_version)
    assert events.next() == ZkWatchEvent(path, ZkWatchEventType.DELETED)
    admin.create_preferred_replica_election([TopicPartition("t", 0)])
    assert events.next() == ZkWatchEvent(
        "/admin/preferred_replica_election", ZkWatchEventType.CREATED
    )


def test_controller_watch_sees_the_controller_go(new_client: Callable[..., KafkaZkClient]) -> None:
    controller, standby = new_client(), new_client()
    events = Events()
    standby.watch_controller(events)
    assert controller.try_elect_controller(1) is not None
    assert events.next() == ZkWatchEvent("/controller", ZkWatchEventType.CREATED)
    controller.close()
    assert events.next() == ZkWatchEvent("/controller", ZkWatchEventType.DELETED)
    assert standby.try_elect_controller(2) is not None
    assert events.next() == ZkWatchEvent("/controller", ZkWatchEventType.CREATED)


def test_topic_assignment_watch_and_cancel(zk_client: KafkaZkClient) -> None:
    zk_client.create_topic("grow", {0: [1]}, {})
    topic_events, broker_events = Events(), Events()
    watch = zk_client.watch_topic_assignment("grow", topic_events)
    zk_client.watch_broker_ids(broker_events)
    read = zk_client.get_replica_assignments(["grow"])["grow"]
    grown = {**read.partitions, 1: read.partitions[0]}
    assert (
        zk_client.set_replica_assignment("grow", grown, read.zk_version, topic_id=read.topic_id)
        == 1
    )
    assert topic_events.next() == ZkWatchEvent(
        "/brokers/topics/grow", ZkWatchEventType.DATA_CHANGED
    )

    watch.cancel()
    assert not watch.active
    zk_client.set_replica_assignment("grow", read.partitions, 1, topic_id=read.topic_id)
    # A later event on another watch arrives; the cancelled watch delivered nothing before it.
    zk_client.register_broker(BrokerRegistration(1, (EndPoint("PLAINTEXT", "h", 1),)))
    assert broker_events.next() == ZkWatchEvent("/brokers/ids", CHILDREN)
    assert topic_events.queue.empty()


def test_session_listener_reports_close(zk_client: KafkaZkClient) -> None:
    states: queue.Queue[ZkSessionState] = queue.Queue()
    zk_client.add_session_listener(states.put)
    zk_client.close()
    assert states.get(timeout=WAIT_S) is ZkSessionState.EXPIRED


@pytest.fixture
def raw(zk_connect: str) -> Iterator[KazooClient]:
    """A plain kazoo client on the test's chroot, to change znodes as another process would."""
    client = KazooClient(hosts=zk_connect)
    client.start(timeout=WAIT_S)
    client.ensure_path("/")
    try:
        yield client
    finally:
        client.stop()
        client.close()


def test_many_data_watches_install_pipelined_and_report_each_change(
    zk_client: KafkaZkClient, raw: KazooClient
) -> None:
    paths = [f"/w/{i}" for i in range(200)]
    for path in paths[:100]:
        raw.create(path, b"0", makepath=True)
    events = Events()
    before = zk_client.stats

    handles = zk_client.watch_data_many([(path, events) for path in paths])

    after = zk_client.stats
    assert after.requests - before.requests == len(paths)
    assert after.round_trips - before.round_trips == len(paths) // 10  # a window of 10
    assert [h.path for h in handles] == paths
    assert events.queue.empty()  # installing reports nothing

    for path in paths:  # a change of each, whether the znode existed or not
        if path in paths[:100]:
            raw.set(path, b"1")
        else:
            raw.create(path, b"1")
    got = [events.next() for _ in paths]
    assert sorted(got, key=lambda e: int(e.path.rsplit("/", 1)[1])) == [
        ZkWatchEvent(path, ZkWatchEventType.DATA_CHANGED if i < 100 else ZkWatchEventType.CREATED)
        for i, path in enumerate(paths)
    ]
    # Re-armed: the next change is reported too; a cancelled watch reports nothing.
    handles[1].cancel()
    raw.delete(paths[0])
    raw.set(paths[1], b"2")
    raw.set(paths[2], b"2")
    assert events.next() == ZkWatchEvent(paths[0], ZkWatchEventType.DELETED)
    assert events.next() == ZkWatchEvent(paths[2], ZkWatchEventType.DATA_CHANGED)
    assert events.queue.empty()


def test_data_watches_survive_a_dropped_connection(
    zk_client: KafkaZkClient, raw: KazooClient
) -> None:
    raw.create("/w/a", b"0", makepath=True)
    events = Events()
    zk_client.watch_data_many([("/w/a", events), ("/w/b", events)])
    states: queue.Queue[ZkSessionState] = queue.Queue()
    zk_client.add_session_listener(states.put)

    # The TCP connection breaks (the session survives); ZooKeeper drops its watches
    # with it, and kazoo does not set them again.
    zk_client._session._zk._connection._socket.shutdown(socket.SHUT_RDWR)
    raw.set("/w/a", b"1")  # while disconnected, or just after
    assert states.get(timeout=WAIT_S) is ZkSessionState.SUSPENDED
    assert states.get(timeout=WAIT_S) is ZkSessionState.CONNECTED
    assert events.next() == ZkWatchEvent("/w/a", ZkWatchEventType.DATA_CHANGED)

    # The watches were armed again on the new connection.
    raw.create("/w/b", b"0")
    assert events.next() == ZkWatchEvent("/w/b", ZkWatchEventType.CREATED)
    raw.set("/w/a", b"2")
    assert events.next() == ZkWatchEvent("/w/a", ZkWatchEventType.DATA_CHANGED)
    assert events.queue.empty()
