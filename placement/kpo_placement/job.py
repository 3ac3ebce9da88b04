"""The placement job: snapshot -> Spark aggregation -> plan -> waves -> manifests and report.

:func:`run_plan` is the whole ``plan`` command without the command line: it reads a
snapshot directory, builds the model in Spark (:mod:`kpo_placement.aggregate`), plans
(:func:`kpo_placement.planner.plan`), cuts the moves into waves
(:mod:`kpo_placement.waves`), builds one PartitionReassignment per wave
(:mod:`kpo_placement.manifests`) and the report (:mod:`kpo_placement.report`), and writes
everything under ``out``:

================================ ============================================================
``manifests/<name>.yaml``        one file per PartitionReassignment object
``manifests.yaml``               all objects as one multi-document YAML (``kubectl apply -f``)
``report.txt`` / ``report.png``  the tables and the per-broker chart
``plan.json``                    plan name, options, waves (bytes, predicted s), moves, stats
================================ ============================================================

Applying (creating the objects in Kubernetes) is a separate step, :func:`apply_plan`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from kpo_placement.aggregate import AggregateOptions, AggregateResult, aggregate_snapshot
from kpo_placement.manifests import (
    ManifestSettings,
    ReplicaMove,
    apply_manifests,
    manifests_yaml,
    predicted_seconds,
    wave_manifests,
    write_manifests,
)
from kpo_placement.model import ClusterModel
from kpo_placement.planner import Move, Plan, PlanOptions, plan
from kpo_placement.report import PlanReport, WaveSummary, build_report, render_report, save_chart
from kpo_placement.waves import split_into_waves

Scorer = Literal["numpy", "spark"]
"""Where the planner's candidate rounds are scored: on the driver or in Spark."""


@dataclass(frozen=True)
class JobOptions:
    """Options of :func:`run_plan` besides the planner's own.

    Attributes:
        out: Output directory (created).
        name: Plan name (object prefix, ``kpo.dev/plan`` label); ``None`` derives
            ``kpo-plan-<UTC time of the snapshot>``.
        namespace: ``metadata.namespace`` of the manifests (``None``: left out).
        throttle: Replication throttle, bytes/s (``None``: unthrottled).
        max_moves_per_broker: Partition copies a broker sends or receives per wave
            (``None``: no cap).
        max_bytes_per_wave: Bytes copied per wave at most (``None``: no cap); with
            neither cap the plan is one wave.
        run_now: Leave ``spec.suspend`` false.
        scorer: ``numpy`` or ``spark`` candidate scoring.
        aggregate: How load samples feed the model.
    """

    out: Path
    name: str | None = None
    namespace: str | None = None
    throttle: int | None = None
    max_moves_per_broker: int | None = 5
    max_bytes_per_wave: float | None = None
    run_now: bool = False
    scorer: Scorer = "numpy"
    aggregate: AggregateOptions = field(default_factory=AggregateOptions)


@dataclass(frozen=True)
class JobResult:
    """What :func:`run_plan` produced.

    Attributes:
        name: The plan name.
        aggregated: The model and its load statistics.
        plan: The planner's result.
        waves: Moves per wave (wave 1 first).
        manifests: The PartitionReassignment objects.
        report: The report numbers.
        report_text: The report as text.
        files: Paths written.
    """

    name: str
    aggregated: AggregateResult
    plan: Plan
    waves: list[list[ReplicaMove]]
    manifests: list[dict[str, Any]]
    report: PlanReport
    report_text: str
    files: list[Path]


def default_plan_name(taken_at_ms: int) -> str:
    """Return ``kpo-plan-YYYYMMDD-HHMMSS`` for a snapshot time (UTC), ms since the epoch."""
    moment = datetime.fromtimestamp(taken_at_ms / 1000, tz=UTC)
    return moment.strftime("kpo-plan-%Y%m%d-%H%M%S")


def replica_move(model: ClusterModel, move: Move) -> ReplicaMove:
    """Return the manifest view of a planner :class:`Move` (current leader and size added)."""
    leader = int(model.leaders[move.p])
    return ReplicaMove(
        topic=move.topic,
        partition=move.partition,
        old_replicas=move.old_replicas,
        new_replicas=move.new_replicas,
        leader=int(model.broker_ids[leader]) if leader >= 0 else -1,
        size_bytes=int(model.size_bytes[move.p]),
    )


def split_waves(
    model: ClusterModel,
    planned: Plan,
    max_moves_per_broker: int | None,
    max_bytes_per_wave: float | None = None,
) -> list[list[Move]]:
    """Cut the plan's moves into waves (:func:`kpo_placement.waves.split_into_waves`).

    A broker sends (as current leader) and receives at most ``max_moves_per_broker``
    partition copies per wave; ``None`` puts every move in one wave. Moves that only
    reorder replicas ride in the first wave.

    Raises:
        WaveError: ``max_moves_per_broker`` below 1 or ``max_bytes_per_wave`` not positive.
    """
    if not planned.moves:
        return []
    if max_moves_per_broker is None and max_bytes_per_wave is None:
        return [list(planned.moves)]
    cap = max_moves_per_broker if max_moves_per_broker is not None else len(planned.moves)
    leaders = {
        m.p: int(model.broker_ids[model.leaders[m.p]])
        for m in planned.moves
        if model.leaders[m.p] >= 0
    }
    waves = split_into_waves(
        planned.moves,
        throttle_bytes_per_s=1.0,  # durations are computed per object by manifests.py
        max_incoming_per_broker=cap,
        max_outgoing_per_broker=cap,
        max_bytes_per_wave=max_bytes_per_wave,
        leaders=leaders,
    )
    return [list(w.moves) for w in waves]


