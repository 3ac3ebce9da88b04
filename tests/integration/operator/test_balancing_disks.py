"""BalancingPolicy's disk detectors on real parts: a log dir that fails, a log dir too full.

Real kube-apiserver + etcd, the operator as a process, our brokers on a real ZooKeeper with
two log dirs each. The log dirs under test are small tmpfs mounts (the broker is stopped,
the dir moved onto the tmpfs and the broker started again), so that a dir fills up for
real: ENOSPC takes it offline, and DescribeLogDirs v4 (KIP-827) reports the tmpfs's size
and free bytes. Records are produced with acks=all and read back after the heal.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaTopicPartition

from kpo_devenv.kafka_cluster import BrokerProcess, KafkaCluster
from kpo_kafka.admin import KafkaPythonAdmin
from kpo_kafka.admin_types import (
    ERROR_REPLICA_NOT_AVAILABLE,
    LogDirState,
    ReplicaDirInfo,
    ReplicaKey,
)
from tests.integration.broker.conftest import wait_cluster_ready, wait_for
from tests.integration.broker.server.disk_faults import fill, mount_tmpfs, unmount
from tests.integration.broker.server.helpers import create_topic
from tests.integration.operator.conftest import RECORD, Stack, StackFactory, produce

pytestmark = pytest.mark.integration

POLICY = "disks"
POLICY_ENV = {"KPO_POLICY_INTERVAL_S": "2"}
MIB = 1024 * 1024


class TmpfsDirs:
    """Log dirs of a running cluster moved onto tmpfs mounts of a given size.

    At teardown the brokers concerned are stopped, then the mounts removed.
    """

    def __init__(self) -> None:
        self._brokers: list[BrokerProcess] = []
        self._mounted: list[Path] = []

    def mount(self, cluster: KafkaCluster, sizes: Mapping[tuple[int, int], str]) -> None:
        """Put log dir ``index`` of broker ``id`` on a tmpfs of ``size`` (``"64m"``) for each
        ``(id, index): size``; the brokers concerned are restarted around it."""
        brokers = [cluster.brokers[b] for b in sorted({b for b, _ in sizes})]
        for broker in brokers:
            broker.stop()
            if broker not in self._brokers:
                self._brokers.append(broker)
        for (broker_id, index), size in sorted(sizes.items()):
            path = cluster.brokers[broker_id].log_dirs[index]
            saved = path.with_name(f"{path.name}.disk")
            path.rename(saved)
            mount_tmpfs(path, size)
            self._mounted.append(path)
            for child in saved.iterdir():
                if child.is_dir():
                    shutil.copytree(child, path / child.name)
                else:
                    shutil.copy2(child, path / child.name)
            shutil.rmtree(saved)
        for broker in brokers:
            broker.start()
        wait_cluster_ready(cluster, 120)

    def release(self) -> None:
        """Stop the brokers using the mounts, then unmount them."""
        for broker in self._brokers:
            broker.stop(timeout_s=20)
        for path in reversed(self._mounted):
            unmount(path)


@pytest.fixture
def tmpfs(stack_factory: StackFactory) -> Iterator[TmpfsDirs]:
    """Move log dirs onto tmpfs mounts; removed after the test (before the stack stops)."""
    dirs = TmpfsDirs()
    try:
        yield dirs
    finally:
        dirs.release()


# -- the policy ------------------------------------------------------------------------


def _policy(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kpo.dev/v1alpha1",
        "kind": "BalancingPolicy",
        "metadata": {"name": POLICY},
        "spec": spec,
    }


def _status(stack: Stack) -> dict[str, Any]:
    found: dict[str, Any] = stack.get("balancingpolicies", POLICY).get("status") or {}
    return found


def _anomaly(stack: Stack, anomaly_id: str) -> dict[str, Any]:
    for entry in _status(stack).get("anomalies") or []:
        if entry.get("id") == anomaly_id:
            found: dict[str, Any] = entry
            return found
    return {}


def _wait_anomaly(stack: Stack, anomaly_id: str, state: str, timeout_s: float) -> dict[str, Any]:
    """Wait until the anomaly is in ``state``; return it then."""
    seen: dict[str, Any] = {}

    def reached() -> bool:
        seen.clear()
        seen.update(_anomaly(stack, anomaly_id))
        return seen.get("state") == state

    try:
        wait_for(reached, timeout_s, f"{anomaly_id} {state}")
    except AssertionError as exc:
        raise AssertionError(
            f"{exc}; last: {json.dumps(seen)}; status: {json.dumps(_status(stack))[:2000]}"
            f"\noperator log:\n{stack.operator.log_tail(60)}"
        ) from exc
    return dict(seen)


def _fixes(stack: Stack) -> list[dict[str, Any]]:
    listed = json.loads(
        stack.kubectl(
            "get",
            "partitionreassignments",
            "-l",
            f"kpo.dev/balancing-policy={POLICY}",
            "-o",
            "json",
        )
    )
    items: list[dict[str, Any]] = listed["items"]
    return items


# -- the cluster -----------------------------------------------------------------------


def _admin(stack: Stack) -> KafkaPythonAdmin:
    return KafkaPythonAdmin(stack.cluster.bootstrap_servers, "kpo-test", request_timeout_ms=10000)


def _log_dirs(
    stack: Stack, brokers: Sequence[int]
) -> tuple[dict[ReplicaKey, ReplicaDirInfo], dict[int, dict[str, LogDirState]]]:
    """Replicas in online dirs, and every dir of ``brokers`` by path (DescribeLogDirs)."""
    admin = _admin(stack)
    try:
        replicas = admin.describe_log_dirs(list(brokers))
        states = admin.log_dir_states(list(brokers))
    finally:
        admin.close()
    return replicas, {b: {d.path: d for d in dirs} for b, dirs in states.items()}


def _used(state: LogDirState) -> float:
    """Used share of a log dir's file system, as the disk-usage detector computes it."""
    return (state.total_bytes - state.usable_bytes) / state.total_bytes


