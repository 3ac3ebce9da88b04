"""Counting this process's open descriptors on the files of one test."""

from __future__ import annotations

import os
from pathlib import Path


def open_files_under(root: Path) -> int:
    """Return how many of this process's descriptors are open on files under ``root``.

    Only the test's own files count: threads left by earlier tests in the same process
    (clients reconnecting, servers' pipes) open and close descriptors of their own.
    """
    prefix = str(root.resolve()) + os.sep
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # closed meanwhile (the listing's own descriptor among them)
            continue
        count += target.startswith(prefix)
    return count
