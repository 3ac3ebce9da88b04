"""Loading and recovering the segments of one partition directory (Kafka's ``LogLoader``).

Steps: remove leftovers of interrupted operations (``.deleted``, ``.cleaned``, ``.swap``,
``.tmp`` files and indexes without a ``.log``), open every segment, recover the segments
from the one holding the recovery point onwards (recheck every batch's CRC, rebuild the
indexes, cut a torn or corrupt tail, and drop any later segment once corruption is found),
and rebuild the indexes of older segments whose index files are missing or fail their
sanity check (the recovery guarantee of Kafka's documentation, "Implementation: Log").
"""

from __future__ import annotations

import logging
from pathlib import Path

from kpo_broker.log.config import LogConfig
from kpo_broker.log.errors import CorruptIndexError, CorruptRecordError
from kpo_broker.log.names import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TMP_SUFFIX,
    parse_offset_file_name,
)
from kpo_broker.log.segment import LogSegment

_log = logging.getLogger(__name__)
_STRAY_SUFFIXES = (DELETED_SUFFIX, CLEANED_SUFFIX, SWAP_SUFFIX, TMP_SUFFIX)


def remove_stray_files(directory: Path) -> list[int]:
    """Delete leftovers and orphan indexes; return the base offsets of the ``.log`` files.

    Returns:
        Base offsets of the segments found, sorted ascending.
    """
    bases: set[int] = set()
    indexes: list[tuple[int, Path]] = []
    for path in directory.iterdir():
        if not path.is_file():
            continue
        if path.name.endswith(_STRAY_SUFFIXES):
            _log.info("removing stray file %s", path)
            path.unlink()
            continue
        parsed = parse_offset_file_name(path.name)
        if parsed is None:
            continue
        base, suffix = parsed
        if suffix == LOG_SUFFIX:
            bases.add(base)
        elif suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            indexes.append((base, path))
    for base, path in indexes:
        if base not in bases:
            _log.info("removing index %s without a segment", path)
            path.unlink()
    return sorted(bases)


def _rebuild_if_needed(segment: LogSegment, config: LogConfig) -> None:
    """Recover a segment before the recovery point if its indexes are missing or corrupt."""
    reason = "missing" if segment.indexes_were_missing and segment.size > 0 else None
    if reason is None:
        try:
            segment.check_indexes()
        except (CorruptIndexError, CorruptRecordError) as exc:
            reason = str(exc)
    if reason is not None:
        _log.warning("rebuilding indexes of segment %d: %s", segment.base_offset, reason)
        truncated = segment.recover(config.index_interval_bytes)
        if truncated:
            _log.warning(
                "segment %d below the recovery point lost %d bytes", segment.base_offset, truncated
            )


def load_segments(
    directory: Path, config: LogConfig, recovery_point: int, initial_offset: int, now_ms: int
) -> tuple[list[LogSegment], int]:
    """Open and recover every segment of ``directory``.

    Args:
        directory: the partition directory (must exist).
        config: the log's config (index interval and index size).
        recovery_point: offset below which data is known to be flushed; the segment
            holding it and every later segment are recovered.
        initial_offset: base offset of the empty segment created if there is none.
        now_ms: creation time for newly opened segments.

    Returns:
        The segments, oldest first (never empty), and the total bytes truncated.
    """
    segments = [
        LogSegment.open(directory, base, config, now_ms) for base in remove_stray_files(directory)
    ]
    truncated_total = 0
    for position, segment in enumerate(segments):
        following = segments[position + 1] if position + 1 < len(segments) else None
        if following is not None and following.base_offset <= recovery_point:
            _rebuild_if_needed(segment, config)
            continue
        truncated = segment.recover(config.index_interval_bytes)
        if truncated:
            truncated_total += truncated
            _log.warning(
                "%s: corrupt or torn data in segment %d, truncated %d bytes",
                directory,
                segment.base_offset,
                truncated,
            )
            for later in segments[position + 1 :]:
                _log.warning(
                    "%s: deleting segment %d after corruption", directory, later.base_offset
                )
                later.delete()
            del segments[position + 1 :]
            break
    if not segments:
        segments.append(LogSegment.open(directory, initial_offset, config, now_ms))
    return segments, truncated_total
