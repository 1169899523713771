"""The engine is composed, not inherited: each concept is an object of its own
module that owns its state and is handed what it needs (engine/engine.py's
design note); the chores are handed their parts by their supervisor.

Read from the source (ast), so a concept that starts inheriting another's
state, or a chore that starts reaching through the engine, fails here.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
ENGINE = REPO / "coordinator" / "engine"
CHORES = REPO / "coordinator" / "chores"


def _base_names(node: ast.ClassDef) -> list[str]:
    names = []
    for base in node.bases:
        target = base.value if isinstance(base, ast.Subscript) else base
        if isinstance(target, ast.Name):
            names.append(target.id)
        elif isinstance(target, ast.Attribute):
            names.append(target.attr)
    return names


def _classes(path: Path) -> list[ast.ClassDef]:
    tree = ast.parse(path.read_text())
    return [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]


# Value shapes other modules may build on: ``ScopeBook`` (concurrency_limits.py)
# is the book of scoped limits that concurrency and rate limits share; it holds
# no engine state.
SHARED_SHAPES = {"ScopeBook"}


def test_no_engine_concept_inherits_another_module_s_class() -> None:
    defined = {
        path.name: {c.name for c in _classes(path)} - SHARED_SHAPES for path in ENGINE.glob("*.py")
    }
    inherited = {}
    for path in sorted(ENGINE.glob("*.py")):
        others = set().union(*(names for name, names in defined.items() if name != path.name))
        for cls in _classes(path):
            wrong = [b for b in _base_names(cls) if b in others]
            if wrong:
                inherited[f"{path.name}:{cls.name}"] = wrong
    assert inherited == {}, f"compose concepts instead of inheriting them: {inherited}"


def test_the_engine_class_has_no_base() -> None:
    [engine] = [c for c in _classes(ENGINE / "engine.py") if c.name == "Engine"]
    assert engine.bases == []


def reaches_through_an_engine(source: str) -> list[str]:
    """Attribute chains that reach a part through an engine object
    (``engine.store``, ``self._engine.dispatcher.sessions``, ``engine.ops.x``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Attribute):
            continue
        owner = node.value
        is_engine = (isinstance(owner, ast.Name) and owner.id == "engine") or (
            isinstance(owner, ast.Attribute) and owner.attr == "_engine"
        )
        if is_engine:
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_the_reach_check_finds_both_spellings() -> None:
    assert reaches_through_an_engine("engine.store.job_get(1)")
    assert reaches_through_an_engine("self._engine.dispatcher.sessions")
    assert reaches_through_an_engine("self._store.job_get(1)") == []


def test_chores_and_concepts_are_handed_their_parts() -> None:
    """Only the supervisor (chores/__init__.py) and the engine itself take
    parts out of an engine; engine/explain.py's two entry points hand the
    caller's engine to its ``JobExplainer``, and engine/scaling.py's ``figures``
    (the KEDA servicer's read) still takes the engine."""
    allowed = {
        "coordinator/chores/__init__.py",
        "coordinator/engine/engine.py",
        "coordinator/engine/scaling.py",
    }
    explain_entry = {"engine.explainer"}
    reaching = {}
    for path in sorted([*ENGINE.glob("*.py"), *CHORES.glob("*.py")]):
        rel = path.relative_to(REPO).as_posix()
        if rel in allowed:
            continue
        found = [
            f
            for f in reaches_through_an_engine(path.read_text())
            if f.split(": ", 1)[1] not in explain_entry
        ]
        if found:
            reaching[rel] = found
    assert reaching == {}, f"hand the part to the object that uses it: {reaching}"
