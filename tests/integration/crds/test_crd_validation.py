"""The CRDs on the real kube-apiserver: examples accepted, malformed objects rejected by field."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from kubernetes import client

from kpo_devenv import ControlPlane
from kpo_operator.resources import ALL_KINDS, GROUP, PARTITION_REASSIGNMENT, VERSION
from tests.conftest import EXAMPLES_DIR

pytestmark = pytest.mark.integration

NAMESPACE = "crd-tests"

PR: dict[str, Any] = {
    "apiVersion": f"{GROUP}/{VERSION}",
    "kind": "PartitionReassignment",
    "metadata": {"name": "bad"},
    "spec": {"partitions": [{"topic": "test", "partition": 0, "replicas": [1, 2]}]},
}
KC: dict[str, Any] = {
    "apiVersion": f"{GROUP}/{VERSION}",
    "kind": "KafkaCluster",
    "metadata": {"name": "bad"},
    "spec": {"bootstrapServers": ["kafka-0.kafka:9092"]},
}
TRQ: dict[str, Any] = {
    "apiVersion": f"{GROUP}/{VERSION}",
    "kind": "TopicReplicaQuota",
    "metadata": {"name": "bad"},
    "spec": {"topics": {"names": ["test"]}, "leaderReplicationThrottledRate": 1000},
}


def _with(base: dict[str, Any], **spec: Any) -> dict[str, Any]:
    """A copy of ``base`` whose spec keys are replaced (None deletes a key)."""
    doc = copy.deepcopy(base)
    for key, value in spec.items():
        if value is None:
            doc["spec"].pop(key, None)
        else:
            doc["spec"][key] = value
    return doc


def _partition(**fields: Any) -> list[dict[str, Any]]:
    entry: dict[str, Any] = {"topic": "test", "partition": 0, "replicas": [1, 2]}
    for key, value in fields.items():
        if value is None:
            entry.pop(key)
        else:
            entry[key] = value
    return [entry]


# (case id, object, text that must appear in the apiserver's error: the field path)
MALFORMED: list[tuple[str, dict[str, Any], str]] = [
    ("pr-no-spec", {k: v for k, v in PR.items() if k != "spec"}, "spec: Required value"),
    ("pr-empty-partitions", _with(PR, partitions=[]), "spec.partitions: Invalid value"),
    (
        "pr-missing-topic",
        _with(PR, partitions=_partition(topic=None)),
        "spec.partitions[0].topic: Required value",
    ),
    (
        "pr-partition-not-int",
        _with(PR, partitions=_partition(partition="zero")),
        "spec.partitions[0].partition: Invalid value",
    ),
    (
        "pr-negative-partition",
        _with(PR, partitions=_partition(partition=-1)),
        "spec.partitions[0].partition: Invalid value",
    ),
    (
        "pr-bad-topic-name",
        _with(PR, partitions=_partition(topic="bad topic!")),
        "spec.partitions[0].topic: Invalid value",
    ),
    (
        "pr-empty-replicas",
        _with(PR, partitions=_partition(replicas=[])),
        "spec.partitions[0].replicas: Invalid value",
    ),
    (
        "pr-duplicate-replicas",
        _with(PR, partitions=_partition(replicas=[1, 2, 1])),
        "spec.partitions[0].replicas: Invalid value",
    ),
    (
        "pr-negative-broker",
        _with(PR, partitions=_partition(replicas=[1, -2])),
        "spec.partitions[0].replicas[1]: Invalid value",
    ),
    (
        "pr-duplicate-partition",
        _with(PR, partitions=_partition() + _partition(replicas=[3])),
        "spec.partitions[1]: Duplicate value",
    ),
    (
        "pr-logdirs-length",
        _with(PR, partitions=_partition(logDirs=["any"])),
        "spec.partitions[0].logDirs: Invalid value",
    ),
    (
        "pr-logdir-relative",
        _with(PR, partitions=_partition(logDirs=["data", "any"])),
        "spec.partitions[0].logDirs[0]: Invalid value",
    ),
    (
        "pr-negative-throttle",
        _with(PR, throttle={"replicationRate": -5}),
        "spec.throttle.replicationRate: Invalid value",
    ),
    (
        "pr-zero-throttle",
        _with(PR, throttle={"logDirMoveRate": 0}),
        "spec.throttle.logDirMoveRate: Invalid value",
    ),
    ("pr-empty-throttle", _with(PR, throttle={}), "spec.throttle: Invalid value"),
    ("pr-cancel-not-bool", _with(PR, cancel="yes"), "spec.cancel: Invalid value"),
    (
        "pr-unknown-field",
        _with(PR, bootstrapServers="evil:9092"),
        'unknown field "spec.bootstrapServers"',
    ),
    ("trq-no-topics", _with(TRQ, topics=None), "spec.topics: Required value"),
    (
        "trq-all-and-names",
        _with(TRQ, topics={"all": True, "names": ["a"]}),
        "spec.topics: Invalid value",
    ),
    ("trq-no-topic-choice", _with(TRQ, topics={}), "spec.topics: Invalid value"),
    ("trq-empty-names", _with(TRQ, topics={"names": []}), "spec.topics.names: Invalid value"),
    (
        "trq-negative-rate",
        _with(TRQ, leaderReplicationThrottledRate=-1),
        "spec.leaderReplicationThrottledRate: Invalid value",
    ),
    (
        "trq-rate-as-string",
        _with(TRQ, followerReplicationThrottledRate="10MB"),
        "spec.followerReplicationThrottledRate: Invalid value",
    ),
    (
        "trq-bad-replica-list",
        _with(TRQ, leaderReplicationThrottledReplicas="0-101"),
        "spec.leaderReplicationThrottledReplicas: Invalid value",
    ),
    (
        "trq-replica-id-too-long",
        _with(TRQ, followerReplicationThrottledReplicas="99999999999999999999:1"),
        "spec.followerReplicationThrottledReplicas: Invalid value",
    ),
    (
        "trq-nothing-throttled",
        _with(TRQ, leaderReplicationThrottledRate=None),
        "spec: Invalid value",
    ),
    (
        "trq-all-topics-with-pairs",
        _with(TRQ, topics={"all": True}, followerReplicationThrottledReplicas="0:1"),
        "spec: Invalid value",
    ),
    ("trq-duplicate-broker", _with(TRQ, brokers=[1, 1]), "spec.brokers[1]: Duplicate value"),
    (
        "trq-unknown-field",
        _with(TRQ, brokerAddress="10.0.0.1:9092"),
        'unknown field "spec.brokerAddress"',
    ),
    ("trq-bad-cluster-ref", _with(TRQ, clusterRef="Not_A_Name"), "spec.clusterRef: Invalid"),
    ("kc-no-servers", _with(KC, bootstrapServers=[]), "spec.bootstrapServers: Invalid value"),
    ("kc-no-port", _with(KC, bootstrapServers=["kafka-0"]), "spec.bootstrapServers[0]"),
    (
        "kc-inline-password",
        _with(KC, config={"sasl.password": "hunter2"}),
        'unknown field "spec.config.sasl.password"',
    ),
    (
        "kc-unknown-protocol",
        _with(KC, config={"security.protocol": "SASL_TLS"}),
        'spec.config.security.protocol: Unsupported value: "SASL_TLS"',
    ),
    (
        "kc-secret-ref-without-key",
        _with(KC, secretRefs={"sasl.password": {"name": "user"}}),
        "spec.secretRefs.sasl.password.key: Required value",
    ),
]


@pytest.fixture(scope="module")
def namespace(control_plane: ControlPlane) -> Iterator[str]:
    control_plane.kubectl("create", "namespace", NAMESPACE)
    try:
        yield NAMESPACE
    finally:
        control_plane.kubectl("delete", "namespace", NAMESPACE, "--wait=false")


def _kinds_in(namespace: str, control_plane: ControlPlane) -> list[str]:
    out = control_plane.kubectl(
        "get",
        ",".join(k.plural for k in ALL_KINDS),
        "-n",
        namespace,
        "-o",
        "name",
    ).stdout
    return out.split()


def test_at_least_fifteen_malformed_cases() -> None:
    assert len(MALFORMED) >= 15
    assert len({case for case, _, _ in MALFORMED}) == len(MALFORMED)


@pytest.mark.parametrize(("case", "doc", "expected"), MALFORMED, ids=[c[0] for c in MALFORMED])
def test_malformed_object_is_rejected_naming_the_field(
    control_plane: ControlPlane, namespace: str, case: str, doc: dict[str, Any], expected: str
) -> None:
    result = control_plane.kubectl(
        "apply", "-n", namespace, "-f", "-", input_text=json.dumps(doc), check=False
    )
    assert result.returncode != 0, f"{case} was accepted"
    assert expected in result.stderr
    assert _kinds_in(namespace, control_plane) == [], "a rejected object was stored"


def test_every_example_is_accepted_by_kubectl_apply(
    control_plane: ControlPlane, namespace: str
) -> None:
    examples = sorted(EXAMPLES_DIR.glob("*.yaml"))
    applied = control_plane.kubectl("apply", "-n", namespace, "-f", str(EXAMPLES_DIR)).stdout
    assert applied.count("created") == len(examples)
    names = {yaml.safe_load(p.read_text())["metadata"]["name"] for p in examples}
    stored = {name.split("/", 1)[1] for name in _kinds_in(namespace, control_plane)}
    assert stored == names
    # Defaults from the schema are filled in by the apiserver.
    got = json.loads(
        control_plane.kubectl("get", "pr", "move-test-2", "-n", namespace, "-o", "json").stdout
    )
    assert got["spec"]["suspend"] is False and got["spec"]["cancel"] is False
    assert got["spec"]["partitions"][0]["replicas"] == [2, 1]
    control_plane.kubectl("delete", "-n", namespace, "-f", str(EXAMPLES_DIR))
    assert _kinds_in(namespace, control_plane) == []


def test_printer_columns_and_status_subresource(
    control_plane: ControlPlane, kube_client: client.ApiClient, namespace: str
) -> None:
    api = client.CustomObjectsApi(kube_client)
    body = copy.deepcopy(PR)
    body["metadata"] = {"name": "columns"}
    body["spec"]["throttle"] = {"replicationRate": 1048576}
    api.create_namespaced_custom_object(
        GROUP, VERSION, namespace, PARTITION_REASSIGNMENT.plural, body
    )
    try:
        status = {
            "phase": "Moving",
            "observedGeneration": 1,
            "totals": {"partitions": 1, "progress": "42%"},
        }
        api.patch_namespaced_custom_object_status(
            GROUP, VERSION, namespace, PARTITION_REASSIGNMENT.plural, "columns", {"status": status}
        )
        # Status sent to the main resource is ignored (status subresource).
        api.patch_namespaced_custom_object(
            GROUP,
            VERSION,
            namespace,
            PARTITION_REASSIGNMENT.plural,
            "columns",
            {"status": {"phase": "Failed"}},
        )
        table = control_plane.kubectl("get", "pr", "columns", "-n", namespace).stdout.splitlines()
        assert table[0].split() == [
            "NAME",
            "PHASE",
            "PROGRESS",
            "PARTITIONS",
            "THROTTLE",
            "ETA",
            "AGE",
        ]
        assert table[1].split()[:5] == ["columns", "Moving", "42%", "1", "1048576"]
    finally:
        api.delete_namespaced_custom_object(
            GROUP, VERSION, namespace, PARTITION_REASSIGNMENT.plural, "columns"
        )


def test_cluster_ref_cannot_be_added_changed_or_removed(
    control_plane: ControlPlane, namespace: str
) -> None:
    doc = copy.deepcopy(TRQ)
    doc["metadata"] = {"name": "pinned"}
    doc["spec"]["clusterRef"] = "orders"
    control_plane.kubectl("apply", "-n", namespace, "-f", "-", input_text=json.dumps(doc))
    try:
        for ref in ("payments", None):
            edited = _with(doc, clusterRef=ref)
            result = control_plane.kubectl(
                "apply", "-n", namespace, "-f", "-", input_text=json.dumps(edited), check=False
            )
            assert result.returncode != 0, ref
            assert "clusterRef cannot be added, changed or removed" in result.stderr
        stored = json.loads(
            control_plane.kubectl("get", "trq", "pinned", "-n", namespace, "-o", "json").stdout
        )
        assert stored["spec"]["clusterRef"] == "orders"
    finally:
        control_plane.kubectl("delete", "trq", "pinned", "-n", namespace)


def test_status_partitions_is_one_field_for_the_apiserver(
    kube_client: client.ApiClient, namespace: str
) -> None:
    """The operator writes ``status.partitions`` whole, so the list is atomic: the API
    server tracks one owned field for it, not one per entry, which it would otherwise
    re-encode at every status write of the object (CPU per PATCH)."""
    api = client.CustomObjectsApi(kube_client)
    body = copy.deepcopy(PR)
    body["metadata"] = {"name": "atomic"}
    body["spec"]["partitions"] = [
        {"topic": "test", "partition": p, "replicas": [1, 2]} for p in range(50)
    ]
    api.create_namespaced_custom_object(
        GROUP, VERSION, namespace, PARTITION_REASSIGNMENT.plural, body
    )
    try:
        entries = [
            {"topic": "test", "partition": p, "state": "Moving", "bytesDone": p} for p in range(50)
        ]
        api.patch_namespaced_custom_object_status(
            GROUP,
            VERSION,
            namespace,
            PARTITION_REASSIGNMENT.plural,
            "atomic",
            {"status": {"phase": "Moving", "partitions": entries}},
        )
        got = api.get_namespaced_custom_object(
            GROUP, VERSION, namespace, PARTITION_REASSIGNMENT.plural, "atomic"
        )
        assert got["status"]["partitions"] == entries
        owned = [
            m["fieldsV1"]["f:status"]
            for m in got["metadata"]["managedFields"]
            if m.get("subresource") == "status"
        ]
        assert owned == [{".": {}, "f:partitions": {}, "f:phase": {}}]
        # spec.partitions stays a map keyed by topic and partition (duplicates refused).
        spec_owned = json.dumps(
            [m["fieldsV1"].get("f:spec") for m in got["metadata"]["managedFields"]]
        )
        assert spec_owned.count('k:{\\"partition\\":') == 50
    finally:
        api.delete_namespaced_custom_object(
            GROUP, VERSION, namespace, PARTITION_REASSIGNMENT.plural, "atomic"
        )
