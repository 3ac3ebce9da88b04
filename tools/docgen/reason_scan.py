"""Find every reason the operator writes into a condition or an Event, by reading its source.

The operator has no single list of reasons: they are string constants and literals passed
where a reason goes. This module parses ``operator/kpo_operator`` (:mod:`ast`) and collects
each string that reaches a parameter or field named ``reason`` (of a function, method or
dataclass of the operator): a literal, a module constant or an enum member (of the operator
or of ``kpo_kafka``), a conditional expression of them, a local variable assigned one of
them, or the return values of an operator function called there. Module constants
documented ``"Reason..."`` count too, as do the phases (:class:`kpo_kafka.states.Phase`),
every one of which is the reason of a PartitionReassignment's conditions.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tools.docgen.common import ROOT

from kpo_kafka.states import ConditionType, Phase

#: The operator's package.
PACKAGE = ROOT / "operator" / "kpo_operator"
#: The package the operator shares with the other components (its status vocabulary).
SHARED = ROOT / "kafka-client" / "kpo_kafka"

_REASON = re.compile(r"^[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)*$")
#: Calls that record an Event (their ``reason`` is an Event's, not a condition's).
_EVENT_CALLS = frozenset({"event"})
#: Calls whose ``reason`` parameter does not hold a reason of a condition or an Event.
_NOT_REASONS = frozenset({"ValidationIssue", "Verdict"})


@dataclass(frozen=True)
class Use:
    """One place a reason is used.

    Attributes:
        module: the operator module, e.g. ``quota.py``.
        line: the line of the use (0 for a documented constant).
        condition: the condition type when a ``Condition`` is built there, else ``""``.
        event: whether the use records an Event.
    """

    module: str
    line: int
    condition: str
    event: bool


class _Source:
    """The parsed operator modules, their string constants and their ``reason`` parameters."""

    def __init__(self, package: Path) -> None:
        self.modules = {
            p.relative_to(package).as_posix(): ast.parse(p.read_text())
            for p in sorted(package.rglob("*.py"))
        }
        self.constants: dict[str, str] = {}
        self.documented: dict[str, str] = {}
        self.params: dict[str, int] = {}
        self.functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        for name, tree in self.modules.items():
            self._scan_module(name, tree)
        for path in sorted(SHARED.glob("*.py")):  # enums the operator uses, e.g. the states
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ClassDef):
                    self._scan_class_constants(node)

    def _scan_module(self, module: str, tree: ast.Module) -> None:
        for index, statement in enumerate(tree.body):
            if (
                isinstance(statement, ast.Assign)
                and len(statement.targets) == 1
                and isinstance(statement.targets[0], ast.Name)
                and isinstance(statement.value, ast.Constant)
                and isinstance(statement.value.value, str)
            ):
                self.constants[statement.targets[0].id] = statement.value.value
                after = tree.body[index + 1] if index + 1 < len(tree.body) else None
                if (
                    isinstance(after, ast.Expr)
                    and isinstance(after.value, ast.Constant)
                    and str(after.value.value).startswith("Reason")
                ):
                    self.documented[statement.value.value] = module
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                self.functions.setdefault(node.name, node)
                names = [a.arg for a in node.args.args]
                if names and names[0] in ("self", "cls"):
                    names = names[1:]
                if "reason" in names:
                    self.params[node.name] = names.index("reason")
            elif isinstance(node, ast.ClassDef):
                self._scan_class_constants(node)
                fields = [
                    s.target.id
                    for s in node.body
                    if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
                ]
                if "reason" in fields:
                    self.params[node.name] = fields.index("reason")

    def _scan_class_constants(self, node: ast.ClassDef) -> None:
        """Record ``Class.NAME`` -> value of a class's string constants (enum members)."""
        for statement in node.body:
            if (
                isinstance(statement, ast.Assign)
                and len(statement.targets) == 1
                and isinstance(statement.targets[0], ast.Name)
                and isinstance(statement.value, ast.Constant)
                and isinstance(statement.value.value, str)
            ):
                self.constants[f"{node.name}.{statement.targets[0].id}"] = statement.value.value

    def values(self, expr: ast.AST, scope: ast.AST | None, depth: int = 0) -> Iterator[str]:
        """Yield the strings ``expr`` can evaluate to, as far as the source shows."""
        if depth > 8:
            return
        if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
            yield expr.value
        elif isinstance(expr, ast.Attribute):
            inner = expr.value if expr.attr == "value" else expr
            if isinstance(inner, ast.Attribute) and isinstance(inner.value, ast.Name):
                key = f"{inner.value.id}.{inner.attr}"
                if key in self.constants:
                    yield self.constants[key]
        elif isinstance(expr, ast.IfExp):
            yield from self.values(expr.body, scope, depth + 1)
            yield from self.values(expr.orelse, scope, depth + 1)
        elif isinstance(expr, ast.Tuple | ast.List | ast.Set):
            for item in expr.elts:
                yield from self.values(item, scope, depth + 1)
        elif isinstance(expr, ast.Name):
            if expr.id in self.constants:
                yield self.constants[expr.id]
            elif scope is not None:
                for node in ast.walk(scope):
                    if (
                        isinstance(node, ast.Assign)
                        and any(isinstance(t, ast.Name) and t.id == expr.id for t in node.targets)
                    ) or (isinstance(node, ast.NamedExpr) and node.target.id == expr.id):
                        yield from self.values(node.value, scope, depth + 1)
        elif isinstance(expr, ast.Call):
            name = _callee(expr)
            function = self.functions.get(name) if name else None
            if function is not None:
                for node in ast.walk(function):
                    if isinstance(node, ast.Return) and node.value is not None:
                        yield from self.values(node.value, function, depth + 1)
            else:  # a builtin such as next(...): whatever its arguments can give
                for argument in expr.args:
                    yield from self.values(argument, scope, depth + 1)
        elif isinstance(expr, ast.GeneratorExp | ast.ListComp | ast.SetComp):
            for generator in expr.generators:  # the values the loop variable takes
                yield from self.values(generator.iter, scope, depth + 1)

    def condition_type(self, call: ast.Call, scope: ast.AST) -> str:
        """Return the condition type of a ``Condition(...)`` call, when the source says."""
        if _callee(call) != "Condition" or not call.args:
            return ""
        first = call.args[0]
        if (
            isinstance(first, ast.Attribute)
            and isinstance(first.value, ast.Name)
            and first.value.id == "ConditionType"
        ):
            return str(ConditionType[first.attr])
        found = sorted(set(self.values(first, scope)))
        return found[0] if len(found) == 1 else ""


