"""The kubeconfig ``kpo-devenv control-plane`` writes where it is asked, and never over another."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import yaml

from kpo_devenv.controlplane import (
    KubeconfigInUseError,
    is_devenv_kubeconfig,
    live_devenv_server,
    publish_kubeconfig,
    write_kubeconfig,
)
from kpo_devenv.pki import Pki, generate_pki


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return generate_pki(tmp_path_factory.mktemp("pki"))


def test_published_kubeconfig_is_complete_private_and_recognised(pki: Pki, tmp_path: Path) -> None:
    path = publish_kubeconfig(tmp_path / "new" / "kpo-kubeconfig", "https://127.0.0.1:6443", pki)
    assert path.is_absolute() and path.parent.name == "new"
    config = yaml.safe_load(path.read_text())
    assert config["clusters"][0]["cluster"]["server"] == "https://127.0.0.1:6443"
    assert config["users"][0]["user"]["client-certificate"] == str(pki.admin.cert)
    assert path.stat().st_mode & 0o777 == 0o600
    assert is_devenv_kubeconfig(path)
    assert sorted(p.name for p in path.parent.iterdir()) == ["kpo-kubeconfig"]  # no partial left


def test_a_left_over_devenv_kubeconfig_is_replaced(pki: Pki, tmp_path: Path) -> None:
    path = write_kubeconfig(tmp_path / "kpo-kubeconfig", "https://127.0.0.1:1", pki)
    publish_kubeconfig(path, "https://127.0.0.1:2", pki)
    assert yaml.safe_load(path.read_text())["clusters"][0]["cluster"]["server"].endswith(":2")


@pytest.mark.parametrize(
    "text",
    [
        "apiVersion: v1\nkind: Config\ncurrent-context: prod\nclusters: [{name: prod}]\n",
        "kind: Config\ncurrent-context: kpo\nclusters: [{name: kpo}, {name: prod}]\n"
        "contexts: [{name: kpo}]\n",
        "not: [yaml",
        "just text\n",
        "",
    ],
    ids=["other-cluster", "more-clusters", "broken-yaml", "text", "empty"],
)
def test_any_other_file_is_left_alone(pki: Pki, tmp_path: Path, text: str) -> None:
    path = tmp_path / "config"
    path.write_text(text)
    assert not is_devenv_kubeconfig(path)
    with pytest.raises(KubeconfigInUseError, match="not a kubeconfig written by kpo-devenv"):
        publish_kubeconfig(path, "https://127.0.0.1:6443", pki)
    assert path.read_text() == text


def test_a_missing_or_unreadable_path_is_not_a_devenv_kubeconfig(tmp_path: Path) -> None:
    assert not is_devenv_kubeconfig(tmp_path / "missing")
    assert not is_devenv_kubeconfig(tmp_path)  # a directory


def test_a_kubeconfig_is_live_while_its_server_port_accepts(pki: Pki, tmp_path: Path) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        server = f"https://127.0.0.1:{listener.getsockname()[1]}"
        path = write_kubeconfig(tmp_path / "kpo-kubeconfig", server, pki)
        assert live_devenv_server(path) == server
    assert live_devenv_server(path) is None  # left behind by a control plane that died
    assert live_devenv_server(tmp_path / "missing") is None
