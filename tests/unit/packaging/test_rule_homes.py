"""Rules decided once: each has one home module, and nothing else spells it.

Read from the source (ast), so a second spelling fails here before it drifts.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]

# -- tenant scope: coordinator/tenancy.py ----------------------------------------------

TENANCY_HOME = "coordinator/tenancy.py"
# The store renders a scope as SQL for acquisition's candidate read; the same rule,
# inside the statement (coordinator/tenancy.py's design note says so).
TENANCY_SQL = {"coordinator/store/leases.py"}
_SCOPE_NAME = re.compile(r"(^|_)tenants$|^scope$")
# ``Exclusions.tenants`` holds the tenants acquisition leaves out (full limits),
# not a credential's scope; these names hold an ``Exclusions``.
_EXCLUSIONS = {"ex", "exclude", "exclusions", "out"}


def _name(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def _is_none(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _is_scope(node: ast.AST) -> bool:
    if isinstance(node, ast.Attribute) and _name(node.value) in _EXCLUSIONS:
        return False
    return bool(_SCOPE_NAME.search(_name(node)))


def tenant_scope_decisions(source: str) -> list[str]:
    """Expressions in ``source`` that decide on a tenant scope themselves.

    A scope is a value named ``tenants``, ``*_tenants`` or ``scope``; deciding
    on it is a membership test (``t in scope``), a test for "every tenant"
    (``scope is None``) or a count (``len(scope)``). Turning one representation
    into another (``None if s.tenants is None else sorted(s.tenants)``) is not
    a decision and passes.
    """
    tree = ast.parse(source)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found = []
    for node in ast.walk(tree):
        decides = False
        if isinstance(node, ast.Compare):
            for op, right in zip(node.ops, node.comparators, strict=True):
                if isinstance(op, ast.In | ast.NotIn) and _is_scope(right):
                    decides = True
                if isinstance(op, ast.Is | ast.IsNot) and _is_none(right) and _is_scope(node.left):
                    parent = parents.get(node)
                    conversion = (
                        isinstance(parent, ast.IfExp)
                        and parent.test is node
                        and (_is_none(parent.body) or _is_none(parent.orelse))
                    )
                    decides = decides or not conversion
        elif isinstance(node, ast.Call) and _name(node.func) == "len" and node.args:
            decides = _is_scope(node.args[0])
        if decides:
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_the_tenant_scope_check_finds_every_spelling() -> None:
    spellings = [
        "ok = principal.tenants is None or tenant in principal.tenants",
        "bad = tenant not in scope",
        "if session.tenants is not None:\n    pass",
        "one = len(principal.tenants) == 1",
        "names = w.id if visible_tenants is not None else w.name",
    ]
    for spelling in spellings:
        assert tenant_scope_decisions(spelling), spelling
    conversions = [
        "names = None if s.tenants is None else sorted(s.tenants)",
        "exclusions.tenants.add(value)",
        "skip = tenant_id in ex.tenants",
        "ok = tenancy.allows(session.tenants, job.tenant_id)",
    ]
    for conversion in conversions:
        assert tenant_scope_decisions(conversion) == [], conversion


def test_no_tenant_scope_decision_outside_its_module() -> None:
    assert (REPO / TENANCY_HOME).exists()
    elsewhere = {}
    for path in sorted((REPO / "coordinator").rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        if rel == TENANCY_HOME or rel in TENANCY_SQL:
            continue
        found = tenant_scope_decisions(path.read_text())
        if found:
            elsewhere[rel] = found
    assert elsewhere == {}, f"tenant scope decided outside {TENANCY_HOME}: {elsewhere}"


# -- the poisoned-row set-aside of an ended attempt: Attempts.in_store -----------------

SET_ASIDE_HOME = "coordinator/engine/attempts.py"


def set_aside_spellings(source: str) -> list[str]:
    """Calls that collect set-aside rows themselves: ``book.collector()``, or a
    store query handed a ``set_aside=`` callback directly (handing on the book
    itself, ``set_aside=self.set_aside``, is wiring and passes)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        callback = any(
            k.arg == "set_aside" and _name(k.value) != "set_aside" for k in node.keywords
        )
        if _name(node.func) == "collector" or callback:
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_the_set_aside_check_finds_both_spellings() -> None:
    assert set_aside_spellings("refused, collect = engine.set_aside.collector()")
    assert set_aside_spellings("store.job_complete_many(done, now, set_aside=collect)")
    assert set_aside_spellings("await attempts.in_store('x', now, store.job_complete_many)") == []
    assert set_aside_spellings("Attempts(store=store, set_aside=self.set_aside)") == []


