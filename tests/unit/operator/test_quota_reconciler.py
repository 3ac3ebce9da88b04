"""QuotaReconciler and the single ThrottleWriter over the in-memory Kafka and object store.

KIP-73 throttles: rates (bytes/s) on brokers, throttled-replica lists on topics. Every
sync recomputes the whole configuration from all TopicReplicaQuotas and moving
PartitionReassignments (lowest rate wins, lists are united) and writes the difference
with IncrementalAlterConfigs (KIP-339), touching only the operator's own keys.
"""

from __future__ import annotations

from typing import Any

import pytest

from kpo_kafka.admin_errors import api_error
from kpo_kafka.admin_types import ConfigResource
from kpo_operator.quota import QuotaReconciler
from kpo_operator.reassignment import ReassignmentReconciler
from kpo_operator.resources import PARTITION_REASSIGNMENT, TOPIC_REPLICA_QUOTA
from kpo_operator.store import ObjectStoreError
from kpo_operator.throttle_ledger import OwnedRate, ThrottleLedger
from kpo_operator.throttle_writer import ThrottleWriter
from kpo_operator.throttles import (
    FOLLOWER_RATE,
    FOLLOWER_REPLICAS,
    LEADER_RATE,
    LEADER_REPLICAS,
)
from tests.unit.operator.fake_kafka import FakeKafkaAdmin
from tests.unit.operator.fake_store import FakeObjectStore, MemoryLedgerStore
from tests.unit.operator.reassignment_env import Clock

NS = "ns"
ERROR_POLICY_VIOLATION = 44  # Kafka protocol error code
UNOWNED_BROKER = ("log.cleaner.threads", "2")
UNOWNED_TOPIC = ("retention.ms", "86400000")


class Env:
    def __init__(self) -> None:
        self.kafka = FakeKafkaAdmin(brokers={0: None, 1: None, 2: None, 3: None})
        self.kafka.create_topic("t", {0: [0, 1], 1: [1, 2]})
        self.kafka.create_topic("u", {0: [2, 3]})
        # Configs the operator does not own, set by someone else: never to be touched.
        self.kafka.configs[ConfigResource.broker(0)] = dict([UNOWNED_BROKER])
        self.kafka.configs[ConfigResource.topic("t")] = dict([UNOWNED_TOPIC])
        self.store = FakeObjectStore()
        self.ledger = MemoryLedgerStore()
        self.clock = Clock()
        self.writer = ThrottleWriter(self.kafka, self.store, self.ledger, clock=self.clock)
        self.quotas = QuotaReconciler(self.store, self.writer, now=self.clock.now)
        self.reassignments = ReassignmentReconciler(
            self.kafka, self.store, self.writer, clock=self.clock, now=self.clock.now
        )

    def create(self, name: str, **spec: Any) -> None:
        self.store.apply(
            {
                "apiVersion": "kpo.dev/v1alpha1",
                "kind": "TopicReplicaQuota",
                "metadata": {"name": name, "namespace": NS},
                "spec": spec,
            }
        )

    def reconcile(self, name: str, max_age_s: float | None = None) -> None:
        self.quotas.reconcile(NS, name, max_age_s)

    def status(self, name: str) -> dict[str, Any]:
        return self.store.status_of(TOPIC_REPLICA_QUOTA, NS, name)

    def broker(self, broker: int) -> dict[str, str]:
        found = dict(self.kafka.configs.get(ConfigResource.broker(broker), {}))
        return {k: v for k, v in found.items() if (k, v) != UNOWNED_BROKER}

    def topic(self, topic: str) -> dict[str, str]:
        found = dict(self.kafka.configs.get(ConfigResource.topic(topic), {}))
        return {k: v for k, v in found.items() if (k, v) != UNOWNED_TOPIC}

    def count(self, call: str) -> int:
        return sum(c == call for c, _ in self.kafka.calls)


def conditions(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in status.get("conditions", [])}


@pytest.fixture
def env() -> Env:
    return Env()


