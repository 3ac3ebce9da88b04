"""Facts about the machine the benchmark ran on (CPU, memory, load, runtimes, a process's CPU)."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path
from typing import Any

from kpo_devenv.tools import java_path


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return None


def _java_version() -> str:
    try:
        done = subprocess.run(
            [str(java_path()), "-version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.SubprocessError, FileNotFoundError):
        return "unknown"
    lines = (done.stderr or done.stdout).splitlines()
    return lines[0].strip() if lines else "unknown"


def load_average() -> tuple[float, float, float] | None:
    """Return the 1, 5 and 15 minute load averages, or None where the OS has none."""
    try:
        return os.getloadavg()
    except OSError:
        return None


def process_cpu_seconds(pid: int | None) -> float:
    """User + system CPU seconds of process ``pid`` (``/proc/<pid>/stat``), 0 if unknown."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    ticks = int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of proc(5))
    return ticks / os.sysconf("SC_CLK_TCK")


def machine_info() -> dict[str, Any]:
    """Return the machine facts for the report.

    Returns:
        ``cpu``, ``cores`` (logical CPUs), ``memory_gib``, ``kernel``, ``python``,
        ``java`` (first line of ``java -version``) and ``load_average`` at the start.
    """
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "memory_gib": _memory_gib(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "java": _java_version(),
        "load_average": load_average(),
    }
