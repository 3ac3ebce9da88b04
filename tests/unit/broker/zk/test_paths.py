"""The Kafka 2.x znode layout."""

import pytest

from kpo_broker.zk import paths
from kpo_broker.zk.errors import InvalidZNodeNameError
from kpo_broker.zk.session import split_connect_string


def test_kafka_znode_paths() -> None:
    assert paths.broker_path(3) == "/brokers/ids/3"
    assert paths.topic_path("orders") == "/brokers/topics/orders"
    assert paths.partition_state_path("orders", 7) == "/brokers/topics/orders/partitions/7/state"
    assert paths.delete_topic_path("orders") == "/admin/delete_topics/orders"
    assert paths.config_entity_path("topics", "orders") == "/config/topics/orders"
    assert paths.config_entity_path("brokers", "<default>") == "/config/brokers/<default>"
    assert paths.config_entity_path("brokers", "2") == "/config/brokers/2"
    assert paths.config_change_path("config_change_0000000001") == (
        "/config/changes/config_change_0000000001"
    )
    assert paths.isr_change_notification_path("isr_change_0000000004") == (
        "/isr_change_notification/isr_change_0000000004"
    )
    assert (paths.CONTROLLER, paths.CONTROLLER_EPOCH) == ("/controller", "/controller_epoch")
    assert paths.ADMIN_REASSIGN_PARTITIONS == "/admin/reassign_partitions"
    assert paths.ADMIN_PREFERRED_REPLICA_ELECTION == "/admin/preferred_replica_election"
    assert (paths.BROKER_SEQUENCE_ID, paths.CLUSTER_ID) == ("/brokers/seqid", "/cluster/id")


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "a\x00"])
def test_names_that_would_escape_their_znode_are_refused(name: str) -> None:
    with pytest.raises(InvalidZNodeNameError):
        paths.topic_path(name)


def test_unknown_config_entity_type_is_refused() -> None:
    with pytest.raises(InvalidZNodeNameError, match="entity type"):
        paths.config_entity_path("groups", "g")


def test_sequence_number_of_sequential_children() -> None:
    assert paths.sequence_number("config_change_0000000042", paths.CONFIG_CHANGE_PREFIX) == 42
    with pytest.raises(InvalidZNodeNameError):
        paths.sequence_number("config_change_x", paths.CONFIG_CHANGE_PREFIX)
    with pytest.raises(InvalidZNodeNameError):
        paths.sequence_number("isr_change_0000000001", paths.CONFIG_CHANGE_PREFIX)


def test_persistent_paths_cover_the_watched_parents() -> None:
    for parent in (
        paths.BROKER_IDS,
        paths.BROKER_TOPICS,
        paths.ADMIN_DELETE_TOPICS,
        paths.ISR_CHANGE_NOTIFICATION,
        paths.CONFIG_CHANGES,
        "/config/topics",
        "/config/brokers",
    ):
        assert parent in paths.PERSISTENT_PATHS


def test_split_connect_string() -> None:
    assert split_connect_string("h1:2181,h2:2181/kafka/prod") == ("h1:2181,h2:2181", "/kafka/prod")
    assert split_connect_string("h1:2181") == ("h1:2181", "")
    assert split_connect_string("h1:2181/") == ("h1:2181", "")
