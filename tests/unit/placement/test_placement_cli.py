"""The command line without Spark: synthesize, and the errors found before Spark starts."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from kpo_placement.cli import app
from kpo_placement.job import default_plan_name
from kpo_placement.snapshot import read_snapshot

runner = CliRunner()


def test_synthesize_writes_a_valid_snapshot(tmp_path: Path) -> None:
    out = tmp_path / "snap"
    args = [
        "--brokers",
        "5",
        "--partitions",
        "40",
        "--empty-brokers",
        "1",
        "--samples",
        "4",
        "--seed",
        "7",
    ]
    result = runner.invoke(app, ["synthesize", "--out", str(out), *args])
    assert result.exit_code == 0, result.output
    snapshot = read_snapshot(out)
    assert snapshot.brokers.num_rows == 5
    assert snapshot.partitions.num_rows == 40
    assert snapshot.load_samples.num_rows == 4 * 40
    assert snapshot.metadata.source == "synthetic"
    assert snapshot.metadata.window_s == 40.0
    held = {b for replicas in snapshot.partitions.column("replicas").to_pylist() for b in replicas}
    assert 4 not in held  # the empty broker


def test_synthesize_refuses_an_impossible_spec(tmp_path: Path) -> None:
    result = runner.invoke(app, ["synthesize", "--out", str(tmp_path), "--brokers", "2"])
    assert result.exit_code == 2
    assert "rf 3 needs 3 brokers" in result.output


def test_plan_needs_exactly_one_input(tmp_path: Path) -> None:
    result = runner.invoke(app, ["plan", "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert "give a snapshot directory or --bootstrap-server" in result.output
    both = runner.invoke(app, ["plan", str(tmp_path), "--bootstrap-server", "localhost:1"])
    assert both.exit_code == 2


def test_plan_rejects_a_bad_snapshot_and_bad_options_before_spark(tmp_path: Path) -> None:
    result = runner.invoke(app, ["plan", str(tmp_path / "missing"), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert "error: brokers.parquet: missing" in result.output
    snap = tmp_path / "snap"
    assert runner.invoke(app, ["synthesize", "--out", str(snap)]).exit_code == 0
    for args, message in (
        (["--mode", "shuffle"], "--mode: 'shuffle' is not one of"),
        (["--brokers", "a,b"], "--brokers: 'a,b' is not a comma-separated id list"),
        (["--statistic", "median"], "error: --statistic: 'median' is not one of percentile, mean"),
        (["--percentile", "1.5"], "percentile must be in (0, 1]"),
        (["--scorer", "gpu"], "--scorer: 'gpu' is not one of numpy, spark"),
    ):
        bad = runner.invoke(app, ["plan", str(snap), "--out", str(tmp_path / "o"), *args])
        assert bad.exit_code == 2, (args, bad.output)
        assert message in bad.output
    assert not (tmp_path / "o").exists()


def test_default_plan_name_is_the_snapshot_time_in_utc() -> None:
    assert default_plan_name(1_763_798_400_000) == "kpo-plan-20251122-080000"
