"""Concurrency limits of a PartitionReassignment (:mod:`kpo_operator.move_limits`).

The limits are Cruise Control's executor's ``num.concurrent.partition.movements.per.broker``
and ``num.concurrent.leader.movements`` (Strimzi's KafkaRebalance fields of the same
meaning); in-flight movements are as ListPartitionReassignments reports them (KIP-455).
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
import yaml

from kpo_kafka.admin_types import PartitionInfo, Reassignment
from kpo_kafka.specs import PartitionReassignmentSpec, SpecError
from kpo_kafka.states import MoveState
from kpo_kafka.topic_partition import TopicPartition
from kpo_operator.move_limits import Candidate, MoveLimits, admit, mark_waiting
from kpo_operator.progress import PartitionStatus
from tests.conftest import REPO_ROOT

LIVE = (0, 1, 2, 3, 4, 5)


def tp(partition: int, topic: str = "w") -> TopicPartition:
    return TopicPartition(topic, partition)


def moving(original: Sequence[int], target: Sequence[int]) -> Reassignment:
    """An in-flight reassignment from ``original`` to ``target``, as Kafka lists it."""
    adding = tuple(b for b in target if b not in original)
    removing = tuple(b for b in original if b not in target)
    return Reassignment(tuple(target) + removing, adding, removing)


def into(partition: int, target: Sequence[int], original: Sequence[int] = (0, 1)) -> Candidate:
    """A candidate of topic ``w`` led by its first original replica."""
    return Candidate(tp(partition), tuple(original), tuple(target), original[0])


def per_broker(limit: int) -> MoveLimits:
    return MoveLimits(per_broker=limit)


# -- no limits -----------------------------------------------------------------------------


def test_without_limits_every_candidate_is_admitted_in_order() -> None:
    candidates = [into(2, [3, 1]), into(0, [3, 1]), into(1, [3, 1])]
    busy = {tp(9, "x"): moving([0, 1], [3, 1])}

    found = admit(candidates, busy, LIVE, MoveLimits(), {})

    assert list(found.admitted) == [tp(2), tp(0), tp(1)]
    assert found.admitted[tp(2)] == [3, 1]
    assert found.waiting == {}
    assert not MoveLimits()


# -- per broker ----------------------------------------------------------------------------


def test_admitted_candidates_count_for_the_later_ones_in_the_given_order() -> None:
    # Each moves a replica from broker 0 to broker 3: one movement on each.
    candidates = [into(p, [3, 1]) for p in (3, 1, 0, 2)]

    found = admit(candidates, {}, LIVE, per_broker(2), {})

    assert list(found.admitted) == [tp(3), tp(1)]
    assert found.waiting == {
        tp(0): "waiting: concurrentPartitionMovementsPerBroker 2 reached on brokers 0, 3",
        tp(2): "waiting: concurrentPartitionMovementsPerBroker 2 reached on brokers 0, 3",
    }


def test_other_objects_and_tools_in_flight_movements_count() -> None:
    in_flight = {
        tp(0, "other"): moving([1, 2], [3, 2]),  # another object's: adds to 3
        tp(1, "other"): moving([1, 2], [4, 2]),  # another tool's: adds to 4
        tp(7): moving([0, 1], [2, 1]),  # this object's: adds to 2, removes from 0
    }
    candidates = [into(0, [3, 1]), into(1, [4, 1]), into(2, [2, 1], original=(5, 1))]

    found = admit(candidates, in_flight, LIVE, per_broker(1), {tp(7): 0})

    assert found.admitted == {}
    assert found.waiting == {
        tp(0): "waiting: concurrentPartitionMovementsPerBroker 1 reached on brokers 0, 3",
        tp(1): "waiting: concurrentPartitionMovementsPerBroker 1 reached on brokers 0, 4",
        tp(2): "waiting: concurrentPartitionMovementsPerBroker 1 reached on broker 2",
    }


def test_removing_replicas_count_on_their_broker() -> None:
    in_flight = {tp(0, "other"): moving([3, 1], [2, 1]), tp(7): moving([2, 4], [1, 4])}
    # Moving a replica out of broker 3 (to idle broker 4) meets the other object's removal.
    found = admit([into(0, [4, 1], original=(3, 1))], in_flight, LIVE, per_broker(1), {tp(7): 2})

    assert found.waiting == {
        tp(0): "waiting: concurrentPartitionMovementsPerBroker 1 reached on broker 3"
    }


def test_a_held_candidate_does_not_hold_back_later_ones_on_other_brokers() -> None:
    in_flight = {tp(7): moving([0, 1], [3, 1])}
    candidates = [into(0, [3, 1]), into(1, [2, 4], original=(1, 4))]

    found = admit(candidates, in_flight, LIVE, per_broker(1), {tp(7): 0})

    assert list(found.admitted) == [tp(1)]
    assert list(found.waiting) == [tp(0)]


def test_dead_brokers_neither_count_nor_block() -> None:
    live = (0, 1, 2, 3)  # broker 4 is gone
    in_flight = {
        tp(0, "other"): moving([4, 1], [2, 1]),  # removes from dead 4, adds to 2
        tp(1, "other"): moving([4, 2], [3, 2]),  # removes from dead 4, adds to 3
        tp(7): moving([0, 2], [1, 2]),  # this object's, on brokers 0 and 1
    }
    # Both move a replica out of dead broker 4, whose two removals do not count.
    candidates = [into(0, [0, 3], original=(4, 3)), into(1, [1, 3], original=(4, 3))]

    found = admit(candidates, in_flight, live, per_broker(2), {tp(7): 0})

    assert list(found.admitted) == [tp(0), tp(1)]

    found = admit(candidates, in_flight, live, per_broker(1), {tp(7): 0})

    assert found.admitted == {}
    assert found.waiting[tp(0)].endswith("reached on broker 0")
    assert found.waiting[tp(1)].endswith("reached on broker 1")


def test_a_changed_target_in_flight_replaces_its_own_movement() -> None:
    # w-0 is in flight [0,1] -> [3,1]; its target becomes [3,2]: OAR stays [0,1].
    in_flight = {tp(0): moving([0, 1], [3, 1]), tp(0, "other"): moving([4, 5], [1, 5])}
    changed = into(0, [3, 2])

    found = admit([changed], in_flight, LIVE, per_broker(1), {tp(0): 0})

    # Brokers 0 and 3 it already loads are not newly touched; 2 and 1 are (1 is full).
    assert found.waiting == {
        tp(0): "waiting: concurrentPartitionMovementsPerBroker 1 reached on broker 1"
    }
    in_flight.pop(tp(0, "other"))
    assert admit([changed], in_flight, LIVE, per_broker(1), {tp(0): 0}).admitted == {tp(0): [3, 2]}


def test_a_reorder_moves_nothing_and_is_always_admitted() -> None:
    in_flight = {tp(7): moving([0, 2], [3, 2]), tp(8): moving([1, 2], [4, 2])}
    found = admit([into(0, [1, 0])], in_flight, LIVE, per_broker(1), {tp(7): 0, tp(8): 1})
    assert found.admitted == {tp(0): [1, 0]}


# -- leaders -------------------------------------------------------------------------------


def test_leader_limit_counts_this_objects_partitions_whose_leader_moves() -> None:
    in_flight = {
        tp(7): moving([0, 1], [2, 3]),  # leader 0 leaves: a leader movement
        tp(8): moving([0, 1], [0, 3]),  # leader 0 stays
        tp(0, "other"): moving([0, 1], [2, 3]),  # another object's: not counted
    }
    own = {tp(7): 0, tp(8): 0}
    candidates = [
        into(0, [2, 3]),  # moves the leader
        into(1, [0, 2]),  # keeps it
        Candidate(tp(2), (0, 1), (4, 2), -1),  # no leader: moves none
    ]

    found = admit(candidates, in_flight, LIVE, MoveLimits(leader_moves=1), own)

    assert list(found.admitted) == [tp(1), tp(2)]
    assert found.waiting == {tp(0): "waiting: concurrentLeaderMovements 1 reached"}

    found = admit(candidates, in_flight, LIVE, MoveLimits(leader_moves=2), own)
    assert list(found.admitted) == [tp(0), tp(1), tp(2)]


def test_admitted_leader_movements_count_for_the_later_ones() -> None:
    candidates = [into(p, [2, 3]) for p in range(4)]
    found = admit(candidates, {}, LIVE, MoveLimits(leader_moves=2), {})
    assert list(found.admitted) == [tp(0), tp(1)]
    assert set(found.waiting) == {tp(2), tp(3)}


def test_a_partition_whose_leader_already_moved_no_longer_counts() -> None:
    # In flight to [2,3], already led by 2 (the target replicas caught up, leader elected).
    in_flight = {tp(7): moving([0, 1], [2, 3])}
    found = admit([into(0, [2, 3])], in_flight, LIVE, MoveLimits(leader_moves=1), {tp(7): 2})
    assert found.admitted == {tp(0): [2, 3]}


def test_both_limits_are_named() -> None:
    in_flight = {tp(7): moving([0, 1], [3, 4])}
    found = admit(
        [into(0, [3, 4])], in_flight, LIVE, MoveLimits(per_broker=1, leader_moves=1), {tp(7): 0}
    )
    assert found.waiting == {
        tp(0): "waiting: concurrentPartitionMovementsPerBroker 1 reached on brokers 0, 1, 3, 4; "
        "concurrentLeaderMovements 1 reached"
    }


# -- no deadlock ---------------------------------------------------------------------------


def test_with_nothing_of_the_object_in_flight_the_first_candidate_goes_above_the_limit() -> None:
    # Other objects' and tools' movements fill brokers 0 and 3, however long they take.
    in_flight = {
        tp(0, "other"): moving([0, 1], [3, 1]),
        tp(1, "other"): moving([0, 2], [3, 2]),
    }
    candidates = [into(p, [3, 1]) for p in range(3)]

    found = admit(candidates, in_flight, LIVE, per_broker(2), {tp(5): 0})  # w-5 not in flight

    assert list(found.admitted) == [tp(0)]
    assert found.waiting == {
        tp(1): "waiting: concurrentPartitionMovementsPerBroker 2 reached on brokers 0, 3",
        tp(2): "waiting: concurrentPartitionMovementsPerBroker 2 reached on brokers 0, 3",
    }


def test_with_a_partition_of_the_object_in_flight_nothing_goes_above_the_limit() -> None:
    in_flight = {
        tp(0, "other"): moving([0, 1], [3, 1]),
        tp(1, "other"): moving([0, 2], [3, 2]),
        tp(9): moving([1, 2], [4, 2]),  # this object's, elsewhere
    }
    found = admit([into(0, [3, 1])], in_flight, LIVE, per_broker(2), {tp(9): 1})
    assert found.admitted == {}


def test_the_first_candidate_goes_first_even_when_a_later_one_would_fit() -> None:
    in_flight = {tp(0, "other"): moving([0, 1], [3, 1])}
    candidates = [into(0, [3, 1]), into(1, [2, 4], original=(1, 4))]

    found = admit(candidates, in_flight, LIVE, per_broker(1), {})

    # Nothing of the object in flight: w-0 goes above the limit; w-1 still fits.
    assert list(found.admitted) == [tp(0), tp(1)]


# -- the limits of a spec ------------------------------------------------------------------


def spec(**fields: object) -> PartitionReassignmentSpec:
    partitions = [{"topic": "w", "partition": 0, "replicas": [1, 2]}]
    return PartitionReassignmentSpec.from_object({"partitions": partitions, **fields})


def test_spec_fields_parse_with_their_camel_case_names() -> None:
    parsed = spec(concurrentPartitionMovementsPerBroker=5, concurrentLeaderMovements=100)
    assert parsed.concurrent_partition_movements_per_broker == 5
    assert parsed.concurrent_leader_movements == 100
    assert MoveLimits.of(parsed) == MoveLimits(per_broker=5, leader_moves=100)
    assert MoveLimits.of(spec()) == MoveLimits()


@pytest.mark.parametrize(
    "fields",
    [
        {"concurrentPartitionMovementsPerBroker": 0},
        {"concurrentLeaderMovements": -1},
        {"concurrentLeaderMovements": True},
        {"concurrentPartitionMovementsPerBroker": "5"},
        {"concurrentPartitionMovementsPerBroker": 2**31},
    ],
)
def test_spec_limits_are_positive_java_ints(fields: dict[str, object]) -> None:
    with pytest.raises(SpecError) as raised:
        spec(**fields)
    [name] = fields
    assert any(line.startswith(f"spec.{name}:") for line in raised.value.errors)


def test_limits_of_an_unparsable_spec_are_read_field_by_field() -> None:
    raw = {"partitions": "broken", "concurrentPartitionMovementsPerBroker": 3}
    assert MoveLimits.of(None, raw) == MoveLimits(per_broker=3)
    bad = {"concurrentPartitionMovementsPerBroker": 0, "concurrentLeaderMovements": "x"}
    assert MoveLimits.of(None, bad) == MoveLimits(per_broker=1, leader_moves=1)
    assert MoveLimits.of(None, {"concurrentLeaderMovements": None}) == MoveLimits()
    assert MoveLimits.of(None, None) == MoveLimits()


def test_crd_and_chart_copy_declare_both_limits() -> None:
    paths = [
        REPO_ROOT / "crds" / "kpo.dev_partitionreassignments.yaml",
        REPO_ROOT / "charts" / "kpo" / "crds" / "kpo.dev_partitionreassignments.yaml",
    ]
    assert paths[0].read_text() == paths[1].read_text()
    crd = yaml.safe_load(paths[0].read_text())
    fields = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    for name, analogue in (
        ("concurrentPartitionMovementsPerBroker", "num.concurrent.partition.movements.per.broker"),
        ("concurrentLeaderMovements", "num.concurrent.leader.movements"),
    ):
        schema = fields["properties"][name]
        assert (schema["type"], schema["minimum"]) == ("integer", 1)
        assert analogue in schema["description"] and "Strimzi" in schema["description"]


# -- status entries ------------------------------------------------------------------------


def entry(partition: int, state: MoveState) -> PartitionStatus:
    return PartitionStatus("w", partition, state, (0, 1), (3, 1))


def test_mark_waiting_sets_the_message_of_waiting_pending_entries_only() -> None:
    entries = [entry(0, MoveState.PENDING), entry(1, MoveState.MOVING), entry(2, MoveState.PENDING)]
    marked = mark_waiting(entries, {tp(0): "waiting: a", tp(1): "waiting: b"})
    assert [e.message for e in marked] == ["waiting: a", "", ""]
    assert mark_waiting(entries, {}) == entries


def test_partition_info_in_flight_is_a_movement() -> None:
    # The leader-only limit reads this object's movements from Metadata's partition states.
    info = PartitionInfo((3, 1, 0), (0, 1), 0, adding=(3,), removing=(0,))
    found = admit([into(0, [2, 3])], {tp(7): info}, LIVE, MoveLimits(leader_moves=1), {tp(7): 0})
    assert found.waiting == {tp(0): "waiting: concurrentLeaderMovements 1 reached"}
