"""A test that needs a tool skips only when the tool is absent and CI is not
set; under ``CI=true`` a missing tool is a failure, never a silent skip."""

from __future__ import annotations

import re

import pytest

from wfj_testing import REPO, require_module

ABSENT = "wfjobs_no_such_module"


def test_a_missing_module_skips_outside_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="not installed"):
        require_module(ABSENT, f"{ABSENT} is not installed")


@pytest.mark.parametrize("value", ["true", "1", "yes"])
def test_a_missing_module_fails_under_ci(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("CI", value)
    with pytest.raises(pytest.fail.Exception, match="CI=true requires it"):
        require_module(ABSENT, f"{ABSENT} is not installed")


def test_a_present_module_is_returned() -> None:
    assert require_module("json", "json").dumps([]) == "[]"


def test_no_test_skips_on_a_missing_module_regardless_of_ci() -> None:
    """``pytest.importorskip`` (and a ``skipif`` on ``find_spec``) skip under
    CI too: tests go through ``require_module`` instead."""
    offenders = []
    for path in sorted((REPO / "tests").rglob("*.py")):
        text = path.read_text()
        for pattern in (r"pytest\.importorskip\(", r"skipif\(\s*importlib\.util\.find_spec"):
            if re.search(pattern, text):
                offenders.append(f"{path.relative_to(REPO)}: {pattern}")
    assert not offenders, offenders