@pytest.fixture(autouse=True)
def _unowned_configs_are_never_touched(env: Env) -> Any:
    yield
    assert env.kafka.configs[ConfigResource.broker(0)][UNOWNED_BROKER[0]] == UNOWNED_BROKER[1]
    assert env.kafka.configs[ConfigResource.topic("t")][UNOWNED_TOPIC[0]] == UNOWNED_TOPIC[1]
    for call, argument in env.kafka.calls:
        if call == "incremental_alter_configs":
            assert isinstance(argument, dict)
            for changes in argument.values():
                assert UNOWNED_BROKER[0] not in changes and UNOWNED_TOPIC[0] not in changes


def test_quota_applies_rates_on_named_brokers_and_lists_on_topics(env: Env) -> None:
    env.create(
        "q",
        topics={"names": ["t"]},
        brokers=[0, 1],
        leaderReplicationThrottledRate=1000,
        followerReplicationThrottledRate=2000,
        leaderReplicationThrottledReplicas="1:1,0:0",
        followerReplicationThrottledReplicas="*",
    )

    env.reconcile("q")

    for broker in (0, 1):
        assert env.broker(broker) == {LEADER_RATE: "1000", FOLLOWER_RATE: "2000"}
    assert env.broker(2) == {} and env.broker(3) == {}
    assert env.topic("t") == {LEADER_REPLICAS: "0:0,1:1", FOLLOWER_REPLICAS: "*"}
    assert env.topic("u") == {}
    status = env.status("q")
    assert status["brokers"] == [
        {
            "brokerId": 0,
            "leaderReplicationThrottledRate": 1000,
            "followerReplicationThrottledRate": 2000,
        },
        {
            "brokerId": 1,
            "leaderReplicationThrottledRate": 1000,
            "followerReplicationThrottledRate": 2000,
        },
    ]
    assert status["topics"] == [
        {
            "topic": "t",
            "leaderReplicationThrottledReplicas": "0:0,1:1",
            "followerReplicationThrottledReplicas": "*",
        }
    ]
    assert status["observedGeneration"] == 1
    found = conditions(status)
    assert found["Ready"]["status"] == "True" and found["Ready"]["reason"] == "Applied"
    assert found["Stalled"]["status"] == "False"
    assert found["RateConflict"]["status"] == "False"
    [event] = env.store.events_of("q")
    assert (event.type, event.reason) == ("Normal", "Applied")

    patches = env.store.status_patches
    env.reconcile("q")
    assert env.store.status_patches == patches and len(env.store.events) == 1


def test_quota_without_brokers_covers_every_live_broker_and_all_topics(env: Env) -> None:
    env.create(
        "q",
        topics={"all": True},
        leaderReplicationThrottledRate=1000,
        leaderReplicationThrottledReplicas="*",
    )
    env.reconcile("q")
    for broker in range(4):
        assert env.broker(broker) == {LEADER_RATE: "1000"}
    assert env.topic("t") == env.topic("u") == {LEADER_REPLICAS: "*"}
    status = env.status("q")
    assert [b["brokerId"] for b in status["brokers"]] == [0, 1, 2, 3]
    assert [t["topic"] for t in status["topics"]] == ["t", "u"]


def _two_quotas(env: Env) -> None:
    env.create(
        "a",
        topics={"names": ["t"]},
        brokers=[0, 1],
        leaderReplicationThrottledRate=1000,
        leaderReplicationThrottledReplicas="0:0",
    )
    env.create(
        "b",
        topics={"names": ["t", "u"]},
        brokers=[1, 2],
        leaderReplicationThrottledRate=500,
        followerReplicationThrottledRate=700,
        followerReplicationThrottledReplicas="0:3",
    )
    env.reconcile("a")
    env.reconcile("b")
    env.reconcile("a")


