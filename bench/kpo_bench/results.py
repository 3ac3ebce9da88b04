"""Benchmark results: the metrics, the ratio against the baseline, and the JSON report (pure logic).

The baseline is Apache Kafka measured in the same run on the same machine. A ratio
above 1.0 always means "kpo is better": ours/Kafka for throughputs, Kafka/ours for
durations. Targets: catch-up >= 1.0, produce >= 0.5.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

#: Name of the system under test in reports.
OURS = "kpo"
#: Name of the baseline in reports.
BASELINE = "apache-kafka"


@dataclass(frozen=True)
class MetricSpec:
    """One benchmark metric.

    Attributes:
        key: stable identifier used in the JSON report, e.g. ``"produce_mib_s"``.
        label: human-readable name for the table.
        unit: unit of the values, e.g. ``"MiB/s"`` or ``"s"``.
        higher_is_better: True for throughputs (ratio ours/Kafka), False for
            durations (ratio Kafka/ours).
        target_ratio: the smallest acceptable ratio, or None when none is set.
        compared: False for a figure shown for both systems but not compared (a setting,
            a size): it gets no ratio.
    """

    key: str
    label: str
    unit: str
    higher_is_better: bool
    target_ratio: float | None = None
    compared: bool = True

    @classmethod
    def rate(
        cls, key: str, label: str, unit: str = "MiB/s", target_ratio: float | None = None
    ) -> MetricSpec:
        """Return a metric where more is better (a throughput; ratio ours/Kafka)."""
        return cls(key, label, unit, True, target_ratio)

    @classmethod
    def cost(
        cls, key: str, label: str, unit: str = "s", target_ratio: float | None = None
    ) -> MetricSpec:
        """Return a metric where less is better (a duration, memory, requests; ratio Kafka/ours)."""
        return cls(key, label, unit, False, target_ratio)

    @classmethod
    def figure(cls, key: str, label: str, unit: str) -> MetricSpec:
        """Return a figure shown for both systems without a ratio (a setting, a size)."""
        return cls(key, label, unit, False, None, compared=False)


PRODUCE = MetricSpec.rate("produce_mib_s", "produce (acks=all, RF 3, 1 KiB)", target_ratio=0.5)
CONSUME = MetricSpec.rate("consume_mib_s", "consume")
CATCH_UP = MetricSpec.rate("catch_up_mib_s", "follower catch-up", target_ratio=1.0)
FAILOVER = MetricSpec.cost("failover_s", "leader failover after kill -9")
#: Consume through a consumer group (Kafka's ConsumerPerformance), goal >= 1.0.
GROUP_CONSUME = MetricSpec.rate(
    "group_consume_mib_s", "consume via a group (ConsumerPerformance)", target_ratio=1.0
)
GROUP_REBALANCE = MetricSpec.cost("group_rebalance_s", "3-member group rebalance after kill -9")

#: ``--only tls``: the same produce and consume over a SASL_SSL listener
#: (SCRAM-SHA-512), next to the PLAINTEXT figures of the same run.
PRODUCE_SASL_SSL = MetricSpec.rate(
    "produce_sasl_ssl_mib_s", "produce over SASL_SSL (SCRAM-SHA-512)"
)
CONSUME_SASL_SSL = MetricSpec.rate("consume_sasl_ssl_mib_s", "consume over SASL_SSL")

#: Every metric, in table order.
METRICS: tuple[MetricSpec, ...] = (
    PRODUCE,
    PRODUCE_SASL_SSL,
    CONSUME,
    CONSUME_SASL_SSL,
    GROUP_CONSUME,
    CATCH_UP,
    FAILOVER,
    GROUP_REBALANCE,
)

#: ``--only heal`` (``kpo_bench.heal``): a broker killed for good, healed by a BalancingPolicy.
#: Times are from the kill, s; sizes are bytes of the replicas' logs, in MiB.
HEAL_THRESHOLD = MetricSpec.figure(
    "heal_threshold_s", "heal: brokerFailure threshold (the policy's setting)", "s"
)
HEAL_DETECTED = MetricSpec.cost("heal_detected_s", "heal: kill -9 to the BrokerFailure anomaly")
HEAL_FIXING = MetricSpec.cost(
    "heal_fixing_s", "heal: kill -9 to the anomaly Fixing (detection + threshold)"
)
HEAL_RESTORED = MetricSpec.cost(
    "heal_restored_s", "heal: kill -9 to every partition's RF restored (ISR = replicas)"
)
HEAL_MOVED = MetricSpec.figure("heal_moved_mib", "heal: bytes copied to new replicas", "MiB")
HEAL_BUDGET = MetricSpec.figure(
    "heal_budget_mib_s", "heal: the policy's budget (replicationRate)", "MiB/s"
)
HEAL_RATE = MetricSpec.rate(
    "heal_rate_mib_s", "heal: effective copy rate, bytes copied / (Fixing to RF restored)"
)
#: The heal metrics, in table order.
HEAL_METRICS: tuple[MetricSpec, ...] = (
    HEAL_THRESHOLD,
    HEAL_DETECTED,
    HEAL_FIXING,
    HEAL_RESTORED,
    HEAL_MOVED,
    HEAL_BUDGET,
    HEAL_RATE,
)

#: The throttled-reassignment experiments (``kpo_bench.throttle_plan``): durations, s, judged
#: against the ``min(leaders, followers) * R`` estimate rather than against Kafka (see
#: :func:`estimate_rows`).
THROTTLE_A = MetricSpec.cost("throttle_a_s", "(a) same leader, two followers")
THROTTLE_B = MetricSpec.cost("throttle_b_s", "(b) two leaders, same follower")
THROTTLE_C = MetricSpec.cost("throttle_c_s", "(c) distinct leaders and followers")
THROTTLE_METRICS: tuple[MetricSpec, ...] = (THROTTLE_A, THROTTLE_B, THROTTLE_C)

#: ``--only controller`` (``kpo_bench.controller_scale``): the controller and brokers
#: at scale. N is the number of partitions the measured broker leads. Goal ratio 1.0 for each.
CONTROLLER_GOAL = 1.0
CREATE_RF2 = MetricSpec.rate(
    "create_rf2_partitions_s",
    "partitions created per second, RF 2",
    "partitions/s",
    CONTROLLER_GOAL,
)
CREATE_RF3 = MetricSpec.rate(
    "create_rf3_partitions_s",
    "partitions created per second, RF 3",
    "partitions/s",
    CONTROLLER_GOAL,
)
SHUTDOWN_LEADERS = MetricSpec.cost(
    "controlled_shutdown_leaders_s",
    "SIGTERM of the leader of N: all led elsewhere",
    target_ratio=CONTROLLER_GOAL,
)
SHUTDOWN_EXIT = MetricSpec.cost(
    "controlled_shutdown_exit_s",
    "SIGTERM of the leader of N: process exited",
    target_ratio=CONTROLLER_GOAL,
)
STARTUP_CLEAN = MetricSpec.cost(
    "startup_clean_s",
    "start-up after a clean shutdown, until in every ISR",
    target_ratio=CONTROLLER_GOAL,
)
KILL_LEADERS = MetricSpec.cost(
    "kill_leaders_s",
    "kill -9 of the leader of N: all led elsewhere",
    target_ratio=CONTROLLER_GOAL,
)
STARTUP_UNCLEAN = MetricSpec.cost(
    "startup_unclean_s",
    "start-up after kill -9, until in every ISR",
    target_ratio=CONTROLLER_GOAL,
)
REASSIGN_ALL = MetricSpec.cost(
    "reassign_all_s",
    "one AlterPartitionReassignments of N partitions: all moved",
    target_ratio=CONTROLLER_GOAL,
)
CONTROLLER_FAILOVER = MetricSpec.cost(
    "controller_failover_s",
    "kill -9 of the controller: its partitions led elsewhere",
    target_ratio=CONTROLLER_GOAL,
)
MEMORY_PER_PARTITION = MetricSpec.cost(
    "memory_per_replica_kib", "broker memory (RSS) per hosted replica", "KiB", CONTROLLER_GOAL
)
ZK_REQUESTS_PER_CHANGE = MetricSpec.cost(
    "zk_requests_per_leader_change",
    "ZooKeeper requests per leader change (controlled shutdown)",
    "requests",
    CONTROLLER_GOAL,
)
#: The controller metrics, in table order.
CONTROLLER_METRICS: tuple[MetricSpec, ...] = (
    CREATE_RF2,
    CREATE_RF3,
    MEMORY_PER_PARTITION,
    SHUTDOWN_LEADERS,
    SHUTDOWN_EXIT,
    ZK_REQUESTS_PER_CHANGE,
    STARTUP_CLEAN,
    KILL_LEADERS,
    STARTUP_UNCLEAN,
    REASSIGN_ALL,
    CONTROLLER_FAILOVER,
)


@dataclass(frozen=True)
class Measured:
    """One metric's value with the raw numbers it was computed from.

    Attributes:
        value: the value in the metric's unit.
        details: raw measurements (bytes, durations in s, tool summaries...), JSON-serialisable.
    """

    value: float
    details: dict[str, Any]


@dataclass
class SystemResult:
    """What one system measured.

    Attributes:
        system: :data:`OURS` or :data:`BASELINE`.
        version: the system's version string.
        values: metric key -> value in the metric's unit; a metric that failed or
            was skipped is absent.
        details: raw measurements per metric key (bytes, timestamps, tool output...).
        errors: metric key -> error message for the metrics that failed.
    """

    system: str
    version: str
    values: dict[str, float] = field(default_factory=dict)
    details: dict[str, dict[str, Any]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)

    def record(self, metric: MetricSpec, measured: Measured) -> None:
        """Store ``measured`` as this system's value of ``metric``."""
        self.values[metric.key] = measured.value
        self.details[metric.key] = measured.details

    def record_error(self, metric: MetricSpec, error: BaseException) -> None:
        """Store why ``metric`` could not be measured."""
        self.errors[metric.key] = f"{type(error).__name__}: {error}"


