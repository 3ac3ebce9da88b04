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