def test_lowest_rate_wins_and_both_quotas_report_the_conflict(env: Env) -> None:
    _two_quotas(env)

    assert env.broker(0) == {LEADER_RATE: "1000"}
    assert env.broker(1) == {LEADER_RATE: "500", FOLLOWER_RATE: "700"}
    assert env.broker(2) == {LEADER_RATE: "500", FOLLOWER_RATE: "700"}
    assert env.topic("t") == {LEADER_REPLICAS: "0:0", FOLLOWER_REPLICAS: "0:3"}
    assert env.topic("u") == {FOLLOWER_REPLICAS: "0:3"}

    a, b = env.status("a"), env.status("b")
    assert a["brokers"] == [
        {"brokerId": 0, "leaderReplicationThrottledRate": 1000},
        {
            "brokerId": 1,
            "leaderReplicationThrottledRate": 500,
            "followerReplicationThrottledRate": 700,
        },
    ]
    for status in (a, b):
        conflict = conditions(status)["RateConflict"]
        assert conflict["status"] == "True"
        assert "broker 1 leader.replication.throttled.rate" in conflict["message"]
        assert "TopicReplicaQuota ns/b wins with 500" in conflict["message"]
        assert "TopicReplicaQuota ns/a wants 1000" in conflict["message"]
        assert conditions(status)["Ready"]["status"] == "True"
    [lost] = env.store.events_of("a", "RateConflict")
    assert lost.type == "Warning" and "ns/b wins" in lost.message
    assert env.store.events_of("b", "RateConflict") == []
    env.reconcile("a")
    assert len(env.store.events_of("a", "RateConflict")) == 1


def test_finalize_removes_exactly_what_only_that_quota_set(env: Env) -> None:
    _two_quotas(env)
    env.store.delete(TOPIC_REPLICA_QUOTA, NS, "b")
    env.reconcile("b")  # a deleted quota is left to its finalizer

    assert env.quotas.finalize(NS, "b") is True

    assert env.broker(0) == {LEADER_RATE: "1000"}
    assert env.broker(1) == {LEADER_RATE: "1000"}
    assert env.broker(2) == {}
    assert env.topic("t") == {LEADER_REPLICAS: "0:0"}
    assert env.topic("u") == {}
    assert [e.reason for e in env.store.events_of("b")][-1] == "ThrottlesRemoved"
    env.store.remove(TOPIC_REPLICA_QUOTA, NS, "b")
    assert env.quotas.finalize(NS, "b") is True
    env.reconcile("a")
    assert conditions(env.status("a"))["RateConflict"]["status"] == "False"
    assert env.broker(1) == {LEADER_RATE: "1000"}


def test_drift_is_repaired_with_a_warning_on_the_objects_that_want_the_key(env: Env) -> None:
    _two_quotas(env)
    env.kafka.configs[ConfigResource.broker(0)][LEADER_RATE] = "9999"
    del env.kafka.configs[ConfigResource.topic("u")][FOLLOWER_REPLICAS]

    env.reconcile("a")

    assert env.broker(0) == {LEADER_RATE: "1000"}
    assert env.topic("u") == {FOLLOWER_REPLICAS: "0:3"}
    [on_a] = env.store.events_of("a", "ThrottleDriftRepaired")
    [on_b] = env.store.events_of("b", "ThrottleDriftRepaired")
    assert on_a.type == on_b.type == "Warning"
    assert "broker 0 leader.replication.throttled.rate" in on_a.message
    assert "topic u" not in on_a.message
    assert "topic u follower.replication.throttled.replicas" in on_b.message
    assert "broker 0" not in on_b.message


def test_changes_made_by_the_operator_are_not_reported_as_drift(env: Env) -> None:
    _two_quotas(env)
    env.store.set_spec(TOPIC_REPLICA_QUOTA, NS, "a", leaderReplicationThrottledRate=400)
    env.reconcile("a")
    assert env.broker(0) == {LEADER_RATE: "400"}
    assert env.store.events_of("a", "ThrottleDriftRepaired") == []
    assert env.status("a")["observedGeneration"] == 2


