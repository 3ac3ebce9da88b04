"""kpo-reassign generate against real brokers; its manifest checked by the real kube-apiserver."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner, Result

from kpo_devenv import ControlPlane
from kpo_kafka.admin import KafkaPythonAdmin
from kpo_kafka.generate import propose_move
from kpo_kafka.reassignment_json import parse_reassignment_json
from kpo_kafka.specs import PartitionReassignmentSpec
from kpo_operator.cli import app
from tests.integration.broker.conftest import ClusterFactory, wait_for
from tests.integration.broker.server.helpers import create_topic

pytestmark = pytest.mark.integration

RACKS = {0: "r0", 1: "r0", 2: "r1", 3: "r1"}
ORDERS = {0: [0, 1], 1: [1, 0], 2: [0, 1], 3: [1, 0]}  # all on rack r0
EVENTS = {0: [0, 1, 2], 1: [1, 2, 0]}


def generate(bootstrap: str, *args: str) -> Result:
    return CliRunner().invoke(
        app,
        ["generate", "--bootstrap-server", bootstrap, "--request-timeout-ms", "10000", *args],
    )


def current_block(stderr: str) -> str:
    return stderr.split("Current partition replica assignment\n")[1].splitlines()[0]


def test_generate_spreads_topics_over_racks_and_the_apiserver_accepts_it(
    kafka_cluster_factory: ClusterFactory, control_plane: ControlPlane
) -> None:
    cluster = kafka_cluster_factory(4, racks=[RACKS[b] for b in sorted(RACKS)])
    create_topic(cluster, "orders", assignment=ORDERS)
    create_topic(cluster, "events", assignment=EVENTS)
    namespace = f"cli-generate-{uuid.uuid4().hex[:6]}"
    args = ["--topics", "orders,events", "--broker-list", "0,1,2,3", "--name", "spread"]
    result = generate(
        cluster.bootstrap_servers, *args, "--namespace", namespace, "--throttle", "1048576"
    )
    assert result.exit_code == 0, result.stderr

    # stderr: the current assignment as Kafka JSON, as --generate prints it.
    current = parse_reassignment_json(current_block(result.stderr))
    assert {t.key: t.replicas for t in current} == {
        **{("orders", p): r for p, r in ORDERS.items()},
        **{("events", p): r for p, r in EVENTS.items()},
    }
    assert "rack-aware" in result.stderr

    # stdout: one manifest with the partitions that move, as the pure function proposes.
    (manifest,) = [d for d in yaml.safe_load_all(result.stdout) if d is not None]
    spec = PartitionReassignmentSpec.from_object(manifest)
    assert manifest["metadata"] == {"name": "spread", "namespace": namespace}
    assert spec.throttle is not None and spec.throttle.replication_rate == 1048576
    expected = propose_move(
        {"orders": ORDERS, "events": EVENTS}, ["orders", "events"], list(RACKS), RACKS
    )
    assert spec.partitions == expected.targets()
    for target in spec.partitions:
        assert {RACKS[b] for b in target.replicas} == {"r0", "r1"}
    assert {t.key for t in spec.partitions} >= {("orders", p) for p in ORDERS}

    # The real kube-apiserver (CRD schema and CEL rules) accepts it.
    control_plane.kubectl("create", "namespace", namespace)
    applied = control_plane.kubectl(
        "apply", "--dry-run=server", "-o", "yaml", "-f", "-", input_text=result.stdout
    )
    echoed: dict[str, Any] = yaml.safe_load(applied.stdout)
    assert echoed["kind"] == "PartitionReassignment"
    assert echoed["spec"]["partitions"] == manifest["spec"]["partitions"]
    assert echoed["spec"]["suspend"] is False  # the CRD's default filled in by the server

    # The proposal is executable: submit it, wait for it, and generate again: nothing to do.
    admin = KafkaPythonAdmin(cluster.bootstrap_servers, "kpo-test", request_timeout_ms=10000)
    try:
        targets = {t.key: t.replicas for t in spec.partitions}
        assert admin.alter_partition_reassignments(targets) == dict.fromkeys(targets)

        def moved() -> bool:
            described = admin.describe_topics(["orders", "events"])
            return all(described[t][p].replicas == tuple(r) for (t, p), r in targets.items())

        wait_for(moved, 60, "the proposed assignment")
    finally:
        admin.close()
    again = generate(cluster.bootstrap_servers, *args)
    assert again.exit_code == 0, again.stderr
    assert again.stdout == ""
    assert "nothing to move" in again.stderr


def test_generate_errors_against_real_brokers(kafka_cluster_factory: ClusterFactory) -> None:
    cluster = kafka_cluster_factory(2)
    create_topic(cluster, "small", assignment={0: [0, 1]})
    cases = [
        (["--topics", "absent", "--broker-list", "0,1"], "topics not in the cluster: absent"),
        (["--topics", "small", "--broker-list", "0,7"], "brokers not in the cluster: 7"),
        (["--topics", "small", "--broker-list", "1"], "replication factor 2 is larger"),
    ]
    for args, message in cases:
        result = generate(cluster.bootstrap_servers, *args, "--name", "x")
        assert result.exit_code == 1
        assert result.stdout == ""
        assert message in result.stderr
    (doc,) = yaml.safe_load_all(
        generate(
            cluster.bootstrap_servers,
            *("--topics", "small", "--broker-list", "1,0", "--name", "x", "--start-index", "1"),
        ).stdout
    )
    # Brokers in id order [0, 1], start index 1: the first replica is broker 1.
    assert doc["spec"]["partitions"] == [{"topic": "small", "partition": 0, "replicas": [1, 0]}]
