"""The images' Dockerfile and locks, checked without a container engine (the container
tests in tests/integration/containers build and run them): one target per image, a base
that takes a digest, numeric non-root users, no Java in the broker/operator image, every
third-party import of each image's packages in that image's hashed lock, and a
.dockerignore sending only what the build copies."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

from tests.conftest import REPO_ROOT

DOCKERFILE = (REPO_ROOT / "broker-image" / "Dockerfile").read_text()
IGNORE = [
    line.strip() for line in (REPO_ROOT / ".dockerignore").read_text().splitlines() if line.strip()
]
LOCKS = REPO_ROOT / "requirements"
#: target -> the project's packages (folder/package) its image carries.
IMAGE_PACKAGES = {
    "kpo": ["kafka-client/kpo_kafka", "broker-image/kpo_broker", "operator/kpo_operator"],
    "placement": ["kafka-client/kpo_kafka", "placement/kpo_placement"],
}
IMAGE_LOCK = {"kpo": "broker.lock", "placement": "placement.lock"}


def stages() -> dict[str, list[str]]:
    """Stage name -> its lines (``FROM <parent> AS <name>`` first)."""
    found: dict[str, list[str]] = {}
    current: list[str] = []
    for line in DOCKERFILE.splitlines():
        match = re.match(r"FROM (\S+) AS (\S+)", line)
        if match:
            current = found.setdefault(match.group(2), [])
        current.append(line)
    return found


def chain(stage: str) -> list[str]:
    """The stage and its ancestors within the Dockerfile."""
    all_stages = stages()
    names = [stage]
    while True:
        parent = all_stages[names[-1]][0].split()[1]
        if parent not in all_stages:
            return names
        names.append(parent)


def locked(lock: str) -> dict[str, str]:
    """Distribution name (normalized) -> pinned version, each pin followed by its hashes."""
    text = (LOCKS / lock).read_text()
    pins = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", text, re.M))
    for name in pins:
        block = text.split(f"\n{name}==", 1)[1].split("\n\n", 1)[0]
        assert "--hash=sha256:" in block.split("\n    # via", 1)[0], f"{name} has no hash"
    return {re.sub(r"[-_.]+", "-", n).lower(): v for n, v in pins.items()}


def test_one_target_per_image_on_a_base_that_takes_a_digest() -> None:
    assert {"kpo", "placement", "zookeeper"} <= set(stages())
    (base,) = [line for line in DOCKERFILE.splitlines() if line.startswith("ARG BASE_IMAGE=")]
    image = base.split("=", 1)[1]
    assert re.fullmatch(r"python:3\.11\.\d+-slim-bookworm(@sha256:[0-9a-f]{64})?", image), image
    assert "FROM ${BASE_IMAGE} AS base" in DOCKERFILE


def test_every_image_runs_as_a_numeric_non_root_user() -> None:
    for target in ("kpo", "placement", "zookeeper"):
        users = [line.split()[1] for line in stages()[target] if line.startswith("USER ")]
        assert users == ["10001:10001"], target


def test_the_broker_and_operator_image_has_no_java() -> None:
    assert "java" not in chain("kpo")
    assert "java" in chain("placement") and "java" in chain("zookeeper")
    assert "openjdk-17-jre-headless" in "\n".join(stages()["java"])  # PySpark needs Java 17


def test_images_install_their_locks_with_hashes_below_the_source() -> None:
    for target, lock in IMAGE_LOCK.items():
        deps = "\n".join(stages()[f"deps-{target}"])
        assert f"--require-hashes --no-deps -r /tmp/requirements/{lock}" in deps
        runtime = stages()[target]
        copies = [line for line in runtime if line.startswith("COPY --from=")]
        assert copies[0].startswith(f"COPY --from=deps-{target} ")  # dependencies first
        assert copies[1].startswith(f"COPY --from=app-{target} ")  # then the code
        app = "\n".join(stages()[f"app-{target}"])
        for package in IMAGE_PACKAGES[target]:
            assert f"COPY {package} " in app, f"{package} is not in the {target} image"


def _third_party_imports(folder: Path) -> set[str]:
    names: set[str] = set()
    for path in folder.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module.split(".")[0])
    return {n for n in names if n not in sys.stdlib_module_names and not n.startswith("kpo_")}


def test_each_images_lock_holds_what_its_packages_import() -> None:
    distributions = importlib.metadata.packages_distributions()
    for target, packages in IMAGE_PACKAGES.items():
        pins = locked(IMAGE_LOCK[target])
        for package in packages:
            for module in _third_party_imports(REPO_ROOT / package):
                dists = {re.sub(r"[-_.]+", "-", d).lower() for d in distributions[module]}
                assert dists & set(pins), f"{package} imports {module}, not in {target}'s lock"


def test_locks_follow_pyproject_and_keep_spark_out_of_the_broker_image() -> None:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]

    def names(requirements: list[str]) -> set[str]:
        return {
            re.sub(r"[-_.]+", "-", re.split(r"[<>=!~\[ ;]", r)[0]).lower() for r in requirements
        }

    core = names(project["dependencies"])
    placement = names(project["optional-dependencies"]["placement"])
    assert core <= set(locked("broker.lock"))
    assert core | placement <= set(locked("placement.lock"))
    assert not placement & set(locked("broker.lock"))


def test_dockerignore_sends_only_what_the_images_copy() -> None:
    patterns = [p for p in IGNORE if not p.startswith("#")]
    assert patterns[0] == "*"  # deny everything (.venv, .git, tests, data), then allow
    allowed = {p[1:] for p in patterns if p.startswith("!")}
    assert not {".venv", ".git", "tests"} & allowed
    copied = " ".join(line for line in DOCKERFILE.splitlines() if line.startswith("COPY "))
    for entry in allowed:
        assert entry.replace("*.lock", "") in copied, f"{entry} is sent but not used"
