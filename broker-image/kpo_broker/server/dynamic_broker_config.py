"""Dynamic broker configs (KIP-226): Kafka's ``DynamicBrokerConfig`` in ZooKeeper mode.

A broker config Kafka marks as dynamic can be set per broker (``/config/brokers/<id>``)
or as the cluster default (``/config/brokers/<default>``). Precedence, highest first:
per-broker dynamic, cluster-default dynamic, ``server.properties`` (static), Kafka's
default. The broker's *effective* config is its static ``BrokerConfig`` rebuilt with the
dynamic values of the properties it models, so every derived setting (retention from
``log.retention.ms``/``.minutes``/``.hours``, the log defaults of topics without
overrides, ...) follows a change as in Kafka, where ``KafkaConfig`` is rebuilt.

Which dynamic configs are accepted (:data:`DYNAMIC_BROKER_CONFIGS`):

* the broker default of every topic config (Kafka's ``DynamicLogConfig``: the first
  synonym of each topic config of ``ServerTopicConfigSynonyms`` but
  ``message.format.version``), validated as the topic config;
* the replication throttles of KIP-73 and ``replica.alter.log.dirs.io.max.bytes.per.second``;
* ``max.connections.per.ip`` and ``max.connections.per.ip.overrides``;
* the log cleaner's settings of Kafka's ``LogCleaner.ReconfigurableConfigs``
  (``log.cleaner.threads``, ``.dedupe.buffer.size``, ``.io.buffer.load.factor``,
  ``.io.buffer.size``, ``.io.max.bytes.per.second``, ``.backoff.ms``): applied to the running
  cleaner (new throttle rate, threads restarted), ``log.cleaner.threads`` only within half to
  double the current count as Kafka validates it;
* ``num.io.threads``, ``background.threads``, ``num.recovery.threads.per.data.dir``:
  validated as Kafka does (at least 1, at least half and at most double the current
  value) and documented as without effect (this broker has no such thread pools).

The other configs Kafka marks dynamic (listeners, SSL/SASL, ``metric.reporters``, remote
storage, ``max.connections``, ``num.replica.fetchers``, producer-state settings) are
refused with INVALID_CONFIG, as are static configs (Kafka's "Cannot update these configs
dynamically") and names Kafka does not know.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kpo_broker.config import BrokerConfig, ConfigError
from kpo_broker.protocol.endpoints import Endpoint
from kpo_broker.server.dynamic_config import TOPIC_CONFIGS, InvalidTopicConfigError, TopicConfigDef

_log = logging.getLogger(__name__)

# Kafka's DescribeConfigs config sources (ConfigSource ids).
SOURCE_TOPIC_CONFIG = 1
SOURCE_DYNAMIC_BROKER_CONFIG = 2
SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG = 3
SOURCE_STATIC_BROKER_CONFIG = 4
SOURCE_DEFAULT_CONFIG = 5

_LONG_MAX = 2**63 - 1


class InvalidBrokerConfigError(ValueError):
    """A dynamic broker config change Kafka would refuse (INVALID_CONFIG, 40)."""


@dataclass(frozen=True)
class BrokerConfigDef:
    """One dynamic broker config this broker accepts.

    Attributes:
        name: Kafka broker config name.
        kind: ``int``, ``long``, ``bool``, ``str`` or ``list`` (Kafka's ConfigDef type).
        default: Kafka's default as a string (None: null), for configs ``BrokerConfig``
            does not model.
        doc: what it means.
        applied: False when this broker accepts it but has no behaviour for it.
        parse: validates a value and returns it in Kafka's form; raises
            ``InvalidBrokerConfigError``.
    """

    name: str
    kind: str
    default: str | None
    doc: str
    applied: bool
    parse: Callable[[str], str]


def _from_topic(definition: TopicConfigDef) -> Callable[[str], str]:
    def parse(value: str) -> str:
        try:
            return definition.parse(value)
        except InvalidTopicConfigError as exc:
            raise InvalidBrokerConfigError(
                str(exc).replace(definition.name, definition.synonyms[0])
            ) from None

    return parse


def _number(name: str, minimum: int, maximum: int = _LONG_MAX) -> Callable[[str], str]:
    def parse(value: str) -> str:
        try:
            number = int(value.strip())
        except ValueError:
            raise InvalidBrokerConfigError(
                f"Invalid value {value} for configuration {name}: Not a number"
            ) from None
        if not minimum <= number <= maximum:
            raise InvalidBrokerConfigError(
                f"Invalid value {value} for configuration {name}: Value must be at least {minimum}"
            )
        return str(number)

    return parse


def _double(name: str, minimum: float) -> Callable[[str], str]:
    def parse(value: str) -> str:
        try:
            number = float(value.strip())
        except ValueError:
            raise InvalidBrokerConfigError(
                f"Invalid value {value} for configuration {name}: Not a number of type DOUBLE"
            ) from None
        if not number >= minimum:  # NaN too
            raise InvalidBrokerConfigError(
                f"Invalid value {value} for configuration {name}: Value must be at least {minimum}"
            )
        return value.strip()

    return parse


def _log_cleaner_configs() -> dict[str, BrokerConfigDef]:
    """Kafka's ``LogCleaner.ReconfigurableConfigs`` (but ``message.max.bytes``, a log default).

    A change restarts the cleaner threads with the new settings (``LogCleaner.reconfigure``).
    """
    defs = (
        ("log.cleaner.threads", "int", "Cleaner threads.", _number("log.cleaner.threads", 0)),
        (
            "log.cleaner.dedupe.buffer.size",
            "long",
            "Offset map memory of all cleaner threads, bytes.",
            _number("log.cleaner.dedupe.buffer.size", 0),
        ),
        (
            "log.cleaner.io.buffer.load.factor",
            "double",
            "Offset map fill before a cleaning pass ends.",
            _double("log.cleaner.io.buffer.load.factor", 0.0),
        ),
        (
            "log.cleaner.io.buffer.size",
            "int",
            "Cleaner read and write buffers of all threads, bytes.",
            _number("log.cleaner.io.buffer.size", 0, 2**31 - 1),
        ),
        (
            "log.cleaner.io.max.bytes.per.second",
            "double",
            "Cleaner read+write throttle, bytes/s.",
            _double("log.cleaner.io.max.bytes.per.second", 0.0),
        ),
        (
            "log.cleaner.backoff.ms",
            "long",
            "Sleep when no log needs cleaning, ms.",
            _number("log.cleaner.backoff.ms", 0),
        ),
    )
    return {
        name: BrokerConfigDef(name, kind, None, doc, True, parse) for name, kind, doc, parse in defs
    }


_HOST_COUNT = re.compile(r"^\s*(\S.*):\s*([0-9]+)\s*$")


def _connection_overrides(value: str) -> str:
    entries = [e for e in (part.strip() for part in value.split(",")) if e]
    for entry in entries:
        if not _HOST_COUNT.match(entry):
            raise InvalidBrokerConfigError(
                f"Invalid value {value} for configuration max.connections.per.ip.overrides: "
                f"{entry!r} is not host:count"
            )
    return ",".join(entries)


def _dynamic_log_configs() -> dict[str, BrokerConfigDef]:
    """Kafka's ``DynamicLogConfig.ReconfigurableConfigs``: topic configs' broker defaults."""
    defs = {}
    for topic_def in TOPIC_CONFIGS.values():
        if not topic_def.synonyms or topic_def.name == "message.format.version":
            continue
        name = topic_def.synonyms[0]
        defs[name] = BrokerConfigDef(
            name, topic_def.kind, None, topic_def.doc, topic_def.applied, _from_topic(topic_def)
        )
    return defs


#: Dynamic broker configs this broker accepts, by name.
DYNAMIC_BROKER_CONFIGS: dict[str, BrokerConfigDef] = {
    **_dynamic_log_configs(),
    **_log_cleaner_configs(),
    **{
        d.name: d
        for d in (
            BrokerConfigDef(
                "leader.replication.throttled.rate",
                "long",
                None,
                "Leader-side replication throttle, bytes/s (KIP-73).",
                True,
                _number("leader.replication.throttled.rate", 0),
            ),
            BrokerConfigDef(
                "follower.replication.throttled.rate",
                "long",
                None,
                "Follower-side replication throttle, bytes/s (KIP-73).",
                True,
                _number("follower.replication.throttled.rate", 0),
            ),
            BrokerConfigDef(
                "replica.alter.log.dirs.io.max.bytes.per.second",
                "long",
                str(_LONG_MAX),
                "Log-dir move copy rate, bytes/s (KIP-113).",
                True,
                _number("replica.alter.log.dirs.io.max.bytes.per.second", 0),
            ),
            BrokerConfigDef(
                "max.connections.per.ip",
                "int",
                None,
                "Open connections per client address.",
                True,
                _number("max.connections.per.ip", 0, 2**31 - 1),
            ),
            BrokerConfigDef(
                "max.connections.per.ip.overrides",
                "str",
                None,
                "Per host or address connection limits, host:count,...",
                True,
                _connection_overrides,
            ),
            BrokerConfigDef(
                "num.io.threads",
                "int",
                "8",
                "Request handler threads; no effect here (one asyncio loop).",
                False,
                _number("num.io.threads", 1, 2**31 - 1),
            ),
            BrokerConfigDef(
                "background.threads",
                "int",
                "10",
                "Background task threads; no effect here.",
                False,
                _number("background.threads", 1, 2**31 - 1),
            ),
            BrokerConfigDef(
                "num.recovery.threads.per.data.dir",
                "int",
                "1",
                "Log recovery threads per log dir; no effect here.",
                False,
                _number("num.recovery.threads.per.data.dir", 1, 2**31 - 1),
            ),
        )
    },
}

#: Thread-pool sizes Kafka lets change only within half to double the current value.
_THREAD_POOLS = ("num.io.threads", "background.threads", "num.recovery.threads.per.data.dir")

#: Configs Kafka 3.9 marks dynamic that this broker refuses (no such behaviour here).
_REFUSED_PREFIXES = ("ssl.", "sasl.", "listener.name.", "remote.log.", "log.cleaner.")
_REFUSED = frozenset(
    {
        "listeners",
        "advertised.listeners",
        "listener.security.protocol.map",
        "principal.builder.class",
        "connections.max.reauth.ms",
        "metric.reporters",
        "max.connections",
        "max.connection.creation.rate",
        "num.network.threads",
        "num.replica.fetchers",
        "producer.id.expiration.ms",
        "transaction.partition.verification.enable",
        "log.cleanup.policy",
    }
)


def broker_synonyms(name: str) -> list[str]:
    """Kafka's ``DynamicBrokerConfig.brokerConfigSynonyms``: names of one setting, by precedence.

    ``log.roll.ms``/``.hours``, ``log.roll.jitter.ms``/``.hours``,
    ``log.retention.ms``/``.minutes``/``.hours``, and ``log.flush.interval.ms`` with
    ``log.flush.scheduler.interval.ms``; any other name is its own only synonym.
    """
    for group in (
        ("log.roll.ms", "log.roll.hours"),
        ("log.roll.jitter.ms", "log.roll.jitter.hours"),
        ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    ):
        if name in group:
            return list(group)
    if name == "log.flush.interval.ms":
        return ["log.flush.interval.ms", "log.flush.scheduler.interval.ms"]
    return [name]


def format_value(value: Any) -> str | None:
    """Render a parsed ``BrokerConfig`` value in Kafka's form (``ConfigDef.convertToString``).

    Booleans ``true``/``false``; listeners ``NAME://host:port,...``; maps ``k:v,...``;
    lists comma-joined; None stays None (a null config).
    """
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Endpoint):
        host = f"[{value.host}]" if ":" in value.host else value.host
        return f"{value.name}://{host}:{value.port}"
    if isinstance(value, Mapping):
        return ",".join(f"{k}:{format_value(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ",".join(format_value(v) or "" for v in value)
    return str(value)


_FIELD_OF = {f.alias: n for n, f in BrokerConfig.model_fields.items() if f.alias is not None}


def _static_values(static: BrokerConfig) -> dict[str, Any]:
    """Explicitly set properties of ``static`` by Kafka name (parsed values)."""
    values = {
        alias: getattr(static, field)
        for alias, field in _FIELD_OF.items()
        if field in static.model_fields_set
    }
    values.update(static.extra)
    return values


def _default_values() -> dict[str, str]:
    """Kafka's non-null defaults by name (``staticDefaultConfigs``)."""
    defaults: dict[str, str] = {}
    for alias, field in _FIELD_OF.items():
        default = BrokerConfig.model_fields[field].default
        text = format_value(default) if default is not ... else None
        if text is not None:
            defaults[alias] = text
    for name, definition in DYNAMIC_BROKER_CONFIGS.items():
        if name not in defaults and definition.default is not None:
            defaults[name] = definition.default
    return defaults


_DEFAULTS = _default_values()


class DynamicBrokerConfig:
    """A broker's static config with its per-broker and cluster-default dynamic configs.

    Args:
        static: the broker's ``server.properties`` config.
        per_broker: ``/config/brokers/<id>``.
        cluster_default: ``/config/brokers/<default>``.

    Attributes:
        static: the static config.
        per_broker: the per-broker dynamic configs (valid ones only).
        cluster_default: the cluster-default dynamic configs (valid ones only).
        effective: ``static`` rebuilt with the dynamic values (what the broker applies).
    """

    def __init__(
        self,
        static: BrokerConfig,
        per_broker: Mapping[str, str] | None = None,
        cluster_default: Mapping[str, str] | None = None,
    ) -> None:
        self.static = static
        self._static_values = _static_values(static)
        self._static_text = {k: format_value(v) for k, v in self._static_values.items()}
        self.per_broker: dict[str, str] = {}
        self.cluster_default: dict[str, str] = {}
        self.effective = static
        self.update(per_broker or {}, cluster_default or {})

    def update(self, per_broker: Mapping[str, str], cluster_default: Mapping[str, str]) -> bool:
        """Take new dynamic configs (after a ``/config/changes`` notification).

        Invalid or unsupported entries (written to ZooKeeper by other means) are logged and
        skipped, as Kafka's ``removeInvalidConfigs`` does.

        Returns:
            True if the effective config changed.
        """
        self.per_broker = _valid_only(per_broker, "broker")
        self.cluster_default = _valid_only(cluster_default, "default cluster")
        try:
            effective = self._rebuild(self.per_broker, self.cluster_default)
        except (ConfigError, ValueError) as exc:
            _log.error("dynamic broker configs are inconsistent, keeping the previous: %s", exc)
            return False
        changed = effective != self.effective
        self.effective = effective
        return changed

    def _rebuild(self, per_broker: Mapping[str, str], default: Mapping[str, str]) -> BrokerConfig:
        values = dict(self._static_values)
        for name, value in {**default, **per_broker}.items():
            if name in _FIELD_OF:
                values[name] = value
        fields = {k: v for k, v in values.items() if k in _FIELD_OF}
        fields["extra"] = {k: v for k, v in values.items() if k not in _FIELD_OF}
        return BrokerConfig.model_validate(fields)

    def validate(self, new: Mapping[str, str], per_broker: bool) -> dict[str, str]:
        """Check a whole new set of dynamic configs for one entity, as Kafka's ``validate``.

        Args:
            new: the entity's configs after the change (name -> value).
            per_broker: True for ``/config/brokers/<id>``, False for ``<default>``.

        Returns:
            ``new`` with values in Kafka's form.

        Raises:
            InvalidBrokerConfigError: a static or unsupported config, a bad value, or a
                combination the broker cannot start with (e.g. ``max.connections.per.ip``
                0 without overrides).
        """
        refused = sorted(n for n in new if n not in DYNAMIC_BROKER_CONFIGS and _is_refused(n))
        if refused:
            raise InvalidBrokerConfigError(
                f"Cannot update these configs dynamically on this broker: {refused}"
            )
        static = sorted(n for n in new if n not in DYNAMIC_BROKER_CONFIGS and n in _FIELD_OF)
        if static:
            raise InvalidBrokerConfigError(f"Cannot update these configs dynamically: {static}")
        unknown = sorted(n for n in new if n not in DYNAMIC_BROKER_CONFIGS)
        if unknown:
            raise InvalidBrokerConfigError(f"Unknown broker config name: {unknown}")
        parsed = {name: DYNAMIC_BROKER_CONFIGS[name].parse(value) for name, value in new.items()}
        for name in _THREAD_POOLS:
            if name in parsed:
                self._check_thread_pool(name, int(parsed[name]))
        if "log.cleaner.threads" in parsed:
            self._check_cleaner_threads(int(parsed["log.cleaner.threads"]))
        per = parsed if per_broker else self.per_broker
        default = self.cluster_default if per_broker else parsed
        try:
            self._rebuild(per, default)
        except ConfigError as exc:
            raise InvalidBrokerConfigError(str(exc)) from None
        except ValueError as exc:
            raise InvalidBrokerConfigError(str(exc).splitlines()[0]) from None
        return parsed

    def _check_thread_pool(self, name: str, new: int) -> None:
        """Kafka's ``DynamicThreadPool.validateReconfiguration``."""
        current = int(self.value(name)[0] or "1")
        if new == current:
            return
        message = f"Dynamic thread count update validation failed for {name}={new}"
        if new < current / 2:
            raise InvalidBrokerConfigError(
                f"{message}, value should be at least half the current value {current}"
            )
        if new > current * 2:
            raise InvalidBrokerConfigError(
                f"{message}, value should not be greater than double the current value {current}"
            )

    def _check_cleaner_threads(self, new: int) -> None:
        """Kafka's ``LogCleaner.validateReconfiguration`` of ``log.cleaner.threads``."""
        current = self.effective.log_cleaner_threads
        if new < 1:
            raise InvalidBrokerConfigError("Log cleaner threads should be at least 1")
        if new < current / 2:
            raise InvalidBrokerConfigError(
                f"Log cleaner threads cannot be reduced to less than half the current value "
                f"{current}"
            )
        if new > current * 2:
            raise InvalidBrokerConfigError(
                f"Log cleaner threads cannot be increased to more than double the current value "
                f"{current}"
            )

    # ------------------------------------------------------------ describe

    def names(self) -> list[str]:
        """Every broker config this broker describes, sorted."""
        return sorted(set(_FIELD_OF) | set(DYNAMIC_BROKER_CONFIGS))

    def value(self, name: str) -> tuple[str | None, int]:
        """Return config ``name``'s own value and source, by Kafka's precedence."""
        synonyms = self.synonyms(name, per_broker=True)
        if synonyms:
            return synonyms[0][1], synonyms[0][2]
        return None, SOURCE_DEFAULT_CONFIG

    def synonyms(self, name: str, per_broker: bool) -> list[tuple[str, str | None, int]]:
        """Kafka's ``ConfigHelper.configSynonyms`` for a broker config: (name, value, source).

        Grouped by source (per-broker dynamic, default dynamic, static, Kafka default),
        each group in synonym order, leading synonyms other than ``name`` dropped. For the
        cluster-default entity (``per_broker`` False) only the dynamic default is listed.
        """
        names = broker_synonyms(name)
        found: list[tuple[str, str | None, int]] = []
        for source, values in (
            (SOURCE_DYNAMIC_BROKER_CONFIG, self.per_broker),
            (SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG, self.cluster_default),
            (SOURCE_STATIC_BROKER_CONFIG, self._static_text),
            (SOURCE_DEFAULT_CONFIG, _DEFAULTS),
        ):
            for synonym in names:
                if synonym in values:
                    found.append((synonym, values[synonym], source))
        while found and found[0][0] != name:
            found.pop(0)
        if not per_broker:
            found = [s for s in found if s[2] == SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG]
        return found

    def topic_synonyms(self, topic_config: str) -> list[tuple[str, str | None, int]]:
        """Return the broker synonyms of a topic config (its server default), as Kafka does."""
        definition = TOPIC_CONFIGS.get(topic_config)
        if definition is None or not definition.synonyms:
            return []
        return self.synonyms(definition.synonyms[0], per_broker=True)


def _is_refused(name: str) -> bool:
    return name in _REFUSED or name.startswith(_REFUSED_PREFIXES)


def _valid_only(config: Mapping[str, str], where: str) -> dict[str, str]:
    valid: dict[str, str] = {}
    for name, value in config.items():
        definition = DYNAMIC_BROKER_CONFIGS.get(name)
        if definition is None:
            _log.error("dynamic %s config %s is not supported here; ignored", where, name)
            continue
        try:
            valid[name] = definition.parse(value)
        except InvalidBrokerConfigError as exc:
            _log.error("dynamic %s config ignored: %s", where, exc)
    return valid
