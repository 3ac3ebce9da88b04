from kpo_kafka.admin_types import PartitionInfo
from kpo_operator.model import ClusterView


def test_cluster_view_lookup_and_original_replicas() -> None:
    state = PartitionInfo(replicas=(2, 1, 0), leader=0, isr=(0, 1), adding=(2,), removing=(0,))
    view = ClusterView(topics={"t": {0: state}}, live_brokers=frozenset({0, 1, 2}))
    assert view.partition("t", 0) is state
    assert view.partition("t", 1) is None
    assert view.partition("u", 0) is None
    assert state.original_replicas == (1, 0)
