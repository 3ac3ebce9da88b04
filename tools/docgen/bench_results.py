"""``docs/benchmarks/results.md``: every benchmark run recorded in ``bench/results/``.

Each file there is the record of one ``python -m kpo_bench`` run
(:mod:`kpo_bench.run_record`); the page shows a table per run, newest first.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tools.docgen.common import ROOT, code, header, table

PAGE = "docs/benchmarks/results.md"
RESULTS = "bench/results"

_OURS = "kpo"
_BASELINE = "apache-kafka"


def _number(value: Any, unit: str) -> str:
    if value is None:
        return "-"
    number = float(value)
    digits = 3 if abs(number) < 10 else 1
    text = f"{number:,.{digits}f}".rstrip("0").rstrip(".") if digits == 3 else f"{number:,.1f}"
    return f"{text} {unit}".strip()


def _ratio(value: Any, meaning: str) -> str:
    if value is None:
        return "-"
    return f"{float(value):.2f}x" + (f" ({meaning})" if meaning else "")


def _target(metric: dict[str, Any]) -> str:
    target = str(metric.get("target") or "")
    if not target:
        return "-"
    verdict = {True: "met", False: "missed", None: "n/a"}[metric.get("meets_target")]
    return f"{target}: {verdict}"


def _machine(machine: dict[str, Any]) -> str:
    def load(key: str) -> str:
        value = machine.get(key)
        return " / ".join(f"{x:.2f}" for x in value) if value else "n/a"

    parts = [
        f"{machine.get('cpu', 'unknown CPU')}, {machine.get('cores', '?')} cores, "
        f"{machine.get('memory_gib', '?')} GiB",
        f"Linux {machine.get('kernel', '?')}",
        f"Python {machine.get('python', '?')}",
        str(machine.get("java") or "Java unknown"),
    ]
    if machine.get("kafka"):
        parts.append(f"Apache Kafka {machine['kafka']}")
    if machine.get("kpo"):
        parts.append(f"kpo {machine['kpo']}")
    return (
        "; ".join(parts)
        + f"; load average (1/5/15 min) {load('load_average_start')} at the start, "
        + f"{load('load_average_end')} at the end"
    )


def run_section(name: str, record: dict[str, Any]) -> str:
    """Return the section of one run: its facts and a table of its metrics."""
    out = [f"## {record.get('started_utc', '?')[:10]}: {record.get('name', name)}\n"]
    out.append(
        table(
            ["", ""],
            [
                ["file", code(f"{RESULTS}/{name}")],
                ["started (UTC)", record.get("started_utc", "?")],
                ["duration", f"{float(record.get('duration_s', 0)):.0f} s"],
                ["command", code(record.get("command", "?"))],
                ["machine", _machine(record.get("machine", {}))],
            ],
        )
    )
    metrics = record.get("metrics", [])
    if not metrics:
        out.append("No metric recorded.\n")
        return "\n".join(out)
    baselines = sorted({str(m.get("baseline_label") or "") for m in metrics} - {""})
    if baselines:
        out.append("Baseline: " + "; ".join(baselines) + ".\n")
    out.append(
        table(
            ["metric", "kpo", "baseline", "ratio", "target"],
            (
                [
                    m.get("label", m.get("key", "?")),
                    _number(m.get(_OURS), str(m.get("unit", ""))),
                    _number(m.get(_BASELINE), str(m.get("unit", ""))),
                    _ratio(m.get("ratio"), str(m.get("ratio_meaning") or "")),
                    _target(m),
                ]
                for m in metrics
            ),
        )
    )
    return "\n".join(out)


def records(folder: Path) -> list[tuple[str, dict[str, Any]]]:
    """Return (file name, record) of every ``*.json`` of ``folder``, newest first."""
    found = [(p.name, json.loads(p.read_text())) for p in folder.glob("*.json")]
    return sorted(
        found, key=lambda item: (str(item[1].get("started_utc", "")), item[0]), reverse=True
    )


def generate(folder: Path | None = None) -> str:
    """Return the page for the records of ``folder`` (default ``bench/results``)."""
    found = records(folder or ROOT / RESULTS)
    text = header(
        "Benchmark results",
        (f"{RESULTS}/*.json",),
        "Every benchmark run recorded in `bench/results/`, newest first: what ran, on which "
        "machine, and each metric for kpo and its baseline (Apache Kafka measured in the "
        "same run on the same machine, or Kafka's own algorithm for the placement "
        "benchmark). A ratio above 1 means kpo did better: kpo/Kafka for rates, Kafka/kpo "
        "for durations and other costs. `make bench` (or `python -m kpo_bench`) adds a "
        "file; see [Running the benchmarks](index.md).",
    )
    if not found:
        return text + "No run recorded yet.\n"
    return text + "\n".join(run_section(name, record) for name, record in found)
