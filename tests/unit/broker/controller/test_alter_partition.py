"""Which ISR changes of an AlterPartition request the controller accepts (KIP-497)."""

from __future__ import annotations

import pytest

from kpo_broker.controller.alter_partition import (
    FENCED_LEADER_EPOCH,
    INELIGIBLE_REPLICA,
    INVALID_REQUEST,
    INVALID_UPDATE_VERSION,
    LEADER_RECOVERING,
    NOT_CONTROLLER,
    OPERATION_NOT_ATTEMPTED,
    UNKNOWN_TOPIC_OR_PARTITION,
    ProposedIsr,
    decide_alter_partition,
)
from kpo_broker.zk.model import LeaderAndIsr
from kpo_kafka.topic_partition import TopicPartition

TP = TopicPartition("orders", 0)
#: Broker 1 leads under leader epoch 4; the state znode is at version 7.
CURRENT = LeaderAndIsr(1, 4, (1, 2), 7)
LIVE = {1: 100, 2: 200, 3: 300}


def decide(
    proposed: ProposedIsr,
    *,
    shutting_down: frozenset[int] = frozenset(),
    version: int = 2,
    current: LeaderAndIsr | None = CURRENT,
) -> object:
    """Return the outcome of one partition: an error code or ("accepted"|"unchanged", state)."""
    decision = decide_alter_partition(
        1, {TP: proposed}, {} if current is None else {TP: current}, LIVE, shutting_down, version
    )
    if TP in decision.errors:
        return decision.errors[TP]
    if TP in decision.unchanged:
        return ("unchanged", decision.unchanged[TP])
    return ("accepted", decision.accepted[TP])


def isr(members: tuple[int, ...], leader_epoch: int = 4, partition_epoch: int = 7) -> ProposedIsr:
    return ProposedIsr(leader_epoch, members, partition_epoch, {})


def test_an_expansion_of_the_current_state_is_accepted_as_a_write_of_that_version() -> None:
    assert decide(isr((1, 2, 3))) == ("accepted", LeaderAndIsr(1, 4, (1, 2, 3), 7))


def test_a_retry_of_an_applied_change_is_answered_with_the_current_state() -> None:
    # The first request was applied (version 7 -> 8) but its answer was lost.
    applied = LeaderAndIsr(1, 4, (1, 2, 3), 8)
    assert decide(isr((1, 2, 3)), current=applied) == ("unchanged", applied)


@pytest.mark.parametrize(
    ("proposed", "error"),
    [
        (isr((1, 2, 3), leader_epoch=3), FENCED_LEADER_EPOCH),
        (isr((1, 2, 3), partition_epoch=6), INVALID_UPDATE_VERSION),
        (isr((1, 2, 3), leader_epoch=5), NOT_CONTROLLER),
        (isr((1, 2, 3), partition_epoch=8), NOT_CONTROLLER),
        (isr((1, 9)), INELIGIBLE_REPLICA),
        (ProposedIsr(4, (1, 2, 3), 7, {3: 299}), INELIGIBLE_REPLICA),
        (ProposedIsr(4, (1,), 7, {}, LEADER_RECOVERING), INVALID_REQUEST),
    ],
    ids=[
        "stale leader epoch",
        "stale partition epoch",
        "newer leader epoch",
        "newer partition epoch",
        "unregistered member",
        "member under an old broker epoch",
        "back to recovering",
    ],
)
def test_a_change_the_state_does_not_allow_is_refused(proposed: ProposedIsr, error: int) -> None:
    assert decide(proposed, version=3) == error


def test_a_member_in_controlled_shutdown_cannot_join() -> None:
    assert decide(isr((1, 2, 3)), shutting_down=frozenset({3})) == INELIGIBLE_REPLICA
    assert decide(isr((1, 2, 3)), shutting_down=frozenset({3}), version=1) == (
        OPERATION_NOT_ATTEMPTED
    )


def test_member_epochs_that_match_the_registrations_are_accepted() -> None:
    proposed = ProposedIsr(4, (1, 2, 3), 7, {1: 100, 2: -1, 3: 300})
    assert decide(proposed, version=3) == ("accepted", LeaderAndIsr(1, 4, (1, 2, 3), 7))


def test_an_unknown_partition_is_refused() -> None:
    assert decide(isr((1, 2)), current=None) == UNKNOWN_TOPIC_OR_PARTITION
