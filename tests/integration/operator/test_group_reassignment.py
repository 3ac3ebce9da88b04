"""A consumer group keeps consuming and committing while the operator moves its partitions.

Real kube-apiserver, ZooKeeper, four broker processes and the operator; three group members
as processes (confluent-kafka twice, kafka-python once, ``subscribe()``). One throttled
PartitionReassignment moves every partition of the consumed topic *and* of
``__consumer_offsets`` (so the group coordinator moves too) to brokers that held none of
their replicas, while a producer keeps writing and the members keep committing.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from kafka import KafkaProducer, TopicPartition

from kpo_devenv.kafka_cluster import KafkaCluster
from tests.integration.broker.conftest import wait_for
from tests.integration.broker.server.helpers import create_topic, describe, zk_client
from tests.integration.broker.server.test_consumer_groups import (
    Member,
    committed,
    end_offsets,
)
from tests.integration.operator.conftest import StackFactory, produce, reassignment

pytestmark = pytest.mark.integration

TOPIC, GROUP, PARTITIONS, OFFSETS_PARTITIONS = "orders", "orders-readers", 6, 4
PROPERTIES = {
    "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS),
    "offsets.topic.replication.factor": "2",
    "group.initial.rebalance.delay.ms": "200",
    "group.min.session.timeout.ms": "1000",
    "offsets.commit.timeout.ms": "5000",
    "replication.quota.window.num": "2",  # no initial burst: the move lasts seconds
}
RATE = 512 * 1024  # bytes/s per broker: each new broker fetches 6 of the 12 MB, ~12 s


class Trickle:
    """A producer thread writing small records to every partition until stopped."""

    def __init__(self, cluster: KafkaCluster) -> None:
        self.sent = 0
        self.errors: list[str] = []
        self._stop = threading.Event()
        # Retries bounded by delivery.timeout.ms (120 s), not by a count: leaders move.
        self._producer = KafkaProducer(
            bootstrap_servers=cluster.bootstrap_servers, acks="all", linger_ms=5
        )
        self._thread = threading.Thread(target=self._run, name="trickle")
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for partition in range(PARTITIONS):
                future = self._producer.send(TOPIC, b"trickle", partition=partition)
                future.add_errback(lambda exc: self.errors.append(repr(exc)))
            self.sent += PARTITIONS
            time.sleep(0.1)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self._producer.flush(60)
        self._producer.close(10)


def acknowledged(members: list[Member]) -> dict[int, int]:
    """The highest acknowledged commit of every partition, over all members."""
    best: dict[int, int] = {}
    for member in members:
        for partition, offset in member.commits():
            best[partition] = max(best.get(partition, -1), offset)
    return best


def rebalances(members: list[Member]) -> Counter[str]:
    """How many assignments each member received (one per rebalance it took part in)."""
    return Counter({m.name: sum(1 for e in m.events() if e.startswith("assign")) for m in members})


def test_group_consumes_and_commits_through_a_move_of_its_topic_and_offsets(
    stack_factory: StackFactory, tmp_path: Path
) -> None:
    stack = stack_factory(size=4, properties=PROPERTIES)
    cluster = stack.cluster
    create_topic(
        cluster, TOPIC, assignment={p: [0, 1] if p % 2 == 0 else [1, 0] for p in range(PARTITIONS)}
    )
    produce(cluster, TOPIC, PARTITIONS, 12 * 1024 * 1024)
    members = [
        Member("confluent", cluster, GROUP, TOPIC, tmp_path, "rdkafka-a"),
        Member("kafka-python", cluster, GROUP, TOPIC, tmp_path, "python"),
        Member("confluent", cluster, GROUP, TOPIC, tmp_path, "rdkafka-b"),
    ]
    trickle: Trickle | None = None
    try:

        def balanced() -> bool:
            owned = [m.assignment() for m in members]
            return all(owned) and sorted(p for a in owned for p in a) == list(range(PARTITIONS))

        wait_for(balanced, 120, "3 members owning the 6 partitions exactly once")
        trickle = Trickle(cluster)
        wait_for(lambda: len(acknowledged(members)) == PARTITIONS, 60, "a commit per partition")
        before_move = rebalances(members)

        zk = zk_client(cluster)
        try:
            offsets = zk.get_replica_assignments(["__consumer_offsets"])["__consumer_offsets"]
        finally:
            zk.close()
        targets = [
            {"topic": TOPIC, "partition": p, "replicas": [2, 3] if p % 2 == 0 else [3, 2]}
            for p in range(PARTITIONS)
        ]
        for partition, current in sorted(offsets.partitions.items()):
            others = [b for b in sorted(cluster.brokers) if b not in current.replicas]
            targets.append(
                {"topic": "__consumer_offsets", "partition": partition, "replicas": others}
            )
        stack.apply(reassignment("group-move", targets, throttle={"replicationRate": RATE}))
        stack.wait_submitted("group-move")
        commits_at_submit = sum(len(m.commits()) for m in members)
        submitted_at = time.monotonic()
        stack.wait_phase("group-move", "Completed", timeout_s=240)
        commits_during = sum(len(m.commits()) for m in members) - commits_at_submit
        print(
            f"moved in {time.monotonic() - submitted_at:.1f} s, {commits_during} commits meanwhile"
        )
        # The members kept committing while the partitions and their coordinator moved.
        assert commits_during > 0

        # Every acknowledged commit is there, served by the new coordinator from the moved log.
        acked = acknowledged(members)
        fetched = committed(cluster, GROUP)
        for partition, offset in acked.items():
            assert fetched[TopicPartition(TOPIC, partition)] >= offset, (partition, acked, fetched)
        wait_for(  # metadata reaches every broker shortly after the controller's ZooKeeper
            lambda: all(set(p["replica_nodes"]) == {2, 3} for p in describe(cluster, TOPIC)),
            30,
            "the topic's new replicas in Metadata",
        )
        zk = zk_client(cluster)
        try:
            after = zk.get_replica_assignments(["__consumer_offsets"])["__consumer_offsets"]
        finally:
            zk.close()
        for partition, current in offsets.partitions.items():
            assert not set(after.partitions[partition].replicas) & set(current.replicas)

        trickle.stop()
        assert not trickle.errors, trickle.errors[:5]
        trickle = None
        ends = end_offsets(cluster, TOPIC, PARTITIONS)

        def all_committed() -> bool:
            offsets = committed(cluster, GROUP)
            return all(offsets.get(TopicPartition(TOPIC, p)) == ends[p] for p in ends)

        wait_for(all_committed, 120, "every record consumed and committed")
        during_move = rebalances(members) - before_move
        print(f"rebalances during the move: {dict(during_move)} (before: {dict(before_move)})")
        for member in members:
            member.process.stop(timeout_s=30)  # leave the group: no commit is still in flight
        # Nothing skipped, nothing lost: every record was read, and the last acknowledged
        # commit of every partition is the group's committed offset.
        seen = set().union(*(m.records() for m in members))
        missing = {(p, o) for p, end in ends.items() for o in range(end)} - seen
        assert not missing, sorted(missing)[:20]
        assert acknowledged(members) == ends
        assert {tp.partition: o for tp, o in committed(cluster, GROUP).items()} == ends
        # No rebalance storm: moving the coordinator and the leaders costs at most one.
        assert all(n <= 1 for n in during_move.values()), during_move
    finally:
        if trickle is not None:
            trickle.stop()
        for member in members:
            member.process.stop(timeout_s=20)