def test_max_age_reuses_a_recent_sync(env: Env) -> None:
    _two_quotas(env)
    env.kafka.configs[ConfigResource.broker(2)][LEADER_RATE] = "1"
    reads = env.count("describe_configs")

    env.reconcile("b", max_age_s=30)
    assert env.count("describe_configs") == reads  # reused: drift not seen yet
    assert env.broker(2)[LEADER_RATE] == "1"

    env.clock.t += 31
    env.reconcile("b", max_age_s=30)
    assert env.count("describe_configs") == reads + 1
    assert env.broker(2)[LEADER_RATE] == "500"
    env.reconcile("b")  # without max_age_s: always a fresh sync
    assert env.count("describe_configs") == reads + 2


def test_quota_and_moving_reassignment_share_keys(env: Env) -> None:
    env.create(
        "q",
        topics={"names": ["t"]},
        brokers=[0, 1, 2],
        leaderReplicationThrottledRate=2000,
        followerReplicationThrottledRate=2000,
        leaderReplicationThrottledReplicas="1:1",
        followerReplicationThrottledReplicas="1:2",
    )
    env.reconcile("q")
    env.store.apply(
        {
            "apiVersion": "kpo.dev/v1alpha1",
            "kind": "PartitionReassignment",
            "metadata": {"name": "move", "namespace": NS},
            "spec": {
                "partitions": [{"topic": "t", "partition": 0, "replicas": [2, 1]}],
                "throttle": {"replicationRate": 1000},
            },
        }
    )
    assert env.reassignments.reconcile(NS, "move") == "Moving"  # throttles first

    for broker in (0, 1, 2):
        assert env.broker(broker) == {LEADER_RATE: "1000", FOLLOWER_RATE: "1000"}
    assert env.topic("t") == {LEADER_REPLICAS: "0:0,0:1,1:1", FOLLOWER_REPLICAS: "0:2,1:2"}
    assert env.count("alter_partition_reassignments") == 0
    assert env.reassignments.reconcile(NS, "move") == "Moving"  # then the submission
    assert env.count("alter_partition_reassignments") == 1
    env.reconcile("q")
    conflict = conditions(env.status("q"))["RateConflict"]
    assert conflict["status"] == "True"
    assert "PartitionReassignment ns/move wins with 1000" in conflict["message"]
    assert env.status("q")["brokers"][0]["leaderReplicationThrottledRate"] == 1000
    assert env.store.events_of("q", "RateConflict")

    env.kafka.complete()
    assert env.reassignments.reconcile(NS, "move") == "Completed"

    for broker in (0, 1, 2):
        assert env.broker(broker) == {LEADER_RATE: "2000", FOLLOWER_RATE: "2000"}
    assert env.broker(3) == {}
    assert env.topic("t") == {LEADER_REPLICAS: "1:1", FOLLOWER_REPLICAS: "1:2"}
    env.reconcile("q")
    assert conditions(env.status("q"))["RateConflict"]["status"] == "False"
    assert env.store.events_of("q", "ThrottleDriftRepaired") == []


def test_foreign_keys_nobody_wants_are_left_alone(env: Env) -> None:
    env.kafka.configs[ConfigResource.broker(3)] = {LEADER_RATE: "123"}
    env.create("q", topics={"names": ["t"]}, brokers=[0], leaderReplicationThrottledRate=1000)
    env.reconcile("q")
    assert env.broker(3) == {LEADER_RATE: "123"}  # set outside the operator: not its own
    assert env.store.events_of("q", "ThrottleDriftRepaired") == []  # nothing was written before
    assert conditions(env.status("q"))["ForeignThrottle"]["status"] == "False"


def test_owned_keys_nobody_wants_are_removed_after_a_restart(env: Env) -> None:
    env.create("q", topics={"names": ["t"]}, brokers=[3], leaderReplicationThrottledRate=1000)
    env.reconcile("q")
    assert env.broker(3) == {LEADER_RATE: "1000"}
    env.store.delete(TOPIC_REPLICA_QUOTA, NS, "q")
    restarted = ThrottleWriter(env.kafka, env.store, env.ledger, clock=env.clock)

    assert QuotaReconciler(env.store, restarted, now=env.clock.now).finalize(NS, "q") is True

    assert env.broker(3) == {}


