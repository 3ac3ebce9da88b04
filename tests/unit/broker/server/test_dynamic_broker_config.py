"""Dynamic broker configs (KIP-226): validation, precedence, synonyms and Kafka's value forms."""

from __future__ import annotations

import pytest

from kpo_broker.config import BrokerConfig
from kpo_broker.server import config_admin as ca
from kpo_broker.server.dynamic_broker_config import (
    SOURCE_DEFAULT_CONFIG,
    SOURCE_DYNAMIC_BROKER_CONFIG,
    SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG,
    SOURCE_STATIC_BROKER_CONFIG,
    DynamicBrokerConfig,
    InvalidBrokerConfigError,
    broker_synonyms,
)
from kpo_broker.server.dynamic_config import TopicConfigs

STATIC = BrokerConfig.from_properties(
    {
        "zookeeper.connect": "localhost:2181",
        "broker.id": "0",
        "listeners": "PLAINTEXT://127.0.0.1:9092,INTERNAL://127.0.0.1:9093",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL",
        "log.retention.hours": "48",
    }
)


def test_log_retention_ms_dynamic_beats_static_hours() -> None:
    dynamic = DynamicBrokerConfig(STATIC, {}, {"log.retention.ms": "5000"})
    assert dynamic.effective.log_retention_time_ms == 5000
    assert dynamic.update({"log.retention.ms": "7000"}, {"log.retention.ms": "5000"})
    assert dynamic.effective.log_retention_time_ms == 7000
    assert dynamic.update({}, {})
    assert dynamic.effective.log_retention_time_ms == 48 * 3_600_000


