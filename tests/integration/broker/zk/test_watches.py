"""Watches deliver bare events for the znodes the controller and brokers follow."""

import queue
from collections.abc import Callable

import pytest

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
