from datetime import UTC, datetime, timedelta

import pytest

from kpo_operator.conditions import (
    Condition,
    UnknownPhaseError,
    quota_conditions,
    reassignment_conditions,
    stamp_conditions,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
T1 = T0 + timedelta(minutes=5)


@pytest.mark.parametrize(
    ("phase", "true_types"),
    [
        ("Pending", {"Reconciling"}),
        ("Suspended", set()),
        ("Moving", {"Reconciling"}),
        ("Cancelling", {"Reconciling"}),
        ("Completed", {"Ready", "Completed"}),
        ("Cancelled", {"Ready"}),
        ("Failed", {"Stalled"}),
    ],
)
def test_reassignment_phase_table(phase: str, true_types: set[str]) -> None:
    conds = reassignment_conditions(phase, "msg")
    assert [c.type for c in conds] == ["Ready", "Reconciling", "Stalled", "Completed"]
    assert {c.type for c in conds if c.status == "True"} == true_types
    assert all(c.reason == phase and c.message == "msg" for c in conds)


def test_unknown_phase_and_state() -> None:
    with pytest.raises(UnknownPhaseError):
        reassignment_conditions("Running")
    with pytest.raises(UnknownPhaseError):
        quota_conditions("Completed", "X")


def test_quota_conditions() -> None:
    conds = quota_conditions("Stalled", "WriteFailed", "broker 1 rejected")
    assert [(c.type, c.status) for c in conds] == [
        ("Ready", "False"),
        ("Reconciling", "False"),
        ("Stalled", "True"),
    ]


def test_stamp_keeps_transition_time_when_status_unchanged() -> None:
    first = stamp_conditions([], reassignment_conditions("Moving"), 1, T0)
    assert first[1] == {
        "type": "Reconciling",
        "status": "True",
        "reason": "Moving",
        "message": "",
        "observedGeneration": 1,
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    again = stamp_conditions(first, reassignment_conditions("Moving", "50%"), 2, T1)
    assert [c["lastTransitionTime"] for c in again] == ["2026-01-01T00:00:00Z"] * 4
    assert {c["observedGeneration"] for c in again} == {2}
    done = stamp_conditions(again, reassignment_conditions("Completed"), 2, T1)
    times = {c["type"]: c["lastTransitionTime"] for c in done}
    assert times == {
        "Ready": "2026-01-01T00:05:00Z",
        "Reconciling": "2026-01-01T00:05:00Z",
        "Stalled": "2026-01-01T00:00:00Z",
        "Completed": "2026-01-01T00:05:00Z",
    }


def test_stamp_keeps_foreign_conditions_and_does_not_mutate() -> None:
    existing = [{"type": "Custom", "status": "True"}]
    out = stamp_conditions(existing, [Condition("Ready", "True", "Applied")], 3, T0)
    assert [c["type"] for c in out] == ["Ready", "Custom"]
    assert existing == [{"type": "Custom", "status": "True"}]
