import numpy as np
import pytest

from kpo_placement import goals
from kpo_placement.goals import DISK, LEADERS, NET_IN, NET_OUT, REPLICAS
from kpo_placement.model import NO_BROKER
from tests.unit.placement.model_factory import B, P, make_model


def three_brokers():
    return make_model(
        [B(1, "a"), B(2, "b"), B(3, "a")],
        [
            P("t", 0, (1, 2), size=100, bytes_in=10, bytes_out=20),
            P("t", 1, (2, 3), size=50, bytes_in=4, bytes_out=0),
            P("u", 0, (3,), size=30, bytes_in=2, bytes_out=6),
        ],
    )


def test_broker_loads_follow_the_resource_model():
    model = three_brokers()
    loads = goals.broker_loads(model, model.replicas)
    # broker 1 leads t-0: out = bytes_out + bytes_in * (RF - 1) = 20 + 10
    assert loads[0].tolist() == [100, 10, 30, 1, 1]
    # broker 2 follows t-0 (no out) and leads t-1: 0 + 4 * 1
    assert loads[1].tolist() == [150, 14, 4, 2, 1]
    # broker 3 follows t-1 and leads u-0 (RF 1): 6 + 0
    assert loads[2].tolist() == [80, 6, 6, 2, 1]


def test_broker_loads_with_actual_leaders():
    model = three_brokers()
    leaders = np.array([1, -1, 2], dtype=np.int32)  # broker 2 leads t-0, t-1 has no leader
    loads = goals.broker_loads(model, model.replicas, leaders)
    assert loads[:, NET_OUT].tolist() == [0, 30, 6]
    assert loads[:, LEADERS].tolist() == [0, 1, 1]
    assert loads[:, DISK].tolist() == [100, 150, 80]  # disk does not depend on leadership


def test_imbalance_is_max_over_mean_on_eligible_brokers():
    model = three_brokers()
    imb = goals.imbalance(model, model.replicas, goals.eligible_brokers(model))
    assert imb.max_over_mean["disk"] == pytest.approx(150 / 110)
    assert imb.min_over_mean["disk"] == pytest.approx(80 / 110)
    assert imb.max_over_mean["leaders"] == pytest.approx(1.0)
    assert imb.max_over_mean["replicas"] == pytest.approx(2 / (5 / 3))
    # broker 1 leads t-0, the partition with the most traffic: out 30 of 40 in all
    assert imb.max_over_mean["net_out"] == pytest.approx(30 / (40 / 3))
    assert imb.worst() == pytest.approx(imb.max_over_mean["net_out"])
    assert not imb.within(1.05)


def test_imbalance_without_a_removed_broker_counts_its_load_on_the_others():
    model = three_brokers()
    eligible = goals.eligible_brokers(model, removed=[3])
    util = goals.utilisation(
        goals.broker_loads(model, model.replicas), goals.capacities(model), eligible
    )
    # all 330 bytes must fit on brokers 1 and 2: ideal 165 each
    assert util[1, DISK] == pytest.approx(150 / 165)


def test_rack_keys_give_brokers_without_rack_a_rack_of_their_own():
    model = make_model([B(1, "a"), B(2), B(3)], [P("t", 0, (1, 2, 3))])
    keys = goals.rack_keys(model)
    assert len(set(keys.tolist())) == 3
    assert keys[0] == 0


def test_hard_goals_hold_on_a_clean_assignment():
    model = three_brokers()
    assert goals.hard_goal_violations(model, model.replicas) == []


def test_rack_violation_is_named():
    model = make_model([B(1, "a"), B(2, "b"), B(3, "a")], [P("t", 0, (1, 3))])
    found = goals.hard_goal_violations(model, model.replicas)
    assert [v.goal for v in found] == [goals.RACK]
    assert found[0].partition == 0
    assert "t-0 spans 1 racks, needs 2" in found[0].detail


def test_rack_goal_only_asks_for_the_racks_there_are():
    model = make_model([B(1, "a"), B(2, "b"), B(3, "a")], [P("t", 0, (1, 2, 3))])
    assert goals.required_racks(model, model.replicas, model.alive).tolist() == [2]
    assert goals.hard_goal_violations(model, model.replicas) == []


def test_broker_goals_are_named():
    model = make_model(
        [B(1, disk=100), B(2, alive=False), B(3)],
        [P("t", 0, (1,), size=90), P("t", 1, (1, 2)), P("t", 2, (3,))],
    )
    found = goals.hard_goal_violations(model, model.replicas, max_replicas_per_broker=1)
    by_goal = {v.goal: v for v in found}
    assert by_goal[goals.INELIGIBLE_BROKER].broker_id == 2
    assert "dead" in by_goal[goals.INELIGIBLE_BROKER].detail
    assert by_goal[goals.DISK_THRESHOLD].broker_id == 1
    assert by_goal[goals.MAX_REPLICAS].broker_id == 1
    assert len(found) == 3


