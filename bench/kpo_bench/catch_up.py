"""Follower catch-up throughput: a stopped follower replicating >= 500 MB from its leader.

Method (the same on both systems; reassignment is not used because kpo's broker does
not implement AlterPartitionReassignments yet):

1. Create :data:`CATCH_UP_TOPIC` with one partition on replicas ``[0, 1]`` (leader 0)
   and ``min.insync.replicas=1``.
2. Stop broker 1 (controlled shutdown) and wait until the ISR is ``[0]``.
3. Fill the partition with ProducerPerformance (acks=1).
4. Start broker 1 again and poll both brokers' partition folders: the follower has
   caught up when its ``.log`` segment bytes reach the leader's (a follower appends
   the leader's batches unchanged, so equal bytes mean equal LEO).

The value is the leader's log bytes over the time from the follower's first
replicated byte to its last (the transfer rate, as for a replica added by a
reassignment); the process start-up time and the ISR rejoin time are in the details.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path

from kpo_bench.admin import (
    BenchTimeoutError,
    admin_session,
    create_topic,
    partition_info,
    wait_for,
)
from kpo_bench.clusters import Cluster
from kpo_bench.java_tools import JavaTools, run_producer_perf
from kpo_bench.results import Measured
from kpo_bench.settings import MIB, Workload

CATCH_UP_TOPIC = "bench-catch-up"
LEADER = 0
FOLLOWER = 1
POLL_INTERVAL_S = 0.02


def partition_log_bytes(log_dir: Path, topic: str, partition: int) -> int:
    """Return the bytes in the ``.log`` segments of ``topic``-``partition`` under ``log_dir``.

    Both systems keep Kafka's layout: ``<log.dirs>/<topic>-<partition>/<base offset>.log``
    (the Kafka documentation's implementation section "Log"). Returns 0 while the folder
    does not exist.
    """
    folder = log_dir / f"{topic}-{partition}"
    total = 0
    try:
        for segment in folder.glob("*.log"):
            try:
                total += segment.stat().st_size
            except FileNotFoundError:  # a segment deleted while we looked
                continue
    except FileNotFoundError:
        return 0
    return total


@dataclass(frozen=True)
class CatchUpTimeline:
    """When things happened after the follower was started (monotonic seconds).

    Attributes:
        leader_bytes: the leader's log bytes, all of which the follower copies.
        started: just before the follower process was started.
        listening: the follower's port accepted connections.
        first_byte: the follower's log first held a replicated byte.
        caught_up: the follower's log bytes reached ``leader_bytes``.
        in_isr: Metadata first listed the follower in the ISR, or None if not seen.
    """

    leader_bytes: int
    started: float
    listening: float
    first_byte: float
    caught_up: float
    in_isr: float | None

    @property
    def transfer_s(self) -> float:
        """Seconds from the first to the last replicated byte (at least one poll interval)."""
        return max(self.caught_up - self.first_byte, POLL_INTERVAL_S)

    @property
    def mib_per_s(self) -> float:
        """Catch-up throughput: ``leader_bytes`` over :attr:`transfer_s`, MiB/s."""
        return self.leader_bytes / MIB / self.transfer_s

    def as_json(self) -> dict[str, float | int | None]:
        """Return the timeline relative to :attr:`started` (s), with bytes and rate."""
        return {
            "leader_bytes": self.leader_bytes,
            "listening_s": self.listening - self.started,
            "first_byte_s": self.first_byte - self.started,
            "caught_up_s": self.caught_up - self.started,
            "in_isr_s": None if self.in_isr is None else self.in_isr - self.started,
            "transfer_s": self.transfer_s,
            "mib_per_s": self.mib_per_s,
        }


def measure_catch_up(cluster: Cluster, tools: JavaTools, workload: Workload) -> Measured:
    """Measure the follower catch-up throughput as the module docstring describes.

    Raises:
        kpo_bench.admin.BenchTimeoutError: the ISR did not shrink, or the follower did
            not catch up within ``workload.catch_up_timeout_s``.
        kpo_bench.java_tools.JavaToolError: the fill failed.
    """
    leader = cluster.brokers[LEADER]
    follower = cluster.brokers[FOLLOWER]
    with admin_session(cluster.bootstrap_servers) as admin:
        create_topic(
            admin,
            CATCH_UP_TOPIC,
            assignment=[[LEADER, FOLLOWER]],
            config={"min.insync.replicas": "1"},
        )
    follower.stop()
    with admin_session(cluster.bootstrap_servers) as admin:

        def isr_shrunk() -> bool | None:
            state = partition_info(admin, CATCH_UP_TOPIC, 0)
            return True if state is not None and state.isr == (LEADER,) else None

        wait_for(isr_shrunk, 60, f"ISR of {CATCH_UP_TOPIC}-0 to shrink to [{LEADER}]")
    fill = run_producer_perf(
        tools,
        cluster.bootstrap_servers,
        CATCH_UP_TOPIC,
        workload.catch_up_records,
        workload.record_size,
        {**workload.producer_props, "acks": "1", "enable.idempotence": "false"},
        workload.tool_timeout_s(workload.catch_up_bytes),
    )
    leader_bytes = partition_log_bytes(leader.log_dir, CATCH_UP_TOPIC, 0)
    timeline = _restart_and_time(cluster, leader_bytes, workload.catch_up_timeout_s)
    details = {"fill": asdict(fill), **timeline.as_json()}
    return Measured(timeline.mib_per_s, details)


def _restart_and_time(cluster: Cluster, leader_bytes: int, timeout_s: float) -> CatchUpTimeline:
    follower = cluster.brokers[FOLLOWER]
    started = time.monotonic()
    follower.start()
    listening = time.monotonic()
    first_byte: float | None = None
    deadline = started + timeout_s
    while True:
        now = time.monotonic()
        copied = partition_log_bytes(follower.log_dir, CATCH_UP_TOPIC, 0)
        if copied > 0 and first_byte is None:
            first_byte = now
        if copied >= leader_bytes:
            caught_up = now
            break
        if now > deadline:
            raise BenchTimeoutError(
                f"follower {FOLLOWER} copied {copied} of {leader_bytes} bytes in {timeout_s:.0f} s"
            )
        time.sleep(POLL_INTERVAL_S)
    with admin_session(cluster.bootstrap_servers) as admin:

        def rejoined() -> float | None:
            state = partition_info(admin, CATCH_UP_TOPIC, 0)
            return time.monotonic() if state is not None and FOLLOWER in state.isr else None

        try:
            in_isr: float | None = wait_for(rejoined, 60, "the follower back in the ISR", 0.05)
        except BenchTimeoutError:
            in_isr = None
    return CatchUpTimeline(
        leader_bytes, started, listening, first_byte or caught_up, caught_up, in_isr
    )