def test_invalid_spec_is_stalled_and_writes_nothing(env: Env) -> None:
    env.create(
        "q",
        topics={"all": True},
        leaderReplicationThrottledRate=1000,
        leaderReplicationThrottledReplicas="0:1",
    )
    env.reconcile("q")
    found = conditions(env.status("q"))
    assert found["Stalled"]["status"] == "True" and found["Stalled"]["reason"] == "InvalidSpec"
    assert found["Ready"]["status"] == "False"
    assert env.kafka.calls == []
    [event] = env.store.events_of("q")
    assert (event.type, event.reason) == ("Warning", "InvalidSpec")


def test_refused_write_is_stalled_then_recovers(env: Env) -> None:
    env.create("q", topics={"names": ["t"]}, brokers=[0, 1], leaderReplicationThrottledRate=1000)
    write = env.kafka.incremental_alter_configs
    refused = ConfigResource.broker(1)

    def refuse_broker_1(changes: Any) -> Any:
        answer = write({r: c for r, c in changes.items() if r != refused})
        answer[refused] = api_error(ERROR_POLICY_VIOLATION, "no")
        return answer

    env.kafka.incremental_alter_configs = refuse_broker_1  # type: ignore[method-assign]
    env.reconcile("q")
    env.kafka.incremental_alter_configs = write  # type: ignore[method-assign]

    stalled = conditions(env.status("q"))["Stalled"]
    assert stalled["status"] == "True" and stalled["reason"] == "WriteFailed"
    assert "broker 1" in stalled["message"] and "POLICY_VIOLATION" in stalled["message"]
    assert env.broker(0) == {LEADER_RATE: "1000"} and env.broker(1) == {}

    env.reconcile("q")
    assert conditions(env.status("q"))["Ready"]["status"] == "True"
    assert env.broker(1) == {LEADER_RATE: "1000"}
    assert [e.reason for e in env.store.events_of("q")] == ["WriteFailed", "Applied"]
    assert env.store.events_of("q", "ThrottleDriftRepaired") == []


def test_reassignment_status_is_kept_by_quota_syncs(env: Env) -> None:
    """A quota sync while a reassignment moves keeps that reassignment's throttles."""
    env.store.apply(
        {
            "apiVersion": "kpo.dev/v1alpha1",
            "kind": "PartitionReassignment",
            "metadata": {"name": "move", "namespace": NS},
            "spec": {
                "partitions": [{"topic": "u", "partition": 0, "replicas": [0, 3]}],
                "throttle": {"replicationRate": 300},
            },
        }
    )
    assert env.reassignments.reconcile(NS, "move") == "Moving"  # throttles
    assert env.reassignments.reconcile(NS, "move") == "Moving"  # submitted
    assert ("u", 0) in env.kafka.list_partition_reassignments()
    env.create("q", topics={"names": ["t"]}, brokers=[1], leaderReplicationThrottledRate=1000)
    env.reconcile("q")
    assert env.topic("u") == {LEADER_REPLICAS: "0:2,0:3", FOLLOWER_REPLICAS: "0:0"}
    assert env.broker(0) == {LEADER_RATE: "300", FOLLOWER_RATE: "300"}
    assert env.broker(1) == {LEADER_RATE: "1000"}
    assert env.store.status_of(PARTITION_REASSIGNMENT, NS, "move")["phase"] == "Moving"


# --- throttles set outside the operator (Kafka's own tools) ----------------------------

KAFKA_TOOL_RATE = "262144"


def _kafka_tool_on_u(env: Env) -> None:
    """What ``kafka-reassign-partitions --execute --throttle 262144`` sets to move u-0 to 3,0."""
    for broker in (0, 2, 3):
        env.kafka.configs.setdefault(ConfigResource.broker(broker), {}).update(
            {LEADER_RATE: KAFKA_TOOL_RATE, FOLLOWER_RATE: KAFKA_TOOL_RATE}
        )
    env.kafka.configs[ConfigResource.topic("u")] = {
        LEADER_REPLICAS: "0:2,0:3",
        FOLLOWER_REPLICAS: "0:0",
    }