def test_synonyms_are_listed_by_source_then_name_as_kafka() -> None:
    dynamic = DynamicBrokerConfig(STATIC, {"log.retention.ms": "7000"}, {"log.retention.ms": "1"})
    assert dynamic.synonyms("log.retention.ms", per_broker=True) == [
        ("log.retention.ms", "7000", SOURCE_DYNAMIC_BROKER_CONFIG),
        ("log.retention.ms", "1", SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("log.retention.hours", "48", SOURCE_STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", SOURCE_DEFAULT_CONFIG),
    ]
    # describing the hours config drops the leading synonyms of other names
    assert dynamic.synonyms("log.retention.hours", per_broker=True)[0] == (
        "log.retention.hours",
        "48",
        SOURCE_STATIC_BROKER_CONFIG,
    )
    assert dynamic.synonyms("log.retention.ms", per_broker=False) == [
        ("log.retention.ms", "1", SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG)
    ]
    assert broker_synonyms("log.flush.interval.ms") == [
        "log.flush.interval.ms",
        "log.flush.scheduler.interval.ms",
    ]


def test_values_print_in_kafkas_form() -> None:
    entries = {e.name: e for e in ca.describe_broker(DynamicBrokerConfig(STATIC), True, None)}
    assert entries["listeners"].value == "PLAINTEXT://127.0.0.1:9092,INTERNAL://127.0.0.1:9093"
    assert entries["listener.security.protocol.map"].value == (
        "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT"
    )
    assert entries["advertised.listeners"].value == entries["listeners"].value
    assert entries["auto.create.topics.enable"].value == "true"
    assert entries["log.retention.ms"].value is None
    assert entries["log.retention.ms"].source == SOURCE_DEFAULT_CONFIG
    assert entries["log.retention.hours"].source == SOURCE_STATIC_BROKER_CONFIG
    assert entries["broker.id"].read_only
    assert not entries["log.retention.ms"].read_only
    rate = entries["replica.alter.log.dirs.io.max.bytes.per.second"]
    assert (rate.value, rate.source, rate.read_only) == (
        str(2**63 - 1),
        SOURCE_DEFAULT_CONFIG,
        False,
    )
    assert all("Endpoint(" not in (e.value or "") for e in entries.values())
    assert all("SecurityProtocol" not in (e.value or "") for e in entries.values())


def test_topic_describe_lists_the_override_then_broker_synonyms() -> None:
    dynamic = DynamicBrokerConfig(STATIC, {}, {"log.retention.ms": "5000"})
    topics = TopicConfigs(dynamic.effective)
    topics.set_overrides("t", {"retention.ms": "100"})
    topics.set_overrides("u", {})
    (t_entry,) = ca.describe_topic(topics, dynamic, "t", ["retention.ms"])
    (u_entry,) = ca.describe_topic(topics, dynamic, "u", ["retention.ms"])
    assert (t_entry.value, t_entry.source) == ("100", ca.SOURCE_TOPIC_CONFIG)
    assert [s[2] for s in t_entry.synonyms] == [
        ca.SOURCE_TOPIC_CONFIG,
        SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG,
        SOURCE_STATIC_BROKER_CONFIG,
        SOURCE_DEFAULT_CONFIG,
    ]
    assert (u_entry.value, u_entry.source) == ("5000", SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG)
    (flush,) = ca.describe_topic(topics, dynamic, "u", ["flush.messages"])
    assert (flush.value, flush.source) == (str(2**63 - 1), SOURCE_DEFAULT_CONFIG)
    assert flush.synonyms == (("log.flush.interval.messages", str(2**63 - 1), 5),)


@pytest.mark.parametrize(
    ("config", "per_broker", "message"),
    [
        ({"broker.id": "3"}, True, "Cannot update these configs dynamically: ['broker.id']"),
        ({"log.retention.hours": "1"}, True, "Cannot update these configs dynamically"),
        ({"listeners": "PLAINTEXT://:1"}, True, "dynamically on this broker"),
        ({"ssl.keystore.location": "/x"}, True, "dynamically on this broker"),
        ({"no.such.config": "1"}, True, "Unknown broker config name"),
        ({"log.retention.ms": "-2"}, True, "log.retention.ms: Value must be at least -1"),
        ({"log.segment.bytes": "1"}, False, "at least 14"),
        ({"compression.type": "brotli"}, False, "String must be one of"),
        ({"leader.replication.throttled.rate": "-1"}, True, "at least 0"),
        ({"max.connections.per.ip": "0"}, True, "max.connections.per.ip"),
        ({"num.io.threads": "17"}, True, "not be greater than double the current value 8"),
        ({"num.io.threads": "3"}, True, "at least half the current value 8"),
        ({"log.cleaner.threads": "3"}, True, "more than double the current value 1"),
        ({"log.cleaner.threads": "0"}, False, "Log cleaner threads should be at least 1"),
        ({"log.cleaner.io.max.bytes.per.second": "x"}, True, "Not a number of type DOUBLE"),
        ({"log.cleaner.backoff.ms": "-1"}, True, "log.cleaner.backoff.ms: Value must be"),
        ({"log.cleaner.enable": "false"}, True, "dynamically on this broker"),
    ],
)
def test_changes_kafka_refuses_are_refused(
    config: dict[str, str], per_broker: bool, message: str
) -> None:
    with pytest.raises(
        InvalidBrokerConfigError,
        match=message.replace(".", r"\.").replace("[", r"\[").replace("]", r"\]"),
    ):
        DynamicBrokerConfig(STATIC).validate(config, per_broker)


def test_valid_changes_come_back_in_kafkas_form() -> None:
    dynamic = DynamicBrokerConfig(STATIC)
    assert dynamic.validate(
        {
            "log.retention.ms": " 5000 ",
            "unclean.leader.election.enable": "TRUE",
            "max.connections.per.ip": "0",
            "max.connections.per.ip.overrides": "127.0.0.1:5",
            "num.io.threads": "16",
            "replica.alter.log.dirs.io.max.bytes.per.second": "1048576",
        },
        True,
    ) == {
        "log.retention.ms": "5000",
        "unclean.leader.election.enable": "true",
        "max.connections.per.ip": "0",
        "max.connections.per.ip.overrides": "127.0.0.1:5",
        "num.io.threads": "16",
        "replica.alter.log.dirs.io.max.bytes.per.second": "1048576",
    }


def test_log_cleaner_configs_change_the_effective_config() -> None:
    dynamic = DynamicBrokerConfig(STATIC)
    new = {"log.cleaner.threads": "2", "log.cleaner.io.max.bytes.per.second": "1048576.5"}
    assert dynamic.validate(new, True) == new
    assert dynamic.update(new, {"log.cleaner.backoff.ms": "200"})
    effective = dynamic.effective
    assert effective.log_cleaner_threads == 2
    assert effective.log_cleaner_io_max_bytes_per_second == 1048576.5
    assert effective.log_cleaner_backoff_ms == 200
    assert dynamic.value("log.cleaner.threads") == ("2", SOURCE_DYNAMIC_BROKER_CONFIG)
    # Half to double of the *current* count: from 2, 4 is allowed.
    assert dynamic.validate({"log.cleaner.threads": "4"}, True) == {"log.cleaner.threads": "4"}


def test_invalid_stored_dynamic_configs_are_skipped() -> None:
    dynamic = DynamicBrokerConfig(STATIC, {"log.retention.ms": "x", "broker.id": "9"}, {})
    assert dynamic.per_broker == {}
    assert dynamic.effective.broker_id == 0


def test_cleanup_policy_is_validated_as_kafkas_list() -> None:
    ca.validate_topic({"cleanup.policy": "compact,delete"})
    ca.validate_topic({"cleanup.policy": "delete"})
    with pytest.raises(ca.ConfigAdminError, match="String must be one of: compact, delete"):
        ca.validate_topic({"cleanup.policy": "shred"})
    assert ca.apply_incremental(
        {"cleanup.policy": "delete"},
        [("cleanup.policy", ca.OP_APPEND, "compact")],
        {"cleanup.policy"},
    ) == {"cleanup.policy": "delete,compact"}
