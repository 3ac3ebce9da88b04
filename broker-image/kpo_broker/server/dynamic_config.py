"""Per-topic configs: Kafka's topic-level overrides over the broker's defaults.

A topic's effective value is its override in ``/config/topics/<topic>`` if set, else
the broker default the topic config inherits from (e.g. ``retention.ms`` from
``log.retention.ms``), as Kafka's LogConfig does. Overrides are loaded at start and
re-read when a ``/config/changes`` notification names the topic.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kpo_broker.log.config import CREATE_TIME, TIMESTAMP_TYPES, LogConfig, parse_cleanup_policy
from kpo_broker.log.errors import InvalidLogConfigError


@dataclass(frozen=True)
class TopicConfigDef:
    """One topic-level config: its Kafka name, value type and where its default comes from.

    Attributes:
        name: Kafka topic config name, e.g. ``retention.ms``.
        kind: ``int``, ``bool``, ``str`` or ``list`` (for validation).
        default: returns the broker-level default as a string.
        doc: what it means, with its unit.
        choices: the legal values of a ``str`` config; empty when any string is legal.
    """

    name: str
    kind: str
    default: Callable[[object], str]
    doc: str
    choices: tuple[str, ...] = ()


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


#: Topic configs this broker understands, with the broker setting they inherit from.
TOPIC_CONFIGS: dict[str, TopicConfigDef] = {
    d.name: d
    for d in (
        TopicConfigDef(
            "cleanup.policy",
            "list",
            _list_attr("log_cleanup_policy"),
            "delete (retention), compact (log cleaner) or compact,delete.",
        ),
        TopicConfigDef("compression.type", "str", _const("producer"), "Batches are kept as sent."),
        TopicConfigDef(
            "min.insync.replicas",
            "int",
            _attr("min_insync_replicas"),
            "Minimum ISR size for acks=all produce.",
        ),
        TopicConfigDef(
            "unclean.leader.election.enable",
            "bool",
            _attr("unclean_leader_election_enable"),
            "Elect a leader outside the ISR when no ISR member is alive.",
        ),
        TopicConfigDef(
            "retention.ms", "int", _attr("log_retention_time_ms"), "Time retention, ms."
        ),
        TopicConfigDef(
            "retention.bytes",
            "int",
            _attr("log_retention_bytes"),
            "Size retention per partition, bytes (-1: none).",
        ),
        TopicConfigDef("segment.bytes", "int", _attr("log_segment_bytes"), "Segment size, bytes."),
        TopicConfigDef("segment.ms", "int", _attr("log_roll_time_ms"), "Segment roll time, ms."),
        TopicConfigDef(
            "index.interval.bytes",
            "int",
            _attr("log_index_interval_bytes"),
            "Bytes between offset index entries.",
        ),
        TopicConfigDef(
            "max.message.bytes",
            "int",
            _attr("message_max_bytes"),
            "Largest record batch accepted, bytes.",
        ),
        TopicConfigDef(
            "message.timestamp.type",
            "str",
            _const(CREATE_TIME),
            "CreateTime keeps the producer's timestamps; LogAppendTime stamps the broker's.",
            TIMESTAMP_TYPES,
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
            "delete.retention.ms",
            "int",
            _attr("log_cleaner_delete_retention_ms"),
            "How long tombstones of a compacted topic are kept, ms.",
        ),
        TopicConfigDef(
            "min.cleanable.dirty.ratio",
            "double",
            _attr("log_cleaner_min_cleanable_ratio"),
            "Dirty ratio above which the log cleaner compacts a log.",
        ),
        TopicConfigDef(
            "min.compaction.lag.ms",
            "int",
            _attr("log_cleaner_min_compaction_lag_ms"),
            "Records stay uncompacted at least this long, ms.",
        ),
        TopicConfigDef(
            "max.compaction.lag.ms",
            "int",
            _attr("log_cleaner_max_compaction_lag_ms"),
            "Records are compacted at most this long after being written, ms.",
        ),
    )
}


class InvalidTopicConfigError(ValueError):
    """An unknown topic config or a value of the wrong type (Kafka INVALID_CONFIG, 40)."""


def validate_topic_config(config: Mapping[str, str]) -> None:
    """Check names and value types of topic config overrides.

    Raises:
        InvalidTopicConfigError: naming the offending config.
    """
    for name, value in config.items():
        definition = TOPIC_CONFIGS.get(name)
        if definition is None:
            raise InvalidTopicConfigError(f"unknown topic config {name}")
        if definition.kind == "int":
            try:
                int(value)
            except ValueError:
                raise InvalidTopicConfigError(f"{name} must be an integer, got {value!r}") from None
        elif definition.kind == "double":
            try:
                float(value)
            except ValueError:
                raise InvalidTopicConfigError(f"{name} must be a number, got {value!r}") from None
        elif definition.kind == "bool" and value.lower() not in ("true", "false"):
            raise InvalidTopicConfigError(f"{name} must be true or false, got {value!r}")
        elif definition.choices and value not in definition.choices:
            raise InvalidTopicConfigError(
                f"{name} must be one of {', '.join(definition.choices)}, got {value!r}"
            )
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
        broker_config: the broker's static config (supplies defaults).
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

    def value(self, topic: str, name: str) -> str:
        """Return the effective value of config ``name`` for ``topic``.

        Raises:
            KeyError: ``name`` is not a topic config.
        """
        override = self.overrides.get(topic, {}).get(name)
        if override is not None:
            return override
        return TOPIC_CONFIGS[name].default(self.broker_config)

    def min_insync_replicas(self, topic: str) -> int:
        """``min.insync.replicas`` of ``topic``."""
        return int(self.value(topic, "min.insync.replicas"))

    def log_config(self, topic: str) -> LogConfig:
        """Return the LogConfig of ``topic``'s partitions."""
        return LogConfig(
            segment_bytes=int(self.value(topic, "segment.bytes")),
            segment_ms=int(self.value(topic, "segment.ms")),
            retention_ms=int(self.value(topic, "retention.ms")),
            retention_bytes=int(self.value(topic, "retention.bytes")),
            index_interval_bytes=int(self.value(topic, "index.interval.bytes")),
            max_message_bytes=int(self.value(topic, "max.message.bytes")),
            message_timestamp_type=self.value(topic, "message.timestamp.type"),
            cleanup_policy=parse_cleanup_policy(self.value(topic, "cleanup.policy")),
            delete_retention_ms=int(self.value(topic, "delete.retention.ms")),
            min_cleanable_dirty_ratio=float(self.value(topic, "min.cleanable.dirty.ratio")),
            min_compaction_lag_ms=int(self.value(topic, "min.compaction.lag.ms")),
            max_compaction_lag_ms=int(self.value(topic, "max.compaction.lag.ms")),
        )
