"""``docs/reference/cli.md``: the help of every command-line tool, from their parsers.

The typer applications are rendered through their own click command tree
(:func:`typer.main.get_command`) with plain (not rich) help, and the argparse one with
argparse's formatter, both at a fixed width so that the page does not depend on the
terminal. Defaults that are paths inside the repository are shown relative to it.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer
from tools.docgen.common import ROOT, header
from typer.main import get_command

PAGE = "docs/reference/cli.md"
WIDTH = 100


@dataclass(frozen=True)
class Tool:
    """One command-line tool.

    Attributes:
        command: how it is run.
        source: the module defining it.
    """

    command: str
    source: str


KPO_REASSIGN = Tool(
    "kpo-reassign",
    "operator/kpo_operator/cli.py",
)
KPO_DEVENV = Tool(
    "kpo-devenv",
    "devenv/kpo_devenv/cli.py",
)
PLACEMENT = Tool(
    "python -m kpo_placement",
    "placement/kpo_placement/cli.py",
)
BENCH = Tool(
    "python -m kpo_bench",
    "bench/kpo_bench/cli.py",
)
TOOLS = (KPO_REASSIGN, KPO_DEVENV, PLACEMENT, BENCH)


def _relative(value: Any) -> Any:
    """Return a path default inside the repository as a relative path; others unchanged."""
    if isinstance(value, Path | str) and str(value).startswith(str(ROOT) + "/"):
        return type(value)(Path(str(value)).relative_to(ROOT))
    return value


def typer_help(app: typer.Typer, name: str) -> Iterator[tuple[str, str]]:
    """Yield (command line, help text) of ``app`` and of each of its subcommands."""
    yield from _command_help(get_command(app), name, None)


def _command_help(command: Any, name: str, parent: Any) -> Iterator[tuple[str, str]]:
    command.rich_markup_mode = None
    for param in command.params:
        param.default = _relative(param.default)
    context = command.context_class(
        command, info_name=name, parent=parent, terminal_width=WIDTH, max_content_width=WIDTH
    )
    yield context.command_path, command.get_help(context)
    if hasattr(command, "list_commands"):
        for sub in command.list_commands(context):
            yield from _command_help(command.get_command(context, sub), sub, context)


def argparse_help(parser: argparse.ArgumentParser) -> str:
    """Return an argparse parser's help at :data:`WIDTH` columns."""
    parser.formatter_class = _formatter
    return parser.format_help()


def _formatter(prog: str) -> argparse.HelpFormatter:
    return argparse.RawDescriptionHelpFormatter(prog, width=WIDTH)


def _helps(tool: Tool) -> list[tuple[str, str]]:
    if tool is KPO_REASSIGN:
        from kpo_operator.cli import app as reassign

        return list(typer_help(reassign, tool.command))
    if tool is KPO_DEVENV:
        from kpo_devenv.cli import app as devenv

        return list(typer_help(devenv, tool.command))
    if tool is PLACEMENT:
        from kpo_placement.cli import app as placement

        return list(typer_help(placement, tool.command))
    from kpo_bench.cli import build_parser

    return [(tool.command, argparse_help(build_parser()))]


def generate() -> str:
    """Return the page."""
    text = header(
        "Command-line tools",
        [t.source for t in TOOLS],
        "The help of each command-line tool, as `--help` prints it.",
    )
    for tool in TOOLS:
        text += f"## {tool.command}\n\n"
        for command_line, help_text in _helps(tool):
            if command_line != tool.command:
                text += f"### {command_line}\n\n"
            lines = [line.rstrip() for line in help_text.strip("\n").splitlines()]
            text += "```text\n" + "\n".join(lines) + "\n```\n\n"
    return text.rstrip("\n") + "\n"
