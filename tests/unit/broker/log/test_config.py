from __future__ import annotations

import pytest

from kpo_broker.log.config import LogConfig
from kpo_broker.log.errors import InvalidLogConfigError


def test_defaults_are_kafkas() -> None:
    config = LogConfig()
    assert config.segment_bytes == 1073741824
    assert config.segment_ms == 604800000
    assert config.retention_ms == 604800000
    assert config.retention_bytes == -1
    assert config.index_interval_bytes == 4096
    assert config.segment_index_bytes == 10485760
    assert config.max_message_bytes == 1048588
    assert config.file_delete_delay_ms == 60000


def test_from_topic_config_maps_kafka_names_and_ignores_others() -> None:
    defaults = LogConfig(retention_ms=1000)
    config = LogConfig.from_topic_config(
        {"segment.bytes": "2048", "retention.bytes": "-1", "cleanup.policy": "delete"}, defaults
    )
    assert config.segment_bytes == 2048
    assert config.retention_ms == 1000
    assert LogConfig.from_topic_config(config.to_topic_config(), LogConfig()) == config


def test_from_broker_config_prefers_the_finer_unit() -> None:
    config = LogConfig.from_broker_config(
        {"log.retention.hours": "1", "log.retention.minutes": "2", "log.roll.hours": "3"}
    )
    assert config.retention_ms == 120_000
    assert config.segment_ms == 3 * 3_600_000
    assert LogConfig.from_broker_config({"log.retention.hours": "-1"}).retention_ms == -1
    assert LogConfig.from_broker_config({"message.max.bytes": "100"}).max_message_bytes == 100


@pytest.mark.parametrize(
    "overrides",
    [{"segment.bytes": "10"}, {"retention.ms": "-2"}, {"segment.ms": "abc"}, {"segment.ms": "0"}],
)
def test_invalid_values_raise(overrides: dict[str, str]) -> None:
    with pytest.raises(InvalidLogConfigError):
        LogConfig.from_topic_config(overrides)
