import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kpo_placement import goals
from kpo_placement.model import NO_BROKER, ModelError
from kpo_placement.planner import (
    InsufficientCapacityError,
    InvalidOptionsError,
    PlanError,
    PlanOptions,
    UnsatisfiableGoalError,
    plan,
)
from kpo_placement.synthetic import SyntheticSpec, synthetic_cluster
from tests.unit.placement.model_factory import B, P, make_model


def counts(model, target):
    return goals.broker_loads(model, target)[:, goals.REPLICAS].tolist()


def test_one_overloaded_broker_and_one_empty_broker_share_evenly():
    model = make_model([B(1), B(2)], [P("t", i, (1,), size=10) for i in range(10)])
    result = plan(model, PlanOptions())
    assert counts(model, result.target) == [5, 5]
    assert len(result.moves) == 5
    assert all(m.old_replicas == (1,) and m.new_replicas == (2,) for m in result.moves)
    assert result.bytes_moved == 50.0
    assert result.stats.bytes_moved == 50.0
    assert result.stats.bytes_lower_bound == pytest.approx(47.5)
    assert result.stats.balanced
    assert result.stats.imbalance_before.max_over_mean["disk"] == pytest.approx(2.0)
    assert result.stats.imbalance_after.max_over_mean["disk"] == pytest.approx(1.0)


def test_balanced_cluster_gets_an_empty_plan():
    model = make_model([B(1), B(2)], [P("t", i, (i % 2 + 1,)) for i in range(4)])
    result = plan(model, PlanOptions())
    assert result.moves == []
    assert np.array_equal(result.target, model.replicas)


def test_add_brokers_fills_the_new_broker_only():
    partitions = [P("t", i, (i % 3 + 1,), size=10) for i in range(12)]
    model = make_model([B(1), B(2), B(3), B(4)], partitions)
    result = plan(model, PlanOptions(mode="add-brokers", brokers_to_add=(4,)))
    assert counts(model, result.target) == [3, 3, 3, 3]
    assert len(result.moves) == 3
    assert all(m.adding == (4,) for m in result.moves)


def test_remove_brokers_drains_them():
    partitions = [P("t", i, (i % 3 + 1,), size=10) for i in range(9)]
    model = make_model([B(1), B(2), B(3)], partitions)
    result = plan(model, PlanOptions(mode="remove-brokers", brokers_to_remove=(3,)))
    assert counts(model, result.target)[2] == 0
    assert sorted(counts(model, result.target)[:2]) == [4, 5]
    assert len(result.moves) == 3
    assert all(m.removing == (3,) for m in result.moves)
    assert result.stats.bytes_moved == result.stats.bytes_lower_bound == 30.0


def test_remove_brokers_is_refused_when_the_disks_cannot_hold():
    partitions = [P("t", i, (i % 3 + 1,), size=300) for i in range(9)]
    model = make_model([B(1), B(2), B(3)], partitions)
    with pytest.raises(InsufficientCapacityError, match="cannot remove brokers: 2700 bytes"):
        plan(model, PlanOptions(mode="remove-brokers", brokers_to_remove=(3,)))


def test_remove_brokers_is_refused_when_rf_exceeds_the_brokers_left():
    model = make_model([B(1), B(2), B(3)], [P("t", 0, (1, 2, 3))])
    with pytest.raises(InsufficientCapacityError, match="replication factor 3 exceeds"):
        plan(model, PlanOptions(mode="remove-brokers", brokers_to_remove=(3,)))


def test_remove_brokers_is_refused_when_a_replica_fits_nowhere():
    # the totals fit, but broker 3's one large replica fits under no other threshold
    model = make_model(
        [B(1, disk=100), B(2, disk=100), B(3, disk=1000)],
        [P("t", 0, (3,), size=90), P("t", 1, (1,), size=1)],
    )
    with pytest.raises(InsufficientCapacityError, match="broker 3 is being removed"):
        plan(model, PlanOptions(mode="remove-brokers", brokers_to_remove=(3,)))


