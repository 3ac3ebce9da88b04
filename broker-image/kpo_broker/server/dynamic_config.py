"""Per-topic configs: Kafka's topic-level overrides over the broker's defaults.

A topic's effective value is its override in ``/config/topics/<topic>`` if set, else
the broker default the topic config inherits from (e.g. ``retention.ms`` from
``log.retention.ms``), as Kafka's LogConfig does. Overrides are loaded at start and
re-read when a ``/config/changes`` notification names the topic.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kpo_broker.log.config import (
    COMPRESSION_TYPES,
    TIMESTAMP_TYPES,
    LogConfig,
    parse_cleanup_policy,
)
from kpo_broker.log.errors import InvalidLogConfigError

_log = logging.getLogger(__name__)
_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1
_BOUNDS = {"int": (_INT_MIN, _INT_MAX), "long": (_LONG_MIN, _LONG_MAX)}
_KAFKA_TYPE = {
    "int": "INT",
    "long": "LONG",
    "bool": "BOOLEAN",
    "str": "STRING",
    "list": "LIST",
    "double": "DOUBLE",
}


class InvalidTopicConfigError(ValueError):
    """An unknown topic config or a value Kafka's ``LogConfig`` refuses (INVALID_CONFIG, 40)."""


@dataclass(frozen=True)
class TopicConfigDef:
    """One topic-level config: its Kafka name, value type and where its default comes from.

    Attributes:
        name: Kafka topic config name, e.g. ``retention.ms``.
        kind: ``int`` (int32), ``long`` (int64), ``double``, ``bool``, ``str`` or ``list``,
            as Kafka's ``ConfigDef`` type of the config (for validation and DescribeConfigs'
            type).
        default: returns the effective broker-level default as a string, given the broker's
            effective config (static and dynamic, see ``DynamicBrokerConfig``).
        doc: what it means, with its unit.
        choices: the legal values of a ``str`` config; empty when any string is legal.
        minimum: smallest legal value of an ``int``/``long`` config (None: the type's).
        maximum: largest legal value of an ``int``/``long`` config (None: the type's).
        synonyms: broker configs it inherits its default from, in Kafka's precedence order
            (``ServerTopicConfigSynonyms``); the first is the dynamic broker config name.
        applied: False for configs this broker accepts and stores but has no behaviour for
            (listed in docs/reference/broker-configs.md).
        check: further check of the parsed value (a Kafka validator beyond a range); raises
            ``InvalidTopicConfigError``.
    """

    name: str
    kind: str
    default: Callable[[object], str]
    doc: str
    choices: tuple[str, ...] = ()
    minimum: int | None = None
    maximum: int | None = None
    synonyms: tuple[str, ...] = ()
    applied: bool = True
    check: Callable[[str, str], None] | None = None

    def parse(self, value: str) -> str:
        """Validate ``value`` as Kafka's ``ConfigDef`` does; return it in Kafka's form.

        Integers and booleans are trimmed (``" 10 "`` -> ``"10"``, ``"TRUE"`` -> ``"true"``).

        Raises:
            InvalidTopicConfigError: ``Invalid value <v> for configuration <name>: <why>``.
        """
        text = value.strip()
        if self.kind in _BOUNDS:
            try:
                number = int(text)
            except ValueError:
                raise self._invalid(
                    value, f"Not a number of type {_KAFKA_TYPE[self.kind]}"
                ) from None
            low, high = _BOUNDS[self.kind]
            if not low <= number <= high:
                raise self._invalid(value, f"Not a number of type {_KAFKA_TYPE[self.kind]}")
            if self.minimum is not None and number < self.minimum:
                raise self._invalid(value, f"Value must be at least {self.minimum}")
            if self.maximum is not None and number > self.maximum:
                raise self._invalid(value, f"Value must be no more than {self.maximum}")
            text = str(number)
        elif self.kind == "double":
            try:
                float(text)
            except ValueError:
                raise self._invalid(value, "Not a number of type DOUBLE") from None
        elif self.kind == "bool":
            if text.lower() not in ("true", "false"):
                raise self._invalid(value, "Expected value to be either true or false")
            text = text.lower()
        elif self.choices and value not in self.choices:
            raise self._invalid(value, f"String must be one of: {', '.join(self.choices)}")
        if self.check is not None:
            self.check(self.name, text)
        return text

    def _invalid(self, value: str, why: str) -> InvalidTopicConfigError:
        return InvalidTopicConfigError(
            f"Invalid value {value} for configuration {self.name}: {why}"
        )


