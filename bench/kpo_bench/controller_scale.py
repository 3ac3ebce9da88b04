"""``--only controller``: the controller and brokers at scale, the same on both systems.

One broker, L (the lowest id that is not the controller, :func:`kpo_bench.failover.pick_victim`),
is made the preferred leader of N partitions; the steps then run in this order on one cluster:

1. **Create, RF 2**: N partitions as topics of 100 (``bench-ctl-rf2-<i>``), one CreateTopics
   request per topic sent one after another (each waits for the controller's answer), with the
   replica assignment ``[L, other]`` (the other alternating). The value is N divided by the
   time from the first request until Metadata shows every partition with a leader and a full
   ISR.
2. **Create, RF 3**: N more partitions (``bench-ctl-rf3-<i>``), replicas ``[x, y, L]`` and
   ``[y, x, L]`` alternating, so L leads none of them; measured as step 1.
3. **Memory per hosted replica**: the brokers' resident set size (``VmRSS``) after step 2
   minus before step 1, summed, over the replicas they host (2N on L, 1.5N on the others).
4. **Controlled shutdown** of L: SIGTERM, then the time until Metadata (from the other
   brokers) names a leader other than L for each of its N partitions, and until the process
   exits. The ZooKeeper server's ``zk_packets_received`` (``mntr``) over the first interval,
   divided by N, gives the ZooKeeper requests per leader change (a multi counts as one; the
   brokers' session pings, one per broker every 2 s, are included).
5. **Start-up after a clean shutdown**: L started again; the time from the process start until
   every partition it hosts lists it in its ISR (its logs loaded, registered, LeaderAndIsr
   handled, caught up). The time until its port accepts is in the details.
6. **kill -9** of L (its leadership first restored by a preferred-leader election, untimed):
   the time until every one of its N partitions has another leader. The ZooKeeper session
   (``zookeeper.session.timeout.ms``, 6 s on both) must expire first.
7. **Start-up after kill -9**: as step 5, with the logs recovered from an unclean shutdown.
8. **One large reassignment**: one AlterPartitionReassignments moving the follower of each of
   the N RF 2 partitions to the third broker (``[L, other]`` -> ``[L, third]``; the
   partitions are empty, so this times the controller's flow, not the copy): the time until
   ListPartitionReassignments lists none and Metadata shows every new replica list with a
   full ISR. The time until the request is answered is in the details.
9. **Controller failover**: kill -9 of the controller C; the time until every partition C
   led has another leader: C's session expires, another broker wins ``/controller``, loads
   the context from ZooKeeper (the metadata of all 2N partitions) and elects new leaders. The
   time until DescribeCluster names the new controller is in the details.

Both systems run with the same broker settings (``kpo_bench.clusters``) on the same ZooKeeper
server (each on its own chroot), never at the same time.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kpo_bench.admin import (
    BenchTimeoutError,
    admin_session,
    fully_replicated,
    wait_for,
    wait_for_partitions,
)
from kpo_bench.clusters import Broker, Cluster
from kpo_bench.failover import pick_victim
from kpo_bench.results import (
    CONTROLLER_FAILOVER,
    CREATE_RF2,
    CREATE_RF3,
    KILL_LEADERS,
    MEMORY_PER_PARTITION,
    REASSIGN_ALL,
    SHUTDOWN_EXIT,
    SHUTDOWN_LEADERS,
    STARTUP_CLEAN,
    STARTUP_UNCLEAN,
    ZK_REQUESTS_PER_CHANGE,
    Measured,
    MetricSpec,
)
from kpo_devenv.zookeeper import four_letter_word
from kpo_kafka.admin import KafkaAdmin, KafkaPythonAdmin
from kpo_kafka.admin_types import NO_LEADER, KafkaUnavailableError, PartitionInfo
from kpo_kafka.topic_partition import TopicPartition

#: Admin client request timeout for this benchmark, ms: a CreateTopics of 100 partitions or
#: a Metadata of every partition may take long on a loaded machine.
REQUEST_TIMEOUT_MS = 120_000
#: The controller's server-side wait for each CreateTopics, ms (under the request timeout).
CREATE_TIMEOUT_MS = 90_000
#: Topic name prefixes of the two creation steps.
RF2_PREFIX = "bench-ctl-rf2-"
RF3_PREFIX = "bench-ctl-rf3-"

Step = tuple[MetricSpec, Callable[[], Measured]]


@dataclass(frozen=True)
class ControllerWorkload:
    """Sizes of the controller benchmark.

    Attributes:
        partitions: N, the partitions L leads (and the partitions created at each RF).
        partitions_per_topic: partitions per created topic (100).
        timeout_s: longest wait for any one step's condition, s.
        poll_interval_s: pause between Metadata polls, s.
    """

    partitions: int = 10_000
    partitions_per_topic: int = 100
    timeout_s: float = 1800.0
    poll_interval_s: float = 0.25

    def topic_sizes(self, prefix: str) -> dict[str, int]:
        """Return topic -> partition count of one creation step (N partitions in all)."""
        sizes = {}
        left = self.partitions
        index = 0
        while left > 0:
            count = min(left, self.partitions_per_topic)
            sizes[f"{prefix}{index}"] = count
            left -= count
            index += 1
        return sizes

    def as_json(self) -> dict[str, Any]:
        """Return the settings as JSON-serialisable data."""
        return asdict(self)


#: The benchmark's N (10K partitions led by one broker).
DEFAULT_CONTROLLER = ControllerWorkload()
#: ``--quick``: N = 1,000.
QUICK_CONTROLLER = ControllerWorkload(partitions=1_000, timeout_s=600.0)


def rf2_assignment(count: int, first: int, leader: int, others: Sequence[int]) -> list[list[int]]:
    """Return ``[leader, other]`` per partition, the other alternating over ``others``.

    Args:
        count: partitions of the topic.
        first: index of the topic's first partition among all created (keeps the
            alternation going across topics).
        leader: the broker leading every partition.
        others: the brokers taking the second replica in turn.
    """
    return [[leader, others[(first + p) % len(others)]] for p in range(count)]


def rf3_assignment(count: int, first: int, avoided: int, others: Sequence[int]) -> list[list[int]]:
    """Return the replicas of RF 3 partitions that ``avoided`` hosts but never leads.

    Partition ``k`` (counted from ``first``) gets ``[a, b, avoided]`` with ``a, b`` the two
    ``others`` in turn, so the two others lead alternately.

    Raises:
        ValueError: ``others`` does not name exactly two brokers.
    """
    if len(others) != 2:
        raise ValueError(f"RF 3 needs exactly two other brokers, got {list(others)}")
    a, b = others
    return [[a, b, avoided] if (first + p) % 2 == 0 else [b, a, avoided] for p in range(count)]


def parse_mntr(text: str) -> dict[str, str]:
    """Parse ZooKeeper's ``mntr`` answer (``key<TAB>value`` lines) into a dict."""
    values = {}
    for line in text.splitlines():
        key, _, value = line.partition("\t")
        if key and value:
            values[key.strip()] = value.strip()
    return values


