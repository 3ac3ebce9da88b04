"""Rendering helpers shared by the chart tests: run the real helm binary, parse its output."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

from kpo_devenv.tools import tool_path
from tests.conftest import REPO_ROOT

CHART = REPO_ROOT / "charts" / "kpo"
VALUES_DIR = Path(__file__).resolve().parent
# name -> values files; "default" uses the chart's values.yaml only.
VALUE_SETS: dict[str, list[Path]] = {
    "default": [],
    "big": [VALUES_DIR / "values-big.yaml"],
    "minimal": [VALUES_DIR / "values-minimal.yaml"],
}

Manifest = dict[str, Any]


def helm(*args: str) -> subprocess.CompletedProcess[str]:
    """Run helm with ``args``; never raises on a non-zero exit."""
    return subprocess.run(
        [str(tool_path("helm")), *args], capture_output=True, text=True, check=False, timeout=120
    )


def value_args(value_set: str, sets: tuple[str, ...] = ()) -> list[str]:
    """``-f``/``--set`` arguments for a named value set plus extra ``key=value`` settings."""
    args: list[str] = []
    for path in VALUE_SETS[value_set]:
        args += ["-f", str(path)]
    for item in sets:
        args += ["--set", item]
    return args


def render_text(value_set: str, *sets: str, namespace: str = "kafka") -> str:
    """``helm template`` output for the value set; asserts that rendering succeeded."""
    result = helm(
        "template", "kpo", str(CHART), "--namespace", namespace, *value_args(value_set, sets)
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def render(value_set: str, *sets: str, namespace: str = "kafka") -> list[Manifest]:
    """The rendered objects (no CRDs) as dicts."""
    text = render_text(value_set, *sets, namespace=namespace)
    return [doc for doc in yaml.safe_load_all(text) if doc]


def find(objects: list[Manifest], kind: str, name_suffix: str = "") -> list[Manifest]:
    """Objects of ``kind`` whose name ends with ``name_suffix``."""
    return [o for o in objects if o["kind"] == kind and o["metadata"]["name"].endswith(name_suffix)]


def pod_specs(objects: list[Manifest]) -> list[tuple[str, Manifest]]:
    """``(kind/name, pod spec)`` of every workload: StatefulSet, Deployment, Job, CronJob, Pod."""
    specs: list[tuple[str, Manifest]] = []
    for obj in objects:
        label = f"{obj['kind']}/{obj['metadata']['name']}"
        if obj["kind"] in ("StatefulSet", "Deployment", "Job"):
            specs.append((label, obj["spec"]["template"]["spec"]))
        elif obj["kind"] == "CronJob":
            specs.append((label, obj["spec"]["jobTemplate"]["spec"]["template"]["spec"]))
        elif obj["kind"] == "Pod":
            specs.append((label, obj["spec"]))
    return specs
