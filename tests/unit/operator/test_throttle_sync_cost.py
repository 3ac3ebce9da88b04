"""What one throttle sync costs with many moving objects (operator scale).

A sync recomputes every contribution; these tests pin what it may skip without changing
what it writes: parsing an object's accepted work again when only its totals changed,
computing a contribution again when neither its work nor its partitions' states changed,
reading the cluster when the steps' shared read covers it, describing topics nobody names,
and parsing a replica list read back unchanged.
"""

from __future__ import annotations

from typing import Any

import pytest

from kpo_kafka.admin_types import ConfigResource
from kpo_kafka.topic_partition import TopicPartition
from kpo_operator import throttle_writer
from kpo_operator.cluster_reader import SharedClusterReader
from kpo_operator.reassignment import ReassignmentReconciler
from kpo_operator.reassignment_status import accepted_spec
from kpo_operator.resources import PARTITION_REASSIGNMENT
from kpo_operator.throttle_writer import ThrottleWriter
from kpo_operator.throttles import (
    FOLLOWER_REPLICAS,
    LEADER_RATE,
    LEADER_REPLICAS,
    ReplicaListCache,
    ThrottledReplicas,
    ThrottleFormatError,
    reassignment_contribution,
)
from tests.unit.operator.fake_kafka import FakeKafkaAdmin
from tests.unit.operator.fake_store import FakeObjectStore, MemoryLedgerStore
from tests.unit.operator.reassignment_env import NS, Clock, reassignment

THROTTLE = {"replicationRate": 1000}


class _World:
    """Three brokers, topics ``t0``..``t{n-1}`` of two partitions on [0, 1], an operator."""

    def __init__(self, topics: int = 3, shared: bool = True) -> None:
        self.kafka = FakeKafkaAdmin(brokers={0: None, 1: None, 2: None})
        for i in range(topics):
            self.kafka.create_topic(f"t{i}", {0: [0, 1], 1: [0, 1]})
        self.store = FakeObjectStore()
        self.ledger = MemoryLedgerStore()
        self.clock = Clock()
        self.reader = SharedClusterReader(self.kafka, 1.0, clock=self.clock)
        self.writer = ThrottleWriter(
            self.kafka,
            self.store,
            self.ledger,
            clock=self.clock,
            reader=self.reader if shared else None,
        )
        self.reconciler = ReassignmentReconciler(
            self.kafka, self.store, self.writer, clock=self.clock, reader=self.reader
        )

    def start(self, name: str, topic: str) -> None:
        """``name`` moves both partitions of ``topic`` to [2, 1], throttled, submitted."""
        self.store.apply(
            reassignment(name, [(topic, 0, [2, 1]), (topic, 1, [2, 1])], throttle=THROTTLE)
        )
        for _ in range(2):  # throttles, then the submission a poll interval later
            assert self.reconciler.reconcile(NS, name) == "Moving"
            self.clock.advance(2.0)
        assert TopicPartition(topic, 0) in self.kafka.list_partition_reassignments()

    def touch(self, name: str, **status: Any) -> None:
        """Write ``status`` fields of ``name`` as a step would (a new resourceVersion)."""
        stored = self.store.objects[(PARTITION_REASSIGNMENT.plural, NS, name)]
        stored["status"] = {**stored["status"], **status}
        meta = stored["metadata"]
        meta["resourceVersion"] = str(int(meta["resourceVersion"]) + 1)

    def topic_config(self, topic: str) -> dict[str, str]:
        return dict(self.kafka.configs.get(ConfigResource.topic(topic), {}))

    def calls(self, since: int) -> list[str]:
        return [c for c, _ in self.kafka.calls[since:]]


