"""No import cycles among the project's modules.

The import graph is grimp's (the library behind import-linter, whose contracts in
``pyproject.toml`` keep the packages in their layers). Imports made under
``if TYPE_CHECKING:`` are left out: they never run, and they are how an annotation names a
type from a module that imports this one. Imports inside functions count: deferring an
import hides a cycle, it does not remove it.
"""

from __future__ import annotations

import grimp
import pytest

PACKAGES = ("kpo_kafka", "kpo_broker", "kpo_operator", "kpo_placement", "kpo_devenv", "kpo_bench")


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph(*PACKAGES, exclude_type_checking_imports=True, cache_dir=None)


def import_cycles(graph: grimp.ImportGraph) -> list[tuple[str, ...]]:
    """One shortest cycle through each module that is part of a cycle, deduplicated."""
    cycles: set[tuple[str, ...]] = set()
    for module in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            if imported == module or not graph.chain_exists(importer=imported, imported=module):
                continue
            chain = graph.find_shortest_chain(importer=imported, imported=module)
            assert chain is not None
            cycle = (module, *chain)
            start = cycle.index(min(cycle[:-1]))
            cycles.add((*cycle[start:-1], *cycle[:start], cycle[start]))
    return sorted(cycles)


def test_the_graph_covers_every_package(graph: grimp.ImportGraph) -> None:
    for package in PACKAGES:
        assert len(graph.find_children(package)) > 1, package


def test_no_import_cycle_among_modules(graph: grimp.ImportGraph) -> None:
    cycles = import_cycles(graph)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_a_cycle_is_found() -> None:
    graph = grimp.ImportGraph()
    for importer, imported in [("p.a", "p.b"), ("p.b", "p.c"), ("p.c", "p.a"), ("p.c", "p.d")]:
        graph.add_import(importer=importer, imported=imported)
    assert import_cycles(graph) == [("p.a", "p.b", "p.c", "p.a")]


def test_type_checking_imports_are_left_out(graph: grimp.ImportGraph) -> None:
    # auth_helper names RequestContext in annotations only, under TYPE_CHECKING.
    assert not graph.direct_import_exists(
        importer="kpo_broker.server.auth_helper",
        imported="kpo_broker.server.request_context",
    )