def test_quota_leaves_a_kafka_tool_throttle_alone_and_reports_it(env: Env) -> None:
    _kafka_tool_on_u(env)
    env.create(
        "q",
        topics={"all": True},
        leaderReplicationThrottledRate=1000,
        followerReplicationThrottledReplicas="*",
    )

    env.reconcile("q")

    assert env.broker(1) == {LEADER_RATE: "1000"}
    for broker in (0, 2, 3):
        assert env.broker(broker) == {LEADER_RATE: KAFKA_TOOL_RATE, FOLLOWER_RATE: KAFKA_TOOL_RATE}
    assert env.topic("u") == {LEADER_REPLICAS: "0:2,0:3", FOLLOWER_REPLICAS: "*"}
    foreign = conditions(env.status("q"))["ForeignThrottle"]
    assert (foreign["status"], foreign["reason"]) == ("True", "LeftAlone")
    assert "broker 0 leader.replication.throttled.rate: '262144'" in foreign["message"]
    assert "('1000' wanted)" in foreign["message"]
    assert conditions(env.status("q"))["Ready"]["status"] == "True"
    events = env.store.events_of("q", "ForeignThrottle")
    assert len(events) == 3 and all(e.type == "Warning" for e in events)
    assert "broker 2 leader.replication.throttled.rate" in events[1].message

    env.reconcile("q")  # the same findings are not recorded again
    assert len(env.store.events_of("q", "ForeignThrottle")) == 3
    assert env.store.events_of("q", "ThrottleDriftRepaired") == []

    env.store.delete(TOPIC_REPLICA_QUOTA, NS, "q")
    assert env.quotas.finalize(NS, "q") is True
    assert env.broker(1) == {}
    for broker in (0, 2, 3):
        assert env.broker(broker) == {LEADER_RATE: KAFKA_TOOL_RATE, FOLLOWER_RATE: KAFKA_TOOL_RATE}
    assert env.topic("u") == {LEADER_REPLICAS: "0:2,0:3", FOLLOWER_REPLICAS: "0:0"}
    assert env.ledger.ledger.brokers == {} and env.ledger.ledger.topics == {}


def test_quota_naming_a_broker_overrides_a_foreign_rate_and_puts_it_back(env: Env) -> None:
    _kafka_tool_on_u(env)
    env.create("q", topics={"names": ["t"]}, brokers=[0], leaderReplicationThrottledRate=1000)

    env.reconcile("q")

    assert env.broker(0) == {LEADER_RATE: "1000", FOLLOWER_RATE: KAFKA_TOOL_RATE}
    foreign = conditions(env.status("q"))["ForeignThrottle"]
    assert (foreign["status"], foreign["reason"]) == ("True", "Overridden")
    assert "'262144' set outside the operator was replaced by '1000'" in foreign["message"]
    assert len(env.store.events_of("q", "ForeignThrottle")) == 1
    env.reconcile("q")
    assert conditions(env.status("q"))["ForeignThrottle"]["status"] == "True"

    env.store.delete(TOPIC_REPLICA_QUOTA, NS, "q")
    restarted = ThrottleWriter(env.kafka, env.store, env.ledger, clock=env.clock)
    assert QuotaReconciler(env.store, restarted, now=env.clock.now).finalize(NS, "q") is True
    assert env.broker(0) == {LEADER_RATE: KAFKA_TOOL_RATE, FOLLOWER_RATE: KAFKA_TOOL_RATE}


