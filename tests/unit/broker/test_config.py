"""BrokerConfig: properties file, KAFKA_* overrides, Kafka defaults and precedence, errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from kpo_broker.config import BrokerConfig, ConfigError, Endpoint
from kpo_kafka.security import SecurityProtocol

ZK = {"zookeeper.connect": "127.0.0.1:2181/kafka"}


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "server.properties"
    path.write_text(text, encoding="iso-8859-1")
    return path


def test_kafka_defaults() -> None:
    config = BrokerConfig.from_properties(ZK)
    plaintext = Endpoint("PLAINTEXT", "", 9092, SecurityProtocol.PLAINTEXT)
    assert config.broker_id == -1
    assert config.listeners == config.advertised_listeners == (plaintext,)
    assert config.inter_broker_endpoint == plaintext
    assert config.log_dirs == ("/tmp/kafka-logs",)
    assert config.zookeeper_session_timeout_ms == config.zookeeper_connection_timeout_ms == 18000
    assert (config.num_partitions, config.default_replication_factor) == (1, 1)
    assert config.min_insync_replicas == 1
    assert config.replica_lag_time_max_ms == 30000
    assert (config.replica_fetch_max_bytes, config.replica_fetch_response_max_bytes) == (
        1048576,
        10485760,
    )
    assert (config.replica_fetch_wait_max_ms, config.replica_fetch_min_bytes) == (500, 1)
    assert (config.replica_fetch_backoff_ms, config.num_replica_fetchers) == (1000, 1)
    assert config.replica_high_watermark_checkpoint_interval_ms == 5000
    assert config.unclean_leader_election_enable is False
    assert config.auto_leader_rebalance_enable is True
    assert config.leader_imbalance_per_broker_percentage == 10
    assert config.leader_imbalance_check_interval_seconds == 300
    assert config.controlled_shutdown_enable is True
    assert config.controlled_shutdown_max_retries == 3
    assert config.controlled_shutdown_retry_backoff_ms == 5000
    assert config.controller_socket_timeout_ms == 30000
    assert config.auto_create_topics_enable and config.delete_topic_enable
    assert config.log_segment_bytes == 1073741824
    assert config.log_roll_time_ms == 168 * 3_600_000
    assert config.log_retention_time_ms == 168 * 3_600_000
    assert config.log_retention_bytes == -1
    assert config.log_retention_check_interval_ms == 300000
    assert config.log_index_interval_bytes == 4096
    assert config.message_max_bytes == 1048588
    assert config.socket_request_max_bytes == 104857600
    assert config.queued_max_request_bytes == -1
    assert config.connections_max_idle_ms == 600000
    assert config.max_connections_per_ip == 2**31 - 1
    assert config.max_connections_per_ip_overrides == {}
    assert config.request_timeout_ms == 30000
    assert (config.replication_quota_window_num, config.replication_quota_window_size_seconds) == (
        11,
        1,
    )
    assert config.leader_replication_throttled_rate == 2**63 - 1
    assert config.follower_replication_throttled_rate == 2**63 - 1
    assert (config.metrics_port, config.metrics_host) == (0, "0.0.0.0")
    assert config.broker_rack is None
    assert config.extra == {}


def test_every_field_is_documented_with_its_property_name() -> None:
    for name, field in BrokerConfig.model_fields.items():
        assert field.description, name
        if name != "extra":
            assert field.alias is not None and field.alias.replace(".", "_") == name


def test_file_then_environment_overrides(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "# broker 1\n"
        "broker.id = 1\n"
        "zookeeper.connect=zk-file:2181\n"
        "listeners=PLAINTEXT://:9092,INTERNAL://0.0.0.0:19092\n"
        "advertised.listeners=PLAINTEXT://b1.example:9092,INTERNAL://b1.internal:19092\n"
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT\n"
        "inter.broker.listener.name=INTERNAL\n"
        "log.dirs=/data/a, /data/b\n"
        "unclean.leader.election.enable=TRUE\n"
        "custom.plugin.setting=x\n",
    )
    env = {
        "KAFKA_BROKER_ID": "7",
        "KAFKA_ZOOKEEPER_CONNECT": "zk-env:2181/kpo",
        "KAFKA_BROKER_RACK": "rack-a",
        "KAFKA_CUSTOM_PLUGIN_SETTING": "y",
        "KAFKA_HEAP_OPTS": "-Xmx1G",
        "KAFKA_NUM_PARTITIONS": " 3 ",
    }
    config = BrokerConfig.from_properties_file(path, env=env)
    assert config.broker_id == 7
    assert config.zookeeper_connect == "zk-env:2181/kpo"
    assert config.broker_rack == "rack-a"
    assert config.num_partitions == 3
    assert config.log_dirs == ("/data/a", "/data/b")
    assert config.unclean_leader_election_enable is True
    assert config.extra == {"custom.plugin.setting": "y"}
    assert [(e.name, e.host, e.port) for e in config.listeners] == [
        ("PLAINTEXT", "", 9092),
        ("INTERNAL", "0.0.0.0", 19092),
    ]
    assert config.inter_broker_endpoint == Endpoint(
        "INTERNAL", "b1.internal", 19092, SecurityProtocol.PLAINTEXT
    )


def test_environment_only_touches_kafka_prefixed_property_names(tmp_path: Path) -> None:
    path = write(tmp_path, "zookeeper.connect=zk:2181\n")
    config = BrokerConfig.from_properties_file(path, env={"BROKER_ID": "4", "KAFKA_OPTS": "x"})
    assert config.broker_id == -1
    assert config.extra == {}


def test_log_dir_fallback_and_blank_values() -> None:
    config = BrokerConfig.from_properties({**ZK, "log.dir": "/var/kafka", "broker.rack": " "})
    assert config.log_dirs == ("/var/kafka",)
    assert config.broker_rack is None
    both = BrokerConfig.from_properties({**ZK, "log.dir": "/x", "log.dirs": "/y"})
    assert both.log_dirs == ("/y",)
    blank = BrokerConfig.from_properties({**ZK, "log.dir": "/x", "log.dirs": ""})
    assert blank.log_dirs == ("/x",)


def test_zookeeper_connection_timeout_follows_the_session_timeout() -> None:
    config = BrokerConfig.from_properties({**ZK, "zookeeper.session.timeout.ms": "6000"})
    assert config.zookeeper_connection_timeout_ms == 6000
    explicit = BrokerConfig.from_properties(
        {**ZK, "zookeeper.session.timeout.ms": "6000", "zookeeper.connection.timeout.ms": "100"}
    )
    assert explicit.zookeeper_connection_timeout_ms == 100


@pytest.mark.parametrize(
    ("props", "expected_ms"),
    [
        ({"log.retention.hours": "2"}, 2 * 3_600_000),
        ({"log.retention.hours": "2", "log.retention.minutes": "5"}, 5 * 60_000),
        (
            {"log.retention.hours": "2", "log.retention.minutes": "5", "log.retention.ms": "10"},
            10,
        ),
        ({"log.retention.ms": "-1", "log.retention.hours": "2"}, -1),
        ({"log.retention.minutes": "-5"}, -1),
    ],
)
def test_retention_precedence(props: dict[str, str], expected_ms: int) -> None:
    assert BrokerConfig.from_properties({**ZK, **props}).log_retention_time_ms == expected_ms


def test_roll_precedence() -> None:
    config = BrokerConfig.from_properties({**ZK, "log.roll.hours": "1", "log.roll.ms": "500"})
    assert config.log_roll_time_ms == 500
    assert BrokerConfig.from_properties({**ZK, "log.roll.hours": "1"}).log_roll_time_ms == 3_600_000


def test_advertised_listeners_default_to_listeners() -> None:
    config = BrokerConfig.from_properties({**ZK, "listeners": "PLAINTEXT://127.0.0.1:0"})
    assert config.advertised_listeners == config.listeners
    assert config.listeners[0] == Endpoint("PLAINTEXT", "127.0.0.1", 0, SecurityProtocol.PLAINTEXT)


def test_connection_limit_overrides_are_parsed() -> None:
    config = BrokerConfig.from_properties(
        {
            **ZK,
            "max.connections.per.ip": "0",
            "max.connections.per.ip.overrides": "localhost:5, 10.0.0.1:0 ,::1:7",
            "queued.max.request.bytes": "1048576",
            "connections.max.idle.ms": "-1",
        }
    )
    assert config.max_connections_per_ip_overrides == {"localhost": 5, "10.0.0.1": 0, "::1": 7}
    assert (config.queued_max_request_bytes, config.connections_max_idle_ms) == (1048576, -1)


@pytest.mark.parametrize(
    ("props", "property_name"),
    [
        ({"broker.id": "one"}, "broker.id"),
        ({"broker.id": "1.5"}, "broker.id"),
        ({"broker.id": "-2"}, "broker.id"),
        ({"broker.id": "2147483648"}, "broker.id"),
        ({"num.partitions": "0"}, "num.partitions"),
        ({"unclean.leader.election.enable": "yes"}, "unclean.leader.election.enable"),
        ({"listeners": "PLAINTEXT:/:9092"}, "listeners"),
        ({"listeners": "SECRET://:9093"}, "listeners"),
        ({"listeners": ","}, "listeners"),
        ({"listener.security.protocol.map": "A:QUIC"}, "listener.security.protocol.map"),
        ({"advertised.listeners": "PLAINTEXT://0.0.0.0:9092"}, "advertised.listeners"),
        ({"advertised.listeners": "SSL://h:9093"}, "advertised.listeners"),
        ({"inter.broker.listener.name": "INTERNAL"}, "inter.broker.listener.name"),
        ({"metrics.port": "70000"}, "metrics.port"),
        ({"log.segment.bytes": "10"}, "log.segment.bytes"),
        ({"zookeeper.session.timeout.ms": ""}, "zookeeper.session.timeout.ms"),
        ({"max.connections.per.ip": "0"}, "max.connections.per.ip"),
        ({"max.connections.per.ip": "-1"}, "max.connections.per.ip"),
        ({"max.connections.per.ip.overrides": "host"}, "max.connections.per.ip.overrides"),
        ({"max.connections.per.ip.overrides": "h:-1"}, "max.connections.per.ip.overrides"),
    ],
)
def test_wrong_values_name_the_property(props: dict[str, str], property_name: str) -> None:
    with pytest.raises(ConfigError) as caught:
        BrokerConfig.from_properties({**ZK, **props})
    assert caught.value.property_name == property_name
    assert str(caught.value).startswith(property_name + ":")


def test_missing_zookeeper_connect_is_named() -> None:
    with pytest.raises(ConfigError) as caught:
        BrokerConfig.from_properties({"broker.id": "0"})
    assert caught.value.property_name == "zookeeper.connect"


def test_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        BrokerConfig.from_properties_file(tmp_path / "missing.properties", env={})
    assert caught.value.property_name is None


def test_environment_value_errors_name_the_property(tmp_path: Path) -> None:
    path = write(tmp_path, "zookeeper.connect=zk:2181\n")
    with pytest.raises(ConfigError) as caught:
        BrokerConfig.from_properties_file(path, env={"KAFKA_REPLICA_LAG_TIME_MAX_MS": "soon"})
    assert caught.value.property_name == "replica.lag.time.max.ms"


def test_direct_construction_by_field_name_and_frozen() -> None:
    config = BrokerConfig(zookeeper_connect="zk:2181", broker_id=2, num_partitions=4)
    assert (config.broker_id, config.num_partitions) == (2, 4)
    with pytest.raises(ValidationError):
        config.broker_id = 3  # type: ignore[misc]
    with pytest.raises(ValidationError):
        BrokerConfig(zookeeper_connect="zk:2181", broker_id=True)


def test_zookeeper_max_in_flight_requests_is_kafkas_with_its_default() -> None:
    assert BrokerConfig.from_properties(ZK).zookeeper_max_in_flight_requests == 10
    config = BrokerConfig.from_properties({**ZK, "zookeeper.max.in.flight.requests": "50"})
    assert config.zookeeper_max_in_flight_requests == 50
    with pytest.raises(ConfigError, match=r"zookeeper\.max\.in\.flight\.requests"):
        BrokerConfig.from_properties({**ZK, "zookeeper.max.in.flight.requests": "0"})
