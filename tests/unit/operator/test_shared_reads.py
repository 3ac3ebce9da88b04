"""One cluster read and one owner list per interval for all objects (operator scale).

:class:`SharedClusterReader` and :class:`ReassignmentIndex` batch what every reconcile step
reads; the throttle writer merges syncs asked for while one runs (group commit); the pool
and the ``kubernetes`` client count the requests they send (:mod:`kpo_operator.metrics`).
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Collection
from typing import Any

from kpo_kafka.admin_types import ConfigResource, ReplicaDirInfo, ReplicaKey
from kpo_kafka.topic_partition import TopicPartition
from kpo_operator.admin_pool import KafkaAdminPool
from kpo_operator.cluster_reader import SharedClusterReader
from kpo_operator.metrics import OperatorMetrics, kube_resource
from kpo_operator.reassignment import ReassignmentReconciler
from kpo_operator.reassignment_index import ReassignmentIndex
from kpo_operator.resources import PARTITION_REASSIGNMENT
from kpo_operator.throttle_writer import ThrottleWriter
from kpo_operator.throttles import Contribution, ThrottledReplicas
from tests.unit.operator.fake_kafka import FakeKafkaAdmin
from tests.unit.operator.fake_store import FakeObjectStore, MemoryLedgerStore
from tests.unit.operator.reassignment_env import NS, Clock, reassignment

WAIT_S = 10.0
READS = ("describe_cluster", "list_partition_reassignments", "describe_topics")


def _kafka(topics: int = 3) -> FakeKafkaAdmin:
    kafka = FakeKafkaAdmin(brokers={0: None, 1: None, 2: None})
    for i in range(topics):
        kafka.create_topic(f"t{i}", {0: [0, 1]})
    return kafka


def _reads(kafka: FakeKafkaAdmin) -> int:
    return sum(c == "describe_topics" for c, _ in kafka.calls)


def test_objects_asking_within_the_interval_share_one_read() -> None:
    kafka, clock = _kafka(), Clock()
    reader = SharedClusterReader(kafka, 1.0, clock=clock)
    first = reader.read(["t0"], replica_sizes=True)
    assert [c for c, _ in kafka.calls] == [*READS, "describe_log_dirs"]
    assert set(first.view.topics) == {"t0"} and first.replicas
    reader.read(["t1"], replica_sizes=True)  # not covered yet: read again, for both topics
    assert _reads(kafka) == 2 and kafka.calls[-2][1] == ["t0", "t1"]
    for topic in ("t0", "t1", "t0"):
        snapshot = reader.read([topic], replica_sizes=True)
        assert set(snapshot.view.topics) == {topic}
        assert {k[1] for k in snapshot.replicas} == {topic}
    assert _reads(kafka) == 2
    clock.advance(1.0)  # as old as max_age: read again, still for every recent interest
    reader.read(["t2"])
    assert _reads(kafka) == 3 and kafka.calls[-2][1] == ["t0", "t1", "t2"]


def test_invalidate_makes_the_next_step_read_its_own_submission() -> None:
    kafka, clock = _kafka(), Clock()
    reader = SharedClusterReader(kafka, 60.0, clock=clock)
    assert reader.read(["t0"]).view.reassigning == {}
    kafka.alter_partition_reassignments({TopicPartition("t0", 0): [2, 1]})
    assert reader.read(["t0"]).view.reassigning == {}  # shared: stale by design
    reader.invalidate()
    assert list(reader.read(["t0"]).view.reassigning) == [TopicPartition("t0", 0)]


def test_snapshots_do_not_share_mutable_state() -> None:
    reader = SharedClusterReader(_kafka(), 60.0, clock=Clock())
    reader.read(["t0"]).view.reassigning[TopicPartition("x", 0)] = "someone"
    assert reader.read(["t0"]).view.reassigning == {}


class _BlockingKafka(FakeKafkaAdmin):
    """DescribeLogDirs blocks until released."""

    def __init__(self) -> None:
        super().__init__(brokers={0: None, 1: None, 2: None})
        self.blocked = threading.Event()
        self.release = threading.Event()

    def describe_log_dirs(
        self, brokers: Collection[int] | None = None, topics: Collection[str] | None = None
    ) -> dict[ReplicaKey, ReplicaDirInfo]:
        self.blocked.set()
        assert self.release.wait(WAIT_S)
        return super().describe_log_dirs(brokers, topics)


def test_a_step_waits_for_the_read_in_flight_that_covers_it_and_shares_it() -> None:
    kafka = _BlockingKafka()
    kafka.create_topic("t0", {0: [0, 1]})
    reader = SharedClusterReader(kafka, 60.0, clock=Clock())
    got: list[object] = []
    threads = [
        threading.Thread(target=lambda: got.append(reader.read(["t0"], replica_sizes=True)))
        for _ in range(5)
    ]
    threads[0].start()
    assert kafka.blocked.wait(WAIT_S)
    for thread in threads[1:]:
        thread.start()
    kafka.release.set()
    for thread in threads:
        thread.join(WAIT_S)
    assert len(got) == 5 and _reads(kafka) == 1


def test_reassignment_index_lists_once_per_interval_and_writes_through() -> None:
    store, clock = FakeObjectStore(), Clock()
    lists: list[int] = []
    listing = store.list
    store.list = lambda kind: (lists.append(1), listing(kind))[1]  # type: ignore[method-assign]
    store.apply(reassignment("a", [("t0", 0, [2, 1])]))
    owners = ReassignmentIndex(store, 1.0, clock=clock)
    assert owners.owners(exclude="x") == {}
    assert owners.owners(exclude="x") == {} and len(lists) == 1
    written = store.get(PARTITION_REASSIGNMENT, NS, "a")
    assert written is not None
    written["status"] = {
        "phase": "Moving",
        "partitions": [
            {"topic": "t0", "partition": 0, "state": "Moving", "targetReplicas": [2, 1]}
        ],
    }
    owners.written(written)  # this operator wrote it: seen without a list
    assert owners.owners(exclude="x") == {TopicPartition("t0", 0): f"{NS}/a"}
    assert owners.owners(exclude=f"{NS}/a") == {}
    assert len(lists) == 1
    owners.forget(f"{NS}/a")
    assert owners.owners(exclude="x") == {}
    clock.advance(1.0)
    owners.owners(exclude="x")
    assert len(lists) == 2


def test_many_objects_accepted_at_once_cost_one_cluster_read_per_interval() -> None:
    kafka, store, clock = _kafka(topics=20), FakeObjectStore(), Clock()
    for i in range(20):
        store.apply(reassignment(f"m{i}", [(f"t{i}", 0, [2, 1])]))
    writer = ThrottleWriter(kafka, store, MemoryLedgerStore(), clock=clock)
    reconciler = ReassignmentReconciler(
        kafka,
        store,
        writer,
        clock=clock,
        reader=SharedClusterReader(kafka, 60.0, clock=clock),
        owners=ReassignmentIndex(store, 60.0, clock=clock),
    )
    for _ in range(2):  # accept (write-ahead, throttles), then submit
        for i in range(20):
            assert reconciler.reconcile(NS, f"m{i}") == "Moving"
    assert set(kafka.list_partition_reassignments()) == {
        TopicPartition(f"t{i}", 0) for i in range(20)
    }
    before = len(kafka.calls)
    for i in range(20):  # a poll round while they move: one read for all of them
        assert reconciler.reconcile(NS, f"m{i}") == "Moving"
    calls = [c for c, _ in kafka.calls[before:]]
    assert calls.count("describe_topics") <= 1
    assert calls.count("list_partition_reassignments") <= 1
    assert calls.count("describe_log_dirs") <= 1
    assert "describe_configs" not in calls  # the throttles were checked less than 30 s ago


class _SlowConfigs(FakeKafkaAdmin):
    """DescribeConfigs blocks until released (a slow throttle sync)."""

    def __init__(self) -> None:
        super().__init__(brokers={0: None, 1: None, 2: None})
        self.blocked = threading.Event()
        self.release = threading.Event()

    def describe_configs(
        self,
        brokers: Collection[int] = (),
        topics: Collection[str] = (),
        keys: Collection[str] | None = None,
    ) -> dict[ConfigResource, dict[str, str]]:
        self.blocked.set()
        assert self.release.wait(WAIT_S)
        return super().describe_configs(brokers, topics, keys)


def test_syncs_asked_for_during_a_sync_are_merged_into_the_next() -> None:
    kafka = _SlowConfigs()
    kafka.create_topic("t0", {0: [0, 1]})
    writer = ThrottleWriter(kafka, FakeObjectStore(), MemoryLedgerStore(), clock=Clock())
    rates = {b: {"leader.replication.throttled.rate": "1000"} for b in (0, 1, 2)}
    results: dict[str, object] = {}

    def sync(source: str, contribution: Contribution | None) -> None:
        results[source] = writer.sync({source: contribution})

    first = threading.Thread(target=sync, args=("s0", Contribution("s0")))
    first.start()
    assert kafka.blocked.wait(WAIT_S)
    others = [
        threading.Thread(target=sync, args=(f"s{i}", Contribution(f"s{i}", broker_rates=rates)))
        for i in range(1, 6)
    ]
    for thread in others:
        thread.start()
    while writer._open is None or len(writer._open.overrides) < 5:  # all joined the batch
        threading.Event().wait(0.01)
    kafka.release.set()
    for thread in [first, *others]:
        thread.join(WAIT_S)
    syncs = [c for c, _ in kafka.calls if c == "describe_configs"]
    assert len(syncs) == 2
    merged = results["s1"]
    assert all(results[f"s{i}"] is merged for i in range(1, 6))
    assert set(merged.contributions) == {f"s{i}" for i in range(1, 6)}  # type: ignore[attr-defined]


def test_a_recent_or_stale_sync_is_reused_without_waiting_for_one_in_progress() -> None:
    kafka = _SlowConfigs()
    kafka.release.set()
    clock = Clock()
    writer = ThrottleWriter(kafka, FakeObjectStore(), MemoryLedgerStore(), clock=clock)
    done = writer.sync({})
    kafka.release.clear()
    kafka.blocked.clear()
    slow = threading.Thread(target=lambda: writer.sync({"s": Contribution("s")}))
    slow.start()
    assert kafka.blocked.wait(WAIT_S)
    assert writer.sync(max_age_s=30.0) is done
    clock.advance(60.0)  # stale, but a sync is running: no need to wait for it
    assert writer.sync(max_age_s=30.0) is done
    kafka.release.set()
    slow.join(WAIT_S)
    assert writer.sync(max_age_s=30.0) is not done


def test_the_pool_counts_requests_per_api_and_broker() -> None:
    metrics = OperatorMetrics()
    kafka = _kafka()
    pool = KafkaAdminPool(lambda: kafka, 2, metrics.admin_observer("default"))
    pool.describe_topics(["t0"])
    pool.describe_log_dirs([0, 1, 2], ["t0"])
    pool.describe_configs([0, 1], ["t0"])
    pool.incremental_alter_configs({ConfigResource.broker(0): {"a": "1"}})

    def count(api: str) -> float | None:
        return metrics.registry.get_sample_value(
            "kpo_operator_kafka_admin_requests_total", {"cluster": "default", "api": api}
        )

    assert count("Metadata") == 1
    assert count("DescribeLogDirs") == 3
    assert count("DescribeConfigs") == 3
    assert count("IncrementalAlterConfigs") == 1
    assert metrics.registry.get_sample_value("process_resident_memory_bytes") is not None


def test_kube_requests_are_counted_by_verb_and_resource() -> None:
    metrics = OperatorMetrics()

    class Rest:
        def request(self, method: str, url: str, **_: object) -> str:
            return f"{method} {url}"

    class Client:
        rest_client = Rest()

    rest = metrics.instrument_kube_client(Client()).rest_client
    base = "https://127.0.0.1:6443/apis/kpo.dev/v1alpha1/namespaces/ns/partitionreassignments"
    assert rest.request("PATCH", f"{base}/a/status") == f"PATCH {base}/a/status"
    rest.request("GET", base)
    rest.request("POST", "https://h/api/v1/namespaces/ns/events")
    sample = metrics.registry.get_sample_value
    name = "kpo_operator_kube_api_requests_total"
    assert sample(name, {"verb": "PATCH", "resource": "partitionreassignments/status"}) == 1
    assert sample(name, {"verb": "GET", "resource": "partitionreassignments"}) == 1
    assert sample(name, {"verb": "POST", "resource": "events"}) == 1


def test_kube_resource_of_urls() -> None:
    assert kube_resource("https://h/api/v1/namespaces/ns/configmaps/led") == "configmaps"
    assert kube_resource("https://h/apis/kpo.dev/v1alpha1/kafkaclusters") == "kafkaclusters"
    assert kube_resource("https://h/api/v1/namespaces") == "namespaces"
    assert kube_resource("https://h/version") == "/version"


def test_a_sync_holds_up_only_the_objects_whose_throttles_it_wrote() -> None:
    kafka = FakeKafkaAdmin(brokers={0: None, 1: None, 2: None})
    kafka.create_topic("t", {0: [0, 1], 1: [0, 1]})
    writer = ThrottleWriter(kafka, FakeObjectStore(), MemoryLedgerStore(), clock=Clock())
    follower = "follower.replication.throttled.replicas"

    def wanting(source: str, partition: int) -> Contribution:
        pairs = ThrottledReplicas(replicas=frozenset({(partition, 2)}))
        return Contribution(source, topic_replicas={"t": {follower: pairs}})

    first = writer.sync({"a": wanting("a", 0)})
    assert first.changed_for("a")
    # b's pair is new, a's was already there: only b waits for the brokers.
    second = writer.sync({"a": wanting("a", 0), "b": wanting("b", 1)})
    assert second.changed_for("b") and not second.changed_for("a")
    assert not second.changed_for("nobody")


def test_while_a_newer_read_is_in_flight_steps_share_the_last_one_up_to_serve_stale() -> None:
    kafka, clock = _BlockingKafka(), Clock()
    kafka.create_topic("t0", {0: [0, 1]})
    kafka.release.set()
    reader = SharedClusterReader(kafka, 1.0, clock=clock, serve_stale_s=4.0)
    reader.read(["t0"], replica_sizes=True)
    kafka.release.clear()
    kafka.blocked.clear()
    clock.advance(1.5)  # too old to share outright: the next caller reads
    refresh = threading.Thread(target=lambda: reader.read(["t0"], replica_sizes=True))
    refresh.start()
    assert kafka.blocked.wait(WAIT_S)
    reader.read(["t0"], replica_sizes=True)  # served the last read: did not wait
    assert _reads(kafka) == 2
    clock.advance(3.0)  # older than serve_stale_s: wait for the read in flight
    waiting = threading.Thread(target=lambda: reader.read(["t0"], replica_sizes=True))
    waiting.start()
    waiting.join(0.3)
    assert waiting.is_alive()
    kafka.release.set()
    for thread in (refresh, waiting):
        thread.join(WAIT_S)
    assert _reads(kafka) == 2


def test_after_invalidate_a_step_waits_for_the_read_in_flight() -> None:
    kafka, clock = _BlockingKafka(), Clock()
    kafka.create_topic("t0", {0: [0, 1]})
    kafka.release.set()
    reader = SharedClusterReader(kafka, 1.0, clock=clock)
    reader.read(["t0"], replica_sizes=True)
    kafka.release.clear()
    kafka.blocked.clear()
    reader.invalidate()  # an own submission: the last read must not be shared any more
    refresh = threading.Thread(target=lambda: reader.read(["t0"], replica_sizes=True))
    refresh.start()
    assert kafka.blocked.wait(WAIT_S)
    waiting = threading.Thread(target=lambda: reader.read(["t0"], replica_sizes=True))
    waiting.start()
    waiting.join(0.3)
    assert waiting.is_alive()
    kafka.release.set()
    for thread in (refresh, waiting):
        thread.join(WAIT_S)


def test_reassignment_index_serves_its_entries_while_another_step_lists() -> None:
    store, clock = FakeObjectStore(), Clock()
    listing, release = threading.Event(), threading.Event()
    lists = store.list

    def slow_list(kind: object) -> list[dict[str, object]]:
        listing.set()
        assert release.wait(WAIT_S)
        return lists(kind)  # type: ignore[arg-type]

    owners = ReassignmentIndex(store, 1.0, clock=clock, serve_stale_s=4.0)
    owners.owners(exclude="x")
    store.list = slow_list  # type: ignore[method-assign,assignment]
    clock.advance(1.5)
    first = threading.Thread(target=lambda: owners.owners(exclude="x"))
    first.start()
    assert listing.wait(WAIT_S)
    assert owners.owners(exclude="x") == {}  # served without waiting for the list
    clock.advance(3.0)  # too old now: wait for the list
    second = threading.Thread(target=lambda: owners.owners(exclude="x"))
    second.start()
    second.join(0.3)
    assert second.is_alive()
    release.set()
    for thread in (first, second):
        thread.join(WAIT_S)


def test_a_step_uses_the_callers_copy_when_it_is_the_latest_version() -> None:
    kafka, store, clock = _kafka(), FakeObjectStore(), Clock()
    store.apply(reassignment("m", [("t0", 0, [2, 1])], throttle={"replicationRate": 1000}))
    reconciler = ReassignmentReconciler(
        kafka, store, ThrottleWriter(kafka, store, MemoryLedgerStore(), clock=clock), clock=clock
    )
    assert reconciler.reconcile(NS, "m") == "Moving"
    latest = store.get(PARTITION_REASSIGNMENT, NS, "m")
    assert latest is not None
    stale = copy.deepcopy(latest)  # kopf's copy: the step's status write comes after it
    assert reconciler.reconcile(NS, "m", known=latest) == "Moving"  # submits
    assert store.known_used == 1
    # The step's own copy now carries what it wrote and the version the patch answered.
    assert latest == store.get(PARTITION_REASSIGNMENT, NS, "m")
    clock.advance(2.0)
    assert reconciler.reconcile(NS, "m", known=stale) == "Moving"
    assert store.known_used == 1
    assert set(kafka.list_partition_reassignments()) == {TopicPartition("t0", 0)}


def test_replica_sizes_read_through_the_snapshot_without_a_copy() -> None:
    reader = SharedClusterReader(_kafka(), 60.0, clock=Clock())
    snapshot = reader.read(["t0"], replica_sizes=True)
    sizes = snapshot.sizes
    assert dict(sizes) == {k: v.size_bytes for k, v in snapshot.replicas.items()}
    assert len(sizes) == len(snapshot.replicas) > 0
    assert sizes.get((9, "t0", 0)) is None


def test_a_read_covers_every_topic_asked_for_within_serve_stale() -> None:
    kafka, clock = _kafka(), Clock()
    reader = SharedClusterReader(kafka, 1.0, clock=clock, serve_stale_s=30.0)
    reader.read(["t0"])
    clock.advance(10.0)  # slower than the read interval, as steps come under load
    reader.read(["t1"])
    assert kafka.calls[-1][1] == ["t0", "t1"]
    clock.advance(25.0)  # t0 last asked for 35 s ago: no longer of interest
    reader.read(["t2"])
    assert kafka.calls[-1][1] == ["t1", "t2"]


def test_after_invalidate_one_read_covers_every_interest_despite_an_older_read_in_flight() -> None:
    kafka, clock = _BlockingKafka(), Clock()
    for i in range(3):
        kafka.create_topic(f"t{i}", {0: [0, 1]})
    kafka.release.set()
    reader = SharedClusterReader(kafka, 1.0, clock=clock)
    for i in range(3):
        reader.read([f"t{i}"], replica_sizes=True)
    kafka.release.clear()
    kafka.blocked.clear()
    clock.advance(1.5)
    old = threading.Thread(target=lambda: reader.read(["t0"], replica_sizes=True))
    old.start()
    assert kafka.blocked.wait(WAIT_S)  # a read of the old generation is in flight
    reader.invalidate()
    kafka.blocked.clear()
    new = threading.Thread(target=lambda: reader.read(["t1"], replica_sizes=True))
    new.start()
    assert kafka.blocked.wait(WAIT_S)
    described = [a for c, a in kafka.calls if c == "describe_topics"]
    assert described[-1] == ["t0", "t1", "t2"]  # the union, not only t1
    kafka.release.set()
    for thread in (old, new):
        thread.join(WAIT_S)


def test_plain_copy_of_kopfs_live_body() -> None:
    import kopf

    from kpo_operator.store import plain_copy

    raw = {"metadata": {"name": "m", "resourceVersion": "7"}, "status": {"phase": "Moving"}}
    body = kopf.Body(raw)
    copied = plain_copy(body)
    assert copied == raw and copied is not raw
    assert copied["metadata"] is not raw["metadata"]  # the caller may replace its keys
    body._replace_with({"metadata": {"name": "m", "resourceVersion": "8"}})
    assert plain_copy(body) == {"metadata": {"name": "m", "resourceVersion": "8"}}
    assert plain_copy(kopf.Body({"metadata": {"name": "m"}})) is None  # no version


def _named(name: str) -> dict[str, Any]:
    """An object as a step read it (only what the index keys it by)."""
    return {"kind": "PartitionReassignment", "metadata": {"namespace": NS, "name": name}}


def test_a_step_looks_up_only_its_own_partitions_owners() -> None:
    # The owner index kept both ways: a step's cost grows with its partitions, not with
    # every object's (200 objects of 2,000 partitions).
    store, clock = FakeObjectStore(), Clock()
    owners = ReassignmentIndex(store, 30.0, clock=clock)
    a, b = TopicPartition("t0", 0), TopicPartition("t1", 0)
    owners.seen(_named("a"), frozenset({a}))
    owners.seen(_named("b"), frozenset({b}))
    assert owners.owners_of([a, b, TopicPartition("t2", 0)], exclude="x") == {
        a: f"{NS}/a",
        b: f"{NS}/b",
    }
    assert owners.owners_of([a, b], exclude=f"{NS}/a") == {b: f"{NS}/b"}
    owners.seen(_named("a"), frozenset())  # a's partition left flight
    assert owners.owners_of([a], exclude="x") == {}
    owners.forget(f"{NS}/b")
    assert owners.owners_of([b], exclude="x") == {}
    assert owners.owners(exclude="x") == {}


def test_a_shared_snapshot_holds_only_its_topics_in_flight_and_replicas() -> None:
    kafka, clock = _kafka(), Clock()
    kafka.alter_partition_reassignments(
        {TopicPartition("t0", 0): [2, 1], TopicPartition("t1", 0): [2, 1]}
    )
    reader = SharedClusterReader(kafka, 60.0, clock=clock)
    reader.read(["t0", "t1"], replica_sizes=True)
    snapshot = reader.read(["t0"], replica_sizes=True)
    assert list(snapshot.view.reassigning) == [TopicPartition("t0", 0)]
    assert {k[1] for k in snapshot.replicas} == {"t0"}
    assert snapshot.view.partition("t0", 0) is not None
    assert snapshot.view.partition("t0", 0).adding == (2,)  # type: ignore[union-attr]
    again = reader.read(["t0"], replica_sizes=True)
    assert again.view.topics["t0"] is snapshot.view.topics["t0"]  # built once per read


def test_metadata_of_every_topic_is_shared_within_the_interval() -> None:
    # Each acceptance asks which brokers it drains (KIP-1066 cordons): one Metadata of
    # every topic per interval for all of them, not one per acceptance.
    kafka, clock = _kafka(), Clock()
    reader = SharedClusterReader(kafka, 1.0, clock=clock)
    first = reader.every_topic()
    assert set(first.topics) == {"t0", "t1", "t2"} and first.counts == {0: 3, 1: 3}
    assert reader.every_topic() is first
    assert [a for c, a in kafka.calls if c == "describe_topics"] == [None]
    clock.advance(1.0)
    assert reader.every_topic() is not first
    reader.invalidate()  # after the operator's own submission: read again
    reader.every_topic()
    assert sum(c == "describe_topics" for c, _ in kafka.calls) == 3


def test_callers_waiting_for_a_slow_metadata_read_share_it() -> None:
    # Under load the read takes longer than the interval: the callers that waited for it
    # take it instead of each reading again, one after the other.
    kafka, clock = _kafka(), Clock()
    describe = kafka.describe_topics
    started, release = threading.Event(), threading.Event()

    def slow(topics: Collection[str] | None = None) -> Any:
        started.set()
        assert release.wait(WAIT_S)
        clock.advance(5.0)  # the read took five intervals
        return describe(topics)

    kafka.describe_topics = slow  # type: ignore[method-assign]
    reader = SharedClusterReader(kafka, 1.0, clock=clock)
    got: list[object] = []
    first = threading.Thread(target=lambda: got.append(reader.every_topic()))
    first.start()
    assert started.wait(WAIT_S)
    others = [threading.Thread(target=lambda: got.append(reader.every_topic())) for _ in range(3)]
    for thread in others:
        thread.start()
    release.set()
    for thread in [first, *others]:
        thread.join(WAIT_S)
    assert len(got) == 4 and all(g is got[0] for g in got)


class _GatedKafka(FakeKafkaAdmin):
    """Each Metadata read blocks until the gate of its topics opens (reads finish in any order)."""

    def __init__(self, topics: int) -> None:
        super().__init__(brokers={0: None, 1: None, 2: None})
        for i in range(topics):
            self.create_topic(f"t{i}", {0: [0, 1]})
        self.gated = False
        self.entered: dict[tuple[str, ...], threading.Event] = {}
        self.gates: dict[tuple[str, ...], threading.Event] = {}
        self._lock = threading.Lock()

    def _gate(self, topics: tuple[str, ...]) -> tuple[threading.Event, threading.Event]:
        with self._lock:
            return (
                self.entered.setdefault(topics, threading.Event()),
                self.gates.setdefault(topics, threading.Event()),
            )

    def wait_entered(self, *topics: str) -> None:
        assert self._gate(topics)[0].wait(WAIT_S), f"no read of {topics}"

    def open(self, *topics: str) -> None:
        self._gate(topics)[1].set()

    def describe_topics(self, topics: Collection[str] | None = None) -> Any:
        if self.gated and topics is not None:
            entered, gate = self._gate(tuple(topics))
            entered.set()
            assert gate.wait(WAIT_S), f"read of {tuple(topics)} never let through"
        return super().describe_topics(topics)


def _reading(reader: SharedClusterReader, topic: str) -> threading.Thread:
    thread = threading.Thread(target=lambda: reader.read([topic], replica_sizes=True))
    thread.start()
    return thread


def test_overlapping_reads_of_single_steps_do_not_stop_the_shared_read() -> None:
    # Under load reads overlap. A step whose topics were new read them alone (while the
    # shared read was in flight); a later step then found that read in flight and read its
    # own topics too, and so on: one read per step, never the shared one again.
    kafka, clock = _GatedKafka(topics=4), Clock()
    reader = SharedClusterReader(kafka, 1.0, clock=clock, serve_stale_s=30.0)
    for i in range(3):
        reader.read([f"t{i}"], replica_sizes=True)
    kafka.gated = True
    clock.advance(1.5)
    wide = _reading(reader, "t0")  # too old to share: one read of every interest
    kafka.wait_entered("t0", "t1", "t2")
    new = _reading(reader, "t3")  # not covered by the read in flight: reads t3 alone
    kafka.wait_entered("t3")
    kafka.open("t0", "t1", "t2")
    wide.join(WAIT_S)
    clock.advance(1.5)  # the shared read is too old again; only t3's read is in flight
    again = _reading(reader, "t1")
    kafka.wait_entered("t0", "t1", "t2", "t3")  # the shared read again (it was t1 alone)
    mark = len(kafka.calls)
    reader.read(["t2"], replica_sizes=True)  # the last is served while that read is made
    assert "describe_topics" not in [c for c, _ in kafka.calls[mark:]]
    kafka.open("t3")
    new.join(WAIT_S)
    mark = len(kafka.calls)
    # t3's read finished after the wider shared read: it does not replace it
    reader.read(["t0"], replica_sizes=True)
    assert "describe_topics" not in [c for c, _ in kafka.calls[mark:]]
    kafka.open("t0", "t1", "t2", "t3")
    again.join(WAIT_S)
    assert not any(t.is_alive() for t in (wide, new, again))
    reads = [tuple(a) for c, a in kafka.calls if c == "describe_topics"]  # type: ignore[arg-type]
    assert reads[-3:] == [("t0", "t1", "t2"), ("t3",), ("t0", "t1", "t2", "t3")]


def test_a_step_left_out_of_the_read_in_flight_is_served_the_last_read() -> None:
    # A wide read in flight that does not cover a step's topics (asked for too long ago
    # to be of interest when it began) no longer makes the step read alone when the last
    # read, younger than serve_stale_s, covers them.
    kafka, clock = _GatedKafka(topics=2), Clock()
    reader = SharedClusterReader(kafka, 1.0, clock=clock, serve_stale_s=30.0)
    reader.read(["t0"], replica_sizes=True)
    clock.advance(25.0)
    reader.read(["t1"], replica_sizes=True)  # last: t0 (still of interest) and t1
    clock.advance(6.0)  # t0 asked for 31 s ago: no longer of interest
    kafka.gated = True
    wide = _reading(reader, "t1")
    kafka.wait_entered("t1")
    mark = len(kafka.calls)
    snapshot = reader.read(["t0"], replica_sizes=True)  # the last read (6 s old) covers t0
    assert set(snapshot.view.topics) == {"t0"}
    assert ("t0",) not in kafka.entered  # served at once, not read alone
    assert "describe_topics" not in [c for c, _ in kafka.calls[mark:]]
    kafka.open("t1")
    wide.join(WAIT_S)
    assert not wide.is_alive()
