"""ThrottleLedger's stored JSON form: what a restarted operator reads back."""

from __future__ import annotations

import json

import pytest

from kpo_operator.throttle_ledger import (
    LedgerFormatError,
    OwnedRate,
    OwnedReplicas,
    ThrottleLedger,
)
from kpo_operator.throttles import FOLLOWER_RATE, FOLLOWER_REPLICAS, LEADER_RATE, LEADER_REPLICAS


def test_json_round_trip_keeps_every_field() -> None:
    ledger = ThrottleLedger(
        "lWc2rbpPRgSMXmb8ijuWDw",
        brokers={
            0: {LEADER_RATE: OwnedRate(1000), FOLLOWER_RATE: OwnedRate(5, "262144")},
            2: {LEADER_RATE: OwnedRate(7, pending=True, previous=6)},
        },
        topics={
            "a": {LEADER_REPLICAS: OwnedReplicas(frozenset({(0, 1), (1, 2)}))},
            "b": {
                FOLLOWER_REPLICAS: OwnedReplicas(
                    frozenset({(3, 3)}), wildcard=True, covered=frozenset({(0, 0)}), pending=True
                )
            },
        },
    )
    text = ledger.to_json()
    assert ThrottleLedger.from_json(text) == ledger
    stored = json.loads(text)
    assert stored["clusterId"] == "lWc2rbpPRgSMXmb8ijuWDw"
    assert stored["topics"]["a"][LEADER_REPLICAS] == {"pairs": ["0:1", "1:2"]}
    assert stored["brokers"]["0"][FOLLOWER_RATE] == {"value": 5, "replaced": "262144"}


def test_written_accepts_the_previous_rate_only_while_pending() -> None:
    assert OwnedRate(7, pending=True, previous=6).written(6)
    assert OwnedRate(7, pending=True, previous=6).written(7)
    assert not OwnedRate(7, previous=6).written(6)
    assert not OwnedRate(7).written(None)


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        '{"version": 2}',
        '{"version": 1, "brokers": {"x": {}}}',
        '{"version": 1, "brokers": {"0": {"k": {}}}}',
        '{"version": 1, "topics": {"a": {"k": {"pairs": ["0-1"]}}}}',
        "[]",
    ],
)
def test_malformed_ledger_is_refused(text: str) -> None:
    with pytest.raises(LedgerFormatError):
        ThrottleLedger.from_json(text)
