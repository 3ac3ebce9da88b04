"""Broker registration, broker epochs, broker id sequence and cluster id on real ZooKeeper."""

from collections.abc import Callable

import pytest
from kazoo.client import KazooClient

from kpo_broker.zk.client import KafkaZkClient
from kpo_broker.zk.errors import BrokerIdAlreadyRegisteredError, ZkConnectionLossError
from kpo_broker.zk.model import BrokerRegistration, EndPoint
from kpo_devenv import ZooKeeperServer

pytestmark = pytest.mark.integration


def registration(broker_id: int, rack: str | None = None) -> BrokerRegistration:
    return BrokerRegistration(
        broker_id, (EndPoint("PLAINTEXT", f"broker{broker_id}", 9092 + broker_id),), rack
    )


def test_connect_creates_chroot_and_kafka_persistent_paths(
    zookeeper: ZooKeeperServer, zk_connect: str, zk_client: KafkaZkClient
) -> None:
    chroot = zk_connect[len(zookeeper.connect_string) :]
    raw = KazooClient(hosts=zookeeper.connect_string)
    raw.start(timeout=15)
    try:
        for path in ("/brokers/ids", "/brokers/topics", "/admin/delete_topics", "/config/changes"):
            assert raw.exists(chroot + path) is not None
    finally:
        raw.stop()
        raw.close()
    assert zk_client.connected


def test_register_broker_returns_czxid_as_broker_epoch(
    new_client: Callable[..., KafkaZkClient],
) -> None:
    first, second = new_client(), new_client()
    epoch1 = first.register_broker(registration(1, rack="r1"))
    epoch2 = second.register_broker(registration(2))
    assert 0 < epoch1 < epoch2
    brokers = first.get_live_brokers()
    assert sorted(brokers) == [1, 2]
    assert brokers[1] == BrokerRegistration(
        1, (EndPoint("PLAINTEXT", "broker1", 9093),), "r1", epoch=epoch1
    )
    assert brokers[2].epoch == epoch2
    assert second.get_broker(1) == brokers[1]
    assert first.get_live_broker_ids() == [1, 2]


def test_duplicate_broker_id_is_refused(new_client: Callable[..., KafkaZkClient]) -> None:
    owner, intruder = new_client(), new_client()
    epoch = owner.register_broker(registration(7))
    with pytest.raises(BrokerIdAlreadyRegisteredError):
        intruder.register_broker(registration(7))
    # The owner's own session may register again (a retried create) and keeps its epoch.
    assert owner.register_broker(registration(7)) == epoch


def test_registration_vanishes_with_the_session_and_a_new_one_has_a_higher_epoch(
    new_client: Callable[..., KafkaZkClient],
) -> None:
    watcher, owner = new_client(), new_client()
    old_epoch = owner.register_broker(registration(3))
    owner.close()
    assert watcher.get_broker(3) is None
    assert watcher.get_live_brokers() == {}
    restarted = new_client()
    assert restarted.register_broker(registration(3)) > old_epoch


def test_broker_sequence_ids_increase(zk_client: KafkaZkClient) -> None:
    ids = [zk_client.generate_broker_sequence_id() for _ in range(3)]
    assert ids == [ids[0], ids[0] + 1, ids[0] + 2]


def test_cluster_id_is_created_once(new_client: Callable[..., KafkaZkClient]) -> None:
    first, second = new_client(), new_client()
    assert first.get_cluster_id() is None
    assert first.get_or_create_cluster_id("Xd7ZqVBhSJ-7-tXwGkC7bA") == "Xd7ZqVBhSJ-7-tXwGkC7bA"
    assert second.get_or_create_cluster_id("another-proposal") == "Xd7ZqVBhSJ-7-tXwGkC7bA"
    assert second.get_cluster_id() == "Xd7ZqVBhSJ-7-tXwGkC7bA"


def test_requests_on_a_closed_client_raise_connection_loss(zk_client: KafkaZkClient) -> None:
    zk_client.close()
    with pytest.raises(ZkConnectionLossError):
        zk_client.get_live_broker_ids()
