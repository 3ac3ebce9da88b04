"""The one writer of ``cordoned.log.dirs`` (KIP-1066) in a cluster (I/O edge).

Every PartitionReassignment that drains brokers records them in ``status.cordon``
(``drainedBrokers``) when it accepts a generation. :meth:`CordonWriter.sync` recomputes
the brokers to cordon from every Moving reassignment of the cluster (a caller's
``overrides`` replace, or with ``None`` drop, the object it is changing right now), so
several objects draining one broker share one cordon, released when the last lets go.

A sync, under one lock:

1. DescribeCluster (live brokers, cluster id) and the ownership ledger
   (:class:`~kpo_operator.cordons.CordonLedger`, a ConfigMap key beside the throttle
   ledger's);
2. for a wanted broker not yet owned, whether it knows the config: its ApiVersions
   answer has DescribeLogDirs v5 (Kafka 4.3+; remembered for ten minutes). Kafka 3.9,
   ZooKeeper mode and this project's brokers do not: such a broker is left as it is and
   reported ``unsupported`` (the move goes on without a cordon);
3. DescribeConfigs of ``cordoned.log.dirs`` on the brokers involved,
   :func:`~kpo_operator.cordons.plan_cordons`, the ledger saved ahead of
   IncrementalAlterConfigs (KIP-339), then the settled ledger. A cordon refused with
   INVALID_CONFIG (e.g. the controller's ``metadata.version`` is older than 4.3-IV0) is
   reported ``unsupported`` with Kafka's message, and not tried again for ten minutes.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from kpo_kafka.admin import KafkaAdmin
from kpo_kafka.admin_types import (
    API_KEY_DESCRIBE_LOG_DIRS,
    ERROR_INVALID_CONFIG,
    ApiError,
    ConfigResource,
    KafkaUnavailableError,
)
from kpo_kafka.states import ConditionType, Phase
from kpo_operator.conditions import Condition
from kpo_operator.cordons import (
    CORDONED_LOG_DIRS,
    CordonLedger,
    CordonLedgerFormatError,
    cordon_supported,
    plan_cordons,
)
from kpo_operator.resources import PARTITION_REASSIGNMENT
from kpo_operator.store import ObjectStore
from kpo_operator.throttle_ledger import MAX_KEY_LENGTH, ConfigMapLedgerStore, ThrottleLedgerStore
from kpo_operator.throttle_writer import source_of

logger = logging.getLogger(__name__)

SUPPORT_TTL_S = 600.0
"""How long a broker's support (or refusal) of ``cordoned.log.dirs`` is remembered, s."""
NOT_SUPPORTED = (
    "Kafka < 4.3 has no cordoned.log.dirs (KIP-1066; the broker does not answer DescribeLogDirs v5)"
)
"""Why a broker of Kafka 3.9, ZooKeeper mode or this project is not cordoned."""


def drained_of(status: Mapping[str, Any]) -> frozenset[int]:
    """Return the brokers a reassignment's status says it drains (``status.cordon``)."""
    found = (status.get("cordon") or {}).get("drainedBrokers") or []
    return frozenset(int(b) for b in found)


class CordonLedgerStore(Protocol):
    """Where the cordon ledger is kept between syncs and operator restarts."""

    def load(self) -> CordonLedger | None:
        """Return the saved ledger, ``None`` when none was saved.

        Raises:
            ObjectStoreError: The storage could not be read.
            CordonLedgerFormatError: The saved ledger is unreadable.
        """
        ...

    def save(self, ledger: CordonLedger) -> None:
        """Replace the saved ledger (``ObjectStoreError`` when refused)."""
        ...


class ConfigMapCordonStore:
    """:class:`CordonLedgerStore` in one key of the throttle ledger's ConfigMap.

    Args:
        raw: A :class:`~kpo_operator.throttle_ledger.ConfigMapLedgerStore` on the key to use.
    """

    def __init__(self, raw: ConfigMapLedgerStore) -> None:
        self.raw = raw

    def load(self) -> CordonLedger | None:
        """See :meth:`CordonLedgerStore.load`."""
        text = self.raw.load_text()
        return None if text is None else CordonLedger.from_json(text)

    def save(self, ledger: CordonLedger) -> None:
        """See :meth:`CordonLedgerStore.save`."""
        self.raw.save_text(ledger.to_json())


class MemoryCordonStore:
    """:class:`CordonLedgerStore` in memory, as JSON (tests; stores without a ConfigMap)."""

    def __init__(self) -> None:
        self.text: str | None = None

    def load(self) -> CordonLedger | None:
        """See :meth:`CordonLedgerStore.load`."""
        return None if self.text is None else CordonLedger.from_json(self.text)

    def save(self, ledger: CordonLedger) -> None:
        """See :meth:`CordonLedgerStore.save`."""
        self.text = ledger.to_json()


