"""Where replicas go when a BalancingPolicy heals a cluster.

replace_replicas, relieve_usage, balance_bytes (with balance_stats).
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Mapping, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kpo_kafka.topic_partition import TopicPartition
from kpo_operator.balancing.healing import (
    ANY_LOG_DIR,
    BalanceStats,
    HealPlan,
    LogDirUsage,
    balance_bytes,
    balance_stats,
    relieve_usage,
    replace_replicas,
    usage_by_broker,
)

A0 = TopicPartition("a", 0)
A1 = TopicPartition("a", 1)
A2 = TopicPartition("a", 2)
A3 = TopicPartition("a", 3)
A4 = TopicPartition("a", 4)
B0 = TopicPartition("b", 0)
B1 = TopicPartition("b", 1)
B2 = TopicPartition("b", 2)


def no_racks(*brokers: int) -> dict[int, str | None]:
    return dict.fromkeys(brokers)


def log_dir(
    broker: int, path: str, total: int, used: int, replicas: Mapping[TopicPartition, int] = {}
) -> LogDirUsage:
    return LogDirUsage(broker, path, total, total - used, dict(replicas))


# --- replace_replicas --------------------------------------------------------------------


def test_follower_is_replaced_in_place_and_the_preferred_leader_stays_first() -> None:
    plan = replace_replicas({A0: (1, 2, 3)}, no_racks(1, 3, 4), {A0: {2}}, {A0: 100})
    assert plan == HealPlan(targets={A0: (1, 4, 3)}, log_dirs={}, unplaceable={}, moved_bytes=100)


def test_a_leaving_preferred_leader_is_replaced_at_the_first_position() -> None:
    plan = replace_replicas({A0: (2, 1, 3)}, no_racks(1, 3, 4), {A0: {2}}, {A0: 7})
    assert plan.targets == {A0: (4, 1, 3)}


def test_a_broker_on_a_rack_without_replica_wins_over_a_less_loaded_one() -> None:
    live = {1: "a", 2: "b", 4: "a", 5: "c"}
    partitions = {A0: (1, 2, 3), B0: (5, 1, 2)}
    plan = replace_replicas(partitions, live, {A0: {3}}, {A0: 10, B0: 1000})
    assert plan.targets == {A0: (1, 2, 5)}


def test_any_rack_once_every_live_rack_holds_a_replica() -> None:
    live = {1: "a", 2: "b", 4: "a", 5: "b"}
    partitions = {A0: (1, 2, 3), B0: (4,)}
    plan = replace_replicas(partitions, live, {A0: {3}}, {A0: 10, B0: 50})
    assert plan.targets == {A0: (1, 2, 5)}


def test_a_rack_takes_a_second_replica_only_when_all_racks_have_one() -> None:
    live = {1: "a", 2: "a", 4: "a", 5: "b"}
    # Replicas 1 and 2 share rack a; rack b has none: only broker 5 qualifies.
    plan = replace_replicas({A0: (1, 2, 3), B0: (5,)}, live, {A0: {3}}, {B0: 10**9})
    assert plan.targets == {A0: (1, 2, 5)}


def test_an_unused_rack_whose_brokers_cannot_take_the_replica_makes_it_unplaceable() -> None:
    live = {1: "a", 2: "b", 4: "a", 6: "c"}
    plan = replace_replicas({A0: (1, 2, 3)}, live, {A0: {3}}, {A0: 10}, excluded={6})
    assert plan.targets == {}
    assert list(plan.unplaceable) == [A0]
    assert "broker 3" in plan.unplaceable[A0]
    assert "outside racks a, b" in plan.unplaceable[A0]
    assert plan.moved_bytes == 0


def test_an_unused_rack_without_room_makes_the_replica_unplaceable() -> None:
    live = {1: "a", 2: "b", 4: "a", 6: "c"}
    room = {4: 100, 6: 9}
    plan = replace_replicas({A0: (1, 2, 3)}, live, {A0: {3}}, {A0: 10}, room=room)
    assert plan.targets == {}
    assert "room for 10 bytes" in plan.unplaceable[A0]


def test_the_rack_of_a_live_leaving_broker_still_counts() -> None:
    # Broker 3 is live but must give up its replica (a full disk); its rack c has no other
    # broker, so moving the replica to rack a or b would put two replicas on one rack.
    live = {1: "a", 2: "b", 3: "c", 4: "a", 5: "b"}
    plan = replace_replicas({A0: (1, 2, 3)}, live, {A0: {3}}, {A0: 10}, excluded={3})
    assert plan.targets == {}
    assert "outside racks a, b" in plan.unplaceable[A0]


def test_a_live_leaving_broker_moves_to_another_broker_of_its_rack() -> None:
    live = {1: "a", 2: "b", 3: "c", 4: "a", 6: "c"}
    plan = replace_replicas({A0: (1, 2, 3)}, live, {A0: {3}}, {A0: 10}, excluded={3})
    assert plan.targets == {A0: (1, 2, 6)}


def test_racks_are_ignored_when_no_live_broker_has_one() -> None:
    partitions = {A0: (1, 2, 3), B0: (4,)}
    plan = replace_replicas(partitions, no_racks(1, 2, 4, 5), {A0: {3}}, {B0: 5})
    assert plan.targets == {A0: (1, 2, 5)}


def test_no_rack_is_a_rack_of_its_own_when_other_brokers_have_racks() -> None:
    live: dict[int, str | None] = {1: "a", 2: "a", 4: "a", 5: None}
    partitions = {A0: (1, 2, 3), B0: (5,)}
    plan = replace_replicas(partitions, live, {A0: {3}}, {A0: 1, B0: 1000})
    assert plan.targets == {A0: (1, 2, 5)}


def test_no_rack_counts_as_used_by_a_replica_without_rack() -> None:
    live: dict[int, str | None] = {1: "a", 5: None, 6: None, 7: "a"}
    partitions = {A0: (5, 1, 3), B0: (6,)}
    # Racks a and "no rack" both hold a replica: any rack, the least loaded broker.
    plan = replace_replicas(partitions, live, {A0: {3}}, {B0: 1000})
    assert plan.targets == {A0: (5, 1, 7)}


@pytest.mark.parametrize(
    ("load", "expected"),
    [
        # Fewest bytes first, even with more replicas.
        ({B0: ((4,), 100), B1: ((5,), 10), B2: ((5,), 10)}, 5),
        # Equal bytes: fewest replicas.
        ({B0: ((4,), 20), B1: ((5,), 10), B2: ((5,), 10)}, 4),
        # Equal bytes and replicas: the lowest id.
        ({B0: ((5,), 10), B1: ((4,), 10)}, 4),
        ({}, 4),
    ],
)
def test_the_least_loaded_broker_wins(
    load: dict[TopicPartition, tuple[tuple[int, ...], int]], expected: int
) -> None:
    partitions: dict[TopicPartition, Sequence[int]] = {A0: (1, 2, 3)}
    sizes = {A0: 1}
    for tp, (replicas, size) in load.items():
        partitions[tp] = replicas
        sizes[tp] = size
    plan = replace_replicas(partitions, no_racks(1, 2, 4, 5), {A0: {3}}, sizes)
    assert plan.targets == {A0: (1, 2, expected)}


def test_loads_follow_the_assignments_largest_partition_first() -> None:
    partitions = {A0: (1, 3), A1: (1, 3), A2: (1, 3), A3: (1, 3)}
    sizes = {A0: 10, A1: 30, A2: 15, A3: 20}
    plan = replace_replicas(partitions, no_racks(1, 4, 5), {tp: {3} for tp in partitions}, sizes)
    # A1 (30) -> 4, A3 (20) -> 5, A2 (15) -> 5 (20 < 30), A0 (10) -> 4 (30 < 35).
    assert plan.targets == {A0: (1, 4), A1: (1, 4), A2: (1, 5), A3: (1, 5)}
    assert plan.moved_bytes == 75


def test_replicas_from_partitions_count_in_the_load_with_their_sizes() -> None:
    partitions = {A0: (1, 3), B0: (4, 1), B1: (5, 1), B2: (5, 1)}
    sizes = {B0: 3, B1: 1, B2: 1}
    plan = replace_replicas(partitions, no_racks(1, 4, 5), {A0: {3}}, sizes)
    assert plan.targets == {A0: (1, 5)}


def test_excluded_brokers_never_receive_but_keep_their_replicas() -> None:
    partitions = {A0: (4, 1, 3), B0: (5,)}
    plan = replace_replicas(partitions, no_racks(1, 4, 5, 6), {A0: {3}}, {B0: 9}, excluded={6})
    assert plan.targets == {A0: (4, 1, 5)}


def test_room_is_respected_and_decreases_with_each_assignment() -> None:
    partitions = {A0: (1, 3), A1: (1, 3), B0: (5,)}
    sizes = {A0: 20, A1: 10, B0: 1000}
    room = {4: 25, 5: 100}
    plan = replace_replicas(partitions, no_racks(1, 4, 5), {A0: {3}, A1: {3}}, sizes, room=room)
    # A0 takes 20 of broker 4's 25 bytes; A1 (10 bytes) no longer fits there.
    assert plan.targets == {A0: (1, 4), A1: (1, 5)}
    assert plan.unplaceable == {}


def test_a_broker_missing_from_room_receives_nothing() -> None:
    partitions = {A0: (1, 3), B0: (5,)}
    plan = replace_replicas(partitions, no_racks(1, 4, 5), {A0: {3}}, {A0: 1}, room={5: 1})
    assert plan.targets == {A0: (1, 5)}


def test_no_room_anywhere_is_unplaceable() -> None:
    plan = replace_replicas({A0: (1, 3)}, no_racks(1, 4), {A0: {3}}, {A0: 11}, room={4: 10})
    assert plan.targets == {}
    assert plan.unplaceable[A0].startswith("replica on broker 3: ")


def test_several_leaving_brokers_of_one_partition_get_distinct_racks() -> None:
    live = {1: "a", 4: "b", 5: "b", 6: "c", 7: "c"}
    partitions = {A0: (2, 1, 3), B0: (6,)}
    plan = replace_replicas(partitions, live, {A0: {2, 3}}, {A0: 10, B0: 5})
    # Position 0 first: racks b and c hold none, broker 4 is the least loaded; then
    # position 2 must go to rack c, where broker 7 is less loaded than broker 6.
    assert plan.targets == {A0: (4, 1, 7)}
    assert plan.moved_bytes == 20


def test_a_partial_fix_keeps_the_leaving_broker_that_could_not_be_replaced() -> None:
    plan = replace_replicas({A0: (1, 2, 3)}, no_racks(1, 4), {A0: {2, 3}}, {A0: 10})
    assert plan.targets == {A0: (1, 4, 3)}
    assert list(plan.unplaceable) == [A0]
    assert "broker 3" in plan.unplaceable[A0]
    assert "broker 2" not in plan.unplaceable[A0]
    assert plan.moved_bytes == 10


def test_each_replica_that_stays_has_its_reason() -> None:
    plan = replace_replicas({A0: (1, 2, 3)}, no_racks(1), {A0: {2, 3}}, {A0: 10})
    assert plan.targets == {}
    assert "broker 2" in plan.unplaceable[A0]
    assert "broker 3" in plan.unplaceable[A0]


def test_leaving_brokers_without_a_replica_are_ignored() -> None:
    leaving = {A0: {7}, B0: {1}}  # 7 holds no replica of a-0; b-0 is not in the cluster
    plan = replace_replicas({A0: (1, 2)}, no_racks(1, 2, 4, 7), leaving, {A0: 1})
    assert plan == HealPlan(targets={}, log_dirs={}, unplaceable={}, moved_bytes=0)


def test_a_leaving_broker_is_never_a_destination_of_the_partition() -> None:
    partitions = {A0: (1, 2, 3), B0: (5,)}
    plan = replace_replicas(partitions, no_racks(1, 2, 4, 5), {A0: {3, 4}}, {B0: 100})
    assert plan.targets == {A0: (1, 2, 5)}


def test_a_missing_size_is_zero_bytes() -> None:
    plan = replace_replicas({A0: (1, 3), A1: (1, 3)}, no_racks(1, 4), {A0: {3}, A1: {3}}, {A0: 8})
    assert plan.targets == {A0: (1, 4), A1: (1, 4)}
    assert plan.moved_bytes == 8


def test_the_plan_does_not_depend_on_the_order_of_the_inputs() -> None:
    partitions = {tp: (1, 2, 3) for tp in (A0, A1, A2, A3, B0, B1)}
    live = {1: "a", 2: "b", 4: "c", 5: "c", 6: "a"}
    leaving = {tp: {2, 3} for tp in partitions}
    sizes = {A0: 5, A1: 5, A2: 7, B0: 1}
    forward = replace_replicas(partitions, live, leaving, sizes, room={4: 12, 5: 12, 6: 100})
    backward = replace_replicas(
        dict(reversed(partitions.items())),
        dict(reversed(live.items())),
        dict(reversed(leaving.items())),
        dict(reversed(sizes.items())),
        room={6: 100, 5: 12, 4: 12},
    )
    assert forward == backward
    assert list(forward.targets) == sorted(forward.targets)


def test_negative_sizes_are_refused() -> None:
    with pytest.raises(ValueError, match="negative"):
        replace_replicas({A0: (1, 2)}, no_racks(1, 3), {A0: {2}}, {A0: -1})


# --- relieve_usage -----------------------------------------------------------------------


def test_log_dir_usage_fractions() -> None:
    assert log_dir(1, "/d", 200, 50).used_fraction == 0.25
    assert log_dir(1, "/d", 200, 50).used_bytes == 50
    assert LogDirUsage(1, "/d", 0, 0, {}).used_fraction == 0.0
    assert LogDirUsage(1, "/d", -5, 0, {}).used_fraction == 0.0


def test_usage_by_broker_sums_the_dirs() -> None:
    dirs = [log_dir(2, "/a", 100, 10), log_dir(1, "/a", 50, 5), log_dir(2, "/b", 300, 30)]
    assert usage_by_broker(dirs) == {1: (5, 50), 2: (40, 400)}
    assert list(usage_by_broker(dirs)) == [1, 2]


def test_nothing_moves_at_or_below_the_threshold() -> None:
    dirs = [log_dir(1, "/d1", 100, 85, {A0: 85}), log_dir(1, "/d2", 100, 0)]
    plan = relieve_usage({A0: (1,)}, no_racks(1), dirs, 0.85)
    assert plan == HealPlan(targets={}, log_dirs={}, unplaceable={}, moved_bytes=0)


def test_the_smallest_replica_that_covers_the_excess_moves_to_another_dir() -> None:
    replicas = {A0: 40, A1: 12, A2: 11, A3: 9, A4: 2}
    dirs = [log_dir(1, "/d1", 100, 95, replicas), log_dir(1, "/d2", 100, 0)]
    partitions = {tp: (1, 2) for tp in replicas}
    plan = relieve_usage(partitions, no_racks(1, 2), dirs, 0.85)
    assert plan.targets == {A2: (1, 2)}
    assert plan.log_dirs == {A2: ("/d2", ANY_LOG_DIR)}
    assert plan.moved_bytes == plan.local_bytes == 11
    assert plan.unplaceable == {} and plan.unrelieved == {}


def test_the_largest_replicas_then_the_smallest_that_covers_the_rest() -> None:
    replicas = {A0: 6, A1: 5, A2: 4, A3: 1}
    dirs = [log_dir(1, "/d1", 100, 95, replicas), log_dir(1, "/d2", 100, 0)]
    plan = relieve_usage({tp: (1,) for tp in replicas}, no_racks(1), dirs, 0.85)
    # Excess 10: 6, then 4 covers the 4 bytes left (6 + 5 would move 11).
    assert set(plan.targets) == {A0, A2}
    assert plan.moved_bytes == 10


def test_a_smaller_replica_is_swapped_in_when_it_suffices() -> None:
    replicas = {A0: 9, A1: 6, A2: 5}
    dirs = [log_dir(1, "/d1", 100, 95, replicas), log_dir(1, "/d2", 100, 0)]
    plan = relieve_usage({tp: (1,) for tp in replicas}, no_racks(1), dirs, 0.85)
    # Greedy: 9 then 5 (14 bytes); 6 + 5 = 11 covers the excess of 10 with fewer bytes.
    assert set(plan.targets) == {A1, A2}
    assert plan.moved_bytes == 11


def test_the_position_of_the_broker_is_named_in_log_dirs() -> None:
    dirs = [log_dir(2, "/d1", 100, 95, {A0: 20}), log_dir(2, "/d2", 100, 0)]
    plan = relieve_usage({A0: (1, 2, 3)}, no_racks(1, 2, 3), dirs, 0.85)
    assert plan.targets == {A0: (1, 2, 3)}
    assert plan.log_dirs == {A0: (ANY_LOG_DIR, "/d2", ANY_LOG_DIR)}


def test_the_least_used_dir_of_the_broker_receives() -> None:
    dirs = [
        log_dir(1, "/d1", 100, 95, {A0: 20}),
        log_dir(1, "/d2", 100, 30),
        log_dir(1, "/d3", 1000, 200),
        log_dir(1, "/d4", 100, 10),
    ]
    plan = relieve_usage({A0: (1,)}, no_racks(1), dirs, 0.85)
    # After receiving: /d2 50 %, /d3 22 %, /d4 30 %.
    assert plan.log_dirs == {A0: ("/d3",)}


def test_a_dir_of_the_broker_that_would_cross_the_threshold_is_skipped() -> None:
    dirs = [
        log_dir(1, "/d1", 100, 95, {A0: 20}),
        log_dir(1, "/d2", 100, 70),  # 90 after receiving
        log_dir(2, "/d1", 1000, 100),
    ]
    plan = relieve_usage({A0: (1,)}, no_racks(1, 2), dirs, 0.85)
    assert plan.targets == {A0: (2,)}
    assert plan.log_dirs == {A0: ("/d1",)}
    assert plan.moved_bytes == 20
    assert plan.local_bytes == 0


def test_a_dir_may_be_filled_exactly_to_the_threshold() -> None:
    dirs = [log_dir(1, "/d1", 100, 95, {A0: 20}), log_dir(1, "/d2", 100, 65)]
    plan = relieve_usage({A0: (1,)}, no_racks(1), dirs, 0.85)
    assert plan.log_dirs == {A0: ("/d2",)}


def test_the_destination_broker_names_its_least_used_dir_with_room() -> None:
    dirs = [
        log_dir(1, "/d1", 100, 95, {A0: 20}),
        log_dir(2, "/big", 1000, 840),  # 86 % after receiving
        log_dir(2, "/small", 100, 50),  # 70 % after receiving
    ]
    plan = relieve_usage({A0: (1,)}, no_racks(1, 2), dirs, 0.85)
    assert plan.targets == {A0: (2,)}
    assert plan.log_dirs == {A0: ("/small",)}


def test_a_broker_that_would_cross_the_threshold_as_a_whole_does_not_receive() -> None:
    dirs = [
        log_dir(1, "/d1", 100, 95, {A0: 20}),
        # Broker 2: /a is full, /b could take 20 bytes, but the broker would be at 90 %.
        log_dir(2, "/a", 100, 100),
        log_dir(2, "/b", 100, 60),
        log_dir(3, "/a", 100, 70),
    ]
    plan = relieve_usage({A0: (1,)}, no_racks(1, 2, 3), dirs, 0.85)
    assert plan.targets == {}
    assert list(plan.unplaceable) == [A0]
    # Broker 2's full dir holds nothing to move.
    assert plan.unrelieved == {(1, "/d1"): 10, (2, "/a"): 15}


def test_a_replica_that_can_go_nowhere_is_unplaceable_and_the_dir_unrelieved() -> None:
    dirs = [log_dir(1, "/d1", 100, 95, {A0: 20}), log_dir(2, "/d1", 100, 80)]
    plan = relieve_usage({A0: (1,)}, no_racks(1, 2), dirs, 0.85)
    assert plan.targets == {}
    assert plan.moved_bytes == 0
    reason = plan.unplaceable[A0]
    assert "broker 1 in /d1" in reason
    assert "no other log dir of broker 1" in reason
    assert "room for 20 bytes" in reason
    assert plan.unrelieved == {(1, "/d1"): 10}


def test_another_pick_replaces_a_replica_that_can_go_nowhere() -> None:
    dirs = [
        log_dir(1, "/d1", 100, 95, {A0: 12, A1: 6, A2: 5}),
        log_dir(2, "/d1", 100, 74),  # takes 11 bytes, not 12
    ]
    plan = relieve_usage({A0: (1,), A1: (1,), A2: (1,)}, no_racks(1, 2), dirs, 0.85)
    assert plan.targets == {A1: (2,), A2: (2,)}
    # The dir is relieved, so a-0 that stayed is not reported.
    assert plan.unplaceable == {}
    assert plan.unrelieved == {}


def test_busy_partitions_are_never_picked() -> None:
    replicas = {A0: 10, A1: 30}
    dirs = [log_dir(1, "/d1", 100, 95, replicas), log_dir(1, "/d2", 100, 0)]
    plan = relieve_usage({A0: (1,), A1: (1,)}, no_racks(1), dirs, 0.85, busy={A0})
    assert plan.targets == {A1: (1,)}


def test_only_busy_partitions_leave_the_dir_unrelieved_without_unplaceable() -> None:
    dirs = [log_dir(1, "/d1", 100, 95, {A0: 10}), log_dir(1, "/d2", 100, 0)]
    plan = relieve_usage({A0: (1,)}, no_racks(1), dirs, 0.85, busy={A0})
    assert plan.targets == {}
    assert plan.unplaceable == {}
    assert plan.unrelieved == {(1, "/d1"): 10}


def test_everything_movable_moves_when_it_cannot_cover_the_excess() -> None:
    dirs = [log_dir(1, "/d1", 100, 95, {A0: 3, A1: 4}), log_dir(1, "/d2", 100, 0)]
    plan = relieve_usage({A0: (1,), A1: (1,)}, no_racks(1), dirs, 0.85)
    assert set(plan.targets) == {A0, A1}
    assert plan.unrelieved == {(1, "/d1"): 3}


def test_empty_replicas_and_replicas_the_partition_does_not_list_are_not_picked() -> None:
    dirs = [log_dir(1, "/d1", 100, 95, {A0: 0, A1: 50}), log_dir(1, "/d2", 100, 0)]
    plan = relieve_usage({A0: (1,), A1: (2,)}, no_racks(1, 2), dirs, 0.85)
    assert plan.targets == {}
    assert plan.unrelieved == {(1, "/d1"): 10}


def test_a_partition_moves_at_most_once() -> None:
    dirs = [
        log_dir(1, "/d1", 100, 95, {A0: 20, A1: 30}),
        log_dir(1, "/d2", 100, 0),
        log_dir(2, "/d1", 100, 95, {A0: 20, A1: 30}),
        log_dir(2, "/d2", 100, 0),
    ]
    plan = relieve_usage({A0: (1, 2), A1: (1, 2)}, no_racks(1, 2), dirs, 0.85)
    # Broker 1's dir picks a-0 (the smallest covering 10); broker 2's then takes a-1.
    assert plan.targets == {A0: (1, 2), A1: (1, 2)}
    assert plan.log_dirs == {A0: ("/d2", ANY_LOG_DIR), A1: (ANY_LOG_DIR, "/d2")}
    assert plan.moved_bytes == 50


def test_the_fullest_dir_is_relieved_first() -> None:
    dirs = [
        log_dir(1, "/d1", 100, 90, {A0: 20}),
        log_dir(2, "/d1", 100, 99, {A1: 20}),
        log_dir(3, "/d1", 100, 65),  # room for one of them
    ]
    plan = relieve_usage({A0: (1,), A1: (2,)}, no_racks(1, 2, 3), dirs, 0.85)
    assert plan.targets == {A1: (3,)}
    assert plan.unrelieved == {(1, "/d1"): 5}


def test_a_move_to_another_broker_keeps_the_racks() -> None:
    live = {1: "a", 2: "b", 3: "c", 4: "a", 5: "b", 6: "c"}
    dirs = [
        log_dir(3, "/d1", 100, 95, {A0: 20}),
        log_dir(4, "/d1", 100, 0),
        log_dir(5, "/d1", 100, 0),
        log_dir(6, "/d1", 100, 50),
    ]
    plan = relieve_usage({A0: (1, 2, 3)}, live, dirs, 0.85)
    assert plan.targets == {A0: (1, 2, 6)}
    assert plan.log_dirs == {A0: (ANY_LOG_DIR, ANY_LOG_DIR, "/d1")}


def test_a_move_to_another_broker_goes_to_the_least_loaded() -> None:
    dirs = [
        log_dir(1, "/d1", 100, 95, {A0: 20}),
        log_dir(2, "/d1", 1000, 0, {B0: 30}),
        log_dir(3, "/d1", 1000, 0, {B1: 10}),
    ]
    partitions = {A0: (1,), B0: (2,), B1: (3,)}
    plan = relieve_usage(partitions, no_racks(1, 2, 3), dirs, 0.85)
    assert plan.targets == {A0: (3,)}


def test_per_broker_sums_the_dirs_and_moves_to_other_brokers_only() -> None:
    dirs = [
        log_dir(1, "/d1", 100, 84, {A0: 50, A1: 34}),
        log_dir(1, "/d2", 100, 84, {A2: 30, A3: 54}),
        log_dir(2, "/d1", 1000, 0),
    ]
    partitions = {A0: (1,), A1: (1,), A2: (1,), A3: (1,)}
    by_dir = relieve_usage(partitions, no_racks(1, 2), dirs, 0.8)
    by_broker = relieve_usage(partitions, no_racks(1, 2), dirs, 0.8, per_broker=True)
    # Each dir: excess 4 -> a-2 (30) and a-1 (34); the broker as a whole: excess 8.
    assert by_dir.targets == {A1: (2,), A2: (2,)}
    assert by_broker.targets == {A2: (2,)}
    assert by_broker.log_dirs == {A2: ("/d1",)}
    assert by_broker.local_bytes == 0


def test_per_broker_judges_only_brokers() -> None:
    dirs = [
        log_dir(1, "/d1", 100, 95, {A0: 20}),  # above, but the broker is at 50 %
        log_dir(1, "/d2", 100, 5),
        log_dir(2, "/d1", 100, 0),
    ]
    plan = relieve_usage({A0: (1,)}, no_racks(1, 2), dirs, 0.85, per_broker=True)
    assert plan.targets == {}
    assert plan.unrelieved == {}


def test_a_broker_above_the_threshold_is_unrelieved_with_no_path() -> None:
    dirs = [log_dir(1, "/d1", 100, 95, {A0: 20}), log_dir(1, "/d2", 100, 95)]
    plan = relieve_usage({A0: (1,)}, no_racks(1), dirs, 0.85, per_broker=True)
    assert plan.unrelieved == {(1, None): 20}
    assert "broker 1:" in plan.unplaceable[A0]


def test_dirs_of_brokers_that_are_not_live_are_ignored() -> None:
    dirs = [log_dir(7, "/d1", 100, 99, {A0: 20}), log_dir(7, "/d2", 100, 0)]
    plan = relieve_usage({A0: (7,)}, no_racks(1), dirs, 0.85)
    assert plan == HealPlan(targets={}, log_dirs={}, unplaceable={}, moved_bytes=0)


@pytest.mark.parametrize("threshold", [0.0, -0.1, 1.01])
def test_a_threshold_outside_zero_to_one_is_refused(threshold: float) -> None:
    with pytest.raises(ValueError, match="threshold"):
        relieve_usage({}, {}, [], threshold)


def test_negative_replica_sizes_are_refused() -> None:
    with pytest.raises(ValueError, match="negative"):
        relieve_usage({A0: (1,)}, no_racks(1), [log_dir(1, "/d", 100, 10, {A0: -1})], 0.85)


# --- properties --------------------------------------------------------------------------

BROKERS = range(8)
TOPICS = [TopicPartition(topic, p) for topic in "xyz" for p in range(4)]


@st.composite
def clusters(
    draw: st.DrawFn,
) -> tuple[dict[TopicPartition, tuple[int, ...]], dict[int, str | None]]:
    rack_sets: list[list[str | None]] = [[None], ["a", "b", "c"], ["a", "b", None]]
    rack_values = draw(st.sampled_from(rack_sets))
    live_ids = draw(st.sets(st.sampled_from(BROKERS), min_size=1))
    live = {b: draw(st.sampled_from(rack_values)) for b in sorted(live_ids)}
    chosen = draw(st.lists(st.sampled_from(TOPICS), unique=True, max_size=10))
    partitions = {
        tp: tuple(draw(st.lists(st.sampled_from(BROKERS), unique=True, min_size=1, max_size=4)))
        for tp in chosen
    }
    return partitions, live


def new_replicas(before: Sequence[int], after: Sequence[int]) -> list[tuple[int, int]]:
    return [(i, b) for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]


def check_racks(
    live: Mapping[int, str | None],
    before: Sequence[int],
    after: Sequence[int],
    leaving: Collection[int],
) -> None:
    if all(rack is None for rack in live.values()):
        return
    racks = set(live.values())
    for position, broker in enumerate(after):
        if before[position] == broker:
            continue
        # The replicas this one was placed next to: those that stay, and the
        # replacements made before it (in list order).
        others = [
            b
            for i, b in enumerate(after)
            if i != position
            and b in live
            and ((before[i] == b and b not in leaving) or (before[i] != b and i < position))
        ]
        used = {live[b] for b in others}
        assert live[broker] not in used or racks <= used


@settings(max_examples=200, deadline=None)
@given(
    cluster=clusters(),
    data=st.data(),
)
def test_replace_replicas_properties(
    cluster: tuple[dict[TopicPartition, tuple[int, ...]], dict[int, str | None]],
    data: st.DataObject,
) -> None:
    partitions, live = cluster
    leaving = {
        tp: data.draw(st.sets(st.sampled_from(replicas))) for tp, replicas in partitions.items()
    }
    sizes = {tp: data.draw(st.integers(0, 100)) for tp in partitions}
    excluded = data.draw(st.sets(st.sampled_from(BROKERS)))
    room = data.draw(st.none() | st.dictionaries(st.sampled_from(BROKERS), st.integers(0, 300)))
    plan = replace_replicas(partitions, live, leaving, sizes, excluded, room)

    received: dict[int, int] = {}
    moved = 0
    for tp, replicas in partitions.items():
        after = plan.targets.get(tp, replicas)
        gone = leaving[tp]
        assert len(after) == len(replicas)
        assert len(set(after)) == len(after)
        changed = new_replicas(replicas, after)
        if tp in plan.targets:
            assert changed
        for position, broker in changed:
            assert replicas[position] in gone
            assert broker in live
            assert broker not in excluded
            assert broker not in gone
            assert broker not in replicas
            received[broker] = received.get(broker, 0) + sizes[tp]
            moved += sizes[tp]
        stays = [b for b in after if b in gone]
        assert bool(stays) == (tp in plan.unplaceable)
        check_racks(live, replicas, after, gone)
    assert set(plan.targets) <= set(partitions)
    assert plan.moved_bytes == moved
    assert plan.log_dirs == {}
    if room is not None:
        for broker, total in received.items():
            assert total <= room.get(broker, 0)


@st.composite
def usages(
    draw: st.DrawFn,
) -> tuple[dict[TopicPartition, tuple[int, ...]], dict[int, str | None], list[LogDirUsage]]:
    partitions, live = draw(clusters())
    dirs: list[LogDirUsage] = []
    for broker in live:
        paths = draw(st.lists(st.sampled_from(["/d1", "/d2", "/d3"]), unique=True, max_size=3))
        held = sorted(tp for tp, replicas in partitions.items() if broker in replicas)
        placed: dict[str, dict[TopicPartition, int]] = {path: {} for path in paths}
        for tp in held:
            if paths:
                placed[draw(st.sampled_from(paths))][tp] = draw(st.integers(0, 60))
        for path in paths:
            data = sum(placed[path].values())
            total = draw(st.integers(max(1, data), 400))
            used = draw(st.integers(data, total))
            dirs.append(LogDirUsage(broker, path, total, total - used, placed[path]))
    return partitions, live, dirs


def used_after(dirs: Sequence[LogDirUsage], plan: HealPlan) -> dict[tuple[int, str], int]:
    """Bytes in use in each dir once the new replicas are written (nothing freed yet)."""
    used = {(d.broker, d.path): d.used_bytes for d in dirs}
    size: dict[TopicPartition, int] = {}
    for d in dirs:
        for tp, n in d.replicas.items():
            size[tp] = max(n, size.get(tp, 0))
    held = {(d.broker, tp): n for d in dirs for tp, n in d.replicas.items()}
    for tp, paths in plan.log_dirs.items():
        for broker, path in zip(plan.targets[tp], paths, strict=True):
            if path != ANY_LOG_DIR:
                local = (broker, tp) in held
                used[(broker, path)] += held[(broker, tp)] if local else size[tp]
    return used


@settings(max_examples=200, deadline=None)
@given(
    cluster=usages(),
    threshold=st.sampled_from([0.5, 0.8, 0.85, 0.95]),
    per_broker=st.booleans(),
    data=st.data(),
)
def test_relieve_usage_properties(
    cluster: tuple[dict[TopicPartition, tuple[int, ...]], dict[int, str | None], list[LogDirUsage]],
    threshold: float,
    per_broker: bool,
    data: st.DataObject,
) -> None:
    partitions, live, dirs = cluster
    busy = data.draw(st.sets(st.sampled_from(TOPICS)))
    plan = relieve_usage(partitions, live, dirs, threshold, per_broker, busy)

    assert not set(plan.targets) & busy
    assert set(plan.log_dirs) == set(plan.targets)
    for tp, after in plan.targets.items():
        before = partitions[tp]
        assert len(after) == len(before) and len(set(after)) == len(after)
        assert len(plan.log_dirs[tp]) == len(after)
        changed = new_replicas(before, after)
        assert len(changed) <= 1
        named = [i for i, path in enumerate(plan.log_dirs[tp]) if path != ANY_LOG_DIR]
        assert len(named) == 1
        if changed:
            assert named == [changed[0][0]]
            assert changed[0][1] in live
        else:
            assert not per_broker
        check_racks(live, before, after, {before[named[0]]})

    # Nothing that received a replica crosses the threshold, dir or broker.
    before_used = {(d.broker, d.path): d.used_bytes for d in dirs}
    totals = {(d.broker, d.path): d.total_bytes for d in dirs}
    after_used = used_after(dirs, plan)
    for key, used in after_used.items():
        if used != before_used[key]:
            assert used <= threshold * totals[key]
    size = {tp: max(d.replicas.get(tp, 0) for d in dirs) for tp in plan.targets}
    received: dict[int, int] = {}
    for tp, after in plan.targets.items():
        for _, broker in new_replicas(partitions[tp], after):
            received[broker] = received.get(broker, 0) + size[tp]
    by_broker = usage_by_broker(dirs)
    for broker, added in received.items():
        used, total = by_broker[broker]
        assert used + added <= threshold * total

    # A dir (or broker) still above the threshold is reported with what is left.
    assert all(left > 0 for left in plan.unrelieved.values())
    assert plan.moved_bytes >= plan.local_bytes >= 0


def test_fewest_bytes_pick_never_misses_a_single_covering_replica() -> None:
    # Exhaustive over small dirs: when one replica covers the excess, at most its bytes move.
    for sizes in itertools.product([1, 4, 9, 12], repeat=3):
        replicas = {TopicPartition("t", i): size for i, size in enumerate(sizes)}
        dirs = [log_dir(1, "/d1", 100, 95, replicas), log_dir(1, "/d2", 1000, 0)]
        plan = relieve_usage({tp: (1,) for tp in replicas}, no_racks(1), dirs, 0.85)
        covering = [size for size in sizes if size >= 10]
        total = sum(sizes)
        if covering:
            assert plan.moved_bytes == min(covering)
        else:
            assert plan.moved_bytes >= min(10, total)
            assert plan.moved_bytes <= max(total, 0)


# --- balance_stats / balance_bytes -------------------------------------------------------

EMPTY = HealPlan(targets={}, log_dirs={}, unplaceable={}, moved_bytes=0)


def apply(
    partitions: Mapping[TopicPartition, Sequence[int]], plan: HealPlan
) -> dict[TopicPartition, Sequence[int]]:
    return {**partitions, **plan.targets}


def test_balance_stats_counts_each_live_broker_holding_a_replica() -> None:
    partitions = {A0: (1, 2), A1: (2, 9), B0: (3,)}
    stats = balance_stats(partitions, no_racks(1, 2, 3, 4), {A0: 10, A1: 30, B0: 40})
    # 1: 10, 2: 40, 3: 40, 4: 0; broker 9 is not live.
    assert stats == BalanceStats(mean_bytes=22.5, max_bytes=40, max_broker=2, ratio=40 / 22.5)


def test_balance_stats_without_bytes_or_brokers() -> None:
    assert balance_stats({A0: (1,)}, no_racks(1, 2), {}) == BalanceStats(0.0, 0, 1, 1.0)
    assert balance_stats({A0: (1,)}, {}, {A0: 5}) == BalanceStats(0.0, 0, None, 1.0)


def test_a_balanced_cluster_gives_an_empty_plan() -> None:
    partitions = {A0: (1, 2), A1: (2, 3), A2: (3, 1)}
    sizes = {A0: 10, A1: 10, A2: 11}
    assert balance_bytes(partitions, no_racks(1, 2, 3), sizes, 1.1) == EMPTY
    assert balance_bytes({}, {}, {}, 1.1) == EMPTY


def test_an_empty_new_broker_receives_replicas_until_within_tolerance() -> None:
    partitions = {A0: (1, 2), A1: (2, 3), A2: (3, 1), B0: (1, 2), B1: (2, 3), B2: (3, 1)}
    sizes = dict.fromkeys(partitions, 10)
    live = no_racks(1, 2, 3, 4)
    assert balance_stats(partitions, live, sizes).ratio == 40 / 30
    plan = balance_bytes(partitions, live, sizes, 1.1)
    # Each of 1, 2, 3 (40 bytes) gives 10 to broker 4: 30 each, the mean.
    assert plan.targets == {A0: (4, 2), A1: (4, 3), A2: (4, 1)}
    assert plan.moved_bytes == 30
    assert plan.log_dirs == {} and plan.unplaceable == {}
    after = balance_stats(apply(partitions, plan), live, sizes)
    assert after == BalanceStats(mean_bytes=30.0, max_bytes=30, max_broker=1, ratio=1.0)


def test_the_move_closest_to_half_the_gap_wins() -> None:
    partitions = {A0: (1,), A1: (1,), A2: (1,), A3: (1,), B0: (2,)}
    sizes = {A0: 45, A1: 55, A2: 20, A3: 80}
    plan = balance_bytes(partitions, no_racks(1, 2), sizes, 1.0)
    # 200 vs 0: 80 leaves the pair at most 120; then 120 vs 80: 20 evens them out.
    assert plan.targets == {A2: (2,), A3: (2,)}
    assert plan.moved_bytes == 100


def test_between_equal_results_the_move_not_beyond_half_the_gap_wins() -> None:
    # 10 vs 0: moving 4 or 6 both leave 6 on one side; 4 does not pass the middle.
    plan = balance_bytes({A0: (1,), A1: (1,)}, no_racks(1, 2), {A0: 6, A1: 4}, 1.0)
    assert plan.targets == {A1: (2,)}


def test_only_moves_that_lower_the_pair_are_made() -> None:
    # One 100-byte replica on broker 1: moving it to the empty broker 3 leaves 100 there.
    partitions = {A0: (1,), B0: (2,), B1: (2,)}
    sizes = {A0: 100, B0: 30, B1: 30}
    # Broker 1 cannot be improved: the plan stops, though 2 -> 3 would even those out.
    assert balance_bytes(partitions, no_racks(1, 2, 3), sizes, 1.1) == EMPTY


def test_a_broker_holding_a_replica_of_the_partition_does_not_receive_it() -> None:
    partitions = {A0: (1, 2), B0: (1,), B1: (3,)}
    sizes = {A0: 8, B0: 12, B1: 10}
    # 1: 20, 2: 8, 3: 10. Broker 2 is the least loaded but holds a-0, and b-0 (12) would
    # leave it at 20: a-0 goes to broker 3.
    plan = balance_bytes(partitions, no_racks(1, 2, 3), sizes, 1.0)
    assert plan.targets == {A0: (3, 2)}


def test_brokers_that_are_not_live_neither_count_nor_receive() -> None:
    partitions = {A0: (9, 1), A1: (1,), B0: (2,)}
    sizes = {A0: 10, A1: 10, B0: 10}
    plan = balance_bytes(partitions, no_racks(1, 2, 3), sizes, 1.0)
    # 1: 20, 2: 10, 3: 0 (broker 9 is not live): a-0 goes to 3 at broker 1's position.
    assert plan.targets == {A0: (9, 3)}


def test_the_preferred_leader_stays_first_unless_it_moves() -> None:
    partitions = {A0: (1, 2), B0: (3, 2), B1: (3, 2)}
    sizes = {A0: 10, B0: 4, B1: 4}
    plan = balance_bytes(partitions, no_racks(1, 2, 3, 4), sizes, 1.0)
    # Broker 2 (18) gives a-0 to broker 4, in place: broker 1 stays the preferred leader.
    assert plan.targets[A0] == (1, 4)
    moved_leader = balance_bytes({A0: (1, 2), B0: (1,)}, no_racks(1, 2, 3), {A0: 5, B0: 5}, 1.0)
    assert moved_leader.targets == {A0: (3, 2)}


def test_racks_restrict_the_destinations() -> None:
    partitions = {A0: (1, 2), A1: (1, 4), B0: (4,)}
    sizes = {A0: 10, A1: 10, B0: 5}
    # 1: 20, 2: 10, 3: 0, 4: 15. Without racks a-0 goes to broker 3 ...
    assert balance_bytes(partitions, no_racks(1, 2, 3, 4), sizes, 1.1).targets == {A0: (3, 2)}
    # ... but broker 3 shares rack b with a-0's broker 2 while rack a holds no other replica.
    live = {1: "a", 2: "b", 3: "b", 4: "c"}
    assert balance_bytes(partitions, live, sizes, 1.1).targets == {A1: (3, 4)}


def test_the_moving_replica_frees_its_own_rack() -> None:
    live = {1: "a", 2: "b", 3: "a"}
    plan = balance_bytes({A0: (1, 2), B0: (1,)}, live, {A0: 10, B0: 10}, 1.1)
    assert plan.targets == {A0: (3, 2)}


def test_any_rack_once_every_live_rack_holds_another_replica() -> None:
    live = {1: "a", 2: "b", 3: "a", 4: "b"}
    plan = balance_bytes({A0: (1, 2, 4), B0: (4,)}, live, {A0: 10, B0: 20}, 1.0)
    # Broker 4 (30) gives a-0 to broker 3: racks a and b already hold a-0 without it.
    assert plan.targets == {A0: (1, 2, 3)}


def test_no_move_when_only_a_doubled_rack_could_receive() -> None:
    partitions = {A0: (1, 2), A1: (1, 2), B0: (4,)}
    sizes = {A0: 6, A1: 6, B0: 12}
    # 1: 12, 2: 12, 3: 0, 4: 12. Only the empty broker 3 improves broker 1 ...
    assert balance_bytes(partitions, no_racks(1, 2, 3, 4), sizes, 1.0).targets == {A0: (3, 2)}
    # ... but it shares rack b with broker 2 while rack c holds no replica of a-0 or a-1.
    live = {1: "a", 2: "b", 3: "b", 4: "c"}
    assert balance_bytes(partitions, live, sizes, 1.0) == EMPTY


def test_busy_partitions_never_move() -> None:
    partitions = {A0: (1,), A1: (1,), B0: (2,)}
    sizes = {A0: 10, A1: 10, B0: 2}
    assert balance_bytes(partitions, no_racks(1, 2, 3), sizes, 1.0).targets == {A0: (3,)}
    plan = balance_bytes(partitions, no_racks(1, 2, 3), sizes, 1.0, busy={A0})
    assert plan.targets == {A1: (3,)}
    assert balance_bytes(partitions, no_racks(1, 2, 3), sizes, 1.0, busy={A0, A1}) == EMPTY


def test_empty_partitions_never_move() -> None:
    assert balance_bytes({A0: (1,), A1: (1,)}, no_racks(1, 2), {A1: 0}, 1.0) == EMPTY


def test_balance_bytes_moves_a_partition_at_most_once() -> None:
    partitions = {A0: (1, 2), A1: (1,), B0: (2,)}
    sizes = {A0: 10, A1: 10, B0: 10}
    plan = balance_bytes(partitions, no_racks(1, 2, 3, 4, 5), sizes, 1.0, busy={B0})
    # Broker 1 gives a-0 to broker 3; broker 2 (20 bytes) could only give a-0 again.
    assert plan.targets == {A0: (3, 2)}


def test_max_moves_is_honoured() -> None:
    partitions = {A0: (1, 2), A1: (2, 3), A2: (3, 1), B0: (1, 2), B1: (2, 3), B2: (3, 1)}
    sizes = dict.fromkeys(partitions, 10)
    live = no_racks(1, 2, 3, 4)
    assert balance_bytes(partitions, live, sizes, 1.1, max_moves=0) == EMPTY
    plan = balance_bytes(partitions, live, sizes, 1.1, max_moves=2)
    assert plan.targets == {A0: (4, 2), A1: (4, 3)}
    assert plan.moved_bytes == 20


def test_room_is_honoured_and_decreases_with_each_move() -> None:
    partitions = {A0: (1,), A1: (1,), A2: (1,), B0: (2,)}
    sizes = {A0: 10, A1: 10, A2: 10, B0: 1}
    live = no_racks(1, 2, 3)
    assert balance_bytes(partitions, live, sizes, 1.0).targets == {A0: (3,), A1: (2,)}
    # Broker 3 may take one replica, broker 2 (missing from room) none.
    assert balance_bytes(partitions, live, sizes, 1.0, room={3: 15}).targets == {A0: (3,)}
    assert balance_bytes(partitions, live, sizes, 1.0, room={3: 9}) == EMPTY


def test_balance_bytes_does_not_depend_on_the_order_of_the_inputs() -> None:
    partitions = {tp: (1, 2) for tp in (A0, A1, A2, A3, B0, B1)} | {B2: (3,)}
    live = {1: "a", 2: "b", 3: "c", 4: "a", 5: "b"}
    sizes = {A0: 5, A1: 5, A2: 7, A3: 7, B0: 3, B1: 9, B2: 4}
    forward = balance_bytes(partitions, live, sizes, 1.05, room={4: 100, 5: 12})
    backward = balance_bytes(
        dict(reversed(partitions.items())),
        dict(reversed(live.items())),
        dict(reversed(sizes.items())),
        1.05,
        room={5: 12, 4: 100},
    )
    assert forward == backward
    assert forward.targets
    assert list(forward.targets) == sorted(forward.targets)


@pytest.mark.parametrize("tolerance", [0.99, 0.0, float("nan")])
def test_a_tolerance_below_one_is_refused(tolerance: float) -> None:
    with pytest.raises(ValueError, match="tolerance"):
        balance_bytes({}, {}, {}, tolerance)


def test_negative_max_moves_and_sizes_are_refused() -> None:
    with pytest.raises(ValueError, match="max_moves"):
        balance_bytes({}, {}, {}, 1.1, max_moves=-1)
    with pytest.raises(ValueError, match="negative"):
        balance_bytes({A0: (1,)}, no_racks(1), {A0: -1}, 1.1)
    with pytest.raises(ValueError, match="negative"):
        balance_stats({A0: (1,)}, no_racks(1), {A0: -1})


@settings(max_examples=200, deadline=None)
@given(
    cluster=clusters(),
    tolerance=st.sampled_from([1.0, 1.05, 1.1, 1.5]),
    max_moves=st.integers(0, 12),
    data=st.data(),
)
def test_balance_bytes_properties(
    cluster: tuple[dict[TopicPartition, tuple[int, ...]], dict[int, str | None]],
    tolerance: float,
    max_moves: int,
    data: st.DataObject,
) -> None:
    partitions, live = cluster
    sizes = {tp: data.draw(st.integers(0, 100)) for tp in partitions}
    busy = data.draw(st.sets(st.sampled_from(TOPICS)))
    room = data.draw(st.none() | st.dictionaries(st.sampled_from(BROKERS), st.integers(0, 300)))
    plan = balance_bytes(partitions, live, sizes, tolerance, busy, max_moves, room)
    assert plan == balance_bytes(partitions, live, sizes, tolerance, busy, max_moves, room)

    assert len(plan.targets) <= max_moves
    assert not set(plan.targets) & busy
    assert set(plan.targets) <= set(partitions)
    assert plan.log_dirs == {} and plan.unplaceable == {}
    received: dict[int, int] = {}
    for tp, after in plan.targets.items():
        before = partitions[tp]
        assert len(after) == len(before)
        assert len(set(after)) == len(after)
        changed = new_replicas(before, after)
        assert len(changed) == 1
        position, broker = changed[0]
        assert before[position] in live
        assert broker in live
        assert broker not in before
        assert sizes[tp] > 0
        check_racks(live, before, after, {before[position]})
        received[broker] = received.get(broker, 0) + sizes[tp]
    assert plan.moved_bytes == sum(sizes[tp] for tp in plan.targets)
    if room is not None:
        for broker, total in received.items():
            assert total <= room.get(broker, 0)

    before_stats = balance_stats(partitions, live, sizes)
    after_stats = balance_stats(apply(partitions, plan), live, sizes)
    assert after_stats.mean_bytes == before_stats.mean_bytes
    assert after_stats.max_bytes <= before_stats.max_bytes
    assert after_stats.ratio <= before_stats.ratio
    if before_stats.ratio <= tolerance:
        assert plan == EMPTY
