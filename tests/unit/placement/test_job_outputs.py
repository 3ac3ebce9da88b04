"""The plan pipeline after aggregation: plan, waves, manifests, report and files (no Spark)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from kpo_kafka.manifests import parse_manifests
from kpo_placement.aggregate import AggregateOptions, AggregateResult, PartitionLoad
from kpo_placement.job import JobOptions, plan_model, replica_move
from kpo_placement.model import ClusterModel
from kpo_placement.planner import PlanOptions
from kpo_placement.snapshot import SnapshotMetadata
from kpo_placement.synthetic import SyntheticSpec, synthetic_cluster
from kpo_placement.waves import split_into_waves


def aggregated(model: ClusterModel) -> AggregateResult:
    zeros = np.zeros(model.num_partitions)
    load = PartitionLoad(
        np.zeros(model.num_partitions, dtype=np.int64), zeros, zeros, zeros, zeros, zeros, zeros
    )
    meta = SnapshotMetadata(None, 1_763_798_400_000, "synthetic", 120.0)
    return AggregateResult(model, load, meta, AggregateOptions())


@pytest.fixture
def model() -> ClusterModel:
    return synthetic_cluster(SyntheticSpec(brokers=5, partitions=60, empty_brokers=1, seed=2))


def test_rebalance_writes_manifests_matching_the_plan(model: ClusterModel, tmp_path: Path) -> None:
    job = JobOptions(
        out=tmp_path / "out", namespace="kafka", throttle=10 << 20, max_moves_per_broker=None
    )
    result = plan_model(aggregated(model), PlanOptions(), job)
    assert result.name == "kpo-plan-20251122-080000"
    assert result.plan.moves
    (wave,) = result.waves
    assert [(m.topic, m.partition, m.new_replicas) for m in wave] == [
        (m.topic, m.partition, m.new_replicas) for m in result.plan.moves
    ]
    parsed = parse_manifests(result.manifests)
    targets = {(t.topic, t.partition): tuple(t.replicas) for p in parsed for t in p.spec.partitions}
    assert targets == {(m.topic, m.partition): m.new_replicas for m in result.plan.moves}
    assert all(p.spec.suspend for p in parsed)
    files = {p.relative_to(job.out).as_posix() for p in result.files}
    assert files == {
        f"manifests/{result.name}-wave-1.yaml",
        "manifests.yaml",
        "report.txt",
        "report.png",
        "plan.json",
    }
    assert list(yaml.safe_load_all((job.out / "manifests.yaml").read_text())) == result.manifests
    summary = json.loads((job.out / "plan.json").read_text())
    assert summary["name"] == result.name
    assert summary["options"]["throttle"] == 10 << 20
    assert len(summary["moves"]) == len(result.plan.moves)
    assert summary["waves"][0]["bytes_to_move"] == int(result.plan.bytes_moved)
    assert summary["waves"][0]["predicted_seconds"] > 0
    assert (job.out / "report.txt").read_text() == result.report_text
    assert "wave 1" in result.report_text
    empty = int(model.broker_ids[-1])
    assert any(empty in m.new_replicas for m in result.plan.moves)


def test_replica_move_carries_the_current_leader_and_size(
    model: ClusterModel, tmp_path: Path
) -> None:
    result = plan_model(aggregated(model), PlanOptions(), JobOptions(out=tmp_path))
    move = result.plan.moves[0]
    converted = replica_move(model, move)
    assert converted.leader == int(model.broker_ids[model.leaders[move.p]])
    assert converted.size_bytes == int(model.size_bytes[move.p])
    assert converted.bytes_to_move == pytest.approx(move.bytes_moved, abs=len(move.adding))


def test_remove_brokers_drains_and_leaders_mode_copies_nothing(
    model: ClusterModel, tmp_path: Path
) -> None:
    removed = int(model.broker_ids[0])
    drained = plan_model(
        aggregated(model),
        PlanOptions(mode="remove-brokers", brokers_to_remove=(removed,)),
        JobOptions(out=tmp_path / "remove", name="drain-0"),
    )
    assert all(removed not in m.new_replicas for m in drained.plan.moves)
    assert drained.report.after[0].tolist()[:4] == [0.0, 0.0, 0.0, 0.0]
    assert "0 (out)" in drained.report_text
    leaders = plan_model(
        aggregated(model),
        PlanOptions(mode="leaders"),
        JobOptions(out=tmp_path / "leaders", name="lead", run_now=True),
    )
    assert all(set(m.old_replicas) == set(m.new_replicas) for m in leaders.plan.moves)
    assert all(m.bytes_to_move == 0 for wave in leaders.waves for m in wave)
    assert leaders.report.lower_bound is None and "n/a" in leaders.report_text
    for obj in leaders.manifests:
        assert "suspend" not in obj["spec"]
        assert obj["spec"]["preferredLeaderElection"] is True


def test_waves_cap_each_brokers_copies_and_keep_every_move(
    model: ClusterModel, tmp_path: Path
) -> None:
    throttle = 4 << 20
    job = JobOptions(out=tmp_path, name="capped", throttle=throttle, max_moves_per_broker=2)
    result = plan_model(aggregated(model), PlanOptions(), job)
    assert len(result.waves) > 1
    flat = sorted((m.topic, m.partition) for wave in result.waves for m in wave)
    assert flat == sorted((m.topic, m.partition) for m in result.plan.moves)
    for wave in result.waves:
        sent: dict[int, int] = {}
        received: dict[int, int] = {}
        for m in wave:
            if m.adding:
                sent[m.leader] = sent.get(m.leader, 0) + 1
            for b in m.adding:
                received[b] = received.get(b, 0) + 1
        assert max(sent.values(), default=0) <= 2
        assert max(received.values(), default=0) <= 2
    labels = [int(o["metadata"]["labels"]["kpo.dev/wave"]) for o in result.manifests]
    assert labels == list(range(1, len(result.waves) + 1))
    assert [o["metadata"]["name"] for o in result.manifests] == [f"capped-wave-{n}" for n in labels]
    # the annotation's prediction equals the waves module's for the same throttle
    leaders = {m.p: int(model.broker_ids[model.leaders[m.p]]) for m in result.plan.moves}
    expected = split_into_waves(
        result.plan.moves,
        throttle_bytes_per_s=throttle,
        max_incoming_per_broker=2,
        max_outgoing_per_broker=2,
        leaders=leaders,
    )
    annotated = [
        float(o["metadata"]["annotations"]["kpo.dev/predicted-duration-seconds"])
        for o in result.manifests
    ]
    assert annotated == pytest.approx([w.predicted_duration_s for w in expected], abs=0.06)
    assert [len(w) for w in result.waves] == [len(w.moves) for w in expected]
