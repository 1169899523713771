"""A test that defines its scenario as a nested function must run it: a
scenario defined and never called makes a test that passes asserting nothing."""

from __future__ import annotations

import ast

from wfj_testing import REPO


def _unused_nested_functions(source: str) -> list[tuple[int, str, str]]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        if not node.name.startswith("test"):
            continue
        for inner in node.body:
            # A decorated function is registered by its decorator (a handler, a route).
            if (
                not isinstance(inner, ast.FunctionDef | ast.AsyncFunctionDef)
                or inner.decorator_list
            ):
                continue
            used = any(
                isinstance(n, ast.Name) and n.id == inner.name and isinstance(n.ctx, ast.Load)
                for n in ast.walk(node)
            )
            if not used:
                found.append((node.lineno, node.name, inner.name))
    return found


def test_the_check_finds_a_scenario_that_is_never_run() -> None:
    source = "def test_x():\n    async def scenario():\n        assert False\n"
    assert _unused_nested_functions(source) == [(1, "test_x", "scenario")]
    assert _unused_nested_functions(source + "    run(scenario)\n") == []


def test_every_nested_scenario_is_run() -> None:
    unused = [
        f"{path.relative_to(REPO)}:{line} {test} never calls {inner}"
        for path in sorted((REPO / "tests").rglob("test_*.py"))
        for line, test, inner in _unused_nested_functions(path.read_text())
    ]
    assert not unused, unused
