"""What the operator wrote into the throttle configs, kept across restarts (the ownership ledger).

Kafka's five replication-throttle configs (KIP-73, KIP-113) are shared: Kafka's own
``kafka-reassign-partitions --execute --throttle`` (``ReassignPartitionsCommand``),
Cruise Control or a person may set them too. The operator changes only what it owns,
and what it owns is recorded here:

- per broker and rate key, the value it wrote and, when it overrode someone else's
  value for a TopicReplicaQuota that explicitly claims the broker, that value (put
  back when the operator lets go);
- per topic and replica-list key, the ``partition:broker`` pairs it added that were
  not there already, or an owned ``"*"`` together with the foreign pairs it covered.

An entry is *pending* from the moment it is saved ahead of an IncrementalAlterConfigs
(write-ahead) until that write succeeded: the config may then hold either the old or
the new value, and neither is a hand-made change.

:class:`ThrottleLedger` is the pure value (with its JSON form);
:class:`ThrottleLedgerStore` loads and saves it, :class:`ConfigMapLedgerStore` in a
ConfigMap over the ``kubernetes`` client: the default cluster's ledger under the key
:data:`LEDGER_KEY`, each KafkaCluster's under its own key (:func:`ledger_key`), so one
cluster's save never touches another's.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Protocol

from kpo_operator.store import ObjectStoreError

LEDGER_KEY = "ledger.json"
"""The ConfigMap data key holding the ledger's JSON."""

MAX_KEY_LENGTH = 253
"""The longest ConfigMap data key."""


def ledger_key(cluster: tuple[str, str] | None) -> str:
    """Return the ConfigMap key of a cluster's ledger.

    ``None`` (the default connection) is :data:`LEDGER_KEY`; a KafkaCluster
    ``(namespace, name)`` is ``ledger.<namespace>.<name>.json`` (a namespace has no dots,
    so the key is unambiguous), or a digest of both when that exceeds
    :data:`MAX_KEY_LENGTH`.
    """
    if cluster is None:
        return LEDGER_KEY
    key = f"ledger.{cluster[0]}.{cluster[1]}.json"
    if len(key) <= MAX_KEY_LENGTH:
        return key
    return "ledger." + hashlib.sha256(f"{cluster[0]}/{cluster[1]}".encode()).hexdigest() + ".json"


LEDGER_VERSION = 1
"""Version of the JSON layout (``"version"``); another version is refused."""


class LedgerFormatError(ValueError):
    """A stored ledger is not valid JSON of the expected layout."""


@dataclass(frozen=True)
class OwnedRate:
    """A broker rate (bytes/s) the operator wrote.

    Attributes:
        value: The rate written, bytes/s.
        replaced: A foreign value the operator overrode for an explicit claim; it is
            put back instead of deleting the key when the operator lets go.
        pending: Saved ahead of a write not yet confirmed.
        previous: While ``pending``, the rate owned before (the config may still hold it).
    """

    value: int
    replaced: str | None = None
    pending: bool = False
    previous: int | None = None

    def written(self, current: int | None) -> bool:
        """Whether the broker's ``current`` rate is one the operator wrote."""
        if current is None:
            return False
        return current == self.value or (self.pending and current == self.previous)


@dataclass(frozen=True)
class OwnedReplicas:
    """The part of a topic's ``*.replication.throttled.replicas`` the operator wrote.

    Attributes:
        pairs: ``(partition, broker)`` pairs the operator added.
        wildcard: The operator wrote ``"*"``.
        covered: With ``wildcard``, the foreign pairs that ``"*"`` replaced; they
            come back when the operator's ``"*"`` goes.
        pending: Saved ahead of a write not yet confirmed.
    """

    pairs: frozenset[tuple[int, int]] = frozenset()
    wildcard: bool = False
    covered: frozenset[tuple[int, int]] = frozenset()
    pending: bool = False

    def union(self, other: OwnedReplicas) -> OwnedReplicas:
        """Both owned together, pending (for a write-ahead covering before and after)."""
        return OwnedReplicas(
            self.pairs | other.pairs,
            self.wildcard or other.wildcard,
            self.covered | other.covered,
            pending=True,
        )