def test_leader_rebalance_moves_no_replica():
    partitions = [P("t", i, (1, 2, 3), bytes_in=5, bytes_out=5) for i in range(6)]
    model = make_model([B(1), B(2), B(3)], partitions)
    result = plan(model, PlanOptions(mode="leaders"))
    assert result.moves
    assert all(m.leader_only for m in result.moves)
    assert result.bytes_moved == 0.0
    leaders = goals.broker_loads(model, result.target)[:, goals.LEADERS]
    assert leaders.tolist() == [2, 2, 2]
    assert sorted(map(sorted, result.target.tolist())) == sorted(
        map(sorted, model.replicas.tolist())
    )


def test_leader_rebalance_takes_leadership_off_a_dead_broker():
    partitions = [P("t", i, (3, 1, 2)) for i in range(3)]
    model = make_model([B(1), B(2), B(3, alive=False)], partitions)
    result = plan(model, PlanOptions(mode="leaders"))
    assert all(result.target[p, 0] != 2 for p in range(3))
    assert all(m.leader_only for m in result.moves)


def test_rebalance_repairs_a_rack_violation():
    brokers = [B(1, "a"), B(2, "a"), B(3, "b"), B(4, "b")]
    partitions = [P("t", 0, (1, 2)), P("t", 1, (3, 1)), P("t", 2, (4, 2)), P("t", 3, (2, 3))]
    model = make_model(brokers, partitions)
    assert goals.hard_goal_violations(model, model.replicas)[0].goal == goals.RACK
    result = plan(model, PlanOptions())
    assert goals.hard_goal_violations(model, result.target) == []
    assert [v.goal for v in result.stats.violations_before] == [goals.RACK]


def test_rebalance_drains_a_dead_broker():
    partitions = [P("t", i, (i % 3 + 1,)) for i in range(9)]
    model = make_model([B(1), B(2), B(3, alive=False)], partitions)
    result = plan(model, PlanOptions())
    assert counts(model, result.target)[2] == 0


def test_rebalance_brings_a_broker_under_the_disk_threshold():
    partitions = [P("t", i, (1,), size=10) for i in range(9)] + [P("t", 9, (2,), size=10)]
    model = make_model([B(1, disk=100), B(2, disk=100)], partitions)
    result = plan(model, PlanOptions(disk_threshold=0.8, balance_tolerance=2.0))
    disk = goals.broker_loads(model, result.target)[:, goals.DISK]
    assert disk[0] <= 80


def test_rebalance_respects_the_replica_cap():
    partitions = [P("t", i, (1,)) for i in range(6)] + [P("t", 6, (2,))]
    model = make_model([B(1), B(2)], partitions)
    result = plan(model, PlanOptions(max_replicas_per_broker=4, balance_tolerance=3.0))
    assert max(counts(model, result.target)) <= 4


def test_unfixable_hard_goal_is_refused_with_its_violations():
    model = make_model(
        [B(1, disk=100), B(2, disk=100)], [P("t", 0, (1,), size=90), P("t", 1, (2,), size=1)]
    )
    with pytest.raises(UnsatisfiableGoalError) as raised:
        plan(model, PlanOptions())
    assert [v.goal for v in raised.value.violations] == [goals.DISK_THRESHOLD]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (PlanOptions(mode="everything"), "unknown mode"),  # type: ignore[arg-type]
        (PlanOptions(balance_tolerance=0.9), "balance_tolerance"),
        (PlanOptions(disk_threshold=1.5), "disk_threshold"),
        (PlanOptions(max_replicas_per_broker=0), "max_replicas_per_broker"),
        (PlanOptions(mode="add-brokers"), "needs brokers_to_add"),
        (PlanOptions(mode="add-brokers", brokers_to_add=(1,)), "must be alive and empty"),
        (PlanOptions(mode="remove-brokers", brokers_to_remove=(9,)), "not in the model: \\[9\\]"),
        (PlanOptions(mode="remove-brokers"), "needs brokers_to_remove"),
    ],
)
def test_bad_options_are_refused(options, message):
    model = make_model([B(1), B(2)], [P("t", 0, (1,))])
    with pytest.raises(InvalidOptionsError, match=message):
        plan(model, options)


def test_inconsistent_model_is_refused():
    model = make_model([B(1), B(2)], [P("t", 0, (1,))])
    model.replicas[0, 0] = 7
    with pytest.raises(ModelError):
        plan(model, PlanOptions())


