"""The two systems under benchmark behind one interface, configured alike.

:class:`Cluster` and :class:`Broker` are what both
:class:`kpo_devenv.kafka_cluster.KafkaCluster` (kpo's Python brokers) and
:class:`kpo_devenv.apache_kafka.ApacheKafkaCluster` (Apache Kafka from Maven Central)
provide. :data:`COMMON_BROKER_PROPERTIES` is given to both so they replicate, detect
failures and rebalance leaders with the same settings.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

#: Broker settings shared by both systems (Kafka property names). The session timeout
#: bounds how fast the controller sees a killed broker (both run in ZooKeeper mode);
#: the replica fetch settings are Kafka's defaults written out, except the shorter
#: ``replica.fetch.wait.max.ms``/``replica.lag.time.max.ms`` the project's test
#: clusters use. ``group.initial.rebalance.delay.ms`` is 0 on both, as in the
#: ``config/server.properties`` Kafka ships (and as :mod:`kpo_devenv.apache_kafka` gives its
#: brokers): a new group's join time then measures the protocol and the client, not a
#: configured wait (Kafka's broker default, 3000, would add 3 s to both).
COMMON_BROKER_PROPERTIES: Mapping[str, str] = {
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "10000",
    "replica.fetch.wait.max.ms": "100",
    "replica.fetch.backoff.ms": "200",
    "replica.fetch.max.bytes": "1048576",
    "replica.fetch.response.max.bytes": "10485760",
    "num.replica.fetchers": "1",
    "controlled.shutdown.retry.backoff.ms": "200",
    "leader.imbalance.check.interval.seconds": "5",
    "auto.create.topics.enable": "false",
    "num.partitions": "1",
    "default.replication.factor": "1",
    "group.initial.rebalance.delay.ms": "0",
}


class Broker(Protocol):
    """One broker process of either system."""

    @property
    def port(self) -> int:
        """The listener's port on 127.0.0.1."""
        ...

    @property
    def log_dir(self) -> Path:
        """The broker's single log dir (``log.dirs``)."""
        ...

    def start(self, timeout_s: float = ...) -> object:
        """Start the process and wait until its port accepts connections."""
        ...

    def stop(self, timeout_s: float = ...) -> None:
        """Stop with SIGTERM (controlled shutdown)."""
        ...

    def kill(self) -> None:
        """Kill with SIGKILL."""
        ...

    def is_running(self) -> bool:
        """Whether the process is alive."""
        ...


class Cluster(Protocol):
    """Brokers ``0..N-1`` of either system on one ZooKeeper chroot."""

    @property
    def brokers(self) -> Mapping[int, Broker]:
        """Broker id -> broker."""
        ...

    @property
    def bootstrap_servers(self) -> str:
        """Comma-separated ``host:port`` of the running brokers."""
        ...

    def bootstrap_servers_for(self, listener: str) -> str:
        """Comma-separated ``host:port`` of the running brokers' listener ``listener``."""
        ...

    def start(self) -> object:
        """Start every broker (each start waits until its port accepts)."""
        ...

    def stop(self) -> None:
        """Stop every broker."""
        ...
