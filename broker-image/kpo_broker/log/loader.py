"""Loading and recovering the segments of one partition directory (Kafka's ``LogLoader``).

Steps: complete or roll back an interrupted cleaner swap (``.cleaned`` / ``.swap`` files),
remove leftovers of interrupted operations (``.deleted`` and ``.tmp`` files and indexes
without a ``.log``), open every segment, recover the segments
from the one holding the recovery point onwards (recheck every batch's CRC, rebuild the
indexes, cut a torn or corrupt tail, and drop any later segment once corruption is found),
and rebuild the indexes of older segments whose index files are missing or fail their
sanity check (the recovery guarantee of Kafka's documentation, "Implementation: Log").
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from kpo_broker.log.checkpoints import fsync_dir
from kpo_broker.log.config import LogConfig
from kpo_broker.log.errors import CorruptIndexError, CorruptRecordError
from kpo_broker.log.filerecords import FileRecords
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
_STRAY_SUFFIXES = (DELETED_SUFFIX, TMP_SUFFIX)


def _swap_end_offset(path: Path) -> int:
    """Offset after the last valid batch of a ``.log.swap`` file (its base if empty)."""
    parsed = parse_offset_file_name(path.name)
    assert parsed is not None
    records = FileRecords(path)
    try:
        end = parsed[0]
        for _position, header in records.valid_batches():
            end = header.next_offset
        return end
    finally:
        records.close()


def complete_interrupted_swaps(directory: Path) -> None:
    """Finish or roll back a cleaner swap cut short by a crash (Kafka's ``LogLoader.load``).

    ``LocalLog.replace_segments`` renames the cleaned segments ``.cleaned`` -> ``.swap``
    (highest base offset first), renames the old segments ``.deleted``, then the
    ``.swap`` files to their final names. So: while any ``.cleaned`` file is left, the
    ``.swap`` files at or above its base offset belong to a swap that had not fully
    started and are deleted with every ``.cleaned`` file (rolled back); the remaining
    ``.swap`` segments replace every other file whose base offset lies in their offset
    range (rolled forward), then lose their ``.swap`` suffix.
    """
    cleaned: list[Path] = []
    swaps: list[Path] = []
    for path in directory.iterdir():
        if not path.is_file():
            continue
        if path.name.endswith(CLEANED_SUFFIX):
            cleaned.append(path)
        elif path.name.endswith(SWAP_SUFFIX):
            swaps.append(path)
    min_cleaned = min(
        (parsed[0] for p in cleaned if (parsed := parse_offset_file_name(p.name)) is not None),
        default=None,
    )
    valid: list[Path] = []
    for path in swaps:
        parsed = parse_offset_file_name(path.name)
        if parsed is None or (min_cleaned is not None and parsed[0] >= min_cleaned):
            _log.info("removing swap file %s of an unfinished swap", path)
            path.unlink()
        else:
            valid.append(path)
    for path in cleaned:
        _log.info("removing cleaned file %s of an unfinished swap", path)
        path.unlink()
    ranges = []
    for path in valid:
        if path.name.endswith(LOG_SUFFIX + SWAP_SUFFIX):
            parsed = parse_offset_file_name(path.name)
            assert parsed is not None
            ranges.append((parsed[0], _swap_end_offset(path)))
    if ranges:
        low, high = min(r[0] for r in ranges), max(r[1] for r in ranges)
        for path in directory.iterdir():
            parsed = parse_offset_file_name(path.name)
            if (
                path.is_file()
                and parsed is not None
                and not path.name.endswith(SWAP_SUFFIX)
                and low <= parsed[0] < high
            ):
                _log.info("removing %s, replaced by a swapped-in cleaned segment", path)
                path.unlink()
    for path in valid:
        _log.info("completing the swap of %s", path)
        os.replace(path, path.with_name(path.name[: -len(SWAP_SUFFIX)]))
    if swaps or cleaned:
        fsync_dir(directory)


def remove_stray_files(directory: Path) -> list[int]:
    """Delete leftovers and orphan indexes; return the base offsets of the ``.log`` files.

    Interrupted cleaner swaps are completed or rolled back first
    (``complete_interrupted_swaps``).

    Returns:
        Base offsets of the segments found, sorted ascending.
    """
    complete_interrupted_swaps(directory)
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
