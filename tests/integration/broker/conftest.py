"""Fixtures for tests on real broker processes sharing the session's real ZooKeeper."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest
from kafka import KafkaAdminClient

from kpo_devenv import ZooKeeperServer
from kpo_devenv.apache_kafka import KafkaNotInstalledError, kafka_classpath
from kpo_devenv.kafka_cluster import KafkaCluster
from kpo_devenv.tools import pinned_version

ClusterFactory = Callable[..., KafkaCluster]


def wait_for(condition: Callable[[], bool], timeout_s: float = 30, what: str = "condition") -> None:
    """Poll ``condition`` until true; fail the test after ``timeout_s`` seconds."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if condition():
                return
        except Exception:  # not ready yet
            pass
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


def admin_client(cluster: KafkaCluster) -> KafkaAdminClient:
    """A kafka-python admin client bootstrapped from the running brokers."""
    return KafkaAdminClient(
        bootstrap_servers=cluster.bootstrap_servers, request_timeout_ms=10000, client_id="tests"
    )


def wait_cluster_ready(cluster: KafkaCluster, timeout_s: float = 60) -> None:
    """Wait until every running broker is in the metadata and a controller is elected."""
    expected = {i for i, b in cluster.brokers.items() if b.is_running()}

    def ready() -> bool:
        admin = admin_client(cluster)
        try:
            info = admin.describe_cluster()
        finally:
            admin.close()
        ids = {b["broker_id"] for b in info["brokers"]}
        return ids == expected and info["controller_id"] in expected

    wait_for(ready, timeout_s, f"brokers {sorted(expected)} and a controller")


@pytest.fixture(scope="session")
def classpath() -> str:
    """The Java classpath of the pinned Apache Kafka (``KAFKA_VERSION``), for its own tools.

    Fails the test (does not skip it) when the jars are missing: ``make tools`` installs them.
    """
    try:
        return kafka_classpath(pinned_version("KAFKA_VERSION"))
    except KafkaNotInstalledError as exc:
        pytest.fail(str(exc))


@pytest.fixture
def kafka_cluster_factory(zookeeper: ZooKeeperServer, tmp_path: Path) -> Iterator[ClusterFactory]:
    """Start clusters of real brokers, each under its own ZooKeeper chroot; stop them after."""
    clusters: list[KafkaCluster] = []

    def make(
        size: int = 3,
        properties: Mapping[str, str] | None = None,
        racks: list[str] | None = None,
        log_dir_count: int = 1,
        metrics: bool = False,
        listeners: Mapping[str, str] | None = None,
        broker_properties: Callable[[int], Mapping[str, str]] | None = None,
        chroot: str | None = None,
    ) -> KafkaCluster:
        chroot = chroot or f"kafka-{uuid.uuid4().hex[:8]}"
        cluster = KafkaCluster(
            tmp_path / chroot,
            f"{zookeeper.connect_string}/{chroot}",
            size,
            properties,
            racks,
            log_dir_count=log_dir_count,
            metrics=metrics,
            listeners=listeners,
            broker_properties=broker_properties,
        )
        clusters.append(cluster)
        cluster.start()
        wait_cluster_ready(cluster)
        return cluster

    try:
        yield make
    finally:
        for cluster in clusters:
            cluster.stop()
