"""Plan waves -> PartitionReassignment manifests: CRD validity, waves, labels, split, YAML."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kpo_kafka.manifests import ManifestError, parse_manifests
from kpo_kafka.specs import PartitionReassignmentSpec
from kpo_placement.manifests import (
    BYTES_ANNOTATION,
    DURATION_ANNOTATION,
    PLAN_LABEL,
    SECONDS_ANNOTATION,
    WAVE_BYTES_ANNOTATION,
    WAVE_LABEL,
    WAVE_SECONDS_ANNOTATION,
    ManifestSettings,
    ReplicaMove,
    manifests_yaml,
    predicted_seconds,
    wave_manifests,
    write_manifests,
)

MIB = 1 << 20


def move(
    p: int, old: tuple[int, ...], new: tuple[int, ...], size: int = MIB, topic: str = "t"
) -> ReplicaMove:
    return ReplicaMove(topic, p, old, new, old[0], size)


def test_move_bytes_and_preferred_leader() -> None:
    m = move(0, (0, 1), (2, 1, 3), size=100)
    assert m.adding == (2, 3)
    assert m.bytes_to_move == 200
    assert m.changes_preferred_leader
    assert move(0, (0, 1), (0, 1)).bytes_to_move == 0
    assert not move(0, (0, 1), (0, 2)).changes_preferred_leader


def test_predicted_duration_is_the_busiest_broker_over_the_throttle() -> None:
    # leader 0 sends 2 MiB (two partitions to broker 2), broker 2 receives 2 MiB,
    # leader 1 sends 1 MiB to broker 3
    moves = [move(0, (0, 1), (2, 1)), move(1, (0, 1), (1, 2)), move(2, (1, 0), (3, 0))]
    assert predicted_seconds(moves, MIB) == pytest.approx(2.0)
    assert predicted_seconds(moves, None) is None
    assert predicted_seconds([move(0, (0, 1), (1, 0))], MIB) == 0.0


def test_one_suspended_object_per_wave_with_labels_annotations_and_throttle() -> None:
    waves = [
        [move(0, (0, 1), (2, 1)), move(1, (0, 1), (0, 2))],
        [],
        [move(2, (1, 2), (2, 1))],
    ]
    settings = ManifestSettings("rebalance-1", namespace="kafka", throttle=MIB)
    objects = wave_manifests(waves, settings)
    assert [o["metadata"]["name"] for o in objects] == ["rebalance-1-wave-1", "rebalance-1-wave-3"]
    first, third = objects
    assert first["apiVersion"] == "kpo.dev/v1alpha1" and first["kind"] == "PartitionReassignment"
    assert first["metadata"]["namespace"] == "kafka"
    assert first["metadata"]["labels"] == {PLAN_LABEL: "rebalance-1", WAVE_LABEL: "1"}
    assert third["metadata"]["labels"][WAVE_LABEL] == "3"
    notes = first["metadata"]["annotations"]
    assert notes[BYTES_ANNOTATION] == str(2 * MIB)
    assert notes[SECONDS_ANNOTATION] == "2.0"
    assert notes[DURATION_ANNOTATION] == "2s"
    assert WAVE_BYTES_ANNOTATION not in notes
    assert third["metadata"]["annotations"][BYTES_ANNOTATION] == "0"
    for obj in objects:
        spec = PartitionReassignmentSpec.from_object(obj)
        assert spec.suspend is True
        assert spec.throttle is not None and spec.throttle.replication_rate == MIB
    spec = PartitionReassignmentSpec.from_object(first)
    assert [(t.topic, t.partition, t.replicas) for t in spec.partitions] == [
        ("t", 0, [2, 1]),
        ("t", 1, [0, 2]),
    ]
    # wave 1 changes t-0's preferred leader, so it asks for a preferred election
    assert spec.preferred_leader_election is True
    assert PartitionReassignmentSpec.from_object(third).preferred_leader_election is True


def test_run_now_and_no_throttle() -> None:
    (obj,) = wave_manifests([[move(0, (0, 1), (0, 2))]], ManifestSettings("p", run_now=True))
    spec = PartitionReassignmentSpec.from_object(obj)
    assert spec.suspend is False and spec.throttle is None and not spec.preferred_leader_election
    assert "namespace" not in obj["metadata"]
    assert obj["metadata"]["annotations"][DURATION_ANNOTATION] == "unthrottled"
    assert SECONDS_ANNOTATION not in obj["metadata"]["annotations"]


def test_a_wave_above_2000_partitions_is_split_and_keeps_its_wave_label() -> None:
    wave = [move(p, (0, 1), (1, 2), size=10) for p in range(4500)]
    objects = wave_manifests([wave], ManifestSettings("big", throttle=10))
    assert [o["metadata"]["name"] for o in objects] == [
        "big-wave-1-1",
        "big-wave-1-2",
        "big-wave-1-3",
    ]
    assert [len(o["spec"]["partitions"]) for o in objects] == [2000, 2000, 500]
    assert {o["metadata"]["labels"][WAVE_LABEL] for o in objects} == {"1"}
    assert [o["metadata"]["annotations"][BYTES_ANNOTATION] for o in objects] == [
        "20000",
        "20000",
        "5000",
    ]
    # every partition is led by 0 and moves to 2: broker 0 sends 45000 bytes at 10 B/s
    assert {o["metadata"]["annotations"][WAVE_BYTES_ANNOTATION] for o in objects} == {"45000"}
    assert {o["metadata"]["annotations"][WAVE_SECONDS_ANNOTATION] for o in objects} == {"4500.0"}
    assert objects[2]["spec"]["partitions"][0]["partition"] == 4000
    parsed = parse_manifests(objects)
    assert sum(len(m.spec.partitions) for m in parsed) == 4500


def test_invalid_plan_name_and_moves_are_refused() -> None:
    with pytest.raises(ManifestError, match="plan: 'Bad_Name'"):
        wave_manifests([[move(0, (0,), (1,))]], ManifestSettings("Bad_Name"))
    with pytest.raises(ManifestError, match="plan: "):
        wave_manifests([[move(0, (0,), (1,))]], ManifestSettings("x" * 64))
    with pytest.raises(ManifestError, match="throttle"):
        wave_manifests([[move(0, (0,), (1,))]], ManifestSettings("ok", throttle=0))


def test_yaml_text_and_files_read_back(tmp_path: Path) -> None:
    objects = wave_manifests(
        [[move(0, (0, 1), (0, 2))], [move(1, (1, 2), (1, 0))]], ManifestSettings("p", throttle=5)
    )
    documents = list(yaml.safe_load_all(manifests_yaml(objects)))
    assert documents == objects
    paths = write_manifests(objects, tmp_path / "manifests")
    assert [p.name for p in paths] == ["p-wave-1.yaml", "p-wave-2.yaml"]
    assert [yaml.safe_load(p.read_text()) for p in paths] == objects