@dataclass
class ThrottleLedger:
    """What the operator owns in one Kafka cluster's throttle configs.

    Attributes:
        cluster_id: The Kafka cluster id the entries belong to (DescribeCluster).
        brokers: broker id -> rate key -> owned rate.
        topics: topic -> replica-list key -> owned pairs.
    """

    cluster_id: str | None = None
    brokers: dict[int, dict[str, OwnedRate]] = field(default_factory=dict)
    topics: dict[str, dict[str, OwnedReplicas]] = field(default_factory=dict)

    def to_json(self) -> str:
        """Return the stored form: sorted, compact JSON (pairs as ``"partition:broker"``)."""

        def pairs(items: frozenset[tuple[int, int]]) -> list[str]:
            return [f"{p}:{b}" for p, b in sorted(items)]

        brokers: dict[str, dict[str, dict[str, Any]]] = {}
        for broker, rates in sorted(self.brokers.items()):
            for key, rate in sorted(rates.items()):
                entry: dict[str, Any] = {"value": rate.value}
                if rate.replaced is not None:
                    entry["replaced"] = rate.replaced
                if rate.pending:
                    entry["pending"] = True
                    if rate.previous is not None:
                        entry["previous"] = rate.previous
                brokers.setdefault(str(broker), {})[key] = entry
        topics: dict[str, dict[str, dict[str, Any]]] = {}
        for topic, lists in sorted(self.topics.items()):
            for key, owned in sorted(lists.items()):
                item: dict[str, Any] = {"pairs": pairs(owned.pairs)}
                if owned.wildcard:
                    item["wildcard"] = True
                    item["covered"] = pairs(owned.covered)
                if owned.pending:
                    item["pending"] = True
                topics.setdefault(topic, {})[key] = item
        body = {
            "version": LEDGER_VERSION,
            "clusterId": self.cluster_id,
            "brokers": brokers,
            "topics": topics,
        }
        return json.dumps(body, sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> ThrottleLedger:
        """Read the stored form written by :meth:`to_json`.

        Raises:
            LedgerFormatError: Not JSON, another version, or a malformed entry.
        """

        def pairs(items: Any) -> frozenset[tuple[int, int]]:
            found: set[tuple[int, int]] = set()
            for item in items:
                partition, _, broker = str(item).partition(":")
                found.add((int(partition), int(broker)))
            return frozenset(found)

        try:
            body = json.loads(text)
            if body.get("version") != LEDGER_VERSION:
                raise LedgerFormatError(f"unknown ledger version {body.get('version')!r}")
            ledger = cls(body.get("clusterId"))
            for broker, rates in body.get("brokers", {}).items():
                ledger.brokers[int(broker)] = {
                    key: OwnedRate(
                        int(entry["value"]),
                        entry.get("replaced"),
                        bool(entry.get("pending", False)),
                        int(entry["previous"]) if "previous" in entry else None,
                    )
                    for key, entry in rates.items()
                }
            for topic, lists in body.get("topics", {}).items():
                ledger.topics[str(topic)] = {
                    key: OwnedReplicas(
                        pairs(item.get("pairs", [])),
                        bool(item.get("wildcard", False)),
                        pairs(item.get("covered", [])),
                        bool(item.get("pending", False)),
                    )
                    for key, item in lists.items()
                }
        except LedgerFormatError:
            raise
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise LedgerFormatError(f"malformed throttle ledger: {exc}") from exc
        return ledger


class ThrottleLedgerStore(Protocol):
    """Where the ledger is kept between syncs and operator restarts."""

    def load(self) -> ThrottleLedger | None:
        """Return the saved ledger; ``None`` when none was saved yet.

        Raises:
            ObjectStoreError: The storage could not be read.
            LedgerFormatError: The saved ledger is unreadable.
        """
        ...

    def save(self, ledger: ThrottleLedger) -> None:
        """Replace the saved ledger.

        Raises:
            ObjectStoreError: The storage refused or failed the write.
        """
        ...

    def discard(self) -> None:
        """Remove the saved ledger (its cluster is gone from the operator).

        Raises:
            ObjectStoreError: The storage refused or failed the removal.
        """
        ...


class ConfigMapLedgerStore:
    """:class:`ThrottleLedgerStore` in one key of a core/v1 ConfigMap.

    Args:
        namespace: The operator's namespace (where the ConfigMap lives).
        name: The ConfigMap's name.
        api_client: A configured ``kubernetes.client.ApiClient``.
        key: The data key of this cluster's ledger (:func:`ledger_key`).

    The operator is the only writer of a key (each cluster's throttle writer holds a
    lock), so a save merge-patches its key without a read-modify-write cycle; the
    ConfigMap is created (labelled ``app.kubernetes.io/*``) when missing.
    """

    def __init__(self, namespace: str, name: str, api_client: Any, key: str = LEDGER_KEY) -> None:
        from kubernetes import client

        self.namespace = namespace
        self.name = name
        self.key = key
        self.api_client = api_client
        self._core = client.CoreV1Api(api_client)
        self._client = client

    def load(self) -> ThrottleLedger | None:
        """See :meth:`ThrottleLedgerStore.load`."""
        text = self.load_text()
        return None if text is None else ThrottleLedger.from_json(text)

    def load_text(self) -> str | None:
        """Return the text under this store's key; ``None`` when the key or ConfigMap is missing.

        Raises:
            ObjectStoreError: The ConfigMap could not be read.
        """
        from kubernetes.client.exceptions import ApiException

        try:
            found: Any = self._core.read_namespaced_config_map(self.name, self.namespace)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise ObjectStoreError(
                f"read ConfigMap {self.namespace}/{self.name}: {exc.status} {exc.reason}"
            ) from exc
        except Exception as exc:  # connection errors of urllib3
            raise ObjectStoreError(f"read ConfigMap {self.namespace}/{self.name}: {exc}") from exc
        text = (found.data or {}).get(self.key)
        return None if text is None else str(text)

    def save(self, ledger: ThrottleLedger) -> None:
        """See :meth:`ThrottleLedgerStore.save`; creates the ConfigMap when missing."""
        self.save_text(ledger.to_json())

    def save_text(self, text: str) -> None:
        """Write ``text`` under this store's key; creates the ConfigMap when missing.

        Raises:
            ObjectStoreError: The API server refused or failed the write.
        """
        from kubernetes.client.exceptions import ApiException

        body = self._client.V1ConfigMap(
            metadata=self._client.V1ObjectMeta(
                name=self.name,
                namespace=self.namespace,
                labels={
                    "app.kubernetes.io/managed-by": "kpo-operator",
                    "app.kubernetes.io/component": "throttle-ledger",
                },
            ),
            data={self.key: text},
        )
        what = f"save ConfigMap {self.namespace}/{self.name} key {self.key}"
        try:
            try:
                self._core.patch_namespaced_config_map(
                    self.name, self.namespace, {"data": {self.key: text}}
                )
            except ApiException as exc:
                if exc.status != 404:
                    raise
                self._core.create_namespaced_config_map(self.namespace, body)
        except ApiException as exc:
            raise ObjectStoreError(f"{what}: {exc.status} {exc.reason}: {exc.body}") from exc
        except Exception as exc:  # connection errors of urllib3
            raise ObjectStoreError(f"{what}: {exc}") from exc

    def discard(self) -> None:
        """See :meth:`ThrottleLedgerStore.discard`: the key goes, the ConfigMap stays."""
        from kubernetes.client.exceptions import ApiException

        what = f"remove key {self.key} of ConfigMap {self.namespace}/{self.name}"
        try:
            self._core.patch_namespaced_config_map(
                self.name, self.namespace, {"data": {self.key: None}}
            )
        except ApiException as exc:
            if exc.status == 404:
                return
            raise ObjectStoreError(f"{what}: {exc.status} {exc.reason}") from exc
        except Exception as exc:  # connection errors of urllib3
            raise ObjectStoreError(f"{what}: {exc}") from exc
