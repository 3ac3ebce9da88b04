"""Partition reassignment (KIP-455, KafkaController.onPartitionReassignment) under faults.

On real 3-4 broker clusters, throttled moves (KIP-73) keep a reassignment in flight long
enough to kill the controller or the partition's leader in the middle of it, or to submit a
second target for the same partition; once the throttle is removed the move must complete
(no reassignment listed, AR = RAR = ISR) and every record acknowledged with acks=all by
kafka-python's default idempotent producer must be read back, in order, exactly once.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType
from kafka.errors import KafkaConnectionError

from kpo_devenv.kafka_cluster import KafkaCluster
from tests.integration.broker.conftest import ClusterFactory, admin_client, wait_for
from tests.integration.broker.server.helpers import (
    consume_all,
    create_topic,
    describe,
    wait_every_broker,
    zk_client,
)

pytestmark = pytest.mark.integration

#: Throttle rate, bytes/s, on both sides: the 2 MiB backlog would take ~60 s to move, far
#: longer than any fault below takes to inject and detect; each test removes the throttle
#: once the fault has been checked, so it never waits for the throttled copy.
RATE = 32 * 1024
BACKLOG_RECORDS = 256
RECORD_BYTES = 8 * 1024  # 256 x 8 KiB = 2 MiB
RATES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
THROTTLED_REPLICAS = {
    "leader.replication.throttled.replicas": "*",
    "follower.replication.throttled.replicas": "*",
}
#: As in the quota tests: one fetch carries at most 32 KiB (one quota window's worth),
#: and two 1 s samples keep the initial burst ((window.num - 1) windows of quota) small.
THROTTLE_PROPERTIES = {"replica.fetch.max.bytes": "32768", "replication.quota.window.num": "2"}


# --- cluster state --------------------------------------------------------------------------


def controller_id(cluster: KafkaCluster) -> int | None:
    zk = zk_client(cluster)
    try:
        return zk.get_controller_id()
    finally:
        zk.close()


def with_admin(cluster: KafkaCluster, call: Any) -> Any:
    """Run ``call(admin)`` with a fresh admin client, retrying while a dead broker is tried."""
    for _ in range(20):
        admin: KafkaAdminClient | None = None
        try:
            admin = admin_client(cluster)
            return call(admin)
        except KafkaConnectionError:
            time.sleep(0.5)
        finally:
            if admin is not None:
                admin.close()
    raise AssertionError("the admin client never reached a live broker")


def alter(cluster: KafkaCluster, reassignments: dict[TopicPartition, Any]) -> dict[Any, Any]:
    return dict(with_admin(cluster, lambda a: a.alter_partition_reassignments(reassignments)))


def ongoing(cluster: KafkaCluster) -> dict[Any, Any]:
    return dict(with_admin(cluster, lambda a: a.list_partition_reassignments()))


def log_bytes(cluster: KafkaCluster, broker_id: int, topic: str) -> int:
    """Bytes in the ``.log`` segments of the broker's live ``<topic>-0`` dir (0 without one)."""
    folder = Path(cluster.brokers[broker_id].log_dir) / f"{topic}-0"
    return sum(f.stat().st_size for f in folder.glob("*.log")) if folder.exists() else 0


def partition_dir_exists(cluster: KafkaCluster, broker_id: int, topic: str) -> bool:
    return (cluster.brokers[broker_id].log_dir / f"{topic}-0").exists()


def wait_assignment(
    cluster: KafkaCluster, tp: TopicPartition, replicas: list[int], timeout_s: float = 60
) -> None:
    """Wait until AR = ``replicas`` (in order, no adding/removing) in ZooKeeper, the ISR in
    ZooKeeper holds exactly those replicas, and Metadata reports the same replicas and ISR."""

    def done() -> bool:
        zk = zk_client(cluster)
        try:
            assignment = zk.get_replica_assignments([tp.topic])[tp.topic].partitions[tp.partition]
            state = zk.get_partition_states([tp])[tp]
        finally:
            zk.close()
        meta = describe(cluster, tp.topic)[tp.partition]
        return (
            list(assignment.replicas) == replicas
            and not assignment.is_being_reassigned
            and sorted(state.leader_and_isr.isr) == sorted(replicas)
            and sorted(meta["replica_nodes"]) == sorted(replicas)
            and sorted(meta["isr_nodes"]) == sorted(replicas)
        )

    wait_for(done, timeout_s, f"{tp.topic}-{tp.partition} on {replicas}")
    wait_every_broker(
        cluster,
        tp.topic,
        lambda parts: (
            sorted(parts[tp.partition]["replica_nodes"]) == sorted(replicas)
            and sorted(parts[tp.partition]["isr_nodes"]) == sorted(replicas)
        ),
        f"{tp.topic}-{tp.partition} on {replicas}",
        timeout_s,
    )


