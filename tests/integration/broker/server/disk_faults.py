"""Real disk faults for broker tests: size-limited tmpfs log dirs, filled until ENOSPC.

Mounting needs root (the tests run as root in their own mount namespace); where it is
refused the caller skips its test, saying why.
"""

from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path

import pytest


def mount_tmpfs(path: Path, size: str) -> Path:
    """Mount a tmpfs of ``size`` (e.g. ``"24m"``) on ``path``; skip the test if refused."""
    path.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {result.stderr.strip()}")
    return path


def unmount(path: Path) -> None:
    """Unmount ``path`` lazily (a process still holding a file there does not block it)."""
    subprocess.run(["umount", "-l", str(path)], check=False, capture_output=True)


def fill(directory: Path) -> Path:
    """Write a file in ``directory`` until its file system is full (ENOSPC); return it."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o644)
    chunk = b"\0" * (1 << 20)
    try:
        while True:
            try:
                os.write(fd, chunk)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                if len(chunk) == 1:
                    return filler
                chunk = chunk[: len(chunk) // 2]
    finally:
        os.close(fd)
