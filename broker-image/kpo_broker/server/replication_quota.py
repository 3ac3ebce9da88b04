"""Replication quotas (KIP-73): a byte-rate limit on replica traffic that is catching up.

Two :class:`ReplicationQuotaManager` instances live on each broker, one for the leader
side (bytes served to throttled followers) and one for the follower side (bytes fetched
for throttled partitions), as Kafka's ``QuotaFactory.instantiate`` creates them.

Rate measurement: one sensor per manager, shared by every fetcher (follower side) or every
replica fetch served (leader side), as Kafka's ``ReplicationQuotaManager`` registers one
``byte-rate`` sensor per replication type: Kafka 3.9's ``SimpleRate`` over a summing
``SampledStat`` (:mod:`kpo_kafka.sampled_rate`) with ``replication.quota.window.num`` = N
samples of ``replication.quota.window.size.seconds`` = W. In short: bytes count until N*W
after the last record of their sample (N + 1 sample slots), and the rate is their sum over
the time since the oldest sample began, at least one window, so a throttled move starts
with about one window's worth of quota, not N - 1. The quota is exceeded when the rate is
above it (Kafka's ``Quota.acceptable``). Checks never record and records never check
(``Sensor.record(value, now, false)``): callers check before a fetch and record the bytes
after it, as Kafka's ``ReplicaFetcherThread`` and ``KafkaApis.handleFetchRequest`` do.

Throttled replica lists (``leader.replication.throttled.replicas`` and
``follower.replication.throttled.replicas`` topic configs): ``*`` (every replica) or
``partition:broker`` pairs. As Kafka's topic config handler, a broker only cares about
the pairs naming itself: a partition is throttled on this broker's leader (follower)
side when the leader (follower) list holds ``<partition>:<this broker id>`` or ``*``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from kpo_kafka.sampled_rate import SampledRate

#: No limit: the static default of both ``*.replication.throttled.rate`` (Kafka's Long.MAX).
UNLIMITED_RATE = 2**63 - 1

#: A throttled replica list meaning "every replica" (the ``*`` value).
ALL_REPLICAS = "*"


class InvalidThrottledReplicasError(ValueError):
    """A throttled replica list that is neither ``*`` nor ``partition:broker`` pairs."""


@dataclass(frozen=True)
class ThrottledReplicas:
    """A parsed throttled replica list.

    Attributes:
        all_replicas: the list was ``*``.
        replicas: (partition, broker id) pairs (empty when ``all_replicas``).
    """

    all_replicas: bool = False
    replicas: frozenset[tuple[int, int]] = frozenset()

    def contains(self, partition: int, broker_id: int) -> bool:
        """Whether replica ``partition`` on ``broker_id`` is throttled by this list."""
        return self.all_replicas or (partition, broker_id) in self.replicas


def parse_throttled_replicas(value: str) -> ThrottledReplicas:
    """Parse a ``*.replication.throttled.replicas`` value (KIP-73).

    Args:
        value: ``""`` (none), ``"*"`` (all) or ``"0:1,1:2"`` (partition:broker pairs);
            blanks around items are ignored.

    Returns:
        The parsed list.

    Raises:
        InvalidThrottledReplicasError: an item is not two non-negative integers.
    """
    text = value.replace(" ", "").strip()
    if text == ALL_REPLICAS:
        return ThrottledReplicas(all_replicas=True)
    pairs: set[tuple[int, int]] = set()
    for item in (i for i in text.split(",") if i):
        parts = item.split(":")
        if len(parts) != 2 or not all(p.isdigit() for p in parts):
            raise InvalidThrottledReplicasError(
                f"throttled replica {item!r} is not partition:broker (in {value!r})"
            )
        pairs.add((int(parts[0]), int(parts[1])))
    return ThrottledReplicas(replicas=frozenset(pairs))


class ReplicationQuotaManager:
    """Measures one side's throttled replication byte rate and compares it to the quota.

    One instance per side per broker, shared by all its fetchers (Kafka's
    ``ReplicationQuotaManager``: one ``byte-rate`` sensor per replication type).

    Args:
        quota_bytes_per_second: the throttle rate, bytes/s (``leader.replication.throttled.rate``
            or ``follower.replication.throttled.rate``); :data:`UNLIMITED_RATE` for none.
        window_num: ``replication.quota.window.num`` (N, number of samples, >= 1).
        window_size_seconds: ``replication.quota.window.size.seconds`` (W, seconds, >= 1).
        clock: wall-clock time in ms (injectable for tests).

    Attributes:
        total_recorded_bytes: every byte passed to :meth:`record` since creation (the
            ``*replication_throttled_bytes_total`` metrics).

    Raises:
        ValueError: a non-positive window setting or a negative quota.
    """

    def __init__(
        self,
        quota_bytes_per_second: int = UNLIMITED_RATE,
        window_num: int = 11,
        window_size_seconds: int = 1,
        clock: Callable[[], float] | None = None,
    ) -> None:
        if window_num < 1 or window_size_seconds < 1:
            raise ValueError("replication quota windows must be positive")
        self._clock = clock or (lambda: time.time() * 1000)
        self._rate = SampledRate(window_num, window_size_seconds)  # times in seconds
        self._quota = UNLIMITED_RATE
        self._throttled: dict[str, ThrottledReplicas] = {}
        self.total_recorded_bytes = 0
        self.update_quota(quota_bytes_per_second)

    # ------------------------------------------------------------------ quota
    @property
    def upper_bound(self) -> int:
        """The quota, bytes/s (:data:`UNLIMITED_RATE` when unthrottled)."""
        return self._quota

    def update_quota(self, quota_bytes_per_second: int) -> None:
        """Set the quota, bytes/s; recorded samples are kept (as Kafka's ``updateQuota``).

        Raises:
            ValueError: a negative quota.
        """
        if quota_bytes_per_second < 0:
            raise ValueError(f"replication quota must be >= 0, got {quota_bytes_per_second}")
        self._quota = quota_bytes_per_second

    def record(self, num_bytes: int) -> None:
        """Add ``num_bytes`` of throttled replication traffic at the current time.

        Never checks the quota (Kafka's ``record`` calls ``Sensor.record(.., false)``).
        """
        self._rate.record(num_bytes, self._clock() / 1000)
        self.total_recorded_bytes += num_bytes

    def rate(self) -> float:
        """Return the measured rate now, bytes/s (see the module docstring)."""
        return self._rate.measure(self._clock() / 1000)

    def is_quota_exceeded(self) -> bool:
        """Whether the measured rate is above the quota (never when unthrottled)."""
        if self._quota >= UNLIMITED_RATE:
            return False
        return self.rate() > self._quota

    # ------------------------------------------------------- throttled replicas
    def mark_throttled(self, topic: str, replicas: ThrottledReplicas) -> None:
        """Set ``topic``'s throttled replica list (parsed once per config change)."""
        if replicas.all_replicas or replicas.replicas:
            self._throttled[topic] = replicas
        else:
            self._throttled.pop(topic, None)

    def remove_throttle(self, topic: str) -> None:
        """Forget ``topic``'s throttled replica list (config removed or topic deleted)."""
        self._throttled.pop(topic, None)

    def is_throttled(self, topic: str, partition: int, broker_id: int) -> bool:
        """Whether replica ``partition`` of ``topic`` on ``broker_id`` is in the throttled list."""
        replicas = self._throttled.get(topic)
        return replicas is not None and replicas.contains(partition, broker_id)

    def should_throttle(self, topic: str, partition: int, broker_id: int, in_sync: bool) -> bool:
        """Kafka's throttle decision: out of sync, throttled, and over the quota.

        As Kafka's ``ReplicaManager.shouldLeaderThrottle`` and
        ``ReplicaFetcherThread.shouldFollowerThrottle``.

        Args:
            topic: the partition's topic.
            partition: the partition index.
            broker_id: the broker whose replica is looked up in the list (this broker).
            in_sync: the fetching follower is in sync; in-sync replicas are never throttled.
        """
        return (
            not in_sync
            and self.is_throttled(topic, partition, broker_id)
            and self.is_quota_exceeded()
        )


@dataclass
class ReplicationQuotas:
    """The broker's two replication quota managers.

    Attributes:
        leader: ``leader.replication.throttled.*``: bytes this broker serves as leader.
        follower: ``follower.replication.throttled.*``: bytes this broker fetches as follower.
    """

    leader: ReplicationQuotaManager
    follower: ReplicationQuotaManager

    def apply_topic_config(self, topic: str, config: dict[str, str] | None) -> None:
        """Re-parse ``topic``'s throttled replica lists from its overrides (None: deleted).

        Invalid lists (rejected by AlterConfigs, but possibly written to ZooKeeper by
        hand) throttle nothing.
        """
        config = config or {}
        for manager, name in (
            (self.leader, "leader.replication.throttled.replicas"),
            (self.follower, "follower.replication.throttled.replicas"),
        ):
            try:
                manager.mark_throttled(topic, parse_throttled_replicas(config.get(name, "")))
            except InvalidThrottledReplicasError:
                manager.remove_throttle(topic)

    def apply_broker_rates(self, rates: dict[str, int]) -> None:
        """Set both quotas from effective rates keyed by Kafka config name (bytes/s)."""
        self.leader.update_quota(rates.get("leader.replication.throttled.rate", UNLIMITED_RATE))
        self.follower.update_quota(rates.get("follower.replication.throttled.rate", UNLIMITED_RATE))


def effective_throttle_rates(
    static: dict[str, int], default: dict[str, str], per_broker: dict[str, str]
) -> dict[str, int]:
    """Resolve the throttle rates with KIP-226 precedence: per broker, default, static.

    Args:
        static: ``server.properties`` values by config name, bytes/s.
        default: ``/config/brokers/<default>`` overrides.
        per_broker: ``/config/brokers/<id>`` overrides.

    Returns:
        Config name -> bytes/s for both ``*.replication.throttled.rate`` configs;
        unparsable or negative dynamic values are ignored.
    """
    rates: dict[str, int] = {}
    for name in ("leader.replication.throttled.rate", "follower.replication.throttled.rate"):
        rates[name] = static.get(name, UNLIMITED_RATE)
        for layer in (default, per_broker):
            try:
                value = int(layer[name])
            except (KeyError, ValueError):
                continue
            if value >= 0:
                rates[name] = value
    return rates