def _attr(name: str) -> Callable[[object], str]:
    def read(config: object) -> str:
        value = getattr(config, name)
        if isinstance(value, bool):
            return "true" if value else "false"
        return str(value)

    return read


def _list_attr(name: str) -> Callable[[object], str]:
    def read(config: object) -> str:
        return ",".join(getattr(config, name))

    return read


def _const(value: str) -> Callable[[object], str]:
    return lambda _config: value


def _gzip_level(name: str, value: str) -> None:
    """Kafka's ``CompressionType.GZIP.levelValidator``: 1..9, or -1 for the library default."""
    if value != "-1" and not 1 <= int(value) <= 9:
        raise InvalidTopicConfigError(
            f"Invalid value {value} for configuration {name}: Value must be between 1 and 9, or -1"
        )


def _cleanup_policy(name: str, value: str) -> None:
    """Kafka's ``ValidList.in("compact", "delete")`` for the LIST ``cleanup.policy``."""
    items = [item.strip() for item in value.split(",")]
    if any(item not in ("compact", "delete") for item in items):
        raise InvalidTopicConfigError(
            f"Invalid value {value} for configuration {name}: "
            "String must be one of: compact, delete"
        )


def _tiered_storage_disabled(name: str, value: str) -> None:
    """Kafka refuses tiered storage on a broker without ``remote.log.storage.system.enable``."""
    if value == "true":
        raise InvalidTopicConfigError(
            "Tiered Storage functionality is disabled in the broker. "
            "Topic cannot be configured with remote log storage."
        )


def _not_in_zookeeper_mode(name: str, value: str) -> None:
    """Kafka 3.9's ``LogConfig.validateNoInvalidRemoteStorageConfigsInZK``."""
    if value == "true":
        raise InvalidTopicConfigError(
            "It is invalid to set `remote.log.delete.on.disable` or "
            "`remote.log.copy.disable` under Zookeeper's mode."
        )


_MESSAGE_FORMAT_VERSION = re.compile(
    r"^(0\.8\.[0-2]|0\.9\.0|0\.10\.[0-2]|0\.11\.0|1\.[01]|2\.[0-8]|3\.[0-9])(\.\d+)?(-IV\d+)?$"
)


def _message_format_version(name: str, value: str) -> None:
    """Kafka's ``MetadataVersionValidator``: a known version such as ``2.8`` or ``3.0-IV1``."""
    if not _MESSAGE_FORMAT_VERSION.match(value):
        raise InvalidTopicConfigError(
            f"Invalid value {value} for configuration {name}: not a known Kafka version"
        )


