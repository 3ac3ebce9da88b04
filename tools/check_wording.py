"""Fail when docs, code, comments or test names speak of the work instead of the product.

The repository describes what the product does and why. References to the work that
produced it belong in the tracker and the commit history, not in the tree: issue numbers
(``issue 17``, ``(issue 16, part 3)``), bare ``#NN`` references, "the issue's bar", dates of
work, "this session", "since the stalls were fixed". Upstream facts stay allowed: Kafka
Improvement Proposals (``KIP-98``), Kafka JIRA ids (``KAFKA-1234``), an upstream repository's
issue (``confluentinc/librdkafka#5301``), ``PKCS#8``, dates in sample data.

Every file ``git ls-files`` lists is scanned as text (binary files are skipped), except the
recorded bench results (``bench/results/``, whose dates are data) and this checker and its
test, which quote the patterns. Each hit is printed as ``path:line: what: text``; the exit
status is 1 when there is any.

Usage: ``python tools/check_wording.py [PATH ...]`` (default: every tracked file).
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: Paths (prefixes of repository-relative paths) never scanned.
SKIPPED = (
    "bench/results/",
    "tools/check_wording.py",
    "tests/unit/test_check_wording.py",
)

_MONTH = (
    r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?"
    r"|Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)"
)
_YEAR = r"20\d\d"
_ISO_DATE = rf"{_YEAR}-[01]\d-[0-3]\d"

#: Nouns after which ``#N`` numbers a product thing (``broker #2``), not a tracker entry.
_NUMBERED_THINGS = (
    "broker",
    "node",
    "replica",
    "partition",
    "segment",
    "batch",
    "record",
    "member",
    "attempt",
    "run",
    "round",
    "wave",
    "step",
    "fault",
    "no.",
)

#: (what, pattern) pairs; a line matching any pattern is a hit.
PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    # "issue 17", "Issue 16:", "(issue 13, part 3)", "issues 13 and 14", "issue #5"
    ("issue number", re.compile(r"\bissues?\s+#?\d+", re.IGNORECASE)),
    # "the bar", "the benchmark issue", "as the issue asks"
    (
        "reference to an issue",
        re.compile(r"\b(?:the|this|that)\s+(?:\w+\s+)?issue(?:'s|\s+asks|\s+says)\b", re.I),
    ),
    ("reference to an issue", re.compile(r"\bthe\s+benchmark\s+issue\b", re.IGNORECASE)),
    # a test named after an issue: test_targets_are_the_issue_s, test_issue_17_...
    (
        "test named after an issue",
        re.compile(r"\bdef\s+test_\w*(?:the_issue|issue_?\d)", re.IGNORECASE),
    ),
    # "before #17", "fixes #12"; not PKCS#8, owner/repo#123, &#38;, url#1, "broker #2"
    (
        "#NN reference",
        re.compile(
            r"(?<![\w/&.#-])"
            r"(?<!" + r")(?<!".join(re.escape(f"{n} ") for n in _NUMBERED_THINGS) + r")"
            r"#\d+\b(?![\w-])",
            re.IGNORECASE,
        ),
    ),
    ("pull request or branch", re.compile(r"\b(?:this|the)\s+(?:PR|pull\s+request|branch)\b")),
    ("pull request or branch", re.compile(r"\b(?:PR|[Pp]ull\s+[Rr]equest)\s*#?\d+\b")),
    # "in this session", "an earlier session's", "previous sessions"
    (
        "work session",
        re.compile(
            r"\b(?:in|during|from|of|since)\s+(?:this|the\s+(?:previous|last)|an?\s+"
            r"(?:earlier|previous))\s+(?:work\s+)?session\b"
            r"|\b(?:earlier|previous|past)\s+(?:work\s+)?sessions\b",
            re.IGNORECASE,
        ),
    ),
    # "since the ~30 s stalls were fixed", "before the fix", "after this change"
    ("before/after story", re.compile(r"\b(?:was|were|got|been)\s+fixed\b", re.IGNORECASE)),
    (
        "before/after story",
        re.compile(
            r"\b(?:before|after|since|until)\s+(?:the|this|that)\s+"
            r"(?:fix|rewrite|refactor(?:ing)?|commit)\b"
            r"|\b(?:before|after|since|until)\s+this\s+change\b",
            re.IGNORECASE,
        ),
    ),
    # dates of work: "on 2026-11-26", "(2026-11-26)", "26 Nov 2026", "November 2026"
    (
        "date of work",
        re.compile(
            rf"(?:\b(?:on|as\s+of|since|until|measured|run|ran|dated?)\s+|\(){_ISO_DATE}\b"
            rf"|\b[0-3]?\d\s+{_MONTH}\.?,?\s+{_YEAR}\b"
            rf"|\b{_MONTH}\.?\s+[0-3]?\d(?:st|nd|rd|th)?,?\s+{_YEAR}\b"
            rf"|\b(?:in|since|as\s+of|until|during)\s+{_MONTH}\s+{_YEAR}\b",
        ),
    ),
)


@dataclass(frozen=True)
class Hit:
    """One line that speaks of the work.

    Attributes:
        path: the file, relative to the repository.
        line: 1-based line number.
        what: which kind of wording matched.
        text: the line, stripped.
    """

    path: str
    line: int
    what: str
    text: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.what}: {self.text}"


def line_hits(text: str) -> list[str]:
    """Return what each pattern matching ``text`` (one line) names, in pattern order."""
    found: list[str] = []
    for what, pattern in PATTERNS:
        if pattern.search(text) and what not in found:
            found.append(what)
    return found


def scan_text(path: str, content: str) -> Iterator[Hit]:
    """Yield the hits of a file's ``content``."""
    for number, line in enumerate(content.splitlines(), start=1):
        for what in line_hits(line):
            yield Hit(path, number, what, line.strip())


def tracked_files(root: Path = ROOT) -> list[str]:
    """Return the files git tracks under ``root``, relative to it, minus :data:`SKIPPED`."""
    out = subprocess.run(
        ["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True
    ).stdout
    names = [n for n in out.decode().split("\0") if n]
    return [n for n in names if not n.startswith(SKIPPED)]


def scan_files(paths: Iterable[str], root: Path = ROOT) -> Iterator[Hit]:
    """Yield the hits of each text file in ``paths`` (relative to ``root``)."""
    for name in paths:
        try:
            data = (root / name).read_bytes()
        except (FileNotFoundError, IsADirectoryError):
            continue  # deleted in the work tree, or a submodule
        if b"\0" in data:
            continue
        try:
            content = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        yield from scan_text(name, content)


def main(argv: Sequence[str] | None = None) -> int:
    """Print every hit; return 1 when there is any, else 0."""
    args = list(sys.argv[1:] if argv is None else argv)
    paths = [a for a in args if not a.startswith(SKIPPED)] if args else tracked_files(ROOT)
    hits = list(scan_files(paths, ROOT))
    for hit in hits:
        print(hit)
    if hits:
        print(
            f"{len(hits)} line(s) speak of the work, not the product: say what the product "
            "does and why, without issue numbers, dates or the story of the change",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
