"""The real ZooKeeper server fixture, used through kazoo as the brokers will use it."""

from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError

from kpo_devenv import ProcessStartError, ZooKeeperServer
from kpo_devenv.zookeeper import four_letter_word

pytestmark = pytest.mark.integration


def test_kazoo_reads_and_writes_znodes(zookeeper: ZooKeeperServer) -> None:
    zk = KazooClient(hosts=zookeeper.connect_string)
    zk.start(timeout=15)
    try:
        zk.ensure_path("/brokers/topics")
        zk.create("/brokers/topics/test", b'{"version":2,"partitions":{"0":[1,2]}}')
        data, stat = zk.get("/brokers/topics/test")
        assert data.startswith(b'{"version":2')
        zk.set("/brokers/topics/test", b"{}", version=stat.version)
        with pytest.raises(NodeExistsError):
            zk.create("/brokers/topics/test", b"")
        assert zk.get_children("/brokers/topics") == ["test"]
    finally:
        zk.stop()
        zk.close()


def test_ephemeral_znode_vanishes_with_its_session(zookeeper: ZooKeeperServer) -> None:
    owner = KazooClient(hosts=zookeeper.connect_string)
    watcher = KazooClient(hosts=zookeeper.connect_string)
    owner.start(timeout=15)
    watcher.start(timeout=15)
    try:
        owner.ensure_path("/brokers/ids")
        owner.create("/brokers/ids/7", b"{}", ephemeral=True)
        assert watcher.exists("/brokers/ids/7") is not None
        owner.stop()
        assert watcher.exists("/brokers/ids/7") is None
    finally:
        owner.close()
        watcher.stop()
        watcher.close()


def test_server_is_zookeeper_3_8_on_loopback(zookeeper: ZooKeeperServer) -> None:
    assert zookeeper.connect_string.startswith("127.0.0.1:")
    assert "Zookeeper version: 3.8." in four_letter_word(zookeeper.port, "srvr")


def test_second_server_on_a_taken_port_is_refused(
    zookeeper: ZooKeeperServer, tmp_path: Path
) -> None:
    clash = ZooKeeperServer(tmp_path, port=zookeeper.port)
    with pytest.raises(ProcessStartError, match="already in use"):
        clash.start()
    assert not clash.process.is_running()


def test_invalid_config_fails_with_the_server_log_tail(tmp_path: Path) -> None:
    broken = ZooKeeperServer(tmp_path, extra_config={"tickTime": "abc"})
    with pytest.raises(ProcessStartError) as info:
        broken.start(timeout_s=60)
    message = str(info.value)
    assert "zookeeper exited with code 2" in message
    assert "Invalid config, exiting abnormally" in message
    assert not broken.process.is_running()
