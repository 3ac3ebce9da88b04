"""A PartitionReassignment's concurrency limit on real parts: batches as movements finish.

Real kube-apiserver + etcd, the operator as a process, three broker processes on a real
ZooKeeper. Six partitions move into one broker with
``concurrentPartitionMovementsPerBroker: 2`` (Cruise Control's
``num.concurrent.partition.movements.per.broker``) under a throttle that keeps each
movement in flight for seconds; the test's own ListPartitionReassignments (KIP-455),
polled throughout, never sees more than two movements on a broker.
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter

import pytest

from kpo_kafka.admin import KafkaPythonAdmin
from tests.integration.broker.conftest import wait_for
from tests.integration.broker.server.helpers import (
    consume_all,
    create_topic,
    describe,
    wait_metadata_replicas,
)
from tests.integration.operator.conftest import (
    RECORD,
    StackFactory,
    produce,
    reassignment,
    throttle_configs,
)

pytestmark = pytest.mark.integration

PARTITIONS = 6
LIMIT = 2
TOTAL_BYTES = 24 * 1024 * 1024  # 4 MiB per partition
RATE = 2 * 1024 * 1024  # bytes/s: two movements into broker 2 take about 4 s


def test_per_broker_limit_bounds_movements_in_flight(stack_factory: StackFactory) -> None:
    # Two quota samples instead of Kafka's 11: no initial burst that would let a movement
    # finish before the next poll of ListPartitionReassignments sees it.
    stack = stack_factory(properties={"replication.quota.window.num": "2"})
    cluster = stack.cluster
    create_topic(cluster, "fleet", assignment={p: [0, 1] for p in range(PARTITIONS)})
    digests = produce(cluster, "fleet", PARTITIONS, TOTAL_BYTES)
    targets = [{"topic": "fleet", "partition": p, "replicas": [2, 1]} for p in range(PARTITIONS)]
    stack.apply(
        reassignment(
            "fleet-to-2",
            targets,
            throttle={"replicationRate": RATE},
            concurrentPartitionMovementsPerBroker=LIMIT,
            preferredLeaderElection=True,
        )
    )

    admin = KafkaPythonAdmin(cluster.bootstrap_servers, "kpo-test", request_timeout_ms=10000)
    busiest: Counter[int] = Counter()  # broker -> most movements seen on it at once
    seen_moving: set[int] = set()
    waiting_messages: set[str] = set()
    phase = None
    deadline = time.monotonic() + 180
    next_status = 0.0
    try:
        while phase != "Completed":
            assert time.monotonic() < deadline, f"not Completed in 180 s; busiest {busiest}"
            on: Counter[int] = Counter()
            for tp, movement in admin.list_partition_reassignments().items():
                seen_moving.add(tp.partition)
                on.update(set(movement.adding) | set(movement.removing))
            for broker, count in on.items():
                busiest[broker] = max(busiest[broker], count)
            assert all(count <= LIMIT for count in on.values()), on
            if time.monotonic() >= next_status:
                status = stack.status("fleet-to-2")
                phase = status.get("phase")
                assert phase in (None, "Moving", "Completed"), status
                for entry in status.get("partitions") or []:
                    if entry.get("state") == "Pending" and entry.get("message"):
                        waiting_messages.add(entry["message"])
                next_status = time.monotonic() + 0.5
            time.sleep(0.1)
    finally:
        admin.close()

    # Movements overlapped up to the limit, into broker 2 and out of broker 0, never beyond.
    assert busiest[2] == LIMIT and busiest[0] == LIMIT, busiest
    assert seen_moving == set(range(PARTITIONS))
    assert waiting_messages, "no partition was seen waiting for the limit"
    assert all(
        m.startswith(f"waiting: concurrentPartitionMovementsPerBroker {LIMIT} reached on broker")
        for m in waiting_messages
    ), waiting_messages
    status = stack.status("fleet-to-2")
    assert status["totals"]["partitionsDone"] == PARTITIONS
    assert status["totals"]["bytesDone"] == status["totals"]["bytesTotal"] >= TOTAL_BYTES
    submitted = [e["message"] for e in stack.events("fleet-to-2") if e["reason"] == "Submitted"]
    assert len(submitted) >= PARTITIONS // LIMIT, submitted
    assert throttle_configs(cluster, "fleet") == {}

    # Every record is on the new replicas: broker 2 leads each partition (preferred
    # leader election at the end) and serves the reads.
    wait_metadata_replicas(cluster, "fleet", {p: [2, 1] for p in range(PARTITIONS)})
    wait_for(
        lambda: all(p["leader_id"] == 2 for p in describe(cluster, "fleet")),
        60,
        "broker 2 leads every partition",
    )
    got = consume_all(cluster, "fleet", PARTITIONS, TOTAL_BYTES // RECORD, timeout_s=120)
    for partition, values in got.items():
        digest = hashlib.sha256()
        for value in values:
            digest.update(value)
        assert digest.hexdigest() == digests[partition], partition
