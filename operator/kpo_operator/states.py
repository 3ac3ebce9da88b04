"""The status vocabulary of both custom resources, as enums (the CRDs' words, exactly).

- :class:`Phase`: ``status.phase`` of a PartitionReassignment;
- :class:`MoveState`: ``status.partitions[].state``, one partition of a reassignment;
- :class:`ConditionType`: the kstatus condition types of ``status.conditions``.

The members are ``StrEnum``: each equals (and hashes as) its string, so a status read
back from the API server compares equal to them, and they serialise as that string.
"""

from __future__ import annotations

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

    ``PENDING``, ``MOVING`` and ``COMPLETED`` are also what a measurement of the
    cluster finds (:func:`kpo_operator.progress.partition_progress`): not in flight
    and not at the target, in flight (KIP-455 adding/removing replicas), at the target.
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
