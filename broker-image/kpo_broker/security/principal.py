"""Principals: ``User:<name>`` from a client certificate's DN or a SASL authorization id.

Kafka's ``DefaultKafkaPrincipalBuilder``: PLAINTEXT connections are
``User:ANONYMOUS``; SASL connections ``User:<authorization id>``; TLS connections
``User:<mapped DN>``, the certificate subject formatted as RFC 2253 (Java's
``X500Principal.getName()``, most specific attribute first) and mapped by
``ssl.principal.mapping.rules`` (Kafka's ``SslPrincipalMapper``); a TLS client without
a certificate is ``User:ANONYMOUS``.

Rules are a comma-separated list of ``DEFAULT`` (the DN as is) and
``RULE:<pattern>/<replacement>/[L|U]`` (Java regex syntax; ``$n`` back references;
``L``/``U`` lower- or upper-case the result); the first rule whose pattern matches the
whole DN gives the name; no match is an error (the connection is closed).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cryptography import x509

__all__ = [
    "ANONYMOUS",
    "KafkaPrincipal",
    "NoMatchingRuleError",
    "SslPrincipalMapper",
    "distinguished_name",
]


@dataclass(frozen=True)
class KafkaPrincipal:
    """Kafka's ``KafkaPrincipal``: a type (``User``) and a name."""

    principal_type: str
    name: str

    def __str__(self) -> str:
        """``User:alice``, as Kafka prints principals (and ACLs name them)."""
        return f"{self.principal_type}:{self.name}"


#: Kafka's ``KafkaPrincipal.ANONYMOUS``.
ANONYMOUS = KafkaPrincipal("User", "ANONYMOUS")

_RULE = r"(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(?:,\s*|$)")
_PARSER = re.compile(_RULE)
_BACK_REFERENCE = re.compile(r"\$(\d+)")


class NoMatchingRuleError(Exception):
    """No ``ssl.principal.mapping.rules`` rule matches a DN (Kafka's ``NoMatchingRule``)."""


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str] | None
    replacement: str
    lower: bool
    upper: bool

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        result = self.pattern.sub(_python_replacement(self.replacement, self.pattern.groups), dn)
        if self.lower:
            return result.lower()
        if self.upper:
            return result.upper()
        return result


def _python_replacement(replacement: str, groups: int) -> str:
    r"""Translate a Java ``replaceAll`` replacement (``$n``, ``\\x``) for ``re.sub``.

    A back reference to a group that does not exist is shortened digit by digit, then
    kept literally (Kafka's ``escapeLiteralBackReferences``).
    """
    out: list[str] = []
    i = 0
    while i < len(replacement):
        char = replacement[i]
        if char == "\\" and i + 1 < len(replacement):
            out.append(replacement[i + 1].replace("\\", "\\\\"))
            i += 2
            continue
        match = _BACK_REFERENCE.match(replacement, i)
        if match is not None:
            digits = match.group(1)
            index = int(digits)
            while index > groups and index >= 10:
                index //= 10
            if index > groups and not digits.startswith("0"):
                out.append("$" + digits)
            else:
                used = str(index)
                out.append(f"\\g<{index}>" + digits[len(used) :])
            i = match.end()
            continue
        out.append("\\\\" if char == "\\" else char)
        i += 1
    return "".join(out)


class SslPrincipalMapper:
    """Maps certificate DNs to principal names by ``ssl.principal.mapping.rules``.

    Args:
        rules: the property value; ``DEFAULT`` when unset.

    Raises:
        ValueError: a rule that Kafka's parser refuses, or a pattern that is not a regex.
    """

    def __init__(self, rules: str = "DEFAULT") -> None:
        self.rules: list[_Rule] = []
        for text in (m.group(1) for m in _SPLITTER.finditer(rules.strip())):
            match = _PARSER.match(text)
            if match is None or match.end() != len(text):
                raise ValueError(f"Invalid rule: {text}")
            if match.group(1) is not None:
                self.rules.append(_Rule(None, "", False, False))
            elif match.group(2) is not None:
                try:
                    pattern = re.compile(match.group(2))
                except re.error as exc:
                    raise ValueError(f"Invalid rule: {text}: {exc}") from None
                flag = match.group(4)
                self.rules.append(_Rule(pattern, match.group(3), flag == "L", flag == "U"))

    def name(self, dn: str) -> str:
        """Return the principal name of ``dn``.

        Raises:
            NoMatchingRuleError: no rule applies.
        """
        for rule in self.rules:
            result = rule.apply(dn)
            if result is not None:
                return result
        raise NoMatchingRuleError(f"No rules apply to {dn}")


def distinguished_name(der_certificate: bytes) -> str:
    """Return the subject of a DER certificate as an RFC 2253 string (``CN=alice,O=kpo``).

    Raises:
        ValueError: the bytes are not a certificate.
    """
    return x509.load_der_x509_certificate(der_certificate).subject.rfc4514_string()
