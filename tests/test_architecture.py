"""The package's shape: no import cycles, and surfaces that do not import each other.

The graph is read from the source with ``ast``: top-level and function-level imports
count, imports under ``if TYPE_CHECKING:`` do not (they never run), relative imports
are resolved, and an import of a name resolves to the deepest module it names. A
second graph counts the imports under ``TYPE_CHECKING`` too: the names a module's
types need. On it the ground modules import nothing above them, and the cycles that
remain are pinned by name.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = "toolbound"
SRC = Path(__file__).resolve().parents[1] / "src"

# The surfaces. The top CLI may import the others; nothing imports it.
CLI = "toolbound.cli"
SERVICE = "toolbound.service"
MCP = "toolbound.mcp"
INTEGRATIONS = "toolbound.integrations"
SURFACES = (CLI, SERVICE, MCP)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imported_names(
    tree: ast.AST, module: str, *, is_package: bool, types: bool = False
) -> set[str]:
    """Every dotted name an import in ``tree`` may refer to (module, or module.name).

    With ``types``, the imports under ``if TYPE_CHECKING:`` count as well.
    """
    names: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if not types and isinstance(child, ast.If) and _is_type_checking(child):
                for other in child.orelse:
                    visit(other)
                continue
            if isinstance(child, ast.Import):
                names.update(alias.name for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = module.split(".") if is_package else module.split(".")[:-1]
                    if child.level > 1:
                        base = base[: len(base) - (child.level - 1)]
                    target = ".".join(base + ([child.module] if child.module else []))
                else:
                    target = child.module or ""
                names.add(target)
                names.update(f"{target}.{alias.name}" for alias in child.names)
            visit(child)

    visit(tree)
    return names


def _import_graph(*, types: bool = False) -> dict[str, set[str]]:
    """Module → the package's modules it imports (the package root itself left out).

    With ``types``, the imports only type checkers see count too.
    """
    paths = {_module_name(p): p for p in sorted((SRC / PACKAGE).rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for module, path in paths.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        deps: set[str] = set()
        is_package = path.name == "__init__.py"
        for imported in _imported_names(tree, module, is_package=is_package, types=types):
            name = imported
            while name and name not in paths:
                name = name.rpartition(".")[0]
            if name and name not in {module, PACKAGE}:
                deps.add(name)
        graph[module] = deps
    return graph


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = [start]
    while todo:
        for dep in graph[todo.pop()] - seen:
            seen.add(dep)
            todo.append(dep)
    return seen


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module: each an import cycle."""
    reach = {m: _reachable(graph, m) for m in graph}
    found: list[list[str]] = []
    placed: set[str] = set()
    for module in sorted(graph):
        if module in placed:
            continue
        component = {module} | {other for other in reach[module] if module in reach[other]}
        placed |= component
        if len(component) > 1:
            found.append(sorted(component))
    return found


def _explain(graph: dict[str, set[str]], component: list[str]) -> str:
    """One import path around the component, and each member's imports inside it."""
    members = set(component)
    lines = [f"cycle among {len(component)} modules:"]
    lines += [f"  {m} → {', '.join(sorted(graph[m] & members))}" for m in component]
    return "\n".join(lines)


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _imports_into(
    graph: dict[str, set[str]], importers: str, target: str, *, besides: str = ""
) -> list[str]:
    """The imports from modules under ``importers`` (but not ``besides``) into ``target``."""
    return sorted(
        f"{m} → {d}"
        for m, deps in graph.items()
        if _within(m, importers) and not (besides and _within(m, besides))
        for d in deps
        if _within(d, target)
    )


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return _import_graph()


@pytest.fixture(scope="module")
def type_graph() -> dict[str, set[str]]:
    return _import_graph(types=True)


def test_graph_sees_function_level_imports_and_skips_type_checking(graph):
    """The graph counts an import inside a function and ignores one under TYPE_CHECKING."""
    tree = ast.parse(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from toolbound.cli import main\n"
        "def f():\n    from ..journal import open_journal\n"
        "from . import api\n"
    )
    names = _imported_names(tree, "toolbound.service.core", is_package=False)
    assert "toolbound.journal.open_journal" in names
    assert "toolbound.service.api" in names
    assert not any(n.startswith("toolbound.cli") for n in names)
    assert "toolbound.wiring" in graph
    assert "toolbound.mcp.cli" in graph["toolbound.cli"]


def test_package_has_no_import_cycle(graph):
    """No module of toolbound reaches itself through the imports that run."""
    cycles = _cycles(graph)
    assert not cycles, "\n".join(_explain(graph, c) for c in cycles)


