from __future__ import annotations

from pathlib import Path

import pytest
from tools.check_wording import ROOT, line_hits, main, scan_files, scan_text, tracked_files


@pytest.mark.parametrize(
    ("line", "what"),
    [
        ("# Issue 15: consume through a group", "issue number"),
        ('"""Brokers come back (issue 16, part 1)."""', "issue number"),
        ("targets of issues 13 and 14", "issue number"),
        ("see issue #5", "issue number"),
        ("record_size: bytes (the issue's 1 KiB).", "reference to an issue"),
        ("restarts (the issue asks for >= 500 MB).", "reference to an issue"),
        ("Targets come from the benchmark issue: catch-up >= 1.0.", "reference to an issue"),
        ("def test_targets_are_the_issue_s() -> None:", "test named after an issue"),
        ("def test_issue_17_partitions() -> None:", "test named after an issue"),
        ("(three descriptors each before #17)", "#NN reference"),
        ("fixes #12", "#NN reference"),
        ("as done in this PR", "pull request or branch"),
        ("merged with PR #31", "pull request or branch"),
        ("measured in this session", "work session"),
        ("figures from an earlier session", "work session"),
        ("as every run since the stalls were fixed", "before/after story"),
        ("slower before the fix", "before/after story"),
        ("kept since this change", "before/after story"),
        ("figures measured 2026-11-26 on 2 cores", "date of work"),
        ("the soak (2026-11-26) stayed below 8 s", "date of work"),
        ("run on 26 Nov 2026", "date of work"),
        ("run on November 26, 2026", "date of work"),
        ("as of December 2026", "date of work"),
    ],
)
def test_work_history_is_found(line: str, what: str) -> None:
    assert what in line_hits(line)


@pytest.mark.parametrize(
    "line",
    [
        "Idempotent produce across leader changes (KIP-98).",
        "as Kafka does since KAFKA-12345",
        "stall for good, as in confluentinc/librdkafka#5301).",
        "see strimzi/strimzi-kafka-operator#3601",
        "(CPython gh-86296), the answer is written",
        "its PEM private key (PKCS#8, encrypted)",
        "the brokers' ``/brokers/ids/<id>`` znode",
        "broker #2 leads the partition; replica #3 follows",
        "`kill %1` stopped the operator",
        "html &#38; entity, url https://example.org/page#1",
        "def test_valid_spec_has_no_issues() -> None:",
        "``send()`` issues one kazoo async request",
        "Issue a client certificate signed by the CA.",
        "the throttle is raised: no longer over quota",
        "each broker's load before and after the plan",
        "Close this session and ask for a new one (``nextCloseExistingAttemptNew``).",
        "2026-11-26 09:53:12:345, 2026-11-26 09:53:29:012, 50.0000, 3.0035, 51200",
        "the leader after the change (its epoch)",
        "step 1: pick L, then create N partitions",
        "as in [step 2](#2-a-scram-user-and-acls-for-the-operator)",
        "## 2026-12-07: placement-quick",
    ],
)
def test_product_wording_passes(line: str) -> None:
    assert line_hits(line) == []


def test_hits_name_the_file_and_line() -> None:
    hits = list(scan_text("a/b.py", "x = 1\n# Issue 3: y\n"))
    assert [str(h) for h in hits] == ["a/b.py:2: issue number: # Issue 3: y"]


def test_binary_and_missing_files_are_skipped(tmp_path: Path) -> None:
    (tmp_path / "blob.bin").write_bytes(b"issue 17\0\x01")
    (tmp_path / "latin.txt").write_bytes(b"issue 17 \xe9")
    (tmp_path / "text.md").write_text("issue 17\n")
    names = ["blob.bin", "latin.txt", "gone.md", "text.md"]
    assert [h.path for h in scan_files(names, tmp_path)] == ["text.md"]


def test_recorded_results_and_the_checker_itself_are_not_scanned() -> None:
    names = tracked_files()
    assert "pyproject.toml" in names
    assert not [n for n in names if n.startswith("bench/results/")]
    assert "tools/check_wording.py" not in names


def test_main_exits_1_and_lists_the_hits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(ROOT)
    assert main(["pyproject.toml"]) == 0
    assert main(["tools/check_wording.py"]) == 0  # quotes the patterns: skipped
    capsys.readouterr()
    (tmp_path / "x.py").write_text("# Issue 15: consume through a group\n")
    monkeypatch.setattr("tools.check_wording.ROOT", tmp_path)
    assert main(["x.py"]) == 1
    assert capsys.readouterr().out == "x.py:1: issue number: # Issue 15: consume through a group\n"
