"""Topic config overrides: checked when written, applied to the partitions' log config."""

from __future__ import annotations

import pytest

from kpo_broker.config import BrokerConfig
from kpo_broker.log.config import CREATE_TIME, LOG_APPEND_TIME
from kpo_broker.server.dynamic_config import (
    TOPIC_CONFIGS,
    InvalidTopicConfigError,
    TopicConfigs,
    validate_topic_config,
)

BROKER = BrokerConfig.from_properties({"zookeeper.connect": "localhost:2181"})

# Every topic config of Kafka 3.9's LogConfig (TopicConfig names plus the KIP-73 lists).
KAFKA_39_TOPIC_CONFIGS = {
    "cleanup.policy",
    "compression.type",
    "compression.gzip.level",
    "compression.lz4.level",
    "compression.zstd.level",
    "delete.retention.ms",
    "file.delete.delay.ms",
    "flush.messages",
    "flush.ms",
    "follower.replication.throttled.replicas",
    "index.interval.bytes",
    "leader.replication.throttled.replicas",
    "local.retention.bytes",
    "local.retention.ms",
    "max.compaction.lag.ms",
    "max.message.bytes",
    "message.downconversion.enable",
    "message.format.version",
    "message.timestamp.after.max.ms",
    "message.timestamp.before.max.ms",
    "message.timestamp.difference.max.ms",
    "message.timestamp.type",
    "min.cleanable.dirty.ratio",
    "min.compaction.lag.ms",
    "min.insync.replicas",
    "preallocate",
    "remote.log.copy.disable",
    "remote.log.delete.on.disable",
    "remote.storage.enable",
    "retention.bytes",
    "retention.ms",
    "segment.bytes",
    "segment.index.bytes",
    "segment.jitter.ms",
    "segment.ms",
    "unclean.leader.election.enable",
}


def test_every_kafka_topic_config_is_known() -> None:
    assert set(TOPIC_CONFIGS) == KAFKA_39_TOPIC_CONFIGS


def test_message_timestamp_type_accepts_only_kafkas_two_types() -> None:
    validate_topic_config({"message.timestamp.type": "CreateTime"})
    validate_topic_config({"message.timestamp.type": "LogAppendTime"})
    with pytest.raises(InvalidTopicConfigError, match="CreateTime, LogAppendTime"):
        validate_topic_config({"message.timestamp.type": "logappendtime"})


def test_message_timestamp_type_reaches_the_log_config() -> None:
    configs = TopicConfigs(BROKER)
    assert configs.log_config("plain").message_timestamp_type == CREATE_TIME
    configs.set_overrides("stamped", {"message.timestamp.type": "LogAppendTime"})
    assert configs.log_config("stamped").message_timestamp_type == LOG_APPEND_TIME
    assert configs.log_config("stamped").max_message_bytes == 1_048_588


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"flush.messages": "0"}, "Invalid value 0 for configuration flush.messages: "),
        ({"flush.ms": "soon"}, "Not a number of type LONG"),
        ({"segment.bytes": "13"}, "Value must be at least 14"),
        ({"segment.bytes": str(2**31)}, "Not a number of type INT"),
        ({"segment.jitter.ms": "-1"}, "at least 0"),
        ({"retention.ms": "-2"}, "at least -1"),
        ({"compression.type": "brotli"}, "String must be one of"),
        ({"compression.type": "GZIP"}, "String must be one of"),
        ({"compression.gzip.level": "0"}, "between 1 and 9, or -1"),
        ({"compression.lz4.level": "18"}, "no more than 17"),
        ({"compression.zstd.level": "23"}, "no more than 22"),
        ({"preallocate": "yes"}, "either true or false"),
        ({"min.insync.replicas": "0"}, "at least 1"),
        ({"message.timestamp.before.max.ms": "-1"}, "at least 0"),
        ({"remote.storage.enable": "true"}, "Tiered Storage functionality is disabled"),
        ({"remote.log.copy.disable": "true"}, "under Zookeeper's mode"),
        ({"message.format.version": "9.9"}, "not a known Kafka version"),
        ({"flush.message": "1"}, "Unknown topic config name: flush.message"),
    ],
)
def test_values_are_refused_as_kafka_refuses_them(config: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidTopicConfigError, match=message.replace(".", r"\.")):
        validate_topic_config(config)