def cordon_ledger_key(throttle_key: str) -> str:
    """Return the ConfigMap key of the cordon ledger beside throttle ledger key ``throttle_key``.

    ``ledger.json`` -> ``cordons.json``, ``ledger.<namespace>.<name>.json`` ->
    ``cordons.<namespace>.<name>.json`` (a digest when longer than a ConfigMap key may be).
    """
    rest = throttle_key.removeprefix("ledger")
    key = "cordons" + rest
    if len(key) <= MAX_KEY_LENGTH:
        return key
    return "cordons." + hashlib.sha256(throttle_key.encode()).hexdigest() + ".json"


def cordon_store_beside(ledger_store: ThrottleLedgerStore) -> CordonLedgerStore:
    """Return the cordon ledger store kept next to a cluster's throttle ledger.

    A ConfigMap store gives a store on another key of the same ConfigMap
    (:func:`cordon_ledger_key`); any other store (tests) gives one in memory.
    """
    if isinstance(ledger_store, ConfigMapLedgerStore):
        raw = ConfigMapLedgerStore(
            ledger_store.namespace,
            ledger_store.name,
            ledger_store.api_client,
            cordon_ledger_key(ledger_store.key),
        )
        return ConfigMapCordonStore(raw)
    return MemoryCordonStore()


@dataclass
class CordonResult:
    """What one sync found and did.

    Attributes:
        wanted: source -> the brokers that object drains (after the overrides).
        owned: Brokers the operator holds cordoned after the sync (in its ledger).
        foreign: Wanted brokers whose ``cordoned.log.dirs`` was set outside the operator
            (left alone) -> that value.
        unsupported: Wanted brokers that cannot be cordoned -> why (Kafka < 4.3, or
            Kafka's refusal, e.g. an old ``metadata.version``).
        errors: Brokers whose write failed otherwise, with Kafka's error.
        released: Brokers the sync let go (previous value put back, or left changed).
    """

    wanted: dict[str, frozenset[int]] = field(default_factory=dict)
    owned: frozenset[int] = frozenset()
    foreign: dict[int, str] = field(default_factory=dict)
    unsupported: dict[int, str] = field(default_factory=dict)
    errors: dict[int, ApiError] = field(default_factory=dict)
    released: frozenset[int] = frozenset()