def test_every_store_call_ending_attempts_goes_through_in_store() -> None:
    elsewhere = {}
    for path in sorted((REPO / "coordinator").rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        if rel == SET_ASIDE_HOME or rel.startswith("coordinator/store/"):
            continue
        found = set_aside_spellings(path.read_text())
        if found:
            elsewhere[rel] = found
    assert elsewhere == {}, f"set-aside collected outside {SET_ASIDE_HOME}: {elsewhere}"


# -- drain: Operations holds it; the dispatcher's switch is for acquisition alone ------

DRAIN_HOME = "coordinator/engine/operations.py"
# The dispatcher's passes and direct dispatch at insert: acquisition itself.
DRAIN_SWITCH_READERS = {"coordinator/engine/dispatch.py", "coordinator/engine/enqueue.py"}


def test_drain_is_read_from_operations_everywhere_else() -> None:
    elsewhere = {}
    for path in sorted((REPO / "coordinator").rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        if rel == DRAIN_HOME or rel in DRAIN_SWITCH_READERS:
            continue
        found = [
            f"line {node.lineno}"
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Attribute) and node.attr == "leasing"
        ]
        if found:
            elsewhere[rel] = found
    assert elsewhere == {}, f"read Operations.draining instead of Dispatcher.leasing: {elsewhere}"


# -- rebuilding a gRPC method handler: coordinator/api/handlers.py ------------------

HANDLERS_HOME = "coordinator/api/handlers.py"


def test_interceptors_rebuild_handlers_through_rewrap_alone() -> None:
    elsewhere = {}
    for path in sorted((REPO / "coordinator").rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        if rel == HANDLERS_HOME:
            continue
        found = [
            f"line {node.lineno}: {_name(node.func)}"
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Call) and _name(node.func).endswith("_rpc_method_handler")
        ]
        if found:
            elsewhere[rel] = found
    assert elsewhere == {}, f"use rewrap ({HANDLERS_HOME}): {elsewhere}"


# -- what follows a job's end (the ordering key's next job, the group's completion):
# coordinator/store/job_end.py ------------------------------------------------------

JOB_END_HOME = "coordinator/store/job_end.py"
# Releasing a key's next held job, and completing the groups whose members ended.
JOB_END_STEPS = {"release_next", "groups_after_end"}


def job_end_steps(source: str) -> list[str]:
    """Calls in ``source`` of a step that only follows a job's end."""
    return [
        f"line {node.lineno}: {ast.unparse(node)}"
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call) and _name(node.func) in JOB_END_STEPS
    ]


def test_the_job_end_check_finds_both_steps() -> None:
    assert job_end_steps("due = release_next(conn, self.is_postgres, keys)")
    assert job_end_steps("self._groups.groups_after_end(conn, {group_id}, now)")
    assert job_end_steps("self._jobs_ended(conn, Ended.of(rows), now, bump=True)") == []


def test_a_keys_next_job_and_a_groups_completion_follow_only_the_job_end() -> None:
    assert (REPO / JOB_END_HOME).exists()
    elsewhere = {}
    for path in sorted((REPO / "coordinator").rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        if rel == JOB_END_HOME:
            continue
        found = job_end_steps(path.read_text())
        if found:
            elsewhere[rel] = found
    assert elsewhere == {}, f"call JobEnd.jobs_ended ({JOB_END_HOME}) instead: {elsewhere}"


# -- engine -> store calls are typed: forwarding takes ParamSpec, never *args: Any ----

TYPED_FORWARDING = ("coordinator/engine", "coordinator/chores")


def untyped_forwarding(source: str) -> list[str]:
    """Functions in ``source`` that forward a call's arguments untyped
    (``*args: Any``), so mypy cannot check them against the callee."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.args.vararg:
            annotation = node.args.vararg.annotation
            untyped = annotation is None or ast.unparse(annotation) == "Any"
            name = node.args.vararg.arg
            # Arguments taken and dropped (a no-op hook) forward nothing.
            forwards = any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(node))
            if untyped and forwards:
                found.append(f"line {node.lineno}: {node.name}")
    return found


def test_the_forwarding_check_finds_untyped_arguments() -> None:
    assert untyped_forwarding(
        "async def run(fn: Callable[..., T], *args: Any) -> T:\n    return fn(*args)"
    )
    assert untyped_forwarding("def run(fn, *args):\n    return fn(*args)")
    assert untyped_forwarding("def _ignore(*_: Any) -> None:\n    return None") == []
    typed = "async def run(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T: ..."
    assert untyped_forwarding(typed) == []


def test_engine_and_chores_forward_store_calls_typed() -> None:
    elsewhere = {}
    for folder in TYPED_FORWARDING:
        for path in sorted((REPO / folder).rglob("*.py")):
            found = untyped_forwarding(path.read_text())
            if found:
                elsewhere[path.relative_to(REPO).as_posix()] = found
    assert elsewhere == {}, f"type forwarded arguments with ParamSpec: {elsewhere}"
