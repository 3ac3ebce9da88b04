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

from kpo_operator.conditions import Phase, reassignment_conditions, stamp_conditions
from kpo_operator.model import TopicPartition
from kpo_operator.progress import PartitionProgress, Totals, format_time

PENDING = "Pending"
MOVING = "Moving"
COMPLETED = "Completed"
FAILED = "Failed"
CANCELLED = "Cancelled"

ACTIVE_STATES = frozenset({PENDING, MOVING})
"""Partition states of accepted work not finished yet."""


@dataclass(frozen=True)
class Accepted:
    """One ``status.partitions`` entry as the operator accepted it.

    Attributes:
        target: RAR, the accepted target replicas.
        original: OAR, the replicas before the reassignment.
        state: One of the states in the module's table.
        message: Error or detail, empty if none.
    """

    target: tuple[int, ...]
    original: tuple[int, ...]
    state: str
    message: str = ""


def accepted_partitions(status: Mapping[str, Any]) -> dict[TopicPartition, Accepted]:
    """Parse ``status.partitions`` into ``(topic, partition) -> Accepted``.

    Entries without a target (e.g. written by hand) are skipped.
    """
    result: dict[TopicPartition, Accepted] = {}
    for entry in status.get("partitions") or []:
        target = tuple(entry.get("targetReplicas") or ())
        if not target or "topic" not in entry or "partition" not in entry:
            continue
        result[(str(entry["topic"]), int(entry["partition"]))] = Accepted(
            target,
            tuple(entry.get("originalReplicas") or ()),
            str(entry.get("state") or PENDING),
            str(entry.get("message") or ""),
        )
    return result


def partition_entry(progress: PartitionProgress, state: str, message: str = "") -> dict[str, Any]:
    """Build a ``status.partitions[]`` entry from measured progress and the operator's state."""
    entry = progress.to_status()
    entry["state"] = state
    if message:
        entry["message"] = message
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
