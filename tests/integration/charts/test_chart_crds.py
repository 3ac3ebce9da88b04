"""The chart as helm sees it: lint-clean, and it carries the project's CRDs."""

import subprocess

import pytest
import yaml

from kpo_devenv.tools import tool_path
from tests.conftest import CRDS_DIR, REPO_ROOT

pytestmark = pytest.mark.integration

CHART = REPO_ROOT / "charts" / "kpo"


def _helm(*args: str) -> str:
    result = subprocess.run(
        [str(tool_path("helm")), *args], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_helm_lint_strict_passes() -> None:
    assert "1 chart(s) linted, 0 chart(s) failed" in _helm("lint", "--strict", str(CHART))


def test_helm_show_crds_lists_the_project_crds() -> None:
    shown = [d for d in yaml.safe_load_all(_helm("show", "crds", str(CHART))) if d]
    ours = [yaml.safe_load(p.read_text()) for p in sorted(CRDS_DIR.glob("*.yaml"))]
    assert sorted(d["metadata"]["name"] for d in shown) == sorted(
        d["metadata"]["name"] for d in ours
    )
