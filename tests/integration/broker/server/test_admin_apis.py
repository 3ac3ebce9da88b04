"""Admin APIs through kafka-python's KafkaAdminClient against real brokers."""

from __future__ import annotations

import pytest
from kafka import KafkaProducer
from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions
from kafka.errors import NotEnoughReplicasError, TopicAlreadyExistsError

from tests.integration.broker.conftest import ClusterFactory, admin_client, wait_for
from tests.integration.broker.server.helpers import create_topic, describe, leaders, zk_client

pytestmark = pytest.mark.integration


def _config(admin, resource: ConfigResource) -> dict[str, str]:  # type: ignore[no-untyped-def]
    result = admin.describe_configs([resource], config_filter="all")
    [by_name] = result.values()
    configs = by_name[resource.name]
    return {name: data["value"] for name, data in configs.items()}


def _alter(admin, resource: ConfigResource) -> object:  # type: ignore[no-untyped-def]
    """Return the per-resource outcome of an IncrementalAlterConfigs call ("OK" or the error)."""
    result = admin.alter_configs([resource], incremental=True, raise_on_unknown=False)
    [by_name] = result.values()
    return by_name[resource.name]


def test_topic_lifecycle_and_configs(kafka_cluster_factory: ClusterFactory) -> None:
    cluster = kafka_cluster_factory(3)
    create_topic(cluster, "clicks", partitions=2, rf=2, configs={"retention.ms": "3600000"})
    admin = admin_client(cluster)
    try:
        with pytest.raises(TopicAlreadyExistsError):
            create_topic(cluster, "clicks", partitions=2, rf=2)

        topic = ConfigResource(ConfigResourceType.TOPIC, "clicks")
        assert _config(admin, topic)["retention.ms"] == "3600000"
        assert _config(admin, topic)["min.insync.replicas"] == "1"  # inherited default
        outcome = _alter(
            admin,
            ConfigResource(
                ConfigResourceType.TOPIC,
                "clicks",
                {
                    "min.insync.replicas": "2",
                    "leader.replication.throttled.replicas": "0:1,1:2",
                },
            ),
        )
        assert outcome == "OK"
        assert _config(admin, topic)["min.insync.replicas"] == "2"
        assert _config(admin, topic)["leader.replication.throttled.replicas"] == "0:1,1:2"
        zk = zk_client(cluster)
        try:
            stored = zk.get_entity_config("topics", "clicks").config
        finally:
            zk.close()
        assert stored["min.insync.replicas"] == "2"

        broker = ConfigResource(
            ConfigResourceType.BROKER,
            "0",
            {
                "leader.replication.throttled.rate": "1048576",
            },
        )
        outcome = _alter(admin, broker)
        assert outcome == "OK"
        described = _config(admin, ConfigResource(ConfigResourceType.BROKER, "0"))
        assert described["leader.replication.throttled.rate"] == "1048576"

        admin.create_partitions({"clicks": NewPartitions(total_count=4)}, timeout_ms=30000)
        wait_for(lambda: len(leaders(cluster, "clicks")) == 4, 30, "4 partitions with leaders")
        assert all(len(p["replica_nodes"]) == 2 for p in describe(cluster, "clicks"))

        admin.delete_topics(["clicks"], timeout_ms=30000)
        wait_for(lambda: "clicks" not in admin.list_topics(), 30, "the topic gone")
        # Metadata drops the topic before the brokers get StopReplica(delete), as in Kafka.
        wait_for(
            lambda: (
                not any(list(b.log_dir.glob("clicks-*[0-9]")) for b in cluster.brokers.values())
            ),
            30,
            "the logs of clicks deleted on every broker",
        )
    finally:
        admin.close()


