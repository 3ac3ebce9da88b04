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
    log_cleanup_policy=("delete",),
    log_cleaner_delete_retention_ms=86_400_000,
    log_cleaner_min_cleanable_ratio=0.5,
    log_cleaner_min_compaction_lag_ms=0,
    log_cleaner_max_compaction_lag_ms=2**63 - 1,
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
        ({"min.cleanable.dirty.ratio": "half"}, "must be a number"),
        ({"delete.retention.ms": "-1"}, "below the minimum"),
        ({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}, "conflict"),
    ],
)
def test_bad_compaction_configs_are_refused(config: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidTopicConfigError, match=message):
        validate_topic_config(config)
