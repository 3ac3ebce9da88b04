"""The ETA of a throttled move on real Apache Kafka with its default quota window.

Kafka measures a replication throttle over ``replication.quota.window.num`` (11) samples of
``replication.quota.window.size.seconds`` (1 s): a move copies about 11 s worth at once,
waits until that sample expires, copies the next 11 s worth, and so on. The ETA the
operator shows 10 s into such a move (Apache Kafka 4.x in KRaft mode, default settings)
must be within 15% of the move's duration from the actual end; the figures are printed.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from kpo_devenv import ControlPlane
from kpo_devenv.apache_kraft import KraftKafkaCluster
from kpo_devenv.operator_process import OperatorProcess
from tests.integration.broker.server.helpers import create_topic
from tests.integration.operator.conftest import Stack, clean_cluster, produce, reassignment

pytestmark = pytest.mark.integration

MB = 1024 * 1024
RATE = MB // 2  # bytes/s
SIZE = 19 * MB  # about 3.5 quota windows' worth at RATE: the end falls between two bursts
ETA_AT_S = 10.0
TOLERANCE = 0.15


@pytest.fixture
def default_kraft_stack(
    control_plane: ControlPlane, default_kraft: KraftKafkaCluster, tmp_path: Path
) -> Iterator[Stack]:
    """Apache Kafka 4.x (KRaft, Kafka's default quota window; shared) and an operator."""
    cluster = default_kraft
    namespace = f"t-{uuid.uuid4().hex[:8]}"
    operator: OperatorProcess | None = None
    try:
        control_plane.kubectl("create", "namespace", namespace)
        operator = OperatorProcess(
            tmp_path / "operator", control_plane.kubeconfig, cluster.bootstrap_servers, [namespace]
        )
        operator.start()
        yield Stack(cluster, control_plane, namespace, operator)
    finally:
        if operator is not None:
            operator.stop(timeout_s=10)
        control_plane.drop_finalizers(namespace)
        control_plane.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
        clean_cluster(cluster)


def _parse(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()


def test_eta_ten_seconds_in_is_within_15_percent(default_kraft_stack: Stack) -> None:
    stack = default_kraft_stack
    create_topic(stack.cluster, "eta", assignment={0: [0]})
    produce(stack.cluster, "eta", 1, SIZE)
    stack.apply(
        reassignment(
            "eta",
            [{"topic": "eta", "partition": 0, "replicas": [1]}],
            throttle={"replicationRate": RATE},
        )
    )
    submitted = stack.wait_submitted("eta")
    start = _parse(submitted["startTime"])
    timeline: list[tuple[float, int, str | None]] = []
    finish: float | None = None
    deadline = time.time() + 240
    while time.time() < deadline:
        status = stack.status("eta")
        now = time.time()
        totals = status.get("totals") or {}
        timeline.append((now - start, int(totals.get("bytesDone") or 0), status.get("eta")))
        if status.get("phase") == "Completed" or (
            totals.get("bytesTotal") and totals.get("bytesDone") == totals.get("bytesTotal")
        ):
            finish = now
            break
        time.sleep(0.25)
    assert finish is not None, f"the move did not end: {timeline[-5:]}"
    at_ten = [entry for entry in timeline if entry[0] >= ETA_AT_S and entry[2]]
    assert at_ten, f"no ETA after {ETA_AT_S} s: {timeline}"
    seen_s, done, eta_text = at_ten[0]
    assert eta_text is not None
    duration = finish - start
    predicted = _parse(eta_text) - start
    error = (predicted - duration) / duration
    # The rate of the bytes seen so far, as the ETA was before the window was modelled.
    naive = seen_s + (SIZE - done) / (done / seen_s) if done else float("inf")
    print(
        f"ETA shown {seen_s:.1f} s into the move: ends at {predicted:.1f} s; actual end "
        f"{duration:.1f} s; error {error:+.1%} (limit ±{TOLERANCE:.0%}); the measured rate "
        f"alone would say {naive:.1f} s; {done} of {SIZE} bytes copied then"
    )
    print("timeline (s, bytes done, eta):", [(round(t, 1), b, e) for t, b, e in timeline[::4]])
    assert abs(error) <= TOLERANCE
