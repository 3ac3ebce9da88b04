"""The rebalance benchmark's pure logic: member output and when the survivors own all."""

from pathlib import Path

from kpo_bench.cli import broker_properties
from kpo_bench.clusters import COMMON_BROKER_PROPERTIES
from kpo_bench.groups import MemberEvent, covered_at, owned_after, parse_member_events
from kpo_broker.config import BrokerConfig
from kpo_devenv.apache_kafka import ApacheKafkaCluster
from kpo_devenv.kafka_cluster import KafkaCluster

DELAY = "group.initial.rebalance.delay.ms"
#: Kafka's default (GroupCoordinatorConfig.GROUP_INITIAL_REBALANCE_DELAY_MS_DEFAULT).
KAFKA_DEFAULT_DELAY_MS = 3000


def test_member_lines_are_parsed_and_a_half_written_line_is_left_out() -> None:
    text = "100.5 assign 0,1,2\nnoise line\n101.0 revoke 0,1,2\n101.2 assign \n102.0 assign 3,4"
    events = parse_member_events(text)
    assert events == [
        MemberEvent(100.5, "assign", frozenset({0, 1, 2})),
        MemberEvent(101.0, "revoke", frozenset({0, 1, 2})),
        MemberEvent(101.2, "assign", frozenset()),
    ]
    assert owned_after(events) == set()
    assert owned_after(parse_member_events(text + "\n")) == {3, 4}


def test_coverage_counts_only_states_reached_after_the_kill() -> None:
    before = {
        "a": [MemberEvent(1.0, "assign", frozenset({0, 1}))],
        "b": [MemberEvent(1.1, "assign", frozenset({2, 3}))],
    }
    # Covered before the kill at 5.0 (with the dead member's partitions elsewhere): not yet.
    assert covered_at(before, {0, 1, 2, 3}, after=5.0) is None
    # Eager rebalance: both revoke everything, then a gets {0,1,2} at 9.0 and b {3} at 9.4.
    after = {
        "a": [*before["a"], MemberEvent(8.0, "revoke", frozenset({0, 1})),
              MemberEvent(9.0, "assign", frozenset({0, 1, 2}))],
        "b": [*before["b"], MemberEvent(8.1, "revoke", frozenset({2, 3})),
              MemberEvent(9.4, "assign", frozenset({3}))],
    }  # fmt: skip
    assert covered_at(after, {0, 1, 2, 3}, after=5.0) == 9.4
    assert covered_at(after, {0, 1, 2, 3, 4}, after=5.0) is None


def test_both_systems_wait_the_same_initial_rebalance_delay(tmp_path: Path) -> None:
    """A new group's join is compared at one ``group.initial.rebalance.delay.ms`` on both.

    kpo's brokers and Kafka's have the same broker default (3000), but the devenv gives
    Kafka's brokers 0 (its shipped ``server.properties``): the bench must set the value.
    """
    properties = broker_properties(None)
    ours = KafkaCluster(tmp_path / "ours", "127.0.0.1:1/ours", 3, properties)
    kafka = ApacheKafkaCluster(tmp_path / "kafka", "127.0.0.1:1/kafka", "libs/*", 3, properties)
    kafka_delays = {
        int(b.properties.get(DELAY, KAFKA_DEFAULT_DELAY_MS)) for b in kafka.brokers.values()
    }
    our_delays = {
        BrokerConfig.from_properties(b.properties).group_initial_rebalance_delay_ms
        for b in ours.brokers.values()
    }
    assert our_delays == kafka_delays == {int(COMMON_BROKER_PROPERTIES[DELAY])}