#: Topic configs this broker understands (every topic config of Kafka 3.9's ``LogConfig``),
#: with the broker settings they inherit from.
TOPIC_CONFIGS: dict[str, TopicConfigDef] = {
    d.name: d
    for d in (
        TopicConfigDef(
            "cleanup.policy",
            "list",
            _list_attr("log_cleanup_policy"),
            "delete (retention), compact (log cleaner) or compact,delete.",
            synonyms=("log.cleanup.policy",),
            check=_cleanup_policy,
        ),
        TopicConfigDef(
            "compression.type",
            "str",
            _attr("compression_type"),
            "Codec the leader stores batches with; 'producer' keeps the producer's.",
            COMPRESSION_TYPES,
            synonyms=("compression.type",),
        ),
        TopicConfigDef(
            "min.insync.replicas",
            "int",
            _attr("min_insync_replicas"),
            "Minimum ISR size for acks=all produce.",
            minimum=1,
            synonyms=("min.insync.replicas",),
        ),
        TopicConfigDef(
            "unclean.leader.election.enable",
            "bool",
            _attr("unclean_leader_election_enable"),
            "Elect a leader outside the ISR when no ISR member is alive.",
            synonyms=("unclean.leader.election.enable",),
        ),
        TopicConfigDef(
            "retention.ms",
            "long",
            _attr("log_retention_time_ms"),
            "Time retention, ms (-1: none).",
            minimum=-1,
            synonyms=("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
        ),
        TopicConfigDef(
            "retention.bytes",
            "long",
            _attr("log_retention_bytes"),
            "Size retention per partition, bytes (-1: none).",
            synonyms=("log.retention.bytes",),
        ),
        TopicConfigDef(
            "segment.bytes",
            "int",
            _attr("log_segment_bytes"),
            "Segment size, bytes.",
            minimum=14,
            synonyms=("log.segment.bytes",),
        ),
        TopicConfigDef(
            "segment.ms",
            "long",
            _attr("log_roll_time_ms"),
            "Segment roll time, ms.",
            minimum=1,
            synonyms=("log.roll.ms", "log.roll.hours"),
        ),
        TopicConfigDef(
            "index.interval.bytes",
            "int",
            _attr("log_index_interval_bytes"),
            "Bytes between offset index entries.",
            minimum=0,
            synonyms=("log.index.interval.bytes",),
        ),
        TopicConfigDef(
            "max.message.bytes",
            "int",
            _attr("message_max_bytes"),
            "Largest record batch accepted, bytes.",
            minimum=0,
            synonyms=("message.max.bytes",),
        ),
        TopicConfigDef(
            "message.timestamp.type",
            "str",
            _attr("log_message_timestamp_type"),
            "CreateTime keeps the producer's timestamps; LogAppendTime stamps the broker's.",
            TIMESTAMP_TYPES,
            synonyms=("log.message.timestamp.type",),
        ),
        TopicConfigDef(
            "leader.replication.throttled.replicas",
            "list",
            _const(""),
            "Replicas throttled on the leader side: '*' or partition:broker pairs (KIP-73).",
        ),
        TopicConfigDef(
            "follower.replication.throttled.replicas",
            "list",
            _const(""),
            "Replicas throttled on the follower side: '*' or partition:broker pairs (KIP-73).",
        ),
        TopicConfigDef(
            "compression.gzip.level",
            "int",
            _attr("compression_gzip_level"),
            "gzip level when the leader recompresses to gzip: 1..9, -1 the library default.",
            minimum=-1,
            maximum=9,
            synonyms=("compression.gzip.level",),
            check=_gzip_level,
        ),
        TopicConfigDef(
            "compression.lz4.level",
            "int",
            _attr("compression_lz4_level"),
            "lz4 level when the leader recompresses to lz4: 1..17.",
            minimum=1,
            maximum=17,
            synonyms=("compression.lz4.level",),
        ),
        TopicConfigDef(
            "compression.zstd.level",
            "int",
            _attr("compression_zstd_level"),
            "zstd level when the leader recompresses to zstd: -131072..22.",
            minimum=-131072,
            maximum=22,
            synonyms=("compression.zstd.level",),
        ),
        TopicConfigDef(
            "file.delete.delay.ms",
            "long",
            _attr("log_segment_delete_delay_ms"),
            "Wait before removing a deleted segment's files, ms.",
            minimum=0,
            synonyms=("log.segment.delete.delay.ms",),
        ),
        TopicConfigDef(
            "flush.messages",
            "long",
            _attr("log_flush_interval_messages"),
            "Fsync the log once this many records are unflushed.",
            minimum=1,
            synonyms=("log.flush.interval.messages",),
        ),
        TopicConfigDef(
            "flush.ms",
            "long",
            _attr("log_flush_time_ms"),
            "Fsync the log once its last fsync is this old, ms.",
            minimum=0,
            synonyms=("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
        ),
        TopicConfigDef(
            "segment.index.bytes",
            "int",
            _attr("log_index_size_max_bytes"),
            "Size of each offset and time index file, bytes.",
            minimum=4,
            synonyms=("log.index.size.max.bytes",),
        ),
        TopicConfigDef(
            "segment.jitter.ms",
            "long",
            _attr("log_roll_jitter_time_ms"),
            "Random shortening of segment.ms per segment, up to this many ms.",
            minimum=0,
            synonyms=("log.roll.jitter.ms", "log.roll.jitter.hours"),
        ),
        TopicConfigDef(
            "message.timestamp.difference.max.ms",
            "long",
            _attr("log_message_timestamp_difference_max_ms"),
            "Deprecated: the before/after bounds when those are not set, ms.",
            minimum=0,
            synonyms=("log.message.timestamp.difference.max.ms",),
        ),
        TopicConfigDef(
            "message.timestamp.before.max.ms",
            "long",
            _attr("log_message_timestamp_before_max_ms"),
            "Refuse CreateTime records older than the leader's clock by more, ms (KIP-937).",
            minimum=0,
            synonyms=("log.message.timestamp.before.max.ms",),
        ),
        TopicConfigDef(
            "message.timestamp.after.max.ms",
            "long",
            _attr("log_message_timestamp_after_max_ms"),
            "Refuse CreateTime records ahead of the leader's clock by more, ms (KIP-937).",
            minimum=0,
            synonyms=("log.message.timestamp.after.max.ms",),
        ),
        TopicConfigDef(
            "preallocate",
            "bool",
            _attr("log_preallocate"),
            "Preallocate segment files; no effect here (files grow as written).",
            synonyms=("log.preallocate",),
            applied=False,
        ),
        TopicConfigDef(
            "message.downconversion.enable",
            "bool",
            _attr("log_message_downconversion_enable"),
            "No effect here: Fetch below v4 is not served, so nothing is down-converted.",
            synonyms=("log.message.downconversion.enable",),
            applied=False,
        ),
        TopicConfigDef(
            "message.format.version",
            "str",
            _attr("log_message_format_version"),
            "Deprecated; ignored as by Kafka since inter-broker protocol 3.0 (always v2).",
            synonyms=("log.message.format.version",),
            applied=False,
            check=_message_format_version,
        ),
        TopicConfigDef(
            "local.retention.ms",
            "long",
            _attr("log_local_retention_ms"),
            "Tiered storage only; no effect without remote storage (-2: retention.ms).",
            minimum=-2,
            synonyms=("log.local.retention.ms",),
            applied=False,
        ),
        TopicConfigDef(
            "local.retention.bytes",
            "long",
            _attr("log_local_retention_bytes"),
            "Tiered storage only; no effect without remote storage (-2: retention.bytes).",
            minimum=-2,
            synonyms=("log.local.retention.bytes",),
            applied=False,
        ),
        TopicConfigDef(
            "remote.storage.enable",
            "bool",
            _const("false"),
            "Tiered storage: refused (true) as by a Kafka broker without tiered storage.",
            check=_tiered_storage_disabled,
        ),
        TopicConfigDef(
            "remote.log.copy.disable",
            "bool",
            _const("false"),
            "Tiered storage: refused (true) as by Kafka in ZooKeeper mode.",
            check=_not_in_zookeeper_mode,
        ),
        TopicConfigDef(
            "remote.log.delete.on.disable",
            "bool",
            _const("false"),
            "Tiered storage: refused (true) as by Kafka in ZooKeeper mode.",
            check=_not_in_zookeeper_mode,
        ),
        TopicConfigDef(
            "delete.retention.ms",
            "long",
            _attr("log_cleaner_delete_retention_ms"),
            "How long tombstones of a compacted topic are kept, ms.",
            minimum=0,
            synonyms=("log.cleaner.delete.retention.ms",),
        ),
        TopicConfigDef(
            "min.cleanable.dirty.ratio",
            "double",
            _attr("log_cleaner_min_cleanable_ratio"),
            "Dirty ratio above which the log cleaner compacts a log (0..1).",
            synonyms=("log.cleaner.min.cleanable.ratio",),
        ),
        TopicConfigDef(
            "min.compaction.lag.ms",
            "long",
            _attr("log_cleaner_min_compaction_lag_ms"),
            "Records stay uncompacted at least this long, ms.",
            minimum=0,
            synonyms=("log.cleaner.min.compaction.lag.ms",),
        ),
        TopicConfigDef(
            "max.compaction.lag.ms",
            "long",
            _attr("log_cleaner_max_compaction_lag_ms"),
            "Records are compacted at most this long after being written, ms.",
            minimum=1,
            synonyms=("log.cleaner.max.compaction.lag.ms",),
        ),
    )
}


def validate_topic_config(config: Mapping[str, str]) -> None:
    """Check names and values of topic config overrides as Kafka's ``LogConfig.validate``.

    Raises:
        InvalidTopicConfigError: ``Unknown topic config name: <name>``, or Kafka's
            ``Invalid value ... for configuration ...`` message.
    """
    for name, value in config.items():
        definition = TOPIC_CONFIGS.get(name)
        if definition is None:
            raise InvalidTopicConfigError(f"Unknown topic config name: {name}")
        definition.parse(value)
    compaction = {n: v for n, v in config.items() if n in _COMPACTION_CONFIGS}
    try:
        LogConfig.from_topic_config(compaction)  # cleanup.policy values, ranges, lag order
    except InvalidLogConfigError as exc:
        raise InvalidTopicConfigError(str(exc)) from None


_COMPACTION_CONFIGS = (
    "cleanup.policy",
    "delete.retention.ms",
    "min.cleanable.dirty.ratio",
    "min.compaction.lag.ms",
    "max.compaction.lag.ms",
)


class TopicConfigs:
    """Topic config overrides and effective values.

    Args:
        broker_config: the broker's effective config (supplies defaults): a
            ``BrokerConfig`` with the dynamic broker configs applied.
    """

    def __init__(self, broker_config: object) -> None:
        self.broker_config = broker_config
        self.overrides: dict[str, dict[str, str]] = {}
        self._listeners: list[Callable[[str, dict[str, str] | None], None]] = []

    def add_listener(self, listener: Callable[[str, dict[str, str] | None], None]) -> None:
        """Call ``listener(topic, overrides)`` after each change (overrides None: deleted).

        Used to re-parse derived settings once per change, e.g. the KIP-73 throttled
        replica lists.
        """
        self._listeners.append(listener)

    def set_overrides(self, topic: str, config: Mapping[str, str]) -> None:
        """Replace ``topic``'s overrides (from ``/config/topics/<topic>``)."""
        self.overrides[topic] = dict(config)
        for listener in self._listeners:
            listener(topic, self.overrides[topic])

    def knows(self, topic: str) -> bool:
        """Return whether ``topic``'s overrides have been loaded (possibly empty)."""
        return topic in self.overrides

    def remove(self, topic: str) -> None:
        """Forget a deleted topic."""
        self.overrides.pop(topic, None)
        for listener in self._listeners:
            listener(topic, None)

    def set_broker_config(self, broker_config: object) -> None:
        """Replace the broker-level defaults (a dynamic broker config changed, KIP-226).

        Every listener is called again for every known topic, so derived settings (each
        partition's ``LogConfig``) follow the new defaults.
        """
        self.broker_config = broker_config
        for topic, overrides in list(self.overrides.items()):
            for listener in self._listeners:
                listener(topic, overrides)

    def value(self, topic: str, name: str) -> str:
        """Return the effective value of config ``name`` for ``topic``, in Kafka's form.

        The topic's override if set and valid, else the broker default it inherits (an
        override that fails validation, written to ZooKeeper by hand, is logged and skipped
        as Kafka skips invalid dynamic configs).

        Raises:
            KeyError: ``name`` is not a topic config.
        """
        definition = TOPIC_CONFIGS[name]
        override = self.overrides.get(topic, {}).get(name)
        if override is not None:
            try:
                return definition.parse(override)
            except InvalidTopicConfigError as exc:
                _log.warning("topic %s: ignoring invalid override: %s", topic, exc)
        return definition.default(self.broker_config)

    def min_insync_replicas(self, topic: str) -> int:
        """``min.insync.replicas`` of ``topic``."""
        return int(self.value(topic, "min.insync.replicas"))

    def unclean_leader_election_enable(self, topic: str) -> bool:
        """``unclean.leader.election.enable`` of ``topic``."""
        return self.value(topic, "unclean.leader.election.enable") == "true"

    def default_log_config(self) -> LogConfig:
        """Return the LogConfig of a topic without overrides (the broker's log defaults)."""
        return self.log_config("")  # "" is no legal topic name, so it has no overrides

    def log_config(self, topic: str) -> LogConfig:
        """Return the LogConfig of ``topic``'s partitions.

        ``message.timestamp.before.max.ms`` / ``after.max.ms`` left at their default
        (Long.MAX) take ``message.timestamp.difference.max.ms``, as Kafka 3.9's LogConfig.
        """

        def number(name: str) -> int:
            return int(self.value(topic, name))

        difference = number("message.timestamp.difference.max.ms")
        before = number("message.timestamp.before.max.ms")
        after = number("message.timestamp.after.max.ms")
        return LogConfig(
            segment_bytes=number("segment.bytes"),
            segment_ms=number("segment.ms"),
            retention_ms=number("retention.ms"),
            retention_bytes=number("retention.bytes"),
            index_interval_bytes=number("index.interval.bytes"),
            segment_index_bytes=number("segment.index.bytes"),
            max_message_bytes=number("max.message.bytes"),
            file_delete_delay_ms=number("file.delete.delay.ms"),
            message_timestamp_type=self.value(topic, "message.timestamp.type"),
            segment_jitter_ms=number("segment.jitter.ms"),
            flush_messages=number("flush.messages"),
            flush_ms=number("flush.ms"),
            message_timestamp_before_max_ms=difference if before == _LONG_MAX else before,
            message_timestamp_after_max_ms=difference if after == _LONG_MAX else after,
            compression_type=self.value(topic, "compression.type"),
            compression_gzip_level=number("compression.gzip.level"),
            compression_lz4_level=number("compression.lz4.level"),
            compression_zstd_level=number("compression.zstd.level"),
            cleanup_policy=parse_cleanup_policy(self.value(topic, "cleanup.policy")),
            delete_retention_ms=number("delete.retention.ms"),
            min_cleanable_dirty_ratio=float(self.value(topic, "min.cleanable.dirty.ratio")),
            min_compaction_lag_ms=number("min.compaction.lag.ms"),
            max_compaction_lag_ms=number("max.compaction.lag.ms"),
        )
