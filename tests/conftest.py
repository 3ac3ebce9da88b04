"""Session fixtures that run the real infrastructure: ZooKeeper, etcd + kube-apiserver.

Each server runs on free loopback ports in a pytest temp dir and is stopped at
the end of the session, also when tests fail; ``pytest_unconfigure`` stops any
process still registered (for example after an interrupted run).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from kpo_devenv import ControlPlane, ZooKeeperServer
from kpo_devenv.process import stop_all

REPO_ROOT = Path(__file__).resolve().parents[1]
CRDS_DIR = REPO_ROOT / "crds"
EXAMPLES_DIR = CRDS_DIR / "examples"


def pytest_unconfigure(config: pytest.Config) -> None:
    stop_all()


#: Directories whose modules run as one unit on one pytest-xdist worker: the container
#: tests build and run the same podman images, one after the other.
_SHARED_SCOPES = ("tests/integration/containers/",)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Schedule ``make test``'s pytest-xdist workers a test module at a time.

    A module's tests share module- and package-scoped fixtures (clusters, control planes) and
    some run in order on what the previous one left, so a whole module runs on one worker
    and its fixtures start once; the directories in ``_SHARED_SCOPES`` are one unit each.
    (xdist's ``loadgroup`` marks cannot do this on pytest 9.2: xdist renames the node ids
    through an attribute pytest no longer reads.)
    """
    from xdist.scheduler import LoadScopeScheduling

    class ModuleScheduling(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return next((d for d in _SHARED_SCOPES if module.startswith(d)), module)

    return ModuleScheduling(config, log)


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
