"""Pure logic of cordoning drained brokers (KIP-1066): who is drained, what to write, the ledger."""

from __future__ import annotations

import random

import pytest

from kpo_kafka.admin_types import ApiError, PartitionInfo
from kpo_operator.cordon_writer import CordonResult, cordon_ledger_key, cordon_report
from kpo_operator.cordons import (
    CORDON_ALL,
    CordonLedger,
    CordonLedgerFormatError,
    OwnedCordon,
    cordon_supported,
    drained_brokers,
    drained_by,
    plan_cordons,
    replica_counts,
)

TOPICS = {
    "t": {0: PartitionInfo((0, 1)), 1: PartitionInfo((1, 2))},
    "u": {0: PartitionInfo((2, 3))},
}


def test_a_broker_losing_its_last_replica_is_drained() -> None:
    assert drained_brokers(TOPICS, {("t", 0): [2, 1]}) == {0}
    assert drained_brokers(TOPICS, {("u", 0): [2, 1]}) == {3}
    assert drained_brokers(TOPICS, {("t", 0): [2, 3], ("t", 1): [2, 3]}) == {0, 1}


def test_a_broker_keeping_a_replica_elsewhere_is_not_drained() -> None:
    assert drained_brokers(TOPICS, {("t", 1): [1, 3]}) == frozenset()  # 2 keeps u-0
    assert drained_brokers(TOPICS, {("t", 0): [1, 0]}) == frozenset()  # order only
    # a replica being removed by a move in flight still counts until it is gone
    moving = {**TOPICS, "v": {0: PartitionInfo((3, 0), adding=(3,), removing=(0,))}}
    assert drained_brokers(moving, {("t", 0): [2, 1]}) == frozenset()


def test_drained_by_counts_agrees_with_the_whole_cluster_walk() -> None:
    # drained_by looks only at the targets, with replica counts read once per Metadata.
    rng = random.Random(7)
    for _ in range(300):
        topics: dict[str, dict[int, PartitionInfo]] = {}
        for topic in ("a", "b", "c"):
            topics[topic] = {
                i: PartitionInfo(tuple(rng.sample(range(6), rng.randint(1, 3))))
                for i in range(rng.randint(0, 4))
            }
        targets = {
            (rng.choice("abcd"), rng.randint(0, 4)): rng.sample(range(6), rng.randint(1, 3))
            for _ in range(rng.randint(1, 6))
        }
        expected = drained_brokers(topics, targets)
        assert drained_by(replica_counts(topics), topics, targets) == expected


def test_only_kafka_4_3_brokers_know_cordoned_log_dirs() -> None:
    assert cordon_supported(5) and cordon_supported(6)
    assert not cordon_supported(4) and not cordon_supported(None)


def test_plan_cordons_a_wanted_broker_and_records_the_previous_value() -> None:
    plan = plan_cordons(frozenset({0}), {0: None}, CordonLedger("c"))
    assert plan.changes == {0: CORDON_ALL}
    assert plan.write_ahead.brokers == {0: OwnedCordon(CORDON_ALL, None, pending=True)}
    assert plan.ledger.brokers == {0: OwnedCordon(CORDON_ALL, None)}
    plan = plan_cordons(frozenset({0}), {0: ""}, CordonLedger("c"))
    assert plan.ledger.brokers == {0: OwnedCordon(CORDON_ALL, "")}


def test_plan_leaves_a_cordon_set_by_someone_else() -> None:
    plan = plan_cordons(frozenset({0}), {0: "/data/a"}, CordonLedger("c"))
    assert plan.changes == {} and plan.ledger.brokers == {}
    assert plan.foreign == {0: "/data/a"}


def test_plan_releases_what_it_owns_and_puts_the_previous_value_back() -> None:
    ledger = CordonLedger("c", {0: OwnedCordon(CORDON_ALL, None), 1: OwnedCordon(CORDON_ALL, "")})
    plan = plan_cordons(frozenset(), {0: CORDON_ALL, 1: CORDON_ALL}, ledger)
    assert plan.changes == {0: None, 1: ""}
    assert plan.ledger.brokers == {}


