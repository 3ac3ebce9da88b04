"""Workload sizes and client settings, identical for both systems (pure data)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

MIB = 1024 * 1024


@dataclass(frozen=True)
class Workload:
    """What each system is asked to do.

    Attributes:
        record_size: value size of every record, bytes (1 KiB).
        produce_records: records for the produce test (then read by the consume test).
        produce_partitions: partitions of the produce topic (RF 3, spread over 3 brokers).
        warmup_records: records produced to, then consumed from, a warm-up topic of the
            same shape before the produce and consume tests are timed (JIT warm-up of
            the JVM brokers; nothing is measured).
        catch_up_records: records filling the catch-up partition before its follower
            restarts (at least 500 MB).
        producer_props: ProducerPerformance's producer configs for the produce test.
        failover_timeout_s: longest wait for a new leader after the kill, s.
        catch_up_timeout_s: longest wait for the follower to catch up, s.
        throttle_records: records filling each partition that the throttled-reassignment
            experiments move (20 MiB of 1 KiB values; ``kpo_bench.throttle_plan``).
        throttle_rate_bytes_s: the throttle R, bytes/s (KIP-73
            ``leader/follower.replication.throttled.rate``), on every involved broker.
        throttle_timeout_s: longest wait for one experiment's reassignments, s.
        group_session_timeout_ms: ``session.timeout.ms`` of the rebalance test's members
            (Kafka's ``group.min.session.timeout.ms`` default, the shortest both accept).
        group_timeout_s: longest wait for the rebalance test's group to own every partition, s.
    """

    record_size: int = 1024
    produce_records: int = 512_000
    produce_partitions: int = 6
    warmup_records: int = 102_400
    catch_up_records: int = 512_000
    producer_props: dict[str, str] = field(
        default_factory=lambda: {
            "acks": "all",
            "enable.idempotence": "true",
            "batch.size": "131072",
            "linger.ms": "10",
            "compression.type": "none",
        }
    )
    failover_timeout_s: float = 90.0
    catch_up_timeout_s: float = 900.0
    throttle_records: int = 20_480
    throttle_rate_bytes_s: int = MIB
    throttle_timeout_s: float = 300.0
    group_session_timeout_ms: int = 6000
    group_timeout_s: float = 120.0

    @property
    def produce_bytes(self) -> int:
        """Payload bytes of the produce test."""
        return self.produce_records * self.record_size

    @property
    def catch_up_bytes(self) -> int:
        """Payload bytes written to the catch-up partition."""
        return self.catch_up_records * self.record_size

    @property
    def throttle_bytes(self) -> int:
        """Payload bytes of each partition moved under a throttle."""
        return self.throttle_records * self.record_size

    def tool_timeout_s(self, payload_bytes: int) -> float:
        """Return how long a load tool may run for ``payload_bytes``: 5 min plus 1 s per MiB."""
        return 300.0 + payload_bytes / MIB

    def as_json(self) -> dict[str, Any]:
        """Return the settings as JSON-serialisable data (sizes in bytes, times in s)."""
        data = asdict(self)
        data["produce_bytes"] = self.produce_bytes
        data["catch_up_bytes"] = self.catch_up_bytes
        data["throttle_bytes"] = self.throttle_bytes
        return data


#: The benchmark's sizes: 500 MiB produced and 500 MiB to catch up (after 100 MiB of warm-up).
DEFAULT = Workload()
#: ``--quick``: 50 MiB each (10 MiB of warm-up), to try things out.
QUICK = Workload(
    produce_records=51_200, warmup_records=10_240, catch_up_records=51_200, catch_up_timeout_s=300.0
)


@dataclass(frozen=True)
class HealWorkload:
    """The ``heal`` section: one cluster per system, a topic, a BalancingPolicy, one kill -9.

    Attributes:
        brokers: brokers of each system's cluster; more than ``replication_factor``, so that
            the replication factor can be restored on the survivors once one broker dies.
        partitions: partitions of the topic, spread round robin (every broker holds
            ``replication_factor / brokers`` of them).
        replication_factor: the topic's replication factor.
        records: records written to the topic before the kill, ``record_size`` bytes each.
        record_size: value size of every record, bytes.
        threshold_s: ``spec.detectors.brokerFailure.threshold`` of the policy, s.
        replication_rate: ``spec.budget.replicationRate`` of the policy: the cluster-wide
            replication rate its fixes share, bytes/s.
        policy_interval_s: the operator's ``KPO_POLICY_INTERVAL_S``: s between two checks
            of the cluster for the policy.
        timeout_s: longest wait from the kill to the replication factor restored, s, on
            top of ``threshold_s``.
    """

    brokers: int = 5
    partitions: int = 20
    replication_factor: int = 3
    records: int = 512_000
    record_size: int = 1024
    threshold_s: int = 30
    replication_rate: int = 16 * MIB
    policy_interval_s: float = 2.0
    timeout_s: float = 900.0

    @property
    def payload_bytes(self) -> int:
        """Record payload written to the topic, bytes (stored ``replication_factor`` times)."""
        return self.records * self.record_size

    def as_json(self) -> dict[str, Any]:
        """Return the settings as JSON-serialisable data (sizes in bytes, times in s)."""
        data = asdict(self)
        data["payload_bytes"] = self.payload_bytes
        return data


#: ``--only heal`` and the full run: 5 brokers, 500 MiB in 20 partitions at RF 3.
DEFAULT_HEAL = HealWorkload()
#: ``--quick``: 4 brokers, 100 MiB in 12 partitions at RF 3.
QUICK_HEAL = HealWorkload(brokers=4, partitions=12, records=102_400, timeout_s=300.0)
