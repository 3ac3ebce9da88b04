"""The status vocabulary of both custom resources, as enums (the CRDs' words, exactly).

- :class:`Phase`: ``status.phase`` of a PartitionReassignment;
- :class:`MoveState`: ``status.partitions[].state``, one partition of a reassignment;
- :class:`ConditionType`: the kstatus condition types of ``status.conditions``;
- :data:`PHASE_VALID_PREVIOUS`: which phase may follow which, checked at every status
  write (:func:`check_phase_transition`), as Kafka's controller state machines check theirs.

The members are ``StrEnum``: each equals (and hashes as) its string, so a status read
back from the API server compares equal to them, and they serialise as that string.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum


class Phase(StrEnum):
    """``status.phase`` of a PartitionReassignment (the CRD's enum)."""

    PENDING = "Pending"
    SUSPENDED = "Suspended"
    MOVING = "Moving"
    COMPLETED = "Completed"
    CANCELLING = "Cancelling"
    CANCELLED = "Cancelled"
    FAILED = "Failed"


FINAL_PHASES = frozenset({Phase.COMPLETED, Phase.CANCELLED})
"""Phases after which nothing is done any more (``Failed`` waits for a new spec)."""

THROTTLING_PHASES = frozenset({Phase.MOVING, Phase.CANCELLING})
"""Phases whose accepted targets are (or may be) in flight: their throttles stay applied."""


class MoveState(StrEnum):
    """``status.partitions[].state``: one partition of a reassignment.

    ``PENDING``, ``MOVING`` and ``COMPLETED`` are also what the operator's measurement of
    the cluster finds: not in flight and not at the target, in flight (KIP-455
    adding/removing replicas), at the target.
    """

    PENDING = "Pending"
    """Accepted, not yet submitted (written *before* the submission)."""
    MOVING = "Moving"
    """Submitted with AlterPartitionReassignments, in flight."""
    COMPLETED = "Completed"
    """AR = RAR, nothing in flight (and the wanted log dirs reached)."""
    FAILED = "Failed"
    """Kafka refused it, or it ended without reaching its target."""
    CANCELLED = "Cancelled"
    """Reverted to OAR by a cancellation."""


ACTIVE_STATES = frozenset({MoveState.PENDING, MoveState.MOVING})
"""Partition states of accepted work not finished yet."""


class ConditionType(StrEnum):
    """kstatus condition types (``status.conditions[].type``) of both resources."""

    READY = "Ready"
    RECONCILING = "Reconciling"
    STALLED = "Stalled"
    COMPLETED = "Completed"
    """PartitionReassignment only, for ``kubectl wait --for=condition=Completed``."""
    CORDONED = "Cordoned"
    """PartitionReassignment draining brokers only: their ``cordoned.log.dirs`` (KIP-1066)."""


PHASE_VALID_PREVIOUS: Mapping[Phase, frozenset[Phase | None]] = {
    Phase.PENDING: frozenset({None, Phase.PENDING}),
    Phase.SUSPENDED: frozenset({None, Phase.PENDING, Phase.SUSPENDED, Phase.FAILED}),
    Phase.MOVING: frozenset(
        {None, Phase.PENDING, Phase.SUSPENDED, Phase.MOVING, Phase.CANCELLING, Phase.FAILED}
    ),
    Phase.COMPLETED: frozenset({Phase.MOVING, Phase.CANCELLING}),
    Phase.CANCELLING: frozenset({Phase.MOVING, Phase.CANCELLING}),
    Phase.CANCELLED: frozenset(
        {None, Phase.PENDING, Phase.SUSPENDED, Phase.MOVING, Phase.CANCELLING, Phase.FAILED}
    ),
    Phase.FAILED: frozenset(
        {None, Phase.PENDING, Phase.SUSPENDED, Phase.MOVING, Phase.CANCELLING, Phase.FAILED}
    ),
}
"""Target phase -> the phases it may be written over (``None``: a status without a phase).

As Kafka's ``PartitionStateMachine`` lists each state's valid previous states:

- ``Pending``: only written on an object without a phase (its first step was refused by
  Kafka, e.g. a missing ACL), and kept while it is refused;
- ``Suspended``: a plan, made for a new object or a new generation of one not yet moving
  (Pending, Suspended, Failed);
- ``Moving``: the accepted targets are recorded (write-ahead), from any phase not final,
  and kept while they move; a Cancelling object whose cancel is withdrawn (or whose
  accepted work is tracked again) is Moving again;
- ``Completed``: every accepted partition is done, while Moving (or Cancelling: what was in
  flight completed before the cancellation reached it);
- ``Cancelling``: ``spec.cancel`` or a deletion while partitions are in flight;
- ``Cancelled``: cancelled before anything was submitted, or once nothing is in flight;
- ``Failed``: an invalid spec or edit, or partitions Kafka refused or that ended away from
  their target; a new generation of a Failed object starts again from it.

``Completed`` and ``Cancelled`` are final: no phase follows them.
"""


class IllegalPhaseTransitionError(ValueError):
    """A ``status.phase`` write that :data:`PHASE_VALID_PREVIOUS` does not allow.

    Attributes:
        current: The phase in the status (``None``: none yet).
        target: The phase to be written.
    """

    def __init__(self, current: Phase | None, target: Phase) -> None:
        was = current.value if current is not None else "no phase"
        super().__init__(f"illegal phase transition from {was} to {target.value}")
        self.current = current
        self.target = target


def is_valid_phase_transition(current: Phase | None, target: Phase) -> bool:
    """Return whether ``target`` may be written over ``current`` (``None``: no phase yet)."""
    return current in PHASE_VALID_PREVIOUS[target]


def check_phase_transition(current: Phase | None, target: Phase) -> None:
    """Check a phase write against :data:`PHASE_VALID_PREVIOUS`.

    Raises:
        IllegalPhaseTransitionError: ``target`` may not follow ``current``.
    """
    if current not in PHASE_VALID_PREVIOUS[target]:
        raise IllegalPhaseTransitionError(current, target)
