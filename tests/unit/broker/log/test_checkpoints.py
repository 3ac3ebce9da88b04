from __future__ import annotations

import os
from pathlib import Path

import pytest

from kpo_broker.log.checkpoints import OffsetCheckpointFile
from kpo_broker.log.errors import CheckpointFormatError
from kpo_kafka.topic_partition import TopicPartition


def test_round_trip_and_format(tmp_path: Path) -> None:
    checkpoint = OffsetCheckpointFile(tmp_path / "replication-offset-checkpoint")
    assert checkpoint.read() == {}
    offsets = {TopicPartition("b.topic-x", 1): 7, TopicPartition("a", 0): 42}
    checkpoint.write(offsets)
    assert checkpoint.path.read_text() == "0\n2\na 0 42\nb.topic-x 1 7\n"
    assert checkpoint.read() == offsets
    checkpoint.write({})
    assert checkpoint.read() == {}
    assert checkpoint.path.read_text() == "0\n0\n"


def test_empty_file_has_no_entries(tmp_path: Path) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    path.write_text("")
    assert OffsetCheckpointFile(path).read() == {}


@pytest.mark.parametrize(
    "text",
    [
        "1\n0\n",  # unknown version
        "0\n",  # no count line
        "0\nx\n",  # bad count
        "0\n2\na 0 1\n",  # fewer entries than the count
        "0\n1\na 0 1\nb 0 2\n",  # more entries than the count
        "0\n1\na 0\n",  # missing field
        "0\n1\na 0 -5\n",  # negative offset
        "0\n1\na zero 5\n",  # bad partition
    ],
)
def test_malformed_files_raise(tmp_path: Path, text: str) -> None:
    path = tmp_path / "cp"
    path.write_text(text)
    with pytest.raises(CheckpointFormatError):
        OffsetCheckpointFile(path).read()


def test_failed_write_leaves_the_previous_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkpoint = OffsetCheckpointFile(tmp_path / "cp")
    checkpoint.write({TopicPartition("t", 0): 1})

    def crash(src: object, dst: object) -> None:
        raise OSError("simulated crash before the rename")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError):
        checkpoint.write({TopicPartition("t", 0): 2})
    monkeypatch.undo()
    # the old content survives; only the temp file holds the new one
    assert checkpoint.read() == {TopicPartition("t", 0): 1}
    assert (tmp_path / "cp.tmp").read_text() == "0\n1\nt 0 2\n"
    checkpoint.write({TopicPartition("t", 0): 3})
    assert checkpoint.read() == {TopicPartition("t", 0): 3}
    assert not (tmp_path / "cp.tmp").exists()
