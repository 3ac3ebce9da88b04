"""Operations of a ZooKeeper multi (transaction) and how to read its outcome."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kazoo.exceptions import RolledBackError, RuntimeInconsistency, ZookeeperError


@dataclass(frozen=True)
class CreateOp:
    """Create a znode inside a multi (``path`` relative to the chroot; ``data`` bytes)."""

    path: str
    data: bytes = b""
    ephemeral: bool = False
    sequence: bool = False


@dataclass(frozen=True)
class SetDataOp:
    """Set a znode's data inside a multi; ``version`` -1 matches any version."""

    path: str
    data: bytes
    version: int = -1


@dataclass(frozen=True)
class DeleteOp:
    """Delete a znode inside a multi; ``version`` -1 matches any version."""

    path: str
    version: int = -1


@dataclass(frozen=True)
class CheckOp:
    """Check a znode's version inside a multi."""

    path: str
    version: int


Op = CreateOp | SetDataOp | DeleteOp | CheckOp


def multi_error(results: Sequence[object]) -> ZookeeperError | None:
    """Return the error that aborted a multi, or None when it committed.

    ZooKeeper reports the failing operation's own error and marks the others as rolled
    back or not run; only the former is returned.
    """
    for result in results:
        if isinstance(result, ZookeeperError) and not isinstance(
            result, RolledBackError | RuntimeInconsistency
        ):
            return result
    return None
