"""PartitionReassignment with log dirs (KIP-113) on real brokers with two log dirs each:
a replica moved to another broker into a named dir, and an intra-broker move, throttled by
``logDirMoveRate``."""

from __future__ import annotations

import pytest

from kpo_kafka.admin import KafkaPythonAdmin
from tests.integration.broker.server.helpers import create_topic, wait_metadata_replicas
from tests.integration.operator.conftest import StackFactory, produce, reassignment

pytestmark = pytest.mark.integration


def test_replicas_land_in_the_requested_log_dirs(stack_factory: StackFactory) -> None:
    stack = stack_factory(log_dir_count=2)
    cluster = stack.cluster
    create_topic(cluster, "orders", assignment={0: [0, 1]})
    produce(cluster, "orders", 1, 3 * 1024 * 1024)
    b1_second = str(cluster.brokers[1].log_dirs[1])
    b2_second = str(cluster.brokers[2].log_dirs[1])
    stack.apply(
        reassignment(
            "to-second-dirs",
            [
                {
                    "topic": "orders",
                    "partition": 0,
                    "replicas": [2, 1],
                    "logDirs": [b2_second, b1_second],
                }
            ],
            throttle={"replicationRate": 8 * 1024 * 1024, "logDirMoveRate": 8 * 1024 * 1024},
        )
    )
    status = stack.wait_phase("to-second-dirs", "Completed", 120)
    assert status["partitions"][0]["targetLogDirs"] == [b2_second, b1_second]
    wait_metadata_replicas(cluster, "orders", {0: [2, 1]})
    admin = KafkaPythonAdmin(cluster.bootstrap_servers, "kpo-test", request_timeout_ms=10000)
    try:
        replicas = admin.describe_log_dirs([1, 2], ["orders"])
        configs = admin.describe_configs(brokers=[0, 1, 2])
    finally:
        admin.close()
    assert replicas[(2, "orders", 0)].log_dir == b2_second
    assert replicas[(1, "orders", 0)].log_dir == b1_second
    assert replicas[(1, "orders", 0)].future is None
    assert replicas[(2, "orders", 0)].size_bytes >= 3 * 1024 * 1024
    # The log-dir move throttle was removed with the others.
    assert all(
        "replica.alter.log.dirs.io.max.bytes.per.second" not in values
        for values in configs.values()
    )
