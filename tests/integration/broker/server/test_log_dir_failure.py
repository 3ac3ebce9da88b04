"""A full or failing log dir on real brokers (Kafka's LogDirFailureChannel, KAFKA-4763).

The full disk is a real size-limited file system: a ``tmpfs`` mounted on the broker's log
dir (the tests run as root in their own mount namespace; they are skipped, saying why,
where mounting is refused) and filled with a file until ``ENOSPC``. Descriptor
exhaustion is a real ``RLIMIT_NOFILE`` lowered with ``prlimit`` on the running broker.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka.admin import NewTopic
from kafka.errors import KafkaError

from kpo_devenv import ZooKeeperServer
from kpo_devenv.kafka_cluster import KafkaCluster
from tests.integration.broker.conftest import admin_client, wait_cluster_ready, wait_for
from tests.integration.broker.server.acked_writes import (
    AckedWriteProducer,
    check_acked_writes,
    read_partitions,
)
from tests.integration.broker.server.disk_faults import fill, mount_tmpfs, unmount
from tests.integration.broker.server.helpers import create_topic, describe, leaders, zk_client

pytestmark = pytest.mark.integration

KAFKA_STORAGE_ERROR = 56
#: Size of the tmpfs log dirs: room for the topics and a few MB of records.
TMPFS_SIZE = "24m"
#: Bound on leadership moving after the failure: the session timeout of the devenv
#: brokers (6 s, for a halted broker) plus an election and metadata round on a loaded host.
FAILOVER_BOUND_S = 30.0

Mount = Callable[[Path, str], Path]


@pytest.fixture
def tmpfs() -> Iterator[Mount]:
    """Mount size-limited tmpfs file systems; unmount them (lazily) at teardown."""
    mounted: list[Path] = []

    def mount(path: Path, size: str) -> Path:
        mounted.append(mount_tmpfs(path, size))
        return path

    try:
        yield mount
    finally:
        for path in reversed(mounted):
            unmount(path)


@pytest.fixture
def new_cluster(
    zookeeper: ZooKeeperServer, tmp_path: Path, tmpfs: Mount
) -> Iterator[Callable[..., KafkaCluster]]:
    """Build (not start) clusters; stop them before the tmpfs mounts go."""
    clusters: list[KafkaCluster] = []

    def make(size: int = 3, log_dir_count: int = 1) -> KafkaCluster:
        chroot = f"kafka-{uuid.uuid4().hex[:8]}"
        cluster = KafkaCluster(
            tmp_path / chroot,
            f"{zookeeper.connect_string}/{chroot}",
            size,
            log_dir_count=log_dir_count,
        )
        clusters.append(cluster)
        return cluster

    try:
        yield make
    finally:
        for cluster in clusters:
            cluster.stop()


def describe_log_dirs(cluster: KafkaCluster, broker_id: int) -> dict[str, dict[str, Any]]:
    """Log dir -> its DescribeLogDirs entry (error code, partitions by topic)."""
    admin = admin_client(cluster)
    try:
        [answer] = admin.describe_log_dirs(brokers=[broker_id])
    finally:
        admin.close()
    return {entry["log_dir"]: entry for entry in answer["log_dirs"]}


def partitions_in(entry: dict[str, Any], topic: str) -> set[int]:
    """Partitions of ``topic`` a DescribeLogDirs entry lists."""
    return {
        p["partition_index"] for t in entry["topics"] if t["name"] == topic for p in t["partitions"]
    }


def isr_of(cluster: KafkaCluster, topic: str) -> dict[int, set[int]]:
    """Partition -> ISR, from Metadata."""
    return {p["partition_index"]: set(p["isr_nodes"]) for p in describe(cluster, topic)}


def test_a_full_log_dir_moves_only_its_partitions_and_acked_writes_resume(
    new_cluster: Callable[..., KafkaCluster], tmpfs: Mount
) -> None:
    cluster = new_cluster(3, log_dir_count=2)
    broker0 = cluster.brokers[0]
    full_dir = tmpfs(broker0.log_dirs[1], TMPFS_SIZE)
    cluster.start()
    wait_cluster_ready(cluster)
    topic, count = "orders", 4
    create_topic(
        cluster,
        topic,
        configs={"min.insync.replicas": "2"},
        assignment={p: [0, 1, 2] for p in range(count)},
    )
    dirs = describe_log_dirs(cluster, 0)
    on_full = partitions_in(dirs[str(full_dir)], topic)
    on_other = partitions_in(dirs[str(broker0.log_dirs[0])], topic)
    assert on_full and on_other and on_full | on_other == set(range(count))

    producer = AckedWriteProducer(cluster, topic, count).start()
    wait_for(lambda: producer.acked_count() >= 400, 60, "acked records before the disk fills")
    filled_at = time.monotonic()
    fill(full_dir)

    wait_for(
        lambda: all(leaders(cluster, topic).get(p, 0) != 0 for p in on_full),
        FAILOVER_BOUND_S,
        f"leaders of {sorted(on_full)} (full dir) off broker 0",
    )
    moved_after_s = time.monotonic() - filled_at
    wait_for(
        lambda: all(0 not in isr for p, isr in isr_of(cluster, topic).items() if p in on_full),
        FAILOVER_BOUND_S,
        "broker 0 out of the ISRs of the full dir's partitions",
    )
    acked_before_stop = producer.acked_count()
    wait_for(lambda: producer.acked_count() >= acked_before_stop + 400, 60, "acks resuming")
    writes = producer.stop()
    assert all(writes.first_ack_after(p, filled_at) is not None for p in on_full)
    gap = max(writes.longest_ack_gap(p, filled_at) for p in on_full)
    print(
        f"full log dir: leadership moved after {moved_after_s:.1f} s; "
        f"the full dir's partitions went {gap:.1f} s at most without an ack"
    )
    assert gap < FAILOVER_BOUND_S

    # Only the full dir's partitions moved: broker 0 still leads the others, in their ISR.
    assert all(leaders(cluster, topic)[p] == 0 for p in on_other)
    assert all(0 in isr for p, isr in isr_of(cluster, topic).items() if p in on_other)
    dirs = describe_log_dirs(cluster, 0)
    assert dirs[str(full_dir)]["error_code"] == KAFKA_STORAGE_ERROR
    assert dirs[str(full_dir)]["topics"] == []
    assert dirs[str(broker0.log_dirs[0])]["error_code"] == 0
    assert partitions_in(dirs[str(broker0.log_dirs[0])], topic) == on_other
    zk = zk_client(cluster)
    try:  # the controller deleted the notification once handled
        wait_for(lambda: zk.get_log_dir_event_notifications() == [], 30, "notifications handled")
    finally:
        zk.close()
    got = read_partitions(cluster, topic, count, writes.total)
    check_acked_writes(writes, got)
    log_text = (broker0.workdir / "broker.log").read_text()
    assert "is offline after an I/O error" in log_text
    assert "No space left on device" in log_text
    assert "Traceback" not in log_text

    # A clean shutdown with an offline dir exits 0; repaired, the replicas come back.
    broker0.stop()
    assert broker0.process.returncode == 0
    (full_dir / "filler").unlink()
    broker0.start()
    wait_for(
        lambda: all(0 in isr for isr in isr_of(cluster, topic).values()),
        60,
        "broker 0 back in every ISR after the repair",
    )
    dirs = describe_log_dirs(cluster, 0)
    assert dirs[str(full_dir)]["error_code"] == 0
    assert partitions_in(dirs[str(full_dir)], topic) == on_full


def test_a_broker_whose_only_log_dir_fills_halts_and_acked_writes_resume(
    new_cluster: Callable[..., KafkaCluster], tmpfs: Mount
) -> None:
    cluster = new_cluster(3)
    broker0 = cluster.brokers[0]
    only_dir = tmpfs(broker0.log_dirs[0], TMPFS_SIZE)
    cluster.start()
    wait_cluster_ready(cluster)
    topic, count = "payments", 3
    create_topic(
        cluster,
        topic,
        configs={"min.insync.replicas": "2"},
        assignment={p: [0, 1, 2] for p in range(count)},
    )
    producer = AckedWriteProducer(cluster, topic, count).start()
    wait_for(lambda: producer.acked_count() >= 300, 60, "acked records before the disk fills")
    filled_at = time.monotonic()
    fill(only_dir)
    wait_for(lambda: not broker0.is_running(), 30, "broker 0 halting")
    assert broker0.process.returncode == 1
    log_text = (broker0.workdir / "broker.log").read_text()
    assert f"Shutdown broker because all log dirs in {only_dir} have failed" in log_text
    assert "No space left on device" in log_text

    wait_for(
        lambda: (
            set(leaders(cluster, topic)) == set(range(count))
            and all(leader != 0 for leader in leaders(cluster, topic).values())
        ),
        FAILOVER_BOUND_S,
        "every partition led off the halted broker",
    )
    moved_after_s = time.monotonic() - filled_at
    acked = producer.acked_count()
    wait_for(lambda: producer.acked_count() >= acked + 300, 60, "acks resuming")
    writes = producer.stop()
    assert all(writes.first_ack_after(p, filled_at) is not None for p in range(count))
    gap = max(writes.longest_ack_gap(p, filled_at) for p in range(count))
    print(
        f"only log dir full: broker halted, leadership moved after {moved_after_s:.1f} s; "
        f"partitions went {gap:.1f} s at most without an ack"
    )
    assert gap < FAILOVER_BOUND_S
    got = read_partitions(cluster, topic, count, writes.total)
    check_acked_writes(writes, got)


def open_descriptors(pid: int) -> int:
    """Number of descriptors process ``pid`` holds."""
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_descriptor_exhaustion_takes_the_log_dir_offline(
    new_cluster: Callable[..., KafkaCluster],
) -> None:
    cluster = new_cluster(3)
    cluster.start()
    wait_cluster_ready(cluster)
    broker0 = cluster.brokers[0]
    create_topic(cluster, "before", assignment={0: [0, 1], 1: [1, 0]})
    pid = broker0.process.pid
    assert pid is not None
    limit = open_descriptors(pid) + 12
    subprocess.run(["prlimit", f"--pid={pid}", f"--nofile={limit}:{limit}"], check=True)
    admin = admin_client(cluster)
    # Broker 0 may be the controller answering this request when it halts: the topic is
    # in ZooKeeper before any LeaderAndIsr reaches broker 0, so its creation is awaited there.
    try:
        with contextlib.suppress(KafkaError):
            admin.create_topics(
                [NewTopic("many", -1, -1, replica_assignments={p: [0, 1] for p in range(60)})],
                timeout_ms=30000,
            )
    finally:
        with contextlib.suppress(KafkaError):
            admin.close()
    zk = zk_client(cluster)
    try:
        wait_for(lambda: "many" in zk.get_all_topics(), 30, "topic many in ZooKeeper")
    finally:
        zk.close()
    try:
        wait_for(lambda: not broker0.is_running(), 60, "broker 0 halting")
    except AssertionError as exc:
        lines = (broker0.workdir / "broker.log").read_text().splitlines()
        notable = [line for line in lines if " INFO " not in line and " DEBUG " not in line]
        raise AssertionError(f"{exc}\n" + "\n".join(notable[-40:])) from None
    assert broker0.process.returncode == 1
    log_text = (broker0.workdir / "broker.log").read_text()
    assert "Too many open files" in log_text
    assert f"log dir {broker0.log_dirs[0]} is offline after an I/O error" in log_text
    assert "Shutdown broker because all log dirs" in log_text
    assert "handler for api key" not in log_text
    wait_for(
        lambda: (
            len(leaders(cluster, "many")) == 60
            and all(leader == 1 for leader in leaders(cluster, "many").values())
        ),
        FAILOVER_BOUND_S + 30,
        "every partition of the new topic led by broker 1",
    )
    wait_for(
        lambda: leaders(cluster, "before") == {0: 1, 1: 1},
        FAILOVER_BOUND_S,
        "the halted broker's leaderships moved (its session expired)",
    )


def controller_of(cluster: KafkaCluster) -> int | None:
    """The active controller's id from ``/controller``, None while there is none."""
    zk = zk_client(cluster)
    try:
        controller = zk.get_controller_id()
    finally:
        zk.close()
    return controller if controller in cluster.brokers else None


