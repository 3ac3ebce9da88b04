"""``spec`` of a BalancingPolicy (``crds/kpo.dev_balancingpolicies.yaml``), field for field.

The model mirrors the CRD (camelCase aliases, the same bounds and defaults), so the
reconciler works on checked values and a policy written by another tool is checked by
the same rules. Durations are Go/Kubernetes-style strings (``"10m"``, ``"1h30m"``);
windows are parsed into :class:`~kpo_operator.balancing.windows.Window` here, so a bad
cron expression or time zone is reported with its field.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from enum import StrEnum
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from kpo_kafka.specs import ClusterRef, parse_spec
from kpo_operator.balancing.windows import Window, WindowError, parse_duration

KIND = "BalancingPolicy"

_DURATION = r"^([0-9]+h)?([0-9]+m)?([0-9]+s)?$"
Duration = Annotated[str, Field(pattern=_DURATION)]
"""A duration as the CRD spells it, e.g. ``"10m"``; ``""`` is zero."""


class Approval(StrEnum):
    """Whether a fix starts by itself or waits for a person."""

    AUTOMATIC = "Automatic"
    """The fix is created and runs."""
    MANUAL = "Manual"
    """The fix is created suspended (``spec.suspend: true``) with its plan; a person resumes it."""


class UsageScope(StrEnum):
    """What the disk usage detector judges: each log dir, or a broker's dirs summed."""

    LOG_DIR = "LogDir"
    BROKER = "Broker"


class _Model(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="forbid", frozen=True)


class DetectorSpec(_Model):
    """Settings shared by every detector.

    Attributes:
        enabled: Run the detector (a listed block is on unless ``enabled: false``).
        threshold: How long the anomaly must last before it is fixed (or reported).
        approval: :class:`Approval` of its fixes.
        respect_windows: Start its fixes only inside ``spec.windows``.
    """

    enabled: bool = True
    threshold: Duration | None = None
    approval: Approval = Approval.AUTOMATIC
    respect_windows: bool | None = Field(default=None, alias="respectWindows")

    def threshold_of(self, default: timedelta) -> timedelta:
        """``threshold`` as a :class:`~datetime.timedelta`, ``default`` when unset."""
        return parse_duration(self.threshold) if self.threshold else default


class ReportSpec(_Model):
    """``underReplicatedPartitions``: a report-only detector (threshold, no fixes)."""

    enabled: bool = True
    threshold: Duration | None = None

    def threshold_of(self, default: timedelta) -> timedelta:
        """``threshold`` as a :class:`~datetime.timedelta`, ``default`` when unset."""
        return parse_duration(self.threshold) if self.threshold else default


class DiskUsageSpec(DetectorSpec):
    """``diskUsage``: a log dir or broker above ``threshold_percent`` of its capacity."""

    threshold_percent: Annotated[int, Field(ge=1, le=99)] = Field(alias="thresholdPercent")
    scope: UsageScope = UsageScope.LOG_DIR


class GoalViolationSpec(DetectorSpec):
    """``goalViolation``: the live brokers' disk bytes above ``tolerance_percent`` over the mean."""

    tolerance_percent: Annotated[int, Field(ge=1, le=1000)] = Field(
        default=10, alias="tolerancePercent"
    )


class Detectors(_Model):
    """``spec.detectors``: each one off unless listed."""

    broker_failure: DetectorSpec | None = Field(default=None, alias="brokerFailure")
    disk_failure: DetectorSpec | None = Field(default=None, alias="diskFailure")
    disk_usage: DiskUsageSpec | None = Field(default=None, alias="diskUsage")
    goal_violation: GoalViolationSpec | None = Field(default=None, alias="goalViolation")
    under_replicated_partitions: ReportSpec | None = Field(
        default=None, alias="underReplicatedPartitions"
    )


class WindowSpec(_Model):
    """One ``spec.windows`` entry: a cron start, a duration, a time zone."""

    schedule: Annotated[str, Field(min_length=1, max_length=200)]
    duration: Annotated[str, Field(min_length=2, pattern=_DURATION)]
    time_zone: Annotated[str, Field(max_length=64)] | None = Field(default=None, alias="timeZone")

    def window(self) -> Window:
        """Return the parsed window.

        Raises:
            WindowError: The schedule, duration or time zone is not valid.
        """
        return Window.parse(self.schedule, self.duration, self.time_zone)


class BudgetSpec(_Model):
    """``spec.budget``: what the policy's fixes may use together.

    Attributes:
        replication_rate: Cluster-wide replication rate of all running fixes, bytes/s
            (``None``: unthrottled).
        concurrent_partition_movements_per_broker: Partition movements into and out of
            each broker at once (Cruise Control's
            ``num.concurrent.partition.movements.per.broker``).
        concurrent_leader_movements: Leadership changes at once over all running fixes.
        max_partitions_per_fix: Partitions per fix object.
    """

    replication_rate: Annotated[int, Field(ge=1024)] | None = Field(
        default=None, alias="replicationRate"
    )
    concurrent_partition_movements_per_broker: Annotated[int, Field(ge=1, le=1000)] = Field(
        default=5, alias="concurrentPartitionMovementsPerBroker"
    )
    concurrent_leader_movements: Annotated[int, Field(ge=1, le=100000)] = Field(
        default=1000, alias="concurrentLeaderMovements"
    )
    max_partitions_per_fix: Annotated[int, Field(ge=1, le=2000)] = Field(
        default=1000, alias="maxPartitionsPerFix"
    )


class MaintenanceSpec(_Model):
    """``spec.maintenance``: the brokers' StatefulSet (pod ordinal + offset = ``broker.id``)."""

    stateful_set: Annotated[str, Field(min_length=1, max_length=253)] | None = Field(
        default=None, alias="statefulSet"
    )
    broker_id_offset: Annotated[int, Field(ge=0)] = Field(default=0, alias="brokerIdOffset")


class BalancingPolicySpec(_Model):
    """``spec`` of a BalancingPolicy.

    Attributes:
        cluster_ref: The KafkaCluster acted on (``None``: the default connection).
        detectors: The detectors and their settings.
        windows: When balancing fixes may start (empty: any time).
        budget: The fixes' shared rate and concurrency.
        maintenance: How to tell a broker restarted on purpose from a failed one.
        preferred_leader_election: Elect preferred leaders when a fix completes.
    """

    cluster_ref: ClusterRef | None = Field(default=None, alias="clusterRef")
    detectors: Detectors = Detectors()
    windows: Annotated[list[WindowSpec], Field(max_length=20)] = []
    budget: BudgetSpec = BudgetSpec()
    maintenance: MaintenanceSpec = MaintenanceSpec()
    preferred_leader_election: bool = Field(default=True, alias="preferredLeaderElection")

    @field_validator("windows")
    @classmethod
    def _windows_parse(cls, windows: list[WindowSpec]) -> list[WindowSpec]:
        for index, entry in enumerate(windows):
            try:
                entry.window()
            except WindowError as exc:
                raise ValueError(f"windows[{index}]: {exc}") from exc
        return windows

    def parsed_windows(self) -> list[Window]:
        """Return the windows, parsed (checked when the spec was parsed)."""
        return [w.window() for w in self.windows]

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> BalancingPolicySpec:
        """Parse a whole object (``{"spec": {...}}``) or a bare spec dict.

        Raises:
            SpecError: The spec does not match the CRD schema; ``errors`` names each field.
        """
        return parse_spec(cls, KIND, obj)