def _place(stack: Stack, moves: Mapping[ReplicaKey, Path]) -> None:
    """Move replicas into the named log dirs of their brokers; wait until they are there."""
    admin = _admin(stack)
    try:
        errors = admin.alter_replica_log_dirs({key: str(path) for key, path in moves.items()})
        assert not any(errors.values()), errors
        brokers = sorted({b for b, _, _ in moves})

        def placed() -> bool:
            found = admin.describe_log_dirs(brokers)
            return all(
                key in found and found[key].log_dir == str(path) and found[key].future is None
                for key, path in moves.items()
            )

        wait_for(placed, 60, "replicas in their log dirs")
    finally:
        admin.close()


def _assignment(stack: Stack, topic: str) -> dict[int, tuple[list[int], list[int]]]:
    admin = _admin(stack)
    try:
        info = admin.describe_topics([topic])[topic]
    finally:
        admin.close()
    return {p: (list(i.replicas), list(i.isr)) for p, i in info.items()}


def _produce_acked(
    cluster: KafkaCluster, topic: str, partitions: Sequence[int], count: int, first: int
) -> dict[int, list[bytes]]:
    """Produce ``count`` records to each of ``partitions`` (idempotent, acks=all); the
    records acknowledged, per partition in order. Values are numbered from ``first``."""
    producer = KafkaProducer(
        bootstrap_servers=cluster.bootstrap_servers,
        acks="all",
        enable_idempotence=True,
        linger_ms=20,
        max_request_size=2 * 1024 * 1024,
        delivery_timeout_ms=120000,
    )
    sent: dict[int, list[tuple[bytes, Any]]] = {p: [] for p in partitions}
    try:
        for i in range(count):
            for partition in partitions:
                value = (first + i * len(partitions) + partitions.index(partition)).to_bytes(
                    8, "big"
                ) * (RECORD // 8)
                sent[partition].append((value, producer.send(topic, value, partition=partition)))
        producer.flush(150)
    finally:
        producer.close()
    acked: dict[int, list[bytes]] = {p: [] for p in partitions}
    for partition, records in sent.items():
        for value, future in records:
            if future.succeeded():
                acked[partition].append(value)
    return acked


def _read_all(cluster: KafkaCluster, topic: str, partitions: int) -> dict[int, list[bytes]]:
    """Every record of ``topic`` from offset 0 to the end of each partition (no group)."""
    consumer = KafkaConsumer(
        bootstrap_servers=cluster.bootstrap_servers,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        request_timeout_ms=15000,
    )
    assigned = [KafkaTopicPartition(topic, p) for p in range(partitions)]
    consumer.assign(assigned)
    got: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    try:
        ends = consumer.end_offsets(assigned)

        def done() -> bool:
            for records in consumer.poll(timeout_ms=500).values():
                for record in records:
                    got[record.partition].append(record.value)
            return all(consumer.position(tp) >= ends[tp] for tp in assigned)

        wait_for(done, 120, f"every record of {topic}")
    finally:
        consumer.close()
    return got


def _digest(records: Sequence[bytes]) -> str:
    return hashlib.sha256(b"".join(records)).hexdigest()


def _log_dir_offline(stack: Stack, broker: int, path: Path) -> bool:
    _, states = _log_dirs(stack, [broker])
    return not states[broker][str(path)].online


# -- disk failure ------------------------------------------------------------------------

FAILURE_TOPIC = "orders"
FAILURE_ASSIGNMENT = {0: [0, 1, 2], 1: [1, 2, 0], 2: [2, 3, 0], 3: [3, 1, 2]}
"""Broker 0 leads partition 0 and follows 1 and 2; partition 3 is not on it."""
FAILURE_BYTES = 4 * MIB


def test_failed_log_dir_is_healed_on_other_brokers(
    stack_factory: StackFactory, tmpfs: TmpfsDirs
) -> None:
    """A log dir filled to ENOSPC goes offline; its replicas are moved to other brokers.

    Four brokers; broker 0's second log dir is a 16 MiB tmpfs holding its replicas of
    partitions 0 (it leads) and 1, its first dir its replica of partition 2. The tmpfs is
    filled and a write to those partitions takes the dir offline (DescribeLogDirs answers
    KAFKA_STORAGE_ERROR for it); the policy's disk-failure detector finds the two replicas
    missing from broker 0's online dirs.

    The policy first offers them to broker 0's online dir (AlterReplicaLogDirs). Our
    brokers refuse, as Kafka does: a replica of a failed dir is an offline partition, no
    longer hosted and refused even by LeaderAndIsr until the broker restarts; the answer
    is REPLICA_NOT_AVAILABLE (Kafka's is KAFKA_STORAGE_ERROR), which the test checks by
    asking the same before the policy exists. So nothing is placed there
    (no ``ReplicasPlaced`` Event) and the fix is a PartitionReassignment owned by the
    policy that replaces broker 0 in those two partitions by broker 3, the only broker
    holding neither. Afterwards every partition has
    its three replicas in sync, each in an online dir, partition 2 keeps its replica on
    broker 0, and every acknowledged record, those written while the dir failed included,
    is read back.
    """
    stack = stack_factory(4, log_dir_count=2, env=POLICY_ENV)
    cluster = stack.cluster
    tmpfs.mount(cluster, {(0, 1): "16m"})
    healthy, failing = cluster.brokers[0].log_dirs
    create_topic(cluster, FAILURE_TOPIC, assignment=FAILURE_ASSIGNMENT)
    _place(
        stack,
        {
            (0, FAILURE_TOPIC, 0): failing,
            (0, FAILURE_TOPIC, 1): failing,
            (0, FAILURE_TOPIC, 2): healthy,
        },
    )
    partitions = len(FAILURE_ASSIGNMENT)
    digests = produce(cluster, FAILURE_TOPIC, partitions, FAILURE_BYTES)
    before = FAILURE_BYTES // RECORD // partitions
    filler = fill(failing)
    acked = _produce_acked(cluster, FAILURE_TOPIC, [0, 1], 32, first=1 << 32)
    wait_for(lambda: _log_dir_offline(stack, 0, failing), 60, f"{failing} offline")
    filler.unlink()  # the dir stays offline until the broker restarts, as in Kafka
    # What the policy will try first: the broker refuses a replica of its failed dir.
    admin = _admin(stack)
    try:
        refused = admin.alter_replica_log_dirs({(0, FAILURE_TOPIC, 0): str(healthy)})
    finally:
        admin.close()
    error = refused[(0, FAILURE_TOPIC, 0)]
    assert error is not None and error.code == ERROR_REPLICA_NOT_AVAILABLE, refused

    stack.apply(
        _policy(
            detectors={"diskFailure": {"threshold": "0s"}},
            budget={"replicationRate": 16 * MIB},
        )
    )
    fixed = _wait_anomaly(stack, "DiskFailure/0", "Fixed", 300)
    assert fixed["logDirs"] == [f"0:{failing}"], fixed
    assert fixed["partitions"] == 2, fixed
    reasons = [e["reason"] for e in stack.events(POLICY)]
    assert "ReplicasPlaced" not in reasons, reasons
    for reason in ("AnomalyFixing", "AnomalyFixed"):
        assert reason in reasons, reasons
    [fix] = fixed["fixes"]
    assert [f["metadata"]["name"] for f in _fixes(stack)] == [fix]
    pr = stack.get("partitionreassignments", fix)
    assert pr["metadata"]["labels"]["kpo.dev/anomaly-kind"] == "disk-failure"
    assert pr["metadata"]["ownerReferences"][0]["kind"] == "BalancingPolicy"
    assert pr["status"]["phase"] == "Completed", pr["status"]
    targets = {(p["topic"], p["partition"]): p["replicas"] for p in pr["spec"]["partitions"]}
    assert targets == {(FAILURE_TOPIC, 0): [3, 1, 2], (FAILURE_TOPIC, 1): [1, 2, 3]}, targets

    final = _assignment(stack, FAILURE_TOPIC)
    expected = {0: [3, 1, 2], 1: [1, 2, 3], 2: [2, 3, 0], 3: [3, 1, 2]}
    for partition, (replicas, isr) in final.items():
        assert replicas == expected[partition], (partition, replicas)
        assert sorted(isr) == sorted(replicas), (partition, replicas, isr)
    replicas_dirs, states = _log_dirs(stack, sorted(cluster.brokers))
    assert not states[0][str(failing)].online  # offline until the broker restarts
    for partition, (replicas, _) in final.items():
        for broker in replicas:
            info = replicas_dirs.get((broker, FAILURE_TOPIC, partition))
            assert info is not None, (broker, partition)  # listed: in an online dir
            assert states[broker][info.log_dir].online
            assert info.future is None
    assert replicas_dirs[(0, FAILURE_TOPIC, 2)].log_dir == str(healthy)

    got = _read_all(cluster, FAILURE_TOPIC, partitions)
    for partition, records in got.items():
        assert _digest(records[:before]) == digests[partition], partition
        rest = records[before:]
        wanted = acked.get(partition, [])
        kept = set(wanted)
        assert [r for r in rest if r in kept] == wanted, partition
        assert len(set(rest)) == len(rest), partition
    assert all(acked.values()), {p: len(v) for p, v in acked.items()}


# -- disk usage --------------------------------------------------------------------------

USAGE_TOPIC = "ledger"
USAGE_PARTITIONS = 6
USAGE_ASSIGNMENT = {p: [0, 1 + p % 2] if p % 2 == 0 else [1 + p % 2, 0] for p in range(6)}
"""Broker 0 holds a replica of every partition, brokers 1 and 2 of three each."""
USAGE_BYTES = 45 * MIB
"""7.5 MiB per partition: 70 % of broker 0's 64 MiB dir, which holds all its replicas;
any one replica moved brings it under 60 %."""
THRESHOLD = 0.6
ROOMY = "128m"
PROMPT_DELETE = {"log.segment.delete.delay.ms": "0"}
"""A moved replica's old files are removed as soon as the move completes (Kafka keeps
them ``log.segment.delete.delay.ms``, 60 s by default), so that the bytes it frees show
at the policy's next check."""


def _usage_stack(
    stack_factory: StackFactory, tmpfs: TmpfsDirs, first_dir: str, properties: dict[str, str]
) -> tuple[Stack, dict[int, str]]:
    """Three brokers with ``properties``, every log dir a tmpfs of its own (the usage the
    detector reads is the test's alone): broker 0's first dir of ``first_dir``, its second
    of 64 MiB holding its replicas of :data:`USAGE_TOPIC`, the others of 128 MiB. Returns
    the stack and the records' digests once broker 0's second dir is above the threshold,
    with the policy applied."""
    stack = stack_factory(3, properties, log_dir_count=2, env=POLICY_ENV)
    cluster = stack.cluster
    sizes = {(b, i): ROOMY for b in cluster.brokers for i in range(2)}
    sizes[(0, 0)] = first_dir
    sizes[(0, 1)] = "64m"
    tmpfs.mount(cluster, sizes)
    full = cluster.brokers[0].log_dirs[1]
    create_topic(cluster, USAGE_TOPIC, assignment=USAGE_ASSIGNMENT)
    _place(stack, {(0, USAGE_TOPIC, p): full for p in range(USAGE_PARTITIONS)})
    digests = produce(cluster, USAGE_TOPIC, USAGE_PARTITIONS, USAGE_BYTES)
    _, states = _log_dirs(stack, [0])
    assert _used(states[0][str(full)]) > THRESHOLD, states
    stack.apply(
        _policy(
            detectors={
                "diskUsage": {
                    "thresholdPercent": round(100 * THRESHOLD),
                    "threshold": "0s",
                    "respectWindows": False,
                }
            },
            budget={"replicationRate": 32 * MIB},
        )
    )
    return stack, digests


def _relieved(stack: Stack, digests: Mapping[int, str]) -> tuple[int, dict[str, Any]]:
    """Wait until broker 0's second dir is relieved by one fix moving one replica; check
    every dir at or below the threshold, every partition in sync and the records intact.
    Returns the partition moved and its entry in the fix."""
    cluster = stack.cluster
    full = cluster.brokers[0].log_dirs[1]
    fixed = _wait_anomaly(stack, f"DiskUsage/0:{full}", "Fixed", 300)
    [fix] = fixed["fixes"]
    fixes = _fixes(stack)
    assert [f["metadata"]["name"] for f in fixes] == [fix], [
        (f["metadata"]["name"], f["spec"]["partitions"]) for f in fixes
    ]
    pr = fixes[0]
    assert pr["metadata"]["labels"]["kpo.dev/anomaly-kind"] == "disk-usage"
    assert pr["status"]["phase"] == "Completed", pr["status"]
    # The fewest bytes: one replica covers the excess, and one alone moved.
    [entry] = pr["spec"]["partitions"]
    assert entry["topic"] == USAGE_TOPIC, entry
    moved = int(entry["partition"])

    replicas, states = _log_dirs(stack, sorted(cluster.brokers))
    used = {
        (b, Path(p).name): round(_used(s), 3) for b, dirs in states.items() for p, s in dirs.items()
    }
    assert all(s.online for dirs in states.values() for s in dirs.values()), states
    assert all(fraction <= THRESHOLD for fraction in used.values()), used
    assert (0, USAGE_TOPIC, moved) not in replicas or replicas[
        (0, USAGE_TOPIC, moved)
    ].log_dir != str(full)
    for partition in range(USAGE_PARTITIONS):
        if partition != moved:  # the others stayed where they were
            assert replicas[(0, USAGE_TOPIC, partition)].log_dir == str(full), partition
    for partition, (members, isr) in _assignment(stack, USAGE_TOPIC).items():
        assert sorted(isr) == sorted(members), (partition, members, isr)
        for broker in members:
            assert replicas[(broker, USAGE_TOPIC, partition)].future is None

    got = _read_all(cluster, USAGE_TOPIC, USAGE_PARTITIONS)
    for partition, records in got.items():
        assert _digest(records) == digests[partition], partition
    return moved, entry


def test_full_log_dir_is_relieved_into_another_dir_of_its_broker(
    stack_factory: StackFactory, tmpfs: TmpfsDirs
) -> None:
    """A log dir above the usage threshold sheds one replica to a roomier dir of its broker.

    Broker 0's second dir (a 64 MiB tmpfs) holds its six replicas of 7.5 MiB, 70 % of it;
    its first dir (128 MiB) is empty. With ``thresholdPercent: 60`` the excess is about
    6.7 MiB, which any one replica covers: the fix is one PartitionReassignment moving one
    replica into broker 0's first dir (AlterReplicaLogDirs, KIP-113), its replica list
    unchanged and ``"any"`` for the other replica's dir. Afterwards the dir is under 60 %
    (DescribeLogDirs totals), no dir of any broker is above it, the partitions are in sync
    and every record is read back (brokers with :data:`PROMPT_DELETE`).
    """
    stack, digests = _usage_stack(stack_factory, tmpfs, ROOMY, PROMPT_DELETE)
    moved, entry = _relieved(stack, digests)
    first = str(stack.cluster.brokers[0].log_dirs[0])
    members = USAGE_ASSIGNMENT[moved]
    assert entry["replicas"] == members, entry
    assert entry["logDirs"] == [first if b == 0 else "any" for b in members], entry


def test_full_log_dir_is_relieved_onto_other_brokers(
    stack_factory: StackFactory, tmpfs: TmpfsDirs
) -> None:
    """A log dir above the usage threshold, its broker without room: a replica moves away.

    As the test above, but broker 0's first dir is an 8 MiB tmpfs, where a 7.5 MiB replica
    would be above 60 %: the one replica moved goes to the other broker not holding its
    partition (brokers 1 and 2 have 128 MiB dirs), into the dir the plan names there.
    """
    stack, digests = _usage_stack(stack_factory, tmpfs, "8m", PROMPT_DELETE)
    moved, entry = _relieved(stack, digests)
    members = USAGE_ASSIGNMENT[moved]
    other = ({1, 2} - set(members)).pop()
    assert entry["replicas"] == [other if b == 0 else b for b in members], entry
    named = entry["logDirs"][members.index(0)]
    assert named in {str(d) for d in stack.cluster.brokers[other].log_dirs}, entry
    admin = _admin(stack)
    try:
        where = admin.describe_log_dirs([other], [USAGE_TOPIC])
    finally:
        admin.close()
    assert where[(other, USAGE_TOPIC, moved)].log_dir == named


LINGERING: dict[str, str] = {}
"""The brokers' defaults: Kafka's delete delay (``log.segment.delete.delay.ms``, 60 s) keeps a
moved replica's old files in its dir a minute after the move, then the ``kafka-delete-logs``
task removes them."""


def test_full_log_dir_sheds_only_its_excess_while_old_files_linger(
    stack_factory: StackFactory, tmpfs: TmpfsDirs
) -> None:
    """With Kafka's delete delay, the one replica the excess needs is the only one moved.

    As the first disk-usage test, with the brokers' default ``log.segment.delete.delay.ms``:
    when the fix completes, the moved replica's old files still hold their bytes in broker
    0's second dir for a minute, so DescribeLogDirs still reports it above 60 %. Those
    bytes are on their way out: no further replica is moved while they linger, and the
    anomaly is Fixed once they are gone.
    """
    stack, digests = _usage_stack(stack_factory, tmpfs, ROOMY, LINGERING)
    full = stack.cluster.brokers[0].log_dirs[1]
    fixing = _wait_anomaly(stack, f"DiskUsage/0:{full}", "Fixing", 90)
    [first] = fixing["fixes"]
    stack.wait_phase(first, "Completed", 120)
    time.sleep(10)  # five checks of the policy while the old files linger
    _, states = _log_dirs(stack, [0])
    fixes = [(f["metadata"]["name"], f["spec"]["partitions"]) for f in _fixes(stack)]
    assert len(fixes) == 1, (f"{full}: {_used(states[0][str(full)]):.1%} used", fixes)
    _relieved(stack, digests)
