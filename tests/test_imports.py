"""Imports point down the layer table of docs/architecture.md, and no module imports itself round a circle.

The table is read from the doc (the rows between the `layers:begin` / `layers:end` markers), so the doc and the
code cannot drift apart: a new upward import fails here unless the doc's "known breaches" list names it, and a
breach that is gone must leave that list too. Every import counts, the lazy ones inside functions as well: a lazy
import that dodges a circle is still a circle.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"


def _doc_section(begin: str, end: str) -> list[str]:
    text = DOC.read_text(encoding="utf-8")
    start, stop = text.index(f"<!-- {begin} -->"), text.index(f"<!-- {end} -->")
    return text[start:stop].splitlines()[1:]


def layer_table() -> tuple[dict[str, str], dict[str, set[str]]]:
    """(module prefix -> layer, layer -> layers it may import) from the doc's table."""
    owner: dict[str, str] = {}
    may: dict[str, set[str]] = {}
    for line in _doc_section("layers:begin", "layers:end"):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 4 or cells[0] in ("layer", "") or set(cells[0]) <= {"-"}:
            continue
        layer = cells[0]
        for prefix in re.findall(r"`([\w.]+)`", cells[1]):
            owner[prefix] = layer
        may[layer] = {x.strip() for x in cells[3].split(",") if x.strip() and x.strip() != "-"}
    return owner, may


def known_breaches() -> set[tuple[str, str]]:
    """(importing module, imported module) pairs the doc lists as breaches still to remove."""
    pairs = set()
    for line in _doc_section("breaches:begin", "breaches:end"):
        match = re.match(r"\s*-\s*`([\w.]+)`\s*->\s*`([\w.]+)`", line)
        if match:
            pairs.add((match.group(1), match.group(2)))
    return pairs


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[0] in ("kernels", "search_spaces"):
        parts = ["autotune", *parts]
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def source_files() -> list[Path]:
    files = [*ROOT.joinpath("autotune").rglob("*.py"), *ROOT.joinpath("kernels").rglob("*.py")]
    return sorted(f for f in files if "__pycache__" not in f.parts)


def imports_of(path: Path, modules: set[str]) -> set[str]:
    """The project modules `path` imports (resolving `from pkg import module` to the module)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [
                f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module for a in node.names
            ]
        else:
            continue
        for name in names:
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name.startswith("autotune"):
                found.add(name)
    return found


def import_graph() -> dict[str, set[str]]:
    files = source_files()
    modules = {module_name(f) for f in files}
    return {module_name(f): imports_of(f, modules) - {module_name(f)} for f in files}


def layer_of(module: str, owner: dict[str, str]) -> str | None:
    best = max((p for p in owner if module == p or module.startswith(p + ".")), key=len, default=None)
    return owner[best] if best else None


def test_every_module_has_a_layer():
    owner, _ = layer_table()
    missing = sorted(m for m in import_graph() if layer_of(m, owner) is None)
    assert not missing, f"modules in no layer of docs/architecture.md: {missing}"


def test_imports_point_down_the_layer_table():
    owner, may = layer_table()
    allowed_breaches = known_breaches()
    upward = []
    for module, targets in import_graph().items():
        mine = layer_of(module, owner)
        for target in targets:
            theirs = layer_of(target, owner)
            if theirs in (mine, None, "root") or theirs in may[mine]:
                continue
            if (module, target) not in allowed_breaches:
                upward.append(f"{module} ({mine}) -> {target} ({theirs})")
    assert not upward, "imports up the layer table (docs/architecture.md):\n" + "\n".join(sorted(upward))


def test_listed_breaches_still_exist():
    graph = import_graph()
    stale = sorted(pair for pair in known_breaches() if pair[1] not in graph.get(pair[0], set()))
    assert not stale, f"docs/architecture.md lists breaches the code no longer has (delete them): {stale}"


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in graph:
                    continue
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_circle_beyond_the_known_ones():
    graph = import_graph()
    allowed = known_breaches()
    # an edge the doc lists as a known breach is taken out before looking for circles
    pruned = {m: {t for t in targets if (m, t) not in allowed} for m, targets in graph.items()}
    circles = cycles(pruned)
    assert not circles, "import circles (docs/architecture.md lists the known ones):\n" + "\n".join(
        " <-> ".join(c) for c in circles
    )


@pytest.mark.parametrize(
    "graph, expected",
    [
        ({"a": {"b"}, "b": {"a"}}, [["a", "b"]]),
        ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
    ],
)
def test_cycle_finder_finds_circles(graph, expected):
    assert cycles(graph) == expected