def test_bad_config_values_are_rejected_and_change_nothing(
    kafka_cluster_factory: ClusterFactory,
) -> None:
    cluster = kafka_cluster_factory(1)
    create_topic(cluster, "t", partitions=1, rf=1)
    admin = admin_client(cluster)
    try:
        for bad in (
            {"min.insync.replicas": "two"},
            {"follower.replication.throttled.replicas": "x"},
        ):
            outcome = _alter(admin, ConfigResource(ConfigResourceType.TOPIC, "t", bad))
            assert "[Error 40] InvalidConfigurationError" in str(outcome)
        assert (
            _config(admin, ConfigResource(ConfigResourceType.TOPIC, "t"))["min.insync.replicas"]
            == "1"
        )
    finally:
        admin.close()


def test_preferred_leader_election_restores_the_preferred_leader(
    kafka_cluster_factory: ClusterFactory,
) -> None:
    cluster = kafka_cluster_factory(3, properties={"auto.leader.rebalance.enable": "false"})
    create_topic(cluster, "prefs", partitions=3, rf=3)
    preferred = {p["partition_index"]: p["replica_nodes"][0] for p in describe(cluster, "prefs")}
    victim = preferred[0]
    cluster.brokers[victim].stop()
    wait_for(lambda: leaders(cluster, "prefs").get(0) not in (None, victim), 60, "leader moved")
    cluster.brokers[victim].start()
    wait_for(lambda: victim in describe(cluster, "prefs")[0]["isr_nodes"], 60, "victim in ISR")
    assert leaders(cluster, "prefs")[0] != victim
    admin = admin_client(cluster)
    try:
        admin.elect_leaders(0, {"prefs": [0, 1, 2]}, timeout_ms=30000, raise_errors=False)
    finally:
        admin.close()
    wait_for(lambda: leaders(cluster, "prefs") == preferred, 30, "preferred leaders back")


def test_configs_given_at_creation_apply_on_every_broker(
    kafka_cluster_factory: ClusterFactory,
) -> None:
    cluster = kafka_cluster_factory(2)
    create_topic(cluster, "strict", partitions=1, rf=2, configs={"min.insync.replicas": "2"})
    leader = leaders(cluster, "strict")[0]
    follower = next(b for b in cluster.brokers if b != leader)
    cluster.brokers[follower].kill()
    wait_for(lambda: describe(cluster, "strict")[0]["isr_nodes"] == [leader], 60, "ISR shrink")
    producer = KafkaProducer(
        bootstrap_servers=cluster.bootstrap_servers,
        acks="all",
        retries=0,
        enable_idempotence=False,
        request_timeout_ms=5000,
    )
    try:
        with pytest.raises(NotEnoughReplicasError):
            producer.send("strict", value=b"x", partition=0).get(30)
    finally:
        producer.close()


def test_delete_topics_by_topic_id(kafka_cluster_factory: ClusterFactory) -> None:
    """DeleteTopics v6 (KIP-516): topics named by id; an unknown id is UNKNOWN_TOPIC_ID."""
    import uuid

    cluster = kafka_cluster_factory(1)
    create_topic(cluster, "by-id", partitions=2, rf=1)
    create_topic(cluster, "by-name", partitions=1, rf=1)
    admin = admin_client(cluster)
    try:
        topic_id = uuid.UUID(admin.describe_topics(["by-id"])[0]["topic_id"])
        assert topic_id != uuid.UUID(int=0)
        unknown = uuid.UUID(int=12345)
        answer = admin.delete_topics([topic_id, unknown], timeout_ms=30000, raise_errors=False)
        by_id = {uuid.UUID(str(r["topic_id"])): r for r in answer["topics"]}
        assert set(by_id) == {topic_id, unknown}, answer
        assert (by_id[topic_id]["name"], by_id[topic_id]["error_code"]) == ("by-id", 0), answer
        assert (by_id[unknown]["name"], by_id[unknown]["error_code"]) == (None, 100), answer
        wait_for(lambda: "by-id" not in admin.list_topics(), 30, "by-id deleted")
        assert "by-name" in admin.list_topics()
    finally:
        admin.close()
