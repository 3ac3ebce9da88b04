"""A documentation page's shell blocks, run as written: one bash, a block at a time.

:func:`shell_blocks` reads the fenced ``sh`` / ``bash`` blocks of a Markdown page, each
with the heading it stands under and the marker in the HTML comment on the line right
above its fence, e.g. ``<!-- test: second-terminal ready="export KUBECONFIG=" -->``.
Markers are invisible on the rendered page; a test reads them to know how a block is
meant to be run (in the reader's terminal, in a second terminal that keeps running, or
not at all, e.g. a block of placeholders the reader fills in).

:class:`ShellSession` is the reader's terminal: one ``bash`` that runs the blocks one
after another in the same shell (``source``), so variables, the working directory and
background jobs carry over from one block to the next as they do for a person pasting
them. It runs with ``set -eo pipefail``: a failing command ends the session and the
block's run raises :class:`ShellBlockError` with the output. :func:`start_in_terminal`
runs a block that holds (a server in the foreground) as a process of its own, as in a
second terminal, and :func:`interrupt` is Ctrl-C in that terminal.
"""

from __future__ import annotations

import os
import re
import signal
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kpo_devenv.process import ManagedProcess
from kpo_devenv.waiting import wait_until

__all__ = [
    "ShellBlock",
    "ShellBlockError",
    "ShellSession",
    "interrupt",
    "shell_blocks",
    "start_in_terminal",
    "wait_for_output",
]

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`]*)$")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_MARKER = re.compile(r"^\s*<!--\s*test:\s*(?P<kind>[\w-]+)(?P<args>.*?)-->\s*$")
_ARG = re.compile(r'([\w-]+)="([^"]*)"')
SHELL_LANGUAGES = ("sh", "bash", "shell")
"""Fence languages read as shell blocks."""


@dataclass(frozen=True)
class ShellBlock:
    """One fenced shell block of a page.

    Attributes:
        text: the block's lines, the fence's indentation removed, ending with a newline.
        line: line number (1-based) of its opening fence.
        section: the text of the nearest heading above it ("" before the first).
        marker: the kind of its ``<!-- test: ... -->`` marker, "" without one.
        args: the marker's ``key="value"`` arguments.
    """

    text: str
    line: int
    section: str
    marker: str = ""
    args: Mapping[str, str] = field(default_factory=dict)


def shell_blocks(markdown: str) -> list[ShellBlock]:
    """Return the page's fenced shell blocks (:data:`SHELL_LANGUAGES`), in page order.

    Fences may be indented (a block inside a list item); the indentation of the opening
    fence is removed from every line of the block. Headings inside any fenced block are
    not headings.
    """
    lines = markdown.splitlines()
    found: list[ShellBlock] = []
    section = ""
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if opening is None:
            heading = _HEADING.match(lines[i])
            if heading is not None:
                section = heading.group(2)
            i += 1
            continue
        indent, fence = opening.group("indent"), opening.group("fence")
        language = opening.group("info").strip().split(" ")[0].strip("{}.")
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            line = lines[j]
            body.append(line[len(indent) :] if line.startswith(indent) else line.lstrip())
            j += 1
        if language in SHELL_LANGUAGES:
            marker = _MARKER.match(lines[i - 1]) if i > 0 else None
            found.append(
                ShellBlock(
                    text="\n".join(body) + "\n",
                    line=i + 1,
                    section=section,
                    marker=marker.group("kind") if marker else "",
                    args=dict(_ARG.findall(marker.group("args"))) if marker else {},
                )
            )
        i = j + 1
    return found


class ShellBlockError(RuntimeError):
    """A block failed (a command exited non-zero) or did not finish in time."""


# The session's shell: waits for block files 0001.sh, 0002.sh, ... in its folder and
# sources each (echoed first, as a terminal shows what was typed), then marks it done.
_DRIVER = r"""
set -eo pipefail
i=1
while :; do
  block=$(printf '%s/%04d.sh' "$KPO_DOC_BLOCKS" "$i")
  while [ ! -e "$block" ]; do sleep 0.1; done
  sed 's/^/$ /' "$block"
  source "$block"
  : > "$block.done"
  i=$((i + 1))
done
"""


class ShellSession:
    """One ``bash`` in ``cwd`` that runs blocks in order, as a reader's terminal does.

    Args:
        workdir: folder for the block files and ``shell.log`` (the session's output).
        cwd: the shell's working directory.
        env: variables set in the shell, on top of this process's environment (e.g. the
            page's placeholders, ``PATH``).
    """

    def __init__(self, workdir: Path, cwd: Path, env: Mapping[str, str]) -> None:
        self.blocks_dir = workdir / "blocks"
        self.log_path = workdir / "shell.log"
        self.count = 0
        self.process = ManagedProcess(
            "shell",
            ["bash", "--noprofile", "--norc", "-c", _DRIVER],
            self.log_path,
            env={**env, "KPO_DOC_BLOCKS": str(self.blocks_dir)},
            cwd=cwd,
        )

    def start(self) -> ShellSession:
        """Start the shell."""
        self.blocks_dir.mkdir(parents=True, exist_ok=True)
        self.process.start()
        return self

    def run(self, text: str, timeout_s: float = 300) -> str:
        """Run one block in the shell; return what it printed.

        Raises:
            ShellBlockError: a command failed (the shell has then exited) or the block was
                not done within ``timeout_s`` seconds; the message has the output.
        """
        self.count += 1
        offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        self._write(self.count, text)
        self._wait(self.count, timeout_s, offset)
        return self._output(offset)

    def _write(self, number: int, text: str) -> None:
        path = self.blocks_dir / f"{number:04d}.sh"
        partial = path.with_suffix(".partial")
        partial.write_text(text)
        partial.rename(path)

    def _wait(self, number: int, timeout_s: float, offset: int = 0) -> None:
        done = self.blocks_dir / f"{number:04d}.sh.done"

        def finished() -> bool | None:
            if done.exists():
                return True
            if not self.process.is_running():
                raise ShellBlockError(
                    f"block {number} failed: the shell exited with code "
                    f"{self.process.returncode}; its output:\n{self._output(offset)}"
                )
            return None

        def late() -> ShellBlockError:
            return ShellBlockError(
                f"block {number} not done after {timeout_s:.0f} s; its output so far:\n"
                f"{self._output(offset)}"
            )

        wait_until(finished, timeout_s, late, interval_s=0.2)

    def _output(self, offset: int) -> str:
        try:
            with self.log_path.open("rb") as log:
                log.seek(offset)
                return log.read().decode(errors="replace")
        except FileNotFoundError:
            return ""

    def stop(self) -> None:
        """Stop the shell and whatever it still runs (its background jobs included)."""
        self.process.stop(timeout_s=30)


def start_in_terminal(
    name: str, text: str, log_path: Path, cwd: Path, env: Mapping[str, str]
) -> ManagedProcess:
    """Start a block as in a terminal of its own: ``bash -c <block>``, output to a file.

    ``env`` is added to this process's environment, as :class:`ShellSession` does.

    Returns:
        The running process (its own process group; stop it with :func:`interrupt`).
    """
    argv = ["bash", "--noprofile", "--norc", "-c", text]
    process = ManagedProcess(name, argv, log_path, env=env, cwd=cwd)
    process.start()
    return process


def wait_for_output(process: ManagedProcess, text: str, timeout_s: float) -> None:
    """Wait until ``text`` appears in the process's log, as a reader waits for a line.

    Raises:
        ShellBlockError: the process exited first or ``text`` did not appear in time.
    """

    def seen() -> bool | None:
        if text in process.log_tail(10_000):
            return True
        if not process.is_running():
            raise ShellBlockError(
                f"{process.name} exited with code {process.returncode} before "
                f"printing {text!r}:\n{process.log_tail(60)}"
            )
        return None

    def late() -> ShellBlockError:
        return ShellBlockError(
            f"{process.name} did not print {text!r} within {timeout_s:.0f} s:\n"
            f"{process.log_tail(60)}"
        )

    wait_until(seen, timeout_s, late, interval_s=0.3)


def interrupt(process: ManagedProcess, timeout_s: float = 90) -> int:
    """Press Ctrl-C in the process's terminal (SIGINT to its group); return its exit code.

    Raises:
        ShellBlockError: it did not exit within ``timeout_s`` seconds (it is then killed).
    """
    if process.pid is not None and process.is_running():
        os.killpg(process.pid, signal.SIGINT)

    def exited() -> int | None:
        return process.returncode

    def late() -> ShellBlockError:
        process.stop(timeout_s=5)
        return ShellBlockError(f"{process.name} still running {timeout_s:.0f} s after Ctrl-C")

    code = wait_until(exited, timeout_s, late, interval_s=0.2)
    process.stop(timeout_s=5)  # its log closed, its group cleared
    return code
