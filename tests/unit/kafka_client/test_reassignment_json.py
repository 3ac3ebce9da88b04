"""Kafka reassignment JSON <-> PartitionReassignment manifests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from kpo_kafka.manifests import (
    API_VERSION,
    KIND,
    MAX_PARTITIONS_PER_OBJECT,
    ManifestError,
    ManifestOptions,
    merge_targets,
    parse_manifests,
    to_manifests,
)
from kpo_kafka.reassignment_json import (
    KafkaJsonError,
    dump_reassignment_json,
    parse_reassignment_data,
    parse_reassignment_json,
    reassignment_data,
    topic_name_problem,
)
from kpo_kafka.specs import PartitionReassignmentSpec, PartitionTarget

EXAMPLES = Path(__file__).resolve().parents[3] / "crds" / "examples"

# A kafka-reassign-partitions --reassignment-json-file document: partition 2 of "test" to
# brokers [2, 1], any log dir.
KAFKA_JSON_EXAMPLE = {
    "version": 1,
    "partitions": [
        {"topic": "test", "partition": 2, "replicas": [2, 1], "log_dirs": ["any", "any"]}
    ],
}


def target(topic: str, partition: int, replicas: list[int], dirs: list[str] | None = None) -> Any:
    return PartitionTarget.model_validate(
        {"topic": topic, "partition": partition, "replicas": replicas, "logDirs": dirs}
    )


def entry(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"topic": "t", "partition": 0, "replicas": [1, 2]}
    base.update(fields)
    return {key: value for key, value in base.items() if value is not None}


def errors_of(data: Any) -> list[str]:
    with pytest.raises(KafkaJsonError) as caught:
        parse_reassignment_data(data)
    return caught.value.errors


# -- Kafka JSON -> targets ------------------------------------------------------------


def test_kafka_json_example_parses_with_its_log_dirs() -> None:
    (parsed,) = parse_reassignment_json(json.dumps(KAFKA_JSON_EXAMPLE))
    assert parsed.key == ("test", 2)
    assert parsed.replicas == [2, 1]
    assert parsed.log_dirs == ["any", "any"]


def test_missing_version_means_version_1_as_in_kafka() -> None:
    (parsed,) = parse_reassignment_data({"partitions": [entry()]})
    assert parsed.replicas == [1, 2] and parsed.log_dirs is None


def test_generate_output_is_read_from_the_proposed_block() -> None:
    current = dump_reassignment_json([target("t", 0, [0, 1])])
    proposed = dump_reassignment_json([target("t", 0, [2, 1])])
    text = (
        f"Current partition replica assignment\n{current}\n\n"
        f"Proposed partition reassignment configuration\n{proposed}\n"
    )
    (parsed,) = parse_reassignment_json(text)
    assert parsed.replicas == [2, 1]


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ([], "document: must be a JSON object"),
        ({"version": 2, "partitions": [entry()]}, "version: unsupported version 2"),
        ({"version": "1", "partitions": [entry()]}, "version: must be an integer"),
        ({"version": 1}, "partitions: missing"),
        ({"partitions": {"t": 1}}, "partitions: must be a list"),
        ({"partitions": []}, "partitions: the partition reassignment list is empty"),
        ({"partitions": [entry()], "extra": 1}, "extra: unknown field"),
        ({"partitions": [entry(), 7]}, "partitions[1]: must be an object"),
        ({"partitions": [entry(replicas=None)]}, "partitions[0].replicas: missing"),
        ({"partitions": [entry(topic=None)]}, "partitions[0].topic: missing"),
        ({"partitions": [entry(partition=None)]}, "partitions[0].partition: missing"),
        ({"partitions": [entry(topic=3)]}, "partitions[0].topic: must be a string"),
        ({"partitions": [entry(topic="a/b")]}, "partitions[0].topic: 'a/b' is not a legal"),
        ({"partitions": [entry(topic="..")]}, "partitions[0].topic: '..' is not a legal"),
        ({"partitions": [entry(partition="0")]}, "partitions[0].partition: must be an integer"),
        ({"partitions": [entry(partition=True)]}, "partitions[0].partition: must be an integer"),
        ({"partitions": [entry(partition=-1)]}, "partitions[0].partition: must be an integer"),
        ({"partitions": [entry(partition=2**31)]}, "partitions[0].partition: must be an integer"),
        ({"partitions": [entry(replicas="1,2")]}, "partitions[0].replicas: must be a list"),
        ({"partitions": [entry(replicas=[1.0])]}, "partitions[0].replicas: must be a list"),
        ({"partitions": [entry(replicas=[])]}, "partitions[0].replicas: must list 1 to 32"),
        (
            {"partitions": [entry(replicas=list(range(33)))]},
            "partitions[0].replicas: must list 1 to 32 brokers, not 33",
        ),
        ({"partitions": [entry(replicas=[1, -2])]}, "partitions[0].replicas: broker id -2 is"),
        ({"partitions": [entry(replicas=[3, 1, 3])]}, "partitions[0].replicas: broker 3 is listed"),
        ({"partitions": [entry(log_dirs="any")]}, "partitions[0].log_dirs: must be a list"),
        ({"partitions": [entry(log_dirs=["any"])]}, "partitions[0].log_dirs: has 1 entries"),
        (
            {"partitions": [entry(log_dirs=["any", "data"])]},
            "partitions[0].log_dirs: 'data' is neither \"any\" nor an absolute path",
        ),
        ({"partitions": [entry(log_dir=["any", "any"])]}, "partitions[0].log_dir: unknown field"),
        (
            {"partitions": [entry(), entry(replicas=[3])]},
            "partitions[1]: partition t-0 is already listed at partitions[0]",
        ),
    ],
)
def test_bad_documents_are_refused_naming_the_entry(data: Any, expected: str) -> None:
    assert any(e.startswith(expected) for e in errors_of(data)), errors_of(data)


def test_every_problem_is_reported_at_once() -> None:
    errors = errors_of(
        {"version": 1, "partitions": [entry(), entry(partition=1, replicas=[1, 1]), entry()]}
    )
    assert errors == [
        "partitions[1].replicas: broker 1 is listed twice",
        "partitions[2]: partition t-0 is already listed at partitions[0]",
    ]
    assert "partitions[1].replicas" in str(KafkaJsonError(errors))


def test_text_that_is_not_json_names_the_position() -> None:
    with pytest.raises(KafkaJsonError, match=r"line 2 column 1"):
        parse_reassignment_json('{"version": 1,\n}')
    with pytest.raises(KafkaJsonError, match=r"line 1 column 1"):
        parse_reassignment_json("Proposed partition reassignment configuration\nnone")


def test_topic_name_rules() -> None:
    assert topic_name_problem("orders.v2_x-1") is None
    assert topic_name_problem("x" * 249) is None
    assert topic_name_problem("x" * 250) is not None
    assert topic_name_problem("") is not None


# -- targets -> Kafka JSON ------------------------------------------------------------


def test_reassignment_data_writes_log_dirs_only_when_present() -> None:
    data = reassignment_data([target("a", 0, [1, 2]), target("a", 1, [2], ["/d"])])
    assert data == {
        "version": 1,
        "partitions": [
            {"topic": "a", "partition": 0, "replicas": [1, 2]},
            {"topic": "a", "partition": 1, "replicas": [2], "log_dirs": ["/d"]},
        ],
    }


def test_dump_is_compact_like_kafka_or_indented() -> None:
    targets = [target("a", 0, [1])]
    assert dump_reassignment_json(targets) == (
        '{"version":1,"partitions":[{"topic":"a","partition":0,"replicas":[1]}]}'
    )
    assert json.loads(dump_reassignment_json(targets, indent=2)) == reassignment_data(targets)
    assert "\n  " in dump_reassignment_json(targets, indent=2)


# -- targets -> manifests -------------------------------------------------------------


def test_manifest_of_the_kafka_json_example() -> None:
    targets = parse_reassignment_data(KAFKA_JSON_EXAMPLE)
    options = ManifestOptions("move-test-2", "kafka", 10485760, preferred_leader_election=True)
    (manifest,) = to_manifests(targets, options)
    assert manifest == {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": "move-test-2", "namespace": "kafka"},
        "spec": {
            "partitions": [{"topic": "test", "partition": 2, "replicas": [2, 1]}],
            "throttle": {"replicationRate": 10485760},
            "preferredLeaderElection": True,
        },
    }
    spec = PartitionReassignmentSpec.from_object(manifest)
    assert spec.throttle is not None and spec.throttle.replication_rate == 10485760
    # The same as the hand-written example of the same move.
    example = yaml.safe_load((EXAMPLES / "partitionreassignment-move-replica.yaml").read_text())
    assert PartitionReassignmentSpec.from_object(example) == spec


def test_named_log_dirs_are_kept_and_suspend_is_set() -> None:
    targets = [target("a", 0, [1, 2], ["/data/1", "any"])]
    (manifest,) = to_manifests(targets, ManifestOptions("m", suspend=True))
    assert manifest["metadata"] == {"name": "m"}
    assert manifest["spec"] == {
        "partitions": [
            {"topic": "a", "partition": 0, "replicas": [1, 2], "logDirs": ["/data/1", "any"]}
        ],
        "suspend": True,
    }
    assert PartitionReassignmentSpec.from_object(manifest).partitions[0].log_dirs == [
        "/data/1",
        "any",
    ]


def test_more_than_2000_partitions_split_in_order() -> None:
    targets = [target(f"t{i // 100}", i % 100, [i % 5, (i + 1) % 5]) for i in range(4500)]
    manifests = to_manifests(targets, ManifestOptions("big", "ns", throttle=5))
    assert [m["metadata"] for m in manifests] == [
        {"name": "big-1", "namespace": "ns"},
        {"name": "big-2", "namespace": "ns"},
        {"name": "big-3", "namespace": "ns"},
    ]
    sizes = [len(m["spec"]["partitions"]) for m in manifests]
    assert sizes == [MAX_PARTITIONS_PER_OBJECT, MAX_PARTITIONS_PER_OBJECT, 500]
    for manifest in manifests:
        assert PartitionReassignmentSpec.from_object(manifest).throttle is not None
    assert merge_targets(parse_manifests(manifests)) == targets


def test_exactly_2000_partitions_stay_in_one_object() -> None:
    targets = [target("t", i, [1]) for i in range(MAX_PARTITIONS_PER_OBJECT)]
    (manifest,) = to_manifests(targets, ManifestOptions("whole"))
    assert manifest["metadata"]["name"] == "whole"


@pytest.mark.parametrize(
    ("options", "count", "expected"),
    [
        (ManifestOptions("Upper"), 1, "name: 'Upper' is not a valid object name"),
        (ManifestOptions("-x"), 1, "name: '-x' is not a valid object name"),
        (ManifestOptions("x" * 253), 1, None),
        (ManifestOptions("x" * 252), 2001, "name: '" + "x" * 252 + "-2'"),
        (ManifestOptions("ok", namespace="a.b"), 1, "namespace: 'a.b' is not a valid"),
        (ManifestOptions("ok", throttle=0), 1, "throttle: 0 must be at least 1 byte/s"),
    ],
)
def test_bad_options_are_refused(options: ManifestOptions, count: int, expected: str) -> None:
    targets = [target("t", i, [1]) for i in range(count)]
    if expected is None:
        assert len(to_manifests(targets, options)) == 1
        return
    with pytest.raises(ManifestError) as caught:
        to_manifests(targets, options)
    assert caught.value.errors[0].startswith(expected)


def test_no_partitions_make_no_manifest() -> None:
    with pytest.raises(ManifestError, match="nothing to reassign"):
        to_manifests([], ManifestOptions("m"))


# -- manifests -> targets -------------------------------------------------------------


def test_examples_convert_back_to_kafka_json() -> None:
    paths = sorted(EXAMPLES.glob("partitionreassignment-*.yaml"))
    objects = [yaml.safe_load(p.read_text()) for p in paths]
    parsed = parse_manifests(objects)
    assert [p.name for p in parsed] == [o["metadata"]["name"] for o in objects]
    data = reassignment_data(merge_targets(parsed))
    assert {"topic": "test", "partition": 2, "replicas": [2, 1]} in data["partitions"]
    assert {
        "topic": "orders",
        "partition": 0,
        "replicas": [3, 1, 2],
        "log_dirs": ["/var/lib/kafka/data-1", "any", "any"],
    } in data["partitions"]
    assert parse_reassignment_data(data) == merge_targets(parsed)


def test_bad_objects_are_named() -> None:
    good = to_manifests([target("t", 0, [1])], ManifestOptions("good"))[0]
    bad_spec = {**good, "metadata": {"name": "bad"}, "spec": {"partitions": []}}
    with pytest.raises(ManifestError) as caught:
        parse_manifests(
            [good, {"apiVersion": "v1", "kind": "ConfigMap"}, "text", bad_spec, {**good, "spec": 1}]
        )
    errors = caught.value.errors
    assert errors[0] == f"objects[1]: is v1/ConfigMap, not {API_VERSION}/{KIND}"
    assert errors[1] == "objects[2]: must be a mapping"
    assert errors[2].startswith("objects[3] (bad): spec.partitions: ")
    assert errors[3] == "objects[4] (good): spec: must be an object"


def test_no_object_at_all_is_an_error() -> None:
    with pytest.raises(ManifestError, match="no PartitionReassignment object found"):
        parse_manifests([])


def test_a_partition_in_two_objects_is_refused() -> None:
    first = to_manifests([target("t", 0, [1])], ManifestOptions("one"))
    second = to_manifests([target("t", 1, [1]), target("t", 0, [2])], ManifestOptions("two"))
    with pytest.raises(ManifestError) as caught:
        merge_targets(parse_manifests(first + second))
    assert caught.value.errors == [
        "two: spec.partitions[1]: partition t-0 is already listed in one"
    ]


# -- round trips ----------------------------------------------------------------------

log_dirs = st.sampled_from(["any", "/data/a", "/data/b"])


@st.composite
def target_lists(draw: st.DrawFn) -> list[PartitionTarget]:
    keys = draw(
        st.lists(
            st.tuples(st.sampled_from(["a", "b.c", "d_e-f"]), st.integers(0, 50)),
            min_size=1,
            max_size=20,
            unique=True,
        )
    )
    result = []
    for topic, partition in keys:
        replicas = draw(st.lists(st.integers(0, 40), min_size=1, max_size=5, unique=True))
        dirs = draw(st.none() | st.lists(log_dirs, min_size=len(replicas), max_size=len(replicas)))
        result.append(target(topic, partition, replicas, dirs))
    return result


def _without_any_only(t: PartitionTarget) -> PartitionTarget:
    if t.log_dirs is not None and all(d == "any" for d in t.log_dirs):
        return t.model_copy(update={"log_dirs": None})
    return t


@settings(max_examples=60, deadline=None)
@given(target_lists())
def test_json_and_manifest_round_trips(targets: list[PartitionTarget]) -> None:
    text = dump_reassignment_json(targets)
    assert parse_reassignment_json(text) == targets
    manifests = to_manifests(targets, ManifestOptions("rt"))
    dumped = yaml.safe_load_all(yaml.safe_dump_all(manifests, sort_keys=False))
    back = merge_targets(parse_manifests(list(dumped)))
    assert back == [_without_any_only(t) for t in targets]
