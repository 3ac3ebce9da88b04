"""CPU of one reconcile step of a Moving PartitionReassignment, on in-memory fakes.

The operator at scale: how much CPU does ``ReassignmentReconciler._step`` cost
for one Moving object of ``partitions`` partitions whose partitions only progressed
(bytes), and what does writing its status cost? Run from the repository root (it uses
the unit tests' in-memory Kafka and API server, :mod:`tests.unit.operator.fake_kafka` and
:mod:`tests.unit.operator.fake_store`)::

    .venv/bin/python -m kpo_bench.step_cost --partitions 2000 --steps 8 [--profile out.prof]

The cluster has six brokers; one topic of ``partitions`` partitions on brokers
``[p % 3, p % 3 + 1]`` is moved to ``[p % 3 + 3, p % 3 + 1]`` at a throttle of 1 MB/s (two
steps: throttles, then AlterPartitionReassignments). Before each measured step every
adding replica grows (so every entry's ``bytesDone`` changes), the clock advances by one
poll interval (2 s) and the cluster is read once into the reconciler's
:class:`~kpo_operator.cluster_reader.SharedClusterReader` (the Admin API's cost is not the
step's: the fake answers in memory). The step is then timed as the operator runs it
(:func:`time.process_time`, CPU seconds of this process).

Printed, per step (milliseconds of CPU): the step itself, with the fake store's status
PATCH replaced by one that only counts (the fake's deep copies are not the API server's
cost); and the client side of the PATCH the step wrote, as ``KubeObjectStore`` sends it
(the ``kubernetes`` client's ``sanitize_for_serialization`` and ``json.dumps`` of the
body) plus the ``json.loads`` of an answer the size of the object (the API server
returns the whole object, and kopf decodes it once more from its watch). Nothing is
compared with a target. ``--profile`` writes a :mod:`cProfile` of the measured steps.

``--sync-objects N`` measures :meth:`~kpo_operator.throttle_writer.ThrottleWriter.sync`
instead (:func:`measure_sync`): ``N`` Moving objects of ``--partitions`` partitions each,
laid out as the operator-scale bench does (topics of 100 partitions on brokers [0, 1],
each partition moved to [2, 1] at one shared throttle), plus ``--other-topics`` topics
no object moves. Each measured sync is the one a step asks for before submitting (its
own contribution as override), after every object's status was written once more (a
new ``resourceVersion`` and totals, as each step writes them, through the cluster's
:class:`~kpo_operator.reassignment_index.ReassignmentIndex` the writer takes them from), a poll
interval (2 s) apart. Printed besides: the lists the syncs asked the API server for and
the bytes of their answers, per sync (with the index, the PartitionReassignments are
listed once per :data:`~kpo_operator.cluster_registry.OWNERS_RELIST_S`, not per sync).
"""

from __future__ import annotations

import argparse
import cProfile
import importlib
import inspect
import json
import statistics
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kpo_operator.cluster_reader import SharedClusterReader
from kpo_operator.cluster_registry import OWNERS_RELIST_S
from kpo_operator.reassignment import ReassignmentReconciler
from kpo_operator.resources import PARTITION_REASSIGNMENT, ResourceKind
from kpo_operator.throttle_writer import ThrottleWriter

NAMESPACE = "ns"
NAME = "big"
TOPIC = "big"
POLL_S = 2.0
BYTES_PER_STEP = 100_000
"""Bytes each adding replica gains between two steps."""

# The cluster's index of PartitionReassignments (an older operator, through PYTHONPATH,
# has only the in-flight owner index of the steps, not shared with the throttle writer).
try:
    Index: Any = importlib.import_module("kpo_operator.reassignment_index").ReassignmentIndex
except ImportError:
    Index = importlib.import_module("kpo_operator.owner_index").InFlightOwners


@dataclass
class _CountingPatches:
    """Stands in for the fake store's ``patch_status``: records the body, merges it (top level).

    The fake's own merge deep-copies the status; the API server's cost is not measured here.
    """

    inner: Any
    bodies: list[Mapping[str, Any]] = field(default_factory=list)

    def __call__(
        self, kind: ResourceKind, namespace: str, name: str, status: Mapping[str, Any]
    ) -> None:
        self.bodies.append(status)
        stored = self.inner.objects[(kind.plural, namespace, name)]
        merged = {**stored.get("status", {}), **status}  # a merge patch, top level
        stored["status"] = {k: v for k, v in merged.items() if v is not None}
        meta = stored["metadata"]
        meta["resourceVersion"] = str(int(meta["resourceVersion"]) + 1)