def test_valid_values_pass_in_kafkas_forms() -> None:
    validate_topic_config(
        {
            "flush.messages": " 1 ",
            "preallocate": "TRUE",
            "compression.type": "zstd",
            "compression.gzip.level": "-1",
            "compression.zstd.level": "-5",
            "message.format.version": "2.8-IV1",
            "local.retention.ms": "-2",
            "remote.storage.enable": "false",
        }
    )


def test_every_setting_reaches_the_log_config() -> None:
    configs = TopicConfigs(BROKER)
    configs.set_overrides(
        "t",
        {
            "flush.messages": "1",
            "flush.ms": "10",
            "segment.jitter.ms": "500",
            "segment.index.bytes": "4096",
            "file.delete.delay.ms": "0",
            "compression.type": "gzip",
            "compression.gzip.level": "9",
            "message.timestamp.after.max.ms": "1000",
        },
    )
    log_config = configs.log_config("t")
    assert log_config.flush_messages == 1
    assert log_config.flush_ms == 10
    assert log_config.segment_jitter_ms == 500
    assert log_config.segment_index_bytes == 4096
    assert log_config.file_delete_delay_ms == 0
    assert log_config.compression_type == "gzip"
    assert log_config.compression_gzip_level == 9
    assert log_config.message_timestamp_after_max_ms == 1000
    assert log_config.message_timestamp_before_max_ms == 2**63 - 1


def test_timestamp_difference_is_the_default_of_before_and_after() -> None:
    configs = TopicConfigs(BROKER)
    configs.set_overrides("t", {"message.timestamp.difference.max.ms": "60000"})
    assert configs.log_config("t").message_timestamp_before_max_ms == 60000
    assert configs.log_config("t").message_timestamp_after_max_ms == 60000
    configs.set_overrides(
        "t",
        {"message.timestamp.difference.max.ms": "60000", "message.timestamp.after.max.ms": "5"},
    )
    assert configs.log_config("t").message_timestamp_after_max_ms == 5
    assert configs.log_config("t").message_timestamp_before_max_ms == 60000


def test_broker_defaults_follow_a_new_broker_config() -> None:
    configs = TopicConfigs(BROKER)
    seen: list[str] = []
    configs.set_overrides("t", {})
    configs.add_listener(lambda topic, _overrides: seen.append(topic))
    configs.set_broker_config(
        BrokerConfig.from_properties(
            {"zookeeper.connect": "localhost:2181", "log.retention.ms": "1234"}
        )
    )
    assert configs.log_config("t").retention_ms == 1234
    assert seen == ["t"]


def test_an_invalid_stored_override_falls_back_to_the_default() -> None:
    configs = TopicConfigs(BROKER)
    configs.set_overrides("t", {"segment.bytes": "tiny"})
    assert configs.log_config("t").segment_bytes == 1 << 30


def test_compaction_configs_reach_the_log_config() -> None:
    configs = TopicConfigs(BROKER)
    plain = configs.log_config("plain")
    assert plain.delete and not plain.compact
    configs.set_overrides(
        "keyed",
        {
            "cleanup.policy": "compact,delete",
            "delete.retention.ms": "100",
            "min.cleanable.dirty.ratio": "0.01",
            "min.compaction.lag.ms": "5",
            "max.compaction.lag.ms": "60000",
        },
    )
    keyed = configs.log_config("keyed")
    assert keyed.compact and keyed.delete
    assert (keyed.delete_retention_ms, keyed.min_cleanable_dirty_ratio) == (100, 0.01)
    assert (keyed.min_compaction_lag_ms, keyed.max_compaction_lag_ms) == (5, 60000)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"cleanup.policy": "compact,shred"}, "compact, delete"),
        ({"cleanup.policy": ""}, "compact, delete"),
        ({"min.cleanable.dirty.ratio": "1.5"}, r"not in \[0, 1\]"),
        ({"min.cleanable.dirty.ratio": "half"}, "Not a number of type DOUBLE"),
        ({"delete.retention.ms": "-1"}, "Value must be at least 0"),
        ({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}, "conflict"),
    ],
)
def test_bad_compaction_configs_are_refused(config: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidTopicConfigError, match=message):
        validate_topic_config(config)