def test_the_controller_with_a_full_log_dir_stops_cleanly(
    new_cluster: Callable[..., KafkaCluster], tmpfs: Mount
) -> None:
    """SIGTERM of the controller whose second log dir is offline exits 0 promptly.

    The fault suite's case (a clean stop there once hung past 60 s: a connection that ran on
    after its cancellation, see the socket server's unit tests): its ControlledShutdown
    goes to itself and is answered although a dir is offline, as Kafka's
    ``KafkaController.doControlledShutdown`` does; repaired and restarted, it rejoins every ISR.
    """
    cluster = new_cluster(3, log_dir_count=2)
    full_dirs = {b: tmpfs(broker.log_dirs[1], TMPFS_SIZE) for b, broker in cluster.brokers.items()}
    cluster.start()
    wait_cluster_ready(cluster)
    topic, count = "audit", 6
    create_topic(cluster, topic, count, 3, configs={"min.insync.replicas": "2"})
    producer = AckedWriteProducer(cluster, topic, count).start()
    try:
        wait_for(lambda: producer.acked_count() >= 300, 60, "acked records before the faults")
        # As in the fault suite's schedule: the first controller dies (kill -9) and comes
        # back, so the one whose dir fills was elected by a failover.
        first = controller_of(cluster)
        cluster.brokers[first].kill()
        wait_for(lambda: controller_of(cluster) not in (None, first), 60, "a new controller")
        cluster.brokers[first].start()
        wait_for(
            lambda: all(len(isr) == 3 for isr in isr_of(cluster, topic).values()),
            90,
            "every ISR full again after the restart",
        )
        controller_id = controller_of(cluster)
        assert controller_id in cluster.brokers
        controller = cluster.brokers[controller_id]
        full_dir = full_dirs[controller_id]
        filler = fill(full_dir)
        wait_for(
            lambda: (
                describe_log_dirs(cluster, controller_id)[str(full_dir)]["error_code"]
                == KAFKA_STORAGE_ERROR
            ),
            FAILOVER_BOUND_S,
            "the controller's full log dir offline",
        )
        acked = producer.acked_count()
        wait_for(lambda: producer.acked_count() >= acked + 300, 60, "acks resuming")
        filler.unlink()
        stopping = time.monotonic()
        controller.stop(timeout_s=60.0)
        took = time.monotonic() - stopping
    finally:
        writes = producer.stop()
    print(f"controller {controller_id} with an offline log dir stopped in {took:.1f} s")
    assert controller.process.returncode == 0, controller.process.log_tail(60)
    assert took < FAILOVER_BOUND_S
    controller.start()
    wait_for(
        lambda: all(len(isr) == 3 for isr in isr_of(cluster, topic).values()),
        60,
        "every ISR full again after the repair",
    )
    got = read_partitions(cluster, topic, count, writes.total)
    check_acked_writes(writes, got)