def _scorer(kind: Scorer, spark: Any) -> Any:
    if kind == "numpy":
        return None
    if spark is None:
        raise ValueError("the spark scorer needs a Spark session")
    from kpo_placement.spark_scorer import SparkScorer

    return SparkScorer(spark)


def _plan_json(
    name: str, options: PlanOptions, job: JobOptions, result: Plan, waves: Sequence[WaveSummary]
) -> dict[str, Any]:
    stats = result.stats
    return {
        "name": name,
        "options": {**asdict(options), "throttle": job.throttle, "scorer": job.scorer},
        "aggregate": asdict(job.aggregate),
        "bytes_moved": stats.bytes_moved,
        "bytes_lower_bound": stats.bytes_lower_bound,
        "balanced": stats.balanced,
        "rounds": stats.rounds,
        "imbalance_before": stats.imbalance_before.max_over_mean,
        "imbalance_after": stats.imbalance_after.max_over_mean,
        "waves": [asdict(w) for w in waves],
        "moves": [
            {
                "topic": m.topic,
                "partition": m.partition,
                "old_replicas": list(m.old_replicas),
                "new_replicas": list(m.new_replicas),
                "bytes_moved": m.bytes_moved,
            }
            for m in result.moves
        ],
    }


def run_plan(spark: Any, snapshot_dir: Path, options: PlanOptions, job: JobOptions) -> JobResult:
    """Plan from the snapshot in ``snapshot_dir`` and write the outputs under ``job.out``.

    Raises:
        SnapshotError: The snapshot is invalid.
        PlanError: No plan can be made (see :mod:`kpo_placement.planner`).
        ManifestError: The plan name or a move does not fit the CRD.
        OSError: The output cannot be written.
    """
    aggregated = aggregate_snapshot(spark, snapshot_dir, job.aggregate)
    return plan_model(aggregated, options, job, spark)


def plan_model(
    aggregated: AggregateResult, options: PlanOptions, job: JobOptions, spark: Any = None
) -> JobResult:
    """Plan an aggregated model and write the outputs (:func:`run_plan` after aggregation).

    ``spark`` is needed only for ``job.scorer == "spark"``.

    Raises:
        PlanError: No plan can be made (see :mod:`kpo_placement.planner`).
        ManifestError: The plan name or a move does not fit the CRD.
        OSError: The output cannot be written.
    """
    model = aggregated.model
    name = job.name or default_plan_name(aggregated.metadata.taken_at_ms)
    planned = plan(model, options, _scorer(job.scorer, spark))
    waves = [
        [replica_move(model, m) for m in wave]
        for wave in split_waves(model, planned, job.max_moves_per_broker, job.max_bytes_per_wave)
    ]
    settings = ManifestSettings(name, job.namespace, job.throttle, job.run_now)
    manifests = wave_manifests(waves, settings)
    summaries = [
        WaveSummary(
            number,
            len(wave),
            sum(m.bytes_to_move for m in wave),
            predicted_seconds(wave, job.throttle),
        )
        for number, wave in enumerate(waves, start=1)
    ]
    removed = options.brokers_to_remove if options.mode == "remove-brokers" else ()
    report = build_report(
        model,
        planned.target,
        removed=removed,
        tolerance=options.balance_tolerance,
        disk_threshold=options.disk_threshold,
        max_replicas_per_broker=options.max_replicas_per_broker,
        waves=summaries,
        with_bound=options.mode != "leaders",
    )
    text = render_report(report)
    out = job.out
    out.mkdir(parents=True, exist_ok=True)
    files = write_manifests(manifests, out / "manifests")
    bundle = out / "manifests.yaml"
    bundle.write_text(manifests_yaml(manifests) if manifests else "")
    (out / "report.txt").write_text(text)
    chart = save_chart(report, out / "report.png")
    summary = out / "plan.json"
    summary.write_text(json.dumps(_plan_json(name, options, job, planned, summaries), indent=2))
    files += [bundle, out / "report.txt", chart, summary]
    return JobResult(name, aggregated, planned, waves, manifests, report, text, files)


def apply_plan(result: JobResult, api_client: Any, namespace: str) -> list[str]:
    """Create the plan's objects in ``namespace`` (see :func:`manifests.apply_manifests`).

    Raises:
        ApplyError: The API server refused an object.
    """
    return apply_manifests(result.manifests, api_client, namespace)
