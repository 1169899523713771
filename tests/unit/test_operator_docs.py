"""The operator's pages say what the code does: docs/troubleshooting.md's "A job
stays pending" lists every reason ExplainJob gives, by the name ``wfjobs jobs
explain`` prints (``not_due``, ``leased``, ...); docs/groups.md's ``wfjobs``
commands (``groups create`` among them) parse as written."""

from __future__ import annotations

import ast
import re
import shlex

from wfj_testing import REPO
from worker_sdk.cli import build_parser
from workflowjobs.v1 import admin_service_pb2

PAGE = REPO / "docs" / "troubleshooting.md"
EXPLAIN = REPO / "coordinator" / "engine" / "explain.py"


def _kinds_explain_gives() -> set[str]:
    """The first argument of every ``WaitReason(...)`` that explain.py builds."""
    kinds = set()
    for node in ast.walk(ast.parse(EXPLAIN.read_text())):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "WaitReason"
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            kinds.add(str(node.args[0].value))
    return kinds


def _listed() -> set[str]:
    section = PAGE.read_text().split("## A job stays pending", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^- `([a-z_]+)`:", section, re.M))


def test_explain_gives_only_kinds_of_the_contract() -> None:
    contract = {
        name.removeprefix("KIND_")
        for name in admin_service_pb2.WaitReason.Kind.keys()
        if name != "KIND_UNSPECIFIED"
    }
    given = _kinds_explain_gives()
    assert len(given) >= 10  # the parse found the calls
    assert given <= contract


def test_the_page_lists_every_reason_explain_gives() -> None:
    wanted = {kind.lower() for kind in _kinds_explain_gives()}
    assert sorted(wanted - _listed()) == []
    assert sorted(_listed() - wanted) == []  # and no reason it never gives


def test_the_groups_page_s_commands_parse_and_create_is_among_them() -> None:
    page = (REPO / "docs" / "groups.md").read_text()
    commands = re.findall(r"`(wfjobs [^`]+)`", page)
    assert any(c.startswith("wfjobs groups create ") for c in commands)
    for command in commands:
        # [OPTIONAL] parts are given; the placeholders stand for any value (N for a number).
        words = shlex.split(command.replace("[", "").replace("]", ""))[1:]
        build_parser().parse_args(["10" if w == "N" else w for w in words])
