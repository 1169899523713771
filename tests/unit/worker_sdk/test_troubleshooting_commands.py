"""Every ``wfjobs`` command docs/troubleshooting.md suggests parses with the CLI
as written (placeholders filled in), so the page cannot drift from the flags."""

from __future__ import annotations

import re
import shlex

import pytest

from wfj_testing import REPO
from worker_sdk.cli import build_parser

PAGE = REPO / "docs" / "troubleshooting.md"
PLACEHOLDERS = {"JOB_ID": "01a23411-81a9-7000-9bd5-1493db2d675b", "TYPE": "noop"}


def _suggested() -> list[str]:
    commands = sorted(set(re.findall(r"`(wfjobs [^`]+)`", PAGE.read_text())))
    # "wfjobs unpause …" names a family, not one command.
    return [c for c in commands if "…" not in c and c != "wfjobs --help"]


def test_the_page_suggests_commands() -> None:
    assert len(_suggested()) >= 5


@pytest.mark.parametrize("command", _suggested())
def test_a_suggested_command_parses(command: str) -> None:
    words = [PLACEHOLDERS.get(w, w) for w in shlex.split(command)[1:]]
    build_parser().parse_args(words)  # argparse exits (SystemExit) on a flag it does not know