def test_removed_broker_holding_replicas_is_named():
    model = three_brokers()
    eligible = goals.eligible_brokers(model, removed=[2])
    found = goals.hard_goal_violations(model, model.replicas, eligible=eligible)
    assert [(v.goal, v.broker_id) for v in found] == [(goals.INELIGIBLE_BROKER, 2)]
    assert "being removed" in found[0].detail


def test_rf_change_duplicates_and_partition_count_are_named():
    model = three_brokers()
    changed = model.replicas.copy()
    changed[0] = [0, NO_BROKER]
    changed[1] = [1, 1]
    found = goals.hard_goal_violations(model, changed)
    assert {(v.goal, v.partition) for v in found} == {
        (goals.REPLICATION_FACTOR, 0),
        (goals.DUPLICATE_REPLICA, 1),
        (goals.RACK, 1),  # one broker twice is also one rack
    }
    shorter = goals.hard_goal_violations(model, model.replicas[:2])
    assert [v.goal for v in shorter] == [goals.PARTITION_COUNT]


def test_bytes_moved_counts_adding_replicas_only():
    model = three_brokers()
    after = model.replicas.copy()
    after[0] = [1, 0]  # t-0 reordered: a leader move, nothing copied
    after[1] = [2, 0]  # t-1: broker 3 -> broker 1 for its second replica: 50 bytes
    after[2] = [1, NO_BROKER]  # u-0: broker 3 -> broker 2: 30 bytes
    assert goals.bytes_moved(model, model.replicas, after) == 80.0


def test_lower_bound_one_full_broker_one_empty():
    model = make_model([B(1), B(2)], [P("t", i, (1,), size=10) for i in range(4)])
    # ideal 20 each; broker 1 must send 40 - 21, broker 2 receive 19 - 0
    bound = goals.bytes_moved_lower_bound(model, model.replicas, model.alive, 1.05)
    assert bound == pytest.approx(19.0)


def test_lower_bound_counts_everything_on_a_removed_broker():
    model = make_model([B(1), B(2), B(3)], [P("t", i, (i % 3 + 1,), size=10) for i in range(6)])
    eligible = goals.eligible_brokers(model, removed=[3])
    # broker 3's 20 bytes must go; brokers 1 and 2 (20 each, ideal 30) must receive 8.5 each
    bound = goals.bytes_moved_lower_bound(model, model.replicas, eligible, 1.05)
    assert bound == pytest.approx(20.0)


def test_lower_bound_is_taken_rack_by_rack_when_replicas_cannot_leave_their_rack():
    # RF 2 over 2 racks: rack a is broker 1 alone, rack b brokers 2 and 4
    model = make_model(
        [B(1, "a"), B(2, "b"), B(4, "b")],
        [P("t", i, (1, 2), size=10) for i in range(4)],
    )
    ideal = 80 / 3
    rack_a = 40 - 1.05 * ideal  # broker 1 can only shed within rack a (it cannot)
    rack_b = max(40 - 1.05 * ideal, 0.95 * ideal)  # broker 4 must receive its deficit
    bound = goals.bytes_moved_lower_bound(model, model.replicas, model.alive, 1.05)
    assert bound == pytest.approx(rack_a + rack_b)


def test_topic_spread_counts_replicas_above_the_per_broker_share():
    model = make_model(
        [B(1), B(2), B(3)],
        [P("t", 0, (1, 2)), P("t", 1, (1, 3)), P("t", 2, (1, 2))],
    )
    # 6 replicas of t over 3 brokers: share 2; broker 1 holds 3
    assert goals.topic_caps(model, model.replicas, model.alive).tolist() == [2]
    assert goals.topic_spread_excess(model, model.replicas, model.alive) == 1
    counts = goals.topic_counts(model, model.replicas)
    assert counts.tolist() == [[3, 2, 1]]


def test_leader_net_out_uses_the_assignment_rf():
    model = three_brokers()
    assert goals.leader_net_out(model, model.replicas).tolist() == [30, 4, 6]
    assert goals.RESOURCES[NET_IN] == "net_in"
    assert goals.RESOURCES[REPLICAS] == "replicas"


def test_a_resource_nobody_uses_is_balanced():
    model = make_model([B(1), B(2)], [P("t", 0, (1,), bytes_out=0), P("t", 1, (1,), bytes_out=0)])
    imb = goals.imbalance(model, model.replicas, model.alive)
    assert imb.max_over_mean["net_out"] == imb.min_over_mean["net_out"] == 1.0
    assert imb.max_over_mean["disk"] == 2.0
