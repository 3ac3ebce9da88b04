"""The placement job on Apache Kafka with the Prometheus JMX exporter attached.

Every node of the package's Apache Kafka 4.x KRaft cluster runs ``jmx_prometheus_javaagent``
(Maven Central, ``tools/install-jmx-exporter.sh``) with
``deploy/jmx-exporter/kafka-kpo-rules.yaml``.
Its pages carry exactly the metric names the collector reads; ``kpo_placement collect``
reads them beside the Admin API, ``plan`` moves replicas of a skewed topic to the empty
broker, and the operator executes the first wave of the plan to ``Completed``.
"""

from __future__ import annotations

import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from kpo_devenv import ControlPlane
from kpo_devenv.apache_kraft import KraftKafkaCluster
from kpo_devenv.operator_process import OperatorProcess
from kpo_placement.cli import app
from kpo_placement.load_rates import LOG_END_OFFSET, LOG_SIZE, TOPIC_BYTES_IN, TOPIC_BYTES_OUT
from kpo_placement.snapshot import read_snapshot
from tests.integration.broker.server.helpers import consume_all, create_topic
from tests.integration.operator.conftest import RECORD, Stack, clean_cluster, produce

pytestmark = pytest.mark.integration

MB = 1024 * 1024


@pytest.fixture
def jmx_stack(
    control_plane: ControlPlane, default_kraft: KraftKafkaCluster, tmp_path: Path
) -> Iterator[Stack]:
    """The shared KRaft cluster (JMX exporter on every node) and an operator."""
    namespace = f"t-{uuid.uuid4().hex[:8]}"
    operator: OperatorProcess | None = None
    try:
        control_plane.kubectl("create", "namespace", namespace)
        operator = OperatorProcess(
            tmp_path / "operator",
            control_plane.kubeconfig,
            default_kraft.bootstrap_servers,
            [namespace],
        )
        operator.start()
        yield Stack(default_kraft, control_plane, namespace, operator)
    finally:
        if operator is not None:
            operator.stop(timeout_s=10)
        control_plane.drop_finalizers(namespace)
        control_plane.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
        clean_cluster(default_kraft)


def test_collect_plan_and_first_wave_from_the_jmx_exporter(
    jmx_stack: Stack, tmp_path: Path
) -> None:
    stack = jmx_stack
    cluster = stack.cluster
    create_topic(cluster, "skewed", assignment={p: [p % 2, (p + 1) % 2] for p in range(6)})
    produce(cluster, "skewed", 6, 6 * MB)
    # Kafka registers a topic's BytesOutPerSec at its first consumer fetch.
    consume_all(cluster, "skewed", 6, 6 * MB // RECORD)
    urls = {i: b.metrics_url for i, b in cluster.brokers.items()}
    with urllib.request.urlopen(urls[0], timeout=10) as page:
        text = page.read().decode()
    for name in (LOG_SIZE, LOG_END_OFFSET, TOPIC_BYTES_IN, TOPIC_BYTES_OUT):
        assert f"\n{name}{{" in text, f"{name} missing from the JMX exporter's page"
    assert 'kafka_log_log_size{partition="0",topic="skewed"}' in text

    snapshot = tmp_path / "snapshot"
    collected = CliRunner().invoke(
        app,
        [
            "collect",
            "--bootstrap-server",
            cluster.bootstrap_servers,
            "--out",
            str(snapshot),
            "--scrapes",
            "2",
            "--scrape-interval",
            "1",
            "--disk-capacity",
            "1Gi",
            *[f"--metrics-url={i}={u}" for i, u in urls.items()],
        ],
    )
    assert collected.exit_code == 0, collected.output
    read = read_snapshot(snapshot)
    sizes = {(row["topic"], row["partition"]): row for row in read.load_samples.to_pylist()}
    assert {("skewed", p) for p in range(6)} <= set(sizes), sizes.keys()

    out = tmp_path / "plan"
    planned = CliRunner().invoke(
        app,
        [
            "plan",
            str(snapshot),
            "--out",
            str(out),
            "--master",
            "local[2]",
            "--throttle",
            str(4 * MB),
            "--tolerance",
            "1.2",
            "--max-moves-per-broker",
            "2",
        ],
    )
    assert planned.exit_code == 0, planned.output
    manifests = [m for m in yaml.safe_load_all((out / "manifests.yaml").read_text()) if m]
    assert manifests, planned.output
    first = min(int(m["metadata"]["labels"]["kpo.dev/wave"]) for m in manifests)
    wave = [m for m in manifests if int(m["metadata"]["labels"]["kpo.dev/wave"]) == first]
    assert any(2 in t["replicas"] for m in wave for t in m["spec"]["partitions"])
    for manifest in wave:
        manifest["spec"]["suspend"] = False  # the wave is started
        manifest["metadata"].pop("namespace", None)
        stack.apply(manifest)
    for manifest in wave:
        stack.wait_phase(manifest["metadata"]["name"], "Completed", 180)
    print(f"JMX exporter -> collect -> plan: {len(manifests)} moves, wave {first}: {len(wave)}")