def test_moving_reassignment_reports_a_foreign_rate_and_never_overrides_it(env: Env) -> None:
    _kafka_tool_on_u(env)
    env.store.apply(
        {
            "apiVersion": "kpo.dev/v1alpha1",
            "kind": "PartitionReassignment",
            "metadata": {"name": "move", "namespace": NS},
            "spec": {
                "partitions": [{"topic": "t", "partition": 1, "replicas": [1, 0]}],
                "throttle": {"replicationRate": 300},
            },
        }
    )
    assert env.reassignments.reconcile(NS, "move") == "Moving"  # throttles first
    assert env.broker(0) == {LEADER_RATE: KAFKA_TOOL_RATE, FOLLOWER_RATE: KAFKA_TOOL_RATE}
    assert env.broker(1) == {LEADER_RATE: "300", FOLLOWER_RATE: "300"}
    assert env.topic("t") == {LEADER_REPLICAS: "1:1,1:2", FOLLOWER_REPLICAS: "1:0"}
    found = [e.message for e in env.store.events_of("move", "ForeignThrottle")]
    assert len(found) == 4
    assert any("broker 2 follower.replication.throttled.rate: '262144'" in m for m in found)
    assert env.reassignments.reconcile(NS, "move") == "Moving"  # then the submission
    assert env.count("alter_partition_reassignments") == 1
    assert env.reassignments.reconcile(NS, "move") == "Moving"
    message = env.store.status_of(PARTITION_REASSIGNMENT, NS, "move")["message"]
    assert "4 throttle values set outside the operator left alone" in message
    assert len(env.store.events_of("move", "ForeignThrottle")) == 4
    env.kafka.complete()
    assert env.reassignments.reconcile(NS, "move") == "Completed"
    assert env.broker(0) == {LEADER_RATE: KAFKA_TOOL_RATE, FOLLOWER_RATE: KAFKA_TOOL_RATE}
    assert env.broker(1) == {}
    assert env.topic("t") == {}
    assert env.topic("u") == {LEADER_REPLICAS: "0:2,0:3", FOLLOWER_REPLICAS: "0:0"}


def test_a_ledger_of_another_cluster_is_not_trusted(env: Env) -> None:
    env.kafka.configs[ConfigResource.broker(3)] = {LEADER_RATE: "123"}
    env.ledger.save(ThrottleLedger("other-cluster", brokers={3: {LEADER_RATE: OwnedRate(123)}}))
    env.create("q", topics={"names": ["t"]}, brokers=[0], leaderReplicationThrottledRate=1000)

    env.reconcile("q")

    assert env.broker(3) == {LEADER_RATE: "123"}
    assert env.ledger.ledger.cluster_id == "fake-cluster"
    assert 3 not in env.ledger.ledger.brokers


def test_ledger_is_saved_before_the_configs_are_written(env: Env) -> None:
    env.create("q", topics={"names": ["t"]}, brokers=[0], leaderReplicationThrottledRate=1000)
    env.ledger.fail_next_save = True

    with pytest.raises(ObjectStoreError):
        env.reconcile("q")
    assert env.count("incremental_alter_configs") == 0

    env.reconcile("q")
    assert env.broker(0) == {LEADER_RATE: "1000"}
    assert env.ledger.ledger.brokers == {0: {LEADER_RATE: OwnedRate(1000)}}
    assert env.store.events_of("q", "ThrottleDriftRepaired") == []


def test_named_topic_that_does_not_exist_is_stalled_and_named(env: Env) -> None:
    env.create(
        "q", topics={"names": ["t", "nope"]}, brokers=[0], leaderReplicationThrottledRate=1000
    )
    env.reconcile("q")

    assert env.broker(0) == {LEADER_RATE: "1000"}  # what can be applied is
    found = conditions(env.status("q"))
    assert found["Ready"]["status"] == "False" and found["Ready"]["reason"] == "TopicNotFound"
    stalled = found["Stalled"]
    assert stalled["status"] == "True" and stalled["reason"] == "TopicNotFound"
    assert stalled["message"].startswith("topics not found: nope ")
    assert "applied on 1 brokers and 0 topics" in stalled["message"]
    [event] = env.store.events_of("q")
    assert (event.type, event.reason, event.message) == (
        "Warning",
        "TopicNotFound",
        stalled["message"],
    )

    env.kafka.create_topic("nope", {0: [0]})
    env.reconcile("q")
    found = conditions(env.status("q"))
    assert found["Ready"]["status"] == "True" and found["Stalled"]["status"] == "False"
    [_, event] = env.store.events_of("q")
    assert (event.type, event.reason, event.message) == (
        "Normal",
        "Applied",
        found["Ready"]["message"],
    )


