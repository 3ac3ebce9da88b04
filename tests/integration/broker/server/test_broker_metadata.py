"""meta.properties on a real broker: a data directory serves only its own broker and cluster."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from kafka import KafkaAdminClient

from kpo_devenv.kafka_cluster import BrokerProcess
from kpo_devenv.process import ProcessStartError
from kpo_devenv.zookeeper import ZooKeeperServer

pytestmark = pytest.mark.integration


def broker(workdir: Path, zookeeper: ZooKeeperServer, chroot: str, broker_id: int) -> BrokerProcess:
    return BrokerProcess(
        0, workdir, f"{zookeeper.connect_string}/{chroot}", properties={"broker.id": str(broker_id)}
    )


def test_a_data_directory_refuses_another_broker_id_or_cluster(
    zookeeper: ZooKeeperServer, tmp_path: Path
) -> None:
    chroot, other = f"meta-{uuid.uuid4().hex[:8]}", f"meta-{uuid.uuid4().hex[:8]}"
    first = broker(tmp_path, zookeeper, chroot, 0).start()
    try:
        admin = KafkaAdminClient(bootstrap_servers=first.bootstrap, request_timeout_ms=10000)
        cluster_id = admin.describe_cluster()["cluster_id"]
        admin.close()
    finally:
        first.stop()
    meta = (tmp_path / "data" / "meta.properties").read_text()
    assert f"broker.id=0\ncluster.id={cluster_id}\n" in meta

    wrong_id = broker(tmp_path, zookeeper, chroot, 5)
    with pytest.raises(ProcessStartError, match=r"does not match the stored broker.id 0"):
        wrong_id.start(timeout_s=30)
    assert wrong_id.process.returncode == 1

    wrong_cluster = broker(tmp_path, zookeeper, other, 0)
    with pytest.raises(ProcessStartError, match="joining another cluster"):
        wrong_cluster.start(timeout_s=30)
    assert (tmp_path / "data" / "meta.properties").read_text() == meta  # left as it was

    again = broker(tmp_path, zookeeper, chroot, 0).start()
    again.stop()
    assert again.process.returncode == 0