def leader_of(cluster: KafkaCluster, topic: str, partition: int = 0) -> int:
    return int(describe(cluster, topic)[partition]["leader_id"])


# --- throttles ------------------------------------------------------------------------------


def set_throttle_rate(cluster: KafkaCluster, rate: int | None) -> None:
    """Set (or, with None, remove) both throttle rates in ``/config/brokers/<default>``.

    The cluster-wide default reaches every broker through ``/config/changes`` without
    an AlterConfigs request to each broker (some of them are dead in these tests).
    """
    zk = zk_client(cluster)
    try:
        zk.set_entity_config(
            "brokers", "<default>", {} if rate is None else {name: str(rate) for name in RATES}
        )
    finally:
        zk.close()


def create_throttled_topic(
    cluster: KafkaCluster, topic: str, replicas: list[int], configs: dict[str, str] | None = None
) -> None:
    """Create a one-partition topic on ``replicas``, then throttle all its replicas (``*``).

    The throttled replica lists are set by IncrementalAlterConfigs after the creation:
    brokers pick them up from the ``/config/changes`` notification that it writes (as in
    Kafka, a topic's creation configs write no notification, and the replication quota
    managers only learn throttled replicas from notifications and at startup).
    """
    create_topic(cluster, topic, assignment={0: replicas}, configs=configs)
    resource = ConfigResource(ConfigResourceType.TOPIC, topic, THROTTLED_REPLICAS)
    result = with_admin(
        cluster, lambda a: a.alter_configs([resource], raise_on_unknown=False, incremental=True)
    )
    assert "Error" not in repr(result) or "NoError" in repr(result), result


def produce_backlog(cluster: KafkaCluster, topic: str) -> list[bytes]:
    """Write ~2 MiB to partition 0 with acks=all; return the acknowledged values in order."""
    producer = KafkaProducer(
        bootstrap_servers=cluster.bootstrap_servers,
        acks="all",
        linger_ms=5,
        request_timeout_ms=15000,
    )
    values = [f"b{i:05d}".encode().ljust(RECORD_BYTES, b".") for i in range(BACKLOG_RECORDS)]
    try:
        futures = [producer.send(topic, value, partition=0) for value in values]
        producer.flush(60)
        for future in futures:
            future.get(30)
    finally:
        producer.close()
    return values


class BackgroundProducer:
    """Sends small records to partition 0 one at a time (acks=all, idempotent by default),
    keeping the acknowledged values in order and any send error."""

    def __init__(self, cluster: KafkaCluster, topic: str) -> None:
        self.topic = topic
        self.acked: list[bytes] = []
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._producer = KafkaProducer(
            bootstrap_servers=cluster.bootstrap_servers,
            acks="all",
            linger_ms=2,
            request_timeout_ms=15000,
            delivery_timeout_ms=120000,
        )
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> BackgroundProducer:
        self._thread.start()
        wait_for(lambda: len(self.acked) >= 20 or bool(self.errors), 60, "first live records")
        return self

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            value = f"live-{i}".encode()
            try:
                self._producer.send(self.topic, value, partition=0).get(120)
            except BaseException as exc:
                self.errors.append(exc)
                return
            self.acked.append(value)
            i += 1
            time.sleep(0.02)

    def stop(self) -> None:
        """Stop after the record in flight is acknowledged (or fails), then close."""
        self._stop.set()
        self._thread.join(150)
        self._producer.close(timeout=30)
        assert not self._thread.is_alive(), "the producer thread is stuck"


def wait_move_started(cluster: KafkaCluster, target: int, topic: str) -> None:
    """Wait until the added replica copied some bytes (the throttled move is running)."""
    wait_for(lambda: log_bytes(cluster, target, topic) > 0, 60, f"{topic}-0 copying to {target}")


def assert_still_moving(cluster: KafkaCluster, tp: TopicPartition, adding: int) -> None:
    """The reassignment is listed and the added replica has not caught up with the leader."""
    listed = ongoing(cluster)
    assert tp in listed, listed
    assert adding in listed[tp]["adding_replicas"], listed
    leader = leader_of(cluster, tp.topic)
    assert log_bytes(cluster, adding, tp.topic) < log_bytes(cluster, leader, tp.topic)


