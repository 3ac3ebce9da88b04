"""The images under test, built from the current tree (warm: seconds, the layers are cached).

The tests here run kpo's images with podman. They are skipped only when podman cannot
run containers on this machine at all (``podman info`` fails, or podman is missing:
``bash tools/containers.sh engine`` installs it, and ``.ci/run`` does).
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from kpo_devenv.runner import engine_available
from tests.conftest import REPO_ROOT

#: Tags of the images the tests build and run (not the `make image` names).
IMAGES = {
    "kpo": "localhost/kpo-test:current",
    "zookeeper": "localhost/kpo-zookeeper-test:current",
    "placement": "localhost/kpo-placement-test:current",
}


@pytest.fixture(scope="session")
def images() -> dict[str, str]:
    """Build the kpo, zookeeper and placement images of this tree with tools/build-images.sh."""
    if shutil.which("podman") is None:
        pytest.skip("podman is not installed (bash tools/containers.sh engine installs it)")
    reason = engine_available("podman")
    if reason is not None:
        pytest.skip(f"podman cannot run containers here: {reason}")
    env = {
        **os.environ,
        "ENGINE": "podman",
        "IMAGE": IMAGES["kpo"],
        "ZOOKEEPER_IMAGE": IMAGES["zookeeper"],
        "PLACEMENT_IMAGE": IMAGES["placement"],
    }
    done = subprocess.run(
        ["bash", str(REPO_ROOT / "tools" / "build-images.sh"), "kpo", "zookeeper", "placement"],
        env=env,
        capture_output=True,
        text=True,
        timeout=3000,
        check=False,
    )
    assert done.returncode == 0, f"image build failed:\n{done.stderr[-4000:]}"
    return dict(IMAGES)