@dataclass(frozen=True)
class ComparisonRow:
    """One line of the comparison table.

    Attributes:
        metric: the metric.
        ours: kpo's value, or None if not measured.
        baseline: Apache Kafka's value, or None if not measured.
        ratio: see :func:`ratio`.
        meets_target: whether ``ratio >= metric.target_ratio``; None without a
            target or a ratio.
    """

    metric: MetricSpec
    ours: float | None
    baseline: float | None
    ratio: float | None
    meets_target: bool | None


def ratio(metric: MetricSpec, ours: float | None, baseline: float | None) -> float | None:
    """Return how kpo compares with the baseline, > 1.0 meaning kpo is better.

    Args:
        metric: gives the direction (throughput or duration).
        ours: kpo's value in the metric's unit.
        baseline: Apache Kafka's value in the same unit.

    Returns:
        ``ours / baseline`` for throughputs, ``baseline / ours`` for durations, or
        None for a figure that is not compared (:meth:`MetricSpec.figure`) and when a value
        is missing, not finite, not positive, or would be divided by.
    """
    if not metric.compared or ours is None or baseline is None:
        return None
    if not (math.isfinite(ours) and math.isfinite(baseline)) or ours <= 0 or baseline <= 0:
        return None
    return ours / baseline if metric.higher_is_better else baseline / ours


