from kpo_placement import goals
from kpo_placement.planner import PlanOptions, plan
from kpo_placement.replica_rounds import REPLICA_WEIGHTS
from kpo_placement.state import PlanState
from kpo_placement.swaps import swap_pass
from kpo_placement.synthetic import SyntheticSpec, synthetic_cluster
from tests.unit.placement.model_factory import B, P, make_model


def test_swap_evens_disk_and_keeps_counts():
    # disk 100 vs 20 with 2 replicas each: any single move unbalances the counts
    sizes = {1: [60, 40], 2: [10, 10]}
    partitions = [
        P("t", i, (b,), size=s) for i, (b, s) in enumerate((b, s) for b in sizes for s in sizes[b])
    ]
    model = make_model([B(1), B(2)], partitions)
    state = PlanState.start(
        model, model.alive, tolerance=1.05, disk_threshold=0.8, max_replicas_per_broker=None
    )
    assert swap_pass(state, REPLICA_WEIGHTS, model.alive, model.alive) == 1
    # the cheapest best pair: 40 <-> 10
    assert state.assignment[:, 0].tolist() == [0, 1, 0, 1]
    loads = goals.broker_loads(model, state.assignment)
    assert loads[:, goals.DISK].tolist() == [70, 50]
    assert loads[:, goals.REPLICAS].tolist() == [2, 2]


def test_no_swap_when_balanced():
    model = make_model([B(1), B(2)], [P("t", 0, (1,)), P("t", 1, (2,))])
    state = PlanState.start(
        model, model.alive, tolerance=1.05, disk_threshold=0.8, max_replicas_per_broker=None
    )
    assert swap_pass(state, REPLICA_WEIGHTS, model.alive, model.alive) == 0


def test_swaps_respect_racks():
    # the only large replica's partition already has a replica in broker 2's rack
    brokers = [B(1, "a"), B(2, "b"), B(3, "b")]
    partitions = [P("t", 0, (1, 3), size=60), P("t", 1, (1,), size=40), P("t", 2, (2,), size=10)]
    partitions.append(P("t", 3, (2,), size=10))
    model = make_model(brokers, partitions)
    state = PlanState.start(
        model, model.alive, tolerance=1.05, disk_threshold=0.8, max_replicas_per_broker=None
    )
    assert swap_pass(state, REPLICA_WEIGHTS, model.alive, model.alive) >= 1
    assert goals.hard_goal_violations(model, state.assignment) == []
    assert state.assignment[0].tolist() == [0, 2]  # t-0 (60 bytes) could not go to rack b
    assert state.assignment[1, 0] == 1  # t-1 (40 bytes) went to broker 2 instead


def test_rebalance_onto_new_empty_brokers_needs_swaps_and_gets_balanced():
    spec = SyntheticSpec(
        brokers=12,
        partitions=3000,
        racks=3,
        partitions_per_topic=20,
        placement_skew=0.1,
        empty_brokers=3,
        seed=0,
    )
    result = plan(synthetic_cluster(spec), PlanOptions())
    assert result.stats.rounds["swaps"] > 0
    assert result.stats.balanced
    assert result.stats.bytes_moved <= 1.1 * result.stats.bytes_lower_bound
