"""Reading and writing a PartitionReassignment's ``status`` (pure).

``status.partitions`` is the operator's memory between reconciles and across
restarts: each entry (:class:`PartitionStatus`) records the target it accepted
(RAR), the replicas the partition had before (OAR) and a
:class:`~kpo_operator.states.MoveState`:

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
from typing import Any, NamedTuple

from kpo_kafka.specs import PartitionReassignmentSpec, PartitionTarget, SpecError
from kpo_kafka.topic_partition import TopicPartition
from kpo_operator.conditions import reassignment_conditions, stamp_conditions
from kpo_operator.progress import PartitionProgress, Totals, format_time
from kpo_operator.states import ACTIVE_STATES, MoveState, Phase

_ENDED = frozenset({Phase.COMPLETED, Phase.CANCELLED, Phase.FAILED})
_MOVE_STATES: dict[str, MoveState] = {s.value: s for s in MoveState}
"""``state`` text -> MoveState (a dict lookup: calling the enum is slow for 2,000 entries)."""


class PartitionStatus(NamedTuple):
    """One ``status.partitions[]`` entry (the CRD's schema, typed).

    Immutable, as a frozen dataclass would be, but a named tuple: a step builds one per
    accepted partition (up to 2,000), and a frozen dataclass's ``__init__`` cost four
    times as much. Change one with ``_replace``.

    Attributes:
        topic: Topic name.
        partition: Partition index.
        state: The operator's state of this partition (module table).
        original_replicas: OAR, the replicas before the reassignment.
        target_replicas: RAR, the accepted target replicas.
        adding: Replicas still being added (KIP-455 ``addingReplicas``).
        removing: Replicas still to be removed (``removingReplicas``).
        isr: The in-sync replicas when measured.
        leader: The leader's broker id, -1 if none.
        bytes_done: Bytes copied to the adding replicas; ``None``: not written.
        bytes_total: Bytes the adding replicas must copy; ``None``: not written.
        message: Error or detail, empty if none (then not written).
        target_log_dirs: The accepted target log dirs (``targetLogDirs``), if any.
    """

    topic: str
    partition: int
    state: MoveState
    original_replicas: tuple[int, ...]
    target_replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    leader: int = -1
    bytes_done: int | None = None
    bytes_total: int | None = None
    message: str = ""
    target_log_dirs: tuple[str, ...] | None = None

    @property
    def key(self) -> TopicPartition:
        """The ``(topic, partition)`` key of this entry."""
        return TopicPartition(self.topic, self.partition)

    def as_target(self) -> PartitionTarget:
        """Return the entry as a spec entry (RAR and log dirs).

        Not validated again (``model_construct``): the target was validated when it was
        accepted, and a step turns each of up to 2,000 entries into one.
        """
        return PartitionTarget.model_construct(
            topic=self.topic,
            partition=self.partition,
            replicas=list(self.target_replicas),
            log_dirs=list(self.target_log_dirs) if self.target_log_dirs else None,
        )

    @classmethod
    def from_progress(
        cls,
        progress: PartitionProgress,
        state: MoveState,
        message: str = "",
        log_dirs: Sequence[str] | None = None,
    ) -> PartitionStatus:
        """Build an entry from measured progress and the operator's state."""
        topic, partition, _, original, target, adding, removing, isr, leader, done, total = progress
        dirs = tuple(log_dirs) if log_dirs else None
        return cls(
            topic,
            partition,
            state,
            original,
            target,
            adding,
            removing,
            isr,
            leader,
            done,
            total,
            message,
            dirs,
        )

    @classmethod
    def from_status(cls, entry: Mapping[str, Any]) -> PartitionStatus | None:
        """Parse one ``status.partitions[]`` entry; ``None`` when it is unusable.

        Entries without topic, partition or target, or with a state outside
        :class:`~kpo_operator.states.MoveState` (e.g. written by hand), are unusable.
        A missing state reads as Pending.
        """
        target = tuple(entry.get("targetReplicas") or ())
        if not target or "topic" not in entry or "partition" not in entry:
            return None
        try:
            state = _MOVE_STATES[entry.get("state") or MoveState.PENDING]
        except (KeyError, TypeError):
            return None
        done, total = entry.get("bytesDone"), entry.get("bytesTotal")
        return cls(
            str(entry["topic"]),
            int(entry["partition"]),
            state,
            tuple(entry.get("originalReplicas") or ()),
            target,
            tuple(entry.get("addingReplicas") or ()),
            tuple(entry.get("removingReplicas") or ()),
            tuple(entry.get("isr") or ()),
            int(entry.get("leader", -1)),
            None if done is None else int(done),
            None if total is None else int(total),
            str(entry.get("message") or ""),
            tuple(entry["targetLogDirs"]) if entry.get("targetLogDirs") else None,
        )

    def to_status(self) -> dict[str, Any]:
        """Return the ``status.partitions[]`` entry (camelCase keys, absent ones left out)."""
        out: dict[str, Any] = {
            "topic": self.topic,
            "partition": self.partition,
            "state": str(self.state),
            "originalReplicas": list(self.original_replicas),
            "targetReplicas": list(self.target_replicas),
            "addingReplicas": list(self.adding),
            "removingReplicas": list(self.removing),
            "isr": list(self.isr),
            "leader": self.leader,
        }
        if self.bytes_done is not None:
            out["bytesDone"] = self.bytes_done
        if self.bytes_total is not None:
            out["bytesTotal"] = self.bytes_total
        if self.message:
            out["message"] = self.message
        if self.target_log_dirs:
            out["targetLogDirs"] = list(self.target_log_dirs)
        return out


def accepted_partitions(status: Mapping[str, Any]) -> dict[TopicPartition, PartitionStatus]:
    """Parse ``status.partitions`` into ``(topic, partition) -> PartitionStatus``.

    Unusable entries (:meth:`PartitionStatus.from_status`) are skipped.
    """
    result: dict[TopicPartition, PartitionStatus] = {}
    for entry in status.get("partitions") or []:
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
    partitions = [
        a.as_target().model_dump(by_alias=True, exclude_none=True)
        for a in accepted_partitions(status).values()
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


def render_status(old: Mapping[str, Any], update: StatusUpdate, now: datetime) -> dict[str, Any]:
    """Return the full new status: ``old`` with ``update`` applied and conditions stamped.

    Keys the update clears (``eta``, ``predictedDuration``) are set to ``None`` so
    that a JSON merge patch (RFC 7386) removes them. ``partitionsUpdateTime`` is set to
    ``now`` when the update's partition entries differ from ``old``'s.
    """
    new: dict[str, Any] = {k: v for k, v in old.items() if v is not None}
    new["phase"] = update.phase.value
    new["message"] = update.message
    new["observedGeneration"] = update.observed_generation
    if update.partitions is not None:
        rendered = [p.to_status() for p in update.partitions]
        if rendered != old.get("partitions"):
            new["partitions"] = rendered
            new["partitionsUpdateTime"] = format_time(now)
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
