"""Consumer groups: consume throughput through a group, and the rebalance after a kill -9.

Consume through a group: Kafka's own ``org.apache.kafka.tools.ConsumerPerformance``
(kafka-tools) with ``--group`` reads :data:`kpo_bench.throughput.PRODUCE_TOPIC` from the
start: it finds its coordinator, joins the group, is assigned every partition and fetches.
``bench-warmup`` is read first, untimed, by a group of its own. The value is the tool's
``fetch.MB.sec`` (MiB/s of record payload over the fetch time; the join is reported apart
as ``rebalance.time.ms``), the figure comparable with the group-less consume metric. Both
systems run with ``group.initial.rebalance.delay.ms=0``
(:data:`kpo_bench.clusters.COMMON_BROKER_PROPERTIES`), so the join time is the client's
start, the coordinator lookup and the JoinGroup/SyncGroup round trips, no configured wait.

Rebalance after kill -9: three members (:mod:`kpo_bench.group_member`, librdkafka, each its
own process) subscribe to :data:`GROUP_TOPIC` (12 partitions, RF 3); once they own every
partition between them, one is killed with SIGKILL (it sends no LeaveGroup). The value is
the time from the kill until the two survivors own every partition again (their
``on_assign`` callbacks). The coordinator notices the dead member when its session times
out (``session.timeout.ms``, the same on both systems), so that timeout is most of the value.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from kpo_bench.admin import admin_session, create_topic, wait_for
from kpo_bench.clusters import Cluster
from kpo_bench.java_tools import JavaTools, run_consumer_performance
from kpo_bench.results import Measured
from kpo_bench.settings import Workload
from kpo_bench.throughput import PRODUCE_TOPIC, WARMUP_TOPIC, EmptyTopicError

#: Topic of the rebalance test.
GROUP_TOPIC = "bench-group"
GROUP_PARTITIONS = 12
#: Members of the rebalance test's group.
GROUP_MEMBERS = 3
MEMBER_SCRIPT = Path(__file__).with_name("group_member.py")
#: Time the group stays balanced before the kill, s.
STEADY_S = 2.0


class RebalanceError(RuntimeError):
    """A member exited early or the group did not own every partition in time."""


@dataclass(frozen=True)
class MemberEvent:
    """One rebalance callback of a member.

    Attributes:
        at: wall-clock time of the callback (``time.time()``), s.
        kind: ``"assign"`` or ``"revoke"``.
        partitions: the partitions assigned or revoked.
    """

    at: float
    kind: str
    partitions: frozenset[int]


def parse_member_events(text: str) -> list[MemberEvent]:
    """Parse a member's output lines ``<time> assign|revoke <p,p,...>`` (others are skipped).

    A line still being written (no newline yet) is left out.
    """
    events = []
    for line in text.split("\n")[:-1]:
        parts = line.split()
        if len(parts) not in (2, 3) or parts[1] not in ("assign", "revoke"):
            continue
        try:
            at = float(parts[0])
            listed = frozenset(int(p) for p in parts[2].split(",")) if len(parts) == 3 else None
        except ValueError:
            continue
        events.append(MemberEvent(at, parts[1], listed or frozenset()))
    return events


def owned_after(events: Iterable[MemberEvent]) -> set[int]:
    """Return the partitions a member owns after its ``events`` (eager or incremental)."""
    owned: set[int] = set()
    for event in sorted(events, key=lambda e: e.at):
        if event.kind == "assign":
            owned |= event.partitions
        else:
            owned -= event.partitions
    return owned


def covered_at(
    members: Mapping[str, Sequence[MemberEvent]], partitions: set[int], after: float
) -> float | None:
    """Return the first time after ``after`` at which ``members`` together own ``partitions``.

    Ownership is replayed from every member's events in time order; only a state reached by
    an event later than ``after`` counts (the group owned everything before the kill too).

    Returns:
        The time of the event that completed the coverage, or None if it never did.
    """
    timeline = sorted(
        ((event.at, name, event) for name, events in members.items() for event in events),
        key=lambda item: item[0],
    )
    owned: dict[str, set[int]] = {name: set() for name in members}
    for at, name, event in timeline:
        if event.kind == "assign":
            owned[name] |= event.partitions
        else:
            owned[name] -= event.partitions
        if at > after and set().union(*owned.values()) >= partitions:
            return at
    return None


def measure_group_consume(cluster: Cluster, tools: JavaTools, workload: Workload) -> Measured:
    """Read :data:`PRODUCE_TOPIC` through a new group with ConsumerPerformance.

    Run after :func:`kpo_bench.throughput.measure_produce`.

    Raises:
        kpo_bench.java_tools.JavaToolError: the tool failed or timed out.
        kpo_bench.perf_output.PerfOutputError: it printed no summary.
        kpo_bench.throughput.EmptyTopicError: it read nothing (the produce test failed).
    """
    bootstrap = cluster.bootstrap_servers
    run = uuid.uuid4().hex[:8]
    warmup = run_consumer_performance(
        tools,
        bootstrap,
        WARMUP_TOPIC,
        f"bench-warmup-{run}",
        workload.warmup_records,
        workload.tool_timeout_s(workload.warmup_records * workload.record_size),
    )
    summary = run_consumer_performance(
        tools,
        bootstrap,
        PRODUCE_TOPIC,
        f"bench-consume-{run}",
        workload.produce_records,
        workload.tool_timeout_s(workload.produce_bytes),
    )
    if summary.records == 0:
        raise EmptyTopicError(f"ConsumerPerformance read nothing from {PRODUCE_TOPIC}")
    details = {"consumer_performance": asdict(summary), "warmup": asdict(warmup)}
    return Measured(summary.fetch_mib_per_s, details)


def measure_group_rebalance(cluster: Cluster, workload: Workload) -> Measured:
    """Kill -9 one of three members; time until the other two own every partition.

    Raises:
        RebalanceError: a member exited by itself, or the group did not cover the topic.
        kpo_bench.admin.BenchTimeoutError: the topic did not become ready.
    """
    bootstrap = cluster.bootstrap_servers
    with admin_session(bootstrap) as admin:
        create_topic(admin, GROUP_TOPIC, partitions=GROUP_PARTITIONS, replication_factor=3)
    group = f"bench-rebalance-{uuid.uuid4().hex[:8]}"
    partitions = set(range(GROUP_PARTITIONS))
    timeout_ms = str(workload.group_session_timeout_ms)
    with tempfile.TemporaryDirectory(prefix="kpo-bench-group-") as folder:
        outputs = [Path(folder) / f"member-{i}.out" for i in range(GROUP_MEMBERS)]
        members: list[subprocess.Popen[bytes]] = []
        argv = [sys.executable, str(MEMBER_SCRIPT), bootstrap, group, GROUP_TOPIC, timeout_ms]
        try:
            for path in outputs:
                with path.open("wb") as out:
                    members.append(subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT))

            def events() -> dict[str, list[MemberEvent]]:
                for i, member in enumerate(members):
                    if member.poll() is not None and i != 0:
                        raise RebalanceError(f"member {i} exited: {outputs[i].read_text()[-500:]}")
                return {p.stem: parse_member_events(p.read_text()) for p in outputs}

            def balanced() -> bool | None:
                owned = [owned_after(e) for e in events().values()]
                return (all(owned) and set().union(*owned) == partitions) or None

            began = time.monotonic()
            wait_for(balanced, workload.group_timeout_s, "3 members owning every partition")
            joined_s = time.monotonic() - began
            time.sleep(STEADY_S)
            killed_at = time.time()
            os.kill(members[0].pid, signal.SIGKILL)
            members[0].wait()
            survivors = {p.stem: parse_member_events(p.read_text()) for p in outputs[1:]}

            def covered() -> float | None:
                nonlocal survivors
                survivors = {name: e for name, e in events().items() if name != outputs[0].stem}
                return covered_at(survivors, partitions, killed_at)

            done = wait_for(covered, workload.group_timeout_s, "the survivors owning all")
        finally:
            for member in members:
                if member.poll() is None:
                    member.terminate()
            for member in members:
                try:
                    member.wait(20)
                except subprocess.TimeoutExpired:
                    member.kill()
                    member.wait()
    details = {
        "session_timeout_ms": workload.group_session_timeout_ms,
        "initial_join_s": joined_s,
        "assignments_after_kill": {
            name: sum(1 for e in evs if e.kind == "assign" and e.at > killed_at)
            for name, evs in survivors.items()
        },
    }
    return Measured(done - killed_at, details)