@dataclass(frozen=True)
class StepCost:
    """CPU milliseconds of the measured steps (one value per step)."""

    step_ms: list[float]
    patch_ms: list[float]
    patch_bytes: list[int]

    def summary(self) -> str:
        """One line per figure: min, median and max over the steps (min: least disturbed)."""

        def line(name: str, values: list[float] | list[int], unit: str) -> str:
            if not values:
                return f"{name}: none written"
            low, mid, high = min(values), statistics.median(values), max(values)
            return f"{name}: min {low:.1f} / median {mid:.1f} / max {high:.1f} {unit}"

        return "\n".join(
            [
                line("step CPU", self.step_ms, "ms"),
                line("status PATCH client side + answer decode", self.patch_ms, "ms"),
                line("status PATCH body", self.patch_bytes, "bytes"),
                f"PATCHes written: {len(self.patch_bytes)} of {len(self.step_ms)} steps",
            ]
        )


def measure(
    partitions: int, steps: int, profile: str | None = None, interval_s: float = 30.0
) -> StepCost:
    """Run ``steps`` measured steps of one Moving object of ``partitions`` partitions.

    ``interval_s`` is the operator's ``partition_status_interval_s`` (0: the entries are
    written at every step, as before it existed).

    Raises:
        RuntimeError: The object did not reach Moving with every partition submitted.
    """
    fake_kafka = importlib.import_module("tests.unit.operator.fake_kafka")
    fake_store = importlib.import_module("tests.unit.operator.fake_store")
    env = importlib.import_module("tests.unit.operator.reassignment_env")
    kafka = fake_kafka.FakeKafkaAdmin(brokers=dict.fromkeys(range(6)))
    kafka.create_topic(TOPIC, {p: [p % 3, p % 3 + 1] for p in range(partitions)})
    for p in range(partitions):
        kafka.set_size(p % 3, TOPIC, p, 10 * BYTES_PER_STEP * steps)
    store = fake_store.FakeObjectStore()
    clock = env.Clock()
    reader = SharedClusterReader(kafka, 1e9, clock=clock)
    owners = Index(store, OWNERS_RELIST_S, clock=clock)
    shared = {"index": owners} if "index" in inspect.signature(ThrottleWriter).parameters else {}
    writer = ThrottleWriter(kafka, store, fake_store.MemoryLedgerStore(), clock=clock, **shared)
    # An older operator (``--interval 0`` through PYTHONPATH) has no such argument.
    paced: dict[str, Any] = {"partition_status_interval_s": interval_s} if interval_s > 0 else {}
    reconciler = ReassignmentReconciler(
        kafka, store, writer, clock=clock, now=clock.now, reader=reader, owners=owners, **paced
    )
    targets = [(TOPIC, p, [p % 3 + 3, p % 3 + 1]) for p in range(partitions)]
    store.apply(env.reassignment(NAME, targets, throttle={"replicationRate": 1_000_000}))
    for _ in range(2):
        reconciler.reconcile(NAMESPACE, NAME)
        clock.advance(POLL_S)
    status = store.status_of(PARTITION_REASSIGNMENT, NAMESPACE, NAME)
    states = {e["state"] for e in status.get("partitions", [])}
    if status.get("phase") != "Moving" or states != {"Moving"}:
        raise RuntimeError(f"not moving after two steps: {status.get('message')}")
    patches = _CountingPatches(store)
    store.patch_status = patches
    profiler = cProfile.Profile() if profile else None
    step_ms: list[float] = []
    for i in range(steps):
        for p in range(partitions):
            kafka.set_size(p % 3 + 3, TOPIC, p, (i + 1) * BYTES_PER_STEP)
        clock.advance(POLL_S)
        reader.invalidate()
        reader.read([TOPIC], replica_sizes=True)
        obj = store.get(PARTITION_REASSIGNMENT, NAMESPACE, NAME)
        started = time.process_time()
        if profiler is not None:
            profiler.enable()
        reconciler._step(obj)
        if profiler is not None:
            profiler.disable()
        step_ms.append((time.process_time() - started) * 1000)
    if profiler is not None and profile:
        profiler.dump_stats(profile)
    patch_ms, patch_bytes = _patch_costs(patches.bodies, store, kafka)
    return StepCost(step_ms, patch_ms, patch_bytes)


def _patch_costs(
    bodies: list[Mapping[str, Any]], store: Any, kafka: Any
) -> tuple[list[float], list[int]]:
    """CPU ms of the client side of each PATCH and the decode of its answer; body bytes."""
    from kubernetes.client import ApiClient

    client = ApiClient()
    answer = json.dumps(store.objects[(PARTITION_REASSIGNMENT.plural, NAMESPACE, NAME)])
    costs: list[float] = []
    sizes: list[int] = []
    for body in bodies:
        started = time.process_time()
        text = json.dumps(client.sanitize_for_serialization({"status": body}))  # type: ignore[no-untyped-call]
        json.loads(answer)
        costs.append((time.process_time() - started) * 1000)
        sizes.append(len(text))
    return costs, sizes


