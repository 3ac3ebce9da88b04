"""Reading and writing a PartitionReassignment's ``status`` (pure).

A step says what it wants written as a :class:`StatusUpdate`; :func:`updated_status`
applies it to the typed status (:class:`~kpo_operator.status_models.ReassignmentStatus`),
checking the phase transition against :data:`~kpo_kafka.states.PHASE_VALID_PREVIOUS`
(Kafka's controller checks its partition states the same way), and stamps the kstatus
conditions. ``status.partitions`` is the operator's memory between reconciles and across
restarts; its entries are :class:`~kpo_operator.progress.PartitionStatus`
(:func:`accepted_partitions` reads them, :func:`accepted_spec` turns the active ones into
the spec the object's throttles are computed from). :func:`partitions_due` and
:func:`status_patch` keep the PATCHes of a moving object small.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from kpo_kafka.specs import PartitionReassignmentSpec, SpecError
from kpo_kafka.states import ACTIVE_STATES, Phase, check_phase_transition
from kpo_kafka.topic_partition import TopicPartition
from kpo_operator.conditions import reassignment_conditions, stamp_conditions
from kpo_operator.progress import PartitionStatus, Totals, format_time
from kpo_operator.status_models import ReassignmentStatus, ReassignmentThrottle

_ENDED = frozenset({Phase.COMPLETED, Phase.CANCELLED, Phase.FAILED})


def accepted_partitions(status: Mapping[str, Any]) -> dict[TopicPartition, PartitionStatus]:
    """Parse ``status.partitions`` into ``(topic, partition) -> PartitionStatus``.

    Unusable entries (:meth:`PartitionStatus.from_status`) are skipped.
    """
    return parse_partitions(status.get("partitions") or [])


def parse_partitions(
    entries: Iterable[Mapping[str, Any]],
) -> dict[TopicPartition, PartitionStatus]:
    """Parse ``status.partitions`` entries (:func:`accepted_partitions` of a status's list)."""
    result: dict[TopicPartition, PartitionStatus] = {}
    for entry in entries:
        parsed = PartitionStatus.from_status(entry)
        if parsed is not None:
            result[parsed.key] = parsed
    return result


def accepted_spec(status: Mapping[str, Any]) -> PartitionReassignmentSpec | None:
    """Return the work in flight as a spec: Pending/Moving entries and ``status.throttle``.

    This, not the current ``spec``, is what the object's throttles are computed from,
    so that an edit not (yet) accepted changes nothing in the cluster. ``None`` when
    nothing is Pending or Moving.
    """
    return spec_of_accepted(accepted_partitions(status).values(), status.get("throttle"))


def spec_of_accepted(
    entries: Iterable[PartitionStatus], throttle: Mapping[str, Any] | None
) -> PartitionReassignmentSpec | None:
    """Return the Pending/Moving ``entries`` with ``throttle`` as a spec (:func:`accepted_spec`).

    Args:
        entries: Parsed ``status.partitions`` entries.
        throttle: ``status.throttle`` (camelCase keys, bytes/s), ``None`` when unthrottled.
    """
    partitions = [
        a.as_target().model_dump(by_alias=True, exclude_none=True)
        for a in entries
        if a.state in ACTIVE_STATES
    ]
    if not partitions:
        return None
    try:
        return PartitionReassignmentSpec.from_object(
            {"partitions": partitions, "throttle": throttle or None}
        )
    except SpecError:
        return None


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
    partitions: Sequence[PartitionStatus] | None = None
    totals: Totals | None = None
    rate: float | None = None
    eta: datetime | None = None
    predicted_duration: str | None = None
    start_time: str | None = None
    completion_time: str | None = None
    reason: str = ""
    throttle: Mapping[str, int] | None = None


def updated_status(
    old: ReassignmentStatus, update: StatusUpdate, now: datetime
) -> ReassignmentStatus:
    """Return the new status: ``old`` with ``update`` applied and conditions stamped.

    ``partitionsUpdateTime`` is set to ``now`` when the update's partition entries differ
    from ``old``'s. ``old`` is not changed.

    Raises:
        IllegalPhaseTransitionError: ``update.phase`` may not follow ``old.phase``
            (:data:`~kpo_kafka.states.PHASE_VALID_PREVIOUS`).
    """
    check_phase_transition(old.phase, update.phase)
    new = old.model_copy()
    new.phase = update.phase
    new.message = update.message
    new.observed_generation = update.observed_generation
    if update.partitions is not None:
        rendered = [p.to_status() for p in update.partitions]
        if rendered != old.partitions:
            new.partitions = rendered
            new.partitions_update_time = format_time(now)
    if update.totals is not None:
        new.totals = update.totals.to_model(update.rate)
    new.eta = format_time(update.eta) if update.eta is not None else None
    new.predicted_duration = update.predicted_duration
    if update.start_time is not None:
        new.start_time = update.start_time
    if update.completion_time is not None:
        new.completion_time = update.completion_time
    elif update.phase not in _ENDED:
        new.completion_time = None
    if update.throttle is not None:  # {} clears it
        new.throttle = (
            ReassignmentThrottle.from_status(update.throttle) if update.throttle else None
        )
    stamped = stamp_conditions(
        old.condition_dicts(),
        [
            replace(c, reason=update.reason) if update.reason else c
            for c in reassignment_conditions(update.phase.value, update.message)
        ],
        update.observed_generation,
        now,
    )
    new.set_conditions(stamped)
    return new


def removed_keys(new: ReassignmentStatus, update: StatusUpdate) -> dict[str, None]:
    """Return the keys ``update`` clears, each ``None``: a JSON merge patch (RFC 7386) removes them.

    ``eta`` and ``predictedDuration`` when the update has none, ``completionTime`` when the
    phase did not end, ``throttle`` when the update clears it (``{}``).
    """
    out: dict[str, None] = {}
    if new.eta is None:
        out["eta"] = None
    if new.predicted_duration is None:
        out["predictedDuration"] = None
    if new.completion_time is None and update.phase not in _ENDED:
        out["completionTime"] = None
    if update.throttle is not None and not update.throttle:
        out["throttle"] = None
    return out


def render_status(old: Mapping[str, Any], update: StatusUpdate, now: datetime) -> dict[str, Any]:
    """Return the full new status dict: ``old`` with ``update`` applied (:func:`updated_status`).

    Keys the update clears (:func:`removed_keys`) are set to ``None`` so that a JSON merge
    patch (RFC 7386) removes them.

    Raises:
        IllegalPhaseTransitionError: ``update.phase`` may not follow ``old``'s phase.
    """
    new = updated_status(ReassignmentStatus.from_status(old), update, now)
    return {**new.to_status(), **removed_keys(new, update)}


#: Positions of the byte counters in a :class:`PartitionStatus` (the rest is its state).
_BYTES_FROM = PartitionStatus._fields.index("bytes_done")
_BYTES_TO = PartitionStatus._fields.index("bytes_total") + 1


def partitions_due(
    old: Mapping[TopicPartition, PartitionStatus],
    new: Sequence[PartitionStatus],
    written_at: datetime | None,
    now: datetime,
    interval_s: float,
) -> bool:
    """Whether a step writes ``new`` as ``status.partitions`` (else it leaves them as they are).

    Writing up to 2,000 entries at every poll made each status PATCH (and the watch
    event every client decodes from it) as large as the object, for byte counters alone.
    So the entries are written when something other than their byte counters changed
    (an entry added or dropped; state, replica sets, leader, ISR, message or log dirs:
    a submission, a completion, a failure), or when they were last written ``interval_s``
    or more before ``now`` (``written_at``: ``status.partitionsUpdateTime``, ``None``
    when never), or always when ``interval_s`` is 0. Nothing the operator reads back
    from ``status.partitions`` depends on the byte counters.

    Args:
        old: The entries as last written (parsed).
        new: The entries measured in this step.
        written_at: When the entries were last written.
        now: The step's time.
        interval_s: ``partition_status_interval_s``, seconds.
    """
    if interval_s <= 0 or written_at is None or (now - written_at).total_seconds() >= interval_s:
        return True
    if len(new) != len(old):
        return True
    for entry in new:
        prior = old.get(TopicPartition(entry.topic, entry.partition))
        if (
            prior is None
            or entry[:_BYTES_FROM] != prior[:_BYTES_FROM]
            or entry[_BYTES_TO:] != prior[_BYTES_TO:]
        ):
            return True
    return False


def status_patch(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """Return the JSON merge patch (RFC 7386) writing ``new`` over ``old``.

    Every key of ``new`` (``None`` values remove keys), except ``partitions`` when they
    are ``old``'s (a step that did not rewrite them, :func:`partitions_due`): a merge patch
    leaves an absent key as it is, so the up to 2,000 entries are not sent again. The
    other keys are sent even when unchanged: the steps edit some (``message``,
    ``cordon``) in the status they hold before writing it.
    """
    if "partitions" in new and new["partitions"] == old.get("partitions"):
        return {k: v for k, v in new.items() if k != "partitions"}
    return dict(new)


def status_changed(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether writing ``new`` would change ``old`` (``None`` values mean "absent")."""
    return {k: v for k, v in new.items() if v is not None} != {
        k: v for k, v in old.items() if v is not None
    }
