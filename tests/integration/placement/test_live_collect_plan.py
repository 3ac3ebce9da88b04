"""On real parts: collect a snapshot of running brokers with skewed partitions, plan it with
the CLI (local Spark), and have the real kube-apiserver accept and store the manifests."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Mapping
from pathlib import Path

import pytest
import yaml
from kafka import KafkaProducer
from kubernetes import client
from typer.testing import CliRunner

from kpo_devenv import ControlPlane
from kpo_devenv.kafka_cluster import KafkaCluster
from kpo_kafka.admin import KafkaPythonAdmin
from kpo_kafka.specs import PartitionReassignmentSpec
from kpo_kafka.topic_partition import TopicPartition
from kpo_placement.cli import app
from kpo_placement.collector import BrokerCapacity, Capacities, collect_snapshot
from kpo_placement.load_rates import Scrape
from kpo_placement.manifests import ApplyError, apply_manifests
from kpo_placement.metrics_sources import scrape_brokers
from kpo_placement.snapshot import read_snapshot, write_snapshot
from tests.integration.broker.conftest import ClusterFactory
from tests.integration.broker.server.helpers import create_topic

pytestmark = pytest.mark.integration

TOPIC = "skewed"
PLAN = "live-skew"
MIB = 1 << 20
VALUE = b"x" * 10_000


@pytest.fixture
def cluster(kafka_cluster_factory: ClusterFactory) -> KafkaCluster:
    """Three brokers in three racks serving Prometheus metrics."""
    return kafka_cluster_factory(3, racks=["r0", "r1", "r2"], metrics=True)


def produce(cluster: KafkaCluster, counts: Mapping[int, int]) -> None:
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all")
    try:
        for partition, count in counts.items():
            for _ in range(count):
                producer.send(TOPIC, value=VALUE, partition=partition)
        producer.flush(60)
    finally:
        producer.close()


def keep_producing(cluster: KafkaCluster, started: threading.Event, stop: threading.Event) -> None:
    """Produce to partition 0 only, about 200 KB/s, until ``stop`` is set."""
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks=1)
    try:
        producer.send(TOPIC, value=VALUE, partition=0).get(timeout=30)
        started.set()
        while not stop.wait(0.05):
            producer.send(TOPIC, value=VALUE, partition=0)
        producer.flush(30)
    finally:
        producer.close()


def test_collect_plan_and_apply_on_real_parts(
    cluster: KafkaCluster,
    control_plane: ControlPlane,
    kube_client: client.ApiClient,
    tmp_path: Path,
) -> None:
    # every replica on brokers 0 and 1 (racks r0, r1); broker 2 (r2) holds nothing;
    # partition 0 is large and busy, 1 mid-sized, the others small and idle
    assignment = {p: [0, 1] if p % 2 == 0 else [1, 0] for p in range(6)}
    create_topic(cluster, TOPIC, assignment=assignment)
    produce(cluster, {0: 300, 1: 100, **{p: 5 for p in range(2, 6)}})
    urls = {i: b.metrics_url for i, b in cluster.brokers.items()}
    assert all(url is not None for url in urls.values())

    scrapes: list[Scrape] = []

    def sampler(leaders: Mapping[TopicPartition, int]) -> list[Scrape]:
        got = scrape_brokers({i: str(u) for i, u in urls.items()}, leaders, count=3, interval_s=1.0)
        scrapes.extend(got)
        return got

    started, stop = threading.Event(), threading.Event()
    busy = threading.Thread(target=keep_producing, args=(cluster, started, stop))
    busy.start()
    try:
        assert started.wait(30), "the producer did not start"
        admin = KafkaPythonAdmin(cluster.bootstrap_servers, client_id="placement-test")
        try:
            capacity = BrokerCapacity(100 * MIB, 10 * MIB, 10 * MIB)
            snapshot = collect_snapshot(admin, Capacities(capacity), sampler)
        finally:
            admin.close()
    finally:
        stop.set()
        busy.join(30)

    brokers = snapshot.brokers.to_pylist()
    assert [(b["broker_id"], b["rack"], b["alive"]) for b in brokers] == [
        (0, "r0", True),
        (1, "r1", True),
        (2, "r2", True),
    ]
    assert {b["disk_capacity_bytes"] for b in brokers} == {100 * MIB}
    rows = {(r["topic"], r["partition"]): r for r in snapshot.partitions.to_pylist()}
    assert {p: rows[(TOPIC, p)]["replicas"] for p in range(6)} == assignment
    sizes = {
        (r["broker_id"], r["partition"]): r["size_bytes"] for r in snapshot.replicas.to_pylist()
    }
    assert {b for b, _ in sizes} == {0, 1}  # nothing on broker 2
    assert sizes[(0, 0)] > 3_000_000 > sizes[(0, 1)] > 1_000_000 > sizes[(0, 2)]
    # leader-side rates: partition 0 was the only one written during the scrapes; the
    # produced bytes counted over the window equal the leader's log growth
    samples = snapshot.load_samples.to_pylist()
    assert len(samples) == 2 * 6
    busy_rows = [s for s in samples if s["partition"] == 0]
    assert all(s["bytes_in_per_s"] > 0 and s["messages_in_per_s"] > 0 for s in busy_rows)
    assert all(s["bytes_in_per_s"] == 0 for s in samples if s["partition"] != 0)
    first, last = scrapes[0], scrapes[-1]
    stamps = [first.timestamp_ms, *sorted({s["timestamp_ms"] for s in busy_rows})]
    produced = sum(
        s["bytes_in_per_s"] * (t - prev) / 1000
        for s, prev, t in zip(busy_rows, stamps[:-1], stamps[1:], strict=True)
    )
    growth = last.log_sizes[(TOPIC, 0)] - first.log_sizes[(TOPIC, 0)]
    # (a page's counter may lag its log gauge by the batch being appended at that instant)
    assert produced == pytest.approx(growth, abs=2 * (len(VALUE) + 200))
    records = last.log_end_offsets[(TOPIC, 0)] - first.log_end_offsets[(TOPIC, 0)]
    assert records * len(VALUE) < growth < records * (len(VALUE) + 200)

    snap_dir = tmp_path / "snapshot"
    write_snapshot(snap_dir, snapshot)
    assert read_snapshot(snap_dir).metadata.source == "live"

    # the same through the command line, with the brokers' pages and a capacities file
    caps = tmp_path / "capacities.yaml"
    caps.write_text("default: {disk_bytes: 100Mi}\nbrokers: {2: {net_in_bytes_per_s: 20M}}\n")
    cli_dir = tmp_path / "cli-snapshot"
    pages = [f"--metrics-url={i}={u}" for i, u in urls.items()]
    options = ["--capacities", str(caps), "--scrapes", "2", "--scrape-interval", "0.5", *pages]
    collected = CliRunner().invoke(
        app,
        [
            "collect",
            "--bootstrap-server",
            cluster.bootstrap_servers,
            "--out",
            str(cli_dir),
            *options,
        ],
    )
    assert collected.exit_code == 0, collected.output
    again = read_snapshot(cli_dir)
    assert again.partitions.equals(snapshot.partitions)
    assert again.load_samples.num_rows == 6
    assert [
        (b["disk_capacity_bytes"], b["net_in_capacity_bytes_per_s"])
        for b in again.brokers.to_pylist()
    ] == [(100 * MIB, 125_000_000), (100 * MIB, 125_000_000), (100 * MIB, 20_000_000)]

    out = tmp_path / "plan"
    namespace = f"place-{uuid.uuid4().hex[:6]}"  # --apply creates the objects here
    dry_namespace = f"{namespace}-dry"  # kubectl apply --dry-run=server checks them here
    for name in (namespace, dry_namespace):
        control_plane.kubectl("create", "namespace", name)
    try:
        check_plan_and_objects(control_plane, kube_client, brokers, snap_dir, out, namespace)
    finally:
        for name in (namespace, dry_namespace):
            control_plane.kubectl("delete", "namespace", name, "--wait=false")


def check_plan_and_objects(
    control_plane: ControlPlane,
    kube_client: client.ApiClient,
    brokers: list[dict[str, object]],
    snap_dir: Path,
    out: Path,
    namespace: str,
) -> None:
    """Plan with the CLI (Spark scorer, one copy per broker per wave, --apply) and check the
    files, the dry run on the real apiserver and the stored objects."""
    plan_args = ["plan", str(snap_dir), "--out", str(out), "--master", "local[2]"]
    plan_args += ["--throttle", str(MIB), "--name", PLAN, "--tolerance", "1.3"]
    plan_args += ["--max-moves-per-broker", "1", "--scorer", "spark", "--apply"]
    plan_args += ["--namespace", namespace, "--kubeconfig", str(control_plane.kubeconfig)]
    result = CliRunner().invoke(app, plan_args)
    assert result.exit_code == 0, result.output
    assert "Load per broker (before -> after)" in result.output
    manifests = list(yaml.safe_load_all((out / "manifests.yaml").read_text()))
    assert manifests, "the skew must produce moves"
    summary = json.loads((out / "plan.json").read_text())
    assert summary["name"] == PLAN and summary["moves"]
    moved_to_2 = 0
    for obj in manifests:
        spec = PartitionReassignmentSpec.from_object(obj)
        assert spec.suspend is True
        assert spec.throttle is not None and spec.throttle.replication_rate == MIB
        assert obj["metadata"]["labels"]["kpo.dev/plan"] == PLAN
        moved_to_2 += sum(1 for t in spec.partitions if 2 in t.replicas)
        for target in spec.partitions:
            assert len(target.replicas) == 2
            racks = {brokers[b]["rack"] for b in target.replicas}  # ids are positions here
            assert len(racks) == 2
    assert moved_to_2 > 0  # the empty broker receives replicas
    # one copy per broker per wave: broker 2 receives in a new wave each time
    waves = [int(obj["metadata"]["labels"]["kpo.dev/wave"]) for obj in manifests]
    assert waves == list(range(1, len(manifests) + 1))
    assert len(manifests) >= moved_to_2
    assert (out / "report.png").read_bytes()[:4] == b"\x89PNG"

    assert {m["metadata"]["namespace"] for m in manifests} == {namespace}
    elsewhere = [
        {**m, "metadata": {**m["metadata"], "namespace": f"{namespace}-dry"}} for m in manifests
    ]
    dry = control_plane.kubectl(
        "apply", "--dry-run=server", "-f", "-", input_text=yaml.safe_dump_all(elsewhere)
    )
    assert dry.stdout.count("created (server dry run)") == len(manifests)
    created = [m["metadata"]["name"] for m in manifests]
    assert f"created (suspended): {', '.join(created)}" in result.output
    listed = json.loads(
        control_plane.kubectl(
            "get", "pr", "-n", namespace, "-l", f"kpo.dev/plan={PLAN}", "-o", "json"
        ).stdout
    )
    stored = {item["metadata"]["name"]: item for item in listed["items"]}
    assert sorted(stored) == sorted(created)
    for item in stored.values():
        assert item["spec"]["suspend"] is True
        assert item["metadata"]["labels"]["kpo.dev/wave"].isdigit()
        assert int(item["metadata"]["annotations"]["kpo.dev/bytes-to-move"]) > 0
    with pytest.raises(ApplyError, match="409"):
        apply_manifests(manifests[:1], kube_client, namespace)
