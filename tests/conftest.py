"""Session fixtures that run the real infrastructure: ZooKeeper, etcd + kube-apiserver.

Each server runs on free loopback ports in a pytest temp dir and is stopped at
the end of the session, also when tests fail; ``pytest_unconfigure`` stops any
process still registered (for example after an interrupted run).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client, config

from kpo_devenv import ControlPlane, ZooKeeperServer
from kpo_devenv.process import stop_all

REPO_ROOT = Path(__file__).resolve().parents[1]
CRDS_DIR = REPO_ROOT / "crds"
EXAMPLES_DIR = CRDS_DIR / "examples"


def pytest_unconfigure(config: pytest.Config) -> None:
    stop_all()


#: Directories whose modules share one xdist group: the container tests build and run the
#: same images with podman, so they run one after the other on one worker.
_SHARED_GROUPS = {"containers": REPO_ROOT / "tests" / "integration" / "containers"}


@pytest.hookimpl(tryfirst=True)  # before xdist's worker hook reads the marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test with its module's ``xdist_group`` (``make test`` runs ``--dist loadgroup``).

    A module's tests share module- and package-scoped fixtures (clusters, control planes), so
    the whole module runs on one pytest-xdist worker and starts them once; the directories in
    ``_SHARED_GROUPS`` form one group each. Without xdist the mark is inert.
    """
    for item in items:
        path = Path(str(item.path))
        group = next(
            (name for name, root in _SHARED_GROUPS.items() if root in path.parents),
            str(path.relative_to(REPO_ROOT)),
        )
        item.add_marker(pytest.mark.xdist_group(group))


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    """A running standalone ZooKeeper server."""
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """A running etcd + kube-apiserver with the project's CRDs Established."""
    plane = ControlPlane(tmp_path_factory.mktemp("control-plane"), crds_dir=CRDS_DIR)
    plane.start()
    try:
        yield plane
    finally:
        plane.stop()


@pytest.fixture(scope="session")
def kube_client(control_plane: ControlPlane) -> Iterator[client.ApiClient]:
    """A Python ``kubernetes`` ApiClient configured from the control plane's kubeconfig."""
    api = config.new_client_from_config(config_file=str(control_plane.kubeconfig))
    try:
        yield api
    finally:
        api.close()
