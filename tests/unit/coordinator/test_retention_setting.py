"""The retention setting: parsing, the serve flag and environment variable."""

from __future__ import annotations

import subprocess
import sys

import pytest

from coordinator.__main__ import _chores_config, _parser
from coordinator.chores.retention import DEFAULT_KEEP_S, parse_retention
from coordinator.model import JobStatus
from coordinator.settings import Settings
from wfj_testing import REPO, subprocess_env

DAY = 86_400.0


def test_parse_retention() -> None:
    every = dict.fromkeys((JobStatus.COMPLETED, JobStatus.FAULTED, JobStatus.CANCELLED), 7 * DAY)
    assert parse_retention("") == every
    assert parse_retention("7d") == every
    assert parse_retention("12h") == dict.fromkeys(every, 12 * 3600.0)
    assert parse_retention("off") == dict.fromkeys(every, None)
    assert parse_retention("completed=1d, faulted=forever") == {
        JobStatus.COMPLETED: DAY,
        JobStatus.FAULTED: None,
        JobStatus.CANCELLED: 7 * DAY,  # not named: the default
    }
    assert parse_retention("CANCELLED=90m")[JobStatus.CANCELLED] == 90 * 60.0
    with pytest.raises(ValueError, match="'7' is not a duration; use a positive number"):
        parse_retention("7")
    with pytest.raises(ValueError, match="'0d' is not a duration"):
        parse_retention("completed=0d")
    with pytest.raises(ValueError, match=r"'running=1d': expected STATUS=DURATION"):
        parse_retention("running=1d")


def test_retention_reaches_the_chores_from_flag_and_environment(monkeypatch) -> None:
    assert Settings().retention == "7d"
    config = _chores_config(Settings()).retention
    assert config.keep_s[JobStatus.FAULTED] == DEFAULT_KEEP_S == 7 * DAY
    monkeypatch.setenv("WFJOBS_RETENTION", "completed=2d")
    defaults = Settings.from_env()
    assert defaults.retention == "completed=2d"
    args = _parser(defaults).parse_args(["serve"])
    assert args.retention == "completed=2d"
    args = _parser(defaults).parse_args(["serve", "--retention", "faulted=forever"])
    keep = _chores_config(Settings(retention=args.retention)).retention.keep_s
    assert keep[JobStatus.FAULTED] is None and keep[JobStatus.COMPLETED] == 7 * DAY


def test_serve_refuses_a_malformed_retention() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "coordinator", "serve", "--retention", "completed=soon"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        env=subprocess_env(),
    )
    assert out.returncode == 5
    assert "retention of completed: 'soon' is not a duration" in out.stderr
