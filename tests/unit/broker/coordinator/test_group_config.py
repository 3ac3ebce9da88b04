"""The group coordinator's broker properties: Kafka's names and defaults."""

from __future__ import annotations

import pytest

from kpo_broker.config import BrokerConfig, ConfigError
from kpo_broker.coordinator.group.coordinator import GroupConfig
from kpo_broker.coordinator.group.metadata_manager import OffsetConfig

ZK = {"zookeeper.connect": "127.0.0.1:2181/kafka"}


def test_kafka_defaults() -> None:
    config = BrokerConfig.from_properties(ZK)
    assert OffsetConfig.from_broker_config(config) == OffsetConfig(
        num_partitions=50,
        replication_factor=3,
        segment_bytes=104857600,
        compression_codec=0,
        commit_timeout_ms=5000,
        commit_required_acks=-1,
        retention_ms=7 * 24 * 3600 * 1000,
        retention_check_interval_ms=600000,
        load_buffer_size=5242880,
        max_metadata_size=4096,
    )
    assert GroupConfig.from_broker_config(config) == GroupConfig(
        min_session_timeout_ms=6000,
        max_session_timeout_ms=1800000,
        max_size=2**31 - 1,
        initial_rebalance_delay_ms=3000,
    )


def test_properties_are_read_by_kafka_names() -> None:
    config = BrokerConfig.from_properties(
        {
            **ZK,
            "offsets.topic.num.partitions": "5",
            "offsets.topic.replication.factor": "1",
            "offsets.retention.minutes": "2",
            "offsets.commit.required.acks": "1",
            "group.min.session.timeout.ms": "1000",
            "group.max.size": "10",
            "group.initial.rebalance.delay.ms": "0",
        }
    )
    offsets = OffsetConfig.from_broker_config(config)
    assert (offsets.num_partitions, offsets.replication_factor, offsets.retention_ms) == (
        5,
        1,
        120000,
    )
    assert offsets.commit_required_acks == 1
    group = GroupConfig.from_broker_config(config)
    assert (group.min_session_timeout_ms, group.max_size, group.initial_rebalance_delay_ms) == (
        1000,
        10,
        0,
    )


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("offsets.topic.num.partitions", "0"),
        ("offsets.topic.replication.factor", "0"),
        ("offsets.commit.required.acks", "-2"),
        ("group.max.size", "0"),
        ("offsets.topic.compression.codec", "5"),
    ],
)
def test_invalid_values_are_refused(name: str, value: str) -> None:
    with pytest.raises(ConfigError, match=name):
        BrokerConfig.from_properties({**ZK, name: value})