@dataclass(frozen=True)
class SyncCost:
    """CPU milliseconds of the measured syncs and what each asked of Kafka (one value per sync).

    Attributes:
        sync_ms: The whole sync, without making and decoding its lists' answers.
        list_decode_ms: ``json.loads`` of a list answer of every object (what the
            ``kubernetes`` client pays for each list of PartitionReassignments; measured once).
        list_bytes: That answer's size.
        lists: Lists the measured syncs asked the API server for, by kind.
        listed_bytes: The bytes of those lists' answers, all kinds.
        calls: Admin API calls of one sync, by name (the last sync's).
        described_topics: Topics in the sync's DescribeConfigs (the last sync's).
    """

    sync_ms: list[float]
    list_decode_ms: float
    list_bytes: int
    calls: dict[str, int]
    described_topics: int
    lists: dict[str, int] = field(default_factory=dict)
    listed_bytes: int = 0

    def summary(self) -> str:
        """One line per figure: min / median / max over the syncs."""

        def line(name: str, values: list[float]) -> str:
            low, mid, high = min(values), statistics.median(values), max(values)
            return f"{name}: min {low:.1f} / median {mid:.1f} / max {high:.1f} ms"

        calls = ", ".join(f"{k} {v}" for k, v in sorted(self.calls.items()))
        syncs = len(self.sync_ms)
        lists = ", ".join(f"{k} {v / syncs:.2f}" for k, v in sorted(self.lists.items()))
        return "\n".join(
            [
                line("sync CPU", self.sync_ms),
                f"list answer decode (json.loads, every object): {self.list_decode_ms:.1f} ms"
                f" for {self.list_bytes} bytes",
                f"Admin calls per sync: {calls}; topics described: {self.described_topics}",
                f"API server lists per sync: {lists or 'none'};"
                f" listed bytes per sync: {self.listed_bytes / syncs:.0f}",
            ]
        )


def _scale_layout(objects: int, partitions: int) -> list[list[tuple[str, int]]]:
    """Return the operator-scale bench's layout: consecutive runs over topics of 100 partitions."""
    flat = [(f"scale-{i // 100}", i % 100) for i in range(objects * partitions)]
    return [flat[o * partitions : (o + 1) * partitions] for o in range(objects)]