def assert_all_acked_read(cluster: KafkaCluster, topic: str, acked: list[bytes]) -> None:
    got = consume_all(cluster, topic, 1, len(acked), timeout_s=90)[0]
    assert len(got) == len(acked)
    assert got == acked, "acknowledged records differ (lost, duplicated or reordered)"


# --- tests -----------------------------------------------------------------------------------


def test_throttled_move_survives_a_controller_kill(kafka_cluster_factory: ClusterFactory) -> None:
    cluster = kafka_cluster_factory(4, THROTTLE_PROPERTIES)
    old_controller = controller_id(cluster)
    assert old_controller is not None
    # The controller hosts no replica of the partition: it dies without touching the ISR.
    first, second, third = (b for b in sorted(cluster.brokers) if b != old_controller)
    tp = TopicPartition("ctl", 0)
    create_throttled_topic(cluster, "ctl", [first, second])
    set_throttle_rate(cluster, RATE)
    backlog = produce_backlog(cluster, "ctl")
    live = BackgroundProducer(cluster, "ctl").start()
    try:
        assert alter(cluster, {tp: [second, third]}) == {tp: None}
        wait_move_started(cluster, third, "ctl")
        assert_still_moving(cluster, tp, third)

        cluster.brokers[old_controller].kill()
        wait_for(
            lambda: controller_id(cluster) not in (None, old_controller), 60, "a new controller"
        )
        # The new controller found the reassignment in ZooKeeper (AR with adding/removing).
        wait_for(lambda: tp in ongoing(cluster), 30, "the move listed by the new controller")
        assert_still_moving(cluster, tp, third)

        set_throttle_rate(cluster, None)
        wait_assignment(cluster, tp, [second, third])
        wait_for(lambda: ongoing(cluster) == {}, 30, "no reassignment listed")
        count = len(live.acked)
        wait_for(lambda: len(live.acked) >= count + 20, 60, "records after the move")
    finally:
        live.stop()
    assert live.errors == []
    # Metadata follows the controller's UpdateMetadata: a broker may briefly still name the
    # removed replica as leader after the move is listed complete.
    wait_for(lambda: leader_of(cluster, "ctl") in (second, third), 30, "a leader among AR")
    assert_all_acked_read(cluster, "ctl", backlog + live.acked)
    wait_for(lambda: not partition_dir_exists(cluster, first, "ctl"), 30, "old replica deleted")


def test_throttled_move_survives_a_leader_kill(kafka_cluster_factory: ClusterFactory) -> None:
    cluster = kafka_cluster_factory(4, THROTTLE_PROPERTIES)
    controller = controller_id(cluster)
    assert controller is not None
    leader, removed, added = (b for b in sorted(cluster.brokers) if b != controller)
    # OAR = [leader, controller, removed] -> RAR = [leader, controller, added].
    # Killing the leader leaves the ISR {controller, removed}: min.insync.replicas=2 is still
    # met, so acks=all keeps working, and the next leader (the first live ISR member of
    # AR = RAR + OAR) is the controller, a member of RAR. The killed leader stays in RAR, so
    # the move can only complete once it is restarted and back in the ISR: the test
    # restarts it after removing the throttle. The controller itself is never killed.
    tp = TopicPartition("lead", 0)
    create_throttled_topic(
        cluster, "lead", [leader, controller, removed], {"min.insync.replicas": "2"}
    )
    assert leader_of(cluster, "lead") == leader
    set_throttle_rate(cluster, RATE)
    backlog = produce_backlog(cluster, "lead")
    live = BackgroundProducer(cluster, "lead").start()
    try:
        assert alter(cluster, {tp: [leader, controller, added]}) == {tp: None}
        wait_move_started(cluster, added, "lead")
        assert_still_moving(cluster, tp, added)

        cluster.brokers[leader].kill()
        wait_for(lambda: leader_of(cluster, "lead") == controller, 60, "the controller leading")
        assert_still_moving(cluster, tp, added)
        count = len(live.acked)
        wait_for(lambda: len(live.acked) >= count + 20, 60, "records acked by the new leader")

        set_throttle_rate(cluster, None)
        wait_for(
            lambda: added in describe(cluster, "lead")[0]["isr_nodes"],
            60,
            "the added replica in ISR",
        )
        # RAR is not all in the ISR while the old leader is down: the move waits for it.
        assert tp in ongoing(cluster)
        cluster.brokers[leader].start()
        wait_assignment(cluster, tp, [leader, controller, added])
        wait_for(lambda: ongoing(cluster) == {}, 30, "no reassignment listed")
        count = len(live.acked)
        wait_for(lambda: len(live.acked) >= count + 20, 60, "records after the move")
    finally:
        live.stop()
    assert live.errors == []
    assert_all_acked_read(cluster, "lead", backlog + live.acked)
    wait_for(lambda: not partition_dir_exists(cluster, removed, "lead"), 30, "old replica deleted")


