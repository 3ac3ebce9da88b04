import numpy as np
import pytest

from kpo_placement import goals
from kpo_placement.synthetic import SyntheticSpec, SyntheticSpecError, synthetic_cluster


def test_same_spec_same_cluster():
    spec = SyntheticSpec(brokers=8, partitions=500, seed=11)
    a, b = synthetic_cluster(spec), synthetic_cluster(spec)
    assert np.array_equal(a.replicas, b.replicas)
    assert np.array_equal(a.size_bytes, b.size_bytes)
    assert a.topics.tolist() == b.topics.tolist()
    other = synthetic_cluster(SyntheticSpec(brokers=8, partitions=500, seed=12))
    assert not np.array_equal(a.replicas, other.replicas)


def test_cluster_is_valid_rack_aware_and_skewed():
    model = synthetic_cluster(SyntheticSpec(brokers=12, partitions=2000, racks=3, seed=1))
    model.validate()
    assert goals.hard_goal_violations(model, model.replicas, disk_threshold=1.0) == []
    assert (model.rf == 3).all()
    assert len(set(model.topics.tolist())) > 1
    assert model.size_bytes.max() > 10 * np.median(model.size_bytes)
    assert goals.imbalance(model, model.replicas, model.alive).worst() > 1.1


def test_empty_and_dead_brokers():
    spec = SyntheticSpec(brokers=10, partitions=300, empty_brokers=2, dead_brokers=1, seed=3)
    model = synthetic_cluster(spec)
    counts = goals.broker_loads(model, model.replicas)[:, goals.REPLICAS]
    assert counts[-2:].tolist() == [0, 0]
    assert model.alive.tolist() == [True] * 7 + [False] + [True] * 2
    assert counts[7] > 0
    assert (model.leaders != 7).all()


def test_partition_indexes_count_within_each_topic():
    model = synthetic_cluster(SyntheticSpec(partitions=100, partitions_per_topic=4, seed=5))
    for topic in set(model.topics.tolist()):
        indexes = sorted(model.partitions[model.topics == topic].tolist())
        assert indexes == list(range(len(indexes)))


def test_no_racks():
    model = synthetic_cluster(SyntheticSpec(racks=0, seed=2))
    assert (model.racks == -1).all()
    assert model.rack_names == []


@pytest.mark.parametrize(
    "spec",
    [
        SyntheticSpec(brokers=3, rf=3, empty_brokers=1),
        SyntheticSpec(brokers=4, dead_brokers=4),
        SyntheticSpec(partitions=0),
    ],
)
def test_impossible_specs_are_refused(spec):
    with pytest.raises(SyntheticSpecError):
        synthetic_cluster(spec)