def test_missing_topic_lists_are_applied_once_it_is_created(env: Env) -> None:
    env.create("q", topics={"names": ["nope"]}, leaderReplicationThrottledReplicas="0:0")
    env.reconcile("q")
    assert "nope" not in {r.name for r in env.kafka.configs}
    assert conditions(env.status("q"))["Stalled"]["reason"] == "TopicNotFound"

    env.kafka.create_topic("nope", {0: [0]})
    env.reconcile("q")
    assert env.topic("nope") == {LEADER_REPLICAS: "0:0"}
    assert env.status("q")["topics"] == [
        {"topic": "nope", "leaderReplicationThrottledReplicas": "0:0"}
    ]


def test_event_follows_a_changed_condition_message(env: Env) -> None:
    env.create("q", topics={"names": ["t"]}, brokers=[0], leaderReplicationThrottledRate=1000)
    env.reconcile("q")
    env.store.apply(
        {
            "apiVersion": "kpo.dev/v1alpha1",
            "kind": "TopicReplicaQuota",
            "metadata": {"name": "q", "namespace": NS},
            "spec": {
                "topics": {"names": ["t"]},
                "brokers": [0, 1],
                "leaderReplicationThrottledRate": 1000,
            },
        }
    )
    env.reconcile("q")
    ready = conditions(env.status("q"))["Ready"]
    assert ready["message"] == "applied on 2 brokers and 0 topics"
    assert [e.message for e in env.store.events_of("q", "Applied")] == [
        "applied on 1 brokers and 0 topics",
        ready["message"],
    ]


def test_out_of_range_replica_id_is_invalid_and_writes_nothing(env: Env) -> None:
    env.create("q", topics={"names": ["t"]}, leaderReplicationThrottledReplicas="0:2147483648")
    env.reconcile("q")
    found = conditions(env.status("q"))
    assert found["Stalled"]["status"] == "True" and found["Stalled"]["reason"] == "InvalidSpec"
    assert "2147483648" in found["Stalled"]["message"]
    assert env.kafka.calls == []
    # The writer, syncing for other objects, leaves it out too.
    env.create("other", topics={"names": ["u"]}, brokers=[3], leaderReplicationThrottledRate=9)
    env.reconcile("other")
    assert env.topic("t") == {}


def test_timer_does_not_reuse_a_sync_from_before_the_object_existed(env: Env) -> None:
    env.create("a", topics={"names": ["t"]}, brokers=[0], leaderReplicationThrottledRate=1000)
    env.reconcile("a")
    env.create(
        "b",
        topics={"names": ["u"]},
        brokers=[1, 2, 3],
        followerReplicationThrottledRate=500,
        followerReplicationThrottledReplicas="0:3",
    )
    reads = env.count("describe_configs")

    env.reconcile("b", max_age_s=30)  # the timer runs before the create handler

    assert env.count("describe_configs") == reads + 1
    ready = conditions(env.status("b"))["Ready"]
    assert ready["message"] == "applied on 3 brokers and 1 topics"
    [event] = env.store.events_of("b")
    assert event.message == ready["message"]
    env.reconcile("b", max_age_s=30)  # now a sync that read this generation is reused
    assert env.count("describe_configs") == reads + 1


def test_timer_does_not_reuse_a_sync_from_before_a_spec_change(env: Env) -> None:
    env.create("a", topics={"names": ["t"]}, brokers=[0], leaderReplicationThrottledRate=1000)
    env.reconcile("a")
    env.create("a", topics={"names": ["t"]}, brokers=[0], leaderReplicationThrottledRate=2000)

    env.reconcile("a", max_age_s=30)

    assert env.broker(0) == {LEADER_RATE: "2000"}
    assert env.status("a")["observedGeneration"] == 2