def test_plan_leaves_a_value_changed_since_and_forgets_it() -> None:
    ledger = CordonLedger("c", {0: OwnedCordon(CORDON_ALL, None)})
    plan = plan_cordons(frozenset(), {0: "/data/b"}, ledger)
    assert plan.changes == {} and plan.ledger.brokers == {}


def test_plan_repairs_an_owned_cordon_changed_while_still_wanted() -> None:
    ledger = CordonLedger("c", {0: OwnedCordon(CORDON_ALL, None)})
    plan = plan_cordons(frozenset({0}), {0: None}, ledger)
    assert plan.changes == {0: CORDON_ALL}
    assert plan.ledger.brokers == {0: OwnedCordon(CORDON_ALL, None)}
    assert plan_cordons(frozenset({0}), {0: CORDON_ALL}, ledger).changes == {}


def test_plan_keeps_the_entries_of_brokers_not_live() -> None:
    ledger = CordonLedger("c", {0: OwnedCordon(CORDON_ALL, None)})
    plan = plan_cordons(frozenset(), {}, ledger)
    assert plan.changes == {} and plan.ledger.brokers == ledger.brokers


def test_a_failed_write_keeps_the_entry_as_before() -> None:
    ledger = CordonLedger("c", {1: OwnedCordon(CORDON_ALL, None)})
    plan = plan_cordons(frozenset({0}), {0: None, 1: CORDON_ALL}, ledger)
    assert plan.changes == {0: CORDON_ALL, 1: None}
    assert plan.settled({0}).brokers == {}  # the cordon was not written
    assert plan.settled({1}).brokers == {0: OwnedCordon(CORDON_ALL, None), **ledger.brokers}


def test_pending_entry_counts_the_previous_value_as_written() -> None:
    owned = OwnedCordon(CORDON_ALL, None, pending=True)
    assert owned.written(CORDON_ALL) and owned.written(None)
    assert not OwnedCordon(CORDON_ALL, None).written(None)
    assert not owned.written("/data/a")


def test_ledger_json_round_trip_and_refusals() -> None:
    ledger = CordonLedger(
        "c", {0: OwnedCordon(CORDON_ALL, None, pending=True), 3: OwnedCordon(CORDON_ALL, "")}
    )
    assert CordonLedger.from_json(ledger.to_json()) == ledger
    for text in ("nope", '{"version": 2}', '{"version": 1, "brokers": {"x": {"value": "*"}}}'):
        with pytest.raises(CordonLedgerFormatError):
            CordonLedger.from_json(text)


def test_the_cordon_ledger_sits_beside_the_throttle_ledger() -> None:
    assert cordon_ledger_key("ledger.json") == "cordons.json"
    assert cordon_ledger_key("ledger.team-a.orders.json") == "cordons.team-a.orders.json"
    long = "ledger." + "n" * 240 + ".json"
    assert len(cordon_ledger_key(long)) <= 253 and cordon_ledger_key(long).startswith("cordons.")


def test_report_cordoned_and_released() -> None:
    status, cond = cordon_report(frozenset({0}), CordonResult(owned=frozenset({0})))
    assert status["drainedBrokers"] == [0] and status["cordonedBrokers"] == [0]
    assert (cond.type, cond.status, cond.reason) == ("Cordoned", "True", "Cordoned")
    assert "cordoned.log.dirs=* on brokers 0" in cond.message
    status, cond = cordon_report(frozenset({0}), CordonResult(), released=True)
    assert (cond.status, cond.reason) == ("False", "Released")
    assert status["cordonedBrokers"] == []


def test_report_names_each_broker_not_cordoned_and_why() -> None:
    result = CordonResult(
        owned=frozenset({0}),
        unsupported={1: "Kafka < 4.3 has no cordoned.log.dirs"},
        foreign={2: "/data/a"},
    )
    status, cond = cordon_report(frozenset({0, 1, 2}), result)
    assert (cond.status, cond.reason) == ("False", "NotSupported")
    assert "broker 1: Kafka < 4.3" in cond.message
    assert "broker 2 has cordoned.log.dirs=/data/a set outside the operator" in cond.message
    assert status["cordonedBrokers"] == [0]
    failed = CordonResult(errors={1: ApiError(58, "INVALID_UPDATE_VERSION")})
    assert cordon_report(frozenset({1}), failed)[1].reason == "CordonFailed"
