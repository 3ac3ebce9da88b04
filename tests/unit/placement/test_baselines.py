import numpy as np
import pytest

from kpo_kafka.generate import propose_move
from kpo_placement import goals
from kpo_placement.baselines import greedy_plan, kafka_generate
from kpo_placement.model import NO_BROKER
from kpo_placement.synthetic import SyntheticSpec, synthetic_cluster
from tests.unit.placement.model_factory import B, P, make_model


def test_generate_lays_out_every_topic_round_robin_over_the_eligible_brokers():
    brokers = [B(1, "a"), B(2, "b"), B(3, "c"), B(4, "a", alive=False)]
    partitions = [P("t", i, (1, 2)) for i in range(6)] + [P("u", i, (4, 1)) for i in range(3)]
    model = make_model(brokers, partitions)
    target = kafka_generate(model, goals.eligible_brokers(model), seed=7)
    expected = propose_move(
        {"t": {i: [1, 2] for i in range(6)}, "u": {i: [4, 1] for i in range(3)}},
        ["t", "u"],
        [1, 2, 3],
        {1: "a", 2: "b", 3: "c", 4: "a"},
        seed=7,
    ).proposed
    ids = model.broker_ids
    for p in range(model.num_partitions):
        row = tuple(int(ids[b]) for b in target[p] if b != NO_BROKER)
        assert row == expected[(str(model.topics[p]), int(model.partitions[p]))]
    assert goals.hard_goal_violations(model, target, eligible=goals.eligible_brokers(model)) == []
    # leaders go round-robin: each of the 3 brokers leads 2 of t's 6 partitions
    leads = np.bincount(target[:6, 0], minlength=4)
    assert leads.tolist()[:3] == [2, 2, 2]


def test_generate_keeps_rf_and_racks_on_a_synthetic_cluster():
    model = synthetic_cluster(SyntheticSpec(brokers=9, partitions=300, racks=3, seed=2))
    target = kafka_generate(model, model.alive)
    assert ((target != NO_BROKER).sum(axis=1) == model.rf).all()
    assert goals.hard_goal_violations(model, target) == []


def test_greedy_evens_out_disk_from_a_full_broker():
    model = make_model([B(1), B(2)], [P("t", i, (1,), size=10) for i in range(10)])
    target = greedy_plan(model, model.alive)
    assert goals.broker_loads(model, target)[:, goals.DISK].tolist() == [50, 50]


def test_greedy_moves_the_largest_replica_that_helps_first():
    sizes = [50, 30, 10, 10]
    model = make_model([B(1), B(2)], [P("t", i, (1,), size=s) for i, s in enumerate(sizes)])
    target = greedy_plan(model, model.alive)
    # 100 bytes on broker 1: moving 50 makes it 50 / 50
    assert target[:, 0].tolist() == [1, 0, 0, 0]


def test_greedy_drains_dead_brokers_and_keeps_hard_goals():
    spec = SyntheticSpec(brokers=9, partitions=400, racks=3, dead_brokers=1, seed=4)
    model = synthetic_cluster(spec)
    target = greedy_plan(model, model.alive)
    assert goals.hard_goal_violations(model, target) == []
    before = goals.imbalance(model, model.replicas, model.alive).max_over_mean["disk"]
    after = goals.imbalance(model, target, model.alive).max_over_mean["disk"]
    assert after < before


def test_greedy_stops_when_nothing_fits():
    # one replica larger than any other disk's room: nothing can move
    model = make_model([B(1, disk=1000), B(2, disk=50)], [P("t", 0, (1,), size=100)])
    target = greedy_plan(model, model.alive)
    assert np.array_equal(target, model.replicas)


@pytest.mark.parametrize("max_moves", [0, 1])
def test_greedy_move_budget(max_moves):
    model = make_model([B(1), B(2)], [P("t", i, (1,), size=10) for i in range(10)])
    target = greedy_plan(model, model.alive, max_moves=max_moves)
    assert int((target[:, 0] == 1).sum()) == max_moves
