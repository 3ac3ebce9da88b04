"""kstatus-style conditions for both resources' ``status.conditions``.

kstatus (the convention Argo CD, Flux and ``kubectl wait`` read) treats an object
as in progress while ``Reconciling`` is True, failed while ``Stalled`` is True, and
current otherwise; ``Ready`` says the object settled. PartitionReassignment adds
``Completed`` so that ``kubectl wait --for=condition=Completed`` returns when the
move is done. Entries follow metav1.Condition: ``type``, ``status`` ("True",
"False", "Unknown"), ``reason`` (CamelCase), ``message``, ``observedGeneration``,
``lastTransitionTime`` (RFC 3339, kept while the status does not change).

Phase -> conditions of a PartitionReassignment:

=========== ======= =========== ======= =========
phase       Ready   Reconciling Stalled Completed
=========== ======= =========== ======= =========
Pending     False   True        False   False
Suspended   False   False       False   False
Moving      False   True        False   False
Cancelling  False   True        False   False
Completed   True    False       False   True
Cancelled   True    False       False   False
Failed      False   False       True    False
=========== ======= =========== ======= =========

A suspended object is settled (kstatus Current) but not Ready: it waits for a person.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kpo_kafka.states import ConditionType, Phase
from kpo_operator.progress import format_time


class UnknownPhaseError(ValueError):
    """A phase outside :class:`Phase` or a quota state outside Ready/Reconciling/Stalled."""


@dataclass(frozen=True)
class Condition:
    """A desired condition, before times and generation are stamped.

    Attributes:
        type: Ready, Reconciling, Stalled or Completed.
        status: "True", "False" or "Unknown".
        reason: CamelCase machine-readable reason.
        message: Human-readable detail.
    """

    type: str
    status: str
    reason: str
    message: str = ""


_TABLE: dict[Phase, tuple[bool, bool, bool, bool]] = {
    Phase.PENDING: (False, True, False, False),
    Phase.SUSPENDED: (False, False, False, False),
    Phase.MOVING: (False, True, False, False),
    Phase.CANCELLING: (False, True, False, False),
    Phase.COMPLETED: (True, False, False, True),
    Phase.CANCELLED: (True, False, False, False),
    Phase.FAILED: (False, False, True, False),
}


def _flag(value: bool) -> str:
    return "True" if value else "False"


def reassignment_conditions(phase: str, message: str = "") -> list[Condition]:
    """Return the four conditions of a PartitionReassignment in ``phase`` (table above).

    Every condition's reason is the phase name, its message ``message``.

    Raises:
        UnknownPhaseError: ``phase`` is not one of the CRD's phases.
    """
    try:
        key = Phase(phase)
    except ValueError as exc:
        raise UnknownPhaseError(f"unknown phase {phase!r}") from exc
    flags = _TABLE[key]
    types = (
        ConditionType.READY,
        ConditionType.RECONCILING,
        ConditionType.STALLED,
        ConditionType.COMPLETED,
    )
    return [Condition(t, _flag(f), key.value, message) for t, f in zip(types, flags, strict=True)]


def quota_conditions(state: str, reason: str, message: str = "") -> list[Condition]:
    """Return the three conditions of a TopicReplicaQuota.

    Args:
        state: A :class:`~kpo_kafka.states.ConditionType`: ``Ready`` (applied
            everywhere), ``Reconciling`` (writing) or ``Stalled`` (a write failed);
            exactly that condition is True.
        reason: CamelCase reason, e.g. ``Applied``, ``DriftRepaired``, ``LowerRateWins``.
        message: Detail, e.g. the conflicts' messages.

    Raises:
        UnknownPhaseError: ``state`` is none of the three.
    """
    types = (ConditionType.READY, ConditionType.RECONCILING, ConditionType.STALLED)
    if state not in types:
        raise UnknownPhaseError(f"unknown quota state {state!r}")
    return [Condition(t, _flag(t == state), reason, message) for t in types]


def stamp_conditions(
    existing: Sequence[Mapping[str, Any]],
    desired: Iterable[Condition],
    generation: int,
    now: datetime,
) -> list[dict[str, Any]]:
    """Merge desired conditions into ``status.conditions``.

    ``lastTransitionTime`` is kept from ``existing`` when a condition's status is
    unchanged and set to ``now`` otherwise; ``observedGeneration`` is ``generation``.
    Existing conditions of other types are kept as they are, after the desired ones.

    Returns:
        New list of dicts (``existing`` is not modified).
    """
    old = {c.get("type"): c for c in existing}
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for cond in desired:
        seen.add(cond.type)
        prior = old.get(cond.type)
        when = format_time(now)
        if prior is not None and prior.get("status") == cond.status:
            when = str(prior.get("lastTransitionTime") or when)
        out.append(
            {
                "type": str(cond.type),
                "status": cond.status,
                "reason": cond.reason,
                "message": cond.message,
                "observedGeneration": generation,
                "lastTransitionTime": when,
            }
        )
    out.extend(dict(c) for c in existing if c.get("type") not in seen)
    return out
