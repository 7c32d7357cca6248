"""No import cycle between modules of the runtime, the contract and the operator.

A cycle (module a imports b, which imports a, however indirectly and even under TYPE_CHECKING) makes
neither module understandable, or testable, without the other (issue 26). The graph is the one
`lint-imports` checks the layer contracts on (grimp).
"""

from __future__ import annotations

import grimp


def _cycles(graph: grimp.ImportGraph) -> set[frozenset[str]]:
    """The groups of two or more modules that each reach one another through imports."""
    reach = {module: _reachable(graph, module) for module in graph.modules}
    groups = {frozenset({m} | {n for n in reach[m] if m in reach[n]}) for m in graph.modules}
    return {group for group in groups if len(group) > 1}


def _reachable(graph: grimp.ImportGraph, start: str) -> set[str]:
    seen: set[str] = set()
    todo = [start]
    while todo:
        for imported in graph.find_modules_directly_imported_by(todo.pop()):
            if imported not in seen:
                seen.add(imported)
                todo.append(imported)
    return seen


def test_no_import_cycle() -> None:
    graph = grimp.build_graph("sluice", "sluice_contract", "sluice_operator")
    found = _cycles(graph)
    assert found == set(), sorted(sorted(c) for c in found)


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = grimp.ImportGraph()
    for module in ("p", "p.a", "p.b", "p.c"):
        graph.add_module(module)
    graph.add_import(importer="p.a", imported="p.b")
    graph.add_import(importer="p.b", imported="p.a")
    graph.add_import(importer="p.c", imported="p.a")
    assert _cycles(graph) == {frozenset({"p.a", "p.b"})}
