"""The image's Dockerfile, checked without a container engine (the CI machines have none):
multi-stage, a pinned base, a numeric non-root user, the same package set that CI installs
(pyproject's packages), and a .dockerignore keeping local state out of the build context."""

from __future__ import annotations

import re
import tomllib

from tests.conftest import REPO_ROOT

DOCKERFILE = (REPO_ROOT / "broker-image" / "Dockerfile").read_text()
IGNORE = [
    line.strip() for line in (REPO_ROOT / ".dockerignore").read_text().splitlines() if line.strip()
]


def instructions(name: str) -> list[str]:
    return [
        line.split(None, 1)[1]
        for line in DOCKERFILE.splitlines()
        if line.split(None, 1)[:1] == [name] and len(line.split(None, 1)) == 2
    ]


def test_multi_stage_with_a_pinned_base() -> None:
    stages = instructions("FROM")
    assert len(stages) >= 2
    assert any(s.endswith(" AS build") for s in stages)
    assert any(s.endswith(" AS runtime") for s in stages)
    base = next(a.split("=", 1)[1] for a in instructions("ARG") if a.startswith("PYTHON_IMAGE="))
    assert re.fullmatch(r"python:3\.11\.\d+-slim-bookworm(@sha256:[0-9a-f]{64})?", base), base


def test_runs_as_a_numeric_non_root_user() -> None:
    user = instructions("USER")[-1]
    uid, _, gid = user.partition(":")
    assert uid.isdigit() and int(uid) > 0 and gid.isdigit() and int(gid) > 0


def test_installs_the_packages_ci_installs() -> None:
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    roots = pyproject["tool"]["setuptools"]["packages"]["find"]["where"]
    copied = " ".join(instructions("COPY"))
    for root in roots:
        packages = [p.name for p in (REPO_ROOT / root).glob("kpo_*") if p.is_dir()]
        assert packages, root
        for package in packages:
            assert f"{root}/{package}" in copied, f"{root}/{package} is not in the image"
    assert "pip install ." in DOCKERFILE  # pyproject's dependencies, as CI's pip install
    assert "openjdk-17-jre-headless" in DOCKERFILE  # PySpark needs Java 17, as on CI


def test_dockerignore_sends_only_what_the_image_installs() -> None:
    patterns = [p for p in IGNORE if not p.startswith("#")]
    assert patterns[0] == "*"  # deny everything (.venv, .git, tests, data), then allow
    allowed = {p[1:] for p in patterns if p.startswith("!")}
    assert {"pyproject.toml", "README.md"} <= allowed
    assert not {".venv", ".git", "tests"} & allowed
    copied = " ".join(instructions("COPY"))
    for entry in allowed - {"pyproject.toml", "README.md"}:
        assert entry in copied, f"{entry} is sent but not used"
