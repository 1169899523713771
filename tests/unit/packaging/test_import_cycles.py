"""No import cycle inside coordinator/, worker_sdk/ or wfjobs_dashboard/, and the
layers point one way: coordinator imports nothing of worker_sdk except through
the dashboard package, which uses the SDK's public names only.

Every import statement counts, at module level, inside functions and under
``TYPE_CHECKING`` alike: a cycle hidden behind a deferred import is still two
modules that need each other.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


def _module_of(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def import_graph(package: str) -> dict[str, set[str]]:
    """Module -> the modules of ``package`` it imports."""
    files = {_module_of(p): p for p in (REPO / package).rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        is_package = path.name == "__init__.py"
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = module.split(".")
                    anchor = anchor if is_package else anchor[:-1]
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    base = ".".join([*anchor, base] if base else anchor)
                # ``from pkg import submodule`` imports the submodule.
                names = [
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in files else base
                    for alias in node.names
                ]
            edges.update(n for n in names if n in files and n != module)
        graph[module] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def imported(package: str) -> dict[str, set[str]]:
    """Module of ``package`` -> every absolute module name it imports (any package)."""
    out: dict[str, set[str]] = {}
    for path in (REPO / package).rglob("*.py"):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names.add(node.module)
                names.update(f"{node.module}.{alias.name}" for alias in node.names)
        out[_module_of(path)] = names
    return out


def _top(name: str) -> str:
    return name.split(".")[0]


def test_the_coordinator_reaches_the_sdk_only_through_the_dashboard_package() -> None:
    for module, names in imported("coordinator").items():
        wrong = sorted(n for n in names if _top(n) == "worker_sdk")
        assert not wrong, f"{module} imports {wrong}"


def test_the_dashboard_uses_the_sdk_s_public_names_and_nothing_of_the_coordinator() -> None:
    for module, names in imported("wfjobs_dashboard").items():
        wrong = sorted(
            n
            for n in names
            if _top(n) == "coordinator"
            or (_top(n) == "worker_sdk" and any(p.startswith("_") for p in n.split(".")[1:2]))
            or n.startswith("worker_sdk.cli")
        )
        assert not wrong, f"{module} imports {wrong}"


def test_the_sdk_reaches_the_dashboard_only_from_its_cli_subcommand() -> None:
    for module, names in imported("worker_sdk").items():
        if any(_top(n) == "wfjobs_dashboard" for n in names):
            # The subcommand's options (its parser) and running it (its command).
            assert module in ("worker_sdk.cli.parsers.tools", "worker_sdk.cli.commands"), module
        assert not any(_top(n) == "coordinator" for n in names), module


@pytest.mark.parametrize("package", ["coordinator", "worker_sdk", "wfjobs_dashboard"])
def test_no_import_cycle(package: str) -> None:
    assert cycles(import_graph(package)) == []


def test_the_engine_imports_no_chore_and_no_api() -> None:
    graph = import_graph("coordinator")
    for module, edges in graph.items():
        if module.startswith("coordinator.engine"):
            wrong = {e for e in edges if e.startswith(("coordinator.chores", "coordinator.api"))}
            assert not wrong, f"{module} imports {sorted(wrong)}"
        if module.startswith("coordinator.store"):
            wrong = {
                e
                for e in edges
                if e.startswith(("coordinator.engine", "coordinator.chores", "coordinator.api"))
            }
            assert not wrong, f"{module} imports {sorted(wrong)}"


def test_the_homes_of_shared_rules_import_no_layer() -> None:
    """coordinator/tenancy.py (tenant scope) is asked by the api and the engine
    alike, and api/handlers.py (re-wrapping a handler) by every interceptor:
    neither may reach into a layer, so every layer can use them."""
    graph = import_graph("coordinator")
    assert graph["coordinator.tenancy"] == set()
    assert graph["coordinator.api.handlers"] == set()


def test_only_the_wiring_imports_the_engine() -> None:
    """The concept modules are handed each other when ``Engine`` is built, so
    none imports ``engine.py``; of the chores only their supervisor, which
    hands them their parts, knows the ``Engine``. (engine/scaling.py's
    ``figures`` is the KEDA servicer's read and still takes the engine.)"""
    graph = import_graph("coordinator")
    allowed = {
        "coordinator.engine",
        "coordinator.chores",
        "coordinator.engine.scaling",
    }
    wrong = {
        module
        for module, edges in graph.items()
        if module.startswith(("coordinator.engine", "coordinator.chores"))
        and module not in allowed
        and edges & {"coordinator.engine.engine", "coordinator.engine"}
    }
    assert wrong == set()
