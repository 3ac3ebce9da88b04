"""The table of valid PartitionReassignment phase transitions, and its check at every write.

Every phase write goes through :func:`~kpo_operator.reassignment_status.updated_status`,
which refuses a transition the table does not list with a named exception; the
reconciler's paths (accept, suspend, move, finish, fail, cancel, edits and resets after
a new generation) only make listed ones.
"""

from __future__ import annotations

import pytest

from kpo_kafka.states import (
    FINAL_PHASES,
    PHASE_VALID_PREVIOUS,
    IllegalPhaseTransitionError,
    Phase,
    check_phase_transition,
    is_valid_phase_transition,
)
from kpo_operator.reassignment_status import StatusUpdate, render_status
from tests.unit.operator.reassignment_env import BASE, T0, Env

EVERY_PREVIOUS: list[Phase | None] = [None, *Phase]


def test_every_phase_has_an_entry_and_final_phases_lead_nowhere() -> None:
    assert set(PHASE_VALID_PREVIOUS) == set(Phase)
    for target, previous in PHASE_VALID_PREVIOUS.items():
        assert not previous & FINAL_PHASES, target


@pytest.mark.parametrize(
    ("current", "target"),
    [
        (None, Phase.PENDING),
        (None, Phase.SUSPENDED),
        (None, Phase.MOVING),
        (None, Phase.FAILED),
        (None, Phase.CANCELLED),
        (Phase.PENDING, Phase.MOVING),
        (Phase.SUSPENDED, Phase.MOVING),
        (Phase.SUSPENDED, Phase.SUSPENDED),
        (Phase.MOVING, Phase.MOVING),
        (Phase.MOVING, Phase.COMPLETED),
        (Phase.MOVING, Phase.CANCELLING),
        (Phase.MOVING, Phase.CANCELLED),
        (Phase.MOVING, Phase.FAILED),
        (Phase.CANCELLING, Phase.CANCELLED),
        (Phase.CANCELLING, Phase.MOVING),
        (Phase.FAILED, Phase.MOVING),
        (Phase.FAILED, Phase.SUSPENDED),
        (Phase.FAILED, Phase.FAILED),
        (Phase.FAILED, Phase.CANCELLED),
    ],
)
def test_transitions_the_reconciler_makes_are_valid(current: Phase | None, target: Phase) -> None:
    assert is_valid_phase_transition(current, target)
    check_phase_transition(current, target)


@pytest.mark.parametrize(
    ("current", "target"),
    [
        (Phase.COMPLETED, Phase.MOVING),
        (Phase.COMPLETED, Phase.COMPLETED),
        (Phase.CANCELLED, Phase.MOVING),
        (Phase.CANCELLED, Phase.FAILED),
        (Phase.MOVING, Phase.SUSPENDED),
        (Phase.MOVING, Phase.PENDING),
        (Phase.SUSPENDED, Phase.CANCELLING),
        (Phase.SUSPENDED, Phase.COMPLETED),
        (None, Phase.COMPLETED),
        (None, Phase.CANCELLING),
    ],
)
def test_other_transitions_raise_a_named_error(current: Phase | None, target: Phase) -> None:
    assert not is_valid_phase_transition(current, target)
    with pytest.raises(IllegalPhaseTransitionError) as raised:
        check_phase_transition(current, target)
    assert (raised.value.current, raised.value.target) == (current, target)
    assert target.value in str(raised.value)


def test_a_status_write_checks_the_transition() -> None:
    completed = render_status({}, StatusUpdate(Phase.MOVING, "m", 1), BASE)
    completed = render_status(completed, StatusUpdate(Phase.COMPLETED, "done", 1), BASE)
    with pytest.raises(IllegalPhaseTransitionError):
        render_status(completed, StatusUpdate(Phase.MOVING, "again", 1), BASE)


def test_a_lifecycle_through_suspend_edit_cancel_only_makes_valid_transitions(env: Env) -> None:
    phases: list[str | None] = []
    env.create("move", [("t", 0, [2, 1])], suspend=True)
    phases.append(env.reconcile())
    env.edit("move", partitions=[{"topic": "t", "partition": 0, "replicas": [9, 1]}])
    phases.append(env.reconcile())  # invalid: Failed
    env.edit("move", partitions=[{"topic": "t", "partition": 0, "replicas": [2, 1]}])
    phases.append(env.reconcile())  # still suspended: Suspended again
    env.edit("move", suspend=False)
    phases.append(env.reconcile())
    env.edit("move", cancel=True)
    phases.append(env.reconcile())
    phases.append(env.reconcile())
    assert phases[:3] == ["Suspended", "Failed", "Suspended"]
    assert phases[-1] == "Cancelled"


def test_a_completed_object_is_left_alone(moving: Env) -> None:
    moving.kafka.complete(T0)
    assert moving.reconcile() == "Completed"
    moving.edit("move", throttle={"replicationRate": 5})
    assert moving.reconcile() == "Completed"  # final: no write, so no transition


def test_withdrawing_a_cancel_while_cancelling_moves_again(moving: Env) -> None:
    moving.edit("move", cancel=True)
    assert moving.reconcile() == "Cancelling"
    moving.edit("move", cancel=False)
    assert moving.reconcile() == "Moving"
