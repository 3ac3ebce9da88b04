"""``docs/reference/reasons.md``: every reason the operator sets, per resource and condition."""

from __future__ import annotations

from tools.docgen.common import code, header, table
from tools.docgen.reason_notes import BP, EVENT, KC, NOTES, PHASE, PR, TRQ, Note
from tools.docgen.reason_scan import Use, scan

from kpo_kafka.states import PHASE_VALID_PREVIOUS, Phase
from kpo_operator.conditions import reassignment_conditions

PAGE = "docs/reference/reasons.md"
SOURCES = (
    "operator/kpo_operator/",
    "kafka-client/kpo_kafka/states.py",
    "tools/docgen/reason_notes.py",
)

#: The sections of the page, in order.
_SECTIONS = (
    (PR, "PartitionReassignment"),
    (TRQ, "TopicReplicaQuota"),
    (KC, "KafkaCluster"),
    (BP, "BalancingPolicy"),
    (EVENT, "Events"),
)


class MissingNoteError(KeyError):
    """A reason of the operator has no entry in :data:`tools.docgen.reason_notes.NOTES`."""


def _modules(uses: list[Use]) -> str:
    return ", ".join(code(m) for m in sorted({u.module for u in uses}))


def _phase_conditions(phase: str) -> str:
    """Return the conditions of a PartitionReassignment in ``phase``, as the operator sets them."""
    return ", ".join(f"{c.type} {c.status}" for c in reassignment_conditions(phase))


def rows(resource: str, found: dict[str, list[Use]]) -> list[list[str]]:
    """Return the rows of one resource's table: reason, conditions, meaning, action, source."""
    out = []
    for reason, uses in found.items():
        note = NOTES.get(reason)
        if note is None:
            raise MissingNoteError(f"reason {reason!r} has no entry in reason_notes.NOTES")
        for where, conditions in note.where:
            if where == resource and conditions == PHASE:
                conditions = _phase_conditions(reason)
            if where == resource:
                out.append(
                    [code(reason), conditions, note.meaning, note.action or "-", _modules(uses)]
                )
    return out


def generate() -> str:
    """Return the page."""
    found = scan()
    text = header(
        "Condition reasons",
        SOURCES,
        "The `reason` of each condition the operator writes in a custom resource's "
        "`status.conditions`, and of the Events it records, with what it means and what to "
        "do. A PartitionReassignment's conditions carry its phase as their reason unless a "
        "more specific one is given. When the reason of `Ready` (or `Stalled`) changes, the "
        "operator also records an Event with that reason and the condition's message "
        "(`kubectl describe` shows both). The reasons are found in the operator's source "
        "(the last column names the modules).",
    )
    for resource, title in _SECTIONS:
        text += f"## {title}\n\n"
        if resource == EVENT:
            text += (
                "Reasons of Events the operator records besides the Events that repeat a "
                "condition above (the column gives the Event's type).\n\n"
            )
        columns = ["reason", "Event type" if resource == EVENT else "conditions"]
        text += table([*columns, "meaning", "what to do", "source"], rows(resource, found))
        text += "\n"
    text += phase_transitions()
    return text.rstrip("\n") + "\n"


def phase_transitions() -> str:
    """Return the section listing which ``status.phase`` may follow which.

    From :data:`kpo_kafka.states.PHASE_VALID_PREVIOUS`, the table the operator checks at
    every status write of a PartitionReassignment.
    """
    text = (
        "## PartitionReassignment phase transitions\n\n"
        "The operator checks every write of `status.phase` against this table; a write it "
        "does not allow is refused (`IllegalPhaseTransitionError` in the operator's log) "
        "and the status is left as it was. `(none)` is a status without a phase: a new "
        "object.\n\n"
    )
    rows = []
    for target in Phase:
        previous = PHASE_VALID_PREVIOUS[target]
        named = [code("(none)")] if None in previous else []
        named += [code(p.value) for p in Phase if p in previous]
        rows.append([code(target.value), ", ".join(named)])
    return text + table(["phase", "may follow"], rows) + "\n"


def unused_notes() -> list[str]:
    """Return the reasons with an entry in the notes that the operator's source never uses."""
    found = scan()
    return sorted(reason for reason in NOTES if reason not in found)


def missing_notes() -> list[str]:
    """Return the reasons of the operator's source without an entry in the notes."""
    return sorted(reason for reason in scan() if reason not in NOTES)


__all__ = ["Note", "generate", "missing_notes", "unused_notes"]
