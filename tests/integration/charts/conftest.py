"""Fixtures that turn the shared control plane into a small cluster for the chart's install tests.

kube-controller-manager, kube-scheduler and kwok run only for the module that asks for
``cluster_addons``; the fake nodes are deleted and the processes stopped when that module
ends, so the rest of the session sees the bare control plane again.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from kpo_devenv import ControlPlane
from kpo_devenv.cluster_addons import (
    ClusterAddons,
    create_fake_nodes,
    delete_fake_nodes,
    ready_nodes,
)

FAKE_ZONES = ("zone-a", "zone-b", "zone-c")


@pytest.fixture(scope="module")
def cluster_addons(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ClusterAddons]:
    """kube-controller-manager, kube-scheduler and kwok running against ``control_plane``."""
    addons = ClusterAddons(tmp_path_factory.mktemp("cluster-addons"), control_plane)
    addons.start()
    try:
        yield addons
    finally:
        addons.stop()


@pytest.fixture(scope="module")
def fake_nodes(control_plane: ControlPlane, cluster_addons: ClusterAddons) -> Iterator[list[str]]:
    """Three Ready kwok nodes, one per zone of ``FAKE_ZONES``; deleted at the end of the module."""
    names = create_fake_nodes(control_plane, FAKE_ZONES)
    try:
        deadline = time.monotonic() + 60
        while ready_nodes(control_plane, names) != set(names):
            assert time.monotonic() < deadline, "fake nodes did not turn Ready"
            time.sleep(0.3)
        yield names
    finally:
        delete_fake_nodes(control_plane)
