"""Fail when any two modules of a package import each other, directly or round a loop.

    python tools/check_cycles.py [PACKAGE]      (default: sweeper; `make lint` runs it)

import-linter's contracts (pyproject.toml) keep the layers of docs/architecture.md in
order, but none of its contract types says "no cycle anywhere": `acyclic_siblings` only
compares siblings, so a module importing its own package's `__init__` (which imports
it back) passes. This script reads the same import graph (grimp, import-linter's graph
library) module by module and reports every strongly connected component with more
than one module, or a module importing itself, with one loop through it and the line
of each import. Imports inside functions and under TYPE_CHECKING count: a lazy or
type-only import still ties the two modules together.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from collections.abc import Iterable, Mapping

import grimp


def edges_of(graph: grimp.ImportGraph) -> dict[str, set[str]]:
    """Module -> the modules of the package it imports."""
    return {module: graph.find_modules_directly_imported_by(module) for module in graph.modules}


def cycles(edges: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components that form a cycle (Tarjan, iterative so a deep
    package cannot hit the recursion limit), each sorted, in sorted order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work: list[tuple[str, Iterable[str]]] = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in edges.get(node, ()):
                    found.append(sorted(component))
    return sorted(found)


def loop_through(component: list[str], edges: Mapping[str, set[str]]) -> list[str]:
    """One shortest loop from the component's first module back to itself (breadth-first
    inside the component), as the list of modules visited."""
    start, members = component[0], set(component)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(edges.get(node, ())):
                if child == start:
                    return [*paths[node], start]
                if child in members and child not in paths:
                    paths[child] = [*paths[node], child]
                    following.append(child)
        frontier = following
    return [start, start]  # unreachable for a real component; keeps the type simple


def describe(graph: grimp.ImportGraph, loop: list[str]) -> list[str]:
    """Each import of the loop with its line numbers (as grimp records them)."""
    lines = []
    for importer, imported in itertools.pairwise(loop):
        details = graph.get_import_details(importer=importer, imported=imported)
        where = ", ".join(f"l.{d['line_number']}" for d in details)
        lines.append(f"  {importer} -> {imported} ({where})")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("package", nargs="?", default="sweeper")
    package = parser.parse_args(argv).package
    graph = grimp.build_graph(package, cache_dir=None)  # no cache: the graph is small
    edges = edges_of(graph)
    found = cycles(edges)
    if not found:
        print(f"No import cycles in {package} ({len(edges)} modules).")
        return 0
    print(f"{len(found)} import cycle(s) in {package}:")
    for component in found:
        print(f"- {len(component)} modules: {', '.join(component)}")
        print("\n".join(describe(graph, loop_through(component, edges))))
    return 1


if __name__ == "__main__":
    sys.exit(main())
