"""meta.properties: checked against the configured broker.id and ZooKeeper's cluster id."""

from __future__ import annotations

from pathlib import Path

import pytest

from kpo_broker.log.broker_metadata import (
    META_PROPERTIES,
    BrokerMetadata,
    InconsistentBrokerIdError,
    InconsistentBrokerMetadataError,
    InconsistentClusterIdError,
    checkpoint_broker_metadata,
    read_broker_metadata,
)


def dirs(tmp_path: Path, count: int) -> list[Path]:
    return [tmp_path / f"d{i}" for i in range(count)]


def test_fresh_directories_get_the_brokers_metadata(tmp_path: Path) -> None:
    log_dirs = dirs(tmp_path, 2)
    stored = checkpoint_broker_metadata(log_dirs, 3, "cluster-a")
    assert stored == BrokerMetadata(3, "cluster-a")
    for log_dir in log_dirs:
        text = (log_dir / META_PROPERTIES).read_text()
        assert "version=0\nbroker.id=3\ncluster.id=cluster-a\n" in text
        assert read_broker_metadata(log_dir) == stored
    assert not list(tmp_path.glob("*/*.tmp"))


def test_a_restart_with_the_same_identity_is_accepted(tmp_path: Path) -> None:
    log_dirs = dirs(tmp_path, 1)
    checkpoint_broker_metadata(log_dirs, 0, "c")
    assert checkpoint_broker_metadata(log_dirs, 0, "c") == BrokerMetadata(0, "c")


def test_another_broker_id_is_refused_and_nothing_is_rewritten(tmp_path: Path) -> None:
    log_dirs = dirs(tmp_path, 1)
    checkpoint_broker_metadata(log_dirs, 0, "c")
    with pytest.raises(InconsistentBrokerIdError, match=r"broker.id 1 .* stored broker.id 0"):
        checkpoint_broker_metadata(log_dirs, 1, "c")
    assert read_broker_metadata(log_dirs[0]) == BrokerMetadata(0, "c")


def test_another_cluster_is_refused(tmp_path: Path) -> None:
    log_dirs = dirs(tmp_path, 1)
    checkpoint_broker_metadata(log_dirs, 0, "cluster-a")
    with pytest.raises(InconsistentClusterIdError, match=r"cluster-b .* cluster.id cluster-a"):
        checkpoint_broker_metadata(log_dirs, 0, "cluster-b")


def test_directories_of_different_brokers_are_refused(tmp_path: Path) -> None:
    first, second = dirs(tmp_path, 2)
    checkpoint_broker_metadata([first], 0, "c")
    checkpoint_broker_metadata([second], 1, "c")
    with pytest.raises(InconsistentBrokerMetadataError, match="different brokers"):
        checkpoint_broker_metadata([first, second], 0, "c")


def test_a_new_directory_beside_an_old_one_is_filled_in(tmp_path: Path) -> None:
    old, new = dirs(tmp_path, 2)
    checkpoint_broker_metadata([old], 2, "c")
    checkpoint_broker_metadata([old, new], 2, "c")
    assert read_broker_metadata(new) == BrokerMetadata(2, "c")


def test_pre_0_10_1_files_without_a_cluster_id_get_one(tmp_path: Path) -> None:
    (log_dir,) = dirs(tmp_path, 1)
    log_dir.mkdir()
    (log_dir / META_PROPERTIES).write_text("#old\nversion=0\nbroker.id=4\n")
    assert checkpoint_broker_metadata([log_dir], 4, "c") == BrokerMetadata(4, "c")
    assert read_broker_metadata(log_dir) == BrokerMetadata(4, "c")


@pytest.mark.parametrize(
    "text",
    ["version=1\nbroker.id=0\n", "version=0\n", "version=0\nbroker.id=x\n", "garbage\n"],
)
def test_malformed_files_are_refused(tmp_path: Path, text: str) -> None:
    (log_dir,) = dirs(tmp_path, 1)
    log_dir.mkdir()
    (log_dir / META_PROPERTIES).write_text(text)
    with pytest.raises(InconsistentBrokerMetadataError, match=META_PROPERTIES):
        checkpoint_broker_metadata([log_dir], 0, "c")
    assert (log_dir / META_PROPERTIES).read_text() == text
