"""A moving object's totals refresh every poll, its partition entries at an interval.

Real kube-apiserver + etcd, three broker processes, the operator as a process with
``KPO_POLL_INTERVAL_S`` = 0.5 and ``KPO_PARTITION_STATUS_INTERVAL_S`` = :data:`INTERVAL_S`.
One throttled object moves a small partition (done in a few seconds) and a large one
(about 15 s), from different leaders to broker 1. Read with ``kubectl`` while it moves:
``status.totals`` changes at about every poll; ``status.partitions`` is rewritten only
when an entry's state changes (the small partition's completion, in the same write as the
totals that count it) or, for byte counters alone, no sooner than the interval after
``status.partitionsUpdateTime``.
"""

from __future__ import annotations

import itertools
import json
import time
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.integration.broker.server.helpers import create_topic
from tests.integration.operator.conftest import StackFactory, produce, reassignment

pytestmark = pytest.mark.integration

KIB = 1024
INTERVAL_S = 5.0
RATE = 512 * KIB  # bytes/s: the large partition's 8 MiB take about 16 s
BYTE_FIELDS = ("bytesDone", "bytesTotal")


def _when(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()


def _without_bytes(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in e.items() if k not in BYTE_FIELDS} for e in entries]


def test_totals_refresh_every_poll_and_entries_at_the_interval(
    stack_factory: StackFactory,
) -> None:
    stack = stack_factory(
        # No initial burst (test_reassignment.py), and fetches of 64 KiB: the bytes grow
        # at every poll rather than by 1 MiB every two seconds.
        properties={"replication.quota.window.num": "2", "replica.fetch.max.bytes": "65536"},
        poll_interval_s=0.5,
        env={"KPO_PARTITION_STATUS_INTERVAL_S": str(INTERVAL_S)},
    )
    # Led by another broker than the large one: broker 1 fetches it with a fetcher of its
    # own, so the small partition is not starved by the large one's fetches.
    create_topic(stack.cluster, "small", assignment={0: [2]})
    create_topic(stack.cluster, "large", assignment={0: [0]})
    produce(stack.cluster, "small", 1, 256 * KIB)
    produce(stack.cluster, "large", 1, 8 * 1024 * KIB)
    stack.apply(
        reassignment(
            "paced",
            [
                {"topic": "small", "partition": 0, "replicas": [1]},
                {"topic": "large", "partition": 0, "replicas": [1]},
            ],
            throttle={"replicationRate": RATE},
        )
    )
    stack.wait_submitted("paced")
    samples: list[dict[str, Any]] = []
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        status = stack.status("paced")
        samples.append(status)
        if status.get("phase") != "Moving":
            break
        time.sleep(0.1)
    final = samples[-1]
    assert final.get("phase") == "Completed", final
    moving = [s for s in samples if s.get("phase") == "Moving"]
    # The totals (bytes, rate) as each step wrote them: the rate changes at every step.
    totals_seen = {json.dumps(s["totals"], sort_keys=True) for s in moving if "totals" in s}
    writes = {s["partitionsUpdateTime"]: s["partitions"] for s in moving}
    print(
        f"{len(moving)} reads while moving: {len(totals_seen)} distinct totals, "
        f"{len(writes)} writes of status.partitions at {sorted(writes)}"
    )
    # The totals refresh every poll; the entries far less often.
    assert len(totals_seen) >= 2 * len(writes) and len(totals_seen) >= 8
    # Between two writes where only byte counters changed, at least the interval passed
    # (partitionsUpdateTime has whole seconds: one second of rounding).
    times = sorted(writes)
    bytes_only = [
        (a, b)
        for a, b in itertools.pairwise(times)
        if _without_bytes(writes[a]) == _without_bytes(writes[b])
    ]
    assert bytes_only, f"no write of byte counters alone: {times}"
    for a, b in bytes_only:
        assert _when(b) - _when(a) >= INTERVAL_S - 1, (a, b)
    # Byte counters never change without a new partitionsUpdateTime: two reads of the same
    # time show the same entries, unless a state change (written at once, as soon as it
    # happens) followed the last write within the same second (whole seconds).
    for a, b in itertools.pairwise(moving):
        if a["partitionsUpdateTime"] == b["partitionsUpdateTime"]:
            assert a["partitions"] == b["partitions"] or _without_bytes(
                a["partitions"]
            ) != _without_bytes(b["partitions"]), (a, b)
    # A completion is written at once: the read that first counts the small partition as
    # done shows its entry Completed (same PATCH), not an interval later.
    counted = [s for s in moving if s["totals"]["partitionsDone"] == 1]
    seen = [
        (s["totals"]["partitionsDone"], [(e["state"], e.get("bytesDone")) for e in s["partitions"]])
        for s in moving
    ]
    assert counted, f"the small partition was never seen done before the large one: {seen}"
    states = {e["topic"]: e["state"] for e in counted[0]["partitions"]}
    assert states == {"small": "Completed", "large": "Moving"}
    # The final write has every entry, with bytes as the totals.
    assert {e["state"] for e in final["partitions"]} == {"Completed"}
    assert sum(e["bytesDone"] for e in final["partitions"]) == final["totals"]["bytesDone"]
    assert final["totals"]["bytesDone"] == final["totals"]["bytesTotal"] > 8 * 1024 * KIB
