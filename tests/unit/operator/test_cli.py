"""The kpo-reassign command line: from-json, to-json and generate (on an in-memory cluster)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner, Result

from kpo_kafka.admin_types import KafkaUnavailableError
from kpo_kafka.manifests import dump_manifests
from kpo_kafka.reassignment_json import parse_reassignment_json
from kpo_kafka.specs import PartitionReassignmentSpec
from kpo_operator import cli
from tests.unit.operator.fake_kafka import FakeKafkaAdmin

EXAMPLES = Path(__file__).resolve().parents[3] / "crds" / "examples"
KAFKA_JSON = (
    '{"version":1,"partitions":[{"topic":"test","partition":2,"replicas":[2,1],'
    '"log_dirs":["any","any"]}]}'
)


def run(*args: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(cli.app, list(args), input=stdin)


def documents(result: Result) -> list[dict[str, Any]]:
    assert result.exit_code == 0, result.stderr
    docs = [d for d in yaml.safe_load_all(result.stdout) if d is not None]
    for doc in docs:
        PartitionReassignmentSpec.from_object(doc)
    return docs


def failed(result: Result) -> str:
    assert result.exit_code == 1, (result.exit_code, result.stdout, result.stderr)
    assert result.stdout == ""
    assert result.stderr.startswith("error: ")
    return result.stderr


# -- from-json ------------------------------------------------------------------------


def test_from_json_file_with_every_option(tmp_path: Path) -> None:
    path = tmp_path / "reassign.json"
    path.write_text(KAFKA_JSON)
    result = run(
        "from-json",
        str(path),
        "--name",
        "move-test-2",
        "--namespace",
        "kafka",
        "--throttle",
        "10485760",
        "--preferred-leader-election",
        "--suspend",
    )
    (doc,) = documents(result)
    assert doc == {
        "apiVersion": "kpo.dev/v1alpha1",
        "kind": "PartitionReassignment",
        "metadata": {"name": "move-test-2", "namespace": "kafka"},
        "spec": {
            "partitions": [{"topic": "test", "partition": 2, "replicas": [2, 1]}],
            "throttle": {"replicationRate": 10485760},
            "preferredLeaderElection": True,
            "suspend": True,
        },
    }
    assert "replicas: [2, 1]" in result.stdout  # replica lists are written inline
    assert result.stderr == ""


def test_from_json_reads_stdin() -> None:
    (doc,) = documents(run("from-json", "-", "--name", "m", stdin=KAFKA_JSON))
    assert doc["metadata"] == {"name": "m"}
    assert "throttle" not in doc["spec"]


def test_from_json_splits_large_moves_into_a_multi_document_stream() -> None:
    partitions = [{"topic": "t", "partition": p, "replicas": [p % 3]} for p in range(2500)]
    text = json.dumps({"version": 1, "partitions": partitions})
    result = run("from-json", "-", "--name", "big", stdin=text)
    docs = documents(result)
    assert [d["metadata"]["name"] for d in docs] == ["big-1", "big-2"]
    assert [len(d["spec"]["partitions"]) for d in docs] == [2000, 500]
    assert result.stdout.startswith("---\n")
    assert "split into 2 PartitionReassignments" in result.stderr


@pytest.mark.parametrize(
    ("text", "options", "message"),
    [
        ('{"version":2,"partitions":[]}', [], "version: unsupported version 2"),
        (
            '{"partitions":[{"topic":"t","partition":0,"replicas":[1]},'
            '{"topic":"t","partition":1,"replicas":"2"}]}',
            [],
            "partitions[1].replicas: must be a list of broker ids",
        ),
        ("not json", [], "line 1 column 1"),
        (KAFKA_JSON, ["--namespace", "Bad_NS"], "namespace: 'Bad_NS' is not a valid"),
    ],
)
def test_from_json_errors(text: str, options: list[str], message: str) -> None:
    assert message in failed(run("from-json", "-", "--name", "m", *options, stdin=text))


def test_from_json_usage_errors() -> None:
    assert run("from-json", "-", stdin=KAFKA_JSON).exit_code == 2  # --name is required
    assert run("from-json", "-", "--name", "m", "--throttle", "0").exit_code == 2
    assert "cannot read input" in failed(run("from-json", "/no/such/file", "--name", "m"))


@pytest.mark.parametrize(
    "topic", ["true", "null", "1e3", "0x1f", "yes", "on", "007", ".nan", ".inf", "1_000", "-"]
)
def test_topic_names_that_look_like_other_yaml_types_stay_strings(topic: str) -> None:
    text = json.dumps({"partitions": [{"topic": topic, "partition": 0, "replicas": [1]}]})
    (doc,) = documents(run("from-json", "-", "--name", "m", stdin=text))
    assert doc["spec"]["partitions"][0]["topic"] == topic
    manifest = dump_manifests([doc])
    assert yaml.safe_load(manifest)["spec"]["partitions"][0]["topic"] == topic


# -- to-json --------------------------------------------------------------------------


def test_to_json_of_an_example_with_hints_for_the_throttles() -> None:
    path = EXAMPLES / "partitionreassignment-log-dirs.yaml"
    result = run("to-json", str(path))
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == {
        "version": 1,
        "partitions": [
            {
                "topic": "orders",
                "partition": 0,
                "replicas": [3, 1, 2],
                "log_dirs": ["/var/lib/kafka/data-1", "any", "any"],
            },
            {"topic": "orders", "partition": 1, "replicas": [1, 3, 2]},
        ],
    }
    assert "--throttle 52428800" in result.stderr
    assert "--replica-alter-log-dirs-throttle 104857600" in result.stderr


def test_to_json_merges_documents_and_lists_and_round_trips() -> None:
    partitions = [{"topic": "t", "partition": p, "replicas": [p % 3, 3]} for p in range(2100)]
    text = json.dumps({"version": 1, "partitions": partitions})
    split = run("from-json", "-", "--name", "big", stdin=text).stdout
    result = run("to-json", "-", "--pretty", stdin=split)
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == {"version": 1, "partitions": partitions}
    assert result.stdout.startswith("{\n  ")
    as_list = yaml.safe_dump(
        {"apiVersion": "v1", "kind": "List", "items": list(yaml.safe_load_all(split))}
    )
    listed = run("to-json", "-", stdin=as_list)
    assert json.loads(listed.stdout) == {"version": 1, "partitions": partitions}


def test_to_json_hints_at_cancellation() -> None:
    manifest = yaml.safe_load((EXAMPLES / "partitionreassignment-suspended.yaml").read_text())
    manifest["spec"]["cancel"] = True
    result = run("to-json", "-", stdin=yaml.safe_dump(manifest))
    assert result.exit_code == 0
    assert "kafka-reassign-partitions --cancel" in result.stderr


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("apiVersion: v1\nkind: ConfigMap\n", "objects[0]: is v1/ConfigMap"),
        (
            "apiVersion: kpo.dev/v1alpha1\nkind: PartitionReassignment\nmetadata: {name: x}\n"
            "spec: {partitions: [{topic: t, partition: 0, replicas: []}]}\n",
            "objects[0] (x): spec.partitions[0].replicas",
        ),
        ("a: [\n", "while parsing"),
        ("", "no PartitionReassignment object found"),
    ],
)
def test_to_json_errors(text: str, message: str) -> None:
    assert message in failed(run("to-json", "-", stdin=text))


# -- generate -------------------------------------------------------------------------


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeKafkaAdmin:
    admin = FakeKafkaAdmin(brokers={1: None, 2: None, 3: None, 4: None})
    admin.create_topic("orders", {0: [1, 2], 1: [2, 3], 2: [3, 1]})
    admin.create_topic("payments", {0: [1, 2, 3]})
    admin.create_topic("other", {0: [1]})
    connected: list[tuple[str, int]] = []

    def connect(
        bootstrap_servers: str, request_timeout_ms: int, command_config: Path | None = None
    ) -> FakeKafkaAdmin:
        connected.append((bootstrap_servers, request_timeout_ms))
        admin.closed = False  # a new connection for each command run
        return admin

    monkeypatch.setattr(cli, "connect", connect)
    admin.connected = connected  # type: ignore[attr-defined]
    return admin


def generate(*extra: str, stdin: str | None = None) -> Result:
    base = ["generate", "--bootstrap-server", "k:9092", "--broker-list", "2,3,4", "--name", "g"]
    return run(*base, *extra, stdin=stdin)


def test_generate_prints_the_current_assignment_and_a_manifest(fake: FakeKafkaAdmin) -> None:
    result = generate("--topics", "orders,payments", "--start-index", "0", "--namespace", "k")
    (doc,) = documents(result)
    assert doc["metadata"] == {"name": "g", "namespace": "k"}
    assert doc["spec"]["partitions"] == [
        {"topic": "orders", "partition": 0, "replicas": [2, 3]},
        {"topic": "orders", "partition": 1, "replicas": [3, 4]},
        {"topic": "orders", "partition": 2, "replicas": [4, 2]},
        {"topic": "payments", "partition": 0, "replicas": [2, 3, 4]},
    ]
    current_json = result.stderr.split("Current partition replica assignment\n")[1].splitlines()[0]
    current = parse_reassignment_json(current_json)
    assert [(t.key, t.replicas) for t in current] == [
        (("orders", 0), [1, 2]),
        (("orders", 1), [2, 3]),
        (("orders", 2), [3, 1]),
        (("payments", 0), [1, 2, 3]),
    ]
    assert "Proposed: 4 of 4 partitions change (without racks, brokers [2, 3, 4])" in (
        result.stderr
    )
    assert fake.closed
    assert fake.connected == [("k:9092", 30000)]  # type: ignore[attr-defined]


def test_generate_keeps_only_changed_partitions_unless_asked(fake: FakeKafkaAdmin) -> None:
    fake.create_topic("t", {0: [2, 3], 1: [3, 4], 2: [4, 2], 3: [2, 3]})
    args = ("--topics", "t", "--start-index", "0", "--throttle", "1000")
    (doc,) = documents(generate(*args))
    assert doc["spec"]["partitions"] == [{"topic": "t", "partition": 3, "replicas": [2, 4]}]
    assert doc["spec"]["throttle"] == {"replicationRate": 1000}
    (whole,) = documents(generate(*args, "--all-partitions"))
    assert [p["partition"] for p in whole["spec"]["partitions"]] == [0, 1, 2, 3]


def test_generate_with_nothing_to_move_prints_no_manifest(fake: FakeKafkaAdmin) -> None:
    fake.create_topic("t", {0: [2, 3], 1: [3, 4], 2: [4, 2]})
    result = generate("--topics", "t", "--start-index", "0")
    assert result.exit_code == 0
    assert result.stdout == ""
    assert "nothing to move" in result.stderr


def test_generate_reads_a_topics_to_move_file(fake: FakeKafkaAdmin, tmp_path: Path) -> None:
    path = tmp_path / "topics.json"
    path.write_text('{"version": 1, "topics": [{"topic": "payments"}]}')
    (doc,) = documents(generate("--topics-to-move-json-file", str(path), "--seed", "1"))
    (entry,) = doc["spec"]["partitions"]
    assert entry["topic"] == "payments" and sorted(entry["replicas"]) == [2, 3, 4]


def test_generate_is_rack_aware_unless_disabled(fake: FakeKafkaAdmin) -> None:
    fake.brokers = {1: "a", 2: "a", 3: "b", 4: None}
    message = failed(generate("--topics", "orders"))
    assert "have no rack while others do" in message
    (doc,) = documents(generate("--topics", "orders", "--disable-rack-aware", "--all-partitions"))
    assert len(doc["spec"]["partitions"]) == 3
    fake.brokers[4] = "b"
    result = generate("--topics", "orders", "--all-partitions")
    (racked,) = documents(result)
    for entry in racked["spec"]["partitions"]:
        assert {fake.brokers[b] for b in entry["replicas"]} == {"a", "b"}
    assert "rack-aware" in result.stderr


def test_generate_notes_reassignments_in_flight(fake: FakeKafkaAdmin) -> None:
    assert fake.alter_partition_reassignments({("orders", 0): [4, 2]}) == {("orders", 0): None}
    result = generate("--topics", "orders")
    assert result.exit_code == 0, result.stderr
    assert "a reassignment of orders-0 is in flight (adding [4], removing [1])" in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--topics", "orders,nope"], "topics not in the cluster: nope"),
        (["--topics", "orders", "--broker-list", "2,9"], "brokers not in the cluster: 9"),
        (["--topics", "orders", "--broker-list", "2,x"], "--broker-list: 'x' is not a broker id"),
        (["--topics", "orders", "--broker-list", "2,\u00b2"], "is not a broker id"),
        (["--topics", "orders", "--broker-list", "2,-3"], "'-3' is not a broker id"),
        (["--topics", "orders", "--broker-list", "2,2"], "more than once"),
        (["--topics", "payments", "--broker-list", "2,3"], "replication factor 3"),
        (["--topics", "orders,"], "--topics: empty entry"),
        ([], "give exactly one of --topics and --topics-to-move-json-file"),
        (
            ["--topics", "a", "--topics-to-move-json-file", "f"],
            "give exactly one of --topics and --topics-to-move-json-file",
        ),
        (["--topics-to-move-json-file", "-"], "invalid topics-to-move JSON"),
        (["--topics", "orders", "--name", "Not_OK"], "name: 'Not_OK' is not a valid"),
    ],
)
def test_generate_errors(fake: FakeKafkaAdmin, args: list[str], message: str) -> None:
    assert message in failed(generate(*args, stdin='{"topics": []}'))


def test_generate_reports_an_unreachable_cluster(fake: FakeKafkaAdmin) -> None:
    fake.fail_next.append(KafkaUnavailableError("connect: no brokers available"))
    assert "connect: no brokers available" in failed(generate("--topics", "orders"))
    assert fake.closed


def test_generate_refuses_a_bad_command_config(tmp_path: Path) -> None:
    config = tmp_path / "client.properties"
    config.write_text("security.protocol=SASL_SSL\nsasl.mechanism=GSSAPI\n")
    result = CliRunner().invoke(
        cli.app,
        [
            "generate",
            "--bootstrap-server",
            "127.0.0.1:1",
            "--broker-list",
            "1,2",
            "--topics",
            "orders",
            "--name",
            "x",
            "--command-config",
            str(config),
        ],
    )
    assert result.exit_code == 1
    assert "sasl.mechanism: GSSAPI is not supported" in result.output
