"""The states of a consumer group and their legal transitions (Kafka's ``GroupState``).

A group moves only into a state whose table entry lists the state it is in, as
Kafka's ``GroupMetadata.transitionTo`` asserts:

- ``Empty``: no members; offsets may still be committed (by simple consumers and
  admin tools) and expire after ``offsets.retention.minutes``. A JoinGroup moves
  it to PreparingRebalance.
- ``PreparingRebalance``: JoinGroup requests are parked until every known member
  has joined again or the rebalance timeout passes.
- ``CompletingRebalance``: the new generation exists; members wait in SyncGroup for
  the leader's assignment.
- ``Stable``: the assignment was stored; members heartbeat and commit.
- ``Dead``: the group was deleted, expired or unloaded (its offsets partition moved
  to another broker); there is no way back.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping


class GroupState(enum.Enum):
    """A classic group's state; values are Kafka's names (shown by DescribeGroups)."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_G = GroupState

#: Target state -> the states it may be entered from (Kafka's ``validPreviousStates``).
VALID_PREVIOUS_STATES: Mapping[GroupState, frozenset[GroupState]] = {
    _G.PREPARING_REBALANCE: frozenset({_G.STABLE, _G.COMPLETING_REBALANCE, _G.EMPTY}),
    _G.COMPLETING_REBALANCE: frozenset({_G.PREPARING_REBALANCE}),
    _G.STABLE: frozenset({_G.COMPLETING_REBALANCE}),
    _G.DEAD: frozenset(
        {_G.STABLE, _G.PREPARING_REBALANCE, _G.COMPLETING_REBALANCE, _G.EMPTY, _G.DEAD}
    ),
    _G.EMPTY: frozenset({_G.PREPARING_REBALANCE}),
}


class IllegalGroupStateTransitionError(ValueError):
    """A group state change the table does not allow.

    Args:
        group_id: the group.
        current: the state it is in.
        target: the state requested.
    """

    def __init__(self, group_id: str, current: GroupState, target: GroupState) -> None:
        allowed = ", ".join(sorted(s.value for s in VALID_PREVIOUS_STATES[target]))
        super().__init__(
            f"group {group_id} must be in one of {allowed} to move to {target.value}; "
            f"it is {current.value}"
        )
        self.group_id = group_id
        self.current = current
        self.target = target


def is_valid_transition(current: GroupState, target: GroupState) -> bool:
    """Return whether ``target`` may be entered from ``current``."""
    return current in VALID_PREVIOUS_STATES[target]


def can_rebalance(current: GroupState) -> bool:
    """Whether a group in ``current`` may start a rebalance (Kafka's ``canRebalance``)."""
    return is_valid_transition(current, GroupState.PREPARING_REBALANCE)


def check_transition(group_id: str, current: GroupState, target: GroupState) -> None:
    """Check a state change against :data:`VALID_PREVIOUS_STATES`.

    Raises:
        IllegalGroupStateTransitionError: ``target`` may not be entered from ``current``.
    """
    if not is_valid_transition(current, target):
        raise IllegalGroupStateTransitionError(group_id, current, target)
