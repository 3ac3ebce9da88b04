"""File and directory names of Kafka's on-disk log layout (pure functions).

A partition's log lives in ``<log dir>/<topic>-<partition>``; each segment is
``<base offset, 20 digits>.log`` with ``.index`` and ``.timeindex`` files beside it
(Kafka's documentation, "Implementation: Log"; Kafka's ``LogFileUtils``).
"""

from __future__ import annotations

import re

from kpo_broker.log.errors import LogDirectoryError
from kpo_kafka.topic_partition import TopicPartition

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
TMP_SUFFIX = ".tmp"
DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"

# Kafka's legal topic characters (Topic.LEGAL_CHARS); max length 249.
_TOPIC_RE = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")


def offset_file_name(base_offset: int, suffix: str) -> str:
    """Return ``<base_offset zero-padded to 20 digits><suffix>``, e.g. ``000...042.log``.

    Args:
        base_offset: the first offset the file covers, >= 0.
        suffix: one of the ``*_SUFFIX`` constants.
    """
    return f"{base_offset:020d}{suffix}"


def parse_offset_file_name(name: str) -> tuple[int, str] | None:
    """Split ``00000000000000000042.log`` into ``(42, ".log")``; None if not of that form.

    Any suffix is returned as written, including compound ones such as ``.log.deleted``.
    """
    digits, dot, rest = name.partition(".")
    if not dot or len(digits) != 20 or not digits.isdigit():
        return None
    return int(digits), "." + rest


def log_dir_name(tp: TopicPartition) -> str:
    """Return the partition directory name ``<topic>-<partition>``."""
    return f"{tp.topic}-{tp.partition}"


# ``.<32 hex digits>-future``: the tail of a future log's directory name (KIP-113).
_FUTURE_TAIL_RE = re.compile(r"\.[0-9a-f]{32}" + FUTURE_DIR_SUFFIX + "$")


def parse_log_dir_name(name: str) -> TopicPartition:
    """Parse ``<topic>-<partition>`` (the topic may contain ``-`` and ``.``).

    A future log's name ``<topic>-<partition>.<uuid hex>-future`` (KIP-113) parses to
    the same partition.

    Raises:
        LogDirectoryError: the name is not a legal topic followed by ``-<int>``.
    """
    topic, dash, partition = _FUTURE_TAIL_RE.sub("", name).rpartition("-")
    if not dash or not partition.isdigit() or not _TOPIC_RE.match(topic):
        raise LogDirectoryError(f"directory name {name!r} is not of the form <topic>-<partition>")
    if topic in (".", ".."):
        raise LogDirectoryError(f"directory name {name!r} has an illegal topic name")
    return TopicPartition(topic, int(partition))


def delete_dir_name(tp: TopicPartition, uuid_hex: str) -> str:
    """Return ``<topic>-<partition>.<uuid hex>-delete``, a log scheduled for deletion."""
    return f"{log_dir_name(tp)}.{uuid_hex}{DELETE_DIR_SUFFIX}"


def is_delete_dir_name(name: str) -> bool:
    """Tell whether ``name`` ends in ``-delete``: a log directory renamed for deletion.

    Such a name can never be a live partition directory, whose name ends in digits.
    """
    return name.endswith(DELETE_DIR_SUFFIX)


def future_dir_name(tp: TopicPartition, uuid_hex: str) -> str:
    """Return ``<topic>-<partition>.<uuid hex>-future``: a replica moving into this dir.

    KIP-113: an intra-broker move copies the replica into a future log under this name
    and renames it ``<topic>-<partition>`` once it has caught up.
    """
    return f"{log_dir_name(tp)}.{uuid_hex}{FUTURE_DIR_SUFFIX}"


def is_future_dir_name(name: str) -> bool:
    """Tell whether ``name`` is a future log directory (``...<uuid hex>-future``)."""
    return _FUTURE_TAIL_RE.search(name) is not None
