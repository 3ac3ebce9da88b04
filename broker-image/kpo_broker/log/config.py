"""Per-log configuration with Kafka's names and defaults (Kafka's ``LogConfig``).

Only the settings the storage layer acts on are modelled; other topic configs
(throttled replicas, ...) are ignored here and handled elsewhere. The compaction settings
(``cleanup.policy``, ``delete.retention.ms``, ``min.cleanable.dirty.ratio``,
``min.compaction.lag.ms``, ``max.compaction.lag.ms``) are read by the log cleaner
(``cleaner.py``, ``cleaner_manager.py``) and by retention (``delete`` in the policy).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kpo_broker.log.errors import InvalidLogConfigError

# topic config name -> (LogConfig field, smallest legal value), per Kafka's TopicConfig.
_TOPIC_CONFIG_FIELDS: dict[str, tuple[str, int]] = {
    "segment.bytes": ("segment_bytes", 14),
    "segment.ms": ("segment_ms", 1),
    "retention.ms": ("retention_ms", -1),
    "retention.bytes": ("retention_bytes", -(2**63)),
    "index.interval.bytes": ("index_interval_bytes", 0),
    "segment.index.bytes": ("segment_index_bytes", 4),
    "max.message.bytes": ("max_message_bytes", 0),
    "file.delete.delay.ms": ("file_delete_delay_ms", 0),
    "segment.jitter.ms": ("segment_jitter_ms", 0),
    "flush.messages": ("flush_messages", 1),
    "flush.ms": ("flush_ms", 0),
    "message.timestamp.before.max.ms": ("message_timestamp_before_max_ms", 0),
    "message.timestamp.after.max.ms": ("message_timestamp_after_max_ms", 0),
    "compression.gzip.level": ("compression_gzip_level", -1),
    "compression.lz4.level": ("compression_lz4_level", 1),
    "compression.zstd.level": ("compression_zstd_level", -131072),
}

# broker config name -> (LogConfig field, multiplier to the field's unit); earlier names in
# each field's group win, as log.roll.ms beats log.roll.hours in Kafka's KafkaConfig.
_BROKER_CONFIG_FIELDS: tuple[tuple[str, str, int], ...] = (
    ("log.segment.bytes", "segment_bytes", 1),
    ("log.roll.ms", "segment_ms", 1),
    ("log.roll.hours", "segment_ms", 3_600_000),
    ("log.retention.ms", "retention_ms", 1),
    ("log.retention.minutes", "retention_ms", 60_000),
    ("log.retention.hours", "retention_ms", 3_600_000),
    ("log.retention.bytes", "retention_bytes", 1),
    ("log.index.interval.bytes", "index_interval_bytes", 1),
    ("log.index.size.max.bytes", "segment_index_bytes", 1),
    ("message.max.bytes", "max_message_bytes", 1),
    ("log.segment.delete.delay.ms", "file_delete_delay_ms", 1),
)

# Compaction settings (Kafka's TopicConfig / CleanerConfig): topic name -> (field, minimum).
_COMPACTION_INT_FIELDS: dict[str, tuple[str, int]] = {
    "delete.retention.ms": ("delete_retention_ms", 0),
    "min.compaction.lag.ms": ("min_compaction_lag_ms", 0),
    "max.compaction.lag.ms": ("max_compaction_lag_ms", 1),
}
_CLEANUP_POLICY_CONFIG = "cleanup.policy"
_DIRTY_RATIO_CONFIG = "min.cleanable.dirty.ratio"
# broker config name -> LogConfig field of the compaction settings (Kafka's KafkaConfig).
_BROKER_COMPACTION_FIELDS: dict[str, str] = {
    "log.cleaner.delete.retention.ms": "delete_retention_ms",
    "log.cleaner.min.compaction.lag.ms": "min_compaction_lag_ms",
    "log.cleaner.max.compaction.lag.ms": "max_compaction_lag_ms",
}

#: ``cleanup.policy`` values (Kafka's ``TopicConfig.CLEANUP_POLICY_*``).
COMPACT = "compact"
DELETE = "delete"
CLEANUP_POLICIES = (COMPACT, DELETE)

_MINIMUMS = {field: minimum for field, minimum in _TOPIC_CONFIG_FIELDS.values()}
_MINIMUMS.update({field: minimum for field, minimum in _COMPACTION_INT_FIELDS.values()})

#: ``message.timestamp.type`` values (Kafka's ``TimestampType`` names).
CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"
TIMESTAMP_TYPES = (CREATE_TIME, LOG_APPEND_TIME)
_TIMESTAMP_TYPE_CONFIG = "message.timestamp.type"

#: ``compression.type`` values (Kafka's ``BrokerCompressionType``): ``producer`` keeps each
#: batch's codec, the others are the codec the leader stores batches with.
PRODUCER_COMPRESSION = "producer"
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", PRODUCER_COMPRESSION)
_COMPRESSION_TYPE_CONFIG = "compression.type"
#: Largest legal compression level per level field (Kafka's ``CompressionType`` validators);
#: gzip also takes -1 (the library default) but nothing between -1 and 1.
_MAXIMUMS = {"compression_gzip_level": 9, "compression_lz4_level": 17, "compression_zstd_level": 22}
_LONG_MAX = 2**63 - 1


@dataclass(frozen=True)
class LogConfig:
    """Storage settings of one log; field names follow Kafka's topic config names.

    Attributes:
        segment_bytes: roll a segment at this size in bytes (``segment.bytes`` /
            ``log.segment.bytes``, default 1 GiB).
        segment_ms: roll a non-empty segment this many ms after its first batch's
            timestamp (``segment.ms`` / ``log.roll.ms``, default 7 days).
        retention_ms: delete segments whose largest timestamp is older than this, in ms;
            -1 keeps them forever (``retention.ms`` / ``log.retention.ms``, default 7 days).
        retention_bytes: delete oldest segments while the log exceeds this size in bytes;
            -1 means no limit (``retention.bytes`` / ``log.retention.bytes``).
        index_interval_bytes: add an offset/time index entry every this many log bytes
            (``index.interval.bytes``, default 4096).
        segment_index_bytes: maximum size in bytes of each index file; a full index
            rolls the segment (``segment.index.bytes`` / ``log.index.size.max.bytes``).
        max_message_bytes: largest accepted record batch in bytes (``max.message.bytes``
            / ``message.max.bytes``, default 1048588).
        file_delete_delay_ms: wait this long in ms before removing a deleted segment's
            files (``file.delete.delay.ms`` / ``log.segment.delete.delay.ms``).
        message_timestamp_type: ``CreateTime`` keeps the producer's record timestamps;
            ``LogAppendTime`` stamps each batch with the leader's clock at append
            (``message.timestamp.type``, KIP-32).
        segment_jitter_ms: each new segment rolls up to this many ms (a random amount,
            fixed per segment) before ``segment_ms`` (``segment.jitter.ms``, default 0).
        flush_messages: fsync the log once this many records are unflushed
            (``flush.messages``, default Long.MAX: leave it to the OS).
        flush_ms: fsync the log once its last flush is this many ms old (``flush.ms``,
            default Long.MAX), checked every ``log.flush.scheduler.interval.ms``.
        message_timestamp_before_max_ms: refuse CreateTime records older than this many ms
            before the leader's clock (``message.timestamp.before.max.ms``, KIP-937).
        message_timestamp_after_max_ms: refuse CreateTime records more than this many ms
            ahead of the leader's clock (``message.timestamp.after.max.ms``, KIP-937).
        compression_type: codec the leader stores producer batches with; ``producer``
            keeps each batch's own (``compression.type``, Kafka's LogValidator).
        compression_gzip_level: gzip level when recompressing, 1..9 or -1 (library default).
        compression_lz4_level: lz4 level when recompressing, 1..17 (default 9).
        compression_zstd_level: zstd level when recompressing, -131072..22 (default 3).
        cleanup_policy: ``("delete",)``, ``("compact",)`` or both (``cleanup.policy`` /
            ``log.cleanup.policy``): ``delete`` applies retention, ``compact`` the cleaner.
        delete_retention_ms: how long in ms tombstones stay after the cleaning that first
            kept them (``delete.retention.ms`` / ``log.cleaner.delete.retention.ms``, 1 day).
        min_cleanable_dirty_ratio: dirty bytes / total bytes above which a log is cleaned
            (``min.cleanable.dirty.ratio`` / ``log.cleaner.min.cleanable.ratio``, 0.5).
        min_compaction_lag_ms: a segment is cleaned only once its largest timestamp is this
            many ms old (``min.compaction.lag.ms`` / ``log.cleaner.min.compaction.lag.ms``).
        max_compaction_lag_ms: a log whose oldest dirty segment started this many ms ago is
            cleaned whatever its dirty ratio (``max.compaction.lag.ms`` /
            ``log.cleaner.max.compaction.lag.ms``, Long.MAX).

    Raises:
        InvalidLogConfigError: a value is below Kafka's minimum for that config,
            ``message_timestamp_type`` is neither ``CreateTime`` nor ``LogAppendTime``,
            ``cleanup_policy`` is empty or names another policy, the dirty ratio is
            outside [0, 1], or ``min_compaction_lag_ms > max_compaction_lag_ms``.
    """

    segment_bytes: int = 1_073_741_824
    segment_ms: int = 604_800_000
    retention_ms: int = 604_800_000
    retention_bytes: int = -1
    index_interval_bytes: int = 4096
    segment_index_bytes: int = 10_485_760
    max_message_bytes: int = 1_048_588
    file_delete_delay_ms: int = 60_000
    message_timestamp_type: str = CREATE_TIME
    segment_jitter_ms: int = 0
    flush_messages: int = _LONG_MAX
    flush_ms: int = _LONG_MAX
    message_timestamp_before_max_ms: int = _LONG_MAX
    message_timestamp_after_max_ms: int = _LONG_MAX
    compression_type: str = PRODUCER_COMPRESSION
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_zstd_level: int = 3
    cleanup_policy: tuple[str, ...] = (DELETE,)
    delete_retention_ms: int = 86_400_000
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = 2**63 - 1

    @property
    def compact(self) -> bool:
        """True if ``cleanup.policy`` includes ``compact`` (the log cleaner runs on it)."""
        return COMPACT in self.cleanup_policy

    @property
    def delete(self) -> bool:
        """True if ``cleanup.policy`` includes ``delete`` (time and size retention apply)."""
        return DELETE in self.cleanup_policy

    def __post_init__(self) -> None:
        if self.compression_type not in COMPRESSION_TYPES:
            raise InvalidLogConfigError(
                f"{_COMPRESSION_TYPE_CONFIG}={self.compression_type!r} is not one of "
                f"{', '.join(COMPRESSION_TYPES)}"
            )
        for field_name, maximum in _MAXIMUMS.items():
            level = getattr(self, field_name)
            if isinstance(level, int) and level > maximum:
                raise InvalidLogConfigError(f"{field_name}={level} is above the maximum {maximum}")
        if self.compression_gzip_level == 0:
            raise InvalidLogConfigError("compression_gzip_level must be -1 or 1..9, got 0")
        if self.message_timestamp_type not in TIMESTAMP_TYPES:
            raise InvalidLogConfigError(
                f"{_TIMESTAMP_TYPE_CONFIG}={self.message_timestamp_type!r} is not one of "
                f"{', '.join(TIMESTAMP_TYPES)}"
            )
        for field in dataclasses.fields(self):
            if field.name not in _MINIMUMS:
                continue
            value = getattr(self, field.name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise InvalidLogConfigError(f"{field.name} must be an int, got {value!r}")
            if value < _MINIMUMS[field.name]:
                raise InvalidLogConfigError(
                    f"{field.name}={value} is below the minimum {_MINIMUMS[field.name]}"
                )
        self._check_compaction()

    def _check_compaction(self) -> None:
        """Kafka's validators of ``cleanup.policy`` and the compaction settings."""
        if not self.cleanup_policy or any(p not in CLEANUP_POLICIES for p in self.cleanup_policy):
            raise InvalidLogConfigError(
                f"{_CLEANUP_POLICY_CONFIG}={','.join(self.cleanup_policy)!r}: each value must be "
                f"one of {', '.join(CLEANUP_POLICIES)}"
            )
        ratio = self.min_cleanable_dirty_ratio
        if isinstance(ratio, bool) or not isinstance(ratio, int | float) or not 0 <= ratio <= 1:
            raise InvalidLogConfigError(f"{_DIRTY_RATIO_CONFIG}={ratio!r} is not in [0, 1]")
        if self.min_compaction_lag_ms > self.max_compaction_lag_ms:
            raise InvalidLogConfigError(
                f"conflict topic config setting min.compaction.lag.ms "
                f"({self.min_compaction_lag_ms}) > max.compaction.lag.ms "
                f"({self.max_compaction_lag_ms})"
            )

    @classmethod
    def from_topic_config(
        cls, overrides: Mapping[str, str], defaults: LogConfig | None = None
    ) -> LogConfig:
        """Apply topic-level overrides (``/config/topics/<topic>`` in ZooKeeper) to defaults.

        Args:
            overrides: Kafka topic config names to string values, e.g.
                ``{"segment.bytes": "1048576", "retention.ms": "-1"}``; names this layer
                does not use are ignored.
            defaults: the broker-level config the overrides apply to (Kafka defaults if None).

        Raises:
            InvalidLogConfigError: a value is not an integer or is out of range, or the
                timestamp type is unknown.
        """
        changes: dict[str, Any] = {}
        for name, (field, _minimum) in _TOPIC_CONFIG_FIELDS.items():
            if name in overrides:
                changes[field] = _parse_int(name, overrides[name])
        if _TIMESTAMP_TYPE_CONFIG in overrides:
            changes["message_timestamp_type"] = overrides[_TIMESTAMP_TYPE_CONFIG].strip()
        if _COMPRESSION_TYPE_CONFIG in overrides:
            changes["compression_type"] = overrides[_COMPRESSION_TYPE_CONFIG].strip()
        changes.update(_compaction_changes(overrides, _COMPACTION_INT_FIELDS))
        if _CLEANUP_POLICY_CONFIG in overrides:
            changes["cleanup_policy"] = parse_cleanup_policy(overrides[_CLEANUP_POLICY_CONFIG])
        if _DIRTY_RATIO_CONFIG in overrides:
            changes["min_cleanable_dirty_ratio"] = _parse_float(
                _DIRTY_RATIO_CONFIG, overrides[_DIRTY_RATIO_CONFIG]
            )
        return dataclasses.replace(defaults or cls(), **changes)

    @classmethod
    def from_broker_config(cls, props: Mapping[str, str]) -> LogConfig:
        """Build the broker-wide default from ``server.properties`` style names.

        Reads ``log.segment.bytes``, ``log.roll.ms``/``log.roll.hours``,
        ``log.retention.ms``/``.minutes``/``.hours``, ``log.retention.bytes``,
        ``log.index.interval.bytes``, ``log.index.size.max.bytes``, ``message.max.bytes``
        and ``log.segment.delete.delay.ms``; the finer unit wins when several are set.

        Raises:
            InvalidLogConfigError: a value is not an integer or is out of range.
        """
        changes: dict[str, Any] = {}
        for name, field, multiplier in _BROKER_CONFIG_FIELDS:
            if name in props and field not in changes:
                value = _parse_int(name, props[name])
                changes[field] = value * multiplier if value >= 0 else value
        changes.update(
            _compaction_changes(
                props, {name: (field, 0) for name, field in _BROKER_COMPACTION_FIELDS.items()}
            )
        )
        if "log.cleanup.policy" in props:
            changes["cleanup_policy"] = parse_cleanup_policy(props["log.cleanup.policy"])
        if "log.cleaner.min.cleanable.ratio" in props:
            changes["min_cleanable_dirty_ratio"] = _parse_float(
                "log.cleaner.min.cleanable.ratio", props["log.cleaner.min.cleanable.ratio"]
            )
        return cls(**changes)

    def to_topic_config(self) -> dict[str, str]:
        """Return this config under Kafka's topic config names, values as strings."""
        config = {
            name: str(getattr(self, field)) for name, (field, _m) in _TOPIC_CONFIG_FIELDS.items()
        }
        config[_TIMESTAMP_TYPE_CONFIG] = self.message_timestamp_type
        config[_COMPRESSION_TYPE_CONFIG] = self.compression_type
        config[_CLEANUP_POLICY_CONFIG] = ",".join(self.cleanup_policy)
        config[_DIRTY_RATIO_CONFIG] = str(self.min_cleanable_dirty_ratio)
        for name, (field, _minimum) in _COMPACTION_INT_FIELDS.items():
            config[name] = str(getattr(self, field))
        return config


