"""The store is composed, not mixed in: each table family is an object of its
own module over the one core, handed the other families' parts it uses
(store/__init__.py's design note), and ``SqlStore`` answers each query of the
protocol through exactly one family.

Read from the source (ast), so a family that starts inheriting another's
class, or declaring a method another module implements, fails here.
"""

from __future__ import annotations

import ast
from pathlib import Path

from coordinator.store import SqlStore, Store

REPO = Path(__file__).resolve().parents[3]
STORE = REPO / "coordinator" / "store"

# What every family builds on: ``Family`` (base.py) names what it takes from
# the one core; it holds no state of its own.
SHARED_BASES = {"Family"}


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
    return [n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.ClassDef)]


def inherited_across_modules(sources: dict[str, str]) -> dict[str, list[str]]:
    """Classes of ``sources`` (module name -> source) whose bases are classes
    another of the modules defines (``SHARED_BASES`` aside)."""
    trees = {name: ast.parse(source) for name, source in sources.items()}
    defined = {
        name: {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)} - SHARED_BASES
        for name, tree in trees.items()
    }
    found = {}
    for name, tree in trees.items():
        others = set().union(*(d for other, d in defined.items() if other != name))
        for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
            wrong = [b for b in _base_names(cls) if b in others]
            if wrong:
                found[f"{name}:{cls.name}"] = wrong
    return found


def test_the_inheritance_check_finds_a_family_built_on_another() -> None:
    sources = {
        "jobs.py": "class JobQueries(Family):\n    pass\n",
        "groups.py": "class GroupQueries(JobQueries):\n    pass\n",
        "base.py": "class Family:\n    pass\n",
    }
    assert inherited_across_modules(sources) == {"groups.py:GroupQueries": ["JobQueries"]}


def test_no_store_class_inherits_another_store_module_s_class() -> None:
    sources = {path.name: path.read_text() for path in sorted(STORE.glob("*.py"))}
    found = inherited_across_modules(sources)
    assert found == {}, f"compose the store's families instead of inheriting them: {found}"


def test_no_family_declares_a_method_it_does_not_implement() -> None:
    """A class-level annotation of a callable (``_admit_in: AdmitIn``) is how a
    mixin declared what another implemented; a family is handed such a part
    in its constructor instead."""
    declared = {}
    for path in sorted(STORE.glob("*.py")):
        for cls in _classes(path):
            if "Protocol" in _base_names(cls):
                continue
            for node in cls.body:
                if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                    text = ast.unparse(node.annotation)
                    if "Callable" in text or text in {"AdmitIn", "BucketsWrite", "SetAside"}:
                        declared[f"{path.name}:{cls.name}.{node.target.id}"] = text
    assert declared == {}, f"hand the family these parts when it is built: {declared}"


def test_the_store_class_has_no_base_and_answers_each_query_through_one_family() -> None:
    [store_class] = [c for c in _classes(STORE / "__init__.py") if c.name == "SqlStore"]
    assert store_class.bases == []
    queries = {n for n, m in vars(Store).items() if not n.startswith("_") and callable(m)}
    via = {}
    for node in store_class.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            if getattr(node.value.func, "id", "") == "_Via":
                [target] = node.targets
                assert isinstance(target, ast.Name)
                via[target.id] = ast.unparse(node.value.args[1])
    assert set(via) == queries
    # Each delegation names its own query of the family it names.
    assert all(target.endswith(f".{name}") for name, target in via.items())
    assert all(callable(getattr(SqlStore, name)) for name in queries)


def test_the_protocol_and_the_design_doc_name_every_store_module() -> None:
    note = ast.get_docstring(ast.parse((STORE / "protocol.py").read_text())) or ""
    modules = sorted(p.name for p in STORE.glob("*.py") if p.name not in {"__init__.py"})
    unnamed = [m for m in modules if m != "protocol.py" and f"``{m}``" not in note]
    assert unnamed == [], f"store/protocol.py's note does not name {unnamed}"
    families = sorted(
        path.name
        for path in STORE.glob("*.py")
        if any("Family" in _base_names(c) for c in _classes(path))
    )
    [row] = [
        line
        for line in (REPO / "docs" / "design.md").read_text().splitlines()
        if line.startswith("| add a query |")
    ]
    missing = [f for f in families if f"`{f}`" not in row and f"store/{f}`" not in row]
    assert missing == [], f"docs/design.md's 'add a query' does not name {missing}"
