"""Broker configuration: Kafka's ``server.properties`` names, defaults and precedence rules.

:class:`BrokerConfig` is a frozen pydantic model whose fields carry Kafka's
property names as aliases (``broker.id`` -> ``broker_id``). It is built from a
Java ``.properties`` file plus ``KAFKA_<NAME>`` environment overrides by
:meth:`BrokerConfig.from_properties_file`. Values are parsed as Kafka's
``ConfigDef`` does: integers and booleans (``true``/``false``, any case) are
trimmed, lists are comma-separated. A blank value of a property whose default
is null counts as unset. Kafka's fallbacks: ``log.dirs`` -> ``log.dir``,
``advertised.listeners`` -> ``listeners``, ``zookeeper.connection.timeout.ms``
-> ``zookeeper.session.timeout.ms``; retention is ``log.retention.ms``, else
``.minutes``, else ``.hours``; segment roll is ``log.roll.ms``, else ``.hours``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

from jproperties import Properties
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from kpo_broker.log.config import COMPRESSION_TYPES, TIMESTAMP_TYPES
from kpo_broker.protocol.endpoints import (
    DEFAULT_PROTOCOL_MAP,
    Endpoint,
    parse_listeners,
    parse_protocol_map,
)
from kpo_kafka.security import SecurityProtocol

__all__ = ["BrokerConfig", "ConfigError", "Endpoint"]

_INT_MAX = 2**31 - 1
_LONG_MAX = 2**63 - 1
_INTEGER = re.compile(r"[+-]?[0-9]+")
_H = "Kafka default"


class ConfigError(Exception):
    """A configuration property is missing, malformed or inconsistent.

    Attributes:
        property_name: the Kafka property name at fault (``"broker.id"``), or
            None when the file itself cannot be read.
    """

    def __init__(self, property_name: str | None, message: str) -> None:
        super().__init__(f"{property_name}: {message}" if property_name else message)
        self.property_name = property_name


def _parse_int(value: Any) -> Any:
    """Parse a Kafka INT/LONG: decimal digits with optional sign, surrounding blanks ignored."""
    if isinstance(value, bool):
        raise ValueError("expected an integer")
    if isinstance(value, str):
        if not _INTEGER.fullmatch(value.strip()):
            raise ValueError(f"{value!r} is not an integer")
        return int(value.strip())
    return value


def _parse_bool(value: Any) -> Any:
    """Parse a Kafka BOOLEAN: ``true`` or ``false`` in any case."""
    if isinstance(value, str):
        lowered = value.strip().lower()
        if lowered not in ("true", "false"):
            raise ValueError(f"{value!r} is not true or false")
        return lowered == "true"
    return value


def _parse_list(value: Any) -> Any:
    """Parse a Kafka LIST: comma-separated, blanks trimmed, empty entries dropped."""
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    return value


KafkaInt = Annotated[int, BeforeValidator(_parse_int)]
KafkaBool = Annotated[bool, BeforeValidator(_parse_bool)]
KafkaList = Annotated[tuple[str, ...], BeforeValidator(_parse_list)]


def _int(name: str, default: Any, doc: str, *, ge: int = 0, le: int = _INT_MAX) -> Any:
    """Declare a Kafka INT property (int32)."""
    return Field(default, alias=name, description=doc, ge=ge, le=le)


def _long(name: str, default: Any, doc: str, *, ge: int = 0) -> Any:
    """Declare a Kafka LONG property (int64)."""
    return Field(default, alias=name, description=doc, ge=ge, le=_LONG_MAX)


def _prop(name: str, default: Any, doc: str) -> Any:
    """Declare a Kafka property of another type."""
    return Field(default, alias=name, description=doc)


class BrokerConfig(BaseModel):
    """Static configuration of one broker, with Kafka's property names as aliases.

    Build it with :meth:`from_properties_file` or :meth:`from_properties`, which
    raise :class:`ConfigError` naming the property. Direct construction takes
    property names or field names and raises pydantic's ``ValidationError``
    (or :class:`ConfigError` for cross-property checks). Unknown properties
    are kept, unparsed, in :attr:`extra` (Kafka ignores them with a warning).
    """

    model_config = ConfigDict(frozen=True, validate_by_name=True, validate_by_alias=True)

    # Identity and listeners.
    broker_id: KafkaInt = _int("broker.id", -1, f"Broker id. {_H} -1.", ge=-1)
    broker_rack: str | None = _prop("broker.rack", None, f"Rack of the broker. {_H} null.")
    listener_security_protocol_map: dict[str, SecurityProtocol] = _prop(
        "listener.security.protocol.map",
        DEFAULT_PROTOCOL_MAP,
        f"Listener name -> security protocol, NAME:PROTOCOL,... {_H}: each protocol to itself.",
    )
    listeners: tuple[Endpoint, ...] = _prop(
        "listeners", None, f"Endpoints to bind; empty host = all. {_H} PLAINTEXT://:9092."
    )
    advertised_listeners: tuple[Endpoint, ...] = _prop(
        "advertised.listeners", None, f"Endpoints published in ZooKeeper. {_H}: listeners."
    )
    inter_broker_listener_name: str | None = _prop(
        "inter.broker.listener.name", None, f"Inter-broker listener. {_H} null."
    )
    security_inter_broker_protocol: SecurityProtocol = _prop(
        "security.inter.broker.protocol",
        SecurityProtocol.PLAINTEXT,
        f"Inter-broker listener if inter.broker.listener.name is null. {_H} PLAINTEXT.",
    )
    # Storage.
    log_dirs: KafkaList = _prop("log.dirs", None, f"Log directories (list). {_H}: log.dir.")
    log_dir: str = _prop("log.dir", "/tmp/kafka-logs", f"Log directory. {_H} /tmp/kafka-logs.")
    # ZooKeeper.
    zookeeper_connect: str = _prop("zookeeper.connect", ..., "host:port,...[/chroot]. Required.")
    zookeeper_session_timeout_ms: KafkaInt = _int(
        "zookeeper.session.timeout.ms", 18000, f"Session timeout, ms. {_H} 18000.", ge=1
    )
    zookeeper_connection_timeout_ms: KafkaInt = _int(
        "zookeeper.connection.timeout.ms", None, f"Connect timeout, ms. {_H}: session.", ge=1
    )
    zookeeper_max_in_flight_requests: KafkaInt = _int(
        "zookeeper.max.in.flight.requests",
        10,
        f"ZooKeeper requests pipelined before blocking on their answers. {_H} 10.",
        ge=1,
    )
    # Topics.
    num_partitions: KafkaInt = _int("num.partitions", 1, f"Auto-topic partitions. {_H} 1.", ge=1)
    default_replication_factor: KafkaInt = _int(
        "default.replication.factor", 1, f"Auto-topic replication factor. {_H} 1.", ge=1
    )
    min_insync_replicas: KafkaInt = _int(
        "min.insync.replicas", 1, f"Smallest ISR for acks=all writes. {_H} 1.", ge=1
    )
    auto_create_topics_enable: KafkaBool = _prop(
        "auto.create.topics.enable", True, f"Metadata creates unknown topics. {_H} true."
    )
    delete_topic_enable: KafkaBool = _prop(
        "delete.topic.enable", True, f"Topic deletion allowed. {_H} true."
    )
    # Replication (Kafka's ReplicaManager, Partition and ReplicaFetcherThread).
    replica_lag_time_max_ms: KafkaInt = _long(
        "replica.lag.time.max.ms", 30000, f"Lag before leaving the ISR, ms. {_H} 30000."
    )
    replica_fetch_max_bytes: KafkaInt = _int(
        "replica.fetch.max.bytes", 1048576, f"Follower fetch, per partition, bytes. {_H} 1 MiB."
    )
    replica_fetch_response_max_bytes: KafkaInt = _int(
        "replica.fetch.response.max.bytes", 10485760, f"Follower fetch, bytes. {_H} 10 MiB."
    )
    replica_fetch_wait_max_ms: KafkaInt = _int(
        "replica.fetch.wait.max.ms", 500, f"Follower fetch max wait, ms. {_H} 500."
    )
    replica_fetch_min_bytes: KafkaInt = _int(
        "replica.fetch.min.bytes", 1, f"Follower fetch min bytes. {_H} 1."
    )
    replica_fetch_backoff_ms: KafkaInt = _int(
        "replica.fetch.backoff.ms", 1000, f"Pause after a failed fetch, ms. {_H} 1000."
    )
    replica_socket_timeout_ms: KafkaInt = _int(
        "replica.socket.timeout.ms", 30000, f"Follower request timeout, ms. {_H} 30000.", ge=1
    )
    num_replica_fetchers: KafkaInt = _int(
        "num.replica.fetchers", 1, f"Fetchers per source broker. {_H} 1.", ge=1
    )
    max_incremental_fetch_session_cache_slots: KafkaInt = _int(
        "max.incremental.fetch.session.cache.slots",
        1000,
        f"Incremental fetch sessions cached (KIP-227). {_H} 1000.",
    )
    replica_high_watermark_checkpoint_interval_ms: KafkaInt = _long(
        "replica.high.watermark.checkpoint.interval.ms", 5000, f"HW checkpoint, ms. {_H} 5000."
    )
    unclean_leader_election_enable: KafkaBool = _prop(
        "unclean.leader.election.enable", False, f"Elect out-of-ISR replicas. {_H} false."
    )
    # Controller (Kafka's KafkaController).
    auto_leader_rebalance_enable: KafkaBool = _prop(
        "auto.leader.rebalance.enable", True, f"Preferred leader rebalance. {_H} true."
    )
    leader_imbalance_per_broker_percentage: KafkaInt = _int(
        "leader.imbalance.per.broker.percentage", 10, f"Rebalance trigger, %. {_H} 10.", le=100
    )
    leader_imbalance_check_interval_seconds: KafkaInt = _long(
        "leader.imbalance.check.interval.seconds", 300, f"Rebalance check, s. {_H} 300.", ge=1
    )
    controlled_shutdown_enable: KafkaBool = _prop(
        "controlled.shutdown.enable", True, f"Move leaders away before stopping. {_H} true."
    )
    controlled_shutdown_max_retries: KafkaInt = _int(
        "controlled.shutdown.max.retries", 3, f"ControlledShutdown attempts. {_H} 3."
    )
    controlled_shutdown_retry_backoff_ms: KafkaInt = _long(
        "controlled.shutdown.retry.backoff.ms", 5000, f"Pause between attempts, ms. {_H} 5000."
    )
    controller_socket_timeout_ms: KafkaInt = _int(
        "controller.socket.timeout.ms", 30000, f"Controller request timeout, ms. {_H} 30000.", ge=1
    )
    # Log segments and retention (Kafka's Log, LogSegment and LogManager).
    log_segment_bytes: KafkaInt = _int(
        "log.segment.bytes", 1073741824, f"Segment size, bytes. {_H} 1 GiB.", ge=14
    )
    log_roll_ms: KafkaInt | None = _long(
        "log.roll.ms", None, f"Segment age to roll, ms; over hours. {_H} null.", ge=1
    )
    log_roll_hours: KafkaInt = _int("log.roll.hours", 168, f"Segment age, h. {_H} 168.", ge=1)
    log_retention_ms: KafkaInt | None = _long(
        "log.retention.ms", None, f"Retention, ms; -1 unlimited; first. {_H} null.", ge=-_LONG_MAX
    )
    log_retention_minutes: KafkaInt | None = _int(
        "log.retention.minutes", None, f"Retention, min; over hours. {_H} null.", ge=-_INT_MAX
    )
    log_retention_hours: KafkaInt = _int(
        "log.retention.hours", 168, f"Retention, h. {_H} 168.", ge=-_INT_MAX
    )
    log_retention_bytes: KafkaInt = _long(
        "log.retention.bytes", -1, f"Size kept per partition, bytes; -1 unlimited. {_H} -1.", ge=-1
    )
    log_retention_check_interval_ms: KafkaInt = _long(
        "log.retention.check.interval.ms", 300000, f"Retention check, ms. {_H} 300000.", ge=1
    )
    log_index_interval_bytes: KafkaInt = _int(
        "log.index.interval.bytes", 4096, f"Bytes between index entries. {_H} 4096."
    )
    # Log compaction (Kafka's LogCleaner, CleanerConfig); see kpo_broker/log/log_cleaner.py.
    log_cleanup_policy: KafkaList = _prop(
        "log.cleanup.policy", ("delete",), f"Default cleanup.policy: delete, compact. {_H} delete."
    )
    log_cleaner_enable: KafkaBool = _prop(
        "log.cleaner.enable", True, f"Run the log cleaner for compacted topics. {_H} true."
    )
    log_cleaner_threads: KafkaInt = _int("log.cleaner.threads", 1, f"Cleaner threads. {_H} 1.")
    log_cleaner_backoff_ms: KafkaInt = _long(
        "log.cleaner.backoff.ms", 15000, f"Sleep when no log needs cleaning, ms. {_H} 15000."
    )
    log_cleaner_dedupe_buffer_size: KafkaInt = _long(
        "log.cleaner.dedupe.buffer.size",
        134217728,
        f"Offset map memory of all cleaner threads, bytes (24 per key). {_H} 128 MiB.",
    )
    log_cleaner_io_buffer_load_factor: float = _prop(
        "log.cleaner.io.buffer.load.factor", 0.9, f"Offset map fill before a pass ends. {_H} 0.9."
    )
    log_cleaner_io_buffer_size: KafkaInt = _int(
        "log.cleaner.io.buffer.size", 524288, f"Cleaner read chunk, bytes. {_H} 524288."
    )
    log_cleaner_io_max_bytes_per_second: float = _prop(
        "log.cleaner.io.max.bytes.per.second",
        1.7976931348623157e308,
        f"Cleaner read+write throttle, bytes/s. {_H} Double.MAX.",
    )
    log_cleaner_delete_retention_ms: KafkaInt = _long(
        "log.cleaner.delete.retention.ms", 86400000, f"Tombstone retention, ms. {_H} 1 day."
    )
    log_cleaner_min_cleanable_ratio: float = _prop(
        "log.cleaner.min.cleanable.ratio", 0.5, f"Dirty ratio to clean a log. {_H} 0.5."
    )
    log_cleaner_min_compaction_lag_ms: KafkaInt = _long(
        "log.cleaner.min.compaction.lag.ms", 0, f"Minimum age of cleaned records, ms. {_H} 0."
    )
    log_cleaner_max_compaction_lag_ms: KafkaInt = _long(
        "log.cleaner.max.compaction.lag.ms",
        _LONG_MAX,
        f"Age forcing a clean, ms. {_H} Long.MAX.",
        ge=1,
    )
    # Requests.
    message_max_bytes: KafkaInt = _int(
        "message.max.bytes", 1048588, f"Largest record batch, bytes. {_H} 1048588."
    )
    socket_request_max_bytes: KafkaInt = _int(
        "socket.request.max.bytes", 104857600, f"Largest request, bytes. {_H} 100 MiB.", ge=1
    )
    queued_max_request_bytes: KafkaInt = _long(
        "queued.max.request.bytes",
        -1,
        f"Requests read, not yet answered, bytes; reads pause beyond; <= 0 unbounded. {_H} -1.",
        ge=-_LONG_MAX,
    )
    # Connections (Kafka's SocketServer, Selector and ConnectionQuotas).
    connections_max_idle_ms: KafkaInt = _long(
        "connections.max.idle.ms",
        600000,
        f"Idle connections are closed after, ms; negative = never. {_H} 600000.",
        ge=-_LONG_MAX,
    )
    max_connections_per_ip: KafkaInt = _int(
        "max.connections.per.ip",
        _INT_MAX,
        f"Open connections per client IP; more are closed at accept. {_H} Int.MAX.",
    )
    max_connections_per_ip_overrides: dict[str, int] = _prop(
        "max.connections.per.ip.overrides",
        {},
        f"Per host name or IP limits, host:count,... {_H} empty.",
    )
    connection_failed_authentication_delay_ms: KafkaInt = _int(
        "connection.failed.authentication.delay.ms",
        100,
        f"Delay before closing a connection whose authentication failed, ms. {_H} 100.",
    )
    request_timeout_ms: KafkaInt = _int(
        "request.timeout.ms", 30000, f"Request timeout, ms. {_H} 30000."
    )
    # Replication quotas (KIP-73, Kafka's ReplicationQuotaManager).
    replication_quota_window_num: KafkaInt = _int(
        "replication.quota.window.num", 11, f"Samples per rate window. {_H} 11.", ge=1
    )
    replication_quota_window_size_seconds: KafkaInt = _int(
        "replication.quota.window.size.seconds", 1, f"Sample length, s. {_H} 1.", ge=1
    )
    leader_replication_throttled_rate: KafkaInt = _long(
        "leader.replication.throttled.rate", _LONG_MAX, f"Leader throttle, B/s. {_H} Long.MAX."
    )
    follower_replication_throttled_rate: KafkaInt = _long(
        "follower.replication.throttled.rate", _LONG_MAX, f"Follower throttle, B/s. {_H} Long.MAX."
    )
    # Log defaults of the remaining topic configs (Kafka's ServerLogConfigs; the topic config
    # each one is the default of is in kpo_broker.server.dynamic_config.TOPIC_CONFIGS).
    log_roll_jitter_ms: KafkaInt | None = _long(
        "log.roll.jitter.ms", None, f"Segment roll jitter, ms; over hours. {_H} null."
    )
    log_roll_jitter_hours: KafkaInt = _int(
        "log.roll.jitter.hours", 0, f"Segment roll jitter, h. {_H} 0."
    )
    log_index_size_max_bytes: KafkaInt = _int(
        "log.index.size.max.bytes", 10485760, f"Index file size, bytes. {_H} 10 MiB.", ge=4
    )
    log_flush_interval_messages: KafkaInt = _long(
        "log.flush.interval.messages", _LONG_MAX, f"Fsync every N records. {_H} Long.MAX.", ge=1
    )
    log_flush_interval_ms: KafkaInt | None = _long(
        "log.flush.interval.ms", None, f"Fsync age, ms; null: scheduler interval. {_H} null."
    )
    log_flush_scheduler_interval_ms: KafkaInt = _long(
        "log.flush.scheduler.interval.ms", _LONG_MAX, f"Flush check, ms. {_H} Long.MAX."
    )
    log_segment_delete_delay_ms: KafkaInt = _long(
        "log.segment.delete.delay.ms", 60000, f"Delay before removing files, ms. {_H} 60000."
    )
    log_preallocate: KafkaBool = _prop(
        "log.preallocate", False, f"Preallocate segment files (no effect here). {_H} false."
    )
    compression_type: str = _prop(
        "compression.type", "producer", f"Codec of stored batches. {_H} producer."
    )
    compression_gzip_level: KafkaInt = _int(
        "compression.gzip.level", -1, f"gzip level, 1..9 or -1. {_H} -1.", ge=-1, le=9
    )
    compression_lz4_level: KafkaInt = _int(
        "compression.lz4.level", 9, f"lz4 level, 1..17. {_H} 9.", ge=1, le=17
    )
    compression_zstd_level: KafkaInt = _int(
        "compression.zstd.level", 3, f"zstd level, -131072..22. {_H} 3.", ge=-131072, le=22
    )
    log_message_timestamp_type: str = _prop(
        "log.message.timestamp.type", "CreateTime", f"CreateTime or LogAppendTime. {_H} CreateTime."
    )
    log_message_timestamp_difference_max_ms: KafkaInt = _long(
        "log.message.timestamp.difference.max.ms",
        _LONG_MAX,
        f"Deprecated bound of before/after.max.ms, ms. {_H} Long.MAX.",
    )
    log_message_timestamp_before_max_ms: KafkaInt = _long(
        "log.message.timestamp.before.max.ms", _LONG_MAX, f"Oldest CreateTime, ms. {_H} Long.MAX."
    )
    log_message_timestamp_after_max_ms: KafkaInt = _long(
        "log.message.timestamp.after.max.ms", _LONG_MAX, f"Latest CreateTime, ms. {_H} Long.MAX."
    )
    log_message_downconversion_enable: KafkaBool = _prop(
        "log.message.downconversion.enable", True, f"Down-convert for old fetches. {_H} true."
    )
    log_message_format_version: str = _prop(
        "log.message.format.version", "3.0-IV1", f"Ignored since IBP 3.0. {_H} 3.0-IV1."
    )
    log_local_retention_ms: KafkaInt = _long(
        "log.local.retention.ms", -2, f"Tiered storage local retention, ms. {_H} -2.", ge=-2
    )
    log_flush_offset_checkpoint_interval_ms: KafkaInt = _int(
        "log.flush.offset.checkpoint.interval.ms",
        60000,
        f"Recovery point checkpoint interval, ms. {_H} 60000.",
    )
    log_flush_start_offset_checkpoint_interval_ms: KafkaInt = _int(
        "log.flush.start.offset.checkpoint.interval.ms",
        60000,
        f"Log start offset checkpoint interval, ms. {_H} 60000.",
    )
    log_local_retention_bytes: KafkaInt = _long(
        "log.local.retention.bytes", -2, f"Tiered storage local retention, B. {_H} -2.", ge=-2
    )
    # Group coordinator and __consumer_offsets (Kafka's GroupCoordinatorConfig, OffsetConfig).
    offsets_topic_num_partitions: KafkaInt = _int(
        "offsets.topic.num.partitions", 50, f"__consumer_offsets partitions. {_H} 50.", ge=1
    )
    offsets_topic_replication_factor: KafkaInt = _int(
        "offsets.topic.replication.factor",
        3,
        f"__consumer_offsets replicas; created once this many brokers are alive. {_H} 3.",
        ge=1,
        le=32767,
    )
    offsets_topic_segment_bytes: KafkaInt = _int(
        "offsets.topic.segment.bytes",
        104857600,
        f"__consumer_offsets segment size, bytes. {_H} 100 MiB.",
        ge=1,
    )
    offsets_topic_compression_codec: KafkaInt = _int(
        "offsets.topic.compression.codec",
        0,
        "Codec of __consumer_offsets batches: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd; "
        f"a batch that would not shrink is written uncompressed. {_H} 0.",
        le=4,
    )
    offsets_commit_timeout_ms: KafkaInt = _int(
        "offsets.commit.timeout.ms",
        5000,
        f"Wait for an offset commit's replication, ms. {_H} 5000.",
        ge=1,
    )
    offsets_commit_required_acks: KafkaInt = _int(
        "offsets.commit.required.acks",
        -1,
        f"acks of offset commit appends (-1 all ISR, 1 leader). {_H} -1.",
        ge=-1,
        le=32767,
    )
    offsets_retention_minutes: KafkaInt = _int(
        "offsets.retention.minutes",
        10080,
        f"Committed offsets of an empty group (or unsubscribed topics) expire after. {_H} 7 days.",
        ge=1,
    )
    offsets_retention_check_interval_ms: KafkaInt = _long(
        "offsets.retention.check.interval.ms",
        600000,
        f"How often expired offsets are removed, ms. {_H} 600000.",
        ge=1,
    )
    offsets_load_buffer_size: KafkaInt = _int(
        "offsets.load.buffer.size",
        5242880,
        f"Bytes read per step when loading __consumer_offsets. {_H} 5 MiB.",
        ge=1,
    )
    offset_metadata_max_bytes: KafkaInt = _int(
        "offset.metadata.max.bytes", 4096, f"Longest commit metadata string. {_H} 4096."
    )
    group_min_session_timeout_ms: KafkaInt = _int(
        "group.min.session.timeout.ms", 6000, f"Smallest session.timeout.ms. {_H} 6000."
    )
    group_max_session_timeout_ms: KafkaInt = _int(
        "group.max.session.timeout.ms", 1800000, f"Largest session.timeout.ms. {_H} 1800000."
    )
    group_initial_rebalance_delay_ms: KafkaInt = _int(
        "group.initial.rebalance.delay.ms",
        3000,
        f"Wait for more members before an empty group's first rebalance, ms. {_H} 3000.",
    )
    group_max_size: KafkaInt = _int(
        "group.max.size", _INT_MAX, f"Most members of one group. {_H} Int.MAX.", ge=1
    )
    # kpo's own (no Kafka equivalent): Prometheus metrics, see docs/reference/metrics.md.
    metrics_port: KafkaInt = _int(
        "metrics.port",
        0,
        "Port serving Prometheus GET /metrics (kpo only); 0 = disabled. Default 0.",
        le=65535,
    )
    metrics_host: str = _prop(
        "metrics.host", "0.0.0.0", "Address the metrics port binds (kpo only). Default 0.0.0.0."
    )
    extra: dict[str, str] = Field(default_factory=dict, description="Unknown properties.")

    @model_validator(mode="before")
    @classmethod
    def _derived_defaults(cls, data: Any) -> Any:
        """Treat blank null-default values as unset, then apply Kafka's fallbacks."""
        if not isinstance(data, Mapping):
            return data
        values = {_ALIAS_OF.get(k, k): v for k, v in data.items()}
        for alias in _NULL_DEFAULT:
            if isinstance(values.get(alias), str) and not values[alias].strip():
                del values[alias]
        values.setdefault("listeners", "PLAINTEXT://:9092")
        values.setdefault("advertised.listeners", values["listeners"])
        values.setdefault("log.dirs", values.get("log.dir", "/tmp/kafka-logs"))
        values.setdefault(
            "zookeeper.connection.timeout.ms", values.get("zookeeper.session.timeout.ms", 18000)
        )
        return values

    @field_validator("listener_security_protocol_map", mode="before")
    @classmethod
    def _protocol_map(cls, value: Any) -> Any:
        return parse_protocol_map(value) if isinstance(value, str) else value

    @field_validator("max_connections_per_ip_overrides", mode="before")
    @classmethod
    def _connection_overrides(cls, value: Any) -> Any:
        """Parse ``host:count,...`` (the count after the last colon, so IPv6 hosts work)."""
        if not isinstance(value, str):
            return value
        overrides: dict[str, int] = {}
        for entry in _parse_list(value):
            host, colon, count = entry.rpartition(":")
            if not colon or not host.strip() or not _INTEGER.fullmatch(count.strip()):
                raise ValueError(f"{entry!r} is not host:count")
            if int(count) < 0:
                raise ValueError(f"{entry!r}: the count must be at least 0")
            overrides[host.strip()] = int(count)
        return overrides

    @field_validator("listeners", "advertised_listeners", mode="before")
    @classmethod
    def _endpoints(cls, value: Any, info: ValidationInfo) -> Any:
        protocol_map = info.data.get("listener_security_protocol_map")
        if not isinstance(value, str) or protocol_map is None:
            return value
        endpoints = parse_listeners(value, protocol_map)
        if not endpoints:
            raise ValueError("at least one listener is required")
        if info.field_name == "advertised_listeners" and any(
            e.host == "0.0.0.0" for e in endpoints
        ):
            raise ValueError("cannot advertise the meta-address 0.0.0.0")
        return endpoints

    @model_validator(mode="after")
    def _consistency(self) -> BrokerConfig:
        # ConfigError is no ValueError, so pydantic lets it through unchanged.
        if not {e.name for e in self.advertised_listeners} <= {e.name for e in self.listeners}:
            raise ConfigError("advertised.listeners", "names must be among the listeners names")
        if self.inter_broker_endpoint is None:
            raise ConfigError(
                "inter.broker.listener.name",
                f"listener {self.inter_broker_listener} is not in advertised.listeners",
            )
        if self.max_connections_per_ip == 0 and not self.max_connections_per_ip_overrides:
            raise ConfigError(
                "max.connections.per.ip",
                "can be 0 only if max.connections.per.ip.overrides is set",
            )
        return self

    @property
    def inter_broker_listener(self) -> str:
        """Inter-broker listener name: inter.broker.listener.name, else the protocol's name."""
        return (self.inter_broker_listener_name or self.security_inter_broker_protocol).upper()

    @property
    def inter_broker_endpoint(self) -> Endpoint | None:
        """The advertised endpoint other brokers and the controller connect to."""
        wanted = self.inter_broker_listener
        return next((e for e in self.advertised_listeners if e.name == wanted), None)

    @property
    def log_retention_time_ms(self) -> int:
        """Retention in ms: log.retention.ms, else .minutes, else .hours; -1 = unlimited."""
        if self.log_retention_ms is not None:
            millis = self.log_retention_ms
        elif self.log_retention_minutes is not None:
            millis = self.log_retention_minutes * 60_000
        else:
            millis = self.log_retention_hours * 3_600_000
        return -1 if millis < 0 else millis

    @property
    def log_roll_time_ms(self) -> int:
        """Segment roll age in ms: log.roll.ms, else log.roll.hours."""
        if self.log_roll_ms is not None:
            return self.log_roll_ms
        return self.log_roll_hours * 3_600_000

    @property
    def log_roll_jitter_time_ms(self) -> int:
        """Segment roll jitter in ms: log.roll.jitter.ms, else log.roll.jitter.hours."""
        if self.log_roll_jitter_ms is not None:
            return self.log_roll_jitter_ms
        return self.log_roll_jitter_hours * 3_600_000

    @property
    def log_flush_time_ms(self) -> int:
        """Fsync age in ms: log.flush.interval.ms, else log.flush.scheduler.interval.ms."""
        if self.log_flush_interval_ms is not None:
            return self.log_flush_interval_ms
        return self.log_flush_scheduler_interval_ms

    @field_validator("compression_type")
    @classmethod
    def _compression_type(cls, value: str) -> str:
        """Kafka's BrokerCompressionType names."""
        if value not in COMPRESSION_TYPES:
            raise ValueError(f"{value!r} is not one of {', '.join(COMPRESSION_TYPES)}")
        return value

    @field_validator("log_message_timestamp_type")
    @classmethod
    def _timestamp_type(cls, value: str) -> str:
        """Kafka's TimestampType names."""
        if value not in TIMESTAMP_TYPES:
            raise ValueError(f"{value!r} is not CreateTime or LogAppendTime")
        return value

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> BrokerConfig:
        """Build a config from property name -> string value; unknown names go to :attr:`extra`.

        Raises:
            ConfigError: a value is missing, wrong or inconsistent; names the property.
        """
        known: dict[str, Any] = {k: v for k, v in properties.items() if k in _FIELD_OF}
        known["extra"] = {k: v for k, v in properties.items() if k not in _FIELD_OF}
        try:
            return cls.model_validate(known)
        except ValidationError as exc:
            error = exc.errors()[0]
            where = str(error["loc"][0]) if error["loc"] else None
            message = error["msg"].removeprefix("Value error, ")
            raise ConfigError(_ALIAS_OF.get(where or "", where), message) from None

    @classmethod
    def from_properties_file(
        cls, path: str | os.PathLike[str], env: Mapping[str, str] | None = None
    ) -> BrokerConfig:
        """Read a Java ``.properties`` file (ISO-8859-1, as Java does), then env overrides.

        An environment variable ``KAFKA_<NAME>``, NAME being the property name
        upper-cased with ``.`` and ``-`` replaced by ``_`` (``KAFKA_BROKER_ID``,
        ``KAFKA_ZOOKEEPER_CONNECT``), overrides the file for every known
        property and for unknown properties present in the file; other
        ``KAFKA_*`` variables (``KAFKA_HEAP_OPTS``...) are ignored.

        Args:
            path: the properties file.
            env: the environment; ``os.environ`` when None.

        Raises:
            ConfigError: the file cannot be read (property None) or a value is wrong.
        """
        environment = os.environ if env is None else env
        parsed = Properties()
        try:
            with Path(path).open("rb") as stream:
                parsed.load(stream, "iso-8859-1")
        except OSError as exc:
            raise ConfigError(None, f"cannot read {path}: {exc}") from exc
        properties: dict[str, str] = dict(parsed.properties)
        for name in set(_FIELD_OF) | set(properties):
            variable = "KAFKA_" + name.upper().replace(".", "_").replace("-", "_")
            if variable in environment:
                properties[name] = environment[variable]
        return cls.from_properties(properties)


_FIELD_OF: dict[str, str] = {
    f.alias: name for name, f in BrokerConfig.model_fields.items() if f.alias is not None
}
_ALIAS_OF: dict[str, str] = {name: alias for alias, name in _FIELD_OF.items()}
_NULL_DEFAULT = [a for a, n in _FIELD_OF.items() if BrokerConfig.model_fields[n].default is None]