def _counting(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[object]:
    """Replace ``module.name`` by a wrapper recording each call's first argument."""
    seen: list[object] = []
    inner = getattr(module, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        seen.append(args[0] if args else None)
        return inner(*args, **kwargs)

    monkeypatch.setattr(module, name, wrapper)
    return seen


def test_accepted_work_is_parsed_again_only_when_it_changed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    world = _World()
    world.start("a", "t0")
    world.start("b", "t1")
    world.writer.sync()  # b's submission (Pending -> Moving) came after its last sync
    parsed = _counting(monkeypatch, throttle_writer, "accepted_spec")
    world.writer.sync()
    assert len(parsed) == 0  # both parsed by the sync before, unchanged since
    for i in range(3):  # each step writes its totals: a new resourceVersion, same work
        world.touch("a", totals={"bytesDone": i})
        world.touch("b", totals={"bytesDone": i})
        result = world.writer.sync()
    assert len(parsed) == 0
    assert result.contributions["PartitionReassignment ns/a"].topic_replicas["t0"] == {
        LEADER_REPLICAS: ThrottledReplicas.parse("0:0,0:1,1:0,1:1"),
        FOLLOWER_REPLICAS: ThrottledReplicas.parse("0:2,1:2"),
    }
    # a's partition t0-1 completes in its status: parsed again, its pairs go
    stored = world.store.status_of(PARTITION_REASSIGNMENT, NS, "a")
    entries = stored["partitions"]
    entries[1] = {**entries[1], "state": "Completed"}
    world.touch("a", partitions=entries)
    result = world.writer.sync()
    assert len(parsed) == 1
    assert result.contributions["PartitionReassignment ns/a"].topic_replicas["t0"] == {
        LEADER_REPLICAS: ThrottledReplicas.parse("0:0,0:1"),
        FOLLOWER_REPLICAS: ThrottledReplicas.parse("0:2"),
    }
    assert world.topic_config("t0")[FOLLOWER_REPLICAS] == "0:2"
    # the accepted throttle changes (an accepted edit of the rate): parsed again
    world.touch("b", throttle={"replicationRate": 500})
    result = world.writer.sync()
    assert len(parsed) == 2
    assert result.effective.brokers[2][LEADER_RATE] == 500


def test_contribution_is_computed_again_when_its_partitions_state_changes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    world = _World()
    world.start("a", "t0")
    world.writer.sync()  # the partitions went in flight after the submitting step's sync
    computed = _counting(monkeypatch, throttle_writer, "reassignment_contribution")
    world.clock.advance(2.0)
    world.touch("a", totals={"bytesDone": 1})
    world.writer.sync()
    assert computed == []  # same accepted work, same partition states (a newer read)
    # Kafka finishes t0-0 (the new replica caught up): its state in the next read changes
    world.kafka.catch_up(TopicPartition("t0", 0), 2)
    world.clock.advance(2.0)
    world.reader.invalidate()
    result = world.writer.sync()
    assert computed == ["PartitionReassignment ns/a"]
    status = world.store.status_of(PARTITION_REASSIGNMENT, NS, "a")
    spec = accepted_spec(status)
    assert spec is not None and result.snapshot is not None
    fresh = reassignment_contribution("PartitionReassignment ns/a", spec, result.snapshot.view)
    assert result.contributions["PartitionReassignment ns/a"] == fresh


def test_sync_uses_the_shared_read_and_reads_again_after_a_submission() -> None:
    world = _World()
    world.start("a", "t0")
    world.clock.advance(2.0)
    world.reader.read(["t0"])  # a step's read, younger than the reader's max age
    mark = len(world.kafka.calls)
    world.writer.sync()
    assert world.calls(mark) == ["describe_configs"]
    world.reader.invalidate()  # what a step does after its AlterPartitionReassignments
    mark = len(world.kafka.calls)
    world.writer.sync()
    assert world.calls(mark)[:3] == [
        "describe_cluster",
        "list_partition_reassignments",
        "describe_topics",
    ]


def test_only_named_and_owned_topics_are_described_and_owned_ones_still_cleaned(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    world = _World(topics=4, shared=False)
    # a throttle nobody of ours wants, on a topic nobody names: never read, never touched
    foreign = {LEADER_REPLICAS: "0:0"}
    world.kafka.configs[ConfigResource.topic("t3")] = dict(foreign)
    world.start("a", "t0")
    world.start("b", "t1")
    described = _counting(monkeypatch, world.kafka, "describe_configs")
    world.writer.sync()
    assert {tuple(d) for d in described} == {(0, 1, 2)}  # brokers
    topics_of = [c[1][1] for c in world.kafka.calls if c[0] == "describe_configs"]
    assert sorted(topics_of[-1]) == ["t0", "t1"]
    # b is cancelled by hand outside the operator's view: its status no longer throttles,
    # but the ledger still owns t1's pairs: t1 is read and its owned pairs removed
    world.touch("b", phase="Cancelled")
    world.writer.sync()
    assert sorted(topics_of_last(world)) == ["t0", "t1"]
    assert LEADER_REPLICAS not in world.topic_config("t1")
    world.writer.sync()  # t1 is no longer owned: not read any more
    assert sorted(topics_of_last(world)) == ["t0"]
    assert world.topic_config("t3") == foreign
    # an owned value changed by hand on a named topic is still repaired (drift)
    world.kafka.configs[ConfigResource.topic("t0")][FOLLOWER_REPLICAS] = "0:1"
    result = world.writer.sync()
    assert world.topic_config("t0")[FOLLOWER_REPLICAS] == "0:1,0:2,1:2"
    assert [c.resource_name for c in result.drift] == ["t0"]


def topics_of_last(world: _World) -> list[str]:
    """Topics of the last DescribeConfigs."""
    [*_, last] = (a for c, a in world.kafka.calls if c == "describe_configs")
    return list(last[1])  # type: ignore[index]


def test_quota_of_every_topic_makes_the_sync_describe_every_topic() -> None:
    world = _World(topics=3)
    world.start("a", "t0")
    world.store.apply(
        {
            "apiVersion": "kpo.dev/v1alpha1",
            "kind": "TopicReplicaQuota",
            "metadata": {"name": "q", "namespace": NS},
            "spec": {"topics": {"all": True}, "leaderReplicationThrottledReplicas": "*"},
        }
    )
    world.writer.sync()
    assert sorted(topics_of_last(world)) == ["t0", "t1", "t2"]
    assert world.topic_config("t2") == {LEADER_REPLICAS: "*"}


def test_replica_list_cache_parses_again_only_a_changed_text() -> None:
    cache = ReplicaListCache()
    first = cache.parse("t", LEADER_REPLICAS, "0:1,1:2")
    assert first == ThrottledReplicas.parse("0:1,1:2")
    assert cache.parse("t", LEADER_REPLICAS, "0:1,1:2") is first
    assert cache.parse("u", LEADER_REPLICAS, "0:1,1:2") is not first  # per topic and key
    changed = cache.parse("t", LEADER_REPLICAS, "0:1")
    assert changed == ThrottledReplicas.parse("0:1")
    with pytest.raises(ThrottleFormatError):
        cache.parse("t", LEADER_REPLICAS, "0-1")
    assert cache.parse("t", LEADER_REPLICAS, "0:1") is changed  # the bad text kept nothing
    cache.keep(["u"])
    assert cache.parse("t", LEADER_REPLICAS, "0:1") is not changed


def _start_both(world: _World) -> None:
    for name, topic in (("a", "t0"), ("b", "t1")):
        world.store.apply(
            reassignment(name, [(topic, 0, [2, 1]), (topic, 1, [2, 1])], throttle=THROTTLE)
        )


def test_a_later_sync_that_found_the_throttles_in_place_confirms_them_for_the_submission() -> None:
    world = _World()
    _start_both(world)
    assert world.reconciler.reconcile(NS, "a") == "Moving"  # writes a's rates and t0's lists
    world.clock.advance(0.1)
    assert world.reconciler.reconcile(NS, "b") == "Moving"  # writes t1's lists only
    assert world.kafka.list_partition_reassignments() == {}
    world.clock.advance(2.0)
    mark = len(world.kafka.calls)
    assert world.reconciler.reconcile(NS, "a") == "Moving"
    # b's sync began after a's throttles were written and read them back in place
    assert "describe_configs" not in world.calls(mark)
    assert set(world.kafka.list_partition_reassignments()) == {
        TopicPartition("t0", 0),
        TopicPartition("t0", 1),
    }
    mark = len(world.kafka.calls)
    assert world.reconciler.reconcile(NS, "b") == "Moving"
    # no sync began after b's throttles were written: b syncs itself before submitting
    assert world.calls(mark).count("describe_configs") == 1
    assert TopicPartition("t1", 0) in world.kafka.list_partition_reassignments()


def test_a_later_sync_that_had_to_write_for_the_object_does_not_confirm() -> None:
    world = _World()
    _start_both(world)
    assert world.reconciler.reconcile(NS, "a") == "Moving"
    del world.kafka.configs[ConfigResource.topic("t0")]  # removed by hand meanwhile
    world.clock.advance(0.1)
    assert world.reconciler.reconcile(NS, "b") == "Moving"  # puts t0's lists back (drift)
    assert LEADER_REPLICAS in world.topic_config("t0")
    world.clock.advance(2.0)
    mark = len(world.kafka.calls)
    assert world.reconciler.reconcile(NS, "a") == "Moving"
    # b's sync wrote what a needs: a syncs itself, finds them in place and submits
    assert world.calls(mark).count("describe_configs") == 1
    assert TopicPartition("t0", 0) in world.kafka.list_partition_reassignments()


def test_confirmed_needs_a_sync_begun_after_the_write_with_the_same_contribution() -> None:
    world = _World()
    _start_both(world)
    assert world.reconciler.reconcile(NS, "a") == "Moving"
    written_at = world.clock()
    world.clock.advance(0.1)
    world.writer.sync()
    result = world.writer.sync()
    source = "PartitionReassignment ns/a"
    mine = result.contributions[source]
    assert world.writer.confirmed(source, mine, written_at)
    assert not world.writer.confirmed(source, mine, world.clock() + 1.0)  # began before
    other = reassignment_contribution(
        source,
        accepted_spec(
            {
                **world.store.status_of(PARTITION_REASSIGNMENT, NS, "a"),
                "throttle": {"replicationRate": 500},
            }
        )
        or pytest.fail("no spec"),
        result.snapshot.view if result.snapshot else pytest.fail("no snapshot"),
    )
    assert not world.writer.confirmed(source, other, written_at)  # not what it merged
