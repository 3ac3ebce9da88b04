"""CPU of one reconcile step of a Moving PartitionReassignment, on in-memory fakes.

Issue 17 (operator at scale): how much CPU does ``ReassignmentReconciler._step`` cost
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
"""

from __future__ import annotations

import argparse
import cProfile
import importlib
import json
import statistics
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kpo_operator.cluster_reader import SharedClusterReader
from kpo_operator.cluster_registry import OWNERS_RELIST_S
from kpo_operator.owner_index import InFlightOwners
from kpo_operator.reassignment import ReassignmentReconciler
from kpo_operator.resources import PARTITION_REASSIGNMENT, ResourceKind
from kpo_operator.throttle_writer import ThrottleWriter

NAMESPACE = "ns"
NAME = "big"
TOPIC = "big"
POLL_S = 2.0
BYTES_PER_STEP = 100_000
"""Bytes each adding replica gains between two steps."""


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
    writer = ThrottleWriter(kafka, store, fake_store.MemoryLedgerStore(), clock=clock)
    owners = InFlightOwners(store, OWNERS_RELIST_S, clock=clock)
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
    args = parser.parse_args(argv)
    cost = measure(args.partitions, args.steps, args.profile, args.partition_status_interval)
    print(f"one Moving object of {args.partitions} partitions, {args.steps} steps")
    print(cost.summary())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