def ratio_meaning(metric: MetricSpec) -> str:
    """Return what the ratio of ``metric`` is: ``"kpo/apache-kafka"``, the reverse, or ``""``."""
    if not metric.compared:
        return ""
    return f"{OURS}/{BASELINE}" if metric.higher_is_better else f"{BASELINE}/{OURS}"


def compare(
    ours: SystemResult | None,
    baseline: SystemResult | None,
    metrics: tuple[MetricSpec, ...] = METRICS,
) -> list[ComparisonRow]:
    """Build one :class:`ComparisonRow` per metric of ``metrics`` (default :data:`METRICS`).

    Args:
        ours: kpo's results, or None when kpo was not run.
        baseline: Apache Kafka's results, or None when Kafka was not run.
        metrics: the metrics of the table, in order.
    """
    rows = []
    for metric in metrics:
        mine = ours.values.get(metric.key) if ours is not None else None
        theirs = baseline.values.get(metric.key) if baseline is not None else None
        value = ratio(metric, mine, theirs)
        meets = None
        if value is not None and metric.target_ratio is not None:
            meets = value >= metric.target_ratio
        rows.append(ComparisonRow(metric, mine, theirs, value, meets))
    return rows


#: (PLAINTEXT metric, the same over SASL_SSL): the pairs a TLS overhead is computed from.
TLS_PAIRS: tuple[tuple[MetricSpec, MetricSpec], ...] = (
    (PRODUCE, PRODUCE_SASL_SSL),
    (CONSUME, CONSUME_SASL_SSL),
)