def _callee(call: ast.Call) -> str | None:
    if isinstance(call.func, ast.Name):
        return call.func.id
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    return None


def scan(package: Path = PACKAGE) -> dict[str, list[Use]]:
    """Return every reason of the operator -> where it is used, sorted by reason."""
    source = _Source(package)
    found: dict[str, set[Use]] = {}
    for module, tree in source.modules.items():
        for scope in ast.walk(tree):
            if not isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for call in ast.walk(scope):
                if not isinstance(call, ast.Call):
                    continue
                name = _callee(call)
                if name not in source.params or name in _NOT_REASONS:
                    continue
                index = source.params[name]
                given = (
                    [call.args[index]]
                    if index < len(call.args)
                    else [k.value for k in call.keywords if k.arg == "reason"]
                )
                use = Use(
                    module,
                    call.lineno,
                    source.condition_type(call, scope),
                    name in _EVENT_CALLS,
                )
                for expr in given:
                    for value in source.values(expr, scope):
                        if _REASON.match(value):
                            found.setdefault(value, set()).add(use)
    for value, module in source.documented.items():
        found.setdefault(value, set()).add(Use(module, 0, "", False))
    for phase in Phase:
        found.setdefault(phase.value, set()).add(Use("conditions.py", 0, "", False))
    return {
        reason: sorted(uses, key=lambda u: (u.module, u.line))
        for reason, uses in sorted(found.items())
    }
