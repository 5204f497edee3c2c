"""Figures of magnetar's module structure: modules, lines, import edges, cycles, back edges.

Run from the repository root: ``.venv/bin/python scripts/structure.py`` (``--json`` for a machine-readable
copy). The restructure (issue 28) quotes its before and after figures from this one command.

- An import edge is one importer module -> one imported magnetar module (all of the importer's statements
  naming it count as one edge). Its kind is ``top`` if any of those statements runs at import time,
  ``local`` if they all sit inside a function, ``typing`` if they all sit under ``if TYPE_CHECKING:``.
- A cycle is a strongly connected component of more than one module over every edge (``local`` and
  ``typing`` included: a deferred import hides a cycle, it does not remove it).
- Back edges are what grimp's ``nominate_cycle_breakers`` names, summed over every package: the imports to
  remove so that no package's children import each other in a cycle (import-linter's ``acyclic_siblings``).
"""

from __future__ import annotations

import ast
import json
import sys
from collections import defaultdict
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "magnetar"
GENERATED = ("_pb2.py", "_pb2.pyi")


def module_path(module: str) -> Path:
    path = ROOT / Path(*module.split("."))
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def deferred_lines(source: str) -> tuple[set[int], set[int]]:
    """The line numbers of import statements inside a function, and under ``if TYPE_CHECKING:``."""
    tree = ast.parse(source)
    local: set[int] = set()
    typing_: set[int] = set()

    def visit(node: ast.AST, in_function: bool, in_typing: bool) -> None:
        for child in ast.iter_child_nodes(node):
            fn = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            ty = in_typing
            if isinstance(child, ast.If):
                test = child.test
                name = test.id if isinstance(test, ast.Name) else test.attr if isinstance(test, ast.Attribute) else ""
                if name == "TYPE_CHECKING":
                    for stmt in child.body:
                        visit_stmt(stmt, fn, True)
                    for stmt in child.orelse:
                        visit_stmt(stmt, fn, in_typing)
                    continue
            visit_stmt(child, fn, ty)

    def visit_stmt(stmt: ast.AST, in_function: bool, in_typing: bool) -> None:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            for line in range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1):
                if in_typing:
                    typing_.add(line)
                elif in_function:
                    local.add(line)
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            visit(stmt, True, in_typing)
        else:
            visit(stmt, in_function, in_typing)

    visit(tree, False, False)
    return local, typing_


def edge_kinds(graph: grimp.ImportGraph, statements: dict[str, int]) -> dict[tuple[str, str], str]:
    """Each edge's kind; ``statements`` counts the import statements naming a magnetar module, by kind."""
    kinds: dict[tuple[str, str], str] = {}
    for importer in sorted(graph.modules):
        path = module_path(importer)
        if not path.exists() or path.name.endswith(GENERATED):
            continue
        local, typing_ = deferred_lines(path.read_text())
        for imported in graph.find_modules_directly_imported_by(importer):
            details = graph.get_import_details(importer=importer, imported=imported)
            lines = {d["line_number"] for d in details}
            for n in lines:
                statements["typing" if n in typing_ else "local" if n in local else "top"] += 1
            if any(n not in local and n not in typing_ for n in lines):
                kinds[(importer, imported)] = "top"
            elif all(n in typing_ for n in lines):
                kinds[(importer, imported)] = "typing"
            else:
                kinds[(importer, imported)] = "local"
    return kinds