def _parse_int(name: str, value: str) -> int:
    try:
        return int(value.strip())
    except ValueError as exc:
        raise InvalidLogConfigError(f"{name}={value!r} is not an integer") from exc


def _parse_float(name: str, value: str) -> float:
    try:
        return float(value.strip())
    except ValueError as exc:
        raise InvalidLogConfigError(f"{name}={value!r} is not a number") from exc


def _compaction_changes(
    props: Mapping[str, str], fields: Mapping[str, tuple[str, int]]
) -> dict[str, Any]:
    return {
        field: _parse_int(name, props[name])
        for name, (field, _m) in fields.items()
        if name in props
    }


def parse_cleanup_policy(value: str) -> tuple[str, ...]:
    """Parse a ``cleanup.policy`` list (``"compact,delete"``): trimmed, lower-cased, unique.

    Kafka's ``ValidList.in("compact", "delete")``; the order written is kept.

    Raises:
        InvalidLogConfigError: empty, or a value other than ``compact`` and ``delete``.
    """
    policies: list[str] = []
    for part in value.split(","):
        policy = part.strip().lower()
        if policy and policy not in policies:
            policies.append(policy)
    if not policies or any(policy not in CLEANUP_POLICIES for policy in policies):
        raise InvalidLogConfigError(
            f"{_CLEANUP_POLICY_CONFIG}={value!r}: each value must be one of "
            f"{', '.join(CLEANUP_POLICIES)}"
        )
    return tuple(policies)
