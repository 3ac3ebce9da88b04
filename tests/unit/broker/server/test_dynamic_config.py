"""Topic config overrides: checked when written, applied to the partitions' log config."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kpo_broker.log.config import CREATE_TIME, LOG_APPEND_TIME
from kpo_broker.server.dynamic_config import (
    InvalidTopicConfigError,
    TopicConfigs,
    validate_topic_config,
)

BROKER = SimpleNamespace(
    min_insync_replicas=1,
    unclean_leader_election_enable=False,
    log_retention_time_ms=604_800_000,
    log_retention_bytes=-1,
    log_segment_bytes=1 << 30,
    log_roll_time_ms=604_800_000,
    log_index_interval_bytes=4096,
    message_max_bytes=1_048_588,
)


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