def rss_kib(pid: int) -> int:
    """Return the resident set size of process ``pid``, KiB (``VmRSS`` of ``/proc/<pid>/status``).

    Raises:
        OSError: the process does not exist.
        ValueError: no ``VmRSS`` line (a zombie).
    """
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise ValueError(f"process {pid} has no VmRSS")


def hosted_replicas(assignments: Mapping[str, Sequence[Sequence[int]]]) -> dict[int, int]:
    """Return broker id -> replicas hosted in ``assignments`` (topic -> replicas per partition)."""
    counts: dict[int, int] = {}
    for replicas_of in assignments.values():
        for replicas in replicas_of:
            for broker in replicas:
                counts[broker] = counts.get(broker, 0) + 1
    return counts


class ControllerScenario:
    """The steps of the module docstring against one started cluster of 3 brokers.

    The steps share state (the created topics, broker L) and must run in the order of
    :meth:`steps`; a failed step makes the later ones fail too.

    Args:
        cluster: the started cluster (brokers 0, 1, 2, all registered).
        zookeeper_port: the ZooKeeper server's client port (``mntr`` is whitelisted).
        workload: the sizes.
    """

    def __init__(self, cluster: Cluster, zookeeper_port: int, workload: ControllerWorkload) -> None:
        self._cluster = cluster
        self._zk_port = zookeeper_port
        self._workload = workload
        self._leader = -1
        self._assignments: dict[str, list[list[int]]] = {}
        self._rss_before: dict[int, int] = {}
        self._derived: dict[str, Measured] = {}

    def steps(self) -> list[Step]:
        """Return the measurements, in the order they must run."""
        return [
            (CREATE_RF2, self.create_rf2),
            (CREATE_RF3, self.create_rf3),
            (MEMORY_PER_PARTITION, self.memory_per_replica),
            (SHUTDOWN_LEADERS, self.controlled_shutdown),
            (SHUTDOWN_EXIT, lambda: self._derived_value(SHUTDOWN_EXIT)),
            (ZK_REQUESTS_PER_CHANGE, lambda: self._derived_value(ZK_REQUESTS_PER_CHANGE)),
            (STARTUP_CLEAN, self.start_leader),
            (KILL_LEADERS, self.kill_leader),
            (STARTUP_UNCLEAN, self.start_leader),
            (REASSIGN_ALL, self.reassign_all),
            (CONTROLLER_FAILOVER, self.controller_failover),
        ]

    # -- helpers ---------------------------------------------------------------------------

    def _derived_value(self, metric: MetricSpec) -> Measured:
        try:
            return self._derived[metric.key]
        except KeyError:
            raise BenchTimeoutError(f"{metric.label}: its step did not complete") from None

    def _bootstrap(self, without: int | None = None) -> str:
        brokers = self._cluster.brokers
        return ",".join(
            f"127.0.0.1:{b.port}" for i, b in brokers.items() if i != without and b.is_running()
        )

    def _admin(self, without: int | None = None) -> Any:
        return admin_session(self._bootstrap(without), REQUEST_TIMEOUT_MS)

    def _zk_packets(self) -> int:
        return int(parse_mntr(four_letter_word(self._zk_port, "mntr"))["zk_packets_received"])

    def _others(self) -> list[int]:
        return sorted(b for b in self._cluster.brokers if b != self._leader)

    def _topics(self, prefix: str | None = None) -> dict[str, int]:
        return {
            t: len(a)
            for t, a in self._assignments.items()
            if prefix is None or t.startswith(prefix)
        }

    def _pid(self, broker: Broker) -> int:
        pid = getattr(getattr(broker, "process", None), "pid", None)
        if not isinstance(pid, int):
            raise RuntimeError(f"no process id for broker on port {broker.port}")
        return pid

    def _rss(self) -> dict[int, int]:
        """Return broker id -> its resident set size now, KiB."""
        return {i: rss_kib(self._pid(b)) for i, b in self._cluster.brokers.items()}

    def _wait_partitions(
        self, admin: KafkaAdmin, topics: Mapping[str, int], ready: Callable[[PartitionInfo], bool]
    ) -> float:
        """Wait (the workload's timeout and poll interval) until every partition is ``ready``."""
        return wait_for_partitions(
            admin, topics, ready, self._workload.timeout_s, self._workload.poll_interval_s
        )

    def _leaders_moved(
        self, admin: KafkaAdmin, stop_leader: Callable[[], None]
    ) -> tuple[float, float, int]:
        """Stop L with ``stop_leader``; time until its N partitions are led elsewhere.

        Returns:
            (monotonic time of the stop, monotonic time every RF 2 partition had another
            leader, ZooKeeper packets received in between).
        """
        rf2 = self._topics(RF2_PREFIX)
        zk_before = self._zk_packets()
        began = time.monotonic()
        stop_leader()
        moved = self._wait_partitions(admin, rf2, self._moved_from(self._leader))
        return began, moved, self._zk_packets() - zk_before

    # -- steps -----------------------------------------------------------------------------

    def create_rf2(self) -> Measured:
        """Step 1: pick L, then create N partitions led by L (RF 2); partitions/s."""
        with self._admin() as admin:
            controller = admin.describe_cluster().controller_id
            self._leader = pick_victim(list(self._cluster.brokers), controller)
        self._rss_before = self._rss()
        others = self._others()
        return self._create(
            RF2_PREFIX, lambda n, first: rf2_assignment(n, first, self._leader, others)
        )

    def create_rf3(self) -> Measured:
        """Step 2: create N partitions of RF 3 hosted but not led by L; partitions/s."""
        others = self._others()
        return self._create(
            RF3_PREFIX, lambda n, first: rf3_assignment(n, first, self._leader, others)
        )

    def _create(self, prefix: str, assign: Callable[[int, int], list[list[int]]]) -> Measured:
        sizes = self._workload.topic_sizes(prefix)
        timed_out = 0
        with self._admin() as admin:
            zk_before = self._zk_packets()
            began = time.monotonic()
            first = 0
            for topic, count in sizes.items():
                assignment = assign(count, first)
                first += count
                self._assignments[topic] = assignment
                try:
                    admin.create_topic(
                        topic,
                        assignment=dict(enumerate(assignment)),
                        timeout_ms=CREATE_TIMEOUT_MS,
                    )
                except KafkaUnavailableError:  # timed out: the creation goes on; the wait decides
                    timed_out += 1
            sent = time.monotonic()
            done = self._wait_partitions(admin, sizes, fully_replicated)
            zk_requests = self._zk_packets() - zk_before
        partitions = sum(sizes.values())
        return Measured(
            partitions / (done - began),
            {
                "leader": self._leader,
                "topics": len(sizes),
                "partitions": partitions,
                "requests_answered_s": sent - began,
                "all_ready_s": done - began,
                "requests_timed_out": timed_out,
                "zk_requests": zk_requests,
                "zk_requests_per_partition": zk_requests / partitions,
            },
        )

    def memory_per_replica(self) -> Measured:
        """Step 3: RSS growth of the brokers over the replicas they host, KiB per replica."""
        hosted = hosted_replicas(self._assignments)
        after = self._rss()
        growth = sum(after[i] - self._rss_before[i] for i in after)
        replicas = sum(hosted.get(i, 0) for i in after)
        return Measured(
            growth / replicas,
            {"rss_before_kib": self._rss_before, "rss_after_kib": after, "hosted": hosted},
        )

    def _led_by(self, broker: int, states: Mapping[str, Mapping[int, PartitionInfo]]) -> int:
        return sum(1 for parts in states.values() for s in parts.values() if s.leader == broker)

    def _moved_from(self, broker: int) -> Callable[[PartitionInfo], bool]:
        return lambda state: state.leader not in (NO_LEADER, broker)

    def controlled_shutdown(self) -> Measured:
        """Step 4: SIGTERM of L until its N partitions are led elsewhere (and until exit)."""
        broker = self._cluster.brokers[self._leader]
        rf2 = self._topics(RF2_PREFIX)
        with self._admin(without=self._leader) as admin:
            led = self._led_by(self._leader, admin.describe_topics(list(rf2)))
            began, moved, zk_requests = self._leaders_moved(
                admin, lambda: os.kill(self._pid(broker), signal.SIGTERM)
            )
        exited = wait_for(
            lambda: None if broker.is_running() else time.monotonic(),
            self._workload.timeout_s,
            f"broker {self._leader} to exit after SIGTERM",
            0.05,
        )
        broker.stop()  # reaps the process and closes its log
        details = {"broker": self._leader, "led_before": led}
        self._derived[SHUTDOWN_EXIT.key] = Measured(exited - began, dict(details))
        self._derived[ZK_REQUESTS_PER_CHANGE.key] = Measured(
            zk_requests / max(led, 1), {**details, "zk_requests": zk_requests}
        )
        return Measured(moved - began, {**details, "exited_s": exited - began})

    def start_leader(self) -> Measured:
        """Start L until it is in the ISR of every partition it hosts (steps 5 and 7)."""
        broker = self._cluster.brokers[self._leader]
        leader = self._leader
        began = time.monotonic()
        broker.start(timeout_s=self._workload.timeout_s)
        listening = time.monotonic()
        with self._admin() as admin:
            in_isr = self._wait_partitions(
                admin, self._topics(), lambda s: leader not in s.replicas or leader in s.isr
            )
        return Measured(in_isr - began, {"broker": leader, "listening_s": listening - began})

    def _restore_leadership(self, admin: KafkaPythonAdmin) -> int:
        """Give L its N partitions back (preferred-leader election); return how many it leads."""
        rf2 = self._topics(RF2_PREFIX)
        partitions = [TopicPartition(t, p) for t, n in rf2.items() for p in range(n)]
        with contextlib.suppress(Exception):  # the auto leader rebalance (5 s) gets there too
            admin.elect_preferred_leaders(partitions)
        leader = self._leader
        wait_for_partitions(admin, rf2, lambda s: s.leader == leader, self._workload.timeout_s, 0.5)
        return sum(rf2.values())

    def kill_leader(self) -> Measured:
        """Step 6: kill -9 of L until its N partitions are led elsewhere."""
        broker = self._cluster.brokers[self._leader]
        with self._admin() as admin:
            led = self._restore_leadership(admin)
        with self._admin(without=self._leader) as admin:
            began, moved, zk_requests = self._leaders_moved(admin, broker.kill)
        return Measured(
            moved - began, {"broker": self._leader, "led_before": led, "zk_requests": zk_requests}
        )

    def reassign_all(self) -> Measured:
        """Step 8: one AlterPartitionReassignments moving a replica of each RF 2 partition."""
        rf2 = self._topics(RF2_PREFIX)
        brokers = set(self._cluster.brokers)
        targets: dict[TopicPartition, list[int]] = {}
        for topic in rf2:
            for partition, replicas in enumerate(self._assignments[topic]):
                (third,) = brokers - set(replicas)
                targets[TopicPartition(topic, partition)] = [replicas[0], third]
        with self._admin() as admin:
            began = time.monotonic()
            refused = {tp: e for tp, e in admin.alter_partition_reassignments(targets).items() if e}
            answered = time.monotonic()
            if refused:
                raise BenchTimeoutError(f"reassignments refused: {dict(list(refused.items())[:5])}")

            def moved() -> float | None:
                if admin.list_partition_reassignments():
                    return None
                described = admin.describe_topics(list(rf2))
                for tp, target in targets.items():
                    state = described.get(tp.topic, {}).get(tp.partition)
                    if state is None or list(state.replicas) != target:
                        return None
                    if not fully_replicated(state):
                        return None
                return time.monotonic()

            done = wait_for(
                moved,
                self._workload.timeout_s,
                "every reassignment to complete",
                self._workload.poll_interval_s,
            )
        for topic in rf2:
            self._assignments[topic] = [
                targets[TopicPartition(topic, p)] for p in range(len(self._assignments[topic]))
            ]
        return Measured(done - began, {"partitions": len(targets), "answered_s": answered - began})

    def controller_failover(self) -> Measured:
        """Step 8: kill -9 of the controller until the partitions it led are led elsewhere."""
        with self._admin() as admin:
            self._restore_leadership(admin)
            controller = admin.describe_cluster().controller_id
            if controller is None:
                raise BenchTimeoutError("no controller before the kill")
            led = self._led_by(controller, admin.describe_topics(list(self._topics())))
        topics = self._topics()
        new_controller: list[tuple[int, float]] = []
        with self._admin(without=controller) as admin:
            began = time.monotonic()
            self._cluster.brokers[controller].kill()

            def moved(state: PartitionInfo) -> bool:
                return state.leader not in (NO_LEADER, controller)

            def probe() -> float | None:
                if not new_controller:
                    current = admin.describe_cluster().controller_id
                    if current is not None and current != controller:
                        new_controller.append((current, time.monotonic()))
                described = admin.describe_topics(list(topics))
                for topic, count in topics.items():
                    parts = described.get(topic, {})
                    if any(p not in parts or not moved(parts[p]) for p in range(count)):
                        return None
                return time.monotonic()

            done = wait_for(
                probe,
                self._workload.timeout_s,
                "the partitions of the killed controller to be led elsewhere",
                self._workload.poll_interval_s,
            )
        details: dict[str, Any] = {
            "killed_controller": controller,
            "led_before": led,
            "partitions_in_cluster": sum(topics.values()),
        }
        if new_controller:
            details["new_controller"] = new_controller[0][0]
            details["new_controller_seen_s"] = new_controller[0][1] - began
        return Measured(done - began, details)
