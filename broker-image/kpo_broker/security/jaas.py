"""Parsing ``sasl.jaas.config`` values (Kafka's ``JaasConfig``).

A value is one or more entries ``<LoginModuleClass> <flag> [key="value" ...];``, the
flag being ``required``, ``requisite``, ``sufficient`` or ``optional``, option values
quoted (``"..."`` with backslash escapes) or bare tokens.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["JaasEntry", "JaasError", "parse_jaas_config"]

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"

_FLAGS = {"required", "requisite", "sufficient", "optional"}
_TOKEN = re.compile(
    r'\s*(?:(?P<semi>;)|(?P<eq>=)|"(?P<quoted>(?:[^"\\]|\\.)*)"|(?P<word>[^\s=;"]+))'
)


class JaasError(ValueError):
    """A ``sasl.jaas.config`` value that Kafka's JaasConfig would refuse."""


@dataclass(frozen=True)
class JaasEntry:
    """One login module entry.

    Attributes:
        login_module: the class name, e.g. :data:`PLAIN_LOGIN_MODULE`.
        flag: ``required``...
        options: option name -> value.
    """

    login_module: str
    flag: str
    options: dict[str, str]


def _tokens(value: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    position = 0
    while position < len(value):
        if not value[position:].strip():
            break
        match = _TOKEN.match(value, position)
        if match is None:
            raise JaasError("unterminated quoted value")
        position = match.end()
        kind = match.lastgroup or ""
        text = match.group(kind)
        if kind == "quoted":
            text = re.sub(r"\\(.)", r"\1", text)
        out.append((kind, text))
    return out


def parse_jaas_config(value: str) -> list[JaasEntry]:
    """Parse a ``sasl.jaas.config`` value.

    Raises:
        JaasError: empty, missing ``;``, unknown flag, malformed option (never
            quoting the value, which may hold a password).
    """
    tokens = _tokens(value)
    entries: list[JaasEntry] = []
    i = 0
    while i < len(tokens):
        if tokens[i][0] != "word" or i + 1 >= len(tokens) or tokens[i + 1][0] != "word":
            raise JaasError("expected '<LoginModule> <flag>'")
        module, flag = tokens[i][1], tokens[i + 1][1]
        if flag.lower() not in _FLAGS:
            raise JaasError(f"invalid control flag {flag!r} for {module}")
        i += 2
        options: dict[str, str] = {}
        while True:
            if i >= len(tokens):
                raise JaasError(f"login module {module} is not terminated by ';'")
            if tokens[i][0] == "semi":
                i += 1
                break
            if (
                tokens[i][0] != "word"
                or i + 2 >= len(tokens)
                or tokens[i + 1][0] != "eq"
                or tokens[i + 2][0] not in ("word", "quoted")
            ):
                raise JaasError(f"malformed option in the entry of {module}")
            options[tokens[i][1]] = tokens[i + 2][1]
            i += 3
        entries.append(JaasEntry(module, flag.lower(), options))
    if not entries:
        raise JaasError("no login module")
    return entries