def test_nothing_imports_the_top_cli(graph):
    """The top CLI reaches the other surfaces; no module of toolbound imports it."""
    assert _imports_into(graph, PACKAGE, CLI, besides=CLI) == []


@pytest.mark.parametrize(("importers", "target"), [(SERVICE, MCP), (MCP, SERVICE)])
def test_service_and_mcp_do_not_import_each_other(graph, importers, target):
    """The HTTP service never imports MCP, and MCP never imports the HTTP service."""
    assert _imports_into(graph, importers, target) == []


def test_core_imports_no_surface(graph):
    """Modules outside the CLI, service, MCP and integrations never import a surface."""
    outside = (*SURFACES, INTEGRATIONS)
    core = [m for m in graph if not any(_within(m, s) for s in outside)]
    bad = sorted(
        f"{m} → {d}" for m in core for d in graph[m] if any(_within(d, s) for s in SURFACES)
    )
    assert bad == []


# The ground: the private modules at the package's top level, and the trace. They hold
# the model, outcomes, states and errors every layer names, so they import nothing
# above them, not even for types.
GROUND_ALSO = (f"{PACKAGE}.trace",)

# The cycles of the type graph that remain, each by its modules. Only ever shrinks: a
# change may break a cycle or take modules out of one, never add a cycle or a member.
TYPE_CYCLES = [
    {"toolbound.mcp.telemetry", "toolbound.mcp.upstream"},
    {"toolbound.service.core", "toolbound.service.decisions"},
]


def _ground(graph: dict[str, set[str]]) -> set[str]:
    top = {m for m in graph if m.count(".") == 1 and m.rpartition(".")[2].startswith("_")}
    return top | {m for m in GROUND_ALSO if m in graph}


def test_type_graph_counts_type_checking_imports(graph, type_graph):
    """The type graph holds the runtime graph and the imports under TYPE_CHECKING."""
    tree = ast.parse("if TYPE_CHECKING:\n    from toolbound.cli import main\n")
    names = _imported_names(tree, "toolbound.service.core", is_package=False, types=True)
    assert "toolbound.cli.main" in names
    assert all(graph[m] <= type_graph[m] for m in graph)
    assert "toolbound._errors" in type_graph["toolbound._model"] - graph["toolbound._model"]


def test_ground_imports_nothing_above_it(type_graph):
    """The ground modules import only each other, counting the imports for types."""
    ground = _ground(type_graph)
    assert {"toolbound._model", "toolbound._outcome", "toolbound._state", "toolbound.trace"} <= (
        ground
    )
    upward = sorted(f"{m} → {d}" for m in ground for d in type_graph[m] if d not in ground)
    assert upward == []


def test_ground_has_no_type_import_cycle(type_graph):
    """Inside the ground, too, no module reaches itself through its imports for types."""
    ground = _ground(type_graph)
    within = {m: type_graph[m] & ground for m in ground}
    cycles = _cycles(within)
    assert not cycles, "\n".join(_explain(within, c) for c in cycles)


def test_type_import_cycles_only_shrink(type_graph):
    """No new cycle of type imports, none grows, and the pinned list is what remains."""
    found = [set(c) for c in _cycles(type_graph)]
    grown = [c for c in found if not any(c <= pinned for pinned in TYPE_CYCLES)]
    assert not grown, "\n".join(_explain(type_graph, sorted(c)) for c in grown)
    assert sorted(map(sorted, found)) == sorted(map(sorted, TYPE_CYCLES)), (
        "a pinned cycle shrank or is gone: pin what remains"
    )


MAX_CLASS_LINES = 450
MAX_FUNCTION_LINES = 100
EXAMPLE_PACKS = f"{PACKAGE}.packs"


def _definitions() -> list[tuple[str, str, int]]:
    """(module, qualified name, lines) of every class and function in the package."""
    found: list[tuple[str, str, int]] = []
    for path in sorted((SRC / PACKAGE).rglob("*.py")):
        module = _module_name(path)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                kind = "class" if isinstance(node, ast.ClassDef) else "function"
                found.append((module, f"{kind} {node.name}", lines))
    return found


def test_no_class_is_a_god_object():
    """No class is over 450 lines: a driver delegates to the modules of its stages."""
    big = [(m, n, k) for m, n, k in _definitions() if n.startswith("class") and k > MAX_CLASS_LINES]
    assert big == []


def test_no_function_outside_the_example_packs_is_over_100_lines():
    """Functions stay short enough to read whole; the example packs' tool tables aside."""
    long = [
        (m, n, k)
        for m, n, k in _definitions()
        if n.startswith("function") and k > MAX_FUNCTION_LINES and not _within(m, EXAMPLE_PACKS)
    ]
    assert long == []
