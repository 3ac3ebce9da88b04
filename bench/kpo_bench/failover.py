"""Leader failover time: kill -9 a partition leader while a producer writes to it.

Method (the same on both systems): create :data:`FAILOVER_TOPIC` with one partition
on all three brokers (RF 3, ``min.insync.replicas=2``), its preferred leader being a
broker that is *not* the controller, so that only the leader fails. A librdkafka
producer sends a small record with acks=all every 5 ms. After a steady second, the
leader is killed with SIGKILL. The value is the time from the kill until the first
acknowledgement of a record *sent after the kill* (no earlier in-flight ack can count).
The time until Metadata first names a new leader is in the details. Both include
the ZooKeeper session timeout (``zookeeper.session.timeout.ms``, the same for both),
after which the controller sees the broker gone and elects a new leader from the ISR.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from functools import partial
from typing import Any

from confluent_kafka import Producer

from kpo_bench.admin import (
    BenchTimeoutError,
    admin_session,
    create_topic,
    partition_info,
    wait_for,
)
from kpo_bench.clusters import Cluster
from kpo_bench.results import Measured
from kpo_bench.settings import Workload
from kpo_kafka.admin import KafkaAdmin
from kpo_kafka.admin_types import NO_LEADER

FAILOVER_TOPIC = "bench-failover"
SEND_INTERVAL_S = 0.005
STEADY_S = 1.0
#: librdkafka's log level for the probe: critical only (refused connections to the
#: killed broker are expected).
CLIENT_LOG_LEVEL = 2


def first_ack_after(acks: Sequence[tuple[float, float]], instant: float) -> float | None:
    """Return the earliest ack time among records sent after ``instant``, or None.

    Args:
        acks: ``(sent, acked)`` monotonic times, s, of acknowledged records.
        instant: the kill's monotonic time, s.
    """
    times = [acked for sent, acked in acks if sent > instant]
    return min(times) if times else None


def pick_victim(broker_ids: Sequence[int], controller: int | None) -> int:
    """Return the broker to lead, then kill: the smallest id that is not the controller.

    ``controller`` is ``None`` while there is none.

    Raises:
        ValueError: no broker other than the controller.
    """
    candidates = sorted(b for b in broker_ids if b != controller)
    if not candidates:
        raise ValueError(f"no broker other than the controller {controller}")
    return candidates[0]


class ProbeProducer:
    """A librdkafka producer sending one small acks=all record every :data:`SEND_INTERVAL_S`.

    Args:
        bootstrap_servers: ``host:port,...``.
        topic: topic to write (partition 0).
    """

    def __init__(self, bootstrap_servers: str, topic: str) -> None:
        self._producer: Any = Producer(
            {
                "bootstrap.servers": bootstrap_servers,
                "acks": "all",
                "linger.ms": 0,
                "enable.idempotence": False,
                "message.timeout.ms": 120_000,
                "log_level": CLIENT_LOG_LEVEL,
            }
        )
        self._topic = topic
        self.acks: list[tuple[float, float]] = []
        self.errors: list[str] = []
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="probe-producer", daemon=True)

    def start(self) -> None:
        """Start sending in a background thread."""
        self._thread.start()

    def stop(self) -> None:
        """Stop sending; the thread flushes the records in flight (at most 10 s)."""
        self._stopping.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        payload = b"x" * 100
        while not self._stopping.is_set():
            sent = time.monotonic()
            callback = partial(self._delivered, sent)
            self._producer.produce(self._topic, payload, partition=0, on_delivery=callback)
            self._producer.poll(SEND_INTERVAL_S)
        self._producer.flush(10)

    def _delivered(self, sent: float, error: Any, _message: Any) -> None:
        if error is None:
            self.acks.append((sent, time.monotonic()))
        else:
            self.errors.append(str(error))


def measure_failover(cluster: Cluster, workload: Workload) -> Measured:
    """Measure the leader failover time as the module docstring describes.

    Raises:
        kpo_bench.admin.BenchTimeoutError: produce did not start, or did not resume
            within ``workload.failover_timeout_s``.
    """
    with admin_session(cluster.bootstrap_servers) as admin:
        victim = pick_victim(list(cluster.brokers), admin.describe_cluster().controller_id)
        others = sorted(b for b in cluster.brokers if b != victim)
        create_topic(
            admin,
            FAILOVER_TOPIC,
            assignment=[[victim, *others]],
            config={"min.insync.replicas": "2"},
        )
    probe = ProbeProducer(cluster.bootstrap_servers, FAILOVER_TOPIC)
    probe.start()
    try:
        wait_for(lambda: True if probe.acks else None, 60, "the first ack before the kill")
        time.sleep(STEADY_S)
        killed = time.monotonic()
        cluster.brokers[victim].kill()
        with admin_session(cluster.bootstrap_servers) as survivors:
            new_leader, elected = _wait_for_new_leader(
                survivors, victim, workload.failover_timeout_s
            )
        resumed = wait_for(
            lambda: first_ack_after(probe.acks, killed),
            max(workload.failover_timeout_s - (time.monotonic() - killed), 1.0),
            "an ack of a record sent after the kill",
            0.01,
        )
    finally:
        probe.stop()
    details = {
        "killed_leader": victim,
        "new_leader": new_leader,
        "produce_resumed_s": resumed - killed,
        "metadata_new_leader_s": elected - killed,
        "acks": len(probe.acks),
        "client_errors": probe.errors[:5],
    }
    return Measured(resumed - killed, details)


def _wait_for_new_leader(admin: KafkaAdmin, old: int, timeout_s: float) -> tuple[int, float]:
    def elected() -> tuple[int, float] | None:
        state = partition_info(admin, FAILOVER_TOPIC, 0)
        if state is not None and state.leader not in (NO_LEADER, old):
            return state.leader, time.monotonic()
        return None

    try:
        return wait_for(elected, timeout_s, "Metadata to name a new leader", 0.02)
    except BenchTimeoutError as exc:
        raise BenchTimeoutError(f"leader {old} killed: {exc}") from exc
