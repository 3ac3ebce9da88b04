"""Reading and writing a PartitionReassignment's ``status`` (pure).

``status.partitions`` is the operator's memory between reconciles and across
restarts: each entry records the target it accepted (RAR), the replicas the
partition had before (OAR) and a state:

========== ==============================================================
state      meaning
========== ==============================================================
Pending    accepted, not yet submitted (written *before* the submission,
           so an operator that dies in between submits it on restart)
Moving     submitted with AlterPartitionReassignments, in flight
Completed  AR = RAR, nothing in flight (and the wanted log dirs reached)
Failed     Kafka refused it, or it ended without reaching its target
Cancelled  reverted to OAR by a cancellation
========== ==============================================================
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from kpo_kafka.specs import PartitionReassignmentSpec, PartitionTarget, SpecError
from kpo_kafka.topic_partition import TopicPartition
from kpo_operator.conditions import Phase, reassignment_conditions, stamp_conditions
from kpo_operator.progress import PartitionProgress, Totals, format_time

PENDING = "Pending"
MOVING = "Moving"
COMPLETED = "Completed"
FAILED = "Failed"
CANCELLED = "Cancelled"

ACTIVE_STATES = frozenset({PENDING, MOVING})
"""Partition states of accepted work not finished yet."""
_ENDED = frozenset({Phase.COMPLETED, Phase.CANCELLED, Phase.FAILED})


@dataclass(frozen=True)
class Accepted:
    """One ``status.partitions`` entry as the operator accepted it.

    Attributes:
        target: RAR, the accepted target replicas.
        original: OAR, the replicas before the reassignment.
        state: One of the states in the module's table.
        message: Error or detail, empty if none.
        log_dirs: The accepted target log dirs (``targetLogDirs``), if any.
    """

    target: tuple[int, ...]
    original: tuple[int, ...]
    state: str
    message: str = ""
    log_dirs: tuple[str, ...] | None = None

    def as_target(self, tp: TopicPartition) -> PartitionTarget:
        """Return the entry as a spec entry (RAR and log dirs)."""
        return PartitionTarget(
            topic=tp[0],
            partition=tp[1],
            replicas=list(self.target),
            logDirs=list(self.log_dirs) if self.log_dirs else None,
        )


def accepted_partitions(status: Mapping[str, Any]) -> dict[TopicPartition, Accepted]:
    """Parse ``status.partitions`` into ``(topic, partition) -> Accepted``.

    Entries without a target (e.g. written by hand) are skipped.
    """
    result: dict[TopicPartition, Accepted] = {}
    for entry in status.get("partitions") or []:
        target = tuple(entry.get("targetReplicas") or ())
        if not target or "topic" not in entry or "partition" not in entry:
            continue
        result[TopicPartition(str(entry["topic"]), int(entry["partition"]))] = Accepted(
            target,
            tuple(entry.get("originalReplicas") or ()),
            str(entry.get("state") or PENDING),
            str(entry.get("message") or ""),
            tuple(entry["targetLogDirs"]) if entry.get("targetLogDirs") else None,
        )
    return result


def accepted_spec(status: Mapping[str, Any]) -> PartitionReassignmentSpec | None:
    """Return the work in flight as a spec: Pending/Moving entries and ``status.throttle``.

    This, not the current ``spec``, is what the object's throttles are computed from,
    so that an edit not (yet) accepted changes nothing in the cluster. ``None`` when
    nothing is Pending or Moving.
    """
    partitions = [
        a.as_target(tp).model_dump(by_alias=True, exclude_none=True)
        for tp, a in accepted_partitions(status).items()
        if a.state in ACTIVE_STATES
    ]
    if not partitions:
        return None
    throttle = status.get("throttle") or None
    try:
        return PartitionReassignmentSpec.from_object(
            {"partitions": partitions, "throttle": throttle}
        )
    except SpecError:
        return None


def partition_entry(
    progress: PartitionProgress,
    state: str,
    message: str = "",
    log_dirs: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Build a ``status.partitions[]`` entry from measured progress and the operator's state."""
    entry = progress.to_status()
    entry["state"] = state
    if message:
        entry["message"] = message
    if log_dirs:
        entry["targetLogDirs"] = list(log_dirs)
    return entry


@dataclass
class StatusUpdate:
    """The status a reconcile wants written.

    Attributes:
        phase: The new ``status.phase``.
        message: ``status.message``.
        observed_generation: The spec generation this status reflects.
        partitions: The ``status.partitions`` entries.
        totals: Sums over partitions, or ``None`` to leave ``status.totals`` unchanged.
        rate: Recent replication rate, bytes/s.
        eta: Predicted completion time at ``rate``.
        predicted_duration: ``"3m20s"``-style time left at the requested throttle.
        start_time: When the reassignment was first submitted.
        completion_time: When it ended (Completed, Cancelled or Failed after moving).
        reason: CamelCase reason of the conditions; the phase name when empty.
        throttle: The accepted ``spec.throttle`` (``status.throttle``); ``None`` keeps it,
            ``{}`` clears it.
    """

    phase: Phase
    message: str
    observed_generation: int
    partitions: Sequence[Mapping[str, Any]] | None = None
    totals: Totals | None = None
    rate: float | None = None
    eta: datetime | None = None
    predicted_duration: str | None = None
    start_time: str | None = None
    completion_time: str | None = None
    reason: str = ""
    throttle: Mapping[str, int] | None = None


def render_status(old: Mapping[str, Any], update: StatusUpdate, now: datetime) -> dict[str, Any]:
    """Return the full new status: ``old`` with ``update`` applied and conditions stamped.

    Keys the update clears (``eta``, ``predictedDuration``) are set to ``None`` so
    that a JSON merge patch (RFC 7386) removes them.
    """
    new: dict[str, Any] = {k: v for k, v in old.items() if v is not None}
    new["phase"] = update.phase.value
    new["message"] = update.message
    new["observedGeneration"] = update.observed_generation
    if update.partitions is not None:
        new["partitions"] = [dict(p) for p in update.partitions]
    if update.totals is not None:
        new["totals"] = update.totals.to_status(update.rate)
    new["eta"] = format_time(update.eta) if update.eta is not None else None
    new["predictedDuration"] = update.predicted_duration
    if update.start_time is not None:
        new["startTime"] = update.start_time
    if update.completion_time is not None:
        new["completionTime"] = update.completion_time
    elif update.phase not in _ENDED:
        new["completionTime"] = None
    if update.throttle is not None:  # {} clears it
        new["throttle"] = dict(update.throttle) or None
    new["conditions"] = stamp_conditions(
        old.get("conditions") or [],
        [
            replace(c, reason=update.reason) if update.reason else c
            for c in reassignment_conditions(update.phase.value, update.message)
        ],
        update.observed_generation,
        now,
    )
    return new


def status_changed(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether writing ``new`` would change ``old`` (``None`` values mean "absent")."""
    return {k: v for k, v in new.items() if v is not None} != {
        k: v for k, v in old.items() if v is not None
    }