@dataclass(frozen=True)
class OverheadRow:
    """One system-against-itself comparison: what TLS and SASL cost each system.

    Attributes:
        plain: the PLAINTEXT metric.
        secured: the same over SASL_SSL.
        ours: kpo's overhead, ``1 - SASL_SSL / PLAINTEXT`` (0.25: 25 % slower), or None.
        baseline: Apache Kafka's overhead, or None.
        no_worse: whether kpo's overhead is at most Kafka's (the TLS table's bar); None
            without both.
    """

    plain: MetricSpec
    secured: MetricSpec
    ours: float | None
    baseline: float | None
    no_worse: bool | None


def tls_overhead(
    result: SystemResult | None, plain: MetricSpec, secured: MetricSpec
) -> float | None:
    """Return ``1 - secured / plain`` of one system's throughputs, or None if one is missing."""
    if result is None:
        return None
    a, b = result.values.get(plain.key), result.values.get(secured.key)
    if a is None or b is None or not (math.isfinite(a) and math.isfinite(b)) or a <= 0:
        return None
    return 1.0 - b / a


def overhead_rows(ours: SystemResult | None, baseline: SystemResult | None) -> list[OverheadRow]:
    """Build one :class:`OverheadRow` per pair of :data:`TLS_PAIRS` that either system measured."""
    rows = []
    for plain, secured in TLS_PAIRS:
        mine = tls_overhead(ours, plain, secured)
        theirs = tls_overhead(baseline, plain, secured)
        if mine is None and theirs is None:
            continue
        no_worse = None if mine is None or theirs is None else mine <= theirs
        rows.append(OverheadRow(plain, secured, mine, theirs, no_worse))
    return rows


@dataclass(frozen=True)
class EstimateRow:
    """One throttled-reassignment experiment, measured against its estimate.

    Attributes:
        metric: the experiment's metric (one of :data:`THROTTLE_METRICS`).
        estimate_s: the estimate from the run's details (kpo's when both have one), s.
        ours: kpo's measured duration, s, or None.
        ours_deviation: ``ours / kpo's estimate - 1``, or None.
        baseline: Apache Kafka's measured duration, s, or None.
        baseline_deviation: ``baseline / Kafka's estimate - 1``, or None.
    """

    metric: MetricSpec
    estimate_s: float | None
    ours: float | None
    ours_deviation: float | None
    baseline: float | None
    baseline_deviation: float | None


def _against_estimate(
    result: SystemResult | None, metric: MetricSpec
) -> tuple[float | None, float | None, float | None]:
    """Return (measured, its estimate, deviation) of ``metric`` in ``result``."""
    if result is None or metric.key not in result.values:
        return None, None, None
    measured = result.values[metric.key]
    estimate = result.details.get(metric.key, {}).get("estimate_s")
    if not isinstance(estimate, int | float) or estimate <= 0:
        return measured, None, None
    return measured, float(estimate), measured / estimate - 1.0


def estimate_rows(ours: SystemResult | None, baseline: SystemResult | None) -> list[EstimateRow]:
    """Build one :class:`EstimateRow` per experiment of :data:`THROTTLE_METRICS`.

    Each system is compared with the estimate from its own sizes (its logs' bytes),
    found in ``details[key]["estimate_s"]``.
    """
    rows = []
    for metric in THROTTLE_METRICS:
        mine, my_estimate, my_dev = _against_estimate(ours, metric)
        theirs, their_estimate, their_dev = _against_estimate(baseline, metric)
        estimate = my_estimate if my_estimate is not None else their_estimate
        rows.append(EstimateRow(metric, estimate, mine, my_dev, theirs, their_dev))
    return rows