def test_same_model_and_options_give_the_same_plan():
    spec = SyntheticSpec(brokers=12, partitions=600, racks=3, placement_skew=0.5, seed=3)
    first = plan(synthetic_cluster(spec), PlanOptions())
    second = plan(synthetic_cluster(spec), PlanOptions())
    assert np.array_equal(first.target, second.target)
    assert first.moves == second.moves
    assert first.stats.bytes_moved == second.stats.bytes_moved


def test_synthetic_rebalance_reaches_the_tolerance_near_the_bound():
    spec = SyntheticSpec(brokers=15, partitions=3000, racks=3, placement_skew=0.3, seed=5)
    result = plan(synthetic_cluster(spec), PlanOptions())
    assert result.stats.imbalance_after.worst() <= 1.05
    assert result.stats.balanced
    assert result.stats.bytes_moved <= 1.1 * result.stats.bytes_lower_bound


MODES = st.sampled_from(["rebalance", "add-brokers", "remove-brokers", "leaders"])


@st.composite
def clusters(draw):
    mode = draw(MODES)
    brokers = draw(st.integers(5, 9))
    empty = draw(st.integers(1 if mode == "add-brokers" else 0, 2))
    dead = draw(st.integers(0, 1))
    rf = draw(st.integers(1, min(3, brokers - empty - dead - 1)))
    spec = SyntheticSpec(
        brokers=brokers,
        racks=draw(st.integers(0, 3)),
        partitions=draw(st.integers(20, 80)),
        rf=rf,
        partitions_per_topic=draw(st.integers(1, 6)),
        size_sigma=1.0,
        placement_skew=draw(st.floats(0.0, 0.8)),
        empty_brokers=empty,
        dead_brokers=dead,
        seed=draw(st.integers(0, 2**16)),
    )
    return synthetic_cluster(spec), empty, mode


def options_for(model, empty, mode):
    ids = [int(i) for i in model.broker_ids]
    if mode == "add-brokers":
        return PlanOptions(mode=mode, brokers_to_add=tuple(ids[len(ids) - empty :]))
    if mode == "remove-brokers":
        return PlanOptions(mode=mode, brokers_to_remove=(ids[0],))
    return PlanOptions(mode=mode)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_invariants_on_random_clusters(cluster):
    model, empty, mode = cluster
    options = options_for(model, empty, mode)
    try:
        result = plan(model, options)
    except (InvalidOptionsError, InsufficientCapacityError, UnsatisfiableGoalError):
        return  # refused with a named error: nothing half-done
    removed = options.brokers_to_remove if mode == "remove-brokers" else ()
    eligible = goals.eligible_brokers(model, removed)
    target = result.target
    # RF and partition count unchanged, no duplicate replica
    assert target.shape[0] == model.num_partitions
    assert ((target != NO_BROKER).sum(axis=1) == model.rf).all()
    for row in target:
        held = [b for b in row if b != NO_BROKER]
        assert len(held) == len(set(held))
    # hard goals hold (leader moves cannot add any)
    found = goals.hard_goal_violations(model, target, eligible=eligible)
    if mode == "leaders":
        assert set(found) <= set(result.stats.violations_before)
    else:
        assert found == []
    # every move is valid and accounted for; untouched partitions are unchanged
    ids = model.broker_ids
    moved = {m.p for m in result.moves}
    for m in result.moves:
        assert m.old_replicas == tuple(int(ids[b]) for b in model.replicas[m.p] if b >= 0)
        assert m.new_replicas == tuple(int(ids[b]) for b in target[m.p] if b >= 0)
        assert m.new_replicas != m.old_replicas
        assert m.bytes_moved == len(m.adding) * model.size_bytes[m.p]
        assert all(eligible[model.position_of(b)] for b in m.adding)
        if mode == "leaders":
            assert m.leader_only
    for p in set(range(model.num_partitions)) - moved:
        assert np.array_equal(target[p], model.replicas[p])
    if mode == "remove-brokers":
        assert counts(model, target)[model.position_of(removed[0])] == 0
    # determinism
    again = plan(model, options)
    assert np.array_equal(again.target, target)
    assert again.moves == result.moves


def test_plan_errors_share_a_base_class():
    assert issubclass(InsufficientCapacityError, PlanError)
    assert issubclass(UnsatisfiableGoalError, PlanError)
    assert issubclass(InvalidOptionsError, PlanError)
