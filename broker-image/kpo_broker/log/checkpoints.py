"""Kafka's checkpoint text files, written atomically (Kafka's ``CheckpointFile``).

Format: a version line (``0``), an entry count line, then one entry per line with
fields separated by single spaces. Writes go to ``<name>.tmp``, are fsynced, renamed
over the target and the directory is fsynced, so a crash leaves either the old or the
new file. ``OffsetCheckpointFile`` holds ``topic partition offset`` lines and backs
``replication-offset-checkpoint`` (high watermarks), ``recovery-point-offset-checkpoint``
and ``log-start-offset-checkpoint`` in every log dir.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from kpo_broker.log.errors import CheckpointFormatError
from kpo_broker.log.names import TMP_SUFFIX
from kpo_kafka.topic_partition import TopicPartition

CHECKPOINT_VERSION = 0


def fsync_dir(directory: Path) -> None:
    """Fsync a directory so a rename or file creation inside it is durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_checkpoint(path: Path, entries: Sequence[Sequence[object]]) -> None:
    """Atomically replace ``path`` with a version-0 checkpoint of ``entries``.

    Args:
        path: the checkpoint file.
        entries: one sequence of fields per line, each field written with ``str``.
    """
    tmp = path.with_name(path.name + TMP_SUFFIX)
    lines = [str(CHECKPOINT_VERSION), str(len(entries))]
    lines.extend(" ".join(str(field) for field in entry) for entry in entries)
    with open(tmp, "w", encoding="utf-8") as out:
        out.write("\n".join(lines) + "\n")
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


def read_checkpoint(path: Path, fields_per_entry: int) -> list[list[str]]:
    """Read a version-0 checkpoint; a missing or empty file has no entries.

    Args:
        path: the checkpoint file.
        fields_per_entry: number of space-separated fields each entry line must have.

    Returns:
        The entry lines, each split into its fields.

    Raises:
        CheckpointFormatError: unknown version, bad count, wrong number of lines or fields.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except UnicodeDecodeError as exc:
        raise CheckpointFormatError(f"{path}: not UTF-8 text") from exc
    if not text:
        return []
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    if len(lines) < 2:
        raise CheckpointFormatError(f"{path}: missing version or count line")
    if lines[0].strip() != str(CHECKPOINT_VERSION):
        raise CheckpointFormatError(f"{path}: unrecognised version {lines[0]!r}")
    try:
        count = int(lines[1].strip())
    except ValueError as exc:
        raise CheckpointFormatError(f"{path}: bad entry count {lines[1]!r}") from exc
    entries = [line.split() for line in lines[2:]]
    if count < 0 or len(entries) != count:
        raise CheckpointFormatError(f"{path}: expected {count} entries, found {len(entries)}")
    for entry in entries:
        if len(entry) != fields_per_entry:
            raise CheckpointFormatError(f"{path}: malformed line {' '.join(entry)!r}")
    return entries


def parse_non_negative(path: Path, value: str) -> int:
    """Parse a checkpointed integer that must be >= 0.

    Raises:
        CheckpointFormatError: not an integer or negative.
    """
    try:
        number = int(value)
    except ValueError as exc:
        raise CheckpointFormatError(f"{path}: {value!r} is not an integer") from exc
    if number < 0:
        raise CheckpointFormatError(f"{path}: negative value {number}")
    return number


class OffsetCheckpointFile:
    """A ``topic partition offset`` checkpoint in one log dir.

    Args:
        path: e.g. ``<log dir>/replication-offset-checkpoint``.
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> dict[TopicPartition, int]:
        """Return the checkpointed offset of each partition (empty if the file is missing).

        Raises:
            CheckpointFormatError: the file is malformed.
        """
        result: dict[TopicPartition, int] = {}
        for topic, partition, offset in read_checkpoint(self.path, 3):
            tp = TopicPartition(topic, parse_non_negative(self.path, partition))
            result[tp] = parse_non_negative(self.path, offset)
        return result

    def write(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Atomically replace the file with ``offsets``, sorted by topic and partition."""
        entries = [(tp[0], tp[1], offset) for tp, offset in sorted(offsets.items())]
        write_checkpoint(self.path, entries)