def format_deviation(value: float | None, tolerance: float) -> str:
    """Format a deviation from the estimate: ``"+3.1% (within ±5%)"``, or ``"-"``."""
    if value is None:
        return "-"
    verdict = "within" if abs(value) <= tolerance else "outside"
    return f"{value * 100:+.1f}% ({verdict} ±{tolerance * 100:g}%)"


def format_value(value: float | None, unit: str) -> str:
    """Format a measured value for the table: ``"12.3 MiB/s"``, ``"6.41 s"``, or ``"-"``."""
    if value is None:
        return "-"
    digits = 2 if unit == "s" or abs(value) < 10 else 1
    return f"{value:.{digits}f} {unit}"


def format_ratio(value: float | None) -> str:
    """Format a ratio for the table: ``"0.42x"``, or ``"-"`` when there is none."""
    return "-" if value is None else f"{value:.2f}x"


def format_target(metric: MetricSpec, meets: bool | None) -> str:
    """Format a target cell: ``">= 0.5: met"``, ``">= 1.0: missed"``, or ``""`` without a target."""
    if metric.target_ratio is None:
        return ""
    verdict = {True: "met", False: "missed", None: "n/a"}[meets]
    return f">= {metric.target_ratio:g}: {verdict}"


def _system_json(result: SystemResult) -> dict[str, Any]:
    return {
        "system": result.system,
        "version": result.version,
        "values": dict(result.values),
        "details": result.details,
        "errors": dict(result.errors),
    }


def report_json(
    machine: dict[str, Any],
    settings: dict[str, Any],
    ours: SystemResult | None,
    baseline: SystemResult | None,
    metrics: tuple[MetricSpec, ...] = METRICS,
) -> dict[str, Any]:
    """Return the whole report as JSON-serialisable data.

    Args:
        machine: machine facts (cores, memory, CPU model, Java and Python versions).
        settings: the workload sizes and client settings used.
        ours: kpo's results, or None when it was not run.
        baseline: Apache Kafka's results, or None when it was not run.
        metrics: the metrics of the comparison (default :data:`METRICS`).

    Returns:
        ``{"machine", "settings", "systems": [...], "comparison": [...]}``, where each
        comparison entry has ``metric``, ``unit``, ``ours``, ``baseline``, ``ratio``,
        ``ratio_meaning``, ``target_ratio`` and ``meets_target``; plus
        ``"throttle_vs_estimate"``: per experiment ``estimate_s``, each system's
        duration (s) and its deviation from the estimate (a fraction); and
        ``"tls_overhead"``: per SASL_SSL metric each system's ``1 - SASL_SSL / PLAINTEXT``.
    """
    comparison = [
        {
            "metric": row.metric.key,
            "label": row.metric.label,
            "unit": row.metric.unit,
            OURS: row.ours,
            BASELINE: row.baseline,
            "ratio": row.ratio,
            "ratio_meaning": ratio_meaning(row.metric),
            "target_ratio": row.metric.target_ratio,
            "meets_target": row.meets_target,
        }
        for row in compare(ours, baseline, metrics)
    ]
    against_estimate = [
        {
            "metric": row.metric.key,
            "label": row.metric.label,
            "estimate_s": row.estimate_s,
            OURS: row.ours,
            f"{OURS}_deviation": row.ours_deviation,
            BASELINE: row.baseline,
            f"{BASELINE}_deviation": row.baseline_deviation,
        }
        for row in estimate_rows(ours, baseline)
    ]
    overheads = [
        {
            "metric": row.secured.key,
            "versus": row.plain.key,
            f"{OURS}_overhead": row.ours,
            f"{BASELINE}_overhead": row.baseline,
            "no_worse_than_kafka": row.no_worse,
        }
        for row in overhead_rows(ours, baseline)
    ]
    systems = [_system_json(r) for r in (ours, baseline) if r is not None]
    return {
        "machine": machine,
        "settings": settings,
        "systems": systems,
        "comparison": comparison,
        "throttle_vs_estimate": against_estimate,
        "tls_overhead": overheads,
    }