def measure_sync(
    objects: int,
    partitions: int,
    syncs: int,
    other_topics: int = 0,
    profile: str | None = None,
) -> SyncCost:
    """Time ``syncs`` throttle syncs with ``objects`` Moving objects of ``partitions`` each.

    Every object is Moving with all its partitions in flight (its status written as
    the operator writes it, the cluster told with AlterPartitionReassignments), and the
    throttles are in place (one sync before the measured ones). Each measured sync
    overrides one object's contribution, as a step does before it submits.
    """
    from kpo_operator.throttles import reassignment_contribution

    fake_kafka = importlib.import_module("tests.unit.operator.fake_kafka")
    fake_store = importlib.import_module("tests.unit.operator.fake_store")
    env = importlib.import_module("tests.unit.operator.reassignment_env")
    # An older operator (through PYTHONPATH) has no ``reader`` argument: it reads per sync.
    signature = inspect.signature(ThrottleWriter)
    status_mod = importlib.import_module("kpo_operator.reassignment_status")
    kafka = fake_kafka.FakeKafkaAdmin(brokers=dict.fromkeys(range(3)))
    layout = _scale_layout(objects, partitions)
    sizes: dict[str, int] = {}
    for parts in layout:
        for topic, p in parts:
            sizes[topic] = max(sizes.get(topic, 0), p + 1)
    for topic, count in sizes.items():
        kafka.create_topic(topic, {p: [0, 1] for p in range(count)})
    for i in range(other_topics):
        kafka.create_topic(f"other-{i}", {0: [0, 1]})
    store = fake_store.FakeObjectStore()
    clock = env.Clock()
    reader = SharedClusterReader(kafka, POLL_S / 2, clock=clock)
    reading: dict[str, Any] = {"reader": reader} if "reader" in signature.parameters else {}
    # The index the steps share with it, listed once per OWNERS_RELIST_S (older: a list per sync).
    index = Index(store, OWNERS_RELIST_S, clock=clock) if "index" in signature.parameters else None
    if index is not None:
        reading["index"] = index
    writer = ThrottleWriter(kafka, store, fake_store.MemoryLedgerStore(), clock=clock, **reading)
    throttle = {"replicationRate": 1_000_000}
    sources: list[str] = []
    for o, parts in enumerate(layout):
        name = f"scale-{o}"
        store.apply(env.reassignment(name, [(t, p, [2, 1]) for t, p in parts], throttle=throttle))
        kafka.alter_partition_reassignments({(t, p): [2, 1] for t, p in parts})
        entries = [
            status_mod.PartitionStatus(
                t, p, "Moving", (0, 1), (2, 1), (2,), (0,), (0, 1), 0, 0, 1
            ).to_status()
            for t, p in parts
        ]
        status = {"phase": "Moving", "throttle": throttle, "partitions": entries}
        store.patch_status(PARTITION_REASSIGNMENT, NAMESPACE, name, status)
        sources.append(f"PartitionReassignment {NAMESPACE}/{name}")
    writer.sync()
    snapshot = writer.sync().snapshot
    assert snapshot is not None
    overrides = []
    for o in range(objects):
        status = store.status_of(PARTITION_REASSIGNMENT, NAMESPACE, f"scale-{o}")
        spec = status_mod.accepted_spec(status)
        overrides.append(reassignment_contribution(sources[o], spec, snapshot.view))
    listed = store.list(PARTITION_REASSIGNMENT)
    answer = json.dumps({"items": listed})
    started = time.process_time()
    json.loads(answer)
    decode_ms = (time.process_time() - started) * 1000
    lists: dict[str, int] = {}
    listed_bytes = [0]
    preparing_s = [0.0]

    def prepared(kind: ResourceKind) -> list[Any]:
        """Answer the list decoded anew, as a client does (its CPU is not the sync's)."""
        started = time.process_time()
        text = json.dumps({"items": inner_list(kind)})
        items: list[Any] = json.loads(text)["items"]
        lists[kind.kind] = lists.get(kind.kind, 0) + 1
        listed_bytes[0] += len(text)
        preparing_s[0] += time.process_time() - started
        return items

    inner_list = store.list
    store.list = prepared
    profiler = cProfile.Profile() if profile else None
    sync_ms: list[float] = []
    for i in range(syncs):
        for o in range(objects):  # every step writes its status (totals) once per poll
            stored = store.objects[(PARTITION_REASSIGNMENT.plural, NAMESPACE, f"scale-{o}")]
            stored["status"] = {**stored["status"], "totals": {"bytesDone": i}}
            meta = stored["metadata"]
            meta["resourceVersion"] = str(int(meta["resourceVersion"]) + 1)
            if index is not None:  # the step's write-through: its copy, the answer's version
                index.written({**stored, "metadata": dict(meta)}, frozenset())
        clock.advance(POLL_S)
        reader.read(sizes)  # the steps' shared read, as the operator keeps it (not timed)
        mark = len(kafka.calls)
        preparing_s[0] = 0.0
        started = time.process_time()
        if profiler is not None:
            profiler.enable()
        result = writer.sync({sources[i % objects]: overrides[i % objects]})
        if profiler is not None:
            profiler.disable()
        sync_ms.append((time.process_time() - started - preparing_s[0]) * 1000)
        if result.applied:
            raise RuntimeError(f"a steady-state sync wrote configs: {result.applied[:3]}")
    if profiler is not None and profile:
        profiler.dump_stats(profile)
    measured = dict(lists)
    calls: dict[str, int] = {}
    described = 0
    for call, argument in kafka.calls[mark:]:
        calls[call] = calls.get(call, 0) + 1
        if call == "describe_configs":
            described = len(argument[1])
    return SyncCost(sync_ms, decode_ms, len(answer), calls, described, measured, listed_bytes[0])


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments, measure, print the summary."""
    parser = argparse.ArgumentParser(prog="python -m kpo_bench.step_cost", description=__doc__)
    parser.add_argument("--partitions", type=int, default=2000, help="partitions of the object")
    parser.add_argument("--steps", type=int, default=8, help="measured steps")
    parser.add_argument("--profile", help="write a cProfile of the measured steps here")
    parser.add_argument(
        "--partition-status-interval",
        type=float,
        default=30.0,
        help="the operator's KPO_PARTITION_STATUS_INTERVAL_S, seconds (0: every step)",
    )
    parser.add_argument(
        "--sync-objects",
        type=int,
        default=0,
        help="measure the throttle writer's sync with this many Moving objects instead",
    )
    parser.add_argument("--other-topics", type=int, default=0, help="topics no object moves")
    args = parser.parse_args(argv)
    if args.sync_objects:
        synced = measure_sync(
            args.sync_objects, args.partitions, args.steps, args.other_topics, args.profile
        )
        print(
            f"throttle sync, {args.sync_objects} Moving objects of {args.partitions} partitions"
            f" (+{args.other_topics} other topics), {args.steps} syncs"
        )
        print(synced.summary())
        return 0
    cost = measure(args.partitions, args.steps, args.profile, args.partition_status_interval)
    print(f"one Moving object of {args.partitions} partitions, {args.steps} steps")
    print(cost.summary())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