class CordonWriter:
    """Keeps ``cordoned.log.dirs`` set on the brokers that Moving reassignments drain.

    Args:
        admin: The Admin API client.
        store: The custom resources (to list the reassignments).
        ledger_store: Where the ownership ledger is kept.
        clock: Monotonic seconds (support cache).

    Errors of :meth:`sync`: ``KafkaAdminError`` and ``ObjectStoreError`` propagate.
    """

    def __init__(
        self,
        admin: KafkaAdmin,
        store: ObjectStore,
        ledger_store: CordonLedgerStore,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.admin = admin
        self.store = store
        self.ledger_store = ledger_store
        self.clock = clock
        self._lock = threading.Lock()
        self._ledger: CordonLedger | None = None
        self._support: dict[int, tuple[float, str | None]] = {}  # broker -> (at, why not)

    def sync(self, overrides: Mapping[str, frozenset[int] | None] | None = None) -> CordonResult:
        """Cordon what Moving reassignments drain, release the rest the operator owns.

        Args:
            overrides: source (:func:`~kpo_operator.throttle_writer.source_of`) -> the
                brokers it drains, instead of its stored status; ``None`` drops it.
        """
        with self._lock:
            return self._sync(dict(overrides or {}))

    def _wanted(self, overrides: Mapping[str, frozenset[int] | None]) -> dict[str, frozenset[int]]:
        wanted: dict[str, frozenset[int]] = {}
        for obj in self.store.list(PARTITION_REASSIGNMENT):
            status = obj.get("status") or {}
            if status.get("phase") != Phase.MOVING:
                continue
            if drained := drained_of(status):
                wanted[source_of(PARTITION_REASSIGNMENT, obj)] = drained
        for source, brokers in overrides.items():
            if brokers:
                wanted[source] = brokers
            else:
                wanted.pop(source, None)
        return wanted

    def _ledger_of(self, cluster_id: str | None) -> CordonLedger:
        if self._ledger is not None and self._ledger.cluster_id == cluster_id:
            return self._ledger
        try:
            saved = self.ledger_store.load()
        except CordonLedgerFormatError as exc:
            logger.error("cordon ledger unreadable, starting empty: %s", exc)
            saved = None
        if saved is None or saved.cluster_id != cluster_id:
            saved = CordonLedger(cluster_id)
        self._ledger = saved
        return saved

    def _why_not(self, broker: int) -> str | None:
        """Return why ``broker`` cannot be cordoned (``None``: it can), remembered a while."""
        known = self._support.get(broker)
        if known is not None and self.clock() - known[0] < SUPPORT_TTL_S:
            return known[1]
        try:
            version = self.admin.max_api_version(broker, API_KEY_DESCRIBE_LOG_DIRS)
        except KafkaUnavailableError as exc:
            return f"ApiVersions of broker {broker} unknown: {exc}"
        why = None if cordon_supported(version) else NOT_SUPPORTED
        self._support[broker] = (self.clock(), why)
        return why

    def _sync(self, overrides: Mapping[str, frozenset[int] | None]) -> CordonResult:
        result = CordonResult(wanted=self._wanted(overrides))
        all_wanted = frozenset(b for brokers in result.wanted.values() for b in brokers)
        cluster = self.admin.describe_cluster()
        ledger = self._ledger_of(cluster.cluster_id)
        live = set(cluster.brokers)
        candidates: set[int] = set()
        for broker in sorted(all_wanted & live):
            why = None if broker in ledger.brokers else self._why_not(broker)
            if why is None:
                candidates.add(broker)
            else:
                result.unsupported[broker] = why
        involved = sorted((candidates | set(ledger.brokers)) & live)
        current: dict[int, str | None] = {}
        if involved:
            described = self.admin.describe_configs(brokers=involved, keys=[CORDONED_LOG_DIRS])
            for broker in involved:
                current[broker] = described.get(ConfigResource.broker(broker), {}).get(
                    CORDONED_LOG_DIRS
                )
        plan = plan_cordons(frozenset(candidates), current, ledger)
        result.foreign = dict(plan.foreign)
        settled = plan.ledger
        if plan.changes:
            self._save(plan.write_ahead)
            answers = self.admin.incremental_alter_configs(
                {ConfigResource.broker(b): {CORDONED_LOG_DIRS: v} for b, v in plan.changes.items()}
            )
            failed: set[int] = set()
            for resource, error in answers.items():
                if error is None:
                    continue
                broker = int(resource.name)
                failed.add(broker)
                if error.code == ERROR_INVALID_CONFIG and broker not in ledger.brokers:
                    why = f"Kafka refused {CORDONED_LOG_DIRS}: {error}"
                    self._support[broker] = (self.clock(), why)
                    result.unsupported[broker] = why
                else:
                    result.errors[broker] = error
            for broker, value in plan.changes.items():
                if broker not in failed:
                    logger.info("broker %s %s=%s", broker, CORDONED_LOG_DIRS, value or "<deleted>")
            settled = plan.settled(failed)
        self._save(settled)
        result.owned = frozenset(settled.brokers)
        result.released = frozenset(ledger.brokers) - result.owned
        return result

    def _save(self, ledger: CordonLedger) -> None:
        if ledger != self._ledger:
            self.ledger_store.save(ledger)
        self._ledger = ledger


def _ids(brokers: Collection[int]) -> str:
    return ", ".join(str(b) for b in sorted(brokers))


def cordon_report(
    drained: frozenset[int], result: CordonResult, released: bool = False
) -> tuple[dict[str, Any], Condition]:
    """Say what became of the cordons of one reassignment: ``status.cordon`` and its condition.

    Args:
        drained: The brokers the reassignment drains.
        result: The sync that cordoned (or, with ``released``, let go of) them.
        released: The reassignment has let go (completed, cancelled or deleted).

    Returns:
        ``status.cordon`` (``drainedBrokers``, ``cordonedBrokers``, ``message``) and the
        ``Cordoned`` condition: True (reason ``Cordoned``) when every drained broker is
        cordoned by the operator; else False with reason ``CordonFailed``, ``NotSupported``
        (Kafka < 4.3, or refused), ``CordonedOutside`` (a value set by someone else, left
        alone) or, once let go, ``Released``.
    """
    if released:
        kept = drained & result.owned
        text = f"cordon of brokers {_ids(drained)} released"
        if kept:
            text += f"; brokers {_ids(kept)} stay cordoned for other reassignments draining them"
        status = {"drainedBrokers": sorted(drained), "cordonedBrokers": [], "message": text}
        return status, Condition(ConditionType.CORDONED, "False", "Released", text)
    cordoned = drained & result.owned
    problems: list[tuple[str, str]] = []
    for broker in sorted(drained):
        if broker in result.errors:
            problems.append(("CordonFailed", f"broker {broker}: {result.errors[broker]}"))
        elif broker in result.unsupported:
            problems.append(("NotSupported", f"broker {broker}: {result.unsupported[broker]}"))
        elif broker in result.foreign:
            value = result.foreign[broker]
            problems.append(
                (
                    "CordonedOutside",
                    f"broker {broker} has {CORDONED_LOG_DIRS}={value} set outside the "
                    "operator: left alone",
                )
            )
    parts = []
    if cordoned:
        parts.append(
            f"{CORDONED_LOG_DIRS}=* on brokers {_ids(cordoned)} while the move drains them"
        )
    parts += [text for _, text in problems]
    text = "; ".join(parts) or f"brokers {_ids(drained)} are not live: not cordoned"
    status = {
        "drainedBrokers": sorted(drained),
        "cordonedBrokers": sorted(cordoned),
        "message": text,
    }
    if cordoned == drained:
        return status, Condition(ConditionType.CORDONED, "True", "Cordoned", text)
    order = ("CordonFailed", "NotSupported", "CordonedOutside")
    reason = next((r for r in order if any(p[0] == r for p in problems)), "NotLive")
    return status, Condition(ConditionType.CORDONED, "False", reason, text)
