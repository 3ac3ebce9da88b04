"""The main job with ZooKeeper, the three brokers and the operator in containers of the images.

The same :func:`kpo_devenv.demo.run_demo` as ``make demo`` (and ``make demo-containers``),
with a :class:`kpo_devenv.runner.ContainerRunner`: the throttled move must reach
``Completed`` and every record must read back from the new replicas; afterwards no
container of the run is left.
"""

from __future__ import annotations

import io
import subprocess
from pathlib import Path

import pytest
from rich.console import Console

from kpo_devenv.demo import DemoOptions, run_demo
from kpo_devenv.runner import LABEL

pytestmark = [pytest.mark.integration, pytest.mark.timeout(3000)]


def _demo_containers() -> list[str]:
    out = subprocess.run(
        ["podman", "ps", "-a", "--filter", f"label={LABEL}", "--format", "{{.Names}}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.split()
    return [name for name in out if not name.startswith("kpo-chart-")]


def test_main_job_with_every_component_in_a_container(
    images: dict[str, str], tmp_path: Path
) -> None:
    before = set(_demo_containers())
    output = io.StringIO()
    options = DemoOptions(
        workdir=tmp_path / "demo",
        megabytes=8,
        throttle=512 * 1024,
        state_dir=tmp_path / "state",
        images={
            "zookeeper": images["zookeeper"],
            "broker": images["kpo"],
            "operator": images["kpo"],
        },
    )
    result = run_demo(options, Console(file=output, width=120, force_terminal=False))
    text = output.getvalue()
    assert result.phase == "Completed", text[-4000:]
    assert result.ok, text[-4000:]
    assert {0, 1} <= {c.partition for c in result.checks}
    assert set(_demo_containers()) <= before, "containers left behind"
