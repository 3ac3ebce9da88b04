"""Replication throttling (KIP-73, Kafka's ReplicationQuotaManager) on real brokers.

A lagging follower catches up at about the throttle rate, in-sync replicas of other topics
are not slowed down, and removing the throttle lets the follower finish at full speed."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from kafka import KafkaProducer
from kafka.admin import ConfigResource, ConfigResourceType

from kpo_devenv.kafka_cluster import KafkaCluster
from tests.integration.broker.conftest import ClusterFactory, admin_client, wait_for
from tests.integration.broker.server.helpers import create_topic, describe, zk_client

pytestmark = pytest.mark.integration

RATE = 256 * 1024  # bytes/s
BACKLOG = 4 * 1024 * 1024  # bytes
RATES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
LISTS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")


def log_bytes(cluster: KafkaCluster, broker_id: int, topic: str) -> int:
    folder = Path(cluster.brokers[broker_id].log_dir) / f"{topic}-0"
    return sum(f.stat().st_size for f in folder.glob("*.log")) if folder.exists() else 0


def alter(cluster: KafkaCluster, resources: list[ConfigResource]) -> None:
    admin = admin_client(cluster)
    try:
        result = admin.alter_configs(resources, raise_on_unknown=False, incremental=True)
    finally:
        admin.close()
    assert "Error" not in repr(result) or "NoError" in repr(result), result


def wait_applied(cluster: KafkaCluster, broker: int, expected: list[ConfigResource]) -> None:
    """Wait until ``broker`` runs with the ``expected`` broker and topic config values.

    A config change is written to ZooKeeper, and each broker applies it when it reads the
    change notification; a broker answers DescribeConfigs (sent to it) with the values it
    runs with.
    """
    admin = admin_client(cluster)
    try:
        request = admin._describe_configs_request(
            [ConfigResource(r.resource_type, r.name, list(r.configs)) for r in expected], False
        )

        def applied() -> bool:
            response = admin._manager.run(admin._manager.send, request, broker)
            found = admin._describe_configs_process_responses([response], "all")
            return all(
                found.get(r.resource_type.name.lower(), {}).get(r.name, {}).get(k, {}).get("value")
                == v
                for r in expected
                for k, v in r.configs.items()
            )

        wait_for(applied, 30, f"broker {broker} running with {expected}")
    finally:
        admin.close()


def set_default_rates(cluster: KafkaCluster, rates: dict[str, str]) -> None:
    """Write ``/config/brokers/<default>`` and a ``/config/changes`` notification.

    Broker 1 is down, and kafka-python sends a broker resource to that broker, so its
    rate comes from the cluster-wide default.
    """
    zk = zk_client(cluster)
    try:
        zk.set_entity_config("brokers", "<default>", rates)
    finally:
        zk.close()


def produce(cluster: KafkaCluster, topic: str, total: int, acks: int | str) -> None:
    producer = KafkaProducer(
        bootstrap_servers=cluster.bootstrap_servers,
        acks=acks,
        linger_ms=5,
        request_timeout_ms=15000,
    )
    try:
        value = b"x" * 8192
        futures = [producer.send(topic, value, partition=0) for _ in range(total // len(value))]
        producer.flush(60)
        for future in futures:
            future.get(30)
    finally:
        producer.close()


def test_follower_catch_up_is_throttled_to_the_rate_then_finishes_when_unthrottled(
    kafka_cluster_factory: ClusterFactory,
) -> None:
    cluster = kafka_cluster_factory(
        # Two 1 s samples: the rate window rolls every 2 s, so any 10 s span sees the
        # steady rate (with the default 11 samples, catch-up comes in 11 s cycles).
        2,
        {"replica.fetch.max.bytes": "65536", "replication.quota.window.num": "2"},
    )
    create_topic(cluster, "bulk", assignment={0: [0, 1]}, configs={"min.insync.replicas": "1"})
    create_topic(cluster, "live", assignment={0: [0, 1]}, configs={"min.insync.replicas": "2"})
    cluster.brokers[1].stop()
    wait_for(lambda: describe(cluster, "bulk")[0]["isr_nodes"] == [0], 30, "ISR of bulk to shrink")
    produce(cluster, "bulk", BACKLOG, acks=1)
    leader_bytes = log_bytes(cluster, 0, "bulk")
    assert leader_bytes >= BACKLOG
    # Broker 0 through its own dynamic config, broker 1 through the cluster default.
    set_default_rates(cluster, {name: str(RATE) for name in RATES})
    throttles = [
        ConfigResource(ConfigResourceType.BROKER, "0", {name: str(RATE) for name in RATES}),
        ConfigResource(ConfigResourceType.TOPIC, "bulk", {name: "*" for name in LISTS}),
    ]
    alter(cluster, throttles)
    wait_applied(cluster, 0, throttles)  # the leader; broker 1 reads them when it starts
    cluster.brokers[1].start()

    # Past the initial burst (about one window's worth of quota), measure >= 10 s.
    wait_for(lambda: log_bytes(cluster, 1, "bulk") >= 2 * RATE, 60, "the initial burst")
    start, start_bytes = time.monotonic(), log_bytes(cluster, 1, "bulk")

    # Meanwhile the unthrottled topic's follower rejoins its ISR and acks=all succeeds.
    wait_for(lambda: sorted(describe(cluster, "live")[0]["isr_nodes"]) == [0, 1], 30, "ISR of live")
    produce(cluster, "live", 64 * 1024, acks="all")

    time.sleep(max(0.0, 10 - (time.monotonic() - start)))
    elapsed, copied = time.monotonic() - start, log_bytes(cluster, 1, "bulk") - start_bytes
    rate = copied / elapsed
    assert 0.5 * RATE <= rate <= 1.2 * RATE, f"catch-up rate {rate:.0f} B/s vs quota {RATE}"
    assert log_bytes(cluster, 1, "bulk") < leader_bytes

    set_default_rates(cluster, {})
    alter(
        cluster,
        [
            ConfigResource(
                ConfigResourceType.BROKER, "0", {name: ("DELETE", None) for name in RATES}
            ),
        ],
    )
    wait_for(lambda: log_bytes(cluster, 1, "bulk") == leader_bytes, 15, "the unthrottled catch-up")
    wait_for(lambda: sorted(describe(cluster, "bulk")[0]["isr_nodes"]) == [0, 1], 30, "ISR of bulk")


def test_one_follower_fetching_from_two_leaders_shares_one_follower_quota(
    kafka_cluster_factory: ClusterFactory,
) -> None:
    """Two fetchers (leaders 0 and 1) on broker 2 together stay within its follower rate.

    Kafka's ReplicationQuotaManager is one sensor per broker, checked before each fetch
    and recorded after it by every fetcher. With Kafka's default window (11 x 1 s) and
    fetches of a quarter of the rate, the two fetchers together copy at the rate.
    """
    cluster = kafka_cluster_factory(3, {"replica.fetch.max.bytes": str(RATE // 4)})
    topics = {"from0": [0, 2], "from1": [1, 2]}
    for topic, replicas in topics.items():
        create_topic(cluster, topic, assignment={0: replicas}, configs={"min.insync.replicas": "1"})
    cluster.brokers[2].stop()
    for topic, replicas in topics.items():
        wait_for(
            lambda t=topic, r=replicas: describe(cluster, t)[0]["isr_nodes"] == r[:1],
            30,
            f"ISR of {topic} to shrink",
        )
        produce(cluster, topic, BACKLOG, acks=1)
    leader_bytes = sum(log_bytes(cluster, r[0], t) for t, r in topics.items())
    # Only broker 2's follower side is throttled; the leaders send as fast as asked.
    set_default_rates(cluster, {"follower.replication.throttled.rate": str(RATE)})
    alter(
        cluster,
        [
            ConfigResource(
                ConfigResourceType.TOPIC, t, {"follower.replication.throttled.replicas": "0:2"}
            )
            for t in topics
        ],
    )
    # Broker 2, the only one throttled, reads the configs from ZooKeeper when it starts.
    cluster.brokers[2].start()

    def copied() -> int:
        return sum(log_bytes(cluster, 2, t) for t in topics)

    # Past the first window's burst (SimpleRate: one window's worth), measure 16 s.
    wait_for(lambda: copied() >= 2 * RATE, 60, "the initial burst")
    start, start_bytes = time.monotonic(), copied()
    time.sleep(16)
    elapsed, moved = time.monotonic() - start, copied() - start_bytes
    rate = moved / elapsed
    assert copied() < leader_bytes
    # Slack: about one fetch per fetcher (1/4 s of quota each) over the 16 s span.
    assert 0.7 * RATE <= rate <= 1.15 * RATE, f"shared follower rate {rate:.0f} B/s vs {RATE}"
    set_default_rates(cluster, {})
    wait_for(lambda: copied() == leader_bytes, 30, "the unthrottled catch-up")
