"""The placement job end to end on real parts: collect a skewed broker fleet, plan with
Spark, create the waves suspended, let the operator execute the first wave, and check
that the measured disk balance improved as the plan predicted."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kpo_devenv.tools import tool_path
from kpo_kafka.admin import KafkaPythonAdmin
from kpo_placement.cli import app
from tests.integration.broker.server.helpers import create_topic, describe
from tests.integration.operator.conftest import Stack, StackFactory, produce

pytestmark = pytest.mark.integration

MIB = 1 << 20
TOPIC = "skewed"


def disk_per_broker(stack: Stack) -> dict[int, int]:
    """Bytes of all replicas per broker, from DescribeLogDirs."""
    admin = KafkaPythonAdmin(stack.cluster.bootstrap_servers, "e2e", request_timeout_ms=10000)
    try:
        replicas = admin.describe_log_dirs([0, 1, 2], [TOPIC])
    finally:
        admin.close()
    used = dict.fromkeys((0, 1, 2), 0)
    for (broker, _, _), info in replicas.items():
        used[broker] += info.size_bytes
    return used


def spread(used: Mapping[int, int]) -> float:
    """Coefficient of variation (population standard deviation / mean) of per-broker bytes.

    Not max/mean: brokers 0 and 1 start tied at the maximum, and a first wave whose incoming
    cap on broker 2 lets only one of them shed (both its moves from broker 0) leaves max/mean
    where it was although the load is more even.
    """
    mean = sum(used.values()) / len(used)
    variance = sum((u - mean) ** 2 for u in used.values()) / len(used)
    return variance**0.5 / mean


def test_first_wave_executed_by_the_operator_improves_balance_as_predicted(
    stack_factory: StackFactory, tmp_path: Path
) -> None:
    stack = stack_factory(metrics=True)
    cluster = stack.cluster
    # Every replica on brokers 0 and 1; broker 2 holds nothing.
    create_topic(cluster, TOPIC, assignment={p: [0, 1] if p % 2 == 0 else [1, 0] for p in range(6)})
    produce(cluster, TOPIC, 6, 12 * MIB)
    before = disk_per_broker(stack)
    assert before[2] == 0
    sizes = {p["partition_index"]: 0 for p in describe(cluster, TOPIC)}
    admin = KafkaPythonAdmin(cluster.bootstrap_servers, "e2e", request_timeout_ms=10000)
    try:
        for (broker, _, partition), info in admin.describe_log_dirs([0], [TOPIC]).items():
            sizes[partition] = info.size_bytes if broker == 0 else sizes[partition]
    finally:
        admin.close()

    out = tmp_path / "plan"
    urls = [f"--metrics-url={i}={b.metrics_url}" for i, b in cluster.brokers.items()]
    result = CliRunner().invoke(
        app,
        [
            "plan",
            "--bootstrap-server",
            cluster.bootstrap_servers,
            "--out",
            str(out),
            "--name",
            "e2e",
            "--scorer",
            "spark",
            "--master",
            "local[2]",
            "--throttle",
            str(8 * MIB),
            "--max-moves-per-broker",
            "2",
            "--disk-capacity",
            "1Gi",
            "--scrapes",
            "2",
            "--scrape-interval",
            "0.5",
            "--apply",
            "--namespace",
            stack.namespace,
            "--kubeconfig",
            str(stack.plane.kubeconfig),
            *urls,
        ],
    )
    assert result.exit_code == 0, result.output
    plan = json.loads((out / "plan.json").read_text())
    assert plan["moves"], "a skewed cluster must get moves"
    assert plan["imbalance_after"]["disk"] < plan["imbalance_before"]["disk"]

    listed = stack.kubectl(
        "get", "partitionreassignments", "-l", "kpo.dev/plan=e2e,kpo.dev/wave=1", "-o", "name"
    ).split()
    assert len(listed) == 1, listed
    name = listed[0].split("/")[-1]
    first = stack.wait_phase(name, "Suspended", 60)  # the job creates the waves suspended
    assert first["totals"]["bytesTotal"] > 0
    wave = stack.get("partitionreassignments", name)["spec"]["partitions"]

    # Start and await the wave with the placement reference page's own commands, as a user would.
    for command in documented_wave_commands(stack.namespace, "e2e"):
        run_shell(command, stack)
    stack.wait_phase(name, "Completed", 10)

    # The prediction for this wave: each partition's bytes on each of its replicas, with
    # the wave's targets applied.
    for entry in wave:
        assert (
            next(
                p["replica_nodes"]
                for p in describe(cluster, TOPIC)
                if p["partition_index"] == entry["partition"]
            )
            == entry["replicas"]
        )
    current = {p["partition_index"]: p["replica_nodes"] for p in describe(cluster, TOPIC)}
    originals = {p: [0, 1] if p % 2 == 0 else [1, 0] for p in range(6)}
    predicted = dict.fromkeys((0, 1, 2), 0)
    for partition, replicas in current.items():
        for broker in replicas:
            predicted[broker] += sizes[partition]
    after = disk_per_broker(stack)
    for broker in (0, 1, 2):
        assert after[broker] == pytest.approx(predicted[broker], rel=0.05, abs=64 * 1024)
    assert spread(after) < spread(before)
    assert after[2] > 0
    moved = [p for p, r in current.items() if sorted(r) != sorted(originals[p])]
    assert len(moved) == len(wave)


PLACEMENT_PAGE = Path(__file__).resolve().parents[3] / "docs" / "reference" / "placement-job.md"


def documented_wave_commands(namespace: str, plan: str) -> list[str]:
    """The placement reference page's commands that resume wave 1 and wait for it."""
    lines = [
        line
        for line in PLACEMENT_PAGE.read_text().splitlines()
        if line.startswith("kubectl ") and "kpo.dev/wave=1" in line
    ]
    assert len(lines) == 2, lines  # resume, then wait
    return [
        line.replace("-n kafka", f"-n {namespace}")
        .replace("<name>", plan)
        .replace("--timeout=1h", "--timeout=180s")
        for line in lines
    ]


def run_shell(command: str, stack: Stack) -> None:
    """Run a documented command line in bash with ``kubectl`` on PATH and the test's kubeconfig."""
    env = dict(os.environ)
    env["PATH"] = f"{tool_path('kubectl').parent}{os.pathsep}{env.get('PATH', '')}"
    env["KUBECONFIG"] = str(stack.plane.kubeconfig)
    result = subprocess.run(
        ["bash", "-o", "pipefail", "-c", command],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert result.returncode == 0, (command, result.stdout, result.stderr)