def strongly_connected(nodes: set[str], edges: set[tuple[str, str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative (the graph has hundreds of modules)."""
    out: dict[str, list[str]] = defaultdict(list)
    for a, b in edges:
        out[a].append(b)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = 0
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(sorted(out[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(out[child]))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
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
                if len(component) > 1:
                    components.append(sorted(component))
    return sorted(components, key=lambda c: (-len(c), c))


def measure() -> dict[str, object]:
    graph = grimp.build_graph(PACKAGE, exclude_type_checking_imports=False)
    modules = {m for m in graph.modules if module_path(m).exists() and not module_path(m).name.endswith(GENERATED)}
    lines = {m: len(module_path(m).read_text().splitlines()) for m in modules}
    statements = {"top": 0, "local": 0, "typing": 0}
    kinds = {e: k for e, k in edge_kinds(graph, statements).items() if e[0] in modules and e[1] in modules}
    all_edges = set(kinds)
    top_edges = {e for e, k in kinds.items() if k == "top"}
    cycles = strongly_connected(modules, all_edges)
    member_of = {m: i for i, c in enumerate(cycles) for m in c}
    hiding = [e for e, k in kinds.items() if k != "top" and e[0] in member_of
              and member_of.get(e[1]) == member_of[e[0]]]
    packages = sorted(m for m in modules if module_path(m).name == "__init__.py")
    breakers: dict[str, list[tuple[str, str]]] = {}
    for package in packages:
        found = graph.nominate_cycle_breakers(package)
        if found:
            breakers[package] = sorted(found)
    largest = sorted(lines.items(), key=lambda kv: (-kv[1], kv[0]))
    return {
        "modules": len(modules),
        "packages": len(packages),
        "root_modules": sorted(m for m in modules if m.count(".") == 1 and m not in packages),
        "lines": sum(lines.values()),
        "modules_over_500_lines": [m for m, n in largest if n > 500],
        "modules_over_600_lines": [m for m, n in largest if n > 600],
        "largest": largest[:10],
        "edges": len(all_edges),
        "edges_by_kind": {k: sum(1 for v in kinds.values() if v == k) for k in ("top", "local", "typing")},
        "import_statements_by_kind": statements,
        "cycles": cycles,
        "cycles_top_level_only": strongly_connected(modules, top_edges),
        "deferred_edges_in_cycles": {k: sum(1 for e in hiding if kinds[e] == k) for k in ("local", "typing")},
        "back_edges": sum(len(v) for v in breakers.values()),
        "back_edges_by_package": {p: [f"{a} -> {b}" for a, b in v] for p, v in breakers.items()},
    }


def main() -> None:
    figures = measure()
    if "--json" in sys.argv:
        print(json.dumps(figures, indent=1))
        return
    cycles = figures["cycles"]
    assert isinstance(cycles, list)
    print(f"modules                {figures['modules']} ({figures['packages']} packages), {figures['lines']} lines")
    print(f"modules at magnetar/   {len(figures['root_modules'])}: {' '.join(figures['root_modules'])}")  # type: ignore[arg-type]
    print(f"over 500 / 600 lines   {len(figures['modules_over_500_lines'])} / {len(figures['modules_over_600_lines'])}")  # type: ignore[arg-type]
    print("largest                " + ", ".join(f"{m} {n}" for m, n in figures["largest"]))  # type: ignore[attr-defined]
    print(f"import edges           {figures['edges']} {figures['edges_by_kind']}")
    print(f"import statements      {figures['import_statements_by_kind']}")
    print(f"cycles (all edges)     {len(cycles)}, modules in them {sum(len(c) for c in cycles)}, "
          f"largest {len(cycles[0]) if cycles else 0}")
    print(f"cycles (top-level)     {len(figures['cycles_top_level_only'])}")  # type: ignore[arg-type]
    print(f"deferred edges in cycles {figures['deferred_edges_in_cycles']}")
    print(f"back edges             {figures['back_edges']} in {len(figures['back_edges_by_package'])} packages")  # type: ignore[arg-type]
    for cycle in cycles:
        print("  cycle: " + " ".join(m.removeprefix("magnetar.") for m in cycle))
    for package, edges in figures["back_edges_by_package"].items():  # type: ignore[attr-defined]
        print(f"  back edges in {package}: " + "; ".join(e.replace("magnetar.", "") for e in edges))


if __name__ == "__main__":
    main()