def test_reassignment_moves_leadership_off_a_broker(kafka_cluster_factory: ClusterFactory) -> None:
    # No automatic rebalance: only the preferred election below moves leadership.
    cluster = kafka_cluster_factory(3, {"auto.leader.rebalance.enable": "false"})
    victim, x, y = 0, 1, 2
    topic = "drain"
    create_topic(
        cluster, topic, assignment={0: [victim, x, y], 1: [victim, y, x], 2: [x, y, victim]}
    )
    assert [p["leader_id"] for p in describe(cluster, topic)] == [victim, victim, x]
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all")
    sent = {p: [f"d{p}-{i}".encode() for i in range(50)] for p in range(3)}
    for p, values in sent.items():
        for value in values:
            producer.send(topic, value, partition=p)
    producer.flush(30)

    # p0: the same replicas with the victim last (no data moves, it stays a follower);
    # p1: a target without the victim (the completed move elects a leader from RAR).
    p0, p1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    assert alter(cluster, {p0: [x, y, victim], p1: [y, x]}) == {p0: None, p1: None}
    wait_assignment(cluster, p0, [x, y, victim])
    wait_assignment(cluster, p1, [y, x])
    assert leader_of(cluster, topic, 0) == victim  # a reorder alone keeps the leader
    assert leader_of(cluster, topic, 1) in (x, y)

    with_admin(cluster, lambda a: a.elect_leaders(0, {topic: [0]}, timeout_ms=30000))
    wait_every_broker(
        cluster, topic, lambda parts: parts[0]["leader_id"] == x, "the preferred replica leading p0"
    )
    partitions = describe(cluster, topic)
    assert all(p["leader_id"] != victim for p in partitions), partitions
    assert victim in partitions[0]["replica_nodes"]
    assert victim not in partitions[1]["replica_nodes"]
    assert ongoing(cluster) == {}

    for p in range(3):
        sent[p].append(f"after-{p}".encode())
        producer.send(topic, sent[p][-1], partition=p)
    producer.flush(30)
    producer.close()
    got = consume_all(cluster, topic, 3, sum(len(v) for v in sent.values()))
    assert got == sent


def test_second_submission_replaces_an_in_flight_target(
    kafka_cluster_factory: ClusterFactory,
) -> None:
    cluster = kafka_cluster_factory(4, THROTTLE_PROPERTIES)
    a, b, c, d = sorted(cluster.brokers)
    tp = TopicPartition("twice", 0)
    create_throttled_topic(cluster, "twice", [a, b])
    set_throttle_rate(cluster, RATE)
    backlog = produce_backlog(cluster, "twice")

    # A: [a, b] -> [b, c], held in flight by the throttle.
    assert alter(cluster, {tp: [b, c]}) == {tp: None}
    wait_move_started(cluster, c, "twice")
    assert_still_moving(cluster, tp, c)

    # B: [b, d] while A runs. It is computed against the original replicas (OAR = [a, b]),
    # so c, half copied, is no longer needed and is stopped and deleted.
    assert alter(cluster, {tp: [b, d]}) == {tp: None}
    listed = ongoing(cluster)[tp]
    assert listed["replicas"] == [b, d, a]
    assert listed["adding_replicas"] == [d]
    assert listed["removing_replicas"] == [a]
    wait_for(lambda: not partition_dir_exists(cluster, c, "twice"), 30, "A's target deleted")
    wait_move_started(cluster, d, "twice")
    assert_still_moving(cluster, tp, d)  # B's new replica is throttled too

    set_throttle_rate(cluster, None)
    wait_assignment(cluster, tp, [b, d])
    wait_for(lambda: ongoing(cluster) == {}, 30, "no reassignment listed")
    assert not partition_dir_exists(cluster, c, "twice")
    wait_for(lambda: not partition_dir_exists(cluster, a, "twice"), 30, "old replica deleted")
    assert_all_acked_read(cluster, "twice", backlog)
